//! The host side of a DSL kernel: typed launchers (generated per kernel by `#[cutile::module]`) build a
//! [`Launch`] from the runtime's tensors and scalars; [`Launch::run`] looks the specialization up in the
//! kernel cache (tracing and compiling only on a miss), packs the arguments and launches on a stream.
//!
//! The warm path never traces: the cache key is made from the kernel identity, its generic arguments and
//! the arrays' [`LayoutFacts`](super::LayoutFacts), which are cheap to compute.
//!
//! Safety model: `&mut` tensor arguments are the kernel's outputs; Rust's borrow rules keep them unaliased
//! by any other argument, and the returned [`PendingLaunch`] holds every borrow until the kernel finishes.
//! Every access the kernel makes goes through tensor views (bounds-handled by padding and masked stores)
//! or bounds-masked pointers, so no argument combination reads or writes outside the arrays.

use std::marker::PhantomData;

use cutile_ir::ScalarType;

use super::kernel::{Kernel, ParamKind, SpecializeError};
use super::spec::{LayoutFacts, TensorMeta, choose_index_type};
use crate::core::ElementType;
use crate::runtime::{
    DeviceElement, Grid, KernelArgs, KernelParam, PendingLaunch, RuntimeError, Stream, Tensor,
    TensorView, TensorViewMut,
};
use crate::toolchain::{CompileRequest, GpuArch, Tileiras, ToolchainError};

/// Why a launch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error(transparent)]
    Specialize(#[from] SpecializeError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("kernel `{kernel}`: {message}")]
    Grid { kernel: String, message: String },
    #[error("kernel `{kernel}`: device arch {arch} is not a tileiras target")]
    Arch { kernel: String, arch: String },
}

/// A device array usable as a kernel argument with element type `E`.
pub trait TensorArg<E: ElementType> {
    /// Shape, strides, dtype and base alignment.
    fn meta(&self) -> TensorMeta;
    /// Device address of the first element.
    fn address(&self) -> u64;
    /// The device the memory lives on.
    fn device(&self) -> &crate::runtime::Device;
}

fn meta_of(shape: &[i64], strides: &[i64], addr: u64, dtype: ScalarType) -> TensorMeta {
    let align = if addr == 0 {
        256
    } else {
        1u64 << addr.trailing_zeros().min(12)
    };
    TensorMeta {
        dtype,
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        base_align: align,
    }
}

macro_rules! tensor_arg {
    ($($ty:ty),*) => {$(
        impl<T: DeviceElement + ElementType> TensorArg<T> for $ty {
            fn meta(&self) -> TensorMeta {
                meta_of(self.shape(), self.strides(), self.device_ptr(), T::SCALAR)
            }
            fn address(&self) -> u64 {
                self.device_ptr()
            }
            fn device(&self) -> &crate::runtime::Device {
                self.device()
            }
        }
    )*};
}
tensor_arg!(Tensor<T>, TensorView<'_, T>, TensorViewMut<'_, T>);

/// A host value passed as a `Scalar<E>` kernel argument.
pub trait HostScalar: ElementType {
    #[doc(hidden)]
    fn push_arg(self, args: &mut KernelArgs<'_>);
}
macro_rules! host_scalar {
    ($($t:ty),*) => {$(
        impl HostScalar for $t {
            fn push_arg(self, args: &mut KernelArgs<'_>) {
                args.push(self);
            }
        }
    )*};
}
host_scalar!(i8, i16, i32, i64, f32, f64, half::f16, half::bf16);

fn _assert_param<P: KernelParam>() {}

enum Arg {
    Tensor { meta: usize, address: u64 },
    Scalar(Box<dyn Fn(&mut KernelArgs<'_>) + Send + Sync>),
}

/// A kernel call with its arguments, ready to run on a stream.
pub struct Launch<'a> {
    kernel: Kernel,
    metas: Vec<TensorMeta>,
    args: Vec<Arg>,
    device: Option<crate::runtime::Device>,
    grid: Option<Grid>,
    request: Option<CompileRequest>,
    _borrows: PhantomData<&'a mut ()>,
}

impl std::fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("kernel", &self.kernel)
            .field("metas", &self.metas)
            .field("grid", &self.grid)
            .finish()
    }
}

impl<'a> Launch<'a> {
    /// Used by generated launchers.
    #[doc(hidden)]
    pub fn new(kernel: Kernel) -> Launch<'a> {
        Launch {
            kernel,
            metas: vec![],
            args: vec![],
            device: None,
            grid: None,
            request: None,
            _borrows: PhantomData,
        }
    }
    #[doc(hidden)]
    pub fn input<E: ElementType>(mut self, t: &'a impl TensorArg<E>) -> Self {
        self.push_tensor(t.meta(), t.address(), t.device());
        self
    }
    #[doc(hidden)]
    pub fn output<E: ElementType>(mut self, t: &'a mut impl TensorArg<E>) -> Self {
        self.push_tensor(t.meta(), t.address(), t.device());
        self
    }
    #[doc(hidden)]
    pub fn scalar<E: HostScalar>(mut self, v: E) -> Self {
        self.args
            .push(Arg::Scalar(Box::new(move |a| v.push_arg(a))));
        self
    }
    fn push_tensor(&mut self, meta: TensorMeta, address: u64, device: &crate::runtime::Device) {
        if self.device.is_none() {
            self.device = Some(device.clone());
        }
        self.args.push(Arg::Tensor {
            meta: self.metas.len(),
            address,
        });
        self.metas.push(meta);
    }

    /// Launch on an explicit grid (persistent kernels); by default the grid is the output's tile count.
    pub fn grid(mut self, grid: Grid) -> Self {
        self.grid = Some(grid);
        self
    }

    /// Compile with these options on a cache miss (default: `-O3` for the device's arch).
    pub fn compile_options(mut self, request: CompileRequest) -> Self {
        self.request = Some(request);
        self
    }

    /// The arrays as specialization sees them.
    pub fn tensor_metas(&self) -> &[TensorMeta] {
        &self.metas
    }

    /// The grid: the explicit one, or the number of tiles of the `&mut` outputs (which must agree).
    pub fn launch_grid(&self) -> Result<Grid, LaunchError> {
        if let Some(g) = self.grid {
            return Ok(g);
        }
        let info = self.kernel.info;
        let mut grid: Option<Grid> = None;
        let mut ti = 0;
        for p in info.params {
            if p.kind == ParamKind::Scalar {
                continue;
            }
            let meta = &self.metas[ti];
            ti += 1;
            if p.kind != ParamKind::Output {
                continue;
            }
            let tile = self.kernel.output_tile(ti - 1).unwrap_or_default();
            if tile.len() > 3 {
                return Err(LaunchError::Grid {
                    kernel: info.name.into(),
                    message: format!(
                        "output `{}` has rank {}; partitioned outputs have at most 3 axes",
                        p.name,
                        tile.len()
                    ),
                });
            }
            let mut g = [1u32; 3];
            for (a, (&d, &t)) in meta.shape.iter().zip(&tile).enumerate() {
                let n = (d + t as i64 - 1) / (t as i64).max(1);
                g[a] = u32::try_from(n.max(1)).map_err(|_| LaunchError::Grid {
                    kernel: info.name.into(),
                    message: format!(
                        "output `{}` needs {n} tiles along axis {a}, more than a grid holds",
                        p.name
                    ),
                })?;
            }
            let g = (g[0], g[1], g[2]);
            match grid {
                None => grid = Some(g),
                Some(prev) if prev != g => {
                    return Err(LaunchError::Grid {
                        kernel: info.name.into(),
                        message: format!(
                            "outputs disagree on the grid: {prev:?} vs {g:?} for `{}`; give one with `.grid(…)`",
                            p.name
                        ),
                    });
                }
                Some(_) => {}
            }
        }
        grid.ok_or_else(|| LaunchError::Grid {
            kernel: info.name.into(),
            message: "the kernel has no `&mut Tensor` output to derive a grid from; give one with `.grid(…)`".into(),
        })
    }

    /// The specialization part of the cache key: generic arguments, layout facts, index type, hints.
    pub fn specialization(&self) -> String {
        specialization_string(&self.kernel, &self.metas)
    }

    /// Pack the kernel parameters (pointer, shape, strides per array; scalars by value).
    pub fn kernel_args(&self) -> KernelArgs<'a> {
        let index64 = choose_index_type(&self.metas) == ScalarType::I64;
        let mut args = KernelArgs::new();
        for a in &self.args {
            match a {
                Arg::Tensor { meta, address } => {
                    let m = &self.metas[*meta];
                    args = args.ptr(*address);
                    for &v in m.shape.iter().chain(&m.strides) {
                        if index64 {
                            args.push(v);
                        } else {
                            args.push(v as i32);
                        }
                    }
                }
                Arg::Scalar(f) => f(&mut args),
            }
        }
        args
    }

    /// Run on `stream`: fetch the cubin (memory → bundles → disk cache → trace + tileiras), pack, launch.
    /// The returned guard holds the arguments' borrows until the kernel has finished.
    pub fn run(self, stream: &'a Stream) -> Result<PendingLaunch<'a>, LaunchError> {
        let device = stream.device();
        let arch_name = device.arch();
        let name = self.kernel.info.name;
        let arch: GpuArch = arch_name.parse().map_err(|_| LaunchError::Arch {
            kernel: name.into(),
            arch: arch_name.clone(),
        })?;
        let request = self
            .request
            .clone()
            .unwrap_or_else(|| CompileRequest::new(arch));
        let tileiras = Tileiras::discover();
        let key = cache_key(&self.kernel, &self.metas, &request, tileiras.as_ref().ok())?;
        let grid = self.launch_grid()?;
        let kernel = &self.kernel;
        let metas = &self.metas;
        let loaded =
            crate::runtime::load_kernel(device, &key, name, || -> Result<Vec<u8>, LaunchError> {
                let t = tileiras?;
                let s = kernel.specialize(metas)?;
                Ok(s.compile(&t, &request)?.bytes)
            })?;
        let args = self.kernel_args();
        // SAFETY: every address is the first element of a live tensor borrowed for 'a (held by the
        // returned guard); shapes and strides describe those tensors, and the kernel only accesses memory
        // through views of them (padded loads, masked stores) or bounds-masked pointers.
        Ok(unsafe { loaded.launch_async(stream, grid, &args) }?)
    }
}

/// The kernel-cache key of `kernel` specialized for `metas` and compiled with `request` by `tileiras`
/// (whose version is part of the key; without one, the version this crate installs is assumed, which is
/// what cubins shipped in bundles or a copied cache were built with).
pub fn cache_key(
    kernel: &Kernel,
    metas: &[TensorMeta],
    request: &CompileRequest,
    tileiras: Option<&Tileiras>,
) -> Result<crate::cache::CacheKey, LaunchError> {
    let tool_version = match tileiras {
        Some(t) => t.version().to_string(),
        None => crate::toolchain::TILEIRAS_VERSION.to_string(),
    };
    let options = request
        .option_args()?
        .iter()
        .map(|o| o.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let kernel_id = format!("{}::{}", kernel.info.module_path, kernel.info.name);
    let spec = specialization_string(kernel, metas);
    let source_hash = format!("{:016x}", kernel.info.source_hash);
    Ok(crate::cache::CacheKey::new(crate::cache::KeyParts {
        kernel: &kernel_id,
        source_hash: &source_hash,
        specialization: &spec,
        arch: &request.arch.to_string(),
        tileiras_version: &tool_version,
        options: &options,
    }))
}

/// Compile `kernel` for `metas` into the global kernel cache (memory and, when enabled, disk) under the
/// key a later launch on `request.arch` will look up — so a machine without tileiras can run it.
pub fn precompile(
    kernel: &Kernel,
    metas: &[TensorMeta],
    request: &CompileRequest,
) -> Result<crate::cache::CacheKey, LaunchError> {
    let tileiras = Tileiras::discover()?;
    let key = cache_key(kernel, metas, request, Some(&tileiras))?;
    crate::cache::KernelCache::global()
        .map_err(RuntimeError::from)?
        .get_or_compile(&key, || -> Result<Vec<u8>, LaunchError> {
            let s = kernel.specialize(metas)?;
            Ok(s.compile(&tileiras, request)?.bytes)
        })
        .map_err(RuntimeError::from)?;
    Ok(key)
}

/// `generics|facts…|index type|hints`, a stable text form of everything a specialization depends on.
pub fn specialization_string(kernel: &Kernel, metas: &[TensorMeta]) -> String {
    let mut s = String::new();
    for (n, v) in kernel.info.generics.iter().zip(&kernel.generics) {
        s.push_str(&format!("{n}={v},"));
    }
    for m in metas {
        let f = LayoutFacts::of(m);
        s.push_str(&format!("|{}:b{}", f.dtype, f.base_div));
        for (i, d) in f.shape_div.iter().enumerate() {
            let st = match f.stride_div[i] {
                None => "u".to_string(),
                Some(x) => x.to_string(),
            };
            s.push_str(&format!(":{d}/{st}"));
        }
        if !f.strides_nonneg {
            s.push_str(":neg");
        }
        // Static extents declared in the kernel are checked, not keyed; dynamic ones are not in the key.
        let _ = &m.shape;
    }
    s.push_str(&format!("|idx={}", choose_index_type(metas)));
    s.push_str(&format!("|hints={:?}", kernel.hints()));
    s
}
