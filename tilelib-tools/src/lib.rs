//! `tilelib-tools`: the `.tilelib` tile-library container and its tooling (the `tilelib` command).
//!
//! - [`container`]: read and write the ELF container (interface + implementation files, verbatim).
//! - [`kind`]: classify implementation files by magic (Tile IR bytecode, cubin, fatbin, LTOIR, provider `.so`).
//! - [`interface`]: the foreign functions an interface declares, from its bytecode.
//! - [`inspect`]: a report of a library's interface and implementations (text and JSON).
//! - [`declare`]: Rust `#[cutile::foreign]` declarations for an interface.
//! - [`package`]: check inputs and package a library with tileiras, explaining its refusals.

pub mod container;
pub mod declare;
pub mod inspect;
pub mod interface;
pub mod kind;
pub mod package;
