//! `cargo xtask report DIR [--against OLD_DIR] [--noise 0.05]`: the GPU harness's `report` run here, on
//! results brought back from the GPU machine: merges `bench.json` + `peers.json` (or re-renders a saved
//! `report.json`) into `report.md` and `plot-<op>.svg`, and with `--against` diffs two runs per shape
//! (`diff.md`; regressions beyond the noise band flagged, exit status 1 when any).

use std::path::PathBuf;

use crate::BoxError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A results folder (`bench.json` and `peers.json`, or `report.json`).
    pub dir: PathBuf,
    /// An older results folder to diff against.
    #[arg(long)]
    pub against: Option<PathBuf>,
    /// Relative noise band of the diff (0.05 = ±5%).
    #[arg(long, default_value_t = 0.05)]
    pub noise: f64,
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let code = gpu_harness::merge::report(&args.dir, args.against.as_deref(), args.noise)?;
    if code == std::process::ExitCode::SUCCESS {
        Ok(())
    } else {
        Err("regressions beyond the noise band (see diff.md)".into())
    }
}
