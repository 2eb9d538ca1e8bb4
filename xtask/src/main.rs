//! `cargo xtask`: workspace automation (toolchain install, the kernel compile table, tests, bytecode tools). `main` only parses the command line and dispatches; each subcommand lives in its own
//! file as `<name>_cmd.rs` with an `Args` struct and a `run` function.

mod aot_cmd;
mod gpu_cmd;
mod ir_cmd;
mod kernels_cmd;
mod report_cmd;
mod test_cmd;
mod toolchain_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Error type shared by the subcommands: anything printable, reported once by `main`.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "Workspace automation for cutile"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install (or verify) the tileiras toolchain and show where it is.
    Toolchain(toolchain_cmd::Args),
    /// The main job: build every catalog kernel, compile it with tileiras per arch, print a table.
    Kernels(kernels_cmd::Args),
    /// Run the test suite (installs the toolchain on first use), then compile the catalog.
    Test(test_cmd::Args),
    /// Bytecode utilities: disassemble to our text, re-encode.
    #[command(subcommand)]
    Ir(ir_cmd::Args),
    /// Compile the catalog's DSL specializations for some archs into one AOT bundle.
    Aot(aot_cmd::Args),
    /// GPU runs: `prepare` builds the harness (+ .xz) and its kernel bundle into `.gpu/`;
    /// `check|bench|validate` build the harness and run it here (a machine with a GPU).
    #[command(subcommand)]
    Gpu(gpu_cmd::Args),
    /// Render a results folder (report.md, SVG plots); `--against OLD` diffs two runs.
    Report(report_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Toolchain(args) => toolchain_cmd::run(&args),
        Command::Kernels(args) => kernels_cmd::run(&args),
        Command::Test(args) => test_cmd::run(&args),
        Command::Ir(args) => ir_cmd::run(&args),
        Command::Aot(args) => aot_cmd::run(&args),
        Command::Gpu(args) => gpu_cmd::run(&args),
        Command::Report(args) => report_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
