//! Sample kernels built with the [`builder`](crate::builder), structurally like what cuTile Python emits for
//! the same kernels: vector add, row softmax and a tiled matmul. They serve as builder documentation, as test
//! inputs for the writer, reader and printer, and as compile tests against tileiras.
//!
//! Kernel parameters follow the array convention of [`crate::builder::array`]: for each array a
//! `tile<ptr<T>>`, then its `i32` extents, then its `i32` strides (the innermost stride is taken as 1).
//! Each kernel returns a [`Module`](crate::Module) with one entry; the grid each expects is documented per kernel.

mod matmul;
mod softmax;
mod vadd;

pub use matmul::tiled_matmul;
pub use softmax::row_softmax;
pub use vadd::vector_add;

use crate::builder::BuildError;
use crate::types::ScalarType;

/// Tile extents must be positive powers of two that fit an `i32`.
fn check_tile(kernel: &str, what: &str, n: i64) -> Result<i32, BuildError> {
    if n <= 0 || (n & (n - 1)) != 0 || n > i32::MAX as i64 {
        return Err(BuildError::Function {
            function: kernel.to_string(),
            message: format!("{what} = {n} must be a positive power of two"),
        });
    }
    Ok(n as i32)
}

fn check_elem(kernel: &str, elem: ScalarType, allowed: &[ScalarType]) -> Result<(), BuildError> {
    if !allowed.contains(&elem) {
        let names: Vec<&str> = allowed.iter().map(|s| s.name()).collect();
        return Err(BuildError::Function {
            function: kernel.to_string(),
            message: format!(
                "element type {elem} is not supported; use one of {}",
                names.join(", ")
            ),
        });
    }
    Ok(())
}
