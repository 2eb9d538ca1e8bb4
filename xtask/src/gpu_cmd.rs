//! `cargo xtask gpu prepare [--arch sm_90] [--dir .gpu]`: everything a run on the GPU machine needs, which
//! has no cargo, no tileiras and no network: builds the `gpu-harness` binary in release mode (stripped),
//! runs its `plan` step to compile every launch it will make into an AOT bundle (every tuning candidate
//! included), compresses the binary (`gpu-harness.xz`), copies the Triton peer kernels
//! (`reference/tr_kernels.py`) when they lie beside the checkout, all into the git-ignored `.gpu/`, and
//! prints the device commands. The bundle-only one ([`bundle_run_command`]) runs fixed checks, bench,
//! tune, the launch-overhead phases, the peers and the report in one device call, each step under a time
//! budget, and returns a tarball plus three summary files (docs/gpu-runner.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BoxError;

#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Build the GPU harness (+ `.xz`) and its kernel bundle into `.gpu/`; print the device commands.
    Prepare(PrepareArgs),
    /// Build the harness and run `gpu-harness check ARGS..` here.
    Check(PassArgs),
    /// Build the harness and run `gpu-harness bench ARGS..` here.
    Bench(PassArgs),
    /// Build the harness and run `gpu-harness validate ARGS..` here.
    Validate(PassArgs),
}

/// Arguments passed on to the harness unchanged.
#[derive(Debug, clap::Args)]
pub struct PassArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct PrepareArgs {
    /// Architectures to compile the bundle for (the H200 is sm_90).
    #[arg(long, default_value = "sm_90")]
    pub arch: String,
    /// Output folder, relative to the workspace root.
    #[arg(long, default_value = ".gpu")]
    pub dir: PathBuf,
}

/// What the device tool may carry in all (checkout included).
const TRANSFER_LIMIT: u64 = 64 << 20;
/// The longest command the device tool takes.
const DEVICE_COMMAND_LIMIT: usize = 2000;

pub fn run(args: &Args) -> Result<(), BoxError> {
    match args {
        Args::Prepare(a) => prepare(a),
        Args::Check(p) => pass("check", p),
        Args::Bench(p) => pass("bench", p),
        Args::Validate(p) => pass("validate", p),
    }
}

/// Builds the release harness and returns its path.
fn build_harness(root: &Path) -> Result<PathBuf, BoxError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("==> cargo build --release -p gpu-harness");
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--release", "-p", "gpu-harness"])
        .status()?;
    check(status, "building gpu-harness")?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let built = target.join("release").join("gpu-harness");
    if !built.is_file() {
        return Err(format!("the build did not produce {}", built.display()).into());
    }
    Ok(built)
}

fn pass(sub: &str, p: &PassArgs) -> Result<(), BoxError> {
    let root = crate::workspace_root();
    let bin = build_harness(&root)?;
    let status = Command::new(&bin)
        .current_dir(&root)
        .arg(sub)
        .args(&p.args)
        .status()?;
    check(status, &format!("gpu-harness {sub}"))
}

fn check(status: std::process::ExitStatus, what: &str) -> Result<(), BoxError> {
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})").into())
    }
}

fn prepare(args: &PrepareArgs) -> Result<(), BoxError> {
    let root = crate::workspace_root();
    let built = build_harness(&root)?;
    let dir = root.join(&args.dir);
    std::fs::create_dir_all(&dir)?;
    let bin = dir.join("gpu-harness");
    std::fs::copy(&built, &bin)?;
    let bundle = dir.join("kernels.bundle");
    eprintln!(
        "==> gpu-harness plan --arch {} --bundle {}",
        args.arch,
        bundle.display()
    );
    let status = Command::new(&bin)
        .current_dir(&root)
        .args(["plan", "--arch", &args.arch, "--bundle"])
        .arg(&bundle)
        .status()?;
    check(status, "gpu-harness plan")?;
    let xz = dir.join("gpu-harness.xz");
    eprintln!("==> xz -9 -T1 {}", rel_to(&root, &xz));
    let out = std::fs::File::create(&xz)?;
    let status = Command::new("xz")
        .args(["-9", "-T1", "-c"])
        .arg(&bin)
        .stdout(out)
        .status()
        .map_err(|e| format!("running xz (install xz-utils): {e}"))?;
    check(status, "xz")?;
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let (b, k, z) = (size(&bin), size(&bundle), size(&xz));
    let rel = |p: &Path| rel_to(&root, p);
    let mib = |n: u64| n as f64 / (1 << 20) as f64;
    println!(
        "ready: {} ({:.1} MiB; {} {:.2} MiB) and {} ({:.1} MiB)",
        rel(&bin),
        mib(b),
        rel(&xz),
        mib(z),
        rel(&bundle),
        mib(k)
    );
    if k + z > TRANSFER_LIMIT / 2 {
        eprintln!(
            "warning: {:.1} MiB is over half of the 64 MiB the device tool carries with the checkout",
            mib(k + z)
        );
    }
    let (d, bu) = (rel(&dir), rel(&bundle));
    let reference = copy_triton_kernels(&root, &dir)?;
    let unpack = format!("xz -dc {d}/gpu-harness.xz > /tmp/gh && chmod +x /tmp/gh");
    let bundle_run = bundle_run_command(&d, &bu);
    if bundle_run.len() > DEVICE_COMMAND_LIMIT {
        eprintln!(
            "warning: the bundle-only command is {} characters, over the device's {DEVICE_COMMAND_LIMIT}",
            bundle_run.len()
        );
    }
    println!(
        "\ncarry only what a run needs (the uncompressed binary stays here):\n  \
         bundle-only run ({} characters; returns {}), carry [\"{d}/gpu-harness.xz\", \"{bu}\", \"{d}/reference\"]{}:\n    \
         {bundle_run}",
        bundle_run.len(),
        BUNDLE_RUN_FILES.join(", "),
        match reference {
            Some(_) => String::new(),
            None => " (no tr_kernels.py found: the Triton peers are skipped)".into(),
        },
    );
    println!(
        "  \
         toolchain run (property check with JIT), carry [\"{d}/gpu-harness.xz\", \"{d}/tc\"]:\n    \
         {unpack} && tar -xJf {d}/tc/tc135.tar.xz -C /tmp && \
         unset CUDA_HOME CUDA_PATH CUDA_ROOT; \
         CUTILE_TILEIRAS=/tmp/nvidia/cu13/bin/tileiras /tmp/gh check --cases 300 --seed 1 --out $OUT\n  \
         node burn-in (one process per GPU; --processes-per-gpu 2 on one H200):\n    \
         {unpack} && /tmp/gh validate --bundle {bu} --fixed-check --out $OUT --processes-per-gpu 2"
    );
    if let Some((p1, p2)) = stage_toolchain(&dir)? {
        let (p1, p2) = (rel(&p1), rel(&p2));
        println!(
            "  staged full run (ci/gpu/device-run.sh; four calls back to back, the machine stays warm ~30 s):\n    \
             carry [\"{p1}\"]: bash ci/gpu/device-run.sh tc1\n    \
             carry [\"{p2}\"]: bash ci/gpu/device-run.sh run\n    \
             carry []: bash ci/gpu/device-run.sh bench\n    \
             carry [\"{d}/reference\"]: bash ci/gpu/device-run.sh peers"
        );
    }
    Ok(())
}

/// Bytes of the toolchain archive's first part: the part plus the checkout stay under the transfer
/// limit in one call.
const TOOLCHAIN_PART: usize = 40_000_000;

/// Splits `dir/tc/tc135.tar.xz` (from ../shared/bench/reference/make-toolchain-archive.sh), when there,
/// into `dir/p1/tc.part1` and `dir/p2/tc.part2`, and puts the compressed harness beside part 2: the
/// carries of `ci/gpu/device-run.sh`'s stages `tc1` and `run`. Returns the two folders.
fn stage_toolchain(dir: &Path) -> Result<Option<(PathBuf, PathBuf)>, BoxError> {
    stage_toolchain_cut(dir, TOOLCHAIN_PART)
}

fn stage_toolchain_cut(dir: &Path, part: usize) -> Result<Option<(PathBuf, PathBuf)>, BoxError> {
    let archive = dir.join("tc").join("tc135.tar.xz");
    if !archive.is_file() {
        return Ok(None);
    }
    let bytes = std::fs::read(&archive)?;
    let (p1, p2) = (dir.join("p1"), dir.join("p2"));
    for p in [&p1, &p2] {
        std::fs::create_dir_all(p)?;
    }
    let cut = bytes.len().min(part);
    std::fs::write(p1.join("tc.part1"), &bytes[..cut])?;
    std::fs::write(p2.join("tc.part2"), &bytes[cut..])?;
    std::fs::copy(dir.join("gpu-harness.xz"), p2.join("gh.xz"))?;
    Ok(Some((p1, p2)))
}

/// Seconds each step of the bundle-only run may take (SIGTERM, then SIGKILL 5 s later): together
/// under the device's 600 s per command, with room to unpack and pack. A step stopped by its budget
/// keeps what it wrote (bench, tune and peers rewrite their JSON after every call).
pub const STEP_BUDGETS: [(&str, u32); 6] = [
    ("check", 120),
    ("bench", 100),
    ("tune", 150),
    ("run", 45),
    ("peers", 130),
    ("report", 15),
];

/// Files the bundle-only run leaves at the top of `$OUT` (the device returns at most 8, no deeper
/// than two folder levels): everything in one tarball, and the three files to read first.
pub const BUNDLE_RUN_FILES: [&str; 4] = ["results.tar.gz", "steps.txt", "report.md", "check.json"];

/// The device command of a bundle-only run (carry `{d}/gpu-harness.xz`, `{bundle}`, `{d}/reference`):
/// unpacks the harness, runs every step into `/tmp/gpu-run` with its log and budget
/// ([`STEP_BUDGETS`]), then packs that folder (less criterion's own files) into
/// `$OUT/results.tar.gz` and copies [`BUNDLE_RUN_FILES`]' summaries beside it. stdout: each step's exit
/// status and last lines, then every `FAILED` / `ERROR` / `NOT COVERED` line.
pub fn bundle_run_command(d: &str, bundle: &str) -> String {
    let budget = |name: &str| {
        STEP_BUDGETS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(60, |(_, s)| *s)
    };
    let steps = [
        (
            "check",
            "/tmp/gh check --fixed --bundle $B --out $R".to_string(),
        ),
        (
            "bench",
            "/tmp/gh bench --bundle $B --out $R --measurement-ms 100 --warm-up-ms 25".into(),
        ),
        ("tune", "/tmp/gh tune --bundle $B --out $R/tune".into()),
        ("run", "/tmp/gh run --bundle $B --out $R".into()),
        (
            "peers",
            "python3 ci/gpu/peers.py $R/peers.json --calls $R/bench-calls.json".into(),
        ),
        ("report", "/tmp/gh report $R".into()),
    ];
    let mut cmd = format!(
        "R=/tmp/gpu-run; B={bundle}; rm -rf $R; mkdir -p $R; \
         xz -dc {d}/gpu-harness.xz > /tmp/gh && chmod +x /tmp/gh || exit 2; \
         step() {{ n=$1; t=$2; shift 2; timeout -k 5 $t \"$@\" > $R/$n.log 2>&1; \
         echo \"$n: exit $? (budget $t s)\" | tee -a $R/steps.txt; tail -n 3 $R/$n.log; }}; "
    );
    for (name, line) in steps {
        cmd.push_str(&format!("step {name} {} {line}; ", budget(name)));
    }
    cmd.push_str(
        "tar -czf $OUT/results.tar.gz --exclude=./criterion -C $R .; \
         cp $R/steps.txt $R/report.md $R/check.json $OUT/ 2>/dev/null; \
         grep -h 'FAILED\\|ERROR\\|NOT COVERED' $R/*.log | head -n 60; cat $R/steps.txt",
    );
    cmd
}

/// Copies the Triton peer kernels into `dir/reference/tr_kernels.py` (what `peers.py` looks for first)
/// from `shared/bench/reference/` beside the checkout, when there; returns the copy, or an existing
/// one.
fn copy_triton_kernels(root: &Path, dir: &Path) -> Result<Option<PathBuf>, BoxError> {
    let dest = dir.join("reference").join("tr_kernels.py");
    let src = root
        .parent()
        .map(|p| p.join("shared/bench/reference/tr_kernels.py"));
    match src {
        Some(src) if src.is_file() => {
            std::fs::create_dir_all(dest.parent().unwrap_or(dir))?;
            std::fs::copy(&src, &dest)?;
            Ok(Some(dest))
        }
        _ => Ok(dest.is_file().then_some(dest)),
    }
}

fn rel_to(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toolchain_is_staged_in_two_parts_that_concatenate_back() -> Result<(), BoxError> {
        let dir = std::env::temp_dir().join(format!("xtask-stage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            stage_toolchain_cut(&dir, 4)?.is_none(),
            "no archive, nothing staged"
        );
        std::fs::create_dir_all(dir.join("tc"))?;
        let archive: Vec<u8> = (0..10u8).collect();
        std::fs::write(dir.join("tc/tc135.tar.xz"), &archive)?;
        std::fs::write(dir.join("gpu-harness.xz"), b"gh")?;
        let (p1, p2) = stage_toolchain_cut(&dir, 4)?.ok_or("not staged")?;
        let mut joined = std::fs::read(p1.join("tc.part1"))?;
        assert_eq!(joined.len(), 4);
        joined.extend(std::fs::read(p2.join("tc.part2"))?);
        assert_eq!(joined, archive);
        assert_eq!(std::fs::read(p2.join("gh.xz"))?, b"gh");
        std::fs::remove_dir_all(&dir)?;
        // The stages the printed commands name exist in the script.
        let script = include_str!("../../ci/gpu/device-run.sh");
        for stage in [
            "tc1)", "run)", "bench)", "peers)", "tc.part1", "tc.part2", "gh.xz",
        ] {
            assert!(script.contains(stage), "{stage}");
        }
        Ok(())
    }

    #[test]
    fn the_bundle_run_fits_one_device_call() {
        let cmd = bundle_run_command(".gpu", ".gpu/kernels.bundle");
        assert!(
            cmd.len() <= DEVICE_COMMAND_LIMIT,
            "{} characters",
            cmd.len()
        );
        let total: u32 = STEP_BUDGETS.iter().map(|(_, s)| s + 5).sum();
        assert!(total <= 590, "step budgets {total} s");
        for (step, _) in STEP_BUDGETS {
            assert!(cmd.contains(&format!("step {step} ")), "{step}");
        }
        for sub in [
            "check --fixed",
            "bench ",
            "tune ",
            "run ",
            "peers.py",
            "report ",
        ] {
            assert!(cmd.contains(sub), "{sub}");
        }
        // Only the tarball and the summaries are written to $OUT, at its top.
        let writes: Vec<&str> = cmd.split("$OUT").skip(1).collect();
        assert!(writes.len() <= 2, "{writes:?}");
        assert!(BUNDLE_RUN_FILES.len() <= 8);
        assert!(!cmd.contains("$OUT/tune") && !cmd.contains("--out $OUT"));
    }
}
