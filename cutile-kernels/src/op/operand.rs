//! A tensor argument as the planner sees it ([`Operand`]) and the device a plan is for ([`Target`]).
//!
//! An operand is either taken from a real tensor (its address decides the alignment facts the kernel
//! is specialized for) or described (contiguous at a 256-byte aligned made-up address, what a fresh
//! allocation gives) for planning without a device. Both go through the same planner.

use cutile::launch::TensorArg;
use cutile::runtime::Device;
use cutile::toolchain::GpuArch;
use cutile_ir::ScalarType;

use super::OpError;

/// One tensor argument of an op call.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    /// The parameter's name in the op's signature (for errors).
    pub name: &'static str,
    pub dtype: ScalarType,
    pub shape: Vec<i64>,
    /// Strides in elements.
    pub strides: Vec<i64>,
    /// Device address of element 0 (made up for described operands).
    pub ptr: u64,
    /// Device ordinal.
    pub device: usize,
}

/// Row-major strides of `shape`.
pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

impl Operand {
    /// The operand of a real tensor or view.
    pub fn of(name: &'static str, t: &(impl TensorArg + ?Sized)) -> Operand {
        let p = t.tensor_ref(false);
        Operand {
            name,
            dtype: p.dtype(),
            shape: p.shape().to_vec(),
            strides: p.strides().to_vec(),
            ptr: p.ptr(),
            device: p.device(),
        }
    }

    /// A contiguous operand described without memory: the `index`-th operand of a call, at a distinct
    /// 256-byte aligned made-up address. Never launch it.
    pub fn described(
        name: &'static str,
        index: usize,
        dtype: ScalarType,
        shape: &[i64],
    ) -> Operand {
        Operand {
            name,
            dtype,
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            ptr: 0x7000_0000_0000u64 + ((index as u64) << 36),
            device: 0,
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }

    /// Whether a tile kernel can reach this matrix with TMA and vector accesses: a 16-byte aligned base,
    /// one unit-stride axis (row- or column-major, any view of either), and every other stride a
    /// multiple of 16 bytes. An empty or one-element axis counts as any stride.
    pub fn is_16b_aligned(&self) -> bool {
        let eb = self.elem_bytes() as i64;
        let unit = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|&(&d, &s)| s == 1 || d <= 1)
            .count();
        self.ptr.is_multiple_of(16)
            && unit >= 1
            && self
                .shape
                .iter()
                .zip(&self.strides)
                .all(|(&d, &s)| s == 1 || d <= 1 || (s * eb) % 16 == 0)
    }

    /// Element size in bytes.
    pub fn elem_bytes(&self) -> u64 {
        (self.dtype.bit_width().max(8) / 8) as u64
    }

    /// Fails unless the rank is `expected`.
    pub fn expect_rank(&self, op: &'static str, expected: usize) -> Result<(), OpError> {
        if self.rank() == expected {
            return Ok(());
        }
        Err(OpError::Rank {
            op,
            arg: self.name,
            expected: expected.to_string(),
            shape: self.shape.clone(),
        })
    }

    /// Fails unless the element type is one of `allowed`.
    pub fn expect_dtype(&self, op: &'static str, allowed: &[ScalarType]) -> Result<(), OpError> {
        if allowed.contains(&self.dtype) {
            return Ok(());
        }
        Err(OpError::DType {
            op,
            arg: self.name,
            dtype: self.dtype,
            constraint: format!(
                "the op takes {}",
                allowed
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }

    /// Fails unless this operand's element type equals `other`'s.
    pub fn expect_same_dtype(&self, op: &'static str, other: &Operand) -> Result<(), OpError> {
        if self.dtype == other.dtype {
            return Ok(());
        }
        Err(OpError::DType {
            op,
            arg: self.name,
            dtype: self.dtype,
            constraint: format!("it must match `{}` ({})", other.name, other.dtype),
        })
    }

    /// Fails unless this operand's shape equals `other`'s.
    pub fn expect_same_shape(&self, op: &'static str, other: &Operand) -> Result<(), OpError> {
        if self.shape == other.shape {
            return Ok(());
        }
        Err(OpError::Shape {
            op,
            what: format!("`{}` must have `{}`'s shape", self.name, other.name),
            left: format!("{:?}", self.shape),
            right: format!("{:?}", other.shape),
        })
    }

    /// The operand viewed as `rows x cols` over its last axis (leading axes flattened, as
    /// `torch.softmax(x, -1)` treats them): the last axis must be unit-stride and the leading axes must
    /// collapse into one row stride. A rank-0 tensor is one row of one element.
    pub fn as_rows(&self, op: &'static str) -> Result<Operand, OpError> {
        let layout_err = |constraint: &str| OpError::Layout {
            op,
            arg: self.name,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            constraint: constraint.into(),
        };
        let (cols, lead) = match self.shape.split_last() {
            Some((&c, lead)) => (c, lead),
            None => (1, &[][..]),
        };
        let rows: i64 = lead.iter().product();
        if cols > 1 && self.strides.last().copied().unwrap_or(1) != 1 {
            return Err(layout_err(
                "the last axis must be contiguous (stride 1); call `.contiguous()` or pass a copy",
            ));
        }
        // The row stride: the stride of the innermost leading axis with extent > 1, and every outer
        // leading axis must step by whole rows of the inner ones.
        let mut row_stride = cols.max(1);
        let mut expected: Option<i64> = None;
        for i in (0..lead.len()).rev() {
            if lead[i] == 1 {
                continue;
            }
            match expected {
                None => {
                    row_stride = self.strides[i];
                    expected = Some(self.strides[i] * lead[i]);
                }
                Some(e) if self.strides[i] == e => expected = Some(e * lead[i]),
                Some(_) => {
                    return Err(layout_err(
                        "the leading axes cannot be flattened into rows with one stride; pass a \
                         contiguous copy",
                    ));
                }
            }
        }
        if rows > 1 && row_stride < cols {
            return Err(layout_err(
                "rows overlap (row stride smaller than the row length)",
            ));
        }
        Ok(Operand {
            name: self.name,
            dtype: self.dtype,
            shape: vec![rows, cols],
            strides: vec![row_stride.max(cols).max(1), 1],
            ptr: self.ptr,
            device: self.device,
        })
    }
}

/// The device a plan is for: its target arch and SM count (persistent grids use it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub arch: GpuArch,
    pub sm_count: u32,
    pub device: usize,
}

impl Target {
    /// The target of a real device.
    pub fn of(device: &Device) -> Result<Target, OpError> {
        let (major, minor) = device.compute_capability();
        let arch = GpuArch::from_compute_capability(major, minor).ok_or_else(|| {
            OpError::UnsupportedDevice {
                device: device.name().to_string(),
                major,
                minor,
            }
        })?;
        Ok(Target {
            arch,
            sm_count: device.sm_count(),
            device: device.ordinal(),
        })
    }

    /// A target for planning without a device: `arch` with a typical SM count (132 for sm_90, as an
    /// H100/H200 SXM; SM counts only change persistent grids, never which cubin is used).
    pub fn planning(arch: GpuArch) -> Target {
        use GpuArch::*;
        let sm_count = match arch {
            Sm80 => 108,
            Sm90 => 132,
            Sm100 | Sm103 => 148,
            Sm120 | Sm121 => 84,
            _ => 128,
        };
        Target {
            arch,
            sm_count,
            device: 0,
        }
    }

    /// Fails unless `o` is on this target's device.
    pub fn expect_device(&self, op: &'static str, o: &Operand) -> Result<(), OpError> {
        if o.device == self.device {
            return Ok(());
        }
        Err(OpError::Device {
            op,
            arg: o.name,
            expected: self.device,
            got: o.device,
        })
    }
}
