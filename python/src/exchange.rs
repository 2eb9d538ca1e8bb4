//! DLPack's C exchange API (`torch.Tensor.__dlpack_c_exchange_api__`, torch 2.10 and later): a table
//! of C functions through which a native extension reads a torch tensor's address, shape, strides and
//! type, asks torch for its current stream, and allocates a torch tensor, all without running Python.
//!
//! This module owns the C layouts (from DLPack 1.x's `dlpack.h`), finding the table once, and safe
//! wrappers over the four functions [`crate::fast`] uses. Nothing here launches anything.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use cutile_ir::ScalarType;
use pyo3::prelude::*;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// Null: compact row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    pub dl_tensor: DLTensor,
}

type SetError = unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char);

#[repr(C)]
struct ApiHeader {
    version: DLPackVersion,
    prev_api: *mut ApiHeader,
}

#[repr(C)]
struct ExchangeApi {
    header: ApiHeader,
    managed_tensor_allocator: Option<
        unsafe extern "C" fn(
            *mut DLTensor,
            *mut *mut DLManagedTensorVersioned,
            *mut c_void,
            SetError,
        ) -> c_int,
    >,
    managed_tensor_from_py_object_no_sync:
        Option<unsafe extern "C" fn(*mut c_void, *mut *mut DLManagedTensorVersioned) -> c_int>,
    managed_tensor_to_py_object_no_sync:
        Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *mut c_void) -> c_int>,
    dltensor_from_py_object_no_sync:
        Option<unsafe extern "C" fn(*mut c_void, *mut DLTensor) -> c_int>,
    current_work_stream: Option<unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> c_int>,
}

/// DLPack's device type of CUDA memory.
pub const KDL_CUDA: i32 = 2;

/// The table's functions this extension calls (all present, checked when the table is found).
#[derive(Debug, Clone, Copy)]
pub struct Exchange {
    alloc: unsafe extern "C" fn(
        *mut DLTensor,
        *mut *mut DLManagedTensorVersioned,
        *mut c_void,
        SetError,
    ) -> c_int,
    to_py: unsafe extern "C" fn(*mut DLManagedTensorVersioned, *mut *mut c_void) -> c_int,
    describe: unsafe extern "C" fn(*mut c_void, *mut DLTensor) -> c_int,
    stream: unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> c_int,
}

static EXCHANGE: OnceLock<Exchange> = OnceLock::new();

/// The table found by [`use_exchange_api`], if any.
pub fn get() -> Option<&'static Exchange> {
    EXCHANGE.get()
}

/// Takes torch's exchange table (`torch.Tensor.__dlpack_c_exchange_api__`, a capsule named
/// `dlpack_exchange_api`; torch 2.10 named it `__c_dlpack_exchange_api__`, an integer address) for
/// the fast path; False when it is not a DLPack 1.x table with the functions the fast path needs.
#[pyfunction]
pub fn use_exchange_api(api: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ptr: *const ExchangeApi = if let Ok(addr) = api.extract::<usize>() {
        addr as *const ExchangeApi
    } else {
        let name = c"dlpack_exchange_api";
        // SAFETY: a valid object pointer; PyCapsule_GetPointer checks the type and the name and sets
        // an error (cleared below) when either is wrong.
        let p = unsafe { pyo3::ffi::PyCapsule_GetPointer(api.as_ptr(), name.as_ptr()) };
        if p.is_null() {
            let _ = PyErr::take(api.py());
            return Ok(false);
        }
        p as *const ExchangeApi
    };
    if ptr.is_null() {
        return Ok(false);
    }
    // SAFETY: torch keeps the table alive for the process (the protocol's requirement); we read the
    // header first and the functions only for major version 1, whose layout is the one above.
    let api = unsafe { &*ptr };
    if api.header.version.major != 1 {
        return Ok(false);
    }
    let (Some(alloc), Some(to_py), Some(describe), Some(stream)) = (
        api.managed_tensor_allocator,
        api.managed_tensor_to_py_object_no_sync,
        api.dltensor_from_py_object_no_sync,
        api.current_work_stream,
    ) else {
        return Ok(false);
    };
    let _ = EXCHANGE.set(Exchange {
        alloc,
        to_py,
        describe,
        stream,
    });
    Ok(true)
}

/// A tensor as the fast path reads it: the address of element 0, shape, strides (elements), element
/// type and device.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub ptr: u64,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub dtype: Option<ScalarType>,
    pub device: DLDevice,
}

impl PartialEq for DLDevice {
    fn eq(&self, o: &DLDevice) -> bool {
        (self.device_type, self.device_id) == (o.device_type, o.device_id)
    }
}

/// A DLTensor filled by torch for a tensor borrowed for `'a` (its shape and strides point into it).
#[derive(Debug, Clone, Copy)]
pub struct View<'a>(pub DLTensor, std::marker::PhantomData<&'a ()>);

impl View<'_> {
    pub fn ptr(&self) -> u64 {
        (self.0.data as u64).wrapping_add(self.0.byte_offset)
    }

    pub fn dtype(&self) -> Option<ScalarType> {
        scalar(self.0.dtype)
    }

    pub fn device(&self) -> DLDevice {
        self.0.device
    }

    pub fn shape(&self) -> &[i64] {
        let n = usize::try_from(self.0.ndim).unwrap_or(0);
        if n == 0 || self.0.shape.is_null() {
            return &[];
        }
        // SAFETY: torch filled `ndim` extents, alive while the tensor is borrowed.
        unsafe { std::slice::from_raw_parts(self.0.shape, n) }
    }

    /// `None`: compact row-major.
    pub fn strides(&self) -> Option<&[i64]> {
        let n = usize::try_from(self.0.ndim).unwrap_or(0);
        if n == 0 || self.0.strides.is_null() {
            return None;
        }
        // SAFETY: as for the shape.
        Some(unsafe { std::slice::from_raw_parts(self.0.strides, n) })
    }

    /// The owned description.
    pub fn described(&self) -> Described {
        // SAFETY: filled by torch, alive while borrowed.
        unsafe { read(&self.0) }
    }
}

/// The element type of a DLPack type code, for the types the kernels take.
fn scalar(t: DLDataType) -> Option<ScalarType> {
    Some(match (t.code, t.bits, t.lanes) {
        (2, 32, 1) => ScalarType::F32,
        (2, 16, 1) => ScalarType::F16,
        (4, 16, 1) => ScalarType::BF16,
        (0, 32, 1) => ScalarType::I32,
        (0, 64, 1) => ScalarType::I64,
        _ => return None,
    })
}

/// DLPack's type code of an element type.
fn dl_type(t: ScalarType) -> Option<DLDataType> {
    let (code, bits) = match t {
        ScalarType::F32 => (2, 32),
        ScalarType::F16 => (2, 16),
        ScalarType::BF16 => (4, 16),
        ScalarType::I32 => (0, 32),
        ScalarType::I64 => (0, 64),
        _ => return None,
    };
    Some(DLDataType {
        code,
        bits,
        lanes: 1,
    })
}

/// Reads `t` (a DLTensor the producer filled).
///
/// # Safety
/// `t.shape` and `t.strides` (when not null) point to `t.ndim` values.
unsafe fn read(t: &DLTensor) -> Described {
    let n = usize::try_from(t.ndim).unwrap_or(0);
    let shape: Vec<i64> = if n == 0 || t.shape.is_null() {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(t.shape, n) }.to_vec()
    };
    let strides = if n > 0 && !t.strides.is_null() {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(t.strides, n) }.to_vec()
    } else {
        cutile_kernels::op::contiguous_strides(&shape)
    };
    Described {
        ptr: (t.data as u64).wrapping_add(t.byte_offset),
        shape,
        strides,
        dtype: scalar(t.dtype),
        device: t.device,
    }
}

/// The message torch's allocator reports through `SetError`.
unsafe extern "C" fn set_error(ctx: *mut c_void, kind: *const c_char, message: *const c_char) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: the producer passes NUL-terminated strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: `ctx` is the `String` `allocate` passes, alive for the call.
    let out = unsafe { &mut *(ctx as *mut String) };
    *out = format!("{}: {}", text(kind), text(message));
}

impl Exchange {
    /// `obj` (exactly a `torch.Tensor`: the protocol takes only the type the table came from).
    pub fn describe(&self, obj: &Bound<'_, PyAny>) -> PyResult<Described> {
        // SAFETY: the view is read at once, while `obj` is alive.
        Ok(unsafe { read(&self.view(obj)?.0) })
    }

    /// `obj`'s DLTensor as torch fills it, without copying its shape and strides: they point into
    /// the tensor and stay valid while `obj` lives and the GIL is held.
    pub fn view<'a>(&self, obj: &'a Bound<'_, PyAny>) -> PyResult<View<'a>> {
        let mut t = DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice {
                device_type: 0,
                device_id: 0,
            },
            ndim: 0,
            dtype: DLDataType {
                code: 0,
                bits: 0,
                lanes: 0,
            },
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        // SAFETY: a live object of the table's type (the caller's check) and a DLTensor to fill, held
        // with the GIL.
        if unsafe { (self.describe)(obj.as_ptr() as *mut c_void, &mut t) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(View(t, std::marker::PhantomData))
    }

    /// torch's current stream of CUDA device `device`.
    pub fn current_stream(&self, py: Python<'_>, device: i32) -> PyResult<usize> {
        let mut s: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out pointer, with the GIL held.
        if unsafe { (self.stream)(KDL_CUDA, device, &mut s) } != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(s as usize)
    }

    /// A new contiguous torch tensor of `shape` and `dtype` on `device` from torch's allocator (on the
    /// current stream, as `torch.empty` would), and its description.
    pub fn empty(
        &self,
        py: Python<'_>,
        shape: &[i64],
        dtype: ScalarType,
        device: DLDevice,
    ) -> PyResult<(PyObject, Described)> {
        let Some(dl) = dl_type(dtype) else {
            return Err(crate::CutileError::new_err(format!(
                "no DLPack type for element type {dtype}"
            )));
        };
        let mut shape = shape.to_vec();
        let mut proto = DLTensor {
            data: std::ptr::null_mut(),
            device,
            ndim: i32::try_from(shape.len()).unwrap_or(i32::MAX),
            dtype: dl,
            shape: shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let mut managed: *mut DLManagedTensorVersioned = std::ptr::null_mut();
        let mut error = String::new();
        // SAFETY: a prototype whose shape lives across the call, a valid out pointer, and an error
        // context that outlives it; the GIL is held (the allocator may raise).
        let rc = unsafe {
            (self.alloc)(
                &mut proto,
                &mut managed,
                &mut error as *mut String as *mut c_void,
                set_error,
            )
        };
        if rc != 0 || managed.is_null() {
            if let Some(e) = PyErr::take(py) {
                return Err(e);
            }
            return Err(crate::CutileError::new_err(format!(
                "torch could not allocate a {dtype} tensor of shape {shape:?}: {error}"
            )));
        }
        // SAFETY: the allocator returned an owning, filled tensor.
        let described = unsafe { read(&(*managed).dl_tensor) };
        let mut obj: *mut c_void = std::ptr::null_mut();
        // SAFETY: `managed` is owned here and its ownership passes to the call (also on failure, per
        // the protocol); `obj` receives a new reference.
        if unsafe { (self.to_py)(managed, &mut obj) } != 0 || obj.is_null() {
            return Err(PyErr::take(py).unwrap_or_else(|| {
                crate::CutileError::new_err("torch could not wrap an allocated tensor")
            }));
        }
        // SAFETY: a new reference to a live object, owned from here on.
        let obj = unsafe { PyObject::from_owned_ptr(py, obj as *mut pyo3::ffi::PyObject) };
        Ok((obj, described))
    }
}

/// What [`exchange_describe`] returns: `(address, shape, strides, dtype, (device type, device id))`.
type DescribedTuple = (u64, Vec<i64>, Vec<i64>, Option<String>, (i32, i32));

/// A torch tensor as the exchange table reads it: the CPU check of the layouts above (tests compare
/// it with torch's own view).
#[pyfunction]
pub fn exchange_describe(x: &Bound<'_, PyAny>) -> PyResult<DescribedTuple> {
    let ex = get().ok_or_else(|| crate::CutileError::new_err("no exchange table in use"))?;
    let d = ex.describe(x)?;
    Ok((
        d.ptr,
        d.shape,
        d.strides,
        d.dtype.map(|t| t.to_string()),
        (d.device.device_type, d.device.device_id),
    ))
}

/// A new tensor from the exchange table's allocator with `x`'s shape, type and device (the CPU check
/// of the allocation and wrapping path).
#[pyfunction]
pub fn exchange_empty_like(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let ex = get().ok_or_else(|| crate::CutileError::new_err("no exchange table in use"))?;
    let d = ex.describe(x)?;
    let dtype = d
        .dtype
        .ok_or_else(|| crate::CutileError::new_err("element type without a kernel"))?;
    Ok(ex.empty(py, &d.shape, dtype, d.device)?.0)
}
