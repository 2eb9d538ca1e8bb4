//! KV-cache writes, as vLLM's `reshape_and_cache`: k and v `[T, Hkv, D]` (any strides, usually column
//! slices of a fused qkv output) written into a contiguous cache `[B, Hkv, max_seq, D]` at each token's
//! (batch, position), or into a paged cache `[num_blocks, block_size, Hkv, D]` at `slot_mapping[t]`
//! (slot `s` = block `s / block_size`, offset `s % block_size`). One launch writes both caches.
//!
//! ```no_run
//! use cutile::runtime::{Device, Stream, Tensor};
//! use cutile_kernels::kv_cache;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = Device::new(0)?;
//! let stream = Stream::new(&device)?;
//! let (t, hkv, d, blocks, bs) = (4, 8, 128, 64, 16);
//! let k = Tensor::<half::bf16>::random(&device, &[t, hkv, d], 1)?;
//! let v = Tensor::<half::bf16>::random(&device, &[t, hkv, d], 2)?;
//! let slots = Tensor::from_host(&device, &[17i64, -1, 3, 200], &[t])?; // -1: padding token, skipped
//! let mut kc = Tensor::<half::bf16>::zeros(&device, &[blocks, bs, hkv, d])?;
//! let mut vc = Tensor::<half::bf16>::zeros(&device, &[blocks, bs, hkv, d])?;
//! kv_cache::write_kv_cache_paged(&stream, &k, &v, &slots, &mut kc, &mut vc)?.wait()?;
//! # Ok(()) }
//! ```
//!
//! Skipped tokens (nothing written, never an out-of-bounds write): a negative slot (vLLM's padding
//! convention) or one `≥ num_blocks · block_size`; a batch or position outside `[0, B)` / `[0, max_seq)`.
//! Distinct tokens of one call must address distinct entries (else which one lands is unspecified).
//! Indices are i32 or i64; k, v and the caches bf16, f16 or f32 (one type).
//!
//! - [`config`]: the tile per head dimension; [`reference`](mod@reference): the CPU reference;
//! - [`plan`]: the launch of a call, without a device; [`representative_calls`] for the catalog.

pub mod config;
mod dsl;
pub mod reference;

pub use config::KvConfig;
pub use dsl::{HEADS_FASTEST, PAGED, kernels};

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use crate::op::tuning::Candidate;
use crate::op::{
    CallSpec, FLOATS, INDICES, OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div,
    execute, float_index_kernel,
};

/// Contiguous cache: operands `[k, v, batch, pos, k_cache, v_cache]`.
pub const OP: &str = "kv_cache_write";
/// Paged cache: operands `[k, v, slot_mapping, k_cache, v_cache]`.
pub const OP_PAGED: &str = "kv_cache_write_paged";

/// Writes `k`, `v` into contiguous `[B, Hkv, max_seq, D]` caches at `(batch[t], :, pos[t], :)`.
#[allow(clippy::too_many_arguments)]
pub fn write_kv_cache<'a>(
    stream: &'a Stream,
    k: &'a impl TensorArg,
    v: &'a impl TensorArg,
    batch: &'a impl TensorArg,
    pos: &'a impl TensorArg,
    k_cache: &'a mut impl TensorArgMut,
    v_cache: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("batch", batch),
        Operand::of("pos", pos),
        Operand::of("k_cache", &*k_cache),
        Operand::of("v_cache", &*v_cache),
    ];
    run(stream, OP, &operands)
}

/// Writes `k`, `v` into paged `[num_blocks, block_size, Hkv, D]` caches at `slot_mapping[t]`.
pub fn write_kv_cache_paged<'a>(
    stream: &'a Stream,
    k: &'a impl TensorArg,
    v: &'a impl TensorArg,
    slot_mapping: &'a impl TensorArg,
    k_cache: &'a mut impl TensorArgMut,
    v_cache: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let operands = [
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("slot_mapping", slot_mapping),
        Operand::of("k_cache", &*k_cache),
        Operand::of("v_cache", &*v_cache),
    ];
    run(stream, OP_PAGED, &operands)
}

/// Validates, picks the configuration (tuned when `CUTILE_TUNE` asks: the tile in both grid orders)
/// and queues the launch.
fn run<'a>(stream: &'a Stream, op: &str, operands: &[Operand]) -> Result<Pending<'a>, OpError> {
    let target = Target::of(stream.device())?;
    let launches = plan(op, operands, &target)?;
    let tuned = cutile::tune::Tuner::global().mode() != cutile::tune::TuneMode::Off;
    if !tuned || launches.is_empty() {
        // SAFETY: the operands come from the caller's tensors, borrowed for 'a (caches exclusively);
        // the launch writes only cache entries the kernel checked are inside the caches.
        return unsafe { execute(stream, operands, &launches) };
    }
    let op = if op == OP_PAGED { OP_PAGED } else { OP };
    let (k, index) = (&operands[0], operands[2].dtype);
    let candidates = config::candidates(op, k.shape[0], k.shape[2])?;
    let class = format!("{} {index} {}", k.dtype, candidates[0].name());
    let k_cache = operands.len() - 2;
    // SAFETY: as above; every candidate writes the same entries, and a trial's k cache is scratch (its
    // v cache the caller's, rewritten with the same values).
    unsafe {
        crate::op::tuning::run_tuned(
            stream,
            operands,
            k_cache,
            op,
            class,
            &candidates,
            true,
            |c| plan_with(op, operands, &target, Some(c)),
        )
    }
}

fn shape_err(op: &'static str, what: String, left: &[i64], right: &[i64]) -> OpError {
    OpError::Shape {
        op,
        what,
        left: format!("{left:?}"),
        right: format!("{right:?}"),
    }
}

/// The launch of a call of `op` ([`OP`] or [`OP_PAGED`], operands as they list); none when empty.
pub fn plan(
    op: &str,
    operands: &[Operand],
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    plan_with(op, operands, target, None)
}

/// [`plan`] with configuration `cfg` (a [`config::candidates`] entry, say the tuner's alternative
/// grid order), or the default when `None`.
pub fn plan_with(
    op: &str,
    operands: &[Operand],
    target: &Target,
    cfg: Option<&KvConfig>,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let (op, paged) = match op {
        OP => (OP, false),
        OP_PAGED => (OP_PAGED, true),
        _ => {
            return Err(OpError::UnknownOp {
                name: op.into(),
                known: format!("{OP}, {OP_PAGED}"),
            });
        }
    };
    let n = if paged { 5 } else { 6 };
    if operands.len() != n {
        return Err(OpError::Unsupported {
            op,
            what: format!("takes {n} tensors, got {}", operands.len()),
        });
    }
    for o in operands {
        target.expect_device(op, o)?;
    }
    let (k, v) = (&operands[0], &operands[1]);
    let (kc, vc) = (&operands[n - 2], &operands[n - 1]);
    let indices = &operands[2..n - 2];
    k.expect_dtype(op, FLOATS)?;
    k.expect_rank(op, 3)?;
    v.expect_same_dtype(op, k)?;
    v.expect_same_shape(op, k)?;
    kc.expect_same_dtype(op, k)?;
    kc.expect_rank(op, 4)?;
    vc.expect_same_dtype(op, k)?;
    vc.expect_same_shape(op, kc)?;
    let (t, hkv, d) = (k.shape[0], k.shape[1], k.shape[2]);
    for ix in indices {
        ix.expect_dtype(op, INDICES)?;
        ix.expect_rank(op, 1)?;
        ix.expect_same_dtype(op, &indices[0])?;
        if ix.shape[0] != t {
            return Err(shape_err(
                op,
                format!("`{}` must have one entry per token of `k`", ix.name),
                &ix.shape,
                &[t],
            ));
        }
    }
    // The caches as [blocks, block_size, Hkv, D].
    let view = |c: &Operand| -> (Vec<i64>, Vec<i64>) {
        if paged {
            (c.shape.clone(), c.strides.clone())
        } else {
            let (s, st) = (&c.shape, &c.strides);
            (
                vec![s[0], s[2], s[1], s[3]],
                vec![st[0], st[2], st[1], st[3]],
            )
        }
    };
    let (kshape, _) = view(kc);
    if kshape[2] != hkv || kshape[3] != d {
        let want = if paged {
            "[num_blocks, block_size, Hkv, D]"
        } else {
            "[B, Hkv, max_seq, D]"
        };
        return Err(shape_err(
            op,
            format!("`k_cache` must be {want} with `k`'s Hkv and D"),
            &kc.shape,
            &k.shape,
        ));
    }
    if t == 0 || hkv == 0 || d == 0 || kc.numel() == 0 {
        return Ok(Vec::new());
    }
    if hkv > 65535 {
        return Err(OpError::Unsupported {
            op,
            what: format!("{hkv} heads exceed the grid's 65535 along y"),
        });
    }
    let cfg = match cfg {
        // A block covers `DP` lanes of a head: a narrower tile would leave part of each head unwritten.
        Some(c) if c.dp < d => {
            return Err(OpError::Unsupported {
                op,
                what: format!(
                    "a {}-lane tile cannot hold heads of {d}; take the configuration from \
                     `config::candidates`",
                    c.dp
                ),
            });
        }
        Some(c) => *c,
        None => config::choose(op, t, d)?,
    };
    let index = indices[0].dtype;
    let kernel = kernel(k.dtype, index, &cfg).ok_or_else(|| OpError::Unsupported {
        op,
        what: format!(
            "no {} kernel with {index} indices for BM = {}, DP = {}",
            k.dtype, cfg.bm, cfg.dp
        ),
    })?;
    let whole = |i: usize| PlannedArg::whole(i, &operands[i], false);
    let cache = |i: usize| {
        let (shape, strides) = view(&operands[i]);
        PlannedArg::Tensor {
            operand: i,
            output: true,
            shape,
            strides,
            offset: 0,
        }
    };
    let b = if paged { 2 } else { 3 };
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            whole(0),
            whole(1),
            whole(2),
            whole(b),
            PlannedArg::I32(
                if paged { dsl::PAGED } else { 0 }
                    | if cfg.heads_fastest {
                        dsl::HEADS_FASTEST
                    } else {
                        0
                    },
            ),
            cache(n - 2),
            cache(n - 1),
        ],
        grid: Some(if cfg.heads_fastest {
            (crate::op::grid_rows(op, ceil_div(t, cfg.bm) * hkv)?, 1, 1)
        } else {
            (
                crate::op::grid_rows(op, ceil_div(t, cfg.bm))?,
                hkv as u32,
                1,
            )
        }),
        config: format!("kv_cache_write {}", cfg.name()),
    }])
}

/// `kernels::kv_cache_write::kernel::<E, I, BM, DP>()` for the listed tiles.
fn kernel(dt: ScalarType, it: ScalarType, cfg: &KvConfig) -> Option<cutile::dsl::Kernel> {
    use kernels::kv_cache_write as k;
    float_index_kernel!(dt, it, |E, I| match (cfg.bm, cfg.dp) {
        (64, 16) => Some(k::kernel::<E, I, 64, 16>()),
        (64, 32) => Some(k::kernel::<E, I, 64, 32>()),
        (32, 64) => Some(k::kernel::<E, I, 32, 64>()),
        (16, 128) => Some(k::kernel::<E, I, 16, 128>()),
        (8, 256) => Some(k::kernel::<E, I, 8, 256>()),
        (4, 512) => Some(k::kernel::<E, I, 4, 512>()),
        (1, 16) => Some(k::kernel::<E, I, 1, 16>()),
        (1, 32) => Some(k::kernel::<E, I, 1, 32>()),
        (1, 64) => Some(k::kernel::<E, I, 1, 64>()),
        (1, 128) => Some(k::kernel::<E, I, 1, 128>()),
        (1, 256) => Some(k::kernel::<E, I, 1, 256>()),
        (1, 512) => Some(k::kernel::<E, I, 1, 512>()),
        _ => None,
    })
    .flatten()
}

/// What [`CallSpec::shapes`] lists: `[[T, Hkv, D], [B, max_seq] or [num_blocks, block_size], optional
/// [i64 indices] as 0/1]`.
pub const SPEC_INPUTS: &str =
    "[[T, Hkv, D], [B, max_seq] (paged: [num_blocks, block_size]), optional [i64 indices] as 0/1]";

/// The described operands of a registry call spec of `op` (see [`SPEC_INPUTS`]).
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<Vec<Operand>, OpError> {
    let paged = op == OP_PAGED;
    let name = if paged { OP_PAGED } else { OP };
    let (kd, cd) = match shapes {
        [a, b] | [a, b, _] if a.len() == 3 && b.len() == 2 => (a, b),
        _ => {
            return Err(OpError::Unsupported {
                op: name,
                what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
            });
        }
    };
    let it = if shapes.get(2).and_then(|f| f.first()).copied().unwrap_or(0) != 0 {
        ScalarType::I64
    } else {
        ScalarType::I32
    };
    let (t, hkv, d) = (kd[0], kd[1], kd[2]);
    let d_ = Operand::described;
    let mut ops = vec![d_("k", 0, dt, &[t, hkv, d]), d_("v", 1, dt, &[t, hkv, d])];
    let cache = if paged {
        ops.push(d_("slot_mapping", 2, it, &[t]));
        vec![cd[0], cd[1], hkv, d]
    } else {
        ops.push(d_("batch", 2, it, &[t]));
        ops.push(d_("pos", 3, it, &[t]));
        vec![cd[0], hkv, cd[1], d]
    };
    let n = ops.len();
    ops.push(d_("k_cache", n, dt, &cache));
    ops.push(d_("v_cache", n + 1, dt, &cache));
    Ok(ops)
}

/// The calls the catalog compiles and the runner checks and benchmarks: a prefill-sized paged write
/// (bf16, T = 16384, 8 heads of 128, the bandwidth bench), decode (T = 8, i64 slots), a contiguous
/// cache in f16 and a ragged f32 one (D = 80).
pub fn representative_calls() -> Vec<CallSpec> {
    let c = |op: &str, dt: &str, a: &[i64], b: &[i64], f: &[i64]| {
        CallSpec::new(op, dt, &[a, b, f], false)
    };
    vec![
        c(OP_PAGED, "bf16", &[16384, 8, 128], &[2048, 16], &[0]),
        c(OP_PAGED, "bf16", &[8, 8, 128], &[512, 16], &[1]),
        c(OP, "f16", &[1000, 4, 64], &[4, 512], &[0]),
        c(OP, "f32", &[77, 3, 80], &[3, 100], &[1]),
    ]
}
