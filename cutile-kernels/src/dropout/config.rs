//! The dropout tile: 1024 elements per block (Philox is ~20 integer multiply-adds per element, so
//! large tiles keep enough loads in flight), 256 for tiny inputs.

/// The tile (`BN` elements per block) for `n` elements.
pub fn choose(n: i64) -> i64 {
    if n <= 4096 { 256 } else { 1024 }
}
