//! (being written)
pub mod bundle;
pub mod cache;
pub mod core;
pub mod dsl;
pub mod launch;
pub mod runtime;
pub mod toolchain;
pub mod tune;
pub use cutile_macros::{entry, foreign, module};
