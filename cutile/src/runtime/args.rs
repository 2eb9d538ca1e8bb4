//! Kernel parameters packed once into one buffer in natural C layout.
//!
//! Each parameter sits at the next offset aligned to its own alignment (pointers 8 bytes, `i32` 4, …),
//! which is the layout the compiler records in the cubin (`EIATTR_KPARAM_INFO`) and the driver copies
//! from. The buffer is built once; a launch only hands the driver one pointer per parameter into it.

use std::ffi::c_void;
use std::marker::PhantomData;

use half::{bf16, f16};

use super::cubin::ParamSlot;
use super::device::Device;

mod sealed {
    pub trait Sealed {}
}

/// A scalar that can be passed by value to a kernel. Sealed: size and alignment must match the C ABI
/// the compiler assumes.
pub trait KernelParam: sealed::Sealed + bytemuck::Pod {}

macro_rules! kernel_param {
    ($($t:ty),*) => {$( impl sealed::Sealed for $t {} impl KernelParam for $t {} )*};
}
kernel_param!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, f16, bf16);

/// Something in device memory whose address can be passed to a kernel, with the device it lives on.
pub trait DevicePointer {
    /// Device address of the first element.
    fn device_ptr(&self) -> u64;
    /// The device the memory belongs to.
    fn device(&self) -> &Device;
}

/// Packed kernel parameters. The lifetime `'a` ties the arguments to the device memory they point
/// to: while a `KernelArgs<'a>` (or an in-flight launch made from it) is alive, tensors passed with
/// [`KernelArgs::input`] and [`KernelArgs::output`] stay borrowed.
/// Not `Clone`: a copy would duplicate the exclusive borrows of its outputs.
#[derive(Debug, Default)]
pub struct KernelArgs<'a> {
    /// 8-byte aligned storage, so every slot is aligned in host memory too.
    words: Vec<u64>,
    len: usize,
    slots: Vec<ParamSlot>,
    /// Ordinals of the devices the passed memory lives on (normally one).
    devices: Vec<usize>,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> KernelArgs<'a> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `size` bytes aligned to `align` and returns the slot's bytes.
    fn reserve(&mut self, size: usize, align: usize) -> &mut [u8] {
        let offset = self.len.next_multiple_of(align);
        self.len = offset + size;
        self.words.resize(self.len.div_ceil(8), 0);
        self.slots.push(ParamSlot { offset, size });
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        &mut bytes[offset..offset + size]
    }

    /// Appends a scalar by value.
    pub fn push<P: KernelParam>(&mut self, value: P) -> &mut Self {
        let size = size_of::<P>();
        self.reserve(size, align_of::<P>())
            .copy_from_slice(bytemuck::bytes_of(&value));
        self
    }

    /// Builder form of [`push`](Self::push).
    pub fn arg<P: KernelParam>(mut self, value: P) -> Self {
        self.push(value);
        self
    }

    /// Appends a raw device address (8 bytes). Nothing is borrowed: the caller keeps the memory alive.
    pub fn ptr(mut self, address: u64) -> Self {
        self.push(address);
        self
    }

    /// Appends the address of memory the kernel only reads; it stays borrowed for `'a`.
    pub fn input(mut self, data: &'a impl DevicePointer) -> Self {
        self.note_device(data.device());
        self.push(data.device_ptr());
        self
    }

    /// Appends the address of memory the kernel writes; it stays mutably borrowed for `'a`.
    pub fn output(mut self, data: &'a mut impl DevicePointer) -> Self {
        self.note_device(data.device());
        self.push(data.device_ptr());
        self
    }

    fn note_device(&mut self, device: &Device) {
        if !self.devices.contains(&device.ordinal()) {
            self.devices.push(device.ordinal());
        }
    }

    /// The packed bytes (natural C layout, padding zeroed).
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// Offset and size of each parameter, in order.
    pub fn slots(&self) -> &[ParamSlot] {
        &self.slots
    }

    /// A device other than `expected` that passed memory lives on, if any.
    pub(crate) fn foreign_device(&self, expected: usize) -> Option<usize> {
        self.devices.iter().copied().find(|&d| d != expected)
    }

    /// One pointer per parameter into the packed buffer, as `cuLaunchKernel`'s `kernelParams` wants.
    /// The driver only reads through them; they are valid while `self` is neither moved nor changed.
    pub(crate) fn param_pointers(&self) -> Vec<*mut c_void> {
        let base = self.words.as_ptr().cast::<u8>();
        self.slots
            .iter()
            // SAFETY: every slot lies inside `words` (reserve() grows it to cover the slot).
            .map(|s| unsafe { base.add(s.offset) }.cast_mut().cast::<c_void>())
            .collect()
    }
}
