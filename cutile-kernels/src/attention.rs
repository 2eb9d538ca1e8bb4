//! Flash-attention forward: `O = softmax(Q Kᵀ · scale) V` per (batch·head), one `BM`-row block of queries
//! per block, streaming `BN`-row blocks of keys/values with an online softmax (running max and sum in f32,
//! exponentials in base 2), optionally causal. Q, K, V, O are `[batch·heads, seq, D]`.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    const LOG2_E: f64 = std::f64::consts::LOG2_E;

    /// Grid: `(batch·heads, ceil(seq_q / BM), 1)` (the tiles of `o`). `CAUSAL` masks keys after the query
    /// position (queries and keys aligned at position 0).
    #[cutile::entry]
    pub fn flash_attention<
        E: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const CAUSAL: bool,
    >(
        q: &Tensor<E, S3<DYN, DYN, DYN>>,
        k: &Tensor<E, S3<DYN, DYN, DYN>>,
        v: &Tensor<E, S3<DYN, DYN, DYN>>,
        scale: Scalar<f32>,
        o: &mut Tensor<E, S3<1, BM, D>>,
    ) {
        let (bh, qb, _) = block_id();
        let tq = q
            .load_tile_padded::<S3<1, BM, D>>((bh, qb, 0), Padding::Zero)
            .reshape::<S2<BM, D>>();
        let pk = k.partition_padded::<S3<1, BN, D>>(Padding::Zero);
        let pv = v.partition_padded::<S3<1, BN, D>>(Padding::Zero);
        let qk_scale = scale * LOG2_E;
        let seq_k = k.dim(1);
        let n_kv = pk.num_tiles(1);
        // Causal: key blocks past the last query of this block are skipped entirely.
        let kv_end = if CAUSAL {
            ((qb + 1) * BM + (BN - 1)) / BN
        } else {
            n_kv
        };
        let kv_end = kv_end.min(n_kv);
        let rows = iota::<BM>()
            .reshape::<S2<BM, 1>>()
            .broadcast::<S2<BM, BN>>()
            + qb * BM;

        let mut m_i = full::<f32, S2<BM, 1>>(f32::NEG_INFINITY);
        let mut l_i = zeros::<f32, S2<BM, 1>>();
        let mut acc = zeros::<f32, S2<BM, D>>();
        for j in 0..kv_end {
            let tk = pk.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let tv = pv.load((bh, j, 0)).reshape::<S2<BN, D>>();
            let s = mma(tq, tk.transpose(), zeros::<f32, S2<BM, BN>>()) * qk_scale;
            let cols = iota::<BN>()
                .reshape::<S2<1, BN>>()
                .broadcast::<S2<BM, BN>>()
                + j * BN;
            let mut s = select(cols < seq_k, s, f32::NEG_INFINITY);
            if CAUSAL {
                s = select(cols <= rows, s, f32::NEG_INFINITY);
            }
            let m_new = m_i.max(s.amax::<1>());
            let p = (s - m_new.broadcast()).exp2();
            let alpha = (m_i - m_new).exp2();
            l_i = l_i * alpha + p.sum::<1>();
            acc = mma(p.cast::<E>(), tv, acc * alpha.broadcast());
            m_i = m_new;
        }
        o.store(
            (acc / l_i.broadcast())
                .cast::<E>()
                .reshape::<S3<1, BM, D>>(),
        );
    }
}

/// CPU reference for one (batch·head) slice: `q: [sq, d]`, `k, v: [sk, d]`, row-major.
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
    let mut out = vec![0f32; sq * d];
    for i in 0..sq {
        let limit = if causal { (i + 1).min(sk) } else { sk };
        let scores: Vec<f32> = (0..limit)
            .map(|j| (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f32>() * scale)
            .collect();
        let m = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
        let z: f32 = e.iter().sum();
        for (j, w) in e.iter().enumerate() {
            for c in 0..d {
                out[i * d + c] += w / z * v[j * d + c];
            }
        }
    }
    out
}
