//! One user mistake, one error: a wrong-rank or wrong-dtype argument gives the same `ArgError` through
//! the launcher's cold path (`Launcher::plan_for`) and through the specialization API
//! (`Kernel::specialize`). No GPU and no tileiras are needed.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry]
    pub fn vadd<E: Numeric, const B: i32>(
        a: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        c: &mut Tensor<E, S1<B>>,
    ) {
        let pid = block_id_x();
        c.store(a.load_tile::<S1<B>>(pid) + b.load_tile::<S1<B>>(pid));
    }
}

use cutile::dsl::{ArgError, SpecializeError, TensorMeta};
use cutile::launch::{LaunchArgs, LaunchError, Launcher};
use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType::{self, *};

/// 256-byte aligned made-up device addresses; nothing is launched.
const PTR: u64 = 0x7f00_0000_0000;

fn meta(dtype: ScalarType, shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(dtype, shape)
}

/// The cold path's error for these (input, input, output) tensors.
fn through_launcher(metas: &[TensorMeta]) -> LaunchError {
    let launcher = Launcher::new(kernels::vadd::kernel::<f32, 1024>());
    let mut args = LaunchArgs::new();
    for (i, m) in metas.iter().enumerate() {
        let out = i == metas.len() - 1;
        // SAFETY: nothing is launched; the description only feeds specialization.
        args = unsafe {
            args.raw_tensor(
                out,
                m.dtype,
                &m.shape,
                &m.strides,
                PTR + (i as u64) * 0x1000_0000,
                0,
            )
        };
    }
    launcher
        .plan_for(&args, GpuArch::Sm90, "13.5.37")
        .expect_err("the arguments are wrong")
}

/// The specialization API's error for the same tensors.
fn through_specialize(metas: &[TensorMeta]) -> SpecializeError {
    kernels::vadd::kernel::<f32, 1024>()
        .specialize(metas)
        .expect_err("the arguments are wrong")
}

fn same_arg_error(metas: &[TensorMeta]) -> ArgError {
    let cold = through_launcher(metas);
    let spec = through_specialize(metas);
    let (Some(a), Some(b)) = (cold.arg(), spec.arg()) else {
        panic!("expected argument errors on both paths, got {cold:?} and {spec:?}");
    };
    assert_eq!(a, b, "the two paths disagree");
    assert_eq!(cold.to_string(), spec.to_string(), "the messages differ");
    a.clone()
}

#[test]
fn wrong_rank_is_the_same_arg_error_on_both_paths() {
    let n = [1000i64];
    let got = same_arg_error(&[meta(F32, &[10, 100]), meta(F32, &n), meta(F32, &n)]);
    assert!(
        matches!(
            &got,
            ArgError::Rank { param, declared: 1, actual: 2, shape, .. }
                if param == "a" && shape == &[10, 100]
        ),
        "{got:?}"
    );
}

#[test]
fn wrong_dtype_is_the_same_arg_error_on_both_paths() {
    let n = [1000i64];
    let got = same_arg_error(&[meta(F32, &n), meta(BF16, &n), meta(F32, &n)]);
    assert!(
        matches!(
            &got,
            ArgError::DType { param, declared: F32, actual: BF16, .. } if param == "b"
        ),
        "{got:?}"
    );
}
