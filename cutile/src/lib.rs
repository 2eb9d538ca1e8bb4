//! (being written)
pub mod toolchain;
