//! The in-kernel side of the counter pool ([`super::scratch::counters`]): a block of a launch counts
//! itself in on a counter, and the block that counts last takes over the others' results (the
//! split-last kernels of `fused_qkv` and attention decode). Plain Rust over DSL values, traced into
//! the kernels that call it.
//!
//! The count is an acq_rel add at device scope: the plain stores a block made before counting in are
//! visible to the block that counts last, after its count. That ordering does not cover the TMA's
//! asynchronous proxy and the DSL emits no proxy fence, so the data handed over is stored and loaded
//! with `Hints::NO_TMA`.

use cutile::core::*;

/// Counts the calling block in on `counters[slot]` and returns how many blocks had counted in
/// before it: the last of `n` blocks reads `n - 1`.
pub fn count_in(counters: &mut Tensor<i32, S1<1>>, slot: Scalar<i32>) -> Scalar<i32> {
    let (seen, _) = counters.atomic_with(
        AtomicMode::Add,
        iota::<1>() + slot,
        full::<i32, S1<1>>(1),
        None,
        AtomicOrder::AcqRel,
        AtomicScope::Device,
    );
    seen.reshape::<S0>().to_scalar()
}

/// Sets `counters[slot]` back to zero (the pool's contract: every counter a launch uses is zero when
/// it ends). Only the block that counted last may call it.
pub fn reset(counters: &mut Tensor<i32, S1<1>>, slot: Scalar<i32>) {
    // SAFETY: the caller counted last on `slot`: every other block of it has counted in, and none
    // touches the counter again in this launch.
    unsafe { counters.scatter(iota::<1>() + slot, zeros::<i32, S1<1>>(), None) };
}
