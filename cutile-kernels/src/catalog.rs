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

/// Every compile job of the workspace.
pub fn compile_jobs() -> Vec<CompileJob> {
    ir_builder_jobs()
}
