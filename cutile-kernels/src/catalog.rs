//! The compile catalog: every kernel specialization the workspace ships, as a job that builds its Tile IR
//! module without a GPU. `cargo xtask kernels` compiles each for a list of architectures; AOT bundles and CI
//! compile tests draw from the same list, so a kernel added here is checked everywhere.

use cutile_ir::ScalarType::{self, *};
use cutile_ir::{Module, samples};

/// Error of a job's IR build.
pub type BuildError = Box<dyn std::error::Error + Send + Sync>;

/// One specialization of one kernel.
pub struct CompileJob {
    /// Kernel family / name, e.g. `softmax`.
    pub kernel: &'static str,
    /// Human-readable specialization, e.g. `tile=1024 elem=bf16`.
    pub specialization: String,
    /// Where the kernel is written: `ir-builder` (hand-built with `cutile_ir::builder`) or `dsl`.
    pub source: &'static str,
    build: Box<dyn Fn() -> Result<Module, BuildError> + Send + Sync>,
    /// For DSL jobs: the kernel and the arrays it is specialized for, so AOT bundling can compute the
    /// exact cache key a launch looks up (`cutile::launch::plan`).
    dsl: Option<(cutile::dsl::Kernel, Vec<cutile::dsl::TensorMeta>)>,
}

impl std::fmt::Debug for CompileJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileJob")
            .field("kernel", &self.kernel)
            .field("specialization", &self.specialization)
            .field("source", &self.source)
            .finish()
    }
}

impl CompileJob {
    pub fn new(
        kernel: &'static str,
        specialization: String,
        source: &'static str,
        build: impl Fn() -> Result<Module, BuildError> + Send + Sync + 'static,
    ) -> CompileJob {
        CompileJob {
            kernel,
            specialization,
            source,
            build: Box::new(build),
            dsl: None,
        }
    }

    /// A DSL job: `kernel` specialized for `arrays` (tensor parameters in order).
    pub fn dsl(
        kernel_name: &'static str,
        specialization: String,
        kernel: cutile::dsl::Kernel,
        arrays: Vec<cutile::dsl::TensorMeta>,
    ) -> CompileJob {
        let (k, a) = (kernel.clone(), arrays.clone());
        let mut job = CompileJob::new(kernel_name, specialization, "dsl", move || {
            Ok(k.specialize(&a)?.module)
        });
        job.dsl = Some((kernel, arrays));
        job
    }

    /// The kernel and arrays of a DSL job (`None` for IR-builder samples).
    pub fn dsl_spec(&self) -> Option<(&cutile::dsl::Kernel, &[cutile::dsl::TensorMeta])> {
        self.dsl.as_ref().map(|(k, a)| (k, a.as_slice()))
    }

    /// Build the kernel's IR module.
    pub fn build(&self) -> Result<Module, BuildError> {
        (self.build)()
    }
}

/// The IR-builder sample kernels of `cutile_ir::samples`.
fn ir_builder_jobs() -> Vec<CompileJob> {
    let mut jobs = Vec::new();
    for elem in [F32, BF16] {
        jobs.push(CompileJob::new(
            "vector_add",
            format!("tile=1024 elem={elem}"),
            "ir-builder",
            move || Ok(samples::vector_add(1024, elem)?),
        ));
    }
    for (cols, elem) in [(1024, F32), (1024, BF16), (4096, BF16)] {
        jobs.push(CompileJob::new(
            "row_softmax",
            format!("cols={cols} elem={elem}"),
            "ir-builder",
            move || Ok(samples::row_softmax(cols, elem)?),
        ));
    }
    let mm: [(i64, i64, i64, ScalarType); 2] = [(128, 128, 64, F16), (128, 128, 64, BF16)];
    for (bm, bn, bk, elem) in mm {
        jobs.push(CompileJob::new(
            "tiled_matmul",
            format!("{bm}x{bn}x{bk} elem={elem} acc=f32"),
            "ir-builder",
            move || Ok(samples::tiled_matmul(bm, bn, bk, elem, F32)?),
        ));
    }
    jobs
}

/// A DSL job: `kernel` specialized for contiguous arrays of `shapes`.
fn dsl_job(
    name: &'static str,
    specialization: String,
    kernel: cutile::dsl::Kernel,
    dtype: ScalarType,
    shapes: &[&[i64]],
) -> CompileJob {
    let arrays: Vec<_> = shapes
        .iter()
        .map(|s| cutile::dsl::TensorMeta::contiguous(dtype, s))
        .collect();
    CompileJob::dsl(name, specialization, kernel, arrays)
}

/// Vector add, saxpy, row softmax and GEMM (plain and persistent). Each is declared for tile-aligned shapes
/// and for ragged ones (odd extents give other layout facts, hence other specializations).
fn basic_jobs() -> Vec<CompileJob> {
    use crate::gemm::kernels as g;
    use crate::softmax::kernels as s;
    use crate::vector_add::kernels as v;
    use half::bf16;
    let mut jobs = Vec::new();
    for n in [1i64 << 20, 1_000_003] {
        let spec = |e: ScalarType| format!("B=1024 elem={e} n={n}");
        let x: &[i64] = &[n];
        jobs.push(dsl_job(
            "vadd",
            spec(F32),
            v::vadd::kernel::<f32, 1024>(),
            F32,
            &[x; 3],
        ));
        jobs.push(dsl_job(
            "vadd",
            spec(BF16),
            v::vadd::kernel::<bf16, 1024>(),
            BF16,
            &[x; 3],
        ));
        jobs.push(dsl_job(
            "saxpy",
            spec(F32),
            v::saxpy::kernel::<f32, 1024>(),
            F32,
            &[x; 2],
        ));
    }
    for (rows, cols) in [(4096i64, 1024i64), (1000, 1023)] {
        let x: &[i64] = &[rows, cols];
        for e in [F32, BF16] {
            let spec = format!("BN=1024 elem={e} rows={rows} cols={cols}");
            let k = match e {
                F32 => s::row_softmax::kernel::<f32, 1024>(),
                _ => s::row_softmax::kernel::<bf16, 1024>(),
            };
            jobs.push(dsl_job("row_softmax", spec, k, e, &[x; 2]));
        }
    }
    for (m, n, k) in [(4096i64, 4096i64, 4096i64), (1000, 1023, 517)] {
        let shapes: [&[i64]; 3] = [&[m, k], &[k, n], &[m, n]];
        let spec = format!("128x128x64 elem=bf16 {m}x{n}x{k}");
        jobs.push(dsl_job(
            "gemm",
            spec.clone(),
            g::gemm::kernel::<bf16, 128, 128, 64>(),
            BF16,
            &shapes,
        ));
        jobs.push(dsl_job(
            "gemm_persistent",
            spec,
            g::gemm_persistent::kernel::<bf16, 128, 128, 64>(),
            BF16,
            &shapes,
        ));
    }
    jobs
}

/// The row-softmax variants for wide bf16 rows (`crate::softmax`): more worker warps on whole-row tiles,
/// the online (chunked) form with 2048-wide chunks, and 4 rows per block for 1024-wide rows; each on its
/// benchmark shapes and a ragged one.
fn softmax_variant_jobs() -> Vec<CompileJob> {
    use crate::softmax::kernels as s;
    use half::bf16;
    let spec = |p: &str, x: &[i64]| format!("{p} elem=bf16 rows={} cols={}", x[0], x[1]);
    let mut jobs = Vec::new();
    for x in [&[8192i64, 8192][..], &[4096, 4096], &[1000, 1023]] {
        let (bn, k8, k16) = match x[1] {
            8192 => (
                8192,
                s::row_softmax_w8::kernel::<bf16, 8192>(),
                s::row_softmax_w16::kernel::<bf16, 8192>(),
            ),
            4096 => (
                4096,
                s::row_softmax_w8::kernel::<bf16, 4096>(),
                s::row_softmax_w16::kernel::<bf16, 4096>(),
            ),
            _ => (
                1024,
                s::row_softmax_w8::kernel::<bf16, 1024>(),
                s::row_softmax_w16::kernel::<bf16, 1024>(),
            ),
        };
        let p = format!("BN={bn}");
        jobs.push(dsl_job("row_softmax_w8", spec(&p, x), k8, BF16, &[x; 2]));
        jobs.push(dsl_job("row_softmax_w16", spec(&p, x), k16, BF16, &[x; 2]));
        jobs.push(dsl_job(
            "row_softmax_online",
            spec("BN=2048", x),
            s::row_softmax_online::kernel::<bf16, 2048>(),
            BF16,
            &[x; 2],
        ));
    }
    for x in [&[32768i64, 1024][..], &[1000, 1023]] {
        jobs.push(dsl_job(
            "row_softmax_rows",
            spec("TM=4 BN=1024", x),
            s::row_softmax_rows::kernel::<bf16, 4, 1024>(),
            BF16,
            &[x; 2],
        ));
    }
    jobs
}

/// RMSNorm / LayerNorm (`crate::norm`): whole-row tiles for 1024-wide rows, looped 2048-wide chunks for
/// 8192-wide ones (the fastest chunk width measured on an H200).
fn norm_jobs() -> Vec<CompileJob> {
    use crate::norm::kernels as n;
    use half::bf16;
    let (short, long): (&[i64], &[i64]) = (&[8192, 1024], &[16384, 8192]);
    let spec = |bn: i32, elem: ScalarType, x: &[i64]| {
        format!("BN={bn} elem={elem} rows={} cols={}", x[0], x[1])
    };
    vec![
        dsl_job(
            "rms_norm",
            spec(1024, BF16, short),
            n::rms_norm::kernel::<bf16, 1024>(),
            BF16,
            &[short, &[1024], short],
        ),
        dsl_job(
            "rms_norm",
            spec(1024, F32, short),
            n::rms_norm::kernel::<f32, 1024>(),
            F32,
            &[short, &[1024], short],
        ),
        dsl_job(
            "layer_norm",
            spec(1024, BF16, short),
            n::layer_norm::kernel::<bf16, 1024>(),
            BF16,
            &[short, &[1024], &[1024], short],
        ),
        dsl_job(
            "rms_norm_looped",
            spec(2048, BF16, long),
            n::rms_norm_looped::kernel::<bf16, 2048>(),
            BF16,
            &[long, &[8192], long],
        ),
        dsl_job(
            "layer_norm_looped",
            spec(2048, BF16, long),
            n::layer_norm_looped::kernel::<bf16, 2048>(),
            BF16,
            &[long, &[8192], &[8192], long],
        ),
    ]
}

/// The gather / persistent softmax and norm kernels (cuTile Python's fast forms): the bf16 benchmark shapes
/// plus one ragged shape each. Whole-row gathers take `BN` = the row width; rows of 131072 use the online
/// (chunked) softmax.
fn gather_jobs() -> Vec<CompileJob> {
    use crate::norm::kernels as n;
    use crate::softmax::kernels as s;
    use half::bf16;
    let spec = |kind: &str, bn: i32, x: &[i64]| {
        format!("{kind} BN={bn} elem=bf16 rows={} cols={}", x[0], x[1])
    };
    let mut jobs = vec![];
    let sm: [(&[i64], cutile::dsl::Kernel, i32); 6] = [
        (
            &[8192, 8192],
            s::softmax_gather::kernel::<bf16, 8192>(),
            8192,
        ),
        (
            &[4096, 4096],
            s::softmax_gather::kernel::<bf16, 4096>(),
            4096,
        ),
        (
            &[32768, 1024],
            s::softmax_gather::kernel::<bf16, 1024>(),
            1024,
        ),
        (
            &[1024, 32768],
            s::softmax_gather::kernel::<bf16, 32768>(),
            32768,
        ),
        (&[37, 1000], s::softmax_gather::kernel::<bf16, 1024>(), 1024),
        (
            &[16, 131072],
            s::softmax_gather_online::kernel::<bf16, 4096>(),
            4096,
        ),
    ];
    for (x, k, bn) in sm {
        let name = if x[1] == 131072 {
            "softmax_gather_online"
        } else {
            "softmax_gather"
        };
        jobs.push(dsl_job(name, spec("", bn, x), k, BF16, &[x, x]));
    }
    jobs.push(dsl_job(
        "softmax_gather_online",
        spec("", 2048, &[37, 5000]),
        s::softmax_gather_online::kernel::<bf16, 2048>(),
        BF16,
        &[&[37, 5000], &[37, 5000]],
    ));
    let norms: [(&[i64], i32); 4] = [
        (&[16384, 8192], 8192),
        (&[8192, 1024], 1024),
        (&[4096, 4096], 4096),
        (&[37, 1000], 1024),
    ];
    for (x, bn) in norms {
        let w: &[i64] = &x[1..];
        let (rms, ln, lp) = match bn {
            8192 => (
                n::rms_norm_gather::kernel::<bf16, 8192>(),
                n::layer_norm_gather::kernel::<bf16, 8192>(),
                (n::layer_norm_persistent::kernel::<bf16, 2, 8192>(), 2),
            ),
            4096 => (
                n::rms_norm_gather::kernel::<bf16, 4096>(),
                n::layer_norm_gather::kernel::<bf16, 4096>(),
                (n::layer_norm_persistent::kernel::<bf16, 4, 4096>(), 4),
            ),
            _ => (
                n::rms_norm_gather::kernel::<bf16, 1024>(),
                n::layer_norm_gather::kernel::<bf16, 1024>(),
                (n::layer_norm_persistent::kernel::<bf16, 16, 1024>(), 16),
            ),
        };
        jobs.push(dsl_job(
            "rms_norm_gather",
            spec("", bn, x),
            rms,
            BF16,
            &[x, w, x],
        ));
        jobs.push(dsl_job(
            "layer_norm_gather",
            spec("", bn, x),
            ln,
            BF16,
            &[x, w, w, x],
        ));
        jobs.push(dsl_job(
            "layer_norm_persistent",
            spec(&format!("TM={}", lp.1), bn, x),
            lp.0,
            BF16,
            &[x, w, w, x],
        ));
    }
    for (x, w) in [
        (&[16384i64, 8192][..], &[8192i64][..]),
        (&[37, 5000], &[5000]),
    ] {
        jobs.push(dsl_job(
            "rms_norm_gather_looped",
            spec("", 2048, x),
            n::rms_norm_gather_looped::kernel::<bf16, 2048>(),
            BF16,
            &[x, w, x],
        ));
        jobs.push(dsl_job(
            "layer_norm_gather_looped",
            spec("", 2048, x),
            n::layer_norm_gather_looped::kernel::<bf16, 2048>(),
            BF16,
            &[x, w, w, x],
        ));
    }
    jobs
}

/// Flash attention forward (`crate::attention`): BM=64, BN=128, D=64/128, causal and not.
fn attention_jobs() -> Vec<CompileJob> {
    use crate::attention::kernels as a;
    use half::bf16;
    let mut jobs = Vec::new();
    for causal in [false, true] {
        let spec = |d: i64| format!("BM=64 BN=128 D={d} causal={causal} elem=bf16");
        let (k128, k64, k4d) = match causal {
            false => (
                a::flash_attention::kernel::<bf16, 64, 128, 128, false>(),
                a::flash_attention::kernel::<bf16, 64, 128, 64, false>(),
                a::flash_attention_4d::kernel::<bf16, 64, 128, 128, false>(),
            ),
            true => (
                a::flash_attention::kernel::<bf16, 64, 128, 128, true>(),
                a::flash_attention::kernel::<bf16, 64, 128, 64, true>(),
                a::flash_attention_4d::kernel::<bf16, 64, 128, 128, true>(),
            ),
        };
        let (s128, s64): (&[i64], &[i64]) = (&[128, 4096, 128], &[128, 4096, 64]);
        jobs.push(dsl_job(
            "flash_attention",
            spec(128),
            k128,
            BF16,
            &[s128; 4],
        ));
        jobs.push(dsl_job("flash_attention", spec(64), k64, BF16, &[s64; 4]));
        let s4: &[i64] = &[4, 32, 4096, 128];
        jobs.push(dsl_job(
            "flash_attention_4d",
            spec(128),
            k4d,
            BF16,
            &[s4; 4],
        ));
    }
    jobs
}

/// Every compile job of the workspace.
pub fn compile_jobs() -> Vec<CompileJob> {
    let mut jobs = ir_builder_jobs();
    jobs.extend(basic_jobs());
    jobs.extend(softmax_variant_jobs());
    jobs.extend(norm_jobs());
    jobs.extend(gather_jobs());
    jobs.extend(attention_jobs());
    jobs
}
