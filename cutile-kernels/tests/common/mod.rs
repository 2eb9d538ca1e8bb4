//! Helpers shared by the kernel-family test files: array metadata, deterministic data and tolerance checks (from
//! `cutile_testkit`), the sm_90 compile loop, and the GPU plumbing (a cubin from tileiras or a saved directory; device + stream, or a
//! printed reason the test is skipped).

use cutile::dsl::{Kernel, Specialized, TensorMeta};
use cutile::runtime::{Device, Stream};
use cutile_ir::ScalarType;

pub fn t(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

// Not every test file uses every helper.
#[allow(unused_imports)]
pub use cutile_testkit::{assert_all_close, data, max_abs_err};

/// The sm_90 cubin of a specialization: from tileiras, else from `CUTILE_KERNELS_CUBINS`; `None` (after
/// printing why) when neither has it.
/// A planned launch specialized on its call's described operands (never launched), as the tests that
/// read a launch's IR or compile it need.
pub fn specialize_launch(
    planned: &cutile_kernels::op::registry::PlannedCall,
    l: &cutile_kernels::op::PlannedLaunch,
) -> Specialized {
    // SAFETY: described operands are never launched.
    let args = unsafe { cutile_kernels::op::describe(l, &planned.operands) };
    l.kernel
        .specialize(&args.tensor_metas())
        .unwrap_or_else(|e| panic!("{}: {e}", l.config))
}

pub fn gpu_cubin(name: &str, s: &Specialized) -> Option<Vec<u8>> {
    if let Ok(t) = cutile::toolchain::Tileiras::discover() {
        let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
        let c = s
            .compile(&t, &req)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        return Some(c.bytes);
    }
    let path = std::env::var_os("CUTILE_KERNELS_CUBINS")
        .map(|d| std::path::PathBuf::from(d).join(format!("{name}.sm_90.cubin")));
    match path.as_ref().map(std::fs::read) {
        Some(Ok(bytes)) => Some(bytes),
        _ => {
            cutile_testkit::skip(
                name,
                &format!("no tileiras and no saved cubin ({path:?}; set CUTILE_KERNELS_CUBINS)"),
            );
            None
        }
    }
}

/// Device 0 and a stream, or `None` after printing why the GPU test is skipped (never a failure: GPU
/// tests are `#[ignore]`d).
pub fn gpu_device(test: &str) -> Option<(Device, Stream)> {
    if !cutile::runtime::is_available() {
        cutile_testkit::skip_no_gpu(test, "no CUDA driver");
        return None;
    }
    match Device::new(0) {
        Ok(d) => {
            let s = Stream::new(&d).expect("create a stream");
            Some((d, s))
        }
        Err(e) => {
            cutile_testkit::skip_no_gpu(test, &format!("no usable CUDA device ({e})"));
            None
        }
    }
}

/// The cubin of `s` for `arch`, compiled through the kernel cache (`cutile::launch::compile_bytecode_cached`):
/// the catalog step of `cargo xtask test` then finds what the tests compiled instead of compiling it again.
pub fn compile_cached(
    tileiras: &cutile::toolchain::Tileiras,
    s: &Specialized,
    arch: cutile::toolchain::GpuArch,
) -> Result<std::sync::Arc<[u8]>, Box<dyn std::error::Error>> {
    let bc = s.bytecode(cutile::dsl::bytecode_version_for(tileiras))?;
    let req = cutile::toolchain::CompileRequest::new(arch);
    Ok(cutile::launch::compile_bytecode_cached(tileiras, &bc, &req)?.0)
}

/// Specialize and compile every case for sm_90 with the real tileiras (`cutile_testkit::skip` when it is not
/// installed); with `CUTILE_KERNELS_CUBINS=<dir>` also save each cubin there for a GPU machine without it.
pub fn compile_all_sm90(
    test: &str,
    cases: impl IntoIterator<Item = (&'static str, Kernel, Vec<TensorMeta>)>,
) {
    let Some(tileiras) = tileiras(test) else {
        return;
    };
    let save = std::env::var_os("CUTILE_KERNELS_CUBINS").map(std::path::PathBuf::from);
    for (name, k, arrays) in cases {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let cubin = compile_cached(&tileiras, &s, cutile::toolchain::GpuArch::Sm90)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
        if let Some(dir) = &save {
            std::fs::create_dir_all(dir).expect("create the cubin directory");
            std::fs::write(dir.join(format!("{name}.sm_90.cubin")), &cubin[..])
                .expect("write a cubin");
        }
    }
}

/// The catalog's DSL jobs of `calls` (sm_90 plans, default configurations) as named compile cases.
pub fn catalog_jobs(
    calls: &[cutile_kernels::op::CallSpec],
) -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    cutile_kernels::catalog::dsl_jobs(calls, false)
        .unwrap()
        .iter()
        .map(|j| {
            let (k, metas) = j.dsl_spec().unwrap();
            let name: &'static str = Box::leak(
                format!("{} {}", j.kernel, j.specialization)
                    .replace(['/', ' ', '[', ']', ','], "_")
                    .into_boxed_str(),
            );
            (name, k.clone(), metas.to_vec())
        })
        .collect()
}

/// Specialize and compile every case for sm_80, sm_90, sm_100 and sm_120 with the real tileiras
/// (`cutile_testkit::skip` when it is not installed); each must give a non-empty cubin.
pub fn compile_four_archs(
    test: &str,
    cases: impl IntoIterator<Item = (&'static str, Kernel, Vec<TensorMeta>)>,
) {
    use cutile::toolchain::{GpuArch, Tileiras};
    let tileiras = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip(test, &format!("tileiras not found ({e})"));
            return;
        }
    };
    for (name, k, metas) in cases {
        let s = k
            .specialize(&metas)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for arch in [GpuArch::Sm80, GpuArch::Sm90, GpuArch::Sm100, GpuArch::Sm120] {
            let c = compile_cached(&tileiras, &s, arch)
                .unwrap_or_else(|e| panic!("{name} {arch}: {e}"));
            assert!(!c.is_empty());
        }
    }
}

/// The installed tileiras, or `None` after `cutile_testkit::skip` says why (which fails `test` when
/// `CUTILE_REQUIRE_TOOLS` is set).
pub fn tileiras(test: &str) -> Option<cutile::toolchain::Tileiras> {
    match cutile::toolchain::Tileiras::discover() {
        Ok(t) => Some(t),
        Err(e) => {
            cutile_testkit::skip(test, &format!("tileiras not found ({e})"));
            None
        }
    }
}

/// Launch arrays of a row softmax: x, y.
pub fn softmax_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![t(dtype, &[rows, cols]), t(dtype, &[rows, cols])]
}

/// Launch arrays of an RMSNorm: x, w, y.
pub fn rms_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
    ]
}

/// Launch arrays of a LayerNorm: x, w, b, y.
pub fn ln_arrays(dtype: ScalarType, rows: i64, cols: i64) -> Vec<TensorMeta> {
    vec![
        t(dtype, &[rows, cols]),
        t(dtype, &[cols]),
        t(dtype, &[cols]),
        t(dtype, &[rows, cols]),
    ]
}

/// A kernel IR case: name, kernel, launch arrays, and whether its IR is pinned as a snapshot.
pub type IrCase = (&'static str, Kernel, Vec<TensorMeta>, bool);

/// Specializes and verifies every case; returns (name, IR text) of those to snapshot. The caller asserts
/// the snapshots itself, so insta names them after the calling test module.
pub fn verified_snapshot_irs(cases: Vec<IrCase>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (name, k, arrays, snap) in cases {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if snap {
            out.push((name, s.ir_text()));
        }
    }
    out
}

/// Which launches also compile for sm_80, sm_100 and sm_120 besides sm_90: one per kernel, one per
/// kernel and element type of the first operand (a family whose kernels differ by input type), or
/// every distinct specialization.
#[derive(Clone, Copy, Debug)]
pub enum OtherArchsPer {
    Kernel,
    KernelAndDtype,
    Specialization,
}

/// What [`compile_every_launch`] went over: the names of the kernels the calls launch, and how many
/// distinct specializations (launch plan keys) they make.
#[derive(Debug)]
pub struct Covered {
    pub kernels: std::collections::BTreeSet<String>,
    pub specializations: usize,
}

/// Plans every call with all its tuning candidates, then specializes and verifies each launch and, with
/// tileiras (else skipped, said once), compiles each distinct specialization for sm_90 and, as `other`
/// says, for the catalog's other archs.
pub fn compile_every_launch(
    test: &str,
    calls: &[cutile_kernels::op::CallSpec],
    other: OtherArchsPer,
) -> Covered {
    use cutile::toolchain::GpuArch;
    let target = cutile_kernels::op::Target::planning(GpuArch::Sm90);
    let tileiras = tileiras(test);
    let mut kernels = std::collections::BTreeSet::new();
    let mut sm90 = std::collections::HashSet::new();
    let mut other_archs = std::collections::HashSet::new();
    for c in calls {
        let label = c.label();
        let planned = c
            .plan(&target, true)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(!planned.launches.is_empty(), "{label}: no launches");
        for l in &planned.launches {
            let name = l.kernel.name().to_string();
            kernels.insert(name.clone());
            // SAFETY: described operands are never launched.
            let args = unsafe { cutile_kernels::op::describe(l, &planned.operands) };
            let metas = args.tensor_metas();
            let s = l
                .kernel
                .specialize(&metas)
                .unwrap_or_else(|e| panic!("{label} / {}: {e}", l.config));
            cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
                .unwrap_or_else(|e| panic!("{label} / {}: {e}", l.config));
            let key = cutile::launch::plan(
                &l.kernel,
                &metas,
                target.arch,
                &cutile::launch::CompileOptions::default(),
                cutile::launch::NO_TOOLCHAIN,
            )
            .unwrap_or_else(|e| panic!("{label} / {}: {e}", l.config))
            .key;
            if !sm90.insert(key) {
                continue;
            }
            let Some(tl) = &tileiras else { continue };
            compile_cached(tl, &s, GpuArch::Sm90).unwrap_or_else(|e| {
                panic!("{label} / {} / {name}: {e}\n{}", l.config, s.ir_text())
            });
            let first_of_its_kind = match other {
                OtherArchsPer::Kernel => other_archs.insert(name),
                OtherArchsPer::KernelAndDtype => {
                    other_archs.insert(format!("{name} {:?}", metas.first().map(|m| m.dtype)))
                }
                // New by the sm_90 check above.
                OtherArchsPer::Specialization => true,
            };
            if first_of_its_kind {
                for arch in [GpuArch::Sm80, GpuArch::Sm100, GpuArch::Sm120] {
                    compile_cached(tl, &s, arch)
                        .unwrap_or_else(|e| panic!("{label} / {} / {arch}: {e}", l.config));
                }
            }
        }
    }
    Covered {
        kernels,
        specializations: sm90.len(),
    }
}

/// From a cubin (one kernel), read by `cutile::runtime::cubin::inspect`: (registers, stack frame bytes, static
/// shared memory bytes, `.text` bytes). Panics when the cubin does not parse, has other than one kernel, or
/// lacks the register count, the stack frame or the `.text` section.
pub fn resources(cubin: &[u8]) -> (u32, u32, u64, u64) {
    let info = cutile::runtime::cubin::inspect(cubin).unwrap_or_else(|e| panic!("{e}"));
    let [kernel] = info.kernels.as_slice() else {
        panic!("{} kernels in the cubin, expected one", info.kernels.len());
    };
    let r = info
        .resources_of(&kernel.name)
        .expect("inspect gives every kernel its resources");
    let missing = |what: &str| format!("{}: the cubin records no {what}", kernel.name);
    (
        r.registers
            .unwrap_or_else(|| panic!("{}", missing("register count"))),
        r.stack_frame_bytes
            .unwrap_or_else(|| panic!("{}", missing("stack frame"))),
        r.static_shared_bytes,
        r.code_bytes
            .unwrap_or_else(|| panic!("{}", missing(".text section"))),
    )
}

/// The PTX tileiras hands `ptxas` when compiling for sm_90: tileiras runs through a `CUDA_HOME` whose
/// `bin/ptxas` copies the `.ptx` it is given and runs the real one (`lib` and `nvvm` are the
/// toolchain's own). Facts the schedules rely on that only the compiled code shows (a `wgmma` group
/// kept in flight, vector-width global accesses) are read from it.
pub struct Sm90Ptx {
    tileiras: cutile::toolchain::Tileiras,
    dir: tempfile::TempDir,
    home: std::path::PathBuf,
    real_ptxas: std::path::PathBuf,
    count: std::cell::Cell<usize>,
}

impl Sm90Ptx {
    pub fn new(tileiras: cutile::toolchain::Tileiras) -> Sm90Ptx {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("cuda");
        let bin = tileiras
            .path()
            .parent()
            .expect("tileiras sits in a bin folder");
        let root = bin.parent().expect("the toolchain root above bin");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        for sub in ["lib", "nvvm"] {
            std::os::unix::fs::symlink(root.join(sub), home.join(sub)).unwrap();
        }
        let script = home.join("bin/ptxas");
        std::fs::write(
            &script,
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in *.ptx) cp \"$a\" \"$PTX_OUT\";; esac; done\n\
             exec \"$REAL_PTXAS\" \"$@\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let real_ptxas = bin.join("ptxas");
        Sm90Ptx {
            tileiras,
            dir,
            home,
            real_ptxas,
            count: std::cell::Cell::new(0),
        }
    }

    /// The PTX of `job` (panics naming `label` when tileiras fails or runs no ptxas).
    pub fn of(&self, job: &cutile_kernels::catalog::CompileJob, label: &str) -> String {
        let (kernel, metas) = job.dsl_spec().unwrap();
        self.of_kernel(kernel, metas, label)
    }

    /// The PTX of `kernel` specialized on `metas` (see [`Sm90Ptx::of`]).
    pub fn of_kernel(&self, kernel: &Kernel, metas: &[TensorMeta], label: &str) -> String {
        let i = self.count.get();
        self.count.set(i + 1);
        let tmp = self.dir.path();
        let version = cutile::dsl::bytecode_version_for(&self.tileiras);
        let bytecode = kernel.specialize(metas).unwrap().bytecode(version).unwrap();
        let (bc, ptx) = (
            tmp.join(format!("{i}.tilebc")),
            tmp.join(format!("{i}.ptx")),
        );
        std::fs::write(&bc, &bytecode).unwrap();
        let out = std::process::Command::new(self.tileiras.path())
            .arg("--gpu-name=sm_90")
            .arg("-o")
            .arg(tmp.join(format!("{i}.cubin")))
            .arg(&bc)
            .env("CUDA_HOME", &self.home)
            .env("REAL_PTXAS", &self.real_ptxas)
            .env("PTX_OUT", &ptx)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{label}: tileiras failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&ptx)
            .unwrap_or_else(|e| panic!("{label}: tileiras ran no ptxas through CUDA_HOME ({e})"))
    }
}

/// The SASS of `cubin` (`nvdisasm -c`, next to tileiras). Without nvdisasm the test is skipped, which
/// fails where tools are required (CI). Any other nvdisasm failure panics.
pub fn sass(test: &str, tileiras: &cutile::toolchain::Tileiras, cubin: &[u8]) -> Option<String> {
    match tileiras.sass(cubin) {
        Ok(text) => Some(text),
        Err(e @ cutile::toolchain::ToolchainError::MissingNvdisasm { .. }) => {
            cutile_testkit::skip(test, &e.to_string());
            None
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

/// The instructions of SASS text whose opcode (after an optional `@P` predicate) starts with `op`,
/// e.g. `"MUFU.EX2"` or `"FSETP.GEU"`.
pub fn sass_instructions<'a>(sass: &'a str, op: &str) -> Vec<&'a str> {
    sass.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix("/*")?;
            let (_, instr) = rest.split_once("*/")?;
            let instr = instr.trim_start();
            let instr = match instr.strip_prefix('@') {
                Some(p) => p.split_once(' ')?.1.trim_start(),
                None => instr,
            };
            instr.starts_with(op).then_some(instr)
        })
        .collect()
}
