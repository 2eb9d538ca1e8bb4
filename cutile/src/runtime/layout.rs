//! Shape and stride arithmetic of tensors, in elements, with no device involved.
//!
//! A [`Layout`] is `(shape, strides, offset)` with 64-bit entries. All arithmetic is checked, so a
//! shape whose element count or extent overflows `i64` is an error rather than a wrap-around. Strides
//! are non-negative: the views the runtime creates (slices, transposes, reshapes) never need negative
//! ones, and forbidding them keeps every layout's memory span `[offset, offset + extent)`.

use std::ops::Range;

/// Why a layout or a view of it is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    #[error("shape {shape:?} has a negative dimension")]
    NegativeDim { shape: Vec<i64> },
    #[error("shape {shape:?} with strides {strides:?} overflows 64-bit element offsets")]
    Overflow { shape: Vec<i64>, strides: Vec<i64> },
    #[error("shape {shape:?} has rank {} but strides {strides:?} have rank {}", shape.len(), strides.len())]
    RankMismatch { shape: Vec<i64>, strides: Vec<i64> },
    #[error(
        "strides {strides:?} contain a negative stride; only non-negative strides are supported"
    )]
    NegativeStride { strides: Vec<i64> },
    #[error("offset {offset} is negative")]
    NegativeOffset { offset: i64 },
    #[error("axis {axis} is out of range for a tensor of rank {rank}")]
    AxisOutOfRange { axis: usize, rank: usize },
    #[error("slice {start}..{end} of axis {axis} is out of range for its length {len}")]
    SliceOutOfRange {
        axis: usize,
        start: i64,
        end: i64,
        len: i64,
    },
    #[error(
        "cannot reshape shape {from:?} ({from_numel} elements) into shape {to:?} ({to_numel} elements)"
    )]
    ReshapeNumel {
        from: Vec<i64>,
        from_numel: i64,
        to: Vec<i64>,
        to_numel: i64,
    },
    #[error(
        "cannot reshape shape {from:?} with strides {strides:?} into shape {to:?}: reshape needs a \
         contiguous tensor"
    )]
    ReshapeNotContiguous {
        from: Vec<i64>,
        strides: Vec<i64>,
        to: Vec<i64>,
    },
    #[error("reshape target {to:?} may hold at most one -1 and no other negative dimension")]
    BadInferredDim { to: Vec<i64> },
    #[error("{len} elements were given for shape {shape:?}, which holds {numel}")]
    LenMismatch {
        shape: Vec<i64>,
        numel: i64,
        len: usize,
    },
}

/// Number of elements of `shape` (1 for rank 0), checked.
pub fn numel(shape: &[i64]) -> Result<i64, LayoutError> {
    if shape.iter().any(|&d| d < 0) {
        return Err(LayoutError::NegativeDim {
            shape: shape.to_vec(),
        });
    }
    shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| LayoutError::Overflow {
            shape: shape.to_vec(),
            strides: Vec::new(),
        })
}

/// Row-major strides of `shape`: the last axis has stride 1.
pub fn contiguous_strides(shape: &[i64]) -> Result<Vec<i64>, LayoutError> {
    numel(shape)?;
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        // numel() succeeded, so the running product cannot overflow (it only omits trailing factors).
        acc = acc.saturating_mul(d.max(1));
    }
    Ok(strides)
}

/// Where a tensor's elements sit in a buffer: shape, strides and offset, all in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Vec<i64>,
    strides: Vec<i64>,
    offset: i64,
}

impl Layout {
    /// A dense row-major layout of `shape` at offset 0.
    pub fn contiguous(shape: &[i64]) -> Result<Layout, LayoutError> {
        let strides = contiguous_strides(shape)?;
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: 0,
        })
    }

    /// A layout with explicit strides, validated (ranks agree, nothing negative, no overflow).
    pub fn with_strides(
        shape: &[i64],
        strides: &[i64],
        offset: i64,
    ) -> Result<Layout, LayoutError> {
        if shape.len() != strides.len() {
            return Err(LayoutError::RankMismatch {
                shape: shape.to_vec(),
                strides: strides.to_vec(),
            });
        }
        numel(shape)?;
        if strides.iter().any(|&s| s < 0) {
            return Err(LayoutError::NegativeStride {
                strides: strides.to_vec(),
            });
        }
        if offset < 0 {
            return Err(LayoutError::NegativeOffset { offset });
        }
        let layout = Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        };
        layout.extent()?;
        Ok(layout)
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn strides(&self) -> &[i64] {
        &self.strides
    }

    /// Offset of element `[0, 0, …]` from the start of the buffer, in elements.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> i64 {
        // Validated at construction.
        numel(&self.shape).unwrap_or(0)
    }

    /// One past the largest element offset touched, relative to `offset` (0 for an empty tensor).
    fn extent(&self) -> Result<i64, LayoutError> {
        let overflow = || LayoutError::Overflow {
            shape: self.shape.clone(),
            strides: self.strides.clone(),
        };
        if self.shape.contains(&0) {
            return Ok(0);
        }
        let mut last = 0i64;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let step = (d - 1).checked_mul(s).ok_or_else(overflow)?;
            last = last.checked_add(step).ok_or_else(overflow)?;
        }
        let end = last.checked_add(1).ok_or_else(overflow)?;
        self.offset.checked_add(end).ok_or_else(overflow)?;
        Ok(end)
    }

    /// The element range `[start, end)` of the buffer this layout touches (`start == end` when empty).
    pub fn span(&self) -> Range<i64> {
        let extent = self.extent().unwrap_or(0);
        self.offset..self.offset + extent
    }

    /// Dense and row-major: the elements fill `span()` in logical order. Axes of length 1 may have any
    /// stride.
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1i64;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d == 0 {
                return true;
            }
            if d != 1 && s != expected {
                return false;
            }
            expected = expected.saturating_mul(d);
        }
        true
    }

    /// The sub-range `range` of `axis`; the rank is kept.
    pub fn slice(&self, axis: usize, range: Range<i64>) -> Result<Layout, LayoutError> {
        let len = *self.shape.get(axis).ok_or(LayoutError::AxisOutOfRange {
            axis,
            rank: self.rank(),
        })?;
        if range.start < 0 || range.end < range.start || range.end > len {
            return Err(LayoutError::SliceOutOfRange {
                axis,
                start: range.start,
                end: range.end,
                len,
            });
        }
        let mut out = self.clone();
        out.shape[axis] = range.end - range.start;
        // An empty slice keeps the offset, so even empty views never point past their parent. For
        // a non-empty one start < len and the old extent fits, so start * stride fits too.
        if !range.is_empty() {
            out.offset = self.offset + range.start * self.strides[axis];
        }
        Ok(out)
    }

    /// Swaps two axes (shape and strides); no data moves.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Layout, LayoutError> {
        let rank = self.rank();
        for axis in [a, b] {
            if axis >= rank {
                return Err(LayoutError::AxisOutOfRange { axis, rank });
            }
        }
        let mut out = self.clone();
        out.shape.swap(a, b);
        out.strides.swap(a, b);
        Ok(out)
    }

    /// The same elements under a new shape; needs a contiguous layout. One entry of `to` may be -1,
    /// inferred from the element count.
    pub fn reshape(&self, to: &[i64]) -> Result<Layout, LayoutError> {
        let target = infer_shape(self.numel(), &self.shape, to)?;
        if !self.is_contiguous() {
            return Err(LayoutError::ReshapeNotContiguous {
                from: self.shape.clone(),
                strides: self.strides.clone(),
                to: to.to_vec(),
            });
        }
        let mut out = Layout::contiguous(&target)?;
        out.offset = self.offset;
        Ok(out)
    }

    /// Offsets of all elements (including `offset`) in row-major logical order.
    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        let n = self.numel().max(0) as u64;
        let mut index = vec![0i64; self.rank()];
        let mut current = self.offset;
        (0..n).map(move |i| {
            if i > 0 {
                // Odometer increment, last axis fastest.
                for ax in (0..index.len()).rev() {
                    index[ax] += 1;
                    current += self.strides[ax];
                    if index[ax] < self.shape[ax] {
                        break;
                    }
                    current -= self.strides[ax] * self.shape[ax];
                    index[ax] = 0;
                }
            }
            current
        })
    }
}

/// Resolves a reshape target with at most one -1 against the element count of `from`.
fn infer_shape(from_numel: i64, from: &[i64], to: &[i64]) -> Result<Vec<i64>, LayoutError> {
    let inferred: Vec<usize> = (0..to.len()).filter(|&i| to[i] == -1).collect();
    if inferred.len() > 1 || to.iter().any(|&d| d < -1) {
        return Err(LayoutError::BadInferredDim { to: to.to_vec() });
    }
    let mismatch = |to_numel| LayoutError::ReshapeNumel {
        from: from.to_vec(),
        from_numel,
        to: to.to_vec(),
        to_numel,
    };
    let mut target = to.to_vec();
    if let Some(&i) = inferred.first() {
        let known: i64 = to
            .iter()
            .filter(|&&d| d != -1)
            .try_fold(1i64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| mismatch(-1))?;
        if known == 0 || from_numel % known != 0 {
            return Err(mismatch(known));
        }
        target[i] = from_numel / known;
    }
    let to_numel = numel(&target)?;
    if to_numel != from_numel {
        return Err(mismatch(to_numel));
    }
    Ok(target)
}

/// Checks that `len` host elements fill `shape` exactly.
pub fn check_len(shape: &[i64], len: usize) -> Result<i64, LayoutError> {
    let n = numel(shape)?;
    if n as u128 != len as u128 {
        return Err(LayoutError::LenMismatch {
            shape: shape.to_vec(),
            numel: n,
            len,
        });
    }
    Ok(n)
}

/// Gathers the elements of `layout` from `span`, a host copy of the buffer range `layout.span()`, in
/// row-major logical order; `None` if `span` is shorter than that range.
pub fn gather<T: Copy>(layout: &Layout, span: &[T]) -> Option<Vec<T>> {
    let base = layout.span().start;
    layout
        .offsets()
        .map(|o| span.get(usize::try_from(o - base).ok()?).copied())
        .collect()
}
