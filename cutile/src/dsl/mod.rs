//! Specialization and lowering glue of the kernel DSL: the tracing context ([`trace`]), specialization
//! inputs and layout facts ([`spec`]), and kernels as values with the compile-only API ([`kernel`]:
//! [`Kernel::specialize`] → [`Specialized::ir_text`] / [`Specialized::bytecode`] / [`Specialized::compile`]),
//! none of which needs a GPU.

pub mod kernel;
pub mod spec;
pub mod trace;

pub use kernel::{Kernel, KernelInfo, ParamKind, SpecializeError, Specialized};
pub use spec::{GenericValue, LayoutFacts, TensorMeta, choose_index_type};
pub use trace::TraceError;
