//! Error types of the bytecode writer and reader.
//!
//! A [`ReadError`] carries the absolute byte offset where decoding failed and a context path naming what was being
//! read (section, table, function, op mnemonic, attribute); a [`WriteError`] names the op and slot (or the type,
//! attribute or function) that cannot be written at the requested version.

use crate::version::Version;
use std::fmt;

/// Decoding failed: `offset` is the absolute file offset, `context` what was being read (outermost first).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ReadError {
    pub offset: usize,
    /// What was being read, outermost first, e.g. "Func section > function `k` > op `addf`".
    pub context: String,
    pub message: String,
}

impl ReadError {
    pub(crate) fn new(offset: usize, message: impl Into<String>) -> ReadError {
        ReadError {
            offset,
            context: String::new(),
            message: message.into(),
        }
    }

    /// Add an enclosing context (called while the error propagates outwards).
    pub(crate) fn within(mut self, what: impl fmt::Display) -> ReadError {
        self.context = if self.context.is_empty() {
            what.to_string()
        } else {
            format!("{what} > {}", self.context)
        };
        self
    }

    fn render(&self) -> String {
        if self.context.is_empty() {
            format!(
                "invalid Tile IR bytecode at byte {}: {}",
                self.offset, self.message
            )
        } else {
            format!(
                "invalid Tile IR bytecode at byte {} (in {}): {}",
                self.offset, self.context, self.message
            )
        }
    }
}

/// Encoding failed. Op-level variants name the op mnemonic and slot; [`WriteError::InFunction`] adds the function.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("bytecode version {version} cannot be written; writable versions are {writable}")]
    UnsupportedVersion { version: Version, writable: String },

    #[error(
        "{what} is preview (SIMT) content, which is only valid at bytecode {latest}; cannot write it at {version} \
         (write at {latest}, or remove the foreign declarations and calls)"
    )]
    PreviewNeedsLatest {
        what: String,
        version: Version,
        latest: Version,
    },

    #[error(
        "{what} needs bytecode {since} or newer, but the target is {version}; write at {since} or newer"
    )]
    TooNew {
        what: String,
        since: Version,
        version: Version,
    },

    #[error("op `{op}`: missing required {slot}")]
    Missing { op: &'static str, slot: String },

    #[error("op `{op}`: {slot}: {problem}")]
    BadSlot {
        op: &'static str,
        slot: String,
        problem: String,
    },

    #[error(
        "op `{op}` uses value %{value}, which is not in scope here (defined in another block, or later)"
    )]
    ValueNotInScope { op: &'static str, value: u32 },

    #[error(
        "{what} refers to value %{value}, which is not in the function's value table ({len} values)"
    )]
    UnknownValue {
        what: String,
        value: u32,
        len: usize,
    },

    #[error(
        "{what} defines value %{value} a second time; every value must be defined exactly once"
    )]
    ValueRedefined { what: String, value: u32 },

    #[error("{what} refers to debug attribute {id}, but the module has only {len}")]
    BadDebugRef { what: String, id: u64, len: usize },

    #[error("{0}")]
    Invalid(String),

    #[error("in function `{function}`: {source}")]
    InFunction {
        function: String,
        #[source]
        source: Box<WriteError>,
    },
}

impl WriteError {
    /// Whether the module only fails because its content needs a newer version than the target (an op,
    /// attribute or operand added later, or preview content below the latest version): writing at a newer
    /// version would succeed where this failed.
    pub fn is_version_limit(&self) -> bool {
        match self {
            WriteError::TooNew { .. } | WriteError::PreviewNeedsLatest { .. } => true,
            WriteError::InFunction { source, .. } => source.is_version_limit(),
            _ => false,
        }
    }

    pub(crate) fn in_function(self, name: &str) -> WriteError {
        WriteError::InFunction {
            function: name.to_string(),
            source: Box::new(self),
        }
    }
}
