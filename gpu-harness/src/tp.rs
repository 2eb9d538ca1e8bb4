//! `tp`: the tensor-parallel transformer block over N GPUs (`cutile_tp`): correctness against the
//! single-GPU unsharded layer and the CPU reference, time per layer with its compute / all-reduce
//! split and the overlapped MLP, scaling efficiency, and the NCCL bus-bandwidth check. Rank counts
//! above the visible GPUs are reported blocked. Writes `tp-report.json` and `tp-report.md` under
//! `--out`; exit status 0 pass, 1 fail, 3 skipped (no CUDA device).
//!
//! NCCL is loaded at run time (`libnccl.so` on `LD_LIBRARY_PATH`; recipe in `docs/multi-gpu.md` and
//! [`cutile_tp::nccl::LD_RECIPE`]). NVLink multicast stays off (`NCCL_NVLS_ENABLE=0` unless set).

use std::path::PathBuf;
use std::process::ExitCode;

use cutile_tp::BlockConfig;
use cutile_tp::sweep::{SweepArgs, sweep};

use crate::BoxError;

/// Options of `tp` (a block shape is `T,hidden,Hq,Hkv,D,F`).
#[derive(Debug, Clone)]
pub struct TpArgs {
    pub out: PathBuf,
    pub ranks: Vec<usize>,
    pub check_shape: Option<String>,
    pub time_shape: Option<String>,
    pub chunks: usize,
    pub warmup: usize,
    pub iters: usize,
    pub no_timing: bool,
    pub min_busbw_fraction: f64,
}

/// Parses `T,hidden,Hq,Hkv,D,F`.
pub fn parse_shape(s: &str) -> Result<BlockConfig, BoxError> {
    let v: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("shape {s:?}: {e} (want T,hidden,Hq,Hkv,D,F)"))?;
    let [tokens, hidden, hq, hkv, d, ffn] = v[..] else {
        return Err(format!("shape {s:?}: want 6 numbers T,hidden,Hq,Hkv,D,F").into());
    };
    Ok(BlockConfig {
        tokens,
        hidden,
        hq,
        hkv,
        d,
        ffn,
    })
}

pub fn run(a: &TpArgs) -> Result<ExitCode, BoxError> {
    let gpus = match cutile::runtime::Device::count() {
        Ok(n) if n > 0 => n,
        _ => {
            println!("skipped: no CUDA driver or device");
            return Ok(ExitCode::from(3));
        }
    };
    let d = SweepArgs::default();
    let ranks = if a.ranks.is_empty() {
        // 1, 2, 8 (as many as the machine has, reported blocked beyond).
        let mut r = d.ranks.clone();
        if !r.contains(&gpus) {
            r.push(gpus);
            r.sort_unstable();
        }
        r
    } else {
        a.ranks.clone()
    };
    let args = SweepArgs {
        check: a
            .check_shape
            .as_deref()
            .map(parse_shape)
            .transpose()?
            .unwrap_or(d.check),
        time: a
            .time_shape
            .as_deref()
            .map(parse_shape)
            .transpose()?
            .unwrap_or(d.time),
        ranks,
        chunks: a.chunks,
        warmup: a.warmup,
        iters: a.iters,
        no_timing: a.no_timing,
        min_fraction: a.min_busbw_fraction,
        ..d
    };
    println!("tp: {gpus} GPU(s), ranks {:?}", args.ranks);
    let report = sweep(&args)?;
    std::fs::create_dir_all(&a.out)?;
    let json = a.out.join("tp-report.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&report)?)?;
    let md = report.markdown();
    std::fs::write(a.out.join("tp-report.md"), &md)?;
    println!("{md}");
    println!("tp report: {}", json.display());
    Ok(if report.pass() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_or_say_why() {
        let c = parse_shape("2048, 4096,32,8,128,14336").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c, BlockConfig::LLAMA8B);
        assert!(parse_shape("1,2,3").is_err());
        assert!(parse_shape("1,2,3,4,5,x").is_err());
    }
}
