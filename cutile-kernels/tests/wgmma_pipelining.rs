//! Which sm_90 K loops keep a `wgmma` group in flight. tileiras 13.5.37 decides per kernel whether a K
//! step waits for its own tensor-core work before the next is issued (`wgmma.wait_group 0` after every
//! commit: the tensor cores idle while each step's operands are waited for) or keeps one step in flight
//! (`wgmma.wait_group 1`), and nothing in the Tile IR says which (`docs/toolchain-findings.md`,
//! "Serialized wgmma K loops"). Schedule rules rely on it: the GEMM family's persistent 128x256 product
//! (one CTA, and per CTA of the 2-CTA cluster default),
//! the 128x128 tiles of a product whose accumulator starts from the residual (`gemm::config::
//! choose_epilogue`), the MoE staged GEMM 2 (`moe::host::Form::SortedStaged`). This test compiles those kernels through a `ptxas` wrapper that keeps the PTX
//! tileiras hands it, and checks each against the table: a tileiras update or a kernel change that
//! flips one fails here, so the rule that depends on it is looked at again.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use crate::common;

use cutile_kernels::catalog::CompileJob;
use cutile_kernels::op::CallSpec;

/// Where a case's kernel comes from: the launches of a registry call (with every tuning candidate,
/// or the defaults only), or the MoE family's catalog specializations (its GEMMs are host functions,
/// not registry ops).
#[derive(Clone)]
enum Source {
    Call(CallSpec, bool),
    Moe,
}

impl Source {
    fn label(&self) -> String {
        match self {
            Source::Call(call, _) => call.label(),
            Source::Moe => "moe catalog".into(),
        }
    }

    fn jobs(&self) -> Vec<CompileJob> {
        match self {
            Source::Call(call, all) => {
                cutile_kernels::catalog::dsl_jobs(std::slice::from_ref(call), *all)
                    .unwrap_or_else(|e| panic!("{}: {e}", call.label()))
            }
            Source::Moe => cutile_kernels::moe::compile_jobs(),
        }
    }
}

/// `(source, launch whose "kernel specialization" contains this, whether its K loop keeps a wgmma
/// group in flight)`.
fn cases() -> Vec<(Source, &'static str, bool)> {
    let gemm = |op: &str, m, n, k| CallSpec::new(op, "bf16", &[&[m, k], &[k, n]], false);
    let qkv = CallSpec::new(
        "fused_qkv",
        "bf16",
        &[&[4096, 4096], &[32, 8, 128, 128], &[0, 1, 0, 1, 0, 1]],
        false,
    );
    let ce = CallSpec::new(
        "fused_linear_cross_entropy",
        "bf16",
        &[&[8192, 4096], &[128256]],
        false,
    );
    vec![
        // The plain product's default at 4096³ and 8192³ (tiles split over 2-CTA clusters, 128x256
        // per CTA), and the one-CTA defaults it replaced (tuner candidates; `choose_product`, which
        // epilogue products keep).
        (
            Source::Call(gemm("gemm", 4096, 4096, 4096), false),
            "gemm_persistent 256x256x64 w8 c2",
            true,
        ),
        (
            Source::Call(gemm("gemm", 8192, 8192, 8192), false),
            "gemm_persistent 256x256x64 w8 c2",
            true,
        ),
        (
            Source::Call(gemm("gemm", 4096, 4096, 4096), true),
            "gemm_persistent 128x128x64",
            true,
        ),
        (
            Source::Call(gemm("gemm", 8192, 8192, 8192), true),
            "gemm_persistent 128x256x64 w8",
            true,
        ),
        (
            Source::Call(gemm("gemm", 8192, 8192, 8192), true),
            "gemm 256x256x64 w8 c2",
            true,
        ),
        // A residual alone starts the accumulator: 128x128 over 8 warps keeps the overlap (the 128x256
        // tile with a loaded accumulator serialized every K step).
        (
            Source::Call(gemm("gemm_residual", 8192, 8192, 8192), false),
            "gemm_epilogue 128x128x64 persistent w8",
            true,
        ),
        (Source::Call(ce.clone(), false), "chunk 0 dw", true),
        (Source::Call(ce, false), "chunk 1 dw", true),
        // The fused QKV kernels: one pair tile per block keeps the overlap; the persistent tuning
        // candidate's epilogue reads `cos[positions]` and scatters into the cache (addresses that
        // depend on loaded values), and its K loop is serialized.
        (
            Source::Call(qkv.clone(), false),
            "fused_qkv pair 128x64",
            true,
        ),
        (
            Source::Call(qkv, true),
            "fused_qkv persistent 128x64",
            false,
        ),
        // MoE GEMM 2 of the sorted prefill form: the scattered epilogue (rows to `y[sorted_ids[r]]`,
        // routed weights gathered by pair) serializes the K loop; the staged form's tile store keeps
        // the overlap at both of its tiles (`host::Form::SortedStaged`).
        (Source::Moe, "moe_gemm2_sorted E=bf16 BM=128 BN=64", false),
        (Source::Moe, "moe_gemm2_staged E=bf16 BM=128 BN=128", true),
        (Source::Moe, "moe_gemm2_staged E=bf16 BM=128 BN=256", true),
    ]
}

/// The K loop keeps one group in flight: the PTX waits for all but the newest group somewhere
/// (`wgmma.wait_group.sync.aligned 1;`, tileiras puts a tab before the count).
fn pipelined(ptx: &str) -> bool {
    ptx.split("wgmma.wait_group.sync.aligned")
        .skip(1)
        .any(|rest| rest.trim_start().starts_with("1;"))
}

#[test]
fn sm90_k_loops_keep_a_wgmma_group_in_flight_where_the_schedules_expect_it() {
    let Some(tileiras) = common::tileiras("wgmma_pipelining") else {
        return;
    };
    let ptx = common::Sm90Ptx::new(tileiras);
    let mut wrong = Vec::new();
    for (source, launch, want) in cases() {
        let jobs = source.jobs();
        let job = jobs
            .iter()
            .find(|j| {
                j.specialization.contains(launch)
                    || format!("{} {}", j.kernel, j.specialization).contains(launch)
            })
            .unwrap_or_else(|| panic!("{}: no launch `{launch}`", source.label()));
        let text = ptx.of(job, launch);
        assert!(
            text.contains("wgmma.mma_async"),
            "{launch}: no wgmma in the PTX"
        );
        if pipelined(&text) != want {
            wrong.push(format!(
                "{} / {}: expected {}",
                source.label(),
                job.specialization,
                if want {
                    "one wgmma group in flight"
                } else {
                    "every K step waiting for its own wgmma"
                }
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
