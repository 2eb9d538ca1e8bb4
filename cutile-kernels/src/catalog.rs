//! The compile catalog: every kernel specialization the workspace ships, as a job that builds its Tile IR
//! module without a GPU. The DSL jobs are not written here: they are what the families' host APIs plan
//! for their representative calls, so the catalog compiles exactly what the ops launch.
//! `cargo xtask kernels` compiles each job for a list of architectures.

use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};
use cutile_ir::{Module, samples};

use crate::op::{CallSpec, Target, describe};

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
    /// The oldest arch the kernel exists on (`None`: every arch the catalog compiles for).
    min_arch: Option<GpuArch>,
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
            min_arch: None,
        }
    }

    /// The job for `arch` and newer only, e.g. sm_100 for block-scaled MMA and e2m1 tiles, which
    /// tileiras refuses for older archs (`unsupported type 'f4E2M1FN'`).
    pub fn from_arch(mut self, arch: GpuArch) -> CompileJob {
        self.min_arch = Some(arch);
        self
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

    /// Whether the job compiles for `arch`: every job does, except fp8 ones on sm_80 (Tile IR 13.5 has
    /// no fp8 types before sm_89; tileiras answers `unsupported type 'f8E4M3FN'`) and jobs below their
    /// [`from_arch`](Self::from_arch), which the catalog skips there.
    pub fn supports(&self, arch: GpuArch) -> bool {
        let fp8 = self
            .dsl
            .as_ref()
            .is_some_and(|(_, metas)| metas.iter().any(|m| matches!(m.dtype, F8E4M3FN | F8E5M2)));
        !(fp8 && arch == GpuArch::Sm80) && self.min_arch.is_none_or(|m| arch >= m)
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

/// Every family's representative calls (see each family's `representative_calls`).
pub fn representative_calls() -> Vec<CallSpec> {
    let mut calls = crate::vector_add::representative_calls();
    calls.extend(crate::softmax::representative_calls());
    calls.extend(crate::norm::representative_calls());
    calls.extend(crate::gemm::representative_calls());
    calls.extend(crate::gemm::epilogue::representative_calls());
    calls.extend(crate::gemm::fp8::representative_calls());
    calls.extend(crate::gemm::grouped::representative_calls());
    calls.extend(crate::attention::representative_calls());
    calls.extend(crate::attention::decode::representative_calls());
    calls.extend(crate::attention::mla::representative_calls());
    calls.extend(crate::activation::representative_calls());
    calls.extend(crate::fused_qkv::representative_calls());
    calls.extend(crate::cross_entropy::representative_calls());
    calls.extend(crate::rope::representative_calls());
    calls.extend(crate::kv_cache::representative_calls());
    calls.extend(crate::embedding::representative_calls());
    calls.extend(crate::sampling::representative_calls());
    calls.extend(crate::norm::backward::representative_calls());
    calls.extend(crate::dropout::representative_calls());
    calls
}

/// The DSL jobs of `calls` as the host API plans them for an sm_90 device (the default configuration,
/// or every tuning candidate with `all_candidates`), one job per distinct specialization.
pub fn dsl_jobs(calls: &[CallSpec], all_candidates: bool) -> Result<Vec<CompileJob>, BuildError> {
    let target = Target::planning(GpuArch::Sm90);
    let mut seen = std::collections::HashSet::new();
    let mut jobs = Vec::new();
    for call in calls {
        let planned = call.plan(&target, all_candidates)?;
        for launch in &planned.launches {
            // SAFETY: described operands only feed specialization; nothing is launched.
            let args = unsafe { describe(launch, &planned.operands) };
            let metas = args.tensor_metas();
            let key = cutile::launch::plan(
                &launch.kernel,
                &metas,
                target.arch,
                &cutile::launch::CompileOptions::default(),
                cutile::launch::NO_TOOLCHAIN,
            )?
            .key;
            if !seen.insert(key) {
                continue;
            }
            let spec = format!("{} [{}]", launch.config, call.label());
            jobs.push(CompileJob::dsl(
                launch.kernel.name(),
                spec,
                launch.kernel.clone(),
                metas,
            ));
        }
    }
    Ok(jobs)
}

/// Every compile job of the workspace: the IR-builder samples and the default configuration of every
/// representative call (what CI compiles for four archs).
pub fn compile_jobs() -> Vec<CompileJob> {
    let mut jobs = ir_builder_jobs();
    jobs.extend(crate::moe::compile_jobs());
    match dsl_jobs(&representative_calls(), false) {
        Ok(j) => jobs.extend(j),
        Err(e) => jobs.push(CompileJob::new(
            "catalog",
            "planning".into(),
            "dsl",
            move || Err(e.to_string().into()),
        )),
    }
    jobs
}

/// [`compile_jobs`] plus every tuning candidate of every representative call (`cargo xtask kernels
/// --full`).
pub fn compile_jobs_full() -> Vec<CompileJob> {
    let mut jobs = ir_builder_jobs();
    jobs.extend(crate::moe::compile_jobs());
    match dsl_jobs(&representative_calls(), true) {
        Ok(j) => jobs.extend(j),
        Err(e) => jobs.push(CompileJob::new(
            "catalog",
            "planning".into(),
            "dsl",
            move || Err(e.to_string().into()),
        )),
    }
    jobs
}
