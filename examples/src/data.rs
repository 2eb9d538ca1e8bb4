//! Element types picked at run time, device tensors of them, seeded host data, host-side axis swaps,
//! and error norms.

use cutile::runtime::{Device, DeviceElement, Result, Tensor};
use cutile_ir::ScalarType;
use half::{bf16, f16};

/// A floating-point element type of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dt {
    F32,
    BF16,
    F16,
}

impl Dt {
    /// The type a call spec names (`f32`, `f16`, `bf16`, and their long spellings).
    pub fn parse(name: &str) -> Option<Dt> {
        Some(match cutile_kernels::op::registry::parse_dtype(name)? {
            ScalarType::F32 => Dt::F32,
            ScalarType::BF16 => Dt::BF16,
            ScalarType::F16 => Dt::F16,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::BF16 => "bf16",
            Dt::F16 => "f16",
        }
    }

    pub fn scalar(self) -> ScalarType {
        match self {
            Dt::F32 => ScalarType::F32,
            Dt::BF16 => ScalarType::BF16,
            Dt::F16 => ScalarType::F16,
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            Dt::F32 => 4,
            Dt::BF16 | Dt::F16 => 2,
        }
    }

    /// Largest accepted relative L2 error of a result stored in this type
    /// (`cutile_kernels::tolerance`).
    pub fn tolerance(self) -> f64 {
        cutile_kernels::tolerance(self.scalar())
    }

    /// `data` rounded to this type, as the device holds it.
    pub fn round(self, data: &[f32]) -> Vec<f32> {
        match self {
            Dt::F32 => data.to_vec(),
            Dt::BF16 => data.iter().map(|&v| bf16::from_f32(v).to_f32()).collect(),
            Dt::F16 => data.iter().map(|&v| f16::from_f32(v).to_f32()).collect(),
        }
    }
}

/// The tensors of one op call on a device, all of one run-time element type (ops take one type).
#[derive(Debug)]
pub enum DevTensors {
    F32(Vec<Tensor<f32>>),
    BF16(Vec<Tensor<bf16>>),
    F16(Vec<Tensor<f16>>),
}

fn upload<T: DeviceElement>(
    device: &Device,
    data: &[(Vec<f32>, Vec<i64>)],
    conv: impl Fn(f32) -> T,
) -> Result<Vec<Tensor<T>>> {
    data.iter()
        .map(|(d, shape)| {
            let v: Vec<T> = d.iter().map(|&x| conv(x)).collect();
            Tensor::from_host(device, &v, shape)
        })
        .collect()
}

impl DevTensors {
    /// Uploads each `(data, shape)` (converted to `dt`) as a contiguous tensor.
    pub fn upload(device: &Device, dt: Dt, data: &[(Vec<f32>, Vec<i64>)]) -> Result<DevTensors> {
        Ok(match dt {
            Dt::F32 => DevTensors::F32(upload(device, data, |x| x)?),
            Dt::BF16 => DevTensors::BF16(upload(device, data, bf16::from_f32)?),
            Dt::F16 => DevTensors::F16(upload(device, data, f16::from_f32)?),
        })
    }

    pub fn len(&self) -> usize {
        match self {
            DevTensors::F32(v) => v.len(),
            DevTensors::BF16(v) => v.len(),
            DevTensors::F16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tensor `i` read back as f32 (its storage order).
    pub fn to_f32(&self, i: usize) -> std::result::Result<Vec<f32>, crate::BoxError> {
        let missing = || -> crate::BoxError { format!("no tensor {i}").into() };
        Ok(match self {
            DevTensors::F32(v) => v.get(i).ok_or_else(missing)?.to_host()?,
            DevTensors::BF16(v) => v
                .get(i)
                .ok_or_else(missing)?
                .to_host()?
                .iter()
                .map(|x| x.to_f32())
                .collect(),
            DevTensors::F16(v) => v
                .get(i)
                .ok_or_else(missing)?
                .to_host()?
                .iter()
                .map(|x| x.to_f32())
                .collect(),
        })
    }
}

/// `n` seeded values uniform in `[low, high)`.
pub fn uniform(n: usize, low: f64, high: f64, seed: u64) -> Vec<f32> {
    cutile::runtime::fill::uniform::<f32>(n, low, high, seed)
}

/// Row-major `data` of `shape` with axes `a` and `b` swapped: the new data and shape.
pub fn swap_axes(data: &[f32], shape: &[i64], a: usize, b: usize) -> (Vec<f32>, Vec<i64>) {
    let rank = shape.len();
    let mut out_shape = shape.to_vec();
    out_shape.swap(a, b);
    let in_strides = cutile_kernels::op::contiguous_strides(shape);
    let mut src_strides = in_strides.clone();
    src_strides.swap(a, b);
    let n = data.len();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0i64; rank];
    for _ in 0..n {
        let src: i64 = idx.iter().zip(&src_strides).map(|(i, s)| i * s).sum();
        out.push(data[src as usize]);
        for ax in (0..rank).rev() {
            idx[ax] += 1;
            if idx[ax] < out_shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    (out, out_shape)
}

/// `‖got - want‖₂ / ‖want‖₂` in f64 (the absolute norm when `want` is all zeros); infinite when the
/// lengths differ or `got` holds a NaN.
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    rel_l2_floored(got, want, 0.0)
}

/// [`rel_l2`] against `max(‖want‖₂, floor)`: the error relative to the size of the terms that make up
/// `want` where those cancel (`Workload::error_floor`).
pub fn rel_l2_floored(got: &[f32], want: &[f32], floor: f64) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        if g.is_nan() {
            return f64::INFINITY;
        }
        num += (g as f64 - w as f64).powi(2);
        den += (w as f64).powi(2);
    }
    let den = den.max(floor * floor);
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}
