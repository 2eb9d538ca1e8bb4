//! The typed host side of a DSL kernel. `#[cutile::module]` generates, per kernel, a launcher function
//! with the kernel's generics whose parameters mirror the kernel's: a runtime tensor or view of element
//! type `E` for `&Tensor<E, S>` (borrowed shared) and `&mut Tensor<E, S>` (borrowed exclusively), a host
//! `E` for `Scalar<E>`. So a wrong element type or a missing `&mut` is a build error at the call site:
//!
//! ```ignore
//! vector_add::kernels::vadd::<f32, 1024>(&a, &b, &mut c).launch(&stream)?;
//! gemm::kernels::gemm_persistent::<bf16, bf16, 128, 128, 64>(&a, &b, 8, &mut c).grid((132, 1, 1)).launch(&stream)?;
//! ```
//!
//! The launcher only assembles a [`Launcher`] and its [`LaunchArgs`]; the rest of this module does the checks, the kernel cache (tracing and
//! tileiras only on a miss), argument packing and the launch. For machines without tileiras, compile the
//! specializations ahead of time with [`compile_aot`](super::compile_aot) into a bundle
//! ([`crate::bundle::BundleWriter`], loaded through `CUTILE_BUNDLE`).

use super::{CompileOptions, LaunchArgs, LaunchError, Launcher, Pending, ScalarArg};
use crate::core::ElementType;
use crate::dsl::Kernel;
use crate::runtime::{DeviceElement, Grid, Stream, Tensor, TensorView, TensorViewMut};

/// A runtime tensor or view holding `E` elements (the element-typed form of [`TensorArg`](super::TensorArg),
/// which the generated launchers require): an input argument of a kernel's `&Tensor<E, S>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a device tensor of `{E}`",
    label = "expected a `cutile::runtime::Tensor<{E}>` or a view of one"
)]
pub trait TensorOf<E: ElementType>: super::TensorArg {}
/// A runtime tensor or mutable view holding `E` elements: an output argument (`&mut Tensor<E, S>`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a writable device tensor of `{E}`",
    label = "expected a `cutile::runtime::Tensor<{E}>` or a `TensorViewMut` of one"
)]
pub trait TensorOfMut<E: ElementType>: TensorOf<E> + super::TensorArgMut {}

impl<T: DeviceElement + ElementType> TensorOf<T> for Tensor<T> {}
impl<T: DeviceElement + ElementType> TensorOf<T> for TensorView<'_, T> {}
impl<T: DeviceElement + ElementType> TensorOf<T> for TensorViewMut<'_, T> {}
impl<T: DeviceElement + ElementType> TensorOfMut<T> for Tensor<T> {}
impl<T: DeviceElement + ElementType> TensorOfMut<T> for TensorViewMut<'_, T> {}

/// A kernel call with its arguments (built by the generated launcher), ready to run on a stream.
#[derive(Debug)]
pub struct Launch<'a> {
    launcher: Launcher,
    args: LaunchArgs<'a>,
}

impl<'a> Launch<'a> {
    /// Used by generated launchers.
    #[doc(hidden)]
    pub fn new(kernel: Kernel) -> Launch<'a> {
        Launch {
            launcher: Launcher::new(kernel),
            args: LaunchArgs::new(),
        }
    }
    #[doc(hidden)]
    pub fn input<E: ElementType>(mut self, t: &'a impl TensorOf<E>) -> Self {
        self.args = self.args.input(t);
        self
    }
    #[doc(hidden)]
    pub fn output<E: ElementType>(mut self, t: &'a mut impl TensorOfMut<E>) -> Self {
        self.args = self.args.output(t);
        self
    }
    #[doc(hidden)]
    pub fn scalar<E: ScalarArg>(mut self, v: E) -> Self {
        self.args = self.args.scalar(v);
        self
    }

    /// Launch on an explicit grid (persistent kernels); by default the grid is the first output's tiles.
    pub fn grid(mut self, grid: Grid) -> Self {
        self.args = self.args.grid(grid);
        self
    }

    /// Compile with these options on a cache miss (default `-O3`).
    pub fn options(mut self, options: CompileOptions) -> Self {
        self.launcher = Launcher::with_options(self.launcher.kernel().clone(), options);
        self
    }

    /// Compile with the optimization hint `key = value` for every architecture (`occupancy`,
    /// `num_worker_warps_per_cta`, …; see [`Kernel::with_hint`]). The hint is part of the kernel's
    /// identity, so the hinted specialization is cached apart from the plain one.
    pub fn hint(mut self, key: &str, value: i32) -> Self {
        let kernel = self
            .launcher
            .kernel()
            .clone()
            .with_hint("default", key, value);
        self.launcher = Launcher::with_options(kernel, self.launcher.options());
        self
    }

    /// The launcher and the arguments, for callers that drive [`Launcher`] themselves.
    pub fn into_parts(self) -> (Launcher, LaunchArgs<'a>) {
        (self.launcher, self.args)
    }

    /// Launch and wait (inside graph capture: only record).
    pub fn launch(self, stream: &Stream) -> Result<(), LaunchError> {
        self.launcher.launch(stream, self.args)
    }

    /// Launch without waiting; the guard holds the arguments' borrows until the kernel has finished.
    pub fn launch_async(self, stream: &'a Stream) -> Result<Pending<'a>, LaunchError> {
        self.launcher.launch_async(stream, self.args)
    }
}
