//! `cargo xtask`: workspace automation (toolchain install, the kernel compile table, tests, bytecode tools). `main` only parses the command line and dispatches; each subcommand lives in its own
//! file as `<name>_cmd.rs` with an `Args` struct and a `run` function.

mod aot_cmd;
mod fuzz_cmd;
mod gpu_cmd;
mod ir_cmd;
mod kernels_cmd;
mod report_cmd;
mod test_cmd;
mod toolchain_cmd;
mod wheel_check;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The workspace's root folder (the parent of this crate's manifest).
pub(crate) fn workspace_root() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

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
    /// Hostile-input fuzzing of the bytecode, .tilelib and bundle readers (mutated real files).
    Fuzz(fuzz_cmd::Args),
}

/// The system allocator, with per-thread accounting that `cargo xtask fuzz` turns on while a reader runs
/// (see `fuzz_cmd::account`); otherwise it only checks a thread-local flag.
struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the accounting only
// reads and writes thread-local cells and never allocates.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        fuzz_cmd::account(layout.size(), 0, layout.size());
        // SAFETY: forwarded from the caller.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        fuzz_cmd::account(layout.size(), 0, layout.size());
        // SAFETY: forwarded from the caller.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        fuzz_cmd::account(0, layout.size(), 0);
        // SAFETY: forwarded from the caller.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        fuzz_cmd::account(new_size, layout.size(), new_size);
        // SAFETY: forwarded from the caller.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

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
        Command::Fuzz(args) => fuzz_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
