//! Specialization and lowering glue of the kernel DSL: the tracing context ([`trace`]), specialization
//! inputs and layout facts ([`spec`]), and kernels as values with the compile-only API ([`kernel`]:
//! [`Kernel::specialize`] → [`Specialized::ir_text`] / [`Specialized::bytecode`] / [`Specialized::compile`]),
//! none of which needs a GPU; and the typed host side ([`launch`]: the launcher the macro generates per
//! kernel builds a [`Launch`] over `cutile::launch`).

pub mod kernel;
pub mod launch;
pub mod spec;
pub mod trace;

pub use kernel::{Kernel, KernelInfo, ParamKind, SpecializeError, Specialized};
pub use launch::{HostScalar, Launch, TensorArg, TensorArgMut};
pub use spec::{GenericValue, LayoutFacts, TensorMeta, choose_index_type};
pub use trace::TraceError;
