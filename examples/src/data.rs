//! Element types picked at run time, device tensors of them, seeded host data, and error norms.

use cutile::launch::LaunchArgs;
use cutile::runtime::{Device, Result, Tensor};
use half::{bf16, f16};

/// A floating-point element type of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dt {
    F32,
    BF16,
    F16,
}

impl Dt {
    pub fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::BF16 => "bf16",
            Dt::F16 => "f16",
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            Dt::F32 => 4,
            Dt::BF16 | Dt::F16 => 2,
        }
    }

    /// Largest accepted relative L2 error of a result stored in this type.
    pub fn tolerance(self) -> f64 {
        match self {
            Dt::F32 => 1e-5,
            Dt::BF16 => 1e-2,
            Dt::F16 => 2e-3,
        }
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

/// A device tensor of a run-time element type.
#[derive(Debug)]
pub enum DevTensor {
    F32(Tensor<f32>),
    BF16(Tensor<bf16>),
    F16(Tensor<f16>),
}

impl DevTensor {
    /// Uploads `data` (converted to `dt`) as a contiguous tensor of `shape`.
    pub fn upload(device: &Device, dt: Dt, data: &[f32], shape: &[i64]) -> Result<DevTensor> {
        Ok(match dt {
            Dt::F32 => DevTensor::F32(Tensor::from_host(device, data, shape)?),
            Dt::BF16 => {
                let v: Vec<bf16> = data.iter().map(|&x| bf16::from_f32(x)).collect();
                DevTensor::BF16(Tensor::from_host(device, &v, shape)?)
            }
            Dt::F16 => {
                let v: Vec<f16> = data.iter().map(|&x| f16::from_f32(x)).collect();
                DevTensor::F16(Tensor::from_host(device, &v, shape)?)
            }
        })
    }

    pub fn zeros(device: &Device, dt: Dt, shape: &[i64]) -> Result<DevTensor> {
        Ok(match dt {
            Dt::F32 => DevTensor::F32(Tensor::zeros(device, shape)?),
            Dt::BF16 => DevTensor::BF16(Tensor::zeros(device, shape)?),
            Dt::F16 => DevTensor::F16(Tensor::zeros(device, shape)?),
        })
    }

    pub fn to_f32(&self) -> Result<Vec<f32>> {
        Ok(match self {
            DevTensor::F32(t) => t.to_host()?,
            DevTensor::BF16(t) => t.to_host()?.iter().map(|v| v.to_f32()).collect(),
            DevTensor::F16(t) => t.to_host()?.iter().map(|v| v.to_f32()).collect(),
        })
    }

    /// Appends this tensor as a kernel input.
    pub fn input<'a>(&'a self, args: LaunchArgs<'a>) -> LaunchArgs<'a> {
        match self {
            DevTensor::F32(t) => args.input(t),
            DevTensor::BF16(t) => args.input(t),
            DevTensor::F16(t) => args.input(t),
        }
    }

    /// Appends this tensor as a kernel output.
    pub fn output<'a>(&'a mut self, args: LaunchArgs<'a>) -> LaunchArgs<'a> {
        match self {
            DevTensor::F32(t) => args.output(t),
            DevTensor::BF16(t) => args.output(t),
            DevTensor::F16(t) => args.output(t),
        }
    }
}

/// `n` seeded values uniform in `[low, high)`.
pub fn uniform(n: usize, low: f64, high: f64, seed: u64) -> Vec<f32> {
    cutile::runtime::fill::uniform::<f32>(n, low, high, seed)
}

/// `‖got - want‖₂ / ‖want‖₂` in f64 (the absolute norm when `want` is all zeros); infinite when the
/// lengths differ or `got` holds a NaN.
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
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
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}
