//! `cutile-ir`: the Tile IR data model and everything that needs no GPU and no toolchain.
//!
//! - [`types`], [`attr`], [`ir`]: the version-independent data model (types, attributes, module/functions/ops).
//! - [`schema`]: the bytecode layout of every op, as data; the writer, reader, printer and verifier interpret it.
//! - [`version`]: which bytecode versions exist, are read (13.1–13.5) and are written (13.4, 13.5).
//!
//! This crate does no I/O beyond byte buffers and knows nothing of CUDA or tileiras.

pub mod attr;
pub mod builder;
pub mod bytecode;
pub mod ir;
pub mod print;
pub mod samples;
pub mod schema;
pub mod types;
pub mod verify;
pub mod version;

pub use attr::*;
pub use ir::*;
pub use schema::{OpSchema, Opcode};
pub use types::*;
pub use version::*;
