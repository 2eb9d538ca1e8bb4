//! The compile-only path shared by the launcher's cold path and by ahead-of-time bundling: from (kernel,
//! tensor descriptions, arch, options) to the specialized IR, its launch [`Signature`] and the exact
//! [`CacheKey`] the runtime looks the cubin up by — one function ([`plan`]), so keys always agree.
//!
//! The key's parts:
//! - `kernel`: `module_path::name` of the kernel;
//! - `source_hash`: BLAKE3 over the kernel's source hash and the specialized module's bytecode (at the
//!   newest version we write), so any change to the kernel *or* to the DSL's lowering gives a new key;
//! - `specialization`: readable generic values, index type, per-argument layout facts and non-default
//!   hints (e.g. `E=f32 B=1024 | idx=i32 | a:f32 base%16 dims%[1] strides%[u] (`u`: unit stride) | …`);
//! - `arch`, the tileiras version (or [`NO_TOOLCHAIN`] where none is installed; bundles ignore it), and
//!   the fingerprint of the compile options.

use cutile_ir::ScalarType;

use super::error::LaunchError;
use super::libraries::{ResolvedLibraries, TileLibrarySpec, foreign_functions, resolve};
use super::signature::{ParamLayout, Signature};
use crate::cache::{CacheKey, KeyParts, to_hex};
use crate::dsl::{ArgError, Kernel, LayoutFacts, ParamKind, Specialized, TensorMeta};
use crate::toolchain::{CompileRequest, GpuArch, PreviewFeature, Tileiras};

/// The tileiras version recorded in keys made where no tileiras is installed. Bundle lookups ignore the
/// version, so such keys still find AOT cubins.
pub const NO_TOOLCHAIN: &str = "none";

/// Compile options that change a cubin (and so are part of its key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// tileiras `--opt-level` (0–3).
    pub opt_level: u8,
    /// tileiras `--lineinfo`.
    pub line_info: bool,
    /// Tile libraries linked into kernels that call foreign functions (besides the process defaults,
    /// [`add_default_tile_library`](super::add_default_tile_library)).
    pub tile_libraries: Vec<TileLibrarySpec>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            opt_level: 3,
            line_info: false,
            tile_libraries: vec![],
        }
    }
}

impl CompileOptions {
    /// Also link `library` into kernels with foreign calls.
    pub fn tile_library(mut self, library: TileLibrarySpec) -> CompileOptions {
        self.tile_libraries.push(library);
        self
    }

    /// The tileiras request for `arch` (native host ISA, no preview, no libraries).
    pub fn request(&self, arch: GpuArch) -> CompileRequest {
        let mut r = CompileRequest::new(arch);
        r.opt_level = self.opt_level;
        r.line_info = self.line_info;
        r
    }

    /// The options part of the key: tileiras's option arguments except the target.
    pub fn fingerprint(&self, arch: GpuArch) -> Result<String, LaunchError> {
        let args = self
            .request(arch)
            .option_args()
            .map_err(LaunchError::InvalidOptions)?;
        Ok(args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .filter(|a| !a.starts_with("--gpu-name="))
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// `module_path::name`: the kernel part of its keys.
pub fn kernel_identity(kernel: &Kernel) -> String {
    format!("{}::{}", kernel.info.module_path, kernel.info.name)
}

/// Everything needed to look up, compile and launch one specialization.
#[derive(Debug, Clone)]
pub struct Plan {
    pub specialized: Specialized,
    pub signature: Signature,
    pub key: CacheKey,
    pub arch: GpuArch,
    pub options: CompileOptions,
    /// The tile libraries this kernel links (none unless it calls foreign functions).
    pub libraries: ResolvedLibraries,
}

impl Plan {
    /// The entry symbol in the cubin.
    pub fn entry(&self) -> &'static str {
        self.specialized.entry
    }

    /// The tileiras request: the options, plus `--preview=simt -l …` when the kernel calls foreign functions.
    pub fn request(&self) -> CompileRequest {
        let mut r = self.options.request(self.arch);
        if !self.libraries.link.is_empty() {
            r.preview.push(PreviewFeature::Simt);
            r.libraries = self.libraries.link.clone();
        }
        r
    }

    /// Compile with `tileiras` (the cubin the key names, when tileiras's version is the key's).
    pub fn compile(&self, tileiras: &Tileiras) -> Result<Vec<u8>, LaunchError> {
        self.specialized
            .compile(tileiras, &self.request())
            .map(|c| c.bytes)
            .map_err(|source| LaunchError::Compile {
                key: self.key.to_string(),
                source: Box::new(source),
            })
    }
}

/// Specializes `kernel` for `tensors` and computes its launch signature and cache key for `arch`.
/// `scalars` are the element types of the scalar arguments, checked against the declarations when given.
/// `toolchain_version` is the tileiras version that would compile it ([`NO_TOOLCHAIN`] if none).
pub fn plan(
    kernel: &Kernel,
    tensors: &[TensorMeta],
    arch: GpuArch,
    options: &CompileOptions,
    toolchain_version: &str,
) -> Result<Plan, LaunchError> {
    let specialized = kernel.specialize(tensors)?;
    let ranks: Vec<usize> = tensors.iter().map(|m| m.shape.len()).collect();
    let signature = Signature::from_specialized(kernel, &specialized, &ranks)?;
    let source_hash = content_hash(kernel, &specialized)?;
    let specialization = specialization_string(kernel, &specialized, &signature);
    let foreign = foreign_functions(&specialized.module);
    let libraries = if foreign.is_empty() {
        ResolvedLibraries::default()
    } else {
        let l = resolve(&options.tile_libraries)?;
        if l.link.is_empty() {
            return Err(LaunchError::NoTileLibrary {
                kernel: kernel.info.name.to_string(),
                functions: foreign,
            });
        }
        l
    };
    let mut options_fp = options.fingerprint(arch)?;
    if !libraries.link.is_empty() {
        options_fp.push_str(" --preview=simt libraries[");
        options_fp.push_str(&libraries.fingerprint);
        options_fp.push(']');
    }
    let identity = kernel_identity(kernel);
    let key = CacheKey::new(KeyParts {
        kernel: &identity,
        source_hash: &source_hash,
        specialization: &specialization,
        arch: arch.name(),
        tileiras_version: toolchain_version,
        options: &options_fp,
    });
    Ok(Plan {
        specialized,
        signature,
        key,
        arch,
        options: options.clone(),
        libraries,
    })
}

/// [`plan`] + compile with `tileiras`: the key and cubin an AOT bundle stores for this specialization.
pub fn compile_aot(
    kernel: &Kernel,
    tensors: &[TensorMeta],
    arch: GpuArch,
    options: &CompileOptions,
    tileiras: &Tileiras,
) -> Result<(CacheKey, Vec<u8>), LaunchError> {
    let p = plan(
        kernel,
        tensors,
        arch,
        options,
        &tileiras.version().to_string(),
    )?;
    let cubin = p.compile(tileiras)?;
    Ok((p.key, cubin))
}

/// Domain tag of the content hash; bump it when its inputs change meaning.
const CONTENT_DOMAIN: &str = "cutile.launch.content.v1";

/// BLAKE3 over the kernel's source hash and the specialized bytecode.
fn content_hash(kernel: &Kernel, spec: &Specialized) -> Result<String, LaunchError> {
    let newest = *cutile_ir::Version::WRITABLE
        .last()
        .unwrap_or(&cutile_ir::V13_5);
    let bytecode = spec.bytecode(newest)?;
    let mut h = blake3::Hasher::new();
    h.update(CONTENT_DOMAIN.as_bytes());
    h.update(&kernel.info.source_hash.to_le_bytes());
    h.update(&(bytecode.len() as u64).to_le_bytes());
    h.update(&bytecode);
    Ok(to_hex(h.finalize().as_bytes()))
}

fn fmt_divs(divs: impl Iterator<Item = String>) -> String {
    format!("[{}]", divs.collect::<Vec<_>>().join(","))
}

fn fmt_facts(f: &LayoutFacts) -> String {
    let mut s = format!(
        "{} base%{} dims%{} strides%{}",
        f.dtype,
        f.base_div,
        fmt_divs(f.shape_div.iter().map(u64::to_string)),
        fmt_divs(
            f.stride_div
                .iter()
                .map(|d| d.map_or("u".to_string(), |d| d.to_string()))
        ),
    );
    if !f.strides_nonneg {
        s.push_str(" neg");
    }
    s
}

/// The readable specialization part of the key.
fn specialization_string(kernel: &Kernel, spec: &Specialized, sig: &Signature) -> String {
    let generics: Vec<String> = kernel
        .info
        .generics
        .iter()
        .zip(&kernel.generics)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let mut parts = vec![generics.join(" "), format!("idx={}", spec.index_type)];
    let mut facts = spec.facts.iter();
    for p in &sig.params {
        match p {
            ParamLayout::Tensor { name, .. } => {
                let f = facts.next().map(fmt_facts).unwrap_or_default();
                parts.push(format!("{name}:{f}"));
            }
            ParamLayout::Scalar { name, elem, .. } => parts.push(format!("{name}:{elem}")),
        }
    }
    let hints: Vec<String> = kernel
        .hints()
        .by_arch
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(arch, d)| {
            let kv: Vec<String> = d.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{arch}{{{}}}", kv.join(","))
        })
        .collect();
    if !hints.is_empty() {
        parts.push(format!("hints {}", hints.join(" ")));
    }
    parts.join(" | ")
}

/// Checks scalar arguments' element types against the signature (tensors were checked by specialization).
pub(crate) fn check_scalars(
    kernel: &Kernel,
    sig: &Signature,
    scalars: &[ScalarType],
) -> Result<(), LaunchError> {
    let declared = sig.params.iter().filter_map(|p| match p {
        ParamLayout::Scalar { name, elem, .. } => Some((*name, *elem)),
        ParamLayout::Tensor { .. } => None,
    });
    for ((name, declared), &actual) in declared.zip(scalars) {
        if declared != actual {
            return Err(ArgError::DType {
                kernel: kernel.name().to_string(),
                param: name.to_string(),
                declared,
                actual,
            }
            .into());
        }
    }
    Ok(())
}

/// Checks the kinds and count of `given` (per argument: its kind) against the kernel's parameters.
pub(crate) fn check_kinds(kernel: &Kernel, given: &[ParamKind]) -> Result<(), LaunchError> {
    let params = kernel.info.params;
    if params.len() != given.len() {
        let list: Vec<String> = params
            .iter()
            .map(|p| {
                let k = match p.kind {
                    ParamKind::Input => "input",
                    ParamKind::Output => "output",
                    ParamKind::Scalar => "scalar",
                };
                format!("{}: {k}", p.name)
            })
            .collect();
        return Err(ArgError::Count {
            kernel: kernel.name().to_string(),
            expected: params.len(),
            got: given.len(),
            params: list.join(", "),
        }
        .into());
    }
    for (i, (p, &g)) in params.iter().zip(given).enumerate() {
        if p.kind != g {
            return Err(ArgError::Kind {
                kernel: kernel.name().to_string(),
                index: i,
                param: p.name.to_string(),
                declared: super::error::kind_name(p.kind),
                given: super::error::kind_name(g),
            }
            .into());
        }
    }
    Ok(())
}
