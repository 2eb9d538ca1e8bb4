//! Turning run-time choices (element type, power-of-two tile) into a kernel instantiation: the DSL's
//! kernels are generic Rust functions, so each (type, tile) a plan may pick is one arm here.

/// `$k::kernel::<E, ...>()` for the run-time float type `$dt` (f32, f16, bf16); `None` for others.
macro_rules! float_kernel {
    ($dt:expr, |$e:ident| $body:expr) => {{
        use cutile_ir::ScalarType as __St;
        match $dt {
            __St::F32 => {
                type $e = f32;
                Some($body)
            }
            __St::F16 => {
                type $e = half::f16;
                Some($body)
            }
            __St::BF16 => {
                type $e = half::bf16;
                Some($body)
            }
            _ => None,
        }
    }};
}

/// `$k::kernel::<E, BN>()` for a run-time float type and a power-of-two `BN` in 128..=8192 (and 16384
/// when `$big` is given); `None` outside.
macro_rules! pow2_float_kernel {
    ($dt:expr, $bn:expr, $($k:ident)::+ $(, $extra:tt)*) => {
        $crate::op::float_kernel!($dt, |E| match $bn {
            64 => Some($($k)::+::kernel::<E, 64 $(, $extra)*>()),
            128 => Some($($k)::+::kernel::<E, 128 $(, $extra)*>()),
            256 => Some($($k)::+::kernel::<E, 256 $(, $extra)*>()),
            512 => Some($($k)::+::kernel::<E, 512 $(, $extra)*>()),
            1024 => Some($($k)::+::kernel::<E, 1024 $(, $extra)*>()),
            2048 => Some($($k)::+::kernel::<E, 2048 $(, $extra)*>()),
            4096 => Some($($k)::+::kernel::<E, 4096 $(, $extra)*>()),
            8192 => Some($($k)::+::kernel::<E, 8192 $(, $extra)*>()),
            _ => None,
        })
        .flatten()
    };
}

/// Like [`float_kernel`] for the tensor-core operand types (f16, bf16); `None` for others.
macro_rules! mma_kernel {
    ($dt:expr, |$e:ident| $body:expr) => {{
        use cutile_ir::ScalarType as __St;
        match $dt {
            __St::F16 => {
                type $e = half::f16;
                Some($body)
            }
            __St::BF16 => {
                type $e = half::bf16;
                Some($body)
            }
            _ => None,
        }
    }};
}

pub(crate) use {float_kernel, mma_kernel, pow2_float_kernel};

/// `$body` with `$e` the Rust float type of `$dt` and `$i` the Rust index type of `$it` (i32, i64);
/// `None` for other types.
macro_rules! float_index_kernel {
    ($dt:expr, $it:expr, |$e:ident, $i:ident| $body:expr) => {{
        use cutile_ir::ScalarType as __It;
        match $it {
            __It::I32 => {
                type $i = i32;
                $crate::op::float_kernel!($dt, |$e| $body)
            }
            __It::I64 => {
                type $i = i64;
                $crate::op::float_kernel!($dt, |$e| $body)
            }
            _ => None,
        }
    }};
}

pub(crate) use float_index_kernel;
