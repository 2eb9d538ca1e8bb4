//! Host side of the prefill variants: bottom-right causal alignment, a left sliding window, logit
//! soft-capping, per-head sink logits, the log-sum-exp output, and packed variable-length batches
//! ([`attention_varlen`]). Validation, the choice between the plain dense kernels and the variant
//! kernels ([`kernels::attention_prefill`], [`kernels::attention_varlen`]), and their launch plans.
//!
//! Only what changes the key-tile loop is a compile-time specialization (`CAUSAL`, `SOFTCAP`, and
//! `LSE` for the extra store); the window, cap, scale, position shift and whether sinks are read are
//! run-time scalars. Absent optional tensors (sinks, LSE) are passed as a one-element view of the
//! stream's scratch buffer whose value the kernel never uses (the sink load is clamped onto it and
//! dropped unless `sinks_on` is 1) and never writes (`LSE` false).

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use super::{AttentionOptions, DTYPES, config, kernels};
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div, mma_kernel};

/// The dense variant op's registry name.
pub const PREFILL_OP: &str = "attention_prefill";
/// The variable-length op's registry name.
pub const VARLEN_OP: &str = "attention_varlen";

/// `window` value the kernels take as "no window" (every position is ≥ `pos - 2³⁰`).
pub(crate) const NO_WINDOW: i32 = 1 << 30;
/// Largest window, position offset and sequence length the variant kernels take (positions stay
/// within i32 with the disabled window subtracted).
pub const MAX_EXTENT: i64 = 1 << 29;

/// The optional tensors of a variant call.
#[allow(missing_debug_implementations)]
pub struct Extras<'a> {
    /// `[H]` f32 sink logits (one per query head): each joins its head's softmax denominator as an
    /// extra logit (unscaled) and contributes no value.
    pub sinks: Option<&'a dyn TensorArg>,
    /// Output `[B, H, S_q]` (dense 4-D), `[BH, S_q]` (dense 3-D) or `[H, total_q]` (varlen) f32: the
    /// natural log of each row's softmax denominator (sink included); -inf for a row that sees no key
    /// and has no sink.
    pub lse: Option<&'a mut dyn TensorArgMut>,
}

impl<'a> Extras<'a> {
    /// No sinks, no LSE.
    pub fn none() -> Extras<'a> {
        Extras {
            sinks: None,
            lse: None,
        }
    }
}

/// Run-time knobs of the variant kernels, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Knobs {
    scale: f32,
    shift: i32,
    bottom_right: bool,
    window: i32,
    softcap: Option<f32>,
}

fn unsupported(op: &'static str, what: impl Into<String>) -> OpError {
    OpError::Unsupported {
        op,
        what: what.into(),
    }
}

fn knobs(op: &'static str, o: &AttentionOptions, d: i64) -> Result<Knobs, OpError> {
    let scale = o.scale.unwrap_or(1.0 / (d as f32).sqrt());
    if !(scale.is_finite() && scale > 0.0) {
        return Err(unsupported(
            op,
            format!("scale must be finite and > 0, got {scale}"),
        ));
    }
    let window = match o.window {
        None => NO_WINDOW,
        Some(w) if i64::from(w) <= MAX_EXTENT => w as i32,
        Some(w) => {
            return Err(unsupported(
                op,
                format!("window {w} exceeds {MAX_EXTENT}; leave it None for no window"),
            ));
        }
    };
    if let Some(c) = o.softcap
        && !(c.is_finite() && c > 0.0)
    {
        return Err(unsupported(
            op,
            format!("softcap must be finite and > 0, got {c}"),
        ));
    }
    if o.query_offset.abs() > MAX_EXTENT {
        return Err(unsupported(
            op,
            format!("query_offset {} is outside ±{MAX_EXTENT}", o.query_offset),
        ));
    }
    Ok(Knobs {
        scale,
        shift: o.query_offset as i32,
        bottom_right: o.bottom_right,
        window,
        softcap: o.softcap,
    })
}

/// Whether a dense call needs the variant kernel (anything beyond top-left causal or none).
pub(crate) fn needs_variant(
    o: &AttentionOptions,
    seq_q: i64,
    seq_k: i64,
    sinks: bool,
    lse: bool,
) -> bool {
    let shift = o.query_offset + if o.bottom_right { seq_k - seq_q } else { 0 };
    sinks
        || lse
        || o.window.is_some()
        || o.softcap.is_some()
        || (shift != 0 && (o.causal || o.window.is_some()))
}

fn find<'o>(ops: &'o [Operand], name: &str) -> Option<(usize, &'o Operand)> {
    ops.iter().enumerate().find(|(_, o)| o.name == name)
}

fn need<'o>(
    op: &'static str,
    ops: &'o [Operand],
    name: &'static str,
) -> Result<(usize, &'o Operand), OpError> {
    find(ops, name).ok_or_else(|| unsupported(op, format!("the call has no `{name}` operand")))
}

fn check_f32(op: &'static str, t: &Operand, shape: &[i64], what: &str) -> Result<(), OpError> {
    t.expect_dtype(op, &[ScalarType::F32])?;
    if t.shape != shape {
        return Err(OpError::Shape {
            op,
            what: format!("`{}` must be {what}", t.name),
            left: format!("{:?}", t.shape),
            right: format!("{shape:?}"),
        });
    }
    Ok(())
}

fn shape_err(op: &'static str, what: &str, l: i64, r: i64) -> OpError {
    OpError::Shape {
        op,
        what: what.into(),
        left: l.to_string(),
        right: r.to_string(),
    }
}

/// The variant kernel for (dtype, D, causal, softcap, lse), `varlen` or dense.
fn kernel(
    op: &'static str,
    dtype: ScalarType,
    d: i64,
    causal: bool,
    softcap: bool,
    lse: bool,
    varlen: bool,
) -> Result<cutile::dsl::Kernel, OpError> {
    use kernels as k;
    macro_rules! pick {
        ($k:ident) => {
            mma_kernel!(dtype, |E| match (d, causal, softcap, lse) {
                (64, false, false, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, false, false, false>()),
                (64, false, false, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, false, false, true>()),
                (64, false, true, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, false, true, false>()),
                (64, false, true, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, false, true, true>()),
                (64, true, false, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, true, false, false>()),
                (64, true, false, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, true, false, true>()),
                (64, true, true, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 64, true, true, false>()),
                (64, true, true, true) => Some(k::$k::kernel::<E, 64, 128, 64, true, true, true>()),
                (128, false, false, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, false, false, false>()),
                (128, false, false, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, false, false, true>()),
                (128, false, true, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, false, true, false>()),
                (128, false, true, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, false, true, true>()),
                (128, true, false, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, true, false, false>()),
                (128, true, false, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, true, false, true>()),
                (128, true, true, false) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, true, true, false>()),
                (128, true, true, true) =>
                    Some(k::$k::kernel::<E, 64, 128, 128, true, true, true>()),
                _ => None,
            })
            .flatten()
        };
    }
    let cfg = config::choose(d);
    let found = if (cfg.bm, cfg.bn) != (64, 128) {
        None
    } else if varlen {
        pick!(attention_varlen)
    } else {
        pick!(attention_prefill)
    };
    found.ok_or_else(|| {
        unsupported(
            op,
            format!("no {dtype} variant kernel for head dimension {d}"),
        )
    })
}

fn scalars(k: &Knobs, sinks_on: bool) -> Vec<PlannedArg> {
    vec![
        PlannedArg::F32(k.scale),
        PlannedArg::I32(k.shift),
        PlannedArg::I32(i32::from(k.bottom_right)),
        PlannedArg::I32(k.window),
        PlannedArg::F32(k.softcap.unwrap_or(1.0)),
        PlannedArg::I32(i32::from(sinks_on)),
    ]
}

/// A view of operand `i` with `shape`/`strides`.
fn view(i: usize, output: bool, shape: Vec<i64>, strides: Vec<i64>) -> PlannedArg {
    PlannedArg::Tensor {
        operand: i,
        output,
        shape,
        strides,
        offset: 0,
    }
}

/// The one-element stand-in for an absent sinks or LSE tensor (operand `unused`).
fn unused_view(ops: &[Operand], output: bool) -> Result<PlannedArg, OpError> {
    let (i, _) = find(ops, "unused").ok_or_else(|| {
        unsupported(
            PREFILL_OP,
            "an absent sinks/lse tensor needs the one-element `unused` operand (see `with_unused`)",
        )
    })?;
    Ok(view(i, output, vec![1], vec![1]))
}

/// Whether a call with these operands needs the `unused` stand-in operand.
fn lacks_extras(ops: &[Operand]) -> bool {
    find(ops, "sinks").is_none() || find(ops, "lse").is_none()
}

/// `operands` plus, when sinks or LSE is absent, a described one-element f32 `unused` operand (what the
/// real call takes from the stream's scratch), for planning without a device.
pub fn with_unused(operands: &[Operand]) -> Vec<Operand> {
    let mut out = operands.to_vec();
    if lacks_extras(operands) && find(operands, "unused").is_none() {
        out.push(Operand::described(
            "unused",
            out.len(),
            ScalarType::F32,
            &[1],
        ));
    }
    out
}

/// The launches of a dense variant call. `operands` are named `q`, `k`, `v`, `o` (as for
/// [`super::plan`]), optionally `sinks` and `lse`, and `unused` when one of those is absent (see
/// [`with_unused`]). Plain calls (no variant) plan the dense kernels of [`super::plan`].
pub fn plan_prefill(
    operands: &[Operand],
    target: &Target,
    options: &AttentionOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = PREFILL_OP;
    let (_, q) = need(op, operands, "q")?;
    let (_, k) = need(op, operands, "k")?;
    let sinks = find(operands, "sinks");
    let lse = find(operands, "lse");
    let rank = q.rank();
    let (sq, sk) = (
        q.shape.get(rank.wrapping_sub(2)).copied().unwrap_or(0),
        k.shape.get(rank.wrapping_sub(2)).copied().unwrap_or(0),
    );
    if !needs_variant(options, sq, sk, sinks.is_some(), lse.is_some()) {
        let base: Vec<Operand> = ["q", "k", "v", "o"]
            .iter()
            .map(|n| need(op, operands, n).map(|(_, o)| o.clone()))
            .collect::<Result<_, _>>()?;
        let plain = AttentionOptions {
            causal: options.causal,
            scale: options.scale,
            ..Default::default()
        };
        return super::plan(&base, target, &plain, false);
    }
    let base: Vec<Operand> = ["q", "k", "v", "o"]
        .iter()
        .map(|n| need(op, operands, n).map(|(_, o)| o.clone()))
        .collect::<Result<_, _>>()?;
    // Shapes, dtypes, devices, head dimension and GQA as the plain op checks them.
    let Some(call) = super::Call::new(&base, target, options)? else {
        return Ok(Vec::new());
    };
    let d = call.d;
    let kn = knobs(op, options, d)?;
    let [q, k, v, o] = &call.ops;
    // [B, H, S, D] (or [BH, S, D] as H = 1) viewed as [B, S, H, D].
    let as_bshd = |t: &Operand| -> (Vec<i64>, Vec<i64>) {
        if t.rank() == 4 {
            let (s, st) = (&t.shape, &t.strides);
            (
                vec![s[0], s[2], s[1], s[3]],
                vec![st[0], st[2], st[1], st[3]],
            )
        } else {
            let (s, st) = (&t.shape, &t.strides);
            (vec![s[0], s[1], 1, s[2]], vec![st[0], st[1], st[0], st[2]])
        }
    };
    let (b, h) = if rank == 4 {
        (q.shape[0], q.shape[1])
    } else {
        (q.shape[0], 1)
    };
    for (name, len) in [("seq_q", sq), ("seq_k", sk)] {
        if len > MAX_EXTENT {
            return Err(unsupported(
                op,
                format!("{name} {len} exceeds {MAX_EXTENT}"),
            ));
        }
    }
    let sinks_arg = match sinks {
        Some((i, s)) => {
            if rank != 4 {
                return Err(OpError::Rank {
                    op,
                    arg: "q",
                    expected: "4 ([B, H, S, D]) with sinks (one per head)".into(),
                    shape: q.shape.clone(),
                });
            }
            target.expect_device(op, s)?;
            check_f32(op, s, &[h], "[H] (one sink logit per query head)")?;
            PlannedArg::whole(i, s, false)
        }
        None => unused_view(operands, false)?,
    };
    let lse_arg = match lse {
        Some((i, l)) => {
            target.expect_device(op, l)?;
            if rank == 4 {
                check_f32(op, l, &[b, h, sq], "[B, H, S_q]")?;
                PlannedArg::whole(i, l, true)
            } else {
                check_f32(op, l, &[b, sq], "[BH, S_q]")?;
                view(
                    i,
                    true,
                    vec![b, 1, sq],
                    vec![l.strides[0], l.strides[0], l.strides[1]],
                )
            }
        }
        None => unused_view(operands, true).map(|a| match a {
            PlannedArg::Tensor { operand, .. } => view(operand, true, vec![1, 1, 1], vec![1, 1, 1]),
            other => other,
        })?,
    };
    let kernel = kernel(
        op,
        call.dtype,
        d,
        options.causal,
        kn.softcap.is_some(),
        lse.is_some(),
        false,
    )?;
    let cfg = config::choose(d);
    let grid = (
        u32::try_from(b * h).map_err(|_| unsupported(op, "batch·heads exceed the grid"))?,
        u32::try_from(ceil_div(sq, cfg.bm))
            .map_err(|_| unsupported(op, "query tiles exceed the grid"))?,
        1,
    );
    let idx = |n: &str| find(operands, n).map(|(i, _)| i).unwrap_or(0);
    let t = |n: &str, t: &Operand, out: bool| {
        let (s, st) = as_bshd(t);
        view(idx(n), out, s, st)
    };
    let mut args = vec![
        t("q", q, false),
        t("k", k, false),
        t("v", v, false),
        sinks_arg,
    ];
    args.extend(scalars(&kn, sinks.is_some()));
    args.push(t("o", o, true));
    args.push(lse_arg);
    Ok(vec![PlannedLaunch {
        kernel,
        args,
        grid: Some(grid),
        config: format!("attention_prefill BM={} BN={}", cfg.bm, cfg.bn),
    }])
}

/// The launches of a variable-length call. `operands` are named `q` (`[total_q, H, D]`), `k`, `v`
/// (`[total_k, H_kv, D]`), `cu_seqlens_q`, `cu_seqlens_k` (`[B+1]` i32), `o` (`q`'s shape), optionally
/// `sinks` (`[H]` f32) and `lse` (`[H, total_q]` f32), and `unused` when one of those is absent.
/// `max_seqlen_q` (the longest query sequence) sizes the grid.
pub fn plan_varlen(
    operands: &[Operand],
    target: &Target,
    max_seqlen_q: i64,
    options: &AttentionOptions,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let op = VARLEN_OP;
    let (iq, q) = need(op, operands, "q")?;
    let (ik, k) = need(op, operands, "k")?;
    let (iv, v) = need(op, operands, "v")?;
    let (io, o) = need(op, operands, "o")?;
    let (icq, cq) = need(op, operands, "cu_seqlens_q")?;
    let (ick, ck) = need(op, operands, "cu_seqlens_k")?;
    q.expect_dtype(op, DTYPES)?;
    for t in [k, v, o] {
        t.expect_same_dtype(op, q)?;
    }
    for t in [q, k, v, o, cq, ck] {
        target.expect_device(op, t)?;
    }
    for t in [q, k, v, o] {
        if t.rank() != 3 {
            return Err(OpError::Rank {
                op,
                arg: t.name,
                expected: "3 ([total_tokens, heads, D])".into(),
                shape: t.shape.clone(),
            });
        }
    }
    o.expect_same_shape(op, q)?;
    v.expect_same_shape(op, k)?;
    for t in [cq, ck] {
        t.expect_dtype(op, &[ScalarType::I32])?;
        t.expect_rank(op, 1)?;
        if t.shape[0] < 1 {
            return Err(unsupported(
                op,
                format!("`{}` must hold B+1 ≥ 1 offsets", t.name),
            ));
        }
    }
    if cq.shape != ck.shape {
        return Err(shape_err(
            op,
            "`cu_seqlens_k` length vs `cu_seqlens_q`'s (B+1)",
            ck.shape[0],
            cq.shape[0],
        ));
    }
    let d = q.shape[2];
    if !config::HEAD_DIMS.contains(&d) {
        return Err(unsupported(
            op,
            format!(
                "head dimension {d}; the kernels take {:?}",
                config::HEAD_DIMS
            ),
        ));
    }
    if k.shape[2] != d {
        return Err(shape_err(
            op,
            "`k`'s head dimension vs `q`'s",
            k.shape[2],
            d,
        ));
    }
    let (h, hkv) = (q.shape[1], k.shape[1]);
    if hkv == 0 || h % hkv != 0 {
        return Err(shape_err(
            op,
            "`k`'s heads must divide `q`'s heads (grouped-query attention)",
            hkv,
            h,
        ));
    }
    if max_seqlen_q < 0 || max_seqlen_q > q.shape[0].max(0) {
        return Err(shape_err(
            op,
            "max_seqlen_q must be in 0 ..= total_q",
            max_seqlen_q,
            q.shape[0],
        ));
    }
    for (name, len) in [("total_q", q.shape[0]), ("total_k", k.shape[0])] {
        if len > MAX_EXTENT {
            return Err(unsupported(
                op,
                format!("{name} {len} exceeds {MAX_EXTENT}"),
            ));
        }
    }
    let kn = knobs(op, options, d)?;
    let batch = cq.shape[0] - 1;
    let sinks = find(operands, "sinks");
    let lse = find(operands, "lse");
    let sinks_arg = match sinks {
        Some((i, s)) => {
            target.expect_device(op, s)?;
            check_f32(op, s, &[h], "[H] (one sink logit per query head)")?;
            PlannedArg::whole(i, s, false)
        }
        None => unused_view(operands, false)?,
    };
    let lse_arg = match lse {
        Some((i, l)) => {
            target.expect_device(op, l)?;
            check_f32(op, l, &[h, q.shape[0]], "[H, total_q]")?;
            PlannedArg::whole(i, l, true)
        }
        None => unused_view(operands, true).map(|a| match a {
            PlannedArg::Tensor { operand, .. } => view(operand, true, vec![1, 1], vec![1, 1]),
            other => other,
        })?,
    };
    if batch == 0 || max_seqlen_q == 0 || h == 0 || q.numel() == 0 {
        return Ok(Vec::new());
    }
    let kernel = kernel(
        op,
        q.dtype,
        d,
        options.causal,
        kn.softcap.is_some(),
        lse.is_some(),
        true,
    )?;
    let cfg = config::choose(d);
    let grid = (
        u32::try_from(ceil_div(max_seqlen_q, cfg.bm))
            .map_err(|_| unsupported(op, "query tiles exceed the grid"))?,
        u32::try_from(h)
            .ok()
            .filter(|&x| x <= 65535)
            .ok_or_else(|| {
                unsupported(op, format!("{h} heads exceed the grid's y extent (65535)"))
            })?,
        u32::try_from(batch)
            .ok()
            .filter(|&x| x <= 65535)
            .ok_or_else(|| {
                unsupported(
                    op,
                    format!("{batch} sequences exceed the grid's z extent (65535)"),
                )
            })?,
    );
    let mut args = vec![
        PlannedArg::whole(iq, q, false),
        // With no key at all (every sequence's key count 0) the kernel visits no key tile: a one-row
        // view keeps the arguments non-empty.
        kv_view(ik, k),
        kv_view(iv, v),
        PlannedArg::whole(icq, cq, false),
        PlannedArg::whole(ick, ck, false),
        sinks_arg,
    ];
    args.extend(scalars(&kn, sinks.is_some()));
    args.push(PlannedArg::whole(io, o, true));
    args.push(lse_arg);
    Ok(vec![PlannedLaunch {
        kernel,
        args,
        grid: Some(grid),
        config: format!("attention_varlen BM={} BN={}", cfg.bm, cfg.bn),
    }])
}

/// `k`/`v` of a varlen call as the kernel takes them: at least one row (never read when there is none).
fn kv_view(i: usize, t: &Operand) -> PlannedArg {
    let mut shape = t.shape.clone();
    shape[0] = shape[0].max(1);
    view(i, false, shape, t.strides.clone())
}

/// Appends the call's operands: `sinks`, `lse` when given, and the scratch stand-in when one is absent.
fn push_extras(
    stream: &Stream,
    operands: &mut Vec<Operand>,
    extras: &Extras<'_>,
) -> Result<(), OpError> {
    if let Some(s) = extras.sinks {
        operands.push(Operand::of("sinks", s));
    }
    if let Some(l) = extras.lse.as_deref() {
        operands.push(Operand::of("lse", l));
    }
    if lacks_extras(operands) {
        operands.push(crate::op::scratch::scratch(
            stream,
            "unused",
            ScalarType::F32,
            1,
        )?);
    }
    Ok(())
}

/// `o = attention(q, k, v)` with the prefill variants of `options` (bottom-right alignment, window,
/// soft-cap, position offset) and the optional `extras` (sinks, LSE output), queued on `stream`.
/// Layouts as [`super::attention`]; sinks need the 4-D layout. A call with no variant runs the plain
/// kernels.
pub fn attention_with<'a>(
    stream: &'a Stream,
    q: &'a impl TensorArg,
    k: &'a impl TensorArg,
    v: &'a impl TensorArg,
    options: &AttentionOptions,
    extras: Extras<'a>,
    o: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("q", q),
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("o", &*o),
    ];
    push_extras(stream, &mut operands, &extras)?;
    let target = Target::of(stream.device())?;
    let plan = plan_prefill(&operands, &target, options)?;
    // SAFETY: the operands come from the caller's tensors (and the stream's scratch), borrowed for 'a.
    unsafe { crate::op::execute(stream, &operands, &plan) }
}

/// Attention over a packed variable-length batch, queued on `stream`: `q`/`o` `[total_q, H, D]`, `k`/`v`
/// `[total_k, H_kv, D]` (`H_kv` dividing `H`), `cu_seqlens_q`/`cu_seqlens_k` `[B+1]` i32 on the device
/// (sequence `b` is rows `cu[b] .. cu[b+1]`; non-decreasing, from 0, ending at most at the total),
/// `max_seqlen_q` at least the longest query sequence (it sizes the grid; blocks past a sequence's end
/// exit). Every option of [`AttentionOptions`] applies per sequence (`bottom_right` aligns each
/// sequence's queries to the end of its keys). Empty sequences give nothing; a query row that sees no
/// key gives 0 (LSE -inf).
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen<'a>(
    stream: &'a Stream,
    q: &'a impl TensorArg,
    k: &'a impl TensorArg,
    v: &'a impl TensorArg,
    cu_seqlens_q: &'a impl TensorArg,
    cu_seqlens_k: &'a impl TensorArg,
    max_seqlen_q: usize,
    options: &AttentionOptions,
    extras: Extras<'a>,
    o: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("q", q),
        Operand::of("k", k),
        Operand::of("v", v),
        Operand::of("cu_seqlens_q", cu_seqlens_q),
        Operand::of("cu_seqlens_k", cu_seqlens_k),
        Operand::of("o", &*o),
    ];
    push_extras(stream, &mut operands, &extras)?;
    let target = Target::of(stream.device())?;
    let max = i64::try_from(max_seqlen_q).unwrap_or(i64::MAX);
    let plan = plan_varlen(&operands, &target, max, options)?;
    // SAFETY: as in `attention_with`.
    unsafe { crate::op::execute(stream, &operands, &plan) }
}

/// What a registry call spec of the variant ops lists after the tensor shapes: the flags
/// `[bottom_right, window (-1: none), softcap·1000 (0: none), query_offset, sinks, lse]`.
pub const FLAGS_DOC: &str =
    "[bottom_right, window (-1 none), softcap x1000 (0 none), query_offset, sinks 0/1, lse 0/1]";

/// Registry inputs of [`PREFILL_OP`].
pub const PREFILL_INPUTS: &str =
    "[q [B, H, S_q, D], k [B, H_kv, S_k, D], flags] (flags: see attention::FLAGS_DOC)";
/// Registry inputs of [`VARLEN_OP`].
pub const VARLEN_INPUTS: &str = "[[H, H_kv, D], seqlens_q, seqlens_k, flags] (per-sequence lengths; flags: see attention::FLAGS_DOC)";

/// The flags vector of a call spec for `options` with or without sinks and LSE.
pub fn spec_flags(options: &AttentionOptions, sinks: bool, lse: bool) -> Vec<i64> {
    vec![
        i64::from(options.bottom_right),
        options.window.map_or(-1, i64::from),
        options.softcap.map_or(0, |c| (c * 1000.0).round() as i64),
        options.query_offset,
        i64::from(sinks),
        i64::from(lse),
    ]
}

/// A variant call decoded from a registry call spec.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantCall {
    pub options: AttentionOptions,
    pub sinks: bool,
    pub lse: bool,
    /// Varlen only: the batch's lengths.
    pub batch: Option<super::VarlenBatch>,
    /// Varlen only: `[H, H_kv, D]`.
    pub heads: [i64; 3],
}

fn decode_flags(
    op: &'static str,
    causal: bool,
    f: Option<&Vec<i64>>,
) -> Result<(AttentionOptions, bool, bool), OpError> {
    let f = match f {
        None => vec![0, -1, 0, 0, 0, 0],
        Some(f) if f.len() == 6 => f.clone(),
        Some(f) => {
            return Err(unsupported(
                op,
                format!("flags must be {FLAGS_DOC}, got {f:?}"),
            ));
        }
    };
    let window = match f[1] {
        -1 => None,
        w => Some(u32::try_from(w).map_err(|_| unsupported(op, format!("window {w}")))?),
    };
    let options = AttentionOptions {
        causal,
        scale: None,
        bottom_right: f[0] != 0,
        window,
        softcap: (f[2] != 0).then(|| f[2] as f32 / 1000.0),
        query_offset: f[3],
    };
    Ok((options, f[4] != 0, f[5] != 0))
}

/// The described operands (named as [`plan_prefill`] / [`plan_varlen`] take them, the `unused`
/// stand-in included), the decoded call and `max_seqlen_q` of a registry call spec of either variant op.
pub fn described_call(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
    causal: bool,
) -> Result<(Vec<Operand>, VariantCall, i64), OpError> {
    let d = |name: &'static str, i: usize, dt: ScalarType, s: &[i64]| {
        Operand::described(name, i, dt, s)
    };
    if op == PREFILL_OP {
        let (q, k) = match shapes {
            [q, k] | [q, k, _] => (q, k),
            _ => {
                return Err(unsupported(
                    PREFILL_OP,
                    format!("a call spec lists {PREFILL_INPUTS}, got {shapes:?}"),
                ));
            }
        };
        let (options, sinks, lse) = decode_flags(PREFILL_OP, causal, shapes.get(2))?;
        let mut ops = vec![
            d("q", 0, dt, q),
            d("k", 1, dt, k),
            d("v", 2, dt, k),
            d("o", 3, dt, q),
        ];
        let rank = q.len();
        if sinks {
            ops.push(d("sinks", ops.len(), ScalarType::F32, &q[1..2.min(rank)]));
        }
        if lse {
            ops.push(d(
                "lse",
                ops.len(),
                ScalarType::F32,
                &q[..rank.saturating_sub(1)],
            ));
        }
        let ops = with_unused(&ops);
        let call = VariantCall {
            options,
            sinks,
            lse,
            batch: None,
            heads: [0; 3],
        };
        return Ok((ops, call, 0));
    }
    let [heads, lq, lk, rest @ ..] = shapes else {
        return Err(unsupported(
            VARLEN_OP,
            format!("a call spec lists {VARLEN_INPUTS}, got {shapes:?}"),
        ));
    };
    let (options, sinks, lse) = decode_flags(VARLEN_OP, causal, rest.first())?;
    let [h, hkv, hd] = heads[..] else {
        return Err(unsupported(
            VARLEN_OP,
            format!("heads must be [H, H_kv, D], got {heads:?}"),
        ));
    };
    let lens = |l: &[i64]| -> Result<Vec<usize>, OpError> {
        l.iter()
            .map(|&x| {
                usize::try_from(x)
                    .map_err(|_| unsupported(VARLEN_OP, format!("negative length {x}")))
            })
            .collect()
    };
    let batch = super::VarlenBatch {
        seqlens_q: lens(lq)?,
        seqlens_k: lens(lk)?,
    };
    if batch.seqlens_q.len() != batch.seqlens_k.len() {
        return Err(shape_err(
            VARLEN_OP,
            "number of key vs query sequences",
            lk.len() as i64,
            lq.len() as i64,
        ));
    }
    let (tq, tk, b) = (
        batch.total_q() as i64,
        batch.total_k() as i64,
        lq.len() as i64,
    );
    let mut ops = vec![
        d("q", 0, dt, &[tq, h, hd]),
        d("k", 1, dt, &[tk, hkv, hd]),
        d("v", 2, dt, &[tk, hkv, hd]),
        d("cu_seqlens_q", 3, ScalarType::I32, &[b + 1]),
        d("cu_seqlens_k", 4, ScalarType::I32, &[b + 1]),
        d("o", 5, dt, &[tq, h, hd]),
    ];
    if sinks {
        ops.push(d("sinks", ops.len(), ScalarType::F32, &[h]));
    }
    if lse {
        ops.push(d("lse", ops.len(), ScalarType::F32, &[h, tq]));
    }
    let ops = with_unused(&ops);
    let max = batch.max_q() as i64;
    let call = VariantCall {
        options,
        sinks,
        lse,
        batch: Some(batch),
        heads: [h, hkv, hd],
    };
    Ok((ops, call, max))
}

/// The launches of a registry call spec of either variant op, with its described operands.
pub fn plan_spec(
    op: &str,
    dt: ScalarType,
    shapes: &[Vec<i64>],
    causal: bool,
    target: &Target,
) -> Result<(Vec<Operand>, Vec<PlannedLaunch>), OpError> {
    let (ops, call, max) = described_call(op, dt, shapes, causal)?;
    let launches = if op == PREFILL_OP {
        plan_prefill(&ops, target, &call.options)?
    } else {
        plan_varlen(&ops, target, max, &call.options)?
    };
    Ok((ops, launches))
}

/// Unequal lengths summing to `total` over `n` sequences (deterministic, each a multiple of 16 when
/// `total` is, between about half and 1.5 times the mean): what the varlen benchmark runs against the
/// dense call of equal total tokens. (Multiples of 16 keep the benchmark out of the harness's ragged
/// checks, whose CPU reference would take minutes at this size; the varlen kernel's sub-views stay
/// 16-byte aligned at any starting row when a row is a multiple of 16 bytes, as `H·D` bf16 rows are.)
pub fn ragged_lengths(n: usize, total: usize) -> Vec<i64> {
    if n == 0 {
        return Vec::new();
    }
    let mean = total / n;
    let mut out: Vec<i64> = (0..n)
        .map(|i| {
            // mean · (0.5 .. 1.5), long and short mixed
            let f = 0.5 + ((i * 7919) % n) as f64 / n as f64;
            (((mean as f64 * f) as i64) / 16 * 16).max(16)
        })
        .collect();
    let diff = total as i64 - out.iter().sum::<i64>();
    out[n - 1] += diff;
    out
}

/// The variant calls the catalog compiles and the GPU runner checks and benchmarks: few
/// specializations (four per arch: the varlen calls of equal and unequal lengths share theirs).
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    use crate::op::CallSpec;
    let spec = |op: &str, shapes: Vec<Vec<i64>>, causal: bool| CallSpec {
        op: op.into(),
        dtype: "bf16".into(),
        shapes,
        causal,
    };
    let gpt_oss = AttentionOptions {
        causal: true,
        bottom_right: true,
        window: Some(127),
        ..Default::default()
    };
    let everything = AttentionOptions {
        causal: true,
        bottom_right: true,
        window: Some(300),
        softcap: Some(30.0),
        ..Default::default()
    };
    let ragged = ragged_lengths(16, 16384);
    vec![
        // GPT-OSS style: causal bottom-right, sliding window, sinks (no soft-cap, no LSE).
        spec(
            PREFILL_OP,
            vec![
                vec![2, 8, 777, 128],
                vec![2, 2, 1000, 128],
                spec_flags(&gpt_oss, true, false),
            ],
            true,
        ),
        // Every option at once (soft-cap and LSE are their own specialization).
        spec(
            PREFILL_OP,
            vec![
                vec![2, 8, 777, 128],
                vec![2, 2, 1000, 128],
                spec_flags(&everything, true, true),
            ],
            true,
        ),
        // Varlen at the dense benchmark's token count (B4 H32 S4096 D128), plain and causal (no
        // flags: the plain options).
        spec(
            VARLEN_OP,
            vec![vec![32, 32, 128], ragged.clone(), ragged.clone()],
            false,
        ),
        spec(
            VARLEN_OP,
            vec![vec![32, 32, 128], ragged.clone(), ragged],
            true,
        ),
        // Equal lengths: against the dense [16, 32, 1024, 128] call this is varlen's own cost (the
        // packed layout and per-sequence offsets) at the same work; the ragged calls above add the
        // partial tiles of unequal lengths.
        spec(
            VARLEN_OP,
            vec![vec![32, 32, 128], vec![1024; 16], vec![1024; 16]],
            false,
        ),
        spec(
            VARLEN_OP,
            vec![vec![32, 32, 128], vec![1024; 16], vec![1024; 16]],
            true,
        ),
    ]
}
