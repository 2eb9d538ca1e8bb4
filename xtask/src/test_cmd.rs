//! `cargo xtask test`: the README's test command and what CI runs. Installs the toolchain on first use, points
//! every test at it (`CUTILE_TILEIRAS`; `CUTILE_REQUIRE_TOOLS=1` so tool-dependent tests fail rather than
//! skip), runs the workspace's tests, then compiles the whole kernel catalog for the CI architectures with the
//! real tileiras. GPU tests report themselves as skipped on machines without one.

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
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
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
    if !args.no_kernels {
        eprintln!(
            "==> cargo xtask kernels --arch {}",
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
        })?;
    }
    Ok(())
}
