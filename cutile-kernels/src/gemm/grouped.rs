//! Grouped GEMM ([`grouped_gemm`]): `G` products of ragged row counts in one persistent launch, the
//! 2-D × 3-D case of `torch._grouped_mm(a, b, offs=offs)` and the shape of MoE expert GEMMs.
//! `a: [total_m, k]` holds the rows of all groups one after the other, `b: [G, k, n]` one matrix per
//! group (any strides: `w.transpose(1, 2)` of `[G, n, k]` weights is a view), `c: [total_m, n]`;
//! group `g` owns rows `offs[g - 1] .. offs[g]` (`offs[-1] = 0`; host cumulative end rows, as torch's
//! `offs`; empty groups allowed).
//!
//! This module owns the validation, the work table (per group: its items, first global row tile and
//! row range; uploaded stream-ordered into the stream's scratch, operand 3), the launch plan, the
//! registry's call encoding ([`described_call`]) and the CPU reference. The kernel and its schedule
//! are in `dsl_grouped.rs`.

use cutile::launch::{Pending, TensorArg, TensorArgMut};
use cutile::runtime::Stream;
use cutile_ir::ScalarType;

use super::{GemmOptions, config, expect_dtype, product_types};
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div};

pub use super::dsl_grouped::kernels as grouped_kernels;

/// The op's name.
pub const OP: &str = "grouped_gemm";

/// What a registry call spec of [`OP`] lists: `[[total_m, k], [G, k, n], [m_0, …, m_{G-1}]]` and an
/// optional `[1]`: `b` is passed as the `transpose(1, 2)` view of a contiguous `[G, n, k]`.
pub const SPEC_INPUTS: &str =
    "[[total_m, k], [G, k, n], group_rows] or with a 4th [1]: b = [G, n, k].transpose(1, 2)";

/// Rows of the work table (see `dsl_grouped.rs`).
const TABLE_ROWS: i64 = 5;

/// The work table of a call (host side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Entries per row (`G` padded to a multiple of the kernel's search chunk).
    pub padded: i64,
    /// Items (one row tile × one column tile of one group) of the whole call.
    pub items: i64,
    /// `TABLE_ROWS × padded` i32 entries, row-major.
    pub data: Vec<i32>,
}

/// The row tiles and items of each group for `bm`-row tiles and `tiles_n` column tiles, as the table
/// the kernel reads, or why it cannot be indexed with i32.
pub fn work_table(offsets: &[usize], bm: i64, tiles_n: i64) -> Result<Table, OpError> {
    let g = offsets.len() as i64;
    let chunk = i64::from(grouped_kernels::CHUNK);
    let padded = ceil_div(g.max(1), chunk) * chunk;
    let p = padded as usize;
    let mut data = vec![0i32; TABLE_ROWS as usize * p];
    data[..p].fill(i32::MAX);
    let too_big = |what: &str| OpError::Unsupported {
        op: OP,
        what: format!("{what} exceeds the kernel's i32 indices"),
    };
    let mut items = 0i64;
    let mut start = 0i64;
    for (i, &end) in offsets.iter().enumerate() {
        let end = end as i64;
        let (first, count) = if end > start {
            let first = start / bm;
            (first, ceil_div(end, bm) - first)
        } else {
            (start / bm, 0)
        };
        let begin = items;
        items += count * tiles_n;
        let as_i32 = |v: i64, what: &str| i32::try_from(v).map_err(|_| too_big(what));
        data[i] = as_i32(items, "the item count")?;
        data[p + i] = as_i32(begin, "the item count")?;
        data[2 * p + i] = as_i32(first, "the row tile count")?;
        data[3 * p + i] = as_i32(start, "the row count")?;
        data[4 * p + i] = as_i32(end, "the row count")?;
        start = end;
    }
    Ok(Table {
        padded,
        items,
        data,
    })
}

/// A validated call.
#[derive(Debug, Clone)]
struct Call {
    dtype: ScalarType,
    m: i64,
    n: i64,
    groups: usize,
}

fn shape_err(what: &str, left: String, right: String) -> OpError {
    OpError::Shape {
        op: OP,
        what: what.into(),
        left,
        right,
    }
}

/// Checks `a`, `b`, `c` and the offsets; `None` when there is nothing to compute (no rows or columns).
fn validate(
    a: &Operand,
    b: &Operand,
    c: &Operand,
    offsets: &[usize],
    target: &Target,
    options: &GemmOptions,
) -> Result<Option<Call>, OpError> {
    expect_dtype(OP, a, options)?;
    b.expect_same_dtype(OP, a)?;
    c.expect_same_dtype(OP, a)?;
    a.expect_rank(OP, 2)?;
    b.expect_rank(OP, 3)?;
    c.expect_rank(OP, 2)?;
    for o in [a, b, c] {
        target.expect_device(OP, o)?;
    }
    let (m, k) = (a.shape[0], a.shape[1]);
    let (groups, n) = (b.shape[0], b.shape[2]);
    if b.shape[1] != k {
        return Err(shape_err(
            "inner extents: `a`'s columns vs `b`'s rows ([G, k, n])",
            k.to_string(),
            b.shape[1].to_string(),
        ));
    }
    if c.shape != [m, n] {
        return Err(shape_err(
            "`c` must be `[a.rows, b.cols]`",
            format!("{:?}", c.shape),
            format!("{:?}", [m, n]),
        ));
    }
    if offsets.len() as i64 != groups {
        return Err(shape_err(
            "one offset per group: `offsets.len()` vs `b.shape[0]`",
            offsets.len().to_string(),
            groups.to_string(),
        ));
    }
    if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!(
                "offsets must be non-decreasing (cumulative end rows): offsets[{}] = {} < offsets[{}] = {}",
                w + 1,
                offsets[w + 1],
                w,
                offsets[w]
            ),
        });
    }
    let last = offsets.last().copied().unwrap_or(0);
    if last as i64 != m {
        return Err(shape_err(
            "the last offset must be `a`'s row count",
            last.to_string(),
            m.to_string(),
        ));
    }
    if m == 0 || n == 0 {
        return Ok(None);
    }
    if m > i32::MAX as i64 || n > i32::MAX as i64 {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("{m} x {n} outputs exceed the kernel's i32 row and column indices"),
        });
    }
    Ok(Some(Call {
        dtype: a.dtype,
        m,
        n,
        groups: offsets.len(),
    }))
}

/// `c[rows_g] = a[rows_g] @ b[g]` for every group `g` (see the module docs), queued on `stream` in
/// one launch. `offsets[g]` is group `g`'s end row (cumulative, non-decreasing, the last equal to
/// `a`'s rows); `b.shape[0]` must be `offsets.len()`. bf16/f16, and f32 as tf32 with
/// [`GemmOptions::allow_tf32`]. An empty `c` is a no-op; `k = 0` gives zeros. Operands whose rows are
/// not 16-byte aligned are read as they are (no packing: correct, slower). Not capturable in a CUDA
/// graph: the call uploads its work table with a pageable host copy.
pub fn grouped_gemm<'a>(
    stream: &'a Stream,
    a: &'a impl TensorArg,
    b: &'a impl TensorArg,
    offsets: &[usize],
    options: &GemmOptions,
    c: &'a mut impl TensorArgMut,
) -> Result<Pending<'a>, OpError> {
    let mut operands = vec![
        Operand::of("a", a),
        Operand::of("b", b),
        Operand::of("c", &*c),
    ];
    let target = Target::of(stream.device())?;
    let Some(call) = validate(
        &operands[0],
        &operands[1],
        &operands[2],
        offsets,
        &target,
        options,
    )?
    else {
        // SAFETY: nothing was queued.
        return Ok(unsafe { Pending::for_enqueued(stream) });
    };
    let cfg = config::choose(&target, call.dtype, call.m, call.n);
    let table = work_table(offsets, cfg.bm, ceil_div(call.n, cfg.bn))?;
    let scratch =
        crate::op::scratch::scratch(stream, "table", ScalarType::I32, TABLE_ROWS * table.padded)?;
    let bytes: Vec<u8> = table.data.iter().flat_map(|v| v.to_ne_bytes()).collect();
    // SAFETY: the scratch holds `TABLE_ROWS · padded` i32 (the length asked for) and is used by work
    // queued on `stream` only, in stream order; the copy runs after that work and before the launch.
    unsafe { stream.copy_to_device_async(scratch.ptr, &bytes) }?;
    operands.push(scratch);
    let launches = launches(&operands, &call, &table, &target)?;
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively), and the
    // stream's scratch buffer, which lives until process exit.
    unsafe { crate::op::execute(stream, &operands, &launches) }
}

/// The launch of a call without a device: `operands` = `[a, b, c]` (a described `table` operand is
/// appended, returned with the plan) and the group end rows `offsets`.
pub fn plan(
    operands: &[Operand],
    offsets: &[usize],
    target: &Target,
    options: &GemmOptions,
) -> Result<(Vec<Operand>, Vec<PlannedLaunch>), OpError> {
    let [a, b, c] = operands else {
        return Err(OpError::Unsupported {
            op: OP,
            what: format!("takes 3 tensors (a, b, c), got {}", operands.len()),
        });
    };
    let mut ops = operands.to_vec();
    let Some(call) = validate(a, b, c, offsets, target, options)? else {
        return Ok((ops, Vec::new()));
    };
    let cfg = config::choose(target, call.dtype, call.m, call.n);
    let table = work_table(offsets, cfg.bm, ceil_div(call.n, cfg.bn))?;
    ops.push(Operand::described(
        "table",
        3,
        ScalarType::I32,
        &[TABLE_ROWS * table.padded],
    ));
    let launches = launches(&ops, &call, &table, target)?;
    Ok((ops, launches))
}

fn launches(
    operands: &[Operand],
    call: &Call,
    table: &Table,
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    if table.items == 0 {
        return Ok(Vec::new());
    }
    let cfg = config::choose(target, call.dtype, call.m, call.n);
    let kernel = kernel(cfg.bm, cfg.bk, call.dtype)?;
    let grid = table.items.min(i64::from(target.sm_count)).max(1) as u32;
    let items = i32::try_from(table.items).map_err(|_| OpError::Unsupported {
        op: OP,
        what: format!("{} work items exceed i32", table.items),
    })?;
    Ok(vec![PlannedLaunch {
        kernel,
        args: vec![
            PlannedArg::whole(0, &operands[0], false),
            PlannedArg::whole(1, &operands[1], false),
            PlannedArg::whole(3, &operands[3], false),
            PlannedArg::I32(items),
            PlannedArg::whole(2, &operands[2], true),
        ],
        grid: Some((grid, 1, 1)),
        config: format!(
            "grouped_gemm {}x{}x{} G={} items={}",
            cfg.bm, cfg.bn, cfg.bk, call.groups, table.items
        ),
    }])
}

fn kernel(bm: i64, bk: i64, dtype: ScalarType) -> Result<cutile::dsl::Kernel, OpError> {
    use grouped_kernels as k;
    product_types!(dtype, |E, M| match (bm, bk) {
        (128, 64) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 64>()),
        (64, 64) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 64>()),
        (128, 32) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 32>()),
        (64, 32) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 32>()),
        _ => None,
    })
    .flatten()
    .ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!("no {dtype} grouped kernel with {bm}-row, {bk}-deep tiles"),
    })
}

/// Cumulative end rows of groups of `rows` rows each.
pub fn offsets_of(rows: &[usize]) -> Vec<usize> {
    rows.iter()
        .scan(0usize, |s, &r| {
            *s += r;
            Some(*s)
        })
        .collect()
}

/// Whether a registry call spec's `b` is the transposed view (a 4th shape `[1]`).
pub fn spec_transposed(shapes: &[Vec<i64>]) -> bool {
    shapes.get(3).is_some_and(|t| t.as_slice() == [1])
}

/// A registry call spec decoded: the described `[a, b, c]` (with `b`'s strides when it is the
/// transposed view) and the group end rows.
pub fn described_call(
    dtype: ScalarType,
    shapes: &[Vec<i64>],
) -> Result<(Vec<Operand>, Vec<usize>), OpError> {
    let bad = || OpError::Unsupported {
        op: OP,
        what: format!("a call spec lists {SPEC_INPUTS}, got {shapes:?}"),
    };
    let (a, b, rows, transposed) = match shapes {
        [a, b, rows] => (a, b, rows, false),
        [a, b, rows, t] if t.as_slice() == [1] => (a, b, rows, true),
        [a, b, rows, t] if t.as_slice() == [0] => (a, b, rows, false),
        _ => return Err(bad()),
    };
    let ([m, _], [_, bk, n]) = (a.as_slice(), b.as_slice()) else {
        return Err(bad());
    };
    let rows: Vec<usize> = rows
        .iter()
        .map(|&r| usize::try_from(r))
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let mut bo = Operand::described("b", 1, dtype, b);
    if transposed {
        // Storage `[G, n, k]` contiguous, seen as `[G, k, n]`.
        bo.strides = vec![n * bk, 1, *bk];
    }
    let ops = vec![
        Operand::described("a", 0, dtype, a),
        bo,
        Operand::described("c", 2, dtype, &[*m, *n]),
    ];
    Ok((ops, offsets_of(&rows)))
}

/// The group row counts of a benchmark or check call: `groups` ragged sizes summing to `total`
/// (between half and one and a half times the mean, deterministic).
pub fn ragged_rows(groups: usize, total: usize) -> Vec<i64> {
    crate::attention::ragged_lengths(groups, total)
}

/// The calls the catalog compiles and the GPU runner checks and benchmarks: 8 ragged groups of
/// 8192 and 16384 rows in all at k = n = 4096 (the benchmark; the plain GEMMs of the same
/// totals are the harness's `grouped_benches`), and two small ragged calls the runner checks (one
/// with the transposed-weight view), with empty and one-row groups.
pub fn representative_calls() -> Vec<crate::op::CallSpec> {
    let c = |dtype: &str, shapes: Vec<Vec<i64>>| crate::op::CallSpec {
        op: OP.into(),
        dtype: dtype.into(),
        shapes,
        causal: false,
    };
    let mut out = Vec::new();
    for total in [8192usize, 16384] {
        out.push(c(
            "bf16",
            vec![
                vec![total as i64, 4096],
                vec![8, 4096, 4096],
                ragged_rows(8, total),
            ],
        ));
    }
    // Checks (ragged, so the runner checks them): b as the transposed view of [G, n, k] with an
    // empty and a one-row group, and f16 with groups off every tile boundary.
    out.push(c(
        "bf16",
        vec![
            vec![300, 200],
            vec![4, 200, 136],
            vec![0, 1, 150, 149],
            vec![1],
        ],
    ));
    out.push(c(
        "f16",
        vec![vec![301, 72], vec![5, 72, 200], vec![0, 130, 1, 0, 170]],
    ));
    out
}

/// CPU reference: `c[rows_g] = a[rows_g] @ b[g]` with `a: [m, k]`, `b: [G, k, n]` (logical row-major
/// values), group `g` ending at row `offsets[g]`. Rows outside every group (none for valid offsets)
/// stay zero.
pub fn grouped_gemm_reference(
    a: &[f32],
    b: &[f32],
    offsets: &[usize],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    let mut start = 0usize;
    for (g, &end) in offsets.iter().enumerate() {
        let end = end.min(m);
        if end > start {
            let rows = end - start;
            let part = super::gemm_reference(
                &a[start * k..end * k],
                &b[g * k * n..(g + 1) * k * n],
                rows,
                n,
                k,
            );
            c[start * n..end * n].copy_from_slice(&part);
        }
        start = start.max(end);
    }
    c
}
