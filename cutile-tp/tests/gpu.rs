//! The block on the GPU(s) of this machine: correctness for every rank count it has (1 at least,
//! through NCCL, which must be loadable: see docs/multi-gpu.md), plain and overlapped. Ignored
//! without a GPU; prints `skipped` and returns when no device or driver is found.

use cutile_tp::report::RowStatus;
use cutile_tp::sweep::{SweepArgs, sweep};

#[test]
#[ignore = "needs a CUDA GPU"]
fn block_is_correct_on_every_rank_count_of_this_machine() {
    let gpus = match cutile::runtime::Device::count() {
        Ok(n) if n > 0 => n,
        _ => {
            println!("skipped: no CUDA device");
            return;
        }
    };
    let ranks: Vec<usize> = [1, 2, 4, 8].into_iter().filter(|&n| n <= gpus).collect();
    let args = SweepArgs {
        ranks,
        no_timing: true,
        ..SweepArgs::default()
    };
    let r = sweep(&args).unwrap_or_else(|e| panic!("{e}"));
    println!("{}", r.markdown());
    assert!(r.single_err_vs_cpu.is_some_and(|e| e <= args.tolerance));
    for row in &r.rows {
        assert_eq!(row.status, RowStatus::Ok, "{} GPU(s)", row.ranks);
    }
}
