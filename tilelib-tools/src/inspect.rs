//! `tilelib inspect`: what a tile library (or a bare interface bytecode file) contains, as a serializable
//! [`Report`] with a human-readable rendering.

use crate::container::{self, ContainerError, IMPLEMENTATION_PREFIX, INTERFACE_SECTION};
use crate::interface::{ConstKind, ForeignFunction, Interface, InterfaceError};
use crate::kind::{FileKind, classify};
use serde::Serialize;
use std::fmt::{self, Write as _};

/// What `inspect` found in one file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `tile_library` for a `.tilelib`, `interface` for a bare bytecode file.
    pub container: &'static str,
    pub interface: Interface,
    pub implementations: Vec<Implementation>,
    /// Sections a `.tilelib` carries beyond the interface and implementations (tileiras writes none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_sections: Vec<String>,
}

/// One implementation file of a library.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Implementation {
    pub section: String,
    pub size: usize,
    #[serde(flatten)]
    pub kind: FileKind,
}

/// Why a file could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Container(#[from] ContainerError),
    #[error("the library's interface (section {INTERFACE_SECTION}) is invalid: {0}")]
    Interface(#[from] InterfaceError),
    #[error(
        "the library's interface (section {INTERFACE_SECTION}) is not Tile IR bytecode: it is {0}"
    )]
    InterfaceNotBytecode(FileKind),
}

/// Inspect a `.tilelib` or, if `bytes` is Tile IR bytecode, an interface file on its own.
pub fn inspect(bytes: &[u8]) -> Result<Report, InspectError> {
    if classify(bytes).is_bytecode() {
        return Ok(Report {
            container: "interface",
            interface: Interface::from_bytecode(bytes)?,
            implementations: vec![],
            other_sections: vec![],
        });
    }
    let lib = container::read(bytes)?;
    let ifc_kind = classify(&lib.interface);
    if !ifc_kind.is_bytecode() {
        return Err(InspectError::InterfaceNotBytecode(ifc_kind));
    }
    Ok(Report {
        container: "tile_library",
        interface: Interface::from_bytecode(&lib.interface)?,
        implementations: lib
            .implementations
            .iter()
            .enumerate()
            .map(|(i, f)| Implementation {
                section: format!("{IMPLEMENTATION_PREFIX}{i}"),
                size: f.len(),
                kind: classify(f),
            })
            .collect(),
        other_sections: container::other_sections(bytes)?,
    })
}

impl Report {
    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// The signature in Tile-IR-like text: `ext<N: index>(arg0: in tile<4xf32>, arg1: out tile<4xf32>) -> tile<4xf32>`.
pub fn signature(f: &ForeignFunction) -> String {
    let mut s = f.symbol.clone();
    if !f.const_params.is_empty() {
        let consts: Vec<String> = f
            .const_params
            .iter()
            .map(|c| {
                let kind = match c.kind {
                    ConstKind::Index => "index",
                    ConstKind::String => "string",
                    ConstKind::Datatype => "datatype",
                    ConstKind::Shape => "shape",
                };
                format!("{}: {kind}", c.name)
            })
            .collect();
        let _ = write!(s, "<{}>", consts.join(", "));
    }
    let ops: Vec<String> = f
        .operands
        .iter()
        .map(|o| format!("{}: {} {}", o.name, o.access.name(), o.ty))
        .collect();
    let _ = write!(s, "({})", ops.join(", "));
    match f.results.as_slice() {
        [] => {}
        [one] => {
            let _ = write!(s, " -> {one}");
        }
        many => {
            let r: Vec<String> = many.iter().map(ToString::to_string).collect();
            let _ = write!(s, " -> ({})", r.join(", "));
        }
    }
    s
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ifc = &self.interface;
        let flag = if ifc.preview { ", preview" } else { "" };
        match self.container {
            "interface" => writeln!(f, "interface bytecode {}{flag}", ifc.version)?,
            _ => writeln!(
                f,
                "tile library: interface bytecode {}{flag}, {} implementation file(s)",
                ifc.version,
                self.implementations.len()
            )?,
        }
        writeln!(f, "foreign functions ({}):", ifc.functions.len())?;
        for func in &ifc.functions {
            writeln!(f, "  {}", signature(func))?;
        }
        if !ifc.other_functions.is_empty() {
            writeln!(
                f,
                "not foreign declarations (tileiras refuses them in an interface):"
            )?;
            for o in &ifc.other_functions {
                writeln!(f, "  {} {}", o.kind, o.name)?;
            }
        }
        if self.container == "tile_library" {
            writeln!(f, "implementations:")?;
            for i in &self.implementations {
                writeln!(f, "  {:<8} {:>9} bytes  {}", i.section, i.size, i.kind)?;
            }
        }
        if !self.other_sections.is_empty() {
            writeln!(f, "other sections: {}", self.other_sections.join(", "))?;
        }
        Ok(())
    }
}
