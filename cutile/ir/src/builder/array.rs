//! The kernel-parameter convention for arrays, shared by the samples, the DSL and the runtime's argument
//! packing.
//!
//! An array of rank `r` and element `T` is passed as `1 + 2r` entry parameters, in this order:
//! 1. `tile<ptr<T>>`: the base pointer (assumed aligned to [`ArraySpec::align`] bytes);
//! 2. `r` × `tile<i32>`: the extents, outermost first;
//! 3. `r` × `tile<i32>`: the strides in elements, outermost first.
//!
//! All `2r` integers are always passed. When [`ArraySpec::contiguous_last`] is set the kernel treats the
//! innermost stride as the constant 1 and ignores that argument (the runtime still passes it), which lets
//! tileiras vectorize the innermost dimension. Extents and strides are assumed non-negative
//! (`assume bounded<0, ?>`). This is the layout cuTile Python uses.

use crate::ir::ValueId;
use crate::types::{ScalarType, Type};

use super::error::BuildError;
use super::function::FunctionBuilder;
use super::memory::Dim;

/// How one array kernel argument is passed and viewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArraySpec {
    pub elem: ScalarType,
    pub rank: usize,
    /// Assume (and use) a constant innermost stride of 1.
    pub contiguous_last: bool,
    /// Byte alignment promised for the base pointer (a power of two; 0 or 1 for none).
    pub align: u64,
}

impl ArraySpec {
    /// A row-major array whose base pointer is 16-byte aligned (cuTile's default).
    pub fn row_major(elem: ScalarType, rank: usize) -> ArraySpec {
        ArraySpec {
            elem,
            rank,
            contiguous_last: true,
            align: 16,
        }
    }

    /// The `1 + 2·rank` parameter types of this array.
    pub fn param_types(&self) -> Vec<Type> {
        let mut v = vec![Type::pointer_tile(self.elem, &[])];
        v.extend(std::iter::repeat_n(
            Type::scalar_tile(ScalarType::I32),
            2 * self.rank,
        ));
        v
    }

    /// How many entry parameters the array takes.
    pub fn param_count(&self) -> usize {
        1 + 2 * self.rank
    }
}

/// The parameter types of several arrays followed by extra scalar parameters.
pub fn kernel_params(arrays: &[ArraySpec], scalars: &[ScalarType]) -> Vec<Type> {
    let mut v: Vec<Type> = arrays.iter().flat_map(ArraySpec::param_types).collect();
    v.extend(scalars.iter().map(|s| Type::scalar_tile(*s)));
    v
}

impl FunctionBuilder<'_> {
    /// Bind the array whose parameters start at parameter `first`: assume the pointer alignment and
    /// non-negative extents/strides, and return a tensor view with dynamic extents (and dynamic strides,
    /// except a constant innermost 1 when `contiguous_last`).
    pub fn bind_array(&mut self, spec: &ArraySpec, first: usize) -> Result<ValueId, BuildError> {
        let ptr = self.param(first)?;
        let ptr = if spec.align > 1 {
            self.assume_div_by(ptr, spec.align)?
        } else {
            ptr
        };
        let mut shape = Vec::with_capacity(spec.rank);
        for i in 0..spec.rank {
            let p = self.param(first + 1 + i)?;
            shape.push(Dim::Dynamic(self.assume_bounded(p, Some(0), None)?));
        }
        let mut strides = Vec::with_capacity(spec.rank);
        for i in 0..spec.rank {
            if spec.contiguous_last && i + 1 == spec.rank {
                strides.push(Dim::Static(1));
            } else {
                let p = self.param(first + 1 + spec.rank + i)?;
                strides.push(Dim::Dynamic(self.assume_bounded(p, Some(0), None)?));
            }
        }
        self.make_tensor_view(ptr, &shape, &strides)
    }
}
