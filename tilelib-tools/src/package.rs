//! `tilelib package`: check an interface and implementation files before tileiras sees them, package them
//! with `tileiras --preview-create-tile-lib` (through `cutile::toolchain`), and put tileiras's refusals
//! (toolchain.md §4.4) in plain words.
//!
//! The checks mirror what tileiras 13.5 enforces, so most mistakes are reported with the offending file named
//! before any process runs; [`create`] alone skips them and lets tileiras judge.

use crate::interface::{Interface, InterfaceError};
use crate::kind::{FileKind, classify};
use cutile::toolchain::{Tileiras, ToolchainError};
use std::fmt;
use std::path::{Path, PathBuf};

/// The only bytecode version that may carry preview content (extern declarations and implementations).
pub const REQUIRED_VERSION: (u8, u8) = (13, 5);

/// Checked inputs, ready for tileiras.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub interface_path: PathBuf,
    pub interface: Interface,
    /// Implementation files in command-line order, with their kinds.
    pub implementations: Vec<(PathBuf, FileKind)>,
    /// Accepted but questionable inputs (printed by the CLI).
    pub warnings: Vec<String>,
}

/// Why a library was not packaged.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "interface {} is not Tile IR bytecode (it is {kind}); pass the bytecode file holding the extern \
         declarations as --interface",
        .path.display()
    )]
    InterfaceNotBytecode { path: PathBuf, kind: FileKind },
    #[error(
        "{role} {} is {kind}, but tile libraries need bytecode 13.5 with the preview flag (preview content \
         is only valid at the newest version); write it at 13.5 with preview content enabled",
        .path.display()
    )]
    WrongBytecodeVersion {
        role: &'static str,
        path: PathBuf,
        kind: FileKind,
    },
    #[error("interface {}: {source}", .path.display())]
    Interface {
        path: PathBuf,
        source: InterfaceError,
    },
    #[error(
        "interface {} may hold only extern declarations (preview$func extern), but it also has {}; move \
         kernels and implementations out of the interface",
        .path.display(), .functions.join(", ")
    )]
    InterfaceNotOnlyDeclarations {
        path: PathBuf,
        functions: Vec<String>,
    },
    #[error("interface {} declares no foreign function, so the library would offer nothing", .path.display())]
    InterfaceEmpty { path: PathBuf },
    #[error(
        "no implementation given: interface-only tile libraries are not allowed; add --impl with either an \
         implementation-provider shared library, or a Tile IR bytecode file with the extern_impl entries \
         plus the pre-compiled code (cubin, fatbin or LTOIR) defining them"
    )]
    NoImplementation,
    #[error(
        "implementation {} is of unknown kind ({reason}); implementations must be Tile IR bytecode, a cubin, \
         a fatbin, LTOIR (`nvcc -dlto --ltoir`) or an implementation-provider shared library",
        .path.display()
    )]
    UnknownImplementation { path: PathBuf, reason: String },
    #[error(
        "pre-compiled code ({}) needs the Tile IR bytecode that describes it (its extern_impl entries); add \
         that bytecode file with --impl",
        list(.paths)
    )]
    PrecompiledWithoutBytecode { paths: Vec<PathBuf> },
    #[error(
        "{} Tile IR bytecode implementations given ({}); a library holds exactly one, so merge them into one \
         module",
        .paths.len(), list(.paths)
    )]
    SeveralBytecodes { paths: Vec<PathBuf> },
    #[error(
        "{} pre-compiled code files given ({}); a static library pairs its bytecode with exactly one \
         cubin, fatbin or LTOIR file (a fatbin can hold several architectures)",
        .paths.len(), list(.paths)
    )]
    SeveralPrecompiled { paths: Vec<PathBuf> },
    #[error("tileiras refused to create the library: {explanation}\n  tileiras said: {said}", said = .messages.join(" / "))]
    Refused {
        /// Plain-words reading of tileiras's message.
        explanation: String,
        /// tileiras's own `error:` lines.
        messages: Vec<String>,
        /// The full toolchain error (exit status, stderr, reproduction command).
        source: Box<ToolchainError>,
    },
    #[error(transparent)]
    Toolchain(Box<ToolchainError>),
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn read(path: &Path) -> Result<Vec<u8>, PackageError> {
    std::fs::read(path).map_err(|source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn is_current_preview(kind: &FileKind) -> bool {
    matches!(kind, FileKind::TileIrBytecode { major, minor, preview: true, unknown_tag_bits: 0 }
        if (*major, *minor) == REQUIRED_VERSION)
}

/// Check the inputs without running anything.
pub fn validate(interface: &Path, implementations: &[PathBuf]) -> Result<Plan, PackageError> {
    let bytes = read(interface)?;
    let kind = classify(&bytes);
    if !kind.is_bytecode() {
        return Err(PackageError::InterfaceNotBytecode {
            path: interface.to_path_buf(),
            kind,
        });
    }
    if !is_current_preview(&kind) {
        return Err(PackageError::WrongBytecodeVersion {
            role: "interface",
            path: interface.to_path_buf(),
            kind,
        });
    }
    let parsed = Interface::from_bytecode(&bytes).map_err(|source| PackageError::Interface {
        path: interface.to_path_buf(),
        source,
    })?;
    if !parsed.other_functions.is_empty() {
        return Err(PackageError::InterfaceNotOnlyDeclarations {
            path: interface.to_path_buf(),
            functions: parsed
                .other_functions
                .iter()
                .map(|o| format!("{} `{}`", o.kind, o.name))
                .collect(),
        });
    }
    if parsed.functions.is_empty() {
        return Err(PackageError::InterfaceEmpty {
            path: interface.to_path_buf(),
        });
    }
    if implementations.is_empty() {
        return Err(PackageError::NoImplementation);
    }
    let mut kinds = Vec::new();
    for path in implementations {
        let kind = classify(&read(path)?);
        match &kind {
            FileKind::Unknown { reason } => {
                return Err(PackageError::UnknownImplementation {
                    path: path.clone(),
                    reason: reason.clone(),
                });
            }
            FileKind::TileIrBytecode { .. } if !is_current_preview(&kind) => {
                return Err(PackageError::WrongBytecodeVersion {
                    role: "implementation",
                    path: path.clone(),
                    kind,
                });
            }
            _ => {}
        }
        kinds.push((path.clone(), kind));
    }
    let warnings = check_combination(&kinds)?;
    Ok(Plan {
        interface_path: interface.to_path_buf(),
        interface: parsed,
        implementations: kinds,
        warnings,
    })
}

/// tileiras accepts (1) one bytecode file plus at most one pre-compiled code file, or (2) provider libraries.
fn check_combination(kinds: &[(PathBuf, FileKind)]) -> Result<Vec<String>, PackageError> {
    let paths = |pred: fn(&FileKind) -> bool| -> Vec<PathBuf> {
        kinds
            .iter()
            .filter(|(_, k)| pred(k))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let bytecode = paths(FileKind::is_bytecode);
    let precompiled = paths(FileKind::is_precompiled);
    if bytecode.len() > 1 {
        return Err(PackageError::SeveralBytecodes { paths: bytecode });
    }
    if precompiled.len() > 1 {
        return Err(PackageError::SeveralPrecompiled { paths: precompiled });
    }
    if bytecode.is_empty() && !precompiled.is_empty() {
        return Err(PackageError::PrecompiledWithoutBytecode { paths: precompiled });
    }
    let mut warnings = Vec::new();
    if !bytecode.is_empty() && precompiled.is_empty() {
        warnings.push(
            "the bytecode implementation comes without pre-compiled code (cubin, fatbin or LTOIR); tileiras \
             accepts this, but nothing will define the symbols its extern_impl entries name"
                .to_string(),
        );
    }
    Ok(warnings)
}

/// Run tileiras on the inputs as given (no checks), mapping a refusal to [`PackageError::Refused`].
pub fn create(
    tileiras: &Tileiras,
    interface: &Path,
    implementations: &[PathBuf],
    out: &Path,
) -> Result<(), PackageError> {
    match tileiras.create_tile_library(interface, implementations, out) {
        Ok(()) => Ok(()),
        Err(e) => {
            let messages = e
                .tool_failure()
                .map(|f| f.messages.clone())
                .unwrap_or_default();
            match &e {
                ToolchainError::TileLibraryRefused(_) => Err(PackageError::Refused {
                    explanation: explain(&messages).to_string(),
                    messages,
                    source: Box::new(e),
                }),
                _ => Err(PackageError::Toolchain(Box::new(e))),
            }
        }
    }
}

/// Validate, then package. Returns the plan that was packaged.
pub fn package(
    tileiras: &Tileiras,
    interface: &Path,
    implementations: &[PathBuf],
    out: &Path,
) -> Result<Plan, PackageError> {
    let plan = validate(interface, implementations)?;
    create(tileiras, interface, implementations, out)?;
    Ok(plan)
}

/// Known tileiras refusals (a fragment of its message) and what they mean.
const EXPLANATIONS: &[(&str, &str)] = &[
    (
        "interface-only tile libraries are not allowed",
        "the library has no implementation. Add --impl with an implementation-provider shared library, or \
         with a Tile IR bytecode file (extern_impl entries) plus the cubin, fatbin or LTOIR defining them.",
    ),
    (
        "must provide either an implementation-provider shared library or a static implementation catalog",
        "pre-compiled code (cubin, fatbin or LTOIR) cannot stand alone: tileiras also needs the Tile IR \
         bytecode file describing the implementations. Add it with --impl.",
    ),
    (
        "must provide exactly one tile bytecode file",
        "more than one implementation file is Tile IR bytecode; a library takes exactly one, so merge them.",
    ),
    (
        "implementation files must be one of two options",
        "the implementation files are not an accepted set: give either one Tile IR bytecode file plus one \
         pre-compiled code file (LTOIR, cubin or fatbin), or one implementation-provider shared library.",
    ),
    (
        "may only contain extern",
        "the interface file holds something besides foreign function declarations (a kernel entry or an \
         implementation). Keep only `preview$func extern` declarations in it.",
    ),
    (
        "must provide tile IR bytecode for tile lib interface file",
        "the interface file is not Tile IR bytecode. Pass the bytecode holding the extern declarations.",
    ),
    (
        "unable to read interface file",
        "tileiras could not open the interface file; check the --interface path.",
    ),
    (
        "unable to read implementation file",
        "tileiras could not open an implementation file; check the --impl paths.",
    ),
    (
        "preview content is only valid at the current version",
        "a bytecode file with preview content is older than 13.5; preview content is only readable at 13.5.",
    ),
    (
        "unsupported Tile IR bytecode version",
        "a bytecode file has a version this tileiras cannot read (it reads 13.1 to 13.5).",
    ),
    (
        "input does not correspond to Tile IR bytecode",
        "a file given as bytecode is malformed or fails verification; run tileirdisasm on it for details.",
    ),
];

/// A plain-words reading of tileiras's `error:` lines (the first known message wins).
pub fn explain(messages: &[String]) -> &'static str {
    messages
        .iter()
        .find_map(|m| {
            EXPLANATIONS
                .iter()
                .find(|(fragment, _)| m.contains(fragment))
                .map(|(_, e)| *e)
        })
        .unwrap_or("tileiras gave a reason this tool does not recognise; see its message below.")
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "interface {}: {} foreign function(s)",
            self.interface_path.display(),
            self.interface.functions.len()
        )?;
        for (p, k) in &self.implementations {
            writeln!(f, "implementation {}: {k}", p.display())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_refusal_is_explained() {
        // The messages tileiras 13.5.37 printed in our experiments (toolchain.md §4.4).
        let seen = [
            "interface-only tile libraries are not allowed; you must provide an implementation either as a \
             dynamic library (implementation provider), or as static code files",
            "unable to read interface file '': No such file or directory",
            "must provide either an implementation-provider shared library or a static implementation catalog \
             with the static implementation artifacts",
            "must provide exactly one tile bytecode file",
            "implementation files must be one of two options: (1) a Tile IR bytecode file ...",
            "tile library interface may only contain extern cuda_tile.experimental$func declarations, found \
             'cuda_tile.entry'",
            "must provide tile IR bytecode for tile lib interface file",
            "unable to read implementation file '/nonexist': No such file or directory",
        ];
        let fallback = explain(&["something new".to_string()]);
        let mut explanations = Vec::new();
        for m in seen {
            let e = explain(&[m.to_string()]);
            assert_ne!(e, fallback, "{m}");
            explanations.push(e);
        }
        explanations.dedup();
        assert_eq!(
            explanations.len(),
            seen.len(),
            "each refusal has its own explanation"
        );
    }
}
