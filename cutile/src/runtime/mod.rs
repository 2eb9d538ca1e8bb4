//! The host runtime on the CUDA driver API (through cudarc): driver discovery, devices, streams,
//! events, device memory, `Tensor<T>` with 64-bit shapes and strides, cubin modules, packed kernel
//! arguments, launches and CUDA graphs.
//!
//! Every path that touches the driver starts at [`driver()`], which loads libcuda without letting
//! cudarc panic, so a machine with no GPU gets [`RuntimeError::NoDriver`] instead of an abort. Pure
//! parts (shape/stride math in [`layout`], argument packing in [`KernelArgs`], cubin inspection in
//! [`cubin`], host fills in [`fill`]) need no driver and are usable anywhere.

mod args;
pub mod cubin;
mod device;
mod driver;
mod dtype;
mod error;
pub mod fill;
pub mod layout;
mod loader;
mod memory;
mod module;
mod stream;
mod tensor;
pub mod timing;

pub use args::{DevicePointer, KernelArgs, KernelParam, ParamSlot};
pub use cubin::CubinError;
pub use device::Device;
pub use driver::{
    DriverInfo, MIN_DRIVER_VERSION, check_driver_version, driver, is_available, library_candidates,
};
pub use dtype::{DType, DeviceElement};
pub use error::{CudaVersion, Result, RuntimeError};
pub use layout::{Layout, LayoutError};
pub use loader::load_kernel;
pub use memory::DeviceBuffer;
pub use module::{Grid, Kernel, Module, PendingLaunch, check_grid, check_params};
pub use stream::{Event, Graph, Stream};
pub use tensor::{Tensor, TensorView, TensorViewMut};
