//! The fused linear + cross-entropy schedule: how many rows a chunk has and the row kernel's tile.
//! Not yet measured on a GPU: the rules follow memory (the chunk's logits fit a scratch budget) and
//! keep every GEMM of a chunk large enough to fill an H200 (at least 128 rows per chunk).

use crate::op::ceil_div;

/// Bytes of scratch the logits of one chunk may take by default (256 MiB: 1024 rows of a 128256-word
/// bf16 vocabulary, against torch's `T x V` logits, 2 GiB in bf16 for `T = 8192`).
pub const DEFAULT_CHUNK_BYTES: i64 = 256 << 20;
/// Rows of a chunk are a multiple of this (and at least this many when `T` has them).
pub const CHUNK_ROUND: i64 = 128;
/// Width of the reductions over `T` (`ce_count`, `ce_reduce`).
pub const REDUCE_BT: i64 = 1024;
/// Tile of `ce_cast` (the f32 `dw` accumulator cast to a 16-bit `dw`).
pub const CAST_BM: i64 = 64;
pub const CAST_BN: i64 = 128;

/// Row pitch (elements) of the logits scratch: a multiple of 16 elements, so every row starts 32-byte
/// aligned whatever `V` is.
pub fn logits_ld(v: i64) -> i64 {
    ceil_div(v.max(1), 16) * 16
}

/// Rows per chunk for `t` tokens and a vocabulary of `v` with `elem_bytes`-byte logits: the caller's
/// `chunk` when given (clamped to `t`), otherwise the most rows whose logits fit
/// [`DEFAULT_CHUNK_BYTES`], rounded down to a multiple of [`CHUNK_ROUND`] but at least
/// [`CHUNK_ROUND`], and at most `t` (so `t ≤ 128` is one chunk).
pub fn chunk_rows(t: i64, v: i64, elem_bytes: i64, chunk: Option<i64>) -> i64 {
    let t = t.max(1);
    if let Some(c) = chunk {
        return c.clamp(1, t);
    }
    let row = logits_ld(v) * elem_bytes.max(1);
    let fit = (DEFAULT_CHUNK_BYTES / row) / CHUNK_ROUND * CHUNK_ROUND;
    fit.max(CHUNK_ROUND).min(t)
}

/// The row kernel's tile width for a vocabulary of `v`: 2048 (the online pass's registers stay bounded;
/// the looped row kernels of `softmax`/`norm` reached their best bandwidth on H200 with 1024..2048-wide
/// chunks), 1024 for `v ≤ 1024`, 256 for `v ≤ 256`.
pub fn row_tile(v: i64) -> i64 {
    if v <= 256 {
        256
    } else if v <= 1024 {
        1024
    } else {
        2048
    }
}
