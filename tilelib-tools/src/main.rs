//! The `tilelib` command: inspect tile libraries, generate their Rust declarations, package new ones.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tilelib_tools::{declare, inspect, package};

#[derive(Parser, Debug)]
#[command(
    name = "tilelib",
    version,
    about = "Inspect, declare and package CUDA Tile IR tile libraries (.tilelib)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List a library's foreign functions and implementation files (also accepts a bare interface .tilebc).
    Inspect {
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Generate a Rust module of `#[cutile::foreign]` declarations for a library's functions.
    Declare {
        file: PathBuf,
        /// Write the module here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Check an interface and implementation files, then package them with tileiras.
    Package {
        /// Interface bytecode (extern declarations only, 13.5 with the preview flag).
        #[arg(long)]
        interface: PathBuf,
        /// Implementation file (bytecode, cubin, fatbin, LTOIR or provider .so); repeat in order.
        #[arg(long = "impl", value_name = "FILE")]
        implementations: Vec<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
        /// Skip this tool's checks and let tileiras judge the inputs.
        #[arg(long)]
        no_check: bool,
        /// The tileiras executable (default: cutile's toolchain search).
        #[arg(long)]
        tileiras: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn read(path: &Path) -> Result<Vec<u8>, BoxError> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()).into())
}

fn run(cli: Cli) -> Result<(), BoxError> {
    match cli.command {
        Command::Inspect { file, json } => {
            let report = inspect::inspect(&read(&file)?)?;
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{report}");
            }
        }
        Command::Declare { file, output } => {
            let report = inspect::inspect(&read(&file)?)?;
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let decls = declare::declare(&report.interface, &name);
            for s in &decls.skipped {
                eprintln!("warning: `{}` not declared: {}", s.symbol, s.reason);
            }
            match output {
                Some(out) => std::fs::write(&out, &decls.source)
                    .map_err(|e| format!("cannot write {}: {e}", out.display()))?,
                None => print!("{}", decls.source),
            }
        }
        Command::Package {
            interface,
            implementations,
            output,
            no_check,
            tileiras,
        } => {
            if !no_check {
                let plan = package::validate(&interface, &implementations)?;
                for w in &plan.warnings {
                    eprintln!("warning: {w}");
                }
                eprint!("{plan}");
            }
            let tileiras = match tileiras {
                Some(p) => cutile::toolchain::Tileiras::at(p)?,
                None => cutile::toolchain::Tileiras::discover()?,
            };
            package::create(&tileiras, &interface, &implementations, &output)?;
            eprintln!("wrote {}", output.display());
        }
    }
    Ok(())
}
