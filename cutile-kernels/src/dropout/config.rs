//! The dropout tile: 1024 elements per block (one Philox call, ~40 32-bit integer multiplies, per
//! eight elements; large tiles keep enough loads in flight), 256 for tiny inputs.

/// The tile (`BN` elements per block) for `n` elements.
pub fn choose(n: i64) -> i64 {
    if n <= 4096 { 256 } else { 1024 }
}
