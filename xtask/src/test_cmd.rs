//! `cargo xtask test`: the README's test command and what CI runs. First the gates: `cargo fmt --all --check`
//! and `cargo clippy --workspace --all-targets -- -D warnings` must pass. Then it installs the toolchain on
//! first use, points every test at it (`CUTILE_TILEIRAS`; `CUTILE_REQUIRE_TOOLS=1` so tool-dependent tests fail rather than
//! skip), runs the workspace's tests, builds and checks the Python wheel ([`crate::wheel_check`]), then
//! compiles the kernel catalog's CI subset (`kernels --subset`: every specialization for sm_90, one per kernel
//! entry for sm_80, sm_100 and sm_120) with the real tileiras. GPU tests report themselves as skipped on machines without one.

use std::process::Command;

use crate::BoxError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Extra arguments passed to `cargo test` (after `--workspace`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub cargo_args: Vec<String>,
    /// Skip the catalog compile step.
    #[arg(long)]
    pub no_kernels: bool,
    /// Skip the formatting and clippy gates (for iterating locally; CI never passes it).
    #[arg(long)]
    pub no_gates: bool,
    /// Skip the Python wheel's build and CPU checks.
    #[arg(long)]
    pub no_wheel: bool,
}

/// The gates run before the tests: the command, and what to do when it fails.
const GATES: [(&str, &[&str], &str); 2] = [
    (
        "formatting",
        &["fmt", "--all", "--check"],
        "run `cargo fmt --all` and commit the result",
    ),
    (
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        "fix the warnings clippy printed above (`cargo clippy --workspace --all-targets -- -D warnings`)",
    ),
];

/// Run each gate in order; the first failure names the gate, its command and the fix.
fn gates(cargo: &std::ffi::OsStr) -> Result<(), BoxError> {
    for (name, gate_args, fix) in GATES {
        let shown = format!("cargo {}", gate_args.join(" "));
        eprintln!("==> {shown}");
        let status = Command::new(cargo)
            .args(gate_args)
            .status()
            .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
        if !status.success() {
            return Err(format!("the {name} gate failed (`{shown}`, {status}): {fix}").into());
        }
    }
    Ok(())
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    if !args.no_gates {
        gates(&cargo)?;
    }
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let mut cmd = Command::new(cargo);
    cmd.args(["test", "--workspace", "--all-targets"])
        .args(&args.cargo_args)
        .env("CUTILE_TILEIRAS", tileiras.path())
        // The toolchain was just ensured, so a test that needs a tool must not pass by skipping.
        .env("CUTILE_REQUIRE_TOOLS", "1");
    if let Some(d) = &tileiras.info().tileirdisasm {
        cmd.env("CUTILE_TILEIRDISASM", d);
    }
    eprintln!(
        "==> cargo test --workspace --all-targets {}",
        args.cargo_args.join(" ")
    );
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo test failed ({status})").into());
    }
    if !args.no_wheel {
        let root = crate::workspace_root();
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        crate::wheel_check::run(&root, &target)?;
    }
    if !args.no_kernels {
        eprintln!(
            "==> cargo xtask kernels --subset --arch {}",
            crate::kernels_cmd::DEFAULT_ARCHS
        );
        crate::kernels_cmd::run(&crate::kernels_cmd::Args {
            arch: crate::kernels_cmd::DEFAULT_ARCHS
                .split(',')
                .map(String::from)
                .collect(),
            bytecode: "13.5".into(),
            filter: None,
            out: None,
            jobs: None,
            full: false,
            subset: true,
            list: false,
        })?;
    }
    Ok(())
}
