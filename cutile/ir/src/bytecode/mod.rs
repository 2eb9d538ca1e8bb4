//! Tile IR bytecode: the writer (versions 13.4 and 13.5) and the reader (13.1–13.5).
//!
//! The format is described in `toolchain.md` §1. Both directions are driven by the op schema
//! ([`crate::schema`]): one generic encoder and one generic decoder interpret each op's layout, so an op cannot be
//! written one way and read another. The writer reproduces cuTile Python's table numbering (strings, types and
//! constants in first-use order, type ids 0 = i1 and 1 = i32, debug strings interned in debug-attribute order) so
//! that a module read from a cuTile file is written back byte for byte.
//!
//! - [`write_module`]: a [`Module`](crate::ir::Module) to bytes at 13.4 or 13.5 (preview flag set when the module has preview content).
//! - [`read_module`], [`read_module_with_version`]: bytes of any readable version to a module; attributes
//!   that older versions lack are filled with their defaults so the model is the same whatever the version.
//! - [`header_version`]: the version and preview flag of a file, without decoding the rest.
//!
//! The reader never panics and bounds every count, id, recursion depth and allocation by the input, so it is safe
//! on untrusted bytes.

mod attrs;
mod debug;
mod error;
mod function;
mod ops;
mod read;
mod tables;
mod types;
pub mod varint;
mod write;

pub use error::{ReadError, WriteError};
pub use read::{header_version, read_module, read_module_with_version};
pub use write::write_module;

/// `"\x7fTileIR\0"`, the first eight bytes of every file.
pub const MAGIC: [u8; 8] = *b"\x7fTileIR\0";

/// Section ids (low 7 bits of a section's first byte; bit 7 says an alignment follows).
pub(crate) mod section {
    pub const END: u8 = 0x00;
    pub const STRING: u8 = 0x01;
    pub const FUNC: u8 = 0x02;
    pub const DEBUG: u8 = 0x03;
    pub const CONSTANT: u8 = 0x04;
    pub const TYPE: u8 = 0x05;
    pub const GLOBAL: u8 = 0x06;
    pub const PRODUCER: u8 = 0x07;

    pub fn name(id: u8) -> &'static str {
        match id {
            STRING => "String section",
            FUNC => "Func section",
            DEBUG => "Debug section",
            CONSTANT => "Constant section",
            TYPE => "Type section",
            GLOBAL => "Global section",
            PRODUCER => "Producer section",
            _ => "unknown section",
        }
    }
}

/// Deepest nesting of regions the reader accepts (real kernels nest a handful of levels).
pub(crate) const MAX_REGION_DEPTH: u32 = 64;
/// Deepest nesting of tagged attributes (arrays, dictionaries, expressions) the reader accepts.
pub(crate) const MAX_ATTR_DEPTH: u32 = 32;
/// Deepest chain of forward type references the reader follows.
pub(crate) const MAX_TYPE_DEPTH: u32 = 32;
