//! The fp8 GEMM ops (`gemm_fp8_tensor`, `gemm_fp8_row`, `gemm_fp8_block`) as a [`Workload`]: their calls
//! take byte tensors of fp8 codes and f32 scales besides the bf16 output, so they have their own host
//! data, upload and call here, as the attention variants do; comparison and timing are the workload's.
//!
//! Inputs (logical, f32 host values): `a` `[m, k]` and `b` `[k, n]` holding values the call's fp8 format
//! represents exactly (uploaded as their codes; `b` stored as the `[n, k]` weight and passed as its
//! transposed view, the fast layout), then the scales `sa` and `sb` in the shapes of the op's mode
//! (`gemm::fp8::ScaleMode::scale_shapes`; host values row-major; a call listing `[f, 1]` uploads
//! block scales' `sa` M-major, stored `[k/128, m]` and passed as its transposed view, as
//! `torch._scaled_mm` takes it). Output: `c` `[m, n]` bf16.

use cutile::runtime::{Device, Stream, Tensor};
use cutile_kernels::gemm::fp8::{self, Fp8Format, Fp8Options, Fp8Scales, ScaleMode};
use cutile_kernels::gemm::fp8_reference::{HostScales, decode, encode, gemm_fp8_reference};
use cutile_kernels::op::CallSpec;
use cutile_kernels::op::registry::parse_dtype;

use crate::BoxError;
use crate::data::uniform;
use crate::launch_times::Timing;
use crate::workload::{Expected, HostTensor, OutputSpec, Workload};

/// Whether `op` is one of the fp8 GEMM ops.
pub fn covers(op: &str) -> bool {
    fp8::OPS.contains(&op)
}

/// The call's scale mode, fp8 format and `(m, n, k)`; [`fast_accum`] says whether it asks for fast
/// accumulation.
pub fn decode_call(call: &CallSpec) -> Result<(ScaleMode, Fp8Format, i64, i64, i64), BoxError> {
    let mode = ScaleMode::of_op(&call.op).ok_or_else(|| format!("{}: not an fp8 op", call.op))?;
    let format = parse_dtype(&call.dtype)
        .and_then(Fp8Format::of)
        .ok_or_else(|| format!("{}: element type {} is no fp8 one", call.op, call.dtype))?;
    let (a, b) = match fp8::spec_shapes(&call.shapes) {
        Some(s) if s.a.len() == 2 && s.b.len() == 2 => (s.a, s.b),
        _ => {
            return Err(format!(
                "{}: needs [m, k] and [k, n] shapes (and [f] or [f, l]: 1 for fast accumulation, \
                 1 for `sa` M-major)",
                call.label()
            )
            .into());
        }
    };
    Ok((mode, format, a[0], b[1], a[1]))
}

/// Whether the call lists `[1]` after its shapes: fast accumulation.
pub fn fast_accum(call: &CallSpec) -> bool {
    fp8::spec_shapes(&call.shapes).is_some_and(|s| s.fast)
}

/// Whether the call lists `[f, 1]` after its shapes: block scales' `sa` passed M-major.
pub fn sa_m_major(call: &CallSpec) -> bool {
    fp8::spec_shapes(&call.shapes).is_some_and(|s| s.sa_m_major)
}

/// The one output: `c` `[m, n]` (bf16).
pub fn outputs(call: &CallSpec) -> Result<Vec<OutputSpec>, BoxError> {
    let (_, _, m, n, _) = decode_call(call)?;
    Ok(vec![OutputSpec {
        name: "c",
        shape: vec![m, n],
        f32: false,
    }])
}

/// `2·m·n·k`.
pub fn flops(call: &CallSpec) -> Result<f64, BoxError> {
    let (_, _, m, n, k) = decode_call(call)?;
    Ok(2.0 * m as f64 * n as f64 * k as f64)
}

/// Seeded inputs: `a` in ±2 and `b` in ±1 rounded to the format (exact codes), scales spread over
/// [0.25, 1] (a wrong row or block picks a visibly wrong scale).
pub fn inputs(call: &CallSpec, seed: u64) -> Result<Vec<HostTensor>, BoxError> {
    let (mode, format, m, n, k) = decode_call(call)?;
    let exact = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| decode(format, encode(format, x)))
            .collect()
    };
    let numel = |s: &[i64]| s.iter().product::<i64>().max(0) as usize;
    let (sa, sb) = mode.scale_shapes(m, n, k);
    let scales = |shape: [i64; 2], s: u64| -> HostTensor {
        (uniform(numel(&shape), 0.25, 1.0, s), shape.to_vec())
    };
    Ok(vec![
        (exact(uniform(numel(&[m, k]), -2.0, 2.0, seed)), vec![m, k]),
        (
            exact(uniform(numel(&[k, n]), -1.0, 1.0, seed.wrapping_add(1))),
            vec![k, n],
        ),
        scales(sa, seed.wrapping_add(2)),
        scales(sb, seed.wrapping_add(3)),
    ])
}

/// The reference (f64 sums of exact products): all of `c`, or 64 rows spread over it when the product
/// has more than 2³² multiply-adds.
pub fn reference(call: &CallSpec, i: &[HostTensor]) -> Result<Expected, BoxError> {
    let (mode, format, m, n, k) = decode_call(call)?;
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    if i.len() != 4 {
        return Err(format!("{}: needs a, b, sa, sb", call.label()).into());
    }
    let rows: Vec<usize> = if (mu as u128) * (nu as u128) * (ku as u128) <= 1 << 32 || mu < 64 {
        (0..mu).collect()
    } else {
        (0..64).map(|r| r * (mu - 1) / 63).collect()
    };
    let codes = |v: &[f32]| -> Vec<u8> { v.iter().map(|&x| encode(format, x)).collect() };
    let a: Vec<u8> = rows
        .iter()
        .flat_map(|&r| codes(&i[0].0[r * ku..(r + 1) * ku]))
        .collect();
    let b = codes(&i[1].0);
    let sa_cols = i[2].1.get(1).copied().unwrap_or(1).max(1) as usize;
    let sa: Vec<f32> = match mode {
        ScaleMode::Tensor => i[2].0.clone(),
        _ => rows
            .iter()
            .flat_map(|&r| i[2].0[r * sa_cols..(r + 1) * sa_cols].iter().copied())
            .collect(),
    };
    let scales = match mode {
        ScaleMode::Tensor => HostScales::Tensor {
            a: sa[0],
            b: i[3].0[0],
        },
        ScaleMode::Row => HostScales::Row { a: &sa, b: &i[3].0 },
        ScaleMode::Block => HostScales::Block { a: &sa, b: &i[3].0 },
    };
    let values = gemm_fp8_reference(format, &a, &b, (nu, 1), &scales, rows.len(), nu, ku);
    Ok(Expected {
        values,
        rows: (rows.len() != mu).then_some(rows),
        others: Vec::new(),
    })
}

/// The `[cols, rows]` row-major transpose of the row-major `[rows, cols]` matrix `v`.
fn transposed<T: Copy + Default>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = vec![T::default(); rows * cols];
    for (i, row) in v.chunks(cols.max(1)).take(rows).enumerate() {
        for (j, &x) in row.iter().enumerate() {
            out[j * rows + i] = x;
        }
    }
    out
}

/// Runs the call once on `inputs` (and, with `timing`, times it): `c` read back, and the timing.
pub fn run(
    dev: &Device,
    stream: &Stream,
    w: &Workload,
    inputs: &[HostTensor],
    timing: Timing<'_>,
) -> Result<(Vec<f32>, Option<cutile::runtime::timing::Stats>), BoxError> {
    let (mode, format, m, n, k) = decode_call(&w.call)?;
    let (nu, ku) = (n as usize, k as usize);
    if inputs.len() != 4 {
        return Err(format!("{}: needs a, b, sa, sb", w.name).into());
    }
    let qa: Vec<u8> = inputs[0].0.iter().map(|&x| encode(format, x)).collect();
    // The `[n, k]` weight: b[p, j] = w[j, p].
    let qb: Vec<u8> = inputs[1].0.iter().map(|&x| encode(format, x)).collect();
    let qw = transposed(&qb, ku, nu);
    let ta = Tensor::from_host(dev, &qa, &[m, k])?;
    let tw = Tensor::from_host(dev, &qw, &[n, k])?;
    let tb = tw.transpose(0, 1)?;
    // `sa` M-major when the call asks: the `[k/128, m]` transpose stored, its `[m, k/128]` view passed.
    let m_major = match (mode, inputs[2].1.as_slice()) {
        (ScaleMode::Block, &[rows, cols]) if sa_m_major(&w.call) => Some((rows, cols)),
        _ => None,
    };
    let ssa = match m_major {
        Some((rows, cols)) => {
            let t = transposed(&inputs[2].0, rows.max(0) as usize, cols.max(0) as usize);
            Tensor::from_host(dev, &t, &[cols, rows])?
        }
        None => Tensor::from_host(dev, &inputs[2].0, &inputs[2].1)?,
    };
    let tsa = match m_major {
        Some(_) => ssa.transpose(0, 1)?,
        None => ssa.view(),
    };
    let ssb = Tensor::from_host(dev, &inputs[3].0, &inputs[3].1)?;
    let tsb = ssb.view();
    let scales = match mode {
        ScaleMode::Tensor => Fp8Scales::Tensor { a: &tsa, b: &tsb },
        ScaleMode::Row => Fp8Scales::Row { a: &tsa, b: &tsb },
        ScaleMode::Block => Fp8Scales::Block { a: &tsa, b: &tsb },
    };
    let mut c = Tensor::<half::bf16>::zeros(dev, &[m, n])?;
    let options = Fp8Options {
        format,
        fast_accum: fast_accum(&w.call),
    };
    fp8::gemm_fp8_with(stream, &ta, &tb, &options, &scales, &mut c)?.wait()?;
    let got: Vec<f32> = c.to_host()?.into_iter().map(f32::from).collect();
    let stats = crate::launch_times::time_queued(stream, timing, || {
        std::mem::forget(fp8::gemm_fp8_with(
            stream, &ta, &tb, &options, &scales, &mut c,
        )?);
        Ok(())
    })?;
    stream.synchronize()?;
    Ok((got, stats))
}

// Test code: an unwrap is an assertion.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The inputs are exact codes, and the reference of a sampled call equals the full one's rows.
    #[test]
    fn inputs_are_exact_and_sampled_rows_match() {
        for op in fp8::OPS {
            let call = CallSpec::new(op, "f8e4m3", &[&[70, 256], &[256, 130]], false);
            let i = inputs(&call, 3).unwrap();
            assert_eq!(i.len(), 4);
            for v in &i[0].0 {
                assert_eq!(decode(Fp8Format::E4M3, encode(Fp8Format::E4M3, *v)), *v);
            }
            let full = reference(&call, &i).unwrap();
            assert!(full.rows.is_none());
            assert_eq!(full.values.len(), 70 * 130);
            assert!(full.values.iter().any(|v| *v != 0.0));
        }
        let call = CallSpec::new("gemm_fp8_row", "f8e5m2", &[&[8, 32], &[32, 8]], false);
        assert_eq!(decode_call(&call).unwrap().1, Fp8Format::E5M2);
        assert!(
            decode_call(&CallSpec::new(
                "gemm_fp8_row",
                "bf16",
                &[&[8, 32], &[32, 8]],
                false
            ))
            .is_err()
        );
    }

    #[test]
    fn transposed_swaps_rows_and_columns() {
        assert_eq!(
            transposed(&[1, 2, 3, 4, 5, 6], 2, 3),
            vec![1, 4, 2, 5, 3, 6]
        );
        assert_eq!(transposed(&[1, 2, 3], 3, 1), vec![1, 2, 3]);
        assert!(transposed::<f32>(&[], 0, 4).is_empty());
    }

    /// A trailing `[1]` asks for fast accumulation; `[0]` or nothing for exact; `[f, 1]` also for `sa`
    /// M-major; anything else is refused.
    #[test]
    fn fast_accumulation_and_sa_layout_switches() {
        let call = |shapes: &[&[i64]]| CallSpec::new("gemm_fp8_block", "f8e4m3", shapes, false);
        for (shapes, fast, m_major) in [
            (&[&[8, 128][..], &[128, 8]][..], false, false),
            (&[&[8, 128], &[128, 8], &[0]], false, false),
            (&[&[8, 128], &[128, 8], &[1]], true, false),
            (&[&[8, 128], &[128, 8], &[0, 0]], false, false),
            (&[&[8, 128], &[128, 8], &[0, 1]], false, true),
            (&[&[8, 128], &[128, 8], &[1, 1]], true, true),
        ] {
            let c = call(shapes);
            assert_eq!(fast_accum(&c), fast, "{shapes:?}");
            assert_eq!(sa_m_major(&c), m_major, "{shapes:?}");
            assert_eq!(decode_call(&c).unwrap().2, 8);
        }
        for bad in [&[2][..], &[0, 2], &[1, 1, 1], &[]] {
            assert!(
                decode_call(&call(&[&[8, 128], &[128, 8], bad])).is_err(),
                "{bad:?}"
            );
        }
    }
}
