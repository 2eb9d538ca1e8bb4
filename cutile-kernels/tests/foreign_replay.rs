//! `foreign::Replay`: a prepared call replayed over other tensors of the same layouts queues the same
//! kernels with the same arguments as the op itself, so its outputs must be bit-identical to a direct
//! `foreign` call's on the same inputs. GPU tests (ignored without `--include-ignored`; skipped without a
//! GPU), over random ragged shapes, every `ReplayOp`, bf16 and f16; plus the refusals: a call that needs
//! stream scratch is not replayable, and addresses of another alignment are an error.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::gpu_device;
use cutile::runtime::{Device, DeviceElement, Stream, Tensor};
use cutile_kernels::foreign::{ForeignStream, RawTensor, Replay, ReplayOp, UnaryActivation};
use half::{bf16, f16};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// `t` as a foreign caller describes it.
fn raw<T: DeviceElement>(name: &'static str, t: &Tensor<T>) -> RawTensor {
    RawTensor {
        name,
        ptr: t.device_ptr(),
        shape: t.shape().to_vec(),
        strides: t.strides().to_vec(),
        dtype: cutile::launch::ir_dtype(T::DTYPE),
    }
}

/// The tensor shapes of `op` for `rows x cols` (cols even, so the gated ops halve it): inputs, then
/// the output.
fn shapes(op: ReplayOp, rows: i64, cols: i64) -> Vec<Vec<i64>> {
    let (r, c) = (rows, cols);
    match op {
        ReplayOp::SiluAndMul
        | ReplayOp::Activation(UnaryActivation::Geglu | UnaryActivation::GegluTanh) => {
            vec![vec![r, c], vec![r, c / 2]]
        }
        ReplayOp::Softmax | ReplayOp::Activation(_) => vec![vec![r, c], vec![r, c]],
        ReplayOp::RmsNorm { .. } => vec![vec![r, c], vec![c], vec![r, c]],
        ReplayOp::LayerNorm { .. } => vec![vec![r, c], vec![c], vec![c], vec![r, c]],
        ReplayOp::Swiglu => vec![vec![r, c], vec![r, c], vec![r, c]],
        // A [r, c/2] x [c/2, r] product: ragged in all three extents.
        ReplayOp::Matmul => vec![vec![r, c / 2], vec![c / 2, r + 3], vec![r, r + 3]],
    }
}

/// One set of tensors for `op` (inputs random from `seed`, the output zeroed).
fn tensors<T: DeviceElement>(dev: &Device, shapes: &[Vec<i64>], seed: u64) -> Vec<Tensor<T>> {
    let last = shapes.len() - 1;
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if i == last {
                Tensor::zeros(dev, s).unwrap()
            } else {
                Tensor::random(dev, s, seed + i as u64).unwrap()
            }
        })
        .collect()
}

fn raws<T: DeviceElement>(op: ReplayOp, t: &[Tensor<T>]) -> Vec<RawTensor> {
    op.tensor_names()
        .iter()
        .zip(t)
        .map(|(&n, t)| raw(n, t))
        .collect()
}

const OPS: &[ReplayOp] = &[
    ReplayOp::Softmax,
    ReplayOp::RmsNorm { eps: 1e-6 },
    ReplayOp::LayerNorm { eps: 1e-5 },
    ReplayOp::SiluAndMul,
    ReplayOp::Swiglu,
    ReplayOp::Activation(UnaryActivation::Gelu),
    ReplayOp::Activation(UnaryActivation::GeluTanh),
    ReplayOp::Activation(UnaryActivation::Relu),
    ReplayOp::Activation(UnaryActivation::Geglu),
    ReplayOp::Matmul,
];

/// Prepares on one tensor set, replays on a second, runs the op directly on a third with the second's
/// inputs, and compares the outputs bit for bit. `Ok(false)`: the call was not replayable.
fn replay_matches_direct<T: DeviceElement + PartialEq + std::fmt::Debug>(
    dev: &Device,
    stream: &Stream,
    op: ReplayOp,
    rows: i64,
    cols: i64,
    seed: u64,
) -> Result<bool, TestCaseError> {
    let shapes = shapes(op, rows, cols);
    let prepared_on = tensors::<T>(dev, &shapes, seed);
    let replayed = tensors::<T>(dev, &shapes, seed + 100);
    let mut reference = tensors::<T>(dev, &shapes, seed + 100);
    let s = unsafe { ForeignStream::new(0, stream.raw_handle()) }.unwrap();
    let Some(replay) = Replay::prepare(&s, op, &raws(op, &prepared_on)).unwrap() else {
        return Ok(false);
    };
    let addresses: Vec<u64> = replayed.iter().map(|t| t.device_ptr()).collect();
    // SAFETY: the tensors live until the stream is synchronized below.
    unsafe { replay.enqueue(stream.raw_handle(), &addresses) }.unwrap();
    // The reference runs the op on a copy of the second set's inputs (same seeds).
    let last = reference.len() - 1;
    reference[last] = Tensor::zeros(dev, &shapes[last]).unwrap();
    // The op itself through `foreign` (what the replay stands for).
    unsafe { op.call(&s, &raws(op, &reference)) }.unwrap();
    stream.synchronize().unwrap();
    let got = replayed[last].to_host().unwrap();
    let want = reference[last].to_host().unwrap();
    prop_assert!(
        got == want,
        "{op:?} {rows}x{cols}: the replay's output differs from the op's"
    );
    Ok(true)
}

#[test]
#[ignore = "needs a GPU"]
fn replays_match_the_op_on_random_calls() {
    let Some((dev, stream)) = gpu_device("replays_match_the_op_on_random_calls") else {
        return;
    };
    let cases = (
        0..OPS.len(),
        any::<bool>(),
        1i64..300,
        1i64..1500,
        0u64..1000,
    );
    let mut runner = TestRunner::new(Config {
        cases: 120,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&cases, |(op, half, rows, half_cols, seed)| {
            let (op, cols) = (OPS[op], 2 * half_cols);
            let replayed = if half {
                replay_matches_direct::<f16>(&dev, &stream, op, rows, cols, seed)?
            } else {
                replay_matches_direct::<bf16>(&dev, &stream, op, rows, cols, seed)?
            };
            // Only the split-row softmax (few wide rows, none here) and a GEMM over unaligned
            // operands (aligned copies) take scratch.
            prop_assert!(
                replayed || op == ReplayOp::Matmul,
                "{op:?} {rows}x{cols} was not replayable"
            );
            Ok(())
        })
        .unwrap();
}

#[test]
#[ignore = "needs a GPU"]
fn a_call_that_needs_scratch_is_not_replayable_and_other_alignments_are_refused() {
    let Some((dev, stream)) = gpu_device("replay_refusals") else {
        return;
    };
    let s = unsafe { ForeignStream::new(0, stream.raw_handle()) }.unwrap();
    // 16 rows of 131072: the split-row softmax, whose statistics live in the stream's scratch.
    let wide = tensors::<bf16>(&dev, &shapes(ReplayOp::Softmax, 16, 131072), 1);
    let r = Replay::prepare(&s, ReplayOp::Softmax, &raws(ReplayOp::Softmax, &wide)).unwrap();
    assert!(r.is_none(), "the split-row softmax must not be replayed");

    // An aligned product replays (the random cases may all be unaligned ones).
    assert!(
        replay_matches_direct::<bf16>(&dev, &stream, ReplayOp::Matmul, 61, 256, 3).unwrap(),
        "a 61x128 @ 128x64 bf16 product was not replayable"
    );

    let t = tensors::<bf16>(&dev, &shapes(ReplayOp::Softmax, 8, 256), 2);
    let r = Replay::prepare(&s, ReplayOp::Softmax, &raws(ReplayOp::Softmax, &t))
        .unwrap()
        .expect("a plain softmax replays");
    // One element in: 2-byte aligned instead of 256.
    let shifted = [t[0].device_ptr() + 2, t[1].device_ptr()];
    let e = unsafe { r.enqueue(stream.raw_handle(), &shifted) }.unwrap_err();
    assert!(
        e.to_string().contains("prepare one for these tensors"),
        "{e}"
    );
    let e = unsafe { r.enqueue(stream.raw_handle(), &shifted[..1]) }.unwrap_err();
    assert!(e.to_string().contains("was given"), "{e}");
    stream.synchronize().unwrap();
}

#[test]
fn every_op_names_as_many_tensors_as_its_test_shapes() {
    for op in OPS {
        let names = op.tensor_names();
        assert!(names.len() >= 2 && names.len() <= 4, "{op:?}");
        assert_eq!(shapes(*op, 4, 8).len(), names.len(), "{op:?}");
    }
}
