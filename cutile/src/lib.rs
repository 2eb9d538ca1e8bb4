//! (being written)
pub mod toolchain;
pub mod bundle;
pub mod cache;
pub mod runtime;
