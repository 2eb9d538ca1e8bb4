//! The sampling tiles: the chunk width `BN` per row length, the top-k slot count `KP` (the power of
//! two ≥ k, at least 8, at most [`MAX_K`]) and the chunked top-k's split ([`topk_split`]).

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

/// The most candidates (`chunks · KP`) the top-k selection holds in one tile; rows with more take
/// the one-launch `k`-pass kernel.
pub const MB_MAX: i64 = 4096;

/// The chunked top-k of a `[t, v]` call with `k` outputs on a device of `sms` SMs: chunk width `bn`,
/// `chunks` per row, slots `kp`, selection tile `mb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopkSplit {
    pub bn: i64,
    pub chunks: i64,
    pub kp: i64,
    pub mb: i64,
}

impl TopkSplit {
    /// Candidate elements of each scratch array (`t · chunks · kp`).
    pub fn candidates(&self, t: i64) -> i64 {
        t * self.chunks * self.kp
    }

    /// Elements of each scratch array: the candidates, then (rows of several chunks) the selected
    /// `t · kp` at [`candidates`](Self::candidates).
    pub fn scratch(&self, t: i64) -> i64 {
        self.candidates(t) + if self.chunks > 1 { t * self.kp } else { 0 }
    }
}

/// The split of a top-k call: chunks of [`chunk`]`(v)` columns, halved (down to 1024) while the grid
/// `t · chunks` would leave SMs idle; `None` when the selection tile would exceed [`MB_MAX`] candidates
/// (very long rows: the one-launch kernel).
pub fn topk_split(t: i64, v: i64, k: i64, sms: u32) -> Option<TopkSplit> {
    let kp = slots(k);
    let mut bn = chunk(v);
    while bn > 1024
        && t * crate::op::ceil_div(v, bn) < i64::from(sms)
        && crate::op::ceil_div(v, bn / 2) * kp <= MB_MAX
    {
        bn /= 2;
    }
    let chunks = crate::op::ceil_div(v, bn).max(1);
    let n = chunks * kp;
    (n <= MB_MAX).then(|| TopkSplit {
        bn,
        chunks,
        kp,
        mb: (n as u64).next_power_of_two() as i64,
    })
}
