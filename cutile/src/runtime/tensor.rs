//! `Tensor<T>`: typed device memory with 64-bit shapes and strides, and borrowed views of it.
//!
//! A [`Tensor`] owns its allocation (or, built with [`Tensor::from_raw_parts`], borrows foreign memory
//! it never frees). Views ([`TensorView`], [`TensorViewMut`]) share the memory under another
//! [`Layout`] and borrow the tensor like `&`/`&mut` do, so the borrow checker keeps writers exclusive.
//! All shape arithmetic lives in [`super::layout`]; this module adds the device side.

use std::marker::PhantomData;
use std::ops::Range;

use super::args::DevicePointer;
use super::device::Device;
use super::dtype::{DType, DeviceElement};
use super::error::{Result, RuntimeError};
use super::fill;
use super::layout::{self, Layout};
use super::memory::{self, DeviceBuffer};

/// Address, layout and device shared by tensors and views.
#[derive(Debug, Clone)]
struct Raw {
    device: Device,
    /// Address of buffer element 0; `layout.offset()` counts from here.
    base: u64,
    layout: Layout,
}

impl Raw {
    fn data_ptr(&self, elem: usize) -> u64 {
        self.base + (self.layout.offset() as u64) * elem as u64
    }

    fn with(&self, layout: Layout) -> Raw {
        Raw {
            device: self.device.clone(),
            base: self.base,
            layout,
        }
    }

    fn to_host<T: DeviceElement>(&self) -> Result<Vec<T>> {
        let span = self.layout.span();
        let len = (span.end - span.start) as usize;
        let mut host = vec![T::zeroed(); len];
        let address = self.base + span.start as u64 * size_of::<T>() as u64;
        // SAFETY: a layout never leaves the memory it was created for: owned tensors start with a span
        // inside their allocation and views only narrow or permute it; foreign memory is the
        // `from_raw_parts` caller's promise.
        unsafe { memory::read_device(&self.device, address, bytemuck::cast_slice_mut(&mut host)) }?;
        if self.layout.is_contiguous() {
            return Ok(host);
        }
        layout::gather(&self.layout, &host).ok_or(RuntimeError::OutOfBounds {
            op: "gather",
            offset: 0,
            len: self.layout.numel() as usize,
            capacity: len,
        })
    }

    fn write_host<T: DeviceElement>(&self, op: &'static str, data: &[T]) -> Result<()> {
        layout::check_len(self.layout.shape(), data.len())?;
        if !self.layout.is_contiguous() {
            return Err(not_contiguous(op, &self.layout));
        }
        // SAFETY: the span is inside the memory this layout belongs to (see `to_host`), and `data`
        // has exactly `numel` elements, which a contiguous layout stores densely from `data_ptr`.
        unsafe {
            memory::write_device(
                &self.device,
                self.data_ptr(size_of::<T>()),
                bytemuck::cast_slice(data),
            )
        }
    }
}

fn not_contiguous(op: &'static str, layout: &Layout) -> RuntimeError {
    RuntimeError::NotContiguous {
        op,
        shape: layout.shape().to_vec(),
        strides: layout.strides().to_vec(),
    }
}

/// Methods every tensor kind has.
macro_rules! common_methods {
    () => {
        pub fn shape(&self) -> &[i64] {
            self.raw.layout.shape()
        }

        pub fn strides(&self) -> &[i64] {
            self.raw.layout.strides()
        }

        pub fn layout(&self) -> &Layout {
            &self.raw.layout
        }

        pub fn rank(&self) -> usize {
            self.raw.layout.rank()
        }

        pub fn numel(&self) -> i64 {
            self.raw.layout.numel()
        }

        pub fn dtype(&self) -> DType {
            T::DTYPE
        }

        pub fn device(&self) -> &Device {
            &self.raw.device
        }

        pub fn is_contiguous(&self) -> bool {
            self.raw.layout.is_contiguous()
        }

        /// Device address of the first element.
        pub fn device_ptr(&self) -> u64 {
            self.raw.data_ptr(size_of::<T>())
        }

        /// Copies the elements to the host in row-major logical order.
        pub fn to_host(&self) -> Result<Vec<T>> {
            self.raw.to_host::<T>()
        }
    };
}

/// Typed device memory with a shape and strides.
#[derive(Debug)]
pub struct Tensor<T: DeviceElement> {
    raw: Raw,
    /// `None` for foreign memory from `from_raw_parts`.
    _owner: Option<DeviceBuffer>,
    _elem: PhantomData<T>,
}

/// A read-only view of a tensor's memory under another layout.
#[derive(Debug, Clone)]
pub struct TensorView<'a, T: DeviceElement> {
    raw: Raw,
    _borrow: PhantomData<&'a T>,
}

/// A writable view; exclusive like `&mut`.
#[derive(Debug)]
pub struct TensorViewMut<'a, T: DeviceElement> {
    raw: Raw,
    _borrow: PhantomData<&'a mut T>,
}

impl<T: DeviceElement> Tensor<T> {
    common_methods!();

    fn alloc(device: &Device, layout: Layout, zeroed: bool) -> Result<Tensor<T>> {
        let bytes = (layout.numel() as u128) * size_of::<T>() as u128;
        let bytes = usize::try_from(bytes).map_err(|_| layout::LayoutError::Overflow {
            shape: layout.shape().to_vec(),
            strides: layout.strides().to_vec(),
        })?;
        let buffer = if zeroed {
            DeviceBuffer::zeroed(device, bytes)?
        } else {
            DeviceBuffer::alloc(device, bytes)?
        };
        Ok(Tensor {
            raw: Raw {
                device: device.clone(),
                base: buffer.device_ptr(),
                layout,
            },
            _owner: Some(buffer),
            _elem: PhantomData,
        })
    }

    /// Uploads `data` as a contiguous tensor of `shape`; `data.len()` must equal the element count.
    pub fn from_host(device: &Device, data: &[T], shape: &[i64]) -> Result<Tensor<T>> {
        layout::check_len(shape, data.len())?;
        let t = Tensor::alloc(device, Layout::contiguous(shape)?, false)?;
        t.raw.write_host("from_host", data)?;
        Ok(t)
    }

    /// An uninitialised contiguous tensor (its values are arbitrary but valid for `T`).
    pub fn empty(device: &Device, shape: &[i64]) -> Result<Tensor<T>> {
        Tensor::alloc(device, Layout::contiguous(shape)?, false)
    }

    pub fn zeros(device: &Device, shape: &[i64]) -> Result<Tensor<T>> {
        Tensor::alloc(device, Layout::contiguous(shape)?, true)
    }

    pub fn ones(device: &Device, shape: &[i64]) -> Result<Tensor<T>> {
        Tensor::full(device, shape, T::from_f64(1.0))
    }

    pub fn full(device: &Device, shape: &[i64], value: T) -> Result<Tensor<T>> {
        let n = layout::numel(shape)? as usize;
        Tensor::from_host(device, &vec![value; n], shape)
    }

    /// `0, 1, 2, …` in row-major order over `shape`.
    pub fn arange(device: &Device, shape: &[i64]) -> Result<Tensor<T>> {
        let n = layout::numel(shape)? as usize;
        Tensor::from_host(device, &fill::arange::<T>(n), shape)
    }

    /// Seeded random values in [`fill::default_range`].
    pub fn random(device: &Device, shape: &[i64], seed: u64) -> Result<Tensor<T>> {
        let n = layout::numel(shape)? as usize;
        Tensor::from_host(device, &fill::random::<T>(n, seed), shape)
    }

    /// Seeded random values uniform in `[low, high)`.
    pub fn random_uniform(
        device: &Device,
        shape: &[i64],
        low: f64,
        high: f64,
        seed: u64,
    ) -> Result<Tensor<T>> {
        let n = layout::numel(shape)? as usize;
        Tensor::from_host(device, &fill::uniform::<T>(n, low, high, seed), shape)
    }

    /// Wraps device memory this tensor does not own: nothing is freed on drop.
    ///
    /// # Safety
    /// `device_ptr` must be device memory of `device`, suitably aligned for `T`, covering every element
    /// the layout addresses (`max(index · strides) + 1` elements), and must stay valid and not be
    /// written by others while the tensor or any view of it is in use.
    pub unsafe fn from_raw_parts(
        device_ptr: u64,
        shape: &[i64],
        strides: &[i64],
        device: &Device,
    ) -> Result<Tensor<T>> {
        Ok(Tensor {
            raw: Raw {
                device: device.clone(),
                base: device_ptr,
                layout: Layout::with_strides(shape, strides, 0)?,
            },
            _owner: None,
            _elem: PhantomData,
        })
    }

    /// Whether the tensor owns (and will free) its memory.
    pub fn is_owned(&self) -> bool {
        self._owner.is_some()
    }

    /// Overwrites the elements with `data` (contiguous tensors only).
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.raw.write_host("copy_from_host", data)
    }

    /// Copies another tensor's elements into this one; shapes must be equal and both contiguous.
    pub fn copy_from(&mut self, src: &TensorView<'_, T>) -> Result<()> {
        self.view_mut().copy_from(src)
    }

    pub fn view(&self) -> TensorView<'_, T> {
        TensorView {
            raw: self.raw.clone(),
            _borrow: PhantomData,
        }
    }

    pub fn view_mut(&mut self) -> TensorViewMut<'_, T> {
        TensorViewMut {
            raw: self.raw.clone(),
            _borrow: PhantomData,
        }
    }

    /// Elements `range` of `axis`.
    pub fn slice(&self, axis: usize, range: Range<i64>) -> Result<TensorView<'_, T>> {
        self.view().slice(axis, range)
    }

    /// A contiguous tensor under a new shape (one entry may be -1).
    pub fn reshape(&self, shape: &[i64]) -> Result<TensorView<'_, T>> {
        self.view().reshape(shape)
    }

    /// Axes `a` and `b` swapped.
    pub fn transpose(&self, a: usize, b: usize) -> Result<TensorView<'_, T>> {
        self.view().transpose(a, b)
    }

    pub fn slice_mut(&mut self, axis: usize, range: Range<i64>) -> Result<TensorViewMut<'_, T>> {
        self.view_mut().slice(axis, range)
    }

    pub fn reshape_mut(&mut self, shape: &[i64]) -> Result<TensorViewMut<'_, T>> {
        self.view_mut().reshape(shape)
    }

    pub fn transpose_mut(&mut self, a: usize, b: usize) -> Result<TensorViewMut<'_, T>> {
        self.view_mut().transpose(a, b)
    }

    /// The same tensor under a new shape, keeping ownership.
    pub fn into_reshaped(mut self, shape: &[i64]) -> Result<Tensor<T>> {
        self.raw.layout = self.raw.layout.reshape(shape)?;
        Ok(self)
    }
}

impl<'a, T: DeviceElement> TensorView<'a, T> {
    common_methods!();

    pub fn slice(&self, axis: usize, range: Range<i64>) -> Result<TensorView<'a, T>> {
        Ok(self.derive(self.raw.layout.slice(axis, range)?))
    }

    pub fn reshape(&self, shape: &[i64]) -> Result<TensorView<'a, T>> {
        Ok(self.derive(self.raw.layout.reshape(shape)?))
    }

    pub fn transpose(&self, a: usize, b: usize) -> Result<TensorView<'a, T>> {
        Ok(self.derive(self.raw.layout.transpose(a, b)?))
    }

    fn derive(&self, layout: Layout) -> TensorView<'a, T> {
        TensorView {
            raw: self.raw.with(layout),
            _borrow: PhantomData,
        }
    }
}

impl<'a, T: DeviceElement> TensorViewMut<'a, T> {
    common_methods!();

    pub fn slice(self, axis: usize, range: Range<i64>) -> Result<TensorViewMut<'a, T>> {
        let layout = self.raw.layout.slice(axis, range)?;
        Ok(self.derive(layout))
    }

    pub fn reshape(self, shape: &[i64]) -> Result<TensorViewMut<'a, T>> {
        let layout = self.raw.layout.reshape(shape)?;
        Ok(self.derive(layout))
    }

    pub fn transpose(self, a: usize, b: usize) -> Result<TensorViewMut<'a, T>> {
        let layout = self.raw.layout.transpose(a, b)?;
        Ok(self.derive(layout))
    }

    fn derive(self, layout: Layout) -> TensorViewMut<'a, T> {
        TensorViewMut {
            raw: self.raw.with(layout),
            _borrow: PhantomData,
        }
    }

    /// A read-only view for as long as this borrow of `self`.
    pub fn as_view(&self) -> TensorView<'_, T> {
        TensorView {
            raw: self.raw.clone(),
            _borrow: PhantomData,
        }
    }

    /// A shorter-lived writable view, leaving `self` usable afterwards.
    pub fn reborrow(&mut self) -> TensorViewMut<'_, T> {
        TensorViewMut {
            raw: self.raw.clone(),
            _borrow: PhantomData,
        }
    }

    /// Overwrites the elements with `data` (contiguous views only).
    pub fn copy_from_host(&mut self, data: &[T]) -> Result<()> {
        self.raw.write_host("copy_from_host", data)
    }

    /// Copies `src` into this view; shapes must be equal and both contiguous.
    pub fn copy_from(&mut self, src: &TensorView<'_, T>) -> Result<()> {
        if self.shape() != src.shape() {
            return Err(RuntimeError::ShapeMismatch {
                op: "copy_from",
                left: self.shape().to_vec(),
                right: src.shape().to_vec(),
            });
        }
        for layout in [&self.raw.layout, &src.raw.layout] {
            if !layout.is_contiguous() {
                return Err(not_contiguous("copy_from", layout));
            }
        }
        if self.device() != src.device() {
            return Err(RuntimeError::DeviceMismatch {
                op: "copy_from",
                expected: self.device().ordinal(),
                found: src.device().ordinal(),
            });
        }
        let bytes = self.numel() as usize * size_of::<T>();
        // SAFETY: both ranges are the dense spans of their layouts, inside the memory they belong to.
        unsafe { memory::copy_device(self.device(), self.device_ptr(), src.device_ptr(), bytes) }
    }
}

macro_rules! device_pointer {
    ($($ty:ty),*) => {$(
        impl<T: DeviceElement> DevicePointer for $ty {
            fn device_ptr(&self) -> u64 {
                self.raw.data_ptr(size_of::<T>())
            }
            fn device(&self) -> &Device {
                &self.raw.device
            }
        }
    )*};
}

device_pointer!(Tensor<T>, TensorView<'_, T>, TensorViewMut<'_, T>);
