//! The host runtime on the CUDA driver API (through cudarc): driver discovery, devices, streams,
//! events, device memory, `Tensor<T>` with 64-bit shapes and strides, cubin modules ([`CuModule`]) and
//! their functions ([`CuFunction`]), packed kernel arguments, launches and CUDA graphs. It knows nothing
//! of DSL kernels, cache keys, caches or bundles: those sit above it (see `ARCHITECTURE.md`, layers).
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
mod memory;
mod module;
mod stream;
mod tensor;
pub mod timing;

pub use args::{DevicePointer, KernelArgs, KernelParam};
pub use cubin::{CubinEntry, CubinError, ParamSlot};
pub use device::Device;
pub use driver::{
    DriverInfo, MIN_DRIVER_VERSION, check_driver_version, driver, is_available, library_candidates,
};
pub use dtype::{DType, DeviceElement};
pub use error::{CudaVersion, Result, RuntimeError};
pub use layout::{Layout, LayoutError};
pub use memory::DeviceBuffer;
pub use module::{CuFunction, CuModule, Grid, PendingLaunch, check_grid, check_params};
pub use stream::{Event, Graph, Stream};
pub use tensor::{Tensor, TensorView, TensorViewMut};
