//! The warm-path key: a few dozen bytes naming everything that decides which compiled kernel a launch
//! needs (kernel identity, compile options, device, index type, and per argument its kind, element type
//! and layout facts), built on the stack from the arguments without allocating. Also the process-wide
//! interning of kernel identities (kernel + generic values + hints → a small id, done once per
//! [`Launcher`](super::Launcher)) and the hasher of the warm map.
//!
//! The layout facts encoded here must be exactly the DSL's [`LayoutFacts`]: the cold path re-encodes the
//! facts the specialization used and refuses to cache a kernel under a key that disagrees
//! ([`encode_facts`] is the one encoder both sides use).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, OnceLock};

use cutile_ir::{OptimizationHints, ScalarType};

use super::args::{Arg, LaunchArgs, MAX_RANK, base_align};
use super::error::LaunchError;
use super::plan::CompileOptions;
use crate::dsl::spec::{MAX_DIVISOR, pow2_divisor};
use crate::dsl::{ArgError, GenericValue, Kernel, LayoutFacts, Specialized};

/// Bytes kept on the stack; longer keys (many high-rank tensors) spill to the heap.
const INLINE: usize = 192;

/// A key under construction.
pub(crate) struct KeyBuf {
    buf: [u8; INLINE],
    len: usize,
    heap: Option<Vec<u8>>,
}

impl KeyBuf {
    pub fn new() -> KeyBuf {
        KeyBuf {
            buf: [0; INLINE],
            len: 0,
            heap: None,
        }
    }

    #[inline]
    pub fn push(&mut self, b: u8) {
        match self.buf.get_mut(self.len) {
            Some(slot) if self.heap.is_none() => {
                *slot = b;
                self.len += 1;
            }
            _ => self.spill(b),
        }
    }

    #[cold]
    fn spill(&mut self, b: u8) {
        self.heap
            .get_or_insert_with(|| self.buf[..self.len].to_vec())
            .push(b);
    }

    #[inline]
    pub fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match &self.heap {
            Some(h) => h,
            None => &self.buf[..self.len],
        }
    }
}

#[inline]
/// log2 of a power-of-two divisor (divisors are ≤ [`MAX_DIVISOR`], so this fits a byte).
fn log2(d: u64) -> u8 {
    d.max(1).trailing_zeros() as u8
}

/// Marks a unit stride (a static 1 in the tensor view).
const UNIT_STRIDE: u8 = 0xFF;

/// Appends one tensor's layout facts: element type, rank, base divisor, per-axis extent divisors, per-axis
/// stride divisors (or unit), sign of the strides.
#[inline]
pub(crate) fn encode_facts(
    out: &mut KeyBuf,
    dtype: ScalarType,
    base_div: u64,
    shape_div: impl ExactSizeIterator<Item = u64>,
    stride_div: impl Iterator<Item = Option<u64>>,
    strides_nonneg: bool,
) {
    out.push(dtype.tag() as u8);
    out.push(shape_div.len() as u8);
    out.push(log2(base_div));
    for d in shape_div {
        out.push(log2(d));
    }
    for s in stride_div {
        out.push(s.map_or(UNIT_STRIDE, log2));
    }
    out.push(strides_nonneg as u8);
}

/// [`encode_facts`] of the DSL's own facts (the cold path's cross-check).
pub(crate) fn encode_layout_facts(out: &mut KeyBuf, f: &LayoutFacts) {
    encode_facts(
        out,
        f.dtype,
        f.base_div,
        f.shape_div.iter().copied(),
        f.stride_div.iter().copied(),
        f.strides_nonneg,
    );
}

/// [`encode_facts`] computed straight from a tensor's shape, strides and address, as
/// [`LayoutFacts::of`] would compute them from its [`TensorMeta`](crate::dsl::TensorMeta).
#[inline]
pub(crate) fn encode_tensor(
    out: &mut KeyBuf,
    dtype: ScalarType,
    shape: &[i64],
    strides: &[i64],
    ptr: u64,
) {
    let align = base_align(ptr);
    let base_div = (1u64 << align.trailing_zeros().min(63)).min(MAX_DIVISOR);
    encode_facts(
        out,
        dtype,
        base_div,
        shape.iter().map(|&d| pow2_divisor(d)),
        strides
            .iter()
            .map(|&s| if s == 1 { None } else { Some(pow2_divisor(s)) }),
        strides.iter().all(|&s| s >= 0),
    );
}

/// The index type specialization picks for these tensors (the rule of
/// [`choose_index_type`](crate::dsl::choose_index_type), on borrowed shapes).
pub(crate) fn index_type_of(args: &LaunchArgs<'_>) -> ScalarType {
    let limit = i32::MAX as i128;
    let big = args.items.iter().any(|a| match a {
        Arg::Tensor(t) => {
            let max_offset: i128 = if t.shape.contains(&0) {
                0
            } else {
                t.shape
                    .iter()
                    .zip(t.strides)
                    .map(|(&d, &s)| (d as i128 - 1) * s as i128)
                    .sum()
            };
            max_offset > limit
                || t.shape.iter().any(|&d| d as i128 > limit)
                || t.strides
                    .iter()
                    .any(|&s| s as i128 > limit || (s as i128) < -limit)
        }
        Arg::Scalar(_) => false,
    });
    if big {
        ScalarType::I64
    } else {
        ScalarType::I32
    }
}

/// Kinds of argument in the key.
const TAG_INPUT: u8 = b'I';
const TAG_OUTPUT: u8 = b'O';
const TAG_SCALAR: u8 = b'S';

fn header(
    out: &mut KeyBuf,
    kernel_id: u32,
    options: &CompileOptions,
    device: usize,
    index_type: ScalarType,
    n_args: usize,
) {
    out.extend(&kernel_id.to_le_bytes());
    out.push(options.opt_level);
    out.push(options.line_info as u8);
    if !options.tile_libraries.is_empty() {
        // Distinguish library sets in the in-memory key (their contents are in the full key).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!("{:?}", options.tile_libraries).bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        out.extend(&h.to_le_bytes());
    }
    out.extend(&super::libraries::defaults_generation().to_le_bytes());
    out.extend(&(device as u32).to_le_bytes());
    out.push(index_type.tag() as u8);
    out.push(n_args.min(255) as u8);
}

/// Builds the warm key of one launch. Fails only on a tensor above [`MAX_RANK`].
pub(crate) fn warm_key(
    out: &mut KeyBuf,
    kernel: &Kernel,
    kernel_id: u32,
    options: &CompileOptions,
    device: usize,
    args: &LaunchArgs<'_>,
) -> Result<(), LaunchError> {
    header(
        out,
        kernel_id,
        options,
        device,
        index_type_of(args),
        args.items.len(),
    );
    for (i, a) in args.items.iter().enumerate() {
        match a {
            Arg::Tensor(t) => {
                if t.shape.len() > MAX_RANK || t.strides.len() != t.shape.len() {
                    return Err(ArgError::RankTooLarge {
                        kernel: kernel.name().to_string(),
                        param: param_name(kernel, i),
                        rank: t.shape.len().max(t.strides.len()),
                        max: MAX_RANK,
                    }
                    .into());
                }
                out.push(if t.output { TAG_OUTPUT } else { TAG_INPUT });
                encode_tensor(out, t.dtype, t.shape, t.strides, t.ptr);
            }
            Arg::Scalar(s) => {
                out.push(TAG_SCALAR);
                out.push(s.dtype.tag() as u8);
            }
        }
    }
    Ok(())
}

/// The warm key `args` should have, written from what specialization used (its index type and layout
/// facts) instead of from the arguments: the cold path's cross-check.
pub(crate) fn expected_key(
    out: &mut KeyBuf,
    kernel_id: u32,
    options: &CompileOptions,
    device: usize,
    spec: &Specialized,
    args: &LaunchArgs<'_>,
) {
    header(
        out,
        kernel_id,
        options,
        device,
        spec.index_type,
        args.items.len(),
    );
    let mut facts = spec.facts.iter();
    for a in &args.items {
        match a {
            Arg::Tensor(t) => {
                out.push(if t.output { TAG_OUTPUT } else { TAG_INPUT });
                if let Some(f) = facts.next() {
                    encode_layout_facts(out, f);
                }
            }
            Arg::Scalar(s) => {
                out.push(TAG_SCALAR);
                out.push(s.dtype.tag() as u8);
            }
        }
    }
}

/// The name of parameter `i` (or `#i` past the declared list).
pub(crate) fn param_name(kernel: &Kernel, i: usize) -> String {
    kernel
        .info
        .params
        .get(i)
        .map(|p| p.name.to_string())
        .unwrap_or_else(|| format!("#{i}"))
}

type Identity = (usize, Vec<GenericValue>, OptimizationHints);

/// A small id for (kernel, generic values, hints), the same for equal kernels within the process.
pub(crate) fn kernel_id(kernel: &Kernel) -> u32 {
    static IDS: OnceLock<Mutex<HashMap<Identity, u32>>> = OnceLock::new();
    let identity: Identity = (
        std::ptr::from_ref(kernel.info) as usize,
        kernel.generics.clone(),
        kernel.hints().clone(),
    );
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let next = ids.len() as u32;
    *ids.entry(identity).or_insert(next)
}

/// A fast non-cryptographic hasher for the warm map (keys are short and not attacker-chosen).
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

pub(crate) type FxBuild = BuildHasherDefault<FxHasher>;
