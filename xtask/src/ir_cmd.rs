//! `cargo xtask ir disasm FILE` prints our text for any Tile IR bytecode file; `cargo xtask ir reencode IN OUT`
//! reads a file and writes it back at the file's own version (13.4/13.5; older files are written at 13.5);
//! `cargo xtask ir check [PATH…]` checks both against tileirdisasm for many files (default: the corpus).

use std::path::{Path, PathBuf};

use cutile_ir::Version;
use cutile_ir::bytecode::{read_module_with_version, write_module};
use cutile_ir::print::{normalize, print_module};

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
    /// For every bytecode file (directories: every `.tilebc` in them; default: the cutile-ir corpus), check
    /// that `disasm` prints what tileirdisasm prints (after normalizing SSA names and spaces) and that
    /// `reencode` output, at every writable version the content allows, is accepted by tileirdisasm and
    /// prints the same.
    Check { paths: Vec<PathBuf> },
}

pub fn run(args: &Args) -> Result<(), BoxError> {
    match args {
        Args::Check { paths } => check(paths),
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

/// The `.tilebc` files named by `paths` (a directory contributes the files in it), sorted per directory.
fn bytecode_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, BoxError> {
    let default = [Path::new(env!("CARGO_MANIFEST_DIR")).join("../cutile/ir/tests/corpus")];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut out = vec![];
    for p in paths {
        if p.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("cannot list {}: {e}", p.display()))?
                .flatten()
                .map(|e| e.path())
                .filter(|f| f.extension().is_some_and(|x| x == "tilebc"))
                .collect();
            in_dir.sort();
            out.extend(in_dir);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// The first differing line of two texts after normalization, if any.
fn first_difference(ours: &str, theirs: &str) -> Option<String> {
    let (a, b) = (normalize(ours), normalize(theirs));
    if a == b {
        return None;
    }
    let (mut la, mut lb) = (a.lines(), b.lines());
    for i in 0.. {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => {}
            (x, y) => {
                return Some(format!(
                    "normalized line {i}:\n      ours:         {}\n      tileirdisasm: {}",
                    x.unwrap_or("<end>"),
                    y.unwrap_or("<end>")
                ));
            }
        }
    }
    unreachable!("the texts differ, so some line differs")
}

fn check(paths: &[PathBuf]) -> Result<(), BoxError> {
    let tileiras = crate::toolchain_cmd::ensure_toolchain()?;
    let files = bytecode_files(paths)?;
    let mut failed = 0usize;
    for file in &files {
        let problems = check_one(&tileiras, file)?;
        if problems.is_empty() {
            println!("ok    {}", file.display());
        } else {
            failed += 1;
            println!("FAIL  {}", file.display());
            for p in problems {
                println!("    {p}");
            }
        }
    }
    println!("{} files, {failed} failed", files.len());
    if failed > 0 {
        return Err(format!(
            "{failed} of {} files disagree with tileirdisasm",
            files.len()
        )
        .into());
    }
    Ok(())
}

/// What is wrong with one file (empty: disasm and every re-encoding agree with tileirdisasm).
fn check_one(tileiras: &cutile::toolchain::Tileiras, file: &Path) -> Result<Vec<String>, BoxError> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let (module, version, preview) = match read_module_with_version(&bytes) {
        Ok(r) => r,
        Err(e) => return Ok(vec![format!("our reader: {e}")]),
    };
    let theirs = match tileiras.disassemble(&bytes, preview) {
        Ok(t) => t,
        Err(e) => return Ok(vec![format!("tileirdisasm rejects the file itself: {e}")]),
    };
    let mut problems = vec![];
    if let Some(d) = first_difference(&print_module(&module), &theirs) {
        problems.push(format!("disasm differs at {d}"));
    }
    for target in Version::WRITABLE {
        let out = match write_module(&module, target) {
            Ok(out) => out,
            Err(e) if e.is_version_limit() && target < Version::LATEST => {
                continue;
            }
            Err(e) => {
                problems.push(format!("reencode at {target}: {e}"));
                continue;
            }
        };
        if target == version && out != bytes {
            // Informational: cuTile's files come back byte-identical; other producers' need not.
            eprintln!(
                "note: {} re-encoded at {target} is not byte-identical",
                file.display()
            );
        }
        match tileiras.disassemble(&out, preview) {
            Ok(text) => {
                if let Some(d) = first_difference(&text, &theirs) {
                    problems.push(format!(
                        "reencode at {target}: tileirdisasm prints it differently at {d}"
                    ));
                }
            }
            Err(e) => problems.push(format!(
                "reencode at {target}: tileirdisasm rejects it: {e}"
            )),
        }
    }
    Ok(problems)
}
