//! The sampling tiles: the chunk width `BN` per row length, the top-k slot count `KP` (the power of
//! two ≥ k, at least 8, at most [`MAX_K`]), the split argmax's chunks ([`argmax_split`]) and the
//! chunked top-k's split and selection rounds ([`topk_split`]).

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

/// The most candidates one top-k selection block holds (its tile width); a row with more takes
/// several selection rounds.
pub const MB_MAX: i64 = 4096;

/// The widest argmax chunk: 16 KiB of bf16 per block, what a one-block-per-row gather needs on sm_90 to
/// keep enough bytes in flight (the softmax probes of `docs/anchors`: 8192-wide rows near copy speed,
/// 4096-wide ones 20% below).
pub const ARGMAX_BN_MAX: i64 = 8192;

/// The partial-result tile of the argmax merge (one block per row, looping over the row's chunks).
pub const ARGMAX_CB: i64 = 1024;

/// How the split argmax's chunk kernel finds a chunk's best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChunkForm {
    /// `argmax_chunks`: values widened to f32 (the default below [`NATIVE_BN_MIN`]-wide chunks).
    F32,
    /// `argmax_chunks_native`: values compared in the element type (no widening); the default from
    /// [`NATIVE_BN_MIN`]-wide chunks on (H200, session 29: `[1024, 128256]` bf16 at 8192-wide chunks
    /// 68.3 against 95.6 µs, 90% of copy against 65%).
    Native,
    /// `argmax_chunks_native8`: `Native` on 8 worker warps.
    Native8,
}

/// The split of an argmax call over `[t, v]` on a device of `sms` SMs: `chunks` blocks of `bn`
/// columns per row, each found by the chunk kernel `form`. Chunks start at [`ARGMAX_BN_MAX`] (or the
/// power of two ≥ `v`) and are halved down to 1024 while the grid would be under two blocks per SM
/// (decode batches of a few rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgmaxSplit {
    pub bn: i64,
    pub chunks: i64,
    pub form: ChunkForm,
}

impl ArgmaxSplit {
    /// `chunks` chunks of `bn` columns of rows of `v`, found by `form`.
    pub fn new(v: i64, bn: i64, form: ChunkForm) -> ArgmaxSplit {
        ArgmaxSplit {
            bn,
            chunks: crate::op::ceil_div(v, bn).max(1),
            form,
        }
    }
}

impl crate::op::tuning::Candidate for ArgmaxSplit {
    fn name(&self) -> String {
        let form = match self.form {
            ChunkForm::F32 => "",
            ChunkForm::Native => " native",
            ChunkForm::Native8 => " native w8",
        };
        format!("BN={}{form}", self.bn)
    }
}

/// The narrowest chunk the native forms are built for (and the default takes them from).
pub const NATIVE_BN_MIN: i64 = 4096;

/// The chunk widths each form's kernel is built for: `F32` 1024..=[`ARGMAX_BN_MAX`], the native
/// forms [`NATIVE_BN_MIN`]..=2 · [`ARGMAX_BN_MAX`].
pub fn form_takes(form: ChunkForm, bn: i64) -> bool {
    let range = match form {
        ChunkForm::F32 => 1024..=ARGMAX_BN_MAX,
        ChunkForm::Native | ChunkForm::Native8 => NATIVE_BN_MIN..=2 * ARGMAX_BN_MAX,
    };
    range.contains(&bn) && (bn as u64).is_power_of_two()
}

/// See [`ArgmaxSplit`]; one chunk per row is the one-launch kernel. Chunks of at least
/// [`NATIVE_BN_MIN`] compare in the element type ([`ChunkForm::Native`]).
pub fn argmax_split(t: i64, v: i64, sms: u32) -> ArgmaxSplit {
    let mut bn = (v.clamp(128, ARGMAX_BN_MAX) as u64).next_power_of_two() as i64;
    while bn > 1024 && t * crate::op::ceil_div(v, bn) < 2 * i64::from(sms) {
        bn /= 2;
    }
    let form = if bn >= NATIVE_BN_MIN {
        ChunkForm::Native
    } else {
        ChunkForm::F32
    };
    ArgmaxSplit::new(v, bn, form)
}

/// The tuner's candidates for a split call (the default has several chunks per row; otherwise just
/// the default): the default, the f32 form at its width, the native form at its width, on 8 warps,
/// at twice the width (native, 8 warps) and half of it, each where its kernel is built
/// ([`form_takes`]). Every candidate keeps several chunks per row (the two-launch plan) and fits
/// [`argmax_scratch`].
pub fn argmax_candidates(t: i64, v: i64, sms: u32) -> Vec<ArgmaxSplit> {
    let d = argmax_split(t, v, sms);
    let mut all = vec![d];
    if d.chunks == 1 {
        return all;
    }
    use ChunkForm::*;
    for (bn, form) in [
        (d.bn, F32),
        (d.bn, Native),
        (d.bn, Native8),
        (2 * d.bn, Native),
        (2 * d.bn, Native8),
        (d.bn / 2, Native),
    ] {
        let c = ArgmaxSplit::new(v, bn, form);
        if form_takes(form, bn) && c.chunks > 1 && !all.contains(&c) {
            all.push(c);
        }
    }
    all
}

/// Partials per row the scratch holds for a split call: the most chunks among
/// [`argmax_candidates`], so any candidate plans on the same scratch.
pub fn argmax_scratch(t: i64, v: i64, sms: u32) -> i64 {
    argmax_candidates(t, v, sms)
        .iter()
        .map(|c| c.chunks)
        .max()
        .unwrap_or(1)
}

/// One selection round of the chunked top-k: each row's `groups · kp`-or-fewer candidates are split
/// into `groups` groups of at most `mb` (one block each), and each group keeps its top-k set in `kp`
/// slots, the next round's candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectRound {
    /// Candidates per row read by this round.
    pub width: i64,
    /// Groups (blocks) per row; the round writes `groups · kp` slots per row.
    pub groups: i64,
    /// The block's tile: the power of two ≥ the largest group.
    pub mb: i64,
}

/// The chunked top-k of a `[t, v]` call with `k` outputs on a device of `sms` SMs: chunk width `bn`,
/// `chunks` per row, slots `kp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopkSplit {
    pub bn: i64,
    pub chunks: i64,
    pub kp: i64,
}

impl TopkSplit {
    /// Candidate elements of each scratch array (`t · chunks · kp`).
    pub fn candidates(&self, t: i64) -> i64 {
        t * self.chunks * self.kp
    }

    /// The selection rounds between the chunks and the sort, until one group of `kp` slots is left
    /// per row (none for rows of one chunk). A group holds `MB_MAX / kp` chunks' sets, so rows of up
    /// to 64 chunks of `kp` 64 (262144 columns) take one round, and two rounds reach 16M columns.
    pub fn rounds(&self) -> Vec<SelectRound> {
        let per = (MB_MAX / self.kp).max(1);
        let mut sets = self.chunks;
        let mut out = Vec::new();
        while sets > 1 {
            let groups = crate::op::ceil_div(sets, per);
            let largest = sets.min(per) * self.kp;
            out.push(SelectRound {
                width: sets * self.kp,
                groups,
                mb: (largest as u64).next_power_of_two() as i64,
            });
            sets = groups;
        }
        out
    }

    /// Elements of each scratch array: the candidates, then each round's output (`t · groups · kp`),
    /// one after the other.
    pub fn scratch(&self, t: i64) -> i64 {
        self.candidates(t)
            + self
                .rounds()
                .iter()
                .map(|r| t * r.groups * self.kp)
                .sum::<i64>()
    }
}

/// The split of a top-k call: chunks of [`chunk`]`(v)` columns, halved (down to 1024) while the grid
/// `t · chunks` would leave SMs idle and the halving adds no selection round.
pub fn topk_split(t: i64, v: i64, k: i64, sms: u32) -> TopkSplit {
    let kp = slots(k);
    let mut bn = chunk(v);
    while bn > 1024
        && t * crate::op::ceil_div(v, bn) < i64::from(sms)
        && crate::op::ceil_div(v, bn / 2) * kp <= MB_MAX
    {
        bn /= 2;
    }
    TopkSplit {
        bn,
        chunks: crate::op::ceil_div(v, bn).max(1),
        kp,
    }
}
