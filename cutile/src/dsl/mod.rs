//! Specialization glue of the kernel DSL: specialization inputs and layout facts ([`spec`]), and kernels as
//! values with the compile-only API ([`kernel`]: [`Kernel::specialize`] → [`Specialized::ir_text`] /
//! [`Specialized::bytecode`] / [`Specialized::compile`]), none of which needs a GPU. The tracer the kernel
//! bodies record into is [`crate::trace`] (below this module); the typed launchers the macro generates
//! live above it, in [`crate::launch::typed`].

mod error;
pub mod kernel;
pub mod spec;

pub use crate::trace::TraceError;
pub use kernel::{
    ArgError, Kernel, KernelInfo, ParamKind, SpecializeError, Specialized, bytecode_version_for,
};
pub use spec::{GenericValue, LayoutFacts, TensorMeta, choose_index_type};

/// Items the `#[cutile::module]` macro's generated code refers to. Not a stable API.
#[doc(hidden)]
pub mod __rt {
    pub use super::kernel::{
        HintInfo, Kernel, KernelBuilder, KernelInfo, ParamDecl, ParamInfo, ParamKind,
        SpecializeError,
    };
    pub use super::spec::{GenericValue, IntoGeneric, TensorMeta};
    pub use crate::core::arith::{DeviceCmp, DeviceLogic};
    pub use crate::core::control::{branch, for_range, while_loop};
    pub use crate::core::debug::{device_assert, print};
    pub use crate::core::foreign::{__foreign_str, ForeignCall};
    pub use cutile_ir::{Module, OptimizationHints};

    #[track_caller]
    pub fn lt<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_lt(b)
    }
    #[track_caller]
    pub fn le<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_le(b)
    }
    #[track_caller]
    pub fn gt<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_gt(b)
    }
    #[track_caller]
    pub fn ge<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_ge(b)
    }
    #[track_caller]
    pub fn eq<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_eq(b)
    }
    #[track_caller]
    pub fn ne<A: DeviceCmp<B>, B>(a: A, b: B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.cmp_ne(b)
    }
    #[track_caller]
    pub fn and<A: DeviceLogic<B>, B>(a: A, b: impl FnOnce() -> B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.logic_and(b)
    }
    #[track_caller]
    pub fn or<A: DeviceLogic<B>, B>(a: A, b: impl FnOnce() -> B) -> A::Output {
        let _at = crate::trace::at(::std::panic::Location::caller());
        a.logic_or(b)
    }
}
