//! Launching DSL kernels on runtime tensors, safely, through the kernel cache and AOT bundles.
//!
//! ```no_run
//! use cutile::launch::{LaunchArgs, Launcher};
//! use cutile::runtime::{Device, Stream, Tensor};
//! # fn vadd() -> cutile::dsl::Kernel { unimplemented!() }
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let a = Tensor::<f32>::random(&device, &[1_000_003], 1)?;
//! let b = Tensor::<f32>::random(&device, &[1_000_003], 2)?;
//! let mut c = Tensor::<f32>::zeros(&device, &[1_000_003])?;
//! let launcher = Launcher::new(vadd()); // e.g. vector_add::kernels::vadd::kernel::<f32, 1024>()
//! launcher.launch(&stream, LaunchArgs::new().input(&a).input(&b).output(&mut c))?;
//! # Ok(()) }
//! ```
//!
//! - **Arguments** ([`LaunchArgs`]): tensors (`input` borrows shared, `output` exclusively), scalars,
//!   an optional grid. Kind, count, element type and rank are checked against the kernel's parameters,
//!   with errors naming the parameter and both sides ([`LaunchError`]).
//! - **Grid**: the tiles of the first output's own partition, ceil(extent / tile) per axis (x, y, z),
//!   unless [`LaunchArgs::grid`] overrides it (persistent kernels).
//! - **Warm path**: a process-wide map from a short stack-built key (kernel identity, options, device,
//!   index type, per-argument kind, element type and layout facts, built on the stack) to the loaded kernel and
//!   its [`Signature`]; a hit builds no IR or bytecode, only packs the arguments and calls the driver.
//! - **Cold path**: [`plan`] (specialize → signature → [`CacheKey`]) →
//!   [`load_kernel`] (memory → registered bundles → disk cache →
//!   tileiras). The AOT tools call the same [`plan`] ([`compile_aot`]), so their keys are the launcher's.
//! - **Sync, async, graphs**: [`Launcher::launch`] waits (or only records, inside graph capture);
//!   [`Launcher::launch_async`] returns a guard that holds the borrows until it is waited on or dropped;
//!   [`Launcher::enqueue`] is the unsafe, borrow-free form for callers that synchronise themselves.

pub mod aot;
mod args;
mod bytecode;
mod error;
mod key;
pub mod libraries;
mod loader;
mod packed;
mod plan;
mod resolve;
mod signature;
pub mod typed;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock, RwLock};

pub use args::{
    LaunchArgs, MAX_RANK, ScalarArg, ScalarValue, TensorArg, TensorArgMut, TensorRefParts,
    base_align, ir_dtype,
};
pub use bytecode::{BYTECODE_KERNEL, bytecode_key, compile_bytecode_cached};
pub use error::LaunchError;
pub use libraries::{
    TileLibrarySpec, add_default_tile_library, default_tile_libraries, set_default_tile_libraries,
};
pub use loader::load_kernel;
pub use plan::{CompileOptions, NO_TOOLCHAIN, Plan, compile_aot, kernel_identity, plan};
pub use resolve::{key_toolchain_version, resolve_cubin, toolchain};
pub use signature::{ParamLayout, Signature, overlaps};
pub use typed::{Launch, TensorOf, TensorOfMut};

use crate::dsl::{ArgError, Kernel, ParamKind};
use crate::key::CacheKey;
use crate::runtime::{self, Device, Stream};
use crate::toolchain::GpuArch;
use args::Arg;
use key::{FxBuild, KeyBuf};

/// A kernel ready to launch: the DSL kernel, its interned identity and its compile options. Create it
/// once and reuse it; each launch then costs one key build and one map lookup before the driver call.
#[derive(Debug, Clone)]
pub struct Launcher {
    kernel: Kernel,
    id: u32,
    options: CompileOptions,
}

/// A specialization loaded for one device: the runtime kernel, its launch signature and its cache key.
#[derive(Debug)]
pub struct Prepared {
    kernel: runtime::CuFunction,
    signature: Signature,
    key: CacheKey,
    last_args: packed::PackMemo,
}

impl Prepared {
    pub fn signature(&self) -> &Signature {
        &self.signature
    }
    /// The cache key its cubin was found or compiled under.
    pub fn key(&self) -> &CacheKey {
        &self.key
    }
    pub fn function(&self) -> &runtime::CuFunction {
        &self.kernel
    }
}

type Memo = RwLock<HashMap<Box<[u8]>, Arc<Prepared>, FxBuild>>;

fn memo() -> &'static Memo {
    static MEMO: OnceLock<Memo> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// Number of specializations loaded by launchers in this process.
pub fn loaded_count() -> usize {
    memo().read().map(|m| m.len()).unwrap_or(0)
}

impl From<Kernel> for Launcher {
    fn from(kernel: Kernel) -> Launcher {
        Launcher::new(kernel)
    }
}

impl Launcher {
    /// A launcher with the default compile options (`-O3`).
    pub fn new(kernel: Kernel) -> Launcher {
        Launcher::with_options(kernel, CompileOptions::default())
    }

    pub fn with_options(kernel: Kernel, options: CompileOptions) -> Launcher {
        Launcher {
            id: key::kernel_id(&kernel),
            kernel,
            options,
        }
    }

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    pub fn options(&self) -> CompileOptions {
        self.options.clone()
    }

    /// Resolves (specializes, looks up or compiles, loads) the kernel for these arguments on `device`
    /// without launching it; a later launch with arguments of the same key is warm.
    pub fn prepare(
        &self,
        device: &Device,
        args: &LaunchArgs<'_>,
    ) -> Result<Arc<Prepared>, LaunchError> {
        let mut k = KeyBuf::new();
        key::warm_key(
            &mut k,
            &self.kernel,
            self.id,
            &self.options,
            device.ordinal(),
            args,
        )?;
        if let Some(p) = memo()
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(k.as_slice())
        {
            return Ok(p.clone());
        }
        self.cold(device, args, k.as_slice())
    }

    /// Queues the kernel on `stream` and returns at once, holding no borrows.
    ///
    /// # Safety
    /// Every tensor in `args` must stay alive, and outputs unaliased by other work, until the kernel
    /// has finished (synchronise `stream`, or record and wait on an event, before touching them).
    pub unsafe fn enqueue(
        &self,
        stream: &Stream,
        args: &LaunchArgs<'_>,
    ) -> Result<(), LaunchError> {
        let device = stream.device();
        let name = self.kernel.name();
        for (i, a) in args.items.iter().enumerate() {
            if let Arg::Tensor(t) = a
                && t.device != device.ordinal()
            {
                return Err(ArgError::DeviceMismatch {
                    kernel: name.to_string(),
                    param: key::param_name(&self.kernel, i),
                    expected: device.ordinal(),
                    found: t.device,
                }
                .into());
            }
        }
        let prepared = self.prepare(device, args)?;
        let sig = &prepared.signature;
        sig.check_args(name, args)?;
        let Some(grid) = sig.grid(name, args)? else {
            return Ok(()); // an empty output: nothing to compute
        };
        // SAFETY: the packing follows the entry's parameter types read from its IR, every address
        // belongs to a tensor on the stream's device whose layout the kernel was specialized for (the
        // warm key covers element types, ranks and layout facts; `check` the rest), outputs do not
        // overlap themselves, and the borrow checker kept outputs exclusive. Lifetime until completion
        // is the caller's obligation.
        prepared
            .last_args
            .with_packed(sig, name, args, |packed| unsafe {
                prepared.kernel.enqueue(stream, grid, packed)
            })??;
        Ok(())
    }

    /// Launches and waits for the kernel to finish. Inside graph capture it only records the launch.
    pub fn launch(&self, stream: &Stream, args: LaunchArgs<'_>) -> Result<(), LaunchError> {
        self.launch_async(stream, args)?.wait()
    }

    /// Launches without waiting. The guard keeps `args`' borrows until [`Pending::wait`] or its drop,
    /// which waits for the stream (unless it is capturing a graph, where nothing runs yet).
    ///
    /// Do not leak the guard (`mem::forget`): the borrows would end while the kernel may still run.
    /// The runtime's own copies and frees are ordered after it by the driver (they run on the legacy
    /// stream, which waits for blocking streams), but work the caller queues on another stream is not.
    pub fn launch_async<'a>(
        &self,
        stream: &'a Stream,
        args: LaunchArgs<'a>,
    ) -> Result<Pending<'a>, LaunchError> {
        // SAFETY: the returned guard holds `args`' borrows ('a) until the stream has finished the work.
        unsafe { self.enqueue(stream, &args) }?;
        Ok(Pending {
            stream,
            done: false,
            _borrows: PhantomData,
        })
    }

    /// The cold path up to the cubin lookup, without a device: checks the arguments against the kernel's
    /// parameters, specializes for them, and computes the signature and the cache key for `arch` with
    /// tileiras `toolchain_version`. Launches call exactly this; so can tools and tests.
    pub fn plan_for(
        &self,
        args: &LaunchArgs<'_>,
        arch: GpuArch,
        toolchain_version: &str,
    ) -> Result<Plan, LaunchError> {
        let kinds: Vec<ParamKind> = args
            .items
            .iter()
            .map(|a| match a {
                Arg::Tensor(t) if t.output => ParamKind::Output,
                Arg::Tensor(_) => ParamKind::Input,
                Arg::Scalar(_) => ParamKind::Scalar,
            })
            .collect();
        plan::check_kinds(&self.kernel, &kinds)?;
        let mut warm = KeyBuf::new();
        key::warm_key(&mut warm, &self.kernel, self.id, &self.options, 0, args)?;
        let plan = plan::plan(
            &self.kernel,
            &args.tensor_metas(),
            arch,
            &self.options,
            toolchain_version,
        )?;
        let scalars: Vec<_> = args.scalars().iter().map(|s| s.dtype).collect();
        plan::check_scalars(&self.kernel, &plan.signature, &scalars)?;
        // Refuse a warm key that does not describe what specialization used (index type, layout facts):
        // it could hand this kernel to arguments it was not built for.
        let mut expected = KeyBuf::new();
        key::expected_key(
            &mut expected,
            self.id,
            &self.options,
            0,
            &plan.specialized,
            args,
        );
        if expected.as_slice() != warm.as_slice() {
            return Err(LaunchError::Signature {
                kernel: self.kernel.name().to_string(),
                message:
                    "the launcher's layout facts or index type disagree with the specialization's"
                        .into(),
            });
        }
        Ok(plan)
    }

    fn cold(
        &self,
        device: &Device,
        args: &LaunchArgs<'_>,
        warm: &[u8],
    ) -> Result<Arc<Prepared>, LaunchError> {
        let (major, minor) = device.compute_capability();
        let arch = GpuArch::from_compute_capability(major, minor).ok_or_else(|| {
            LaunchError::UnsupportedDevice {
                device: device.name().to_string(),
                major,
                minor,
            }
        })?;
        let plan = self.plan_for(args, arch, &resolve::key_toolchain_version())?;
        let kernel = resolve::load(device, &plan)?;
        let prepared = Arc::new(Prepared {
            kernel,
            signature: plan.signature,
            key: plan.key,
            last_args: Default::default(),
        });
        let mut m = memo().write().unwrap_or_else(|p| p.into_inner());
        Ok(m.entry(Box::from(warm)).or_insert(prepared).clone())
    }
}

/// An in-flight launch holding its arguments' borrows.
#[must_use = "dropping the guard waits for the kernel; call wait() to see errors"]
#[derive(Debug)]
pub struct Pending<'a> {
    stream: &'a Stream,
    done: bool,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> Pending<'a> {
    /// A guard for work already queued on `stream` (by [`Launcher::enqueue`]): ops that make several
    /// launches return one guard for all of them.
    ///
    /// # Safety
    /// Every borrow the queued work relies on must outlive `'a`, as for [`Launcher::launch_async`].
    pub unsafe fn for_enqueued(stream: &'a Stream) -> Pending<'a> {
        Pending {
            stream,
            done: false,
            _borrows: PhantomData,
        }
    }

    /// Leaves the work queued and returns at once, without waiting: for callers whose own stream
    /// ordering keeps the memory alive (PyTorch's caching allocator, a C caller that owns the stream).
    ///
    /// # Safety
    /// Every buffer the queued work reads or writes must stay allocated, and not be reused by anyone,
    /// until that work has finished on the stream.
    pub unsafe fn detach(mut self) {
        self.done = true;
    }

    /// Waits for the kernel (and everything queued before it on the stream). Inside graph capture
    /// there is nothing to wait for.
    pub fn wait(mut self) -> Result<(), LaunchError> {
        self.done = true;
        finish(self.stream)
    }
}

fn finish(stream: &Stream) -> Result<(), LaunchError> {
    if stream.is_capturing()? {
        return Ok(());
    }
    Ok(stream.synchronize()?)
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Errors cannot be returned from drop; a failed kernel also reports on the next call.
            let _ = finish(self.stream);
        }
    }
}
