//! (being written)
pub mod toolchain;
pub mod bundle;
pub mod cache;
pub mod runtime;
pub mod core;
pub mod dsl;
pub mod launch;
pub use cutile_macros::{entry, module};
