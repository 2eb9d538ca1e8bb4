//! CPU references of the attention family, in f32/f64 on the host: what the GPU tests and the tuner's
//! callers compare against.

/// CPU reference of attention over `[slices, seq, d]` row-major arrays (`slices` = batch·heads), f64
/// math, slices and query rows in parallel. Causal masking aligns queries and keys at position 0.
#[allow(clippy::too_many_arguments)]
pub fn attention_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    sq: usize,
    sk: usize,
    d: usize,
    scale: f32,
    causal: bool,
) -> Vec<f32> {
    use rayon::prelude::*;
    let mut out = vec![0f32; q.len()];
    if sq == 0 || d == 0 {
        return out;
    }
    out.par_chunks_mut(d)
        .zip(q.par_chunks(d))
        .enumerate()
        .for_each(|(row, (o, qi))| {
            let (slice, i) = (row / sq, row % sq);
            let kk = &k[slice * sk * d..(slice + 1) * sk * d];
            let vv = &v[slice * sk * d..(slice + 1) * sk * d];
            let limit = if causal { (i + 1).min(sk) } else { sk };
            let scores: Vec<f64> = kk
                .chunks(d)
                .take(limit)
                .map(|kj| {
                    let dot: f64 = qi.iter().zip(kj).map(|(&a, &b)| a as f64 * b as f64).sum();
                    dot * scale as f64
                })
                .collect();
            let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            let mut acc = vec![0f64; d];
            for (w, vj) in e.iter().zip(vv.chunks(d)) {
                for (a, &x) in acc.iter_mut().zip(vj) {
                    *a += w / z * x as f64;
                }
            }
            for (x, a) in o.iter_mut().zip(acc) {
                *x = a as f32;
            }
        });
    out
}

/// The lengths of a variable-length batch (host side): sequence `b` has `seqlens_q[b]` queries and
/// `seqlens_k[b]` keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VarlenBatch {
    pub seqlens_q: Vec<usize>,
    pub seqlens_k: Vec<usize>,
}

impl VarlenBatch {
    /// Cumulative offsets `[0, l0, l0+l1, ..]` (what `cu_seqlens` holds).
    pub fn cu(lens: &[usize]) -> Vec<i32> {
        let mut out = vec![0i32];
        let mut acc = 0usize;
        for &l in lens {
            acc += l;
            out.push(acc as i32);
        }
        out
    }
    pub fn total_q(&self) -> usize {
        self.seqlens_q.iter().sum()
    }
    pub fn total_k(&self) -> usize {
        self.seqlens_k.iter().sum()
    }
    pub fn max_q(&self) -> usize {
        self.seqlens_q.iter().copied().max().unwrap_or(0)
    }
}

/// One query row of the variant attention: `pos` is the query's position, `keys`/`vals` its sequence's
/// `sk` key and value rows. Returns the output row and the natural-log softmax denominator (sink
/// included; -inf when nothing is seen), in f64.
#[allow(clippy::too_many_arguments)]
fn variant_row<'k>(
    qi: &[f32],
    key: impl Fn(usize) -> &'k [f32],
    val: impl Fn(usize) -> &'k [f32],
    sk: usize,
    pos: i64,
    o: &super::AttentionOptions,
    scale: f64,
    sink: Option<f32>,
) -> (Vec<f64>, f64) {
    let d = qi.len();
    let visible = |j: usize| {
        let j = j as i64;
        (!o.causal || j <= pos) && o.window.is_none_or(|w| j >= pos - i64::from(w))
    };
    let mut logits: Vec<(usize, f64)> = Vec::new();
    for j in (0..sk).filter(|&j| visible(j)) {
        let dot: f64 = qi
            .iter()
            .zip(key(j))
            .map(|(&a, &b)| a as f64 * b as f64)
            .sum();
        let mut x = dot * scale;
        if let Some(c) = o.softcap {
            let c = c as f64;
            x = c * (x / c).tanh();
        }
        logits.push((j, x));
    }
    let sink = sink.map(f64::from);
    let m = logits
        .iter()
        .map(|&(_, x)| x)
        .chain(sink)
        .fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return (vec![0.0; d], f64::NEG_INFINITY);
    }
    let z: f64 = logits.iter().map(|&(_, x)| (x - m).exp()).sum::<f64>()
        + sink.map_or(0.0, |s| (s - m).exp());
    let mut acc = vec![0f64; d];
    for &(j, x) in &logits {
        let w = (x - m).exp() / z;
        for (a, &vv) in acc.iter_mut().zip(val(j)) {
            *a += w * vv as f64;
        }
    }
    (acc, m + z.ln())
}

/// CPU reference of attention with the prefill variants of `options` over `[B, H, S_q, D]` queries and
/// `[B, H_kv, S_k, D]` keys and values (row-major; `H_kv` divides `H`), with optional `[H]` sink logits.
/// Returns the output `[B, H, S_q, D]` and the LSE `[B, H, S_q]` (natural log, sink included, -inf for
/// a row that sees nothing; such rows' output is 0). f64 math, rows in parallel.
#[allow(clippy::too_many_arguments)]
pub fn prefill_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (b, h, hkv): (usize, usize, usize),
    sq: usize,
    sk: usize,
    d: usize,
    options: &super::AttentionOptions,
    sinks: Option<&[f32]>,
) -> (Vec<f32>, Vec<f32>) {
    use rayon::prelude::*;
    let mut out = vec![0f32; b * h * sq * d];
    let mut lse = vec![f32::NEG_INFINITY; b * h * sq];
    if d == 0 || hkv == 0 {
        return (out, lse);
    }
    let scale = options.scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
    let shift = options.query_offset
        + if options.bottom_right {
            sk as i64 - sq as i64
        } else {
            0
        };
    let group = h / hkv;
    out.par_chunks_mut(d)
        .zip(lse.par_iter_mut())
        .enumerate()
        .for_each(|(row, (orow, l))| {
            let (bh, i) = (row / sq, row % sq);
            let (bi, hi) = (bh / h, bh % h);
            let kv = (bi * hkv + hi / group) * sk * d;
            let qi = &q[row * d..(row + 1) * d];
            let (acc, z) = variant_row(
                qi,
                |j| &k[kv + j * d..kv + (j + 1) * d],
                |j| &v[kv + j * d..kv + (j + 1) * d],
                sk,
                i as i64 + shift,
                options,
                scale,
                sinks.map(|s| s[hi]),
            );
            for (x, a) in orow.iter_mut().zip(acc) {
                *x = a as f32;
            }
            *l = z as f32;
        });
    (out, lse)
}

/// CPU reference of variable-length attention: `q` `[total_q, H, D]`, `k`/`v` `[total_k, H_kv, D]`,
/// sequences as `batch` lays them out. Returns the output `[total_q, H, D]` and the LSE `[H, total_q]`;
/// every option applies per sequence.
#[allow(clippy::too_many_arguments)]
pub fn varlen_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    batch: &VarlenBatch,
    h: usize,
    hkv: usize,
    d: usize,
    options: &super::AttentionOptions,
    sinks: Option<&[f32]>,
) -> (Vec<f32>, Vec<f32>) {
    use rayon::prelude::*;
    let tq = batch.total_q();
    let mut out = vec![0f32; tq * h * d];
    let mut lse = vec![f32::NEG_INFINITY; h * tq];
    if d == 0 || hkv == 0 || h == 0 {
        return (out, lse);
    }
    let scale = options.scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
    let cq = VarlenBatch::cu(&batch.seqlens_q);
    let ck = VarlenBatch::cu(&batch.seqlens_k);
    let group = h / hkv;
    // (token, head) rows: find each token's sequence.
    let rows: Vec<(usize, usize, (Vec<f64>, f64))> = (0..tq * h)
        .into_par_iter()
        .map(|r| {
            let (t, hi) = (r / h, r % h);
            let s = cq.partition_point(|&c| c as usize <= t) - 1;
            let (q0, k0) = (cq[s] as usize, ck[s] as usize);
            let (lq, lk) = (batch.seqlens_q[s], batch.seqlens_k[s]);
            let shift = options.query_offset
                + if options.bottom_right {
                    lk as i64 - lq as i64
                } else {
                    0
                };
            let kh = hi / group;
            let row = |j: usize| (k0 + j) * hkv * d + kh * d;
            let res = variant_row(
                &q[r * d..(r + 1) * d],
                |j| &k[row(j)..row(j) + d],
                |j| &v[row(j)..row(j) + d],
                lk,
                (t - q0) as i64 + shift,
                options,
                scale,
                sinks.map(|s| s[hi]),
            );
            (t, hi, res)
        })
        .collect();
    for (t, hi, (acc, z)) in rows {
        for (x, a) in out[(t * h + hi) * d..(t * h + hi + 1) * d]
            .iter_mut()
            .zip(acc)
        {
            *x = a as f32;
        }
        lse[hi * tq + t] = z as f32;
    }
    (out, lse)
}

/// The gradients of attention (`dq`, `dk`, `dv`) that [`super::attention_backward`] computes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackwardGrads {
    /// `q`'s shape.
    pub dq: Vec<f32>,
    /// `k`'s shape (summed over the query heads of each GQA group).
    pub dk: Vec<f32>,
    /// `k`'s shape.
    pub dv: Vec<f32>,
}

/// CPU reference of the attention backward pass over `[B, H, S_q, D]` queries and output gradient `d_o`,
/// `[B, H_kv, S_k, D]` keys and values (row-major; `H_kv` divides `H`; a 3-D `[BH, S, D]` call is
/// `(BH, 1, 1)`). The forward (softmax of `q kᵀ · scale`, causal as `options` aligns it) is recomputed in
/// f64, so the gradients are exact up to the final f32 rounding; rows that see no key have zero
/// gradients. The window and soft-cap are not modelled (the op refuses them). Key/value groups in
/// parallel.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_reference(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    d_o: &[f32],
    (b, h, hkv): (usize, usize, usize),
    sq: usize,
    sk: usize,
    d: usize,
    options: &super::AttentionOptions,
) -> BackwardGrads {
    use rayon::prelude::*;
    let mut g = BackwardGrads {
        dq: vec![0f32; b * h * sq * d],
        dk: vec![0f32; b * hkv * sk * d],
        dv: vec![0f32; b * hkv * sk * d],
    };
    if d == 0 || hkv == 0 || h == 0 || sq == 0 || sk == 0 {
        return g;
    }
    let scale = options.scale.map_or(1.0 / (d as f64).sqrt(), f64::from);
    let shift = if options.causal {
        options.query_offset
            + if options.bottom_right {
                sk as i64 - sq as i64
            } else {
                0
            }
    } else {
        0
    };
    let group = h / hkv;
    let dot =
        |a: &[f32], c: &[f32]| -> f64 { a.iter().zip(c).map(|(&x, &y)| x as f64 * y as f64).sum() };
    // One (batch, kv head) group: its dq rows (group heads × sq × d), dk and dv (sk × d).
    let parts: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = (0..b * hkv)
        .into_par_iter()
        .map(|bk| {
            let (bi, kh) = (bk / hkv, bk % hkv);
            let kv = bk * sk * d;
            let key = |j: usize| &k[kv + j * d..kv + (j + 1) * d];
            let val = |j: usize| &v[kv + j * d..kv + (j + 1) * d];
            let mut dq = vec![0f64; group * sq * d];
            let mut dk = vec![0f64; sk * d];
            let mut dv = vec![0f64; sk * d];
            for gi in 0..group {
                let hi = kh * group + gi;
                for i in 0..sq {
                    let row = ((bi * h + hi) * sq + i) * d;
                    let qi = &q[row..row + d];
                    let gi_o = &d_o[row..row + d];
                    let pos = i as i64 + shift;
                    let seen = if options.causal {
                        (pos + 1).clamp(0, sk as i64) as usize
                    } else {
                        sk
                    };
                    if seen == 0 {
                        continue;
                    }
                    let s: Vec<f64> = (0..seen).map(|j| dot(qi, key(j)) * scale).collect();
                    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    let p: Vec<f64> = e.iter().map(|x| x / z).collect();
                    let dp: Vec<f64> = (0..seen).map(|j| dot(gi_o, val(j))).collect();
                    // delta = Σ_d dO · O = Σ_j p_j dp_j.
                    let delta: f64 = p.iter().zip(&dp).map(|(a, c)| a * c).sum();
                    let dqi = &mut dq[(gi * sq + i) * d..(gi * sq + i + 1) * d];
                    for j in 0..seen {
                        let ds = p[j] * (dp[j] - delta);
                        for (x, &kk) in dqi.iter_mut().zip(key(j)) {
                            *x += ds * scale * kk as f64;
                        }
                        for (x, &qq) in dk[j * d..(j + 1) * d].iter_mut().zip(qi) {
                            *x += ds * scale * qq as f64;
                        }
                        for (x, &oo) in dv[j * d..(j + 1) * d].iter_mut().zip(gi_o) {
                            *x += p[j] * oo as f64;
                        }
                    }
                }
            }
            (dq, dk, dv)
        })
        .collect();
    for (bk, (dq, dk, dv)) in parts.into_iter().enumerate() {
        let (bi, kh) = (bk / hkv, bk % hkv);
        for gi in 0..group {
            let hi = kh * group + gi;
            let dst = (bi * h + hi) * sq * d;
            for (x, &y) in g.dq[dst..dst + sq * d]
                .iter_mut()
                .zip(&dq[gi * sq * d..(gi + 1) * sq * d])
            {
                *x = y as f32;
            }
        }
        let dst = bk * sk * d;
        for (x, &y) in g.dk[dst..dst + sk * d].iter_mut().zip(&dk) {
            *x = y as f32;
        }
        for (x, &y) in g.dv[dst..dst + sk * d].iter_mut().zip(&dv) {
            *x = y as f32;
        }
    }
    g
}
