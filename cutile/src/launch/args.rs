//! The argument list of one launch ([`LaunchArgs`]): tensors borrowed for the launch's lifetime, scalars
//! by value, an optional grid override, and the [`TensorMeta`]s specialization derives from them.
//!
//! An argument keeps only what the launcher reads (element type, shape and strides borrowed from the
//! tensor, device address, device ordinal), so building the list does not copy shapes.

use std::marker::PhantomData;

use cutile_ir::ScalarType;
use half::{bf16, f16};

use crate::dsl::TensorMeta;
use crate::runtime::{DType, DeviceElement, Grid, Tensor, TensorView, TensorViewMut};

/// Largest tensor rank the launcher accepts.
pub const MAX_RANK: usize = 8;

/// The Tile IR element type of a runtime element type (integers are signless in Tile IR).
pub fn ir_dtype(d: DType) -> ScalarType {
    match d {
        DType::F16 => ScalarType::F16,
        DType::BF16 => ScalarType::BF16,
        DType::F32 => ScalarType::F32,
        DType::F64 => ScalarType::F64,
        DType::I8 | DType::U8 => ScalarType::I8,
        DType::I16 | DType::U16 => ScalarType::I16,
        DType::I32 | DType::U32 => ScalarType::I32,
        DType::I64 | DType::U64 => ScalarType::I64,
    }
}

/// The base alignment specialization assumes for a device address: the largest power of two dividing
/// it, capped at 256 (what a fresh allocation guarantees); 256 for the null address of an empty tensor.
pub fn base_align(ptr: u64) -> u64 {
    if ptr == 0 {
        return 256;
    }
    (1u64 << ptr.trailing_zeros().min(8)).min(256)
}

/// One tensor argument: what the launcher reads from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TensorRef<'a> {
    pub output: bool,
    pub dtype: ScalarType,
    pub shape: &'a [i64],
    pub strides: &'a [i64],
    pub ptr: u64,
    pub device: usize,
}

impl TensorRef<'_> {
    pub fn meta(&self) -> TensorMeta {
        TensorMeta {
            dtype: self.dtype,
            shape: self.shape.to_vec(),
            strides: self.strides.to_vec(),
            base_align: base_align(self.ptr),
        }
    }
}

/// A scalar argument: its element type and its bits (zero-extended).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarValue {
    pub dtype: ScalarType,
    pub bits: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Tensor(TensorRef<'a>),
    Scalar(ScalarValue),
}

mod sealed {
    pub trait Sealed {}
}

/// A host value that can be passed as a kernel's `Scalar<E>` parameter.
pub trait ScalarArg: sealed::Sealed + Copy {
    /// Its Tile IR type.
    const DTYPE: ScalarType;
    /// Its bits, zero-extended to 64.
    fn to_bits(self) -> u64;
}

macro_rules! scalar_arg {
    ($($t:ty => $s:ident, |$v:ident| $bits:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl ScalarArg for $t {
            const DTYPE: ScalarType = ScalarType::$s;
            fn to_bits(self) -> u64 {
                let $v = self;
                $bits
            }
        }
    )*};
}
scalar_arg! {
    f32 => F32, |v| v.to_bits() as u64;
    f64 => F64, |v| v.to_bits();
    f16 => F16, |v| v.to_bits() as u64;
    bf16 => BF16, |v| v.to_bits() as u64;
    i8 => I8, |v| v as u8 as u64;
    i16 => I16, |v| v as u16 as u64;
    i32 => I32, |v| v as u32 as u64;
    i64 => I64, |v| v as u64;
    u8 => I8, |v| v as u64;
    u16 => I16, |v| v as u64;
    u32 => I32, |v| v as u64;
    u64 => I64, |v| v;
}

/// A runtime tensor or view that can be passed as a kernel's tensor argument.
pub trait TensorArg: sealed::Sealed {
    #[doc(hidden)]
    fn tensor_ref(&self, output: bool) -> TensorRefParts<'_>;
}

/// A tensor or view the kernel may write (`&mut Tensor` parameters).
pub trait TensorArgMut: TensorArg {}

/// What [`TensorArg`] hands the launcher (opaque outside this crate).
#[doc(hidden)]
#[derive(Debug)]
pub struct TensorRefParts<'a>(pub(crate) TensorRef<'a>);

impl<'a> TensorRefParts<'a> {
    /// Element type.
    pub fn dtype(&self) -> ScalarType {
        self.0.dtype
    }
    /// Extents, outermost first.
    pub fn shape(&self) -> &'a [i64] {
        self.0.shape
    }
    /// Strides in elements.
    pub fn strides(&self) -> &'a [i64] {
        self.0.strides
    }
    /// Device address of element 0.
    pub fn ptr(&self) -> u64 {
        self.0.ptr
    }
    /// Ordinal of the device holding the memory.
    pub fn device(&self) -> usize {
        self.0.device
    }
}

macro_rules! tensor_arg {
    ($($ty:ty),*) => {$(
        impl<T: DeviceElement> sealed::Sealed for $ty {}
        impl<T: DeviceElement> TensorArg for $ty {
            fn tensor_ref(&self, output: bool) -> TensorRefParts<'_> {
                TensorRefParts(TensorRef {
                    output,
                    dtype: ir_dtype(T::DTYPE),
                    shape: self.shape(),
                    strides: self.strides(),
                    ptr: self.device_ptr(),
                    device: self.device().ordinal(),
                })
            }
        }
    )*};
}
tensor_arg!(Tensor<T>, TensorView<'_, T>, TensorViewMut<'_, T>);
impl<T: DeviceElement> TensorArgMut for Tensor<T> {}
impl<T: DeviceElement> TensorArgMut for TensorViewMut<'_, T> {}

// A reference passes what it refers to, so type-erased arguments (`&dyn TensorArg`, e.g. tensors
// whose element type is only known at run time) reach the generic host API too.
impl<A: TensorArg + ?Sized> sealed::Sealed for &A {}
impl<A: TensorArg + ?Sized> TensorArg for &A {
    fn tensor_ref(&self, output: bool) -> TensorRefParts<'_> {
        (**self).tensor_ref(output)
    }
}
impl<A: TensorArg + ?Sized> sealed::Sealed for &mut A {}
impl<A: TensorArg + ?Sized> TensorArg for &mut A {
    fn tensor_ref(&self, output: bool) -> TensorRefParts<'_> {
        (**self).tensor_ref(output)
    }
}
impl<A: TensorArgMut + ?Sized> TensorArgMut for &mut A {}

/// The arguments of one launch, in the kernel's parameter order.
///
/// Tensors passed with [`input`](Self::input) stay shared-borrowed and those passed with
/// [`output`](Self::output) exclusively borrowed for `'a`; the launcher holds `'a` until the kernel has
/// finished (see [`Launcher`](super::Launcher)).
#[derive(Debug)]
pub struct LaunchArgs<'a> {
    pub(crate) items: Vec<Arg<'a>>,
    pub(crate) grid: Option<Grid>,
    _borrows: PhantomData<&'a mut ()>,
}

impl Default for LaunchArgs<'_> {
    fn default() -> Self {
        LaunchArgs::new()
    }
}

impl<'a> LaunchArgs<'a> {
    pub fn new() -> Self {
        LaunchArgs {
            items: Vec::with_capacity(8),
            grid: None,
            _borrows: PhantomData,
        }
    }

    /// A tensor the kernel reads (`&Tensor<E, S>` parameter).
    pub fn input(mut self, t: &'a impl TensorArg) -> Self {
        self.items.push(Arg::Tensor(t.tensor_ref(false).0));
        self
    }

    /// A tensor the kernel writes (`&mut Tensor<E, S>` parameter), partitioned into the declared tiles.
    pub fn output(mut self, t: &'a mut impl TensorArgMut) -> Self {
        let t: &'a _ = t;
        self.items.push(Arg::Tensor(t.tensor_ref(true).0));
        self
    }

    /// A scalar (`Scalar<E>` parameter); its Rust type must match `E` (unsigned integers pass as the
    /// signless integer of their width).
    pub fn scalar<S: ScalarArg>(mut self, value: S) -> Self {
        self.items.push(Arg::Scalar(ScalarValue {
            dtype: S::DTYPE,
            bits: value.to_bits(),
        }));
        self
    }

    /// Launch this grid instead of the tiles of the first output (persistent kernels).
    pub fn grid(mut self, grid: Grid) -> Self {
        self.grid = Some(grid);
        self
    }

    /// A tensor argument given by raw parts (foreign memory, or a description without a device).
    ///
    /// # Safety
    /// `ptr` must be device memory of device `device` covering every element `shape`/`strides` address,
    /// alive and not written by anyone else (read by no one else when `output`) until the launch has
    /// finished; the borrow checker cannot see it.
    pub unsafe fn raw_tensor(
        mut self,
        output: bool,
        dtype: ScalarType,
        shape: &'a [i64],
        strides: &'a [i64],
        ptr: u64,
        device: usize,
    ) -> Self {
        self.items.push(Arg::Tensor(TensorRef {
            output,
            dtype,
            shape,
            strides,
            ptr,
            device,
        }));
        self
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The grid override, if any.
    pub fn grid_override(&self) -> Option<Grid> {
        self.grid
    }

    /// What specialization sees of the tensor arguments, in order (the shapes, strides and base
    /// alignment of the actual tensors).
    pub fn tensor_metas(&self) -> Vec<TensorMeta> {
        self.items
            .iter()
            .filter_map(|a| match a {
                Arg::Tensor(t) => Some(t.meta()),
                Arg::Scalar(_) => None,
            })
            .collect()
    }

    /// The scalar arguments, in order.
    pub fn scalars(&self) -> Vec<ScalarValue> {
        self.items
            .iter()
            .filter_map(|a| match a {
                Arg::Scalar(s) => Some(*s),
                Arg::Tensor(_) => None,
            })
            .collect()
    }
}
