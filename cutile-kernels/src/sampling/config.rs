//! The sampling tiles: the chunk width `BN` per row length and the top-k slot count `KP` (the power of
//! two ≥ k, at least 8, at most [`MAX_K`]).

/// The largest `k` top-k takes.
pub const MAX_K: i64 = 64;

/// The chunk width for rows of `v` elements: the power of two ≥ `v` up to 4096.
pub fn chunk(v: i64) -> i64 {
    (v.clamp(128, 4096) as u64).next_power_of_two() as i64
}

/// The top-k slot count for `k`.
pub fn slots(k: i64) -> i64 {
    (k.clamp(8, MAX_K) as u64).next_power_of_two() as i64
}
