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
        }
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
    CompileJob::new(name, specialization, "dsl", move || {
        Ok(kernel.specialize(&arrays)?.module)
    })
}

/// RMSNorm / LayerNorm (`crate::norm`): whole-row tiles for 1024-wide rows, looped for 8192-wide ones.
fn norm_jobs() -> Vec<CompileJob> {
    use crate::norm::kernels as n;
    use half::bf16;
    let (short, long): (&[i64], &[i64]) = (&[8192, 1024], &[16384, 8192]);
    let spec =
        |elem: ScalarType, x: &[i64]| format!("BN=1024 elem={elem} rows={} cols={}", x[0], x[1]);
    vec![
        dsl_job(
            "rms_norm",
            spec(BF16, short),
            n::rms_norm::kernel::<bf16, 1024>(),
            BF16,
            &[short, &[1024], short],
        ),
        dsl_job(
            "rms_norm",
            spec(F32, short),
            n::rms_norm::kernel::<f32, 1024>(),
            F32,
            &[short, &[1024], short],
        ),
        dsl_job(
            "layer_norm",
            spec(BF16, short),
            n::layer_norm::kernel::<bf16, 1024>(),
            BF16,
            &[short, &[1024], &[1024], short],
        ),
        dsl_job(
            "rms_norm_looped",
            spec(BF16, long),
            n::rms_norm_looped::kernel::<bf16, 1024>(),
            BF16,
            &[long, &[8192], long],
        ),
        dsl_job(
            "layer_norm_looped",
            spec(BF16, long),
            n::layer_norm_looped::kernel::<bf16, 1024>(),
            BF16,
            &[long, &[8192], &[8192], long],
        ),
    ]
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
    jobs.extend(norm_jobs());
    jobs.extend(attention_jobs());
    jobs
}
