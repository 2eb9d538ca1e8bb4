//! CPU references of the NVFP4 mixture-of-experts family: the NVFP4 format (e2m1 values, e4m3 block
//! scales, an f32 global scale), quantize / dequantize, routing (softmax or biased-sigmoid top-k),
//! `moe_align_block_size`, and the expert computation (SiLU·up, routed weight, top-k combine).
//!
//! Every function here is the oracle the GPU kernels are checked against, so the arithmetic follows the
//! kernels' order of f32 operations exactly where that decides a rounding (the scales and codes of
//! [`quantize_rows`]); the GEMM references accumulate in f64.

/// The magnitudes of the eight e2m1 codes `0..8` (bit 3 of a nibble is the sign).
pub const E2M1_GRID: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
/// Largest e2m1 magnitude.
pub const E2M1_MAX: f32 = 6.0;
/// Largest finite e4m3 (OCP E4M3FN) value.
pub const E4M3_MAX: f32 = 448.0;
/// Elements per e4m3 block scale, along K.
pub const BLOCK: usize = 16;

/// The value of an e2m1 nibble (the low 4 bits of `code`; bit 3 the sign, so `0x8` is -0.0).
pub fn e2m1_decode(code: u8) -> f32 {
    let mag = E2M1_GRID[usize::from(code & 7)];
    if code & 8 != 0 { -mag } else { mag }
}

/// The e2m1 nibble nearest to `v` (ties to the even code, i.e. the even mantissa), magnitudes above 6
/// clamped to 6. The sign bit is `v`'s sign bit, so -0.0 and negative values that round to zero give
/// `0x8`. NaN gives `0x7` (its sign bit set gives `0xF`): the format has no NaN, and the clamp is the
/// choice the kernels make too. The thresholds are the midpoints of the grid; at a midpoint the code
/// with an even mantissa bit wins (0.25 → 0, 0.75 → 1, 1.25 → 1, 1.75 → 2, 2.5 → 2, 3.5 → 4, 5 → 4).
pub fn e2m1_encode(v: f32) -> u8 {
    let sign = if v.is_sign_negative() { 8u8 } else { 0 };
    let a = v.abs();
    let code = if a.is_nan() {
        7
    } else {
        u8::from(a > 0.25)
            + u8::from(a >= 0.75)
            + u8::from(a > 1.25)
            + u8::from(a >= 1.75)
            + u8::from(a > 2.5)
            + u8::from(a >= 3.5)
            + u8::from(a > 5.0)
    };
    sign | code
}

/// The value of an e4m3 (OCP E4M3FN: bias 7, no infinities, `0x7F`/`0xFF` NaN) byte.
pub fn e4m3_decode(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((b >> 3) & 0xF);
    let m = f32::from(b & 7);
    if e == 15 && b & 7 == 7 {
        return f32::NAN;
    }
    let mag = if e == 0 {
        m * 2f32.powi(-9)
    } else {
        (8.0 + m) * 2f32.powi(e - 10)
    };
    sign * mag
}

/// The e4m3 byte nearest to a non-negative finite `v` (round to nearest even), saturating at 448;
/// negative and NaN inputs give 0 (block scales are never negative). Exact for the f32 inputs:
/// the candidates are enumerated, so no intermediate rounding decides the result.
pub fn e4m3_encode(v: f32) -> u8 {
    if v.is_nan() || v <= 0.0 {
        return 0;
    }
    if v >= E4M3_MAX {
        return 0x7E;
    }
    // The largest code whose value is <= v, then the nearer of it and the next (ties to even code).
    let mut lo = 0u8;
    for c in 0u8..=0x7E {
        if e4m3_decode(c) <= v {
            lo = c;
        } else {
            break;
        }
    }
    let (a, b) = (f64::from(e4m3_decode(lo)), f64::from(e4m3_decode(lo + 1)));
    let v = f64::from(v);
    if v - a < b - v || (v - a == b - v && lo.is_multiple_of(2)) {
        lo
    } else {
        lo + 1
    }
}

/// NVFP4 data of a `rows x k` matrix quantized along its rows: `packed` `[rows, k/2]` (byte `j` of a row
/// holds element `2j` in the low nibble and `2j+1` in the high one), `scales` `[rows, k/16]` e4m3 bytes,
/// `global` one f32 per group of `rows_per_global` consecutive rows (one per expert for weights).
#[derive(Debug, Clone, PartialEq)]
pub struct Nvfp4 {
    pub rows: usize,
    pub k: usize,
    pub rows_per_global: usize,
    pub packed: Vec<u8>,
    pub scales: Vec<u8>,
    pub global: Vec<f32>,
}

/// The global scale of a tensor (or expert) of absolute maximum `amax`: `amax / (6 · 448)`, computed in
/// f32 as the kernels do.
pub fn global_scale(amax: f32) -> f32 {
    amax / (E2M1_MAX * E4M3_MAX)
}

/// The e4m3 byte of a block of absolute maximum `bamax` under global scale `global`:
/// `(bamax / 6) / global` rounded to e4m3 (0 when `global` is 0).
pub fn block_scale_code(bamax: f32, global: f32) -> u8 {
    if global == 0.0 {
        return 0;
    }
    e4m3_encode((bamax / E2M1_MAX) / global)
}

/// The factor elements are divided by before rounding to e2m1, `1 / (block scale · global)`, 0 when that
/// product is 0 (an all-zero block then stores zero codes, keeping the elements' signs).
pub fn inv_scale(code: u8, global: f32) -> f32 {
    let s = e4m3_decode(code) * global;
    if s == 0.0 { 0.0 } else { 1.0 / s }
}

/// Quantizes a row-major `rows x k` matrix (`k` a multiple of 32, `rows` a multiple of
/// `rows_per_global`) to NVFP4, the global scale of each row group from that group's absolute maximum.
/// `None` when the sizes do not fit that description.
pub fn quantize_rows(x: &[f32], rows: usize, k: usize, rows_per_global: usize) -> Option<Nvfp4> {
    if !k.is_multiple_of(2 * BLOCK) || rows_per_global == 0 || !rows.is_multiple_of(rows_per_global)
    {
        return None;
    }
    if x.len() != rows * k {
        return None;
    }
    let groups = rows / rows_per_global;
    let global: Vec<f32> = (0..groups)
        .map(|g| {
            let s = &x[g * rows_per_global * k..(g + 1) * rows_per_global * k];
            global_scale(s.iter().fold(0f32, |m, v| m.max(v.abs())))
        })
        .collect();
    let mut packed = vec![0u8; rows * k / 2];
    let mut scales = vec![0u8; rows * k / BLOCK];
    for r in 0..rows {
        let g = global[r / rows_per_global];
        for b in 0..k / BLOCK {
            let blk = &x[r * k + b * BLOCK..r * k + (b + 1) * BLOCK];
            let bamax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let code = block_scale_code(bamax, g);
            scales[r * (k / BLOCK) + b] = code;
            let inv = inv_scale(code, g);
            for (i, &v) in blk.iter().enumerate() {
                let q = e2m1_encode(v * inv);
                let col = b * BLOCK + i;
                let byte = &mut packed[r * k / 2 + col / 2];
                *byte |= if col.is_multiple_of(2) { q } else { q << 4 };
            }
        }
    }
    Some(Nvfp4 {
        rows,
        k,
        rows_per_global,
        packed,
        scales,
        global,
    })
}

/// Element `(r, c)` of the dequantized matrix: `e2m1 · (e4m3 block scale · global)`, in f32 as the
/// kernels compute it.
pub fn dequant_at(q: &Nvfp4, r: usize, c: usize) -> f32 {
    let byte = q.packed[r * q.k / 2 + c / 2];
    let nib = if c.is_multiple_of(2) {
        byte & 0xF
    } else {
        byte >> 4
    };
    let scale =
        e4m3_decode(q.scales[r * (q.k / BLOCK) + c / BLOCK]) * q.global[r / q.rows_per_global];
    e2m1_decode(nib) * scale
}

/// The dequantized `rows x k` matrix (f32).
pub fn dequantize(q: &Nvfp4) -> Vec<f32> {
    let mut out = vec![0f32; q.rows * q.k];
    for r in 0..q.rows {
        for c in 0..q.k {
            out[r * q.k + c] = dequant_at(q, r, c);
        }
    }
    out
}

/// How router logits become expert choices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoutingMode {
    /// `softmax(logits)`, the top-k probabilities, optionally divided by their sum (Mixtral, Qwen).
    SoftmaxTopK { renormalize: bool },
    /// `sigmoid(logits)`; experts chosen by `sigmoid + bias` (the bias only selects), weights the chosen
    /// sigmoids divided by their sum and multiplied by `scale` (DeepSeek-V3), with an optional
    /// [`GroupLimit`] on the choice.
    SigmoidBias {
        scale: f32,
        group_limit: Option<GroupLimit>,
    },
}

/// DeepSeek-V3's expert-group limit (`n_group`, `topk_group`): the `e` experts are `groups` groups of
/// `e / groups` consecutive ids; a token ranks the groups by the sum of their two best selection scores
/// (`sigmoid + bias`) and chooses its top-k experts from its best `keep` groups only (ties to the lower
/// group id, as for experts). The others are out of the choice, not merely scored 0, so a negative bias
/// cannot pull in an expert of a dropped group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimit {
    pub groups: usize,
    pub keep: usize,
}

/// One token's scores in the sigmoid mode: `sigmoid(logits)` (what the weights come from) and
/// `sigmoid(logits) + bias` (what chooses the experts; no bias adds 0).
pub fn sigmoid_scores(logits: &[f32], bias: Option<&[f32]>) -> (Vec<f64>, Vec<f64>) {
    let p: Vec<f64> = logits
        .iter()
        .map(|&v| 1.0 / (1.0 + (-f64::from(v)).exp()))
        .collect();
    let sel = p
        .iter()
        .enumerate()
        .map(|(i, v)| v + bias.map_or(0.0, |b| f64::from(b[i])))
        .collect();
    (p, sel)
}

/// What a [`GroupLimit`] ranks `groups` groups of one token's selection scores `select` by: the sum of
/// each group's two best (both count when they are equal). Same bounds as [`groups_kept`].
pub fn group_scores(select: &[f64], groups: usize) -> Vec<f64> {
    select
        .chunks(select.len() / groups)
        .map(|g| {
            let mut v = g.to_vec();
            v.sort_by(|a, b| b.total_cmp(a));
            v[0] + v[1]
        })
        .collect()
}

/// The experts a [`GroupLimit`] leaves to one token's choice: `false` for every expert of a dropped group.
/// `select` holds the token's `e` selection scores; `e` must be a multiple of `groups` with at least two
/// experts per group.
pub fn groups_kept(select: &[f64], limit: GroupLimit) -> Vec<bool> {
    let size = select.len() / limit.groups;
    let score = group_scores(select, limit.groups);
    let mut order: Vec<usize> = (0..limit.groups).collect();
    order.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    let mut kept = vec![false; select.len()];
    for &g in &order[..limit.keep.min(limit.groups)] {
        kept[g * size..(g + 1) * size].fill(true);
    }
    kept
}

/// Top-k routing of `logits` `[t, e]`: `(ids [t, k], weights [t, k])`, each row's experts in descending
/// order of the selection score, ties to the lower expert id. `bias` (`[e]`) is used by
/// [`RoutingMode::SigmoidBias`] only. Scores in f64.
pub fn route(
    logits: &[f32],
    t: usize,
    e: usize,
    k: usize,
    mode: RoutingMode,
    bias: Option<&[f32]>,
) -> (Vec<i32>, Vec<f32>) {
    let mut ids = Vec::with_capacity(t * k);
    let mut weights = Vec::with_capacity(t * k);
    for row in logits.chunks(e).take(t) {
        let (prob, select): (Vec<f64>, Vec<f64>) = match mode {
            RoutingMode::SoftmaxTopK { .. } => {
                let m = row
                    .iter()
                    .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
                let ex: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
                let s: f64 = ex.iter().sum();
                let p: Vec<f64> = ex.iter().map(|v| v / s).collect();
                (p.clone(), p)
            }
            RoutingMode::SigmoidBias { .. } => {
                let (p, mut sel) = sigmoid_scores(row, bias);
                if let RoutingMode::SigmoidBias {
                    group_limit: Some(limit),
                    ..
                } = mode
                {
                    let kept = groups_kept(&sel, limit);
                    for (v, k) in sel.iter_mut().zip(kept) {
                        if !k {
                            *v = f64::NEG_INFINITY;
                        }
                    }
                }
                (p, sel)
            }
        };
        let mut order: Vec<usize> = (0..e).collect();
        order.sort_by(|&a, &b| select[b].total_cmp(&select[a]).then(a.cmp(&b)));
        let chosen = &order[..k];
        let sum: f64 = chosen.iter().map(|&i| prob[i]).sum();
        for &i in chosen {
            ids.push(i as i32);
            let w = match mode {
                RoutingMode::SoftmaxTopK { renormalize: true } => prob[i] / sum,
                RoutingMode::SoftmaxTopK { renormalize: false } => prob[i],
                RoutingMode::SigmoidBias { scale, .. } => prob[i] / sum * f64::from(scale),
            };
            weights.push(w as f32);
        }
    }
    (ids, weights)
}

/// `moe_align_block_size`'s result: the flat (token·k + slot) pair ids sorted by expert (stable, so by
/// pair id within an expert), each expert's rows padded to a multiple of `block` with the sentinel
/// `t·k`; the expert of every `block`-row block; the padded total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aligned {
    pub sorted_ids: Vec<i32>,
    pub expert_ids: Vec<i32>,
    pub total: usize,
}

/// The most rows [`align_block_size`] can produce for `pairs` pairs over `e` experts: every expert may
/// add up to `block - 1` padding rows. Buffers are sized by this, so no device-to-host read is needed.
pub fn max_padded(pairs: usize, e: usize, block: usize) -> usize {
    (pairs + e * (block - 1)).div_ceil(block) * block
}

/// The CPU `moe_align_block_size` of `ids` (`[t·k]`, every value in `0..e`).
pub fn align_block_size(ids: &[i32], e: usize, block: usize) -> Aligned {
    let pairs = ids.len();
    let mut per: Vec<Vec<i32>> = vec![Vec::new(); e];
    for (p, &x) in ids.iter().enumerate() {
        per[x as usize].push(p as i32);
    }
    let mut sorted_ids = Vec::new();
    let mut expert_ids = Vec::new();
    for (x, list) in per.iter().enumerate() {
        let padded = list.len().div_ceil(block) * block;
        sorted_ids.extend_from_slice(list);
        sorted_ids.resize(sorted_ids.len() + padded - list.len(), pairs as i32);
        expert_ids.resize(expert_ids.len() + padded / block, x as i32);
    }
    let total = sorted_ids.len();
    Aligned {
        sorted_ids,
        expert_ids,
        total,
    }
}

/// `silu(g) · u`.
pub fn silu_mul(g: f64, u: f64) -> f64 {
    g / (1.0 + (-g).exp()) * u
}

/// The MoE layer `out[t] = Σ_j w[t, j] · W2[e_j] · (silu(W13[e_j, :I] · x[t]) ⊙ W13[e_j, I:] · x[t])`
/// with dense f32 weights: `x` `[t, h]`, `w13` `[e, 2i, h]`, `w2` `[e, h, i]` (row-major, the layouts
/// of the NVFP4 weights after [`dequantize`]), `ids`/`weights` `[t, k]`. The intermediate is rounded
/// through `round_h` (the kernels store it in the activation type); f64 accumulation.
#[allow(clippy::too_many_arguments)]
pub fn moe_dense(
    x: &[f32],
    w13: &[f32],
    w2: &[f32],
    ids: &[i32],
    weights: &[f32],
    shape: (usize, usize, usize, usize),
    round_h: impl Fn(f32) -> f32,
) -> Vec<f32> {
    moe_dense_rows(x, w13, w2, ids, weights, shape, |row| {
        round_each(row, &round_h)
    })
}

/// `round` applied to every element of `row`.
fn round_each(row: &mut [f32], round: impl Fn(f32) -> f32) {
    for v in row.iter_mut() {
        *v = round(*v);
    }
}

/// `x` as the Blackwell path (`moe::scaled`) feeds it to the block-scaled MMA: quantized to NVFP4
/// with one global scale per row, then dequantized (`rows x k`, `k` a multiple of 32).
pub fn fp4_rows(x: &[f32], rows: usize, k: usize) -> Option<Vec<f32>> {
    quantize_rows(x, rows, k, 1).map(|q| dequantize(&q))
}

/// The Blackwell path's layer: [`moe_dense`] on the row-quantized activations ([`fp4_rows`] of `x`)
/// with every intermediate row rounded to the activation type by `round_h` and then row-quantized
/// too (what GEMM 2 reads). `None` when `h` or `i` is not a multiple of 32.
#[allow(clippy::too_many_arguments)]
pub fn moe_fp4_activations(
    x: &[f32],
    w13: &[f32],
    w2: &[f32],
    ids: &[i32],
    weights: &[f32],
    (t, h, i, k): (usize, usize, usize, usize),
    round_h: impl Fn(f32) -> f32,
) -> Option<Vec<f32>> {
    if !i.is_multiple_of(2 * BLOCK) {
        return None;
    }
    let xq = fp4_rows(x, t, h)?;
    Some(moe_dense_rows(
        &xq,
        w13,
        w2,
        ids,
        weights,
        (t, h, i, k),
        |row| {
            round_each(row, &round_h);
            if let Some(q) = fp4_rows(row, 1, row.len()) {
                row.copy_from_slice(&q);
            }
        },
    ))
}

/// [`moe_dense`] with the intermediate row of each (token, slot) transformed by `round_row` before
/// GEMM 2.
#[allow(clippy::too_many_arguments)]
pub fn moe_dense_rows(
    x: &[f32],
    w13: &[f32],
    w2: &[f32],
    ids: &[i32],
    weights: &[f32],
    (t, h, i, k): (usize, usize, usize, usize),
    round_row: impl Fn(&mut [f32]),
) -> Vec<f32> {
    let mut out = vec![0f32; t * h];
    let mut act = vec![0f32; i];
    for tok in 0..t {
        let xr = &x[tok * h..(tok + 1) * h];
        let mut acc = vec![0f64; h];
        for j in 0..k {
            let ex = ids[tok * k + j] as usize;
            let w13e = &w13[ex * 2 * i * h..(ex + 1) * 2 * i * h];
            for (n, a) in act.iter_mut().enumerate() {
                let dot = |row: usize| -> f64 {
                    w13e[row * h..(row + 1) * h]
                        .iter()
                        .zip(xr)
                        .map(|(&w, &v)| f64::from(w) * f64::from(v))
                        .sum()
                };
                *a = silu_mul(dot(n), dot(i + n)) as f32;
            }
            round_row(&mut act);
            let w2e = &w2[ex * h * i..(ex + 1) * h * i];
            let wt = f64::from(weights[tok * k + j]);
            for (o, acc) in acc.iter_mut().enumerate() {
                let d: f64 = w2e[o * i..(o + 1) * i]
                    .iter()
                    .zip(&act)
                    .map(|(&w, &v)| f64::from(w) * f64::from(v))
                    .sum();
                *acc += wt * d;
            }
        }
        for (o, a) in out[tok * h..(tok + 1) * h].iter_mut().zip(&acc) {
            *o = *a as f32;
        }
    }
    out
}
