//! The fused linear + cross-entropy schedule: how many rows a chunk has and the row kernel's tile.
//! The rules follow memory (the chunk's logits fit a scratch budget, half of torch's bf16 logits at
//! Llama-3's `T = 8192`) and the cost of the `dw` product: every chunk after the first reads and
//! writes the whole f32 `V x H` accumulator (2.1 GB at Llama-3) around a product only `C` deep, so
//! fewer, deeper chunks are cheaper (docs/ops.md has the count). Chunks are balanced (equal but for
//! the 128-row rounding) and at least 128 rows, so every GEMM of a chunk fills an H200.

use crate::op::ceil_div;

/// Bytes of scratch the logits of one chunk may take by default (1 GiB: 4096 rows of a 128256-word
/// bf16 vocabulary, against torch's `T x V` logits, 2 GiB in bf16 for `T = 8192`, and its 6.3 GB peak
/// for that call). On the H200 (session 20, same run, torch 40.56 ms at Llama-3 `T = 8192`): 52.94 ms
/// at 1024 rows (7 accumulating `dw` passes over the f32 `V x H`), 46.74 at 2048 (3), 43.85 at 4096
/// (1). It was 256 MiB, then 512 MiB (sessions 6 and 8).
pub const DEFAULT_CHUNK_BYTES: i64 = 1 << 30;
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
/// `chunk` when given (clamped to `t`), otherwise: `fit`, the most rows whose logits fit
/// [`DEFAULT_CHUNK_BYTES`] rounded down to a multiple of [`CHUNK_ROUND`] (at least [`CHUNK_ROUND`]),
/// gives the chunk count `ceil(t / fit)`, and the rows are spread evenly over that many chunks,
/// rounded up to a multiple of [`CHUNK_ROUND`] (never above `fit`), at most `t` (so `t ≤ 128` is one
/// chunk). Balancing keeps the last chunk's products as large as the others (`t = 5000` at Llama-3:
/// 1792 + 1792 + 1416 rows rather than 2048 + 2048 + 904).
pub fn chunk_rows(t: i64, v: i64, elem_bytes: i64, chunk: Option<i64>) -> i64 {
    let t = t.max(1);
    if let Some(c) = chunk {
        return c.clamp(1, t);
    }
    let row = logits_ld(v) * elem_bytes.max(1);
    let fit = ((DEFAULT_CHUNK_BYTES / row) / CHUNK_ROUND * CHUNK_ROUND).max(CHUNK_ROUND);
    let chunks = ceil_div(t, fit);
    let even = ceil_div(ceil_div(t, chunks), CHUNK_ROUND) * CHUNK_ROUND;
    even.min(fit).min(t)
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
