//! `cargo xtask ir disasm FILE` prints our text for any Tile IR bytecode file; `cargo xtask ir reencode IN OUT`
//! reads a file and writes it back at the file's own version (13.4/13.5; older files are written at 13.5).

use std::path::PathBuf;

use cutile_ir::Version;
use cutile_ir::bytecode::{read_module_with_version, write_module};
use cutile_ir::print::print_module;

use crate::BoxError;

#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Print the text form of a bytecode file.
    Disasm { file: PathBuf },
    /// Read a bytecode file and write it back.
    Reencode {
        input: PathBuf,
        output: PathBuf,
        /// Write at this version instead of the file's own.
        #[arg(long)]
        version: Option<String>,
    },
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    match args {
        Args::Disasm { file } => {
            let bytes =
                std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let (module, _, _) = read_module_with_version(&bytes)?;
            print!("{}", print_module(&module));
            Ok(())
        }
        Args::Reencode {
            input,
            output,
            version,
        } => {
            let bytes = std::fs::read(input)
                .map_err(|e| format!("cannot read {}: {e}", input.display()))?;
            let (module, file_version, _) = read_module_with_version(&bytes)?;
            let target = match version {
                Some(v) => v.parse::<Version>()?,
                None if file_version.is_writable() => file_version,
                None => Version::LATEST,
            };
            let out = write_module(&module, target)?;
            std::fs::write(output, &out)
                .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
            eprintln!(
                "{} ({file_version}, {} bytes) -> {} ({target}, {} bytes){}",
                input.display(),
                bytes.len(),
                output.display(),
                out.len(),
                if out == bytes { ", identical" } else { "" }
            );
            Ok(())
        }
    }
}
