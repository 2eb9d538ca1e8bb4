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
use crate::op::{OpError, Operand, PlannedArg, PlannedLaunch, Target, ceil_div, tuning};

pub use super::dsl_grouped::kernels as grouped_kernels;

/// The op's name.
pub const OP: &str = "grouped_gemm";

/// What a registry call spec of [`OP`] lists: `[[total_m, k], [G, k, n], [m_0, …, m_{G-1}]]` and an
/// optional `[1]`: `b` is passed as the `transpose(1, 2)` view of a contiguous `[G, n, k]`.
pub const SPEC_INPUTS: &str =
    "[[total_m, k], [G, k, n], group_rows] or with a 4th [1]: b = [G, n, k].transpose(1, 2)";

/// Rows of the work table (see `dsl_grouped.rs`).
const TABLE_ROWS: i64 = grouped_kernels::TABLE_ROWS as i64;

/// The work table of a call (host side; the layout is in `dsl_grouped.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Entries per row: a multiple of 64, at least every list's length.
    pub padded: i64,
    /// Interior items (one row tile × one column tile, every row of the tile one group's or past the
    /// end of `c`): interior row entries × `tiles_n`.
    pub items: i64,
    /// Edge row tiles (straddling a group boundary; each an item per column tile).
    pub edges: i64,
    /// Edge entries: (edge tile, group meeting it) pairs, the products the edge items compute.
    pub edge_entries: i64,
    /// Column tiles.
    pub tiles_n: i64,
    /// `TABLE_ROWS × padded` i32 entries, row-major.
    pub data: Vec<i32>,
}

impl Table {
    /// Every item, interior and edge (the output tiles of the call).
    pub fn all_items(&self) -> i64 {
        self.items + self.edges * self.tiles_n
    }

    /// Tile products the call computes (interior items, and one per edge entry and column tile).
    pub fn products(&self) -> i64 {
        self.items + self.edge_entries * self.tiles_n
    }

    fn at(&self, row: usize, i: usize) -> i32 {
        self.data[row * self.padded as usize + i]
    }

    /// Interior row entry `j`: its group and global row tile.
    pub fn row_entry(&self, j: usize) -> (i32, i32) {
        (self.at(0, j), self.at(1, j))
    }

    /// Group `g`'s rows `start..end`.
    pub fn group_rows(&self, g: usize) -> (i32, i32) {
        (self.at(2, g), self.at(3, g))
    }

    /// Edge tile `j`: its global row tile and the groups that meet it.
    pub fn edge_tile(&self, j: usize) -> (i32, Vec<i32>) {
        let (q0, q1) = (self.at(5, j) as usize, self.at(7, j) as usize);
        (self.at(4, j), (q0..q1).map(|q| self.at(6, q)).collect())
    }
}

/// The row entries, edge tiles and items of each group for `bm`-row tiles and `tiles_n` column
/// tiles, as the table the kernel reads, or why it cannot be indexed with i32.
pub fn work_table(offsets: &[usize], bm: i64, tiles_n: i64) -> Result<Table, OpError> {
    let m = offsets.last().copied().unwrap_or(0) as i64;
    let too_big = |what: &str| OpError::Unsupported {
        op: OP,
        what: format!("{what} exceeds the kernel's i32 indices"),
    };
    let as_i32 = |v: i64, what: &str| i32::try_from(v).map_err(|_| too_big(what));
    // Interior row entries (group, global row tile) in group order; edge (tile, group) pairs in
    // tile order (groups are in row order, so a tile's groups are consecutive).
    let mut interior = Vec::new();
    let mut edge: Vec<(i64, i64)> = Vec::new();
    let mut start = 0i64;
    for (i, &end) in offsets.iter().enumerate() {
        let end = end as i64;
        if end > start {
            // Interior row tiles `lo..hi`: wholly inside the group, or the last tile of `c`
            // (clipped by the view store) when the group ends `c`.
            let lo = ceil_div(start, bm);
            let hi = if end == m {
                ceil_div(end, bm)
            } else {
                end / bm
            };
            for t in start / bm..ceil_div(end, bm) {
                if (lo..hi).contains(&t) {
                    interior.push((i as i64, t));
                } else {
                    edge.push((t, i as i64));
                }
            }
        }
        start = start.max(end);
    }
    // Edge tiles: runs of equal tiles in `edge`.
    let mut tiles: Vec<(i64, usize, usize)> = Vec::new();
    for (q, &(t, _)) in edge.iter().enumerate() {
        match tiles.last_mut() {
            Some(last) if last.0 == t => last.2 = q + 1,
            _ => tiles.push((t, q, q + 1)),
        }
    }
    let longest = [interior.len(), offsets.len(), edge.len(), tiles.len(), 1];
    let padded = ceil_div(*longest.iter().max().unwrap_or(&1) as i64, 64) * 64;
    let p = padded as usize;
    let mut data = vec![0i32; TABLE_ROWS as usize * p];
    for (j, &(g, t)) in interior.iter().enumerate() {
        data[j] = as_i32(g, "the group count")?;
        data[p + j] = as_i32(t, "the row tile count")?;
    }
    let mut start = 0i64;
    for (g, &end) in offsets.iter().enumerate() {
        data[2 * p + g] = as_i32(start, "the row count")?;
        data[3 * p + g] = as_i32(end as i64, "the row count")?;
        start = end as i64;
    }
    for (j, &(t, q0, q1)) in tiles.iter().enumerate() {
        data[4 * p + j] = as_i32(t, "the row tile count")?;
        data[5 * p + j] = as_i32(q0 as i64, "the edge entry count")?;
        data[7 * p + j] = as_i32(q1 as i64, "the edge entry count")?;
    }
    for (q, &(_, g)) in edge.iter().enumerate() {
        data[6 * p + q] = as_i32(g, "the group count")?;
    }
    let items = interior.len() as i64 * tiles_n;
    as_i32(items + tiles.len() as i64 * tiles_n, "the item count")?;
    Ok(Table {
        padded,
        items,
        edges: tiles.len() as i64,
        edge_entries: edge.len() as i64,
        tiles_n,
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
    let tables = Tables::of(offsets, call.n)?;
    let scratch = crate::op::scratch::scratch(stream, "table", ScalarType::I32, tables.len())?;
    let bytes: Vec<u8> = tables.data().iter().flat_map(|v| v.to_ne_bytes()).collect();
    // SAFETY: the scratch holds `tables.len()` i32 (the length asked for) and is used by work queued
    // on `stream` only, in stream order; the copy runs after that work and before the launch.
    unsafe { stream.copy_to_device_async(scratch.ptr, &bytes) }?;
    operands.push(scratch);
    let candidates = candidates(&target, call.dtype, call.m, call.n);
    let class = format!(
        "{} G~2^{}",
        config::class(call.dtype, call.m, call.n, operands[0].shape[1]),
        64 - (call.groups.max(1) as u64 - 1).leading_zeros()
    );
    // SAFETY: the operands come from the caller's tensors, borrowed for 'a (`c` exclusively), and the
    // stream's scratch buffer, which lives until process exit and is used by work queued on `stream`
    // only, in stream order.
    unsafe {
        tuning::run_tuned(stream, &operands, 2, OP, class, &candidates, false, |cfg| {
            launches(cfg, &operands, &call, &tables, &target)
        })
    }
}

/// The launch of a call without a device: `operands` = `[a, b, c]` (a described `table` operand is
/// appended, returned with the plan) and the group end rows `offsets`.
pub fn plan(
    operands: &[Operand],
    offsets: &[usize],
    target: &Target,
    options: &GemmOptions,
    all_candidates: bool,
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
    let tables = Tables::of(offsets, call.n)?;
    ops.push(Operand::described(
        "table",
        3,
        ScalarType::I32,
        &[tables.len()],
    ));
    let configs = if all_candidates {
        candidates(target, call.dtype, call.m, call.n)
    } else {
        vec![choose(target, call.dtype, call.m, call.n)]
    };
    let mut out = Vec::new();
    for cfg in &configs {
        out.extend(launches(cfg, &ops, &call, &tables, target)?);
    }
    Ok((ops, out))
}

/// A grouped GEMM configuration: the tile, and whether the edge items take a second launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupedConfig {
    pub bm: i64,
    pub bn: i64,
    pub bk: i64,
    /// Interior and edge items in two launches (`MODE` = `INTERIOR`, then `EDGE`) instead of one.
    pub split: bool,
}

impl tuning::Candidate for GroupedConfig {
    fn name(&self) -> String {
        format!(
            "grouped_gemm {}x{}x{}{}",
            self.bm,
            self.bn,
            self.bk,
            if self.split { " 2 launches" } else { "" }
        )
    }
}

/// Row tiles the work tables are built for (every candidate's `bm`), in their order in the scratch.
const TABLE_BMS: [i64; 2] = [128, 64];

/// The default configuration: the plain GEMM's tile for a product of the same total
/// (`config::choose` on `(total_m, n)`, persistent or not alike: the grouped kernel is always
/// persistent), interior and edge items in two launches (one when there are no edge tiles): the
/// interior kernel then compiles as the plain persistent GEMM (`dsl_grouped.rs`).
pub fn choose(target: &Target, dtype: ScalarType, m: i64, n: i64) -> GroupedConfig {
    let c = config::choose(target, dtype, m, n);
    GroupedConfig {
        bm: c.bm,
        bn: c.bn,
        bk: c.bk,
        split: true,
    }
}

/// Every configuration the tuner tries, the default first: 128- and 64-row tiles, two launches or
/// one.
pub fn candidates(target: &Target, dtype: ScalarType, m: i64, n: i64) -> Vec<GroupedConfig> {
    let first = choose(target, dtype, m, n);
    let mut all = vec![first];
    for bm in TABLE_BMS {
        for split in [true, false] {
            all.push(GroupedConfig { bm, split, ..first });
        }
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|c| seen.insert(*c));
    all
}

/// The work tables of a call, one per row tile of [`TABLE_BMS`], one after the other in the scratch
/// (each in a region of the largest table's length).
#[derive(Debug, Clone)]
pub struct Tables {
    pub tables: Vec<Table>,
}

impl Tables {
    /// The tables of a call with group end rows `offsets` and `n` columns (128-column tiles).
    pub fn of(offsets: &[usize], n: i64) -> Result<Tables, OpError> {
        let tables = TABLE_BMS
            .iter()
            .map(|&bm| work_table(offsets, bm, ceil_div(n, 128)))
            .collect::<Result<_, _>>()?;
        Ok(Tables { tables })
    }

    /// Entries of one table's region (the largest table's length).
    fn each(&self) -> i64 {
        TABLE_ROWS * self.tables.iter().map(|t| t.padded).max().unwrap_or(0)
    }

    /// Entries of all tables.
    pub fn len(&self) -> i64 {
        self.each() * self.tables.len() as i64
    }

    /// Whether there are no tables (never: one per [`TABLE_BMS`] entry).
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// All tables' entries, as uploaded (each table at the start of its region).
    pub fn data(&self) -> Vec<i32> {
        let each = self.each() as usize;
        let mut out = vec![0i32; each * self.tables.len()];
        for (i, t) in self.tables.iter().enumerate() {
            out[i * each..i * each + t.data.len()].copy_from_slice(&t.data);
        }
        out
    }

    /// The table for `bm`-row tiles and its offset (entries) in the scratch.
    fn for_bm(&self, bm: i64) -> Option<(&Table, i64)> {
        let i = TABLE_BMS.iter().position(|&b| b == bm)?;
        Some((&self.tables[i], i as i64 * self.each()))
    }
}

fn launches(
    cfg: &GroupedConfig,
    operands: &[Operand],
    call: &Call,
    tables: &Tables,
    target: &Target,
) -> Result<Vec<PlannedLaunch>, OpError> {
    let (table, offset) = tables
        .for_bm(cfg.bm)
        .filter(|_| cfg.bn == 128)
        .ok_or_else(|| OpError::Unsupported {
            op: OP,
            what: format!("no work table for {}x{} tiles", cfg.bm, cfg.bn),
        })?;
    if table.all_items() == 0 {
        return Ok(Vec::new());
    }
    let i32_of = |v: i64| {
        i32::try_from(v).map_err(|_| OpError::Unsupported {
            op: OP,
            what: format!("{v} work items exceed i32"),
        })
    };
    let (items, edges) = (i32_of(table.items)?, i32_of(table.edges)?);
    let sms = i64::from(target.sm_count);
    let table_arg = PlannedArg::Tensor {
        operand: 3,
        output: false,
        shape: vec![TABLE_ROWS * table.padded],
        strides: vec![1],
        offset,
    };
    let launch = |mode: i32, items: i32, edges: i32, work: i64| -> Result<PlannedLaunch, OpError> {
        Ok(PlannedLaunch {
            kernel: kernel(cfg.bm, cfg.bk, mode, call.dtype)?,
            args: vec![
                PlannedArg::whole(0, &operands[0], false),
                PlannedArg::whole(1, &operands[1], false),
                table_arg.clone(),
                PlannedArg::I32(items),
                PlannedArg::I32(edges),
                PlannedArg::whole(2, &operands[2], true),
            ],
            grid: Some((work.min(sms).max(1) as u32, 1, 1)),
            config: format!(
                "{} G={} items={} edges={}x{} edge products={}",
                tuning::Candidate::name(cfg),
                call.groups,
                table.items,
                table.edges,
                table.tiles_n,
                table.edge_entries
            ),
        })
    };
    use grouped_kernels::{EDGE, INTERIOR};
    let edge_items = table.edges * table.tiles_n;
    let mut out = Vec::new();
    if !cfg.split || edge_items == 0 {
        let mode = if edge_items == 0 {
            INTERIOR
        } else {
            INTERIOR | EDGE
        };
        out.push(launch(mode, items, edges, table.all_items())?);
    } else {
        if table.items > 0 {
            out.push(launch(INTERIOR, items, 0, table.items)?);
        }
        out.push(launch(EDGE, 0, edges, edge_items)?);
    }
    Ok(out)
}

fn kernel(bm: i64, bk: i64, mode: i32, dtype: ScalarType) -> Result<cutile::dsl::Kernel, OpError> {
    use grouped_kernels as k;
    use grouped_kernels::{EDGE, INTERIOR};
    const BOTH: i32 = INTERIOR | EDGE;
    product_types!(dtype, |E, M| match (bm, bk, mode) {
        (128, 64, BOTH) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 64, BOTH>()),
        (128, 64, INTERIOR) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 64, INTERIOR>()),
        (128, 64, EDGE) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 64, EDGE>()),
        (64, 64, BOTH) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 64, BOTH>()),
        (64, 64, INTERIOR) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 64, INTERIOR>()),
        (64, 64, EDGE) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 64, EDGE>()),
        (128, 32, BOTH) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 32, BOTH>()),
        (128, 32, INTERIOR) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 32, INTERIOR>()),
        (128, 32, EDGE) => Some(k::grouped_gemm::kernel::<E, M, 128, 128, 32, EDGE>()),
        (64, 32, BOTH) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 32, BOTH>()),
        (64, 32, INTERIOR) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 32, INTERIOR>()),
        (64, 32, EDGE) => Some(k::grouped_gemm::kernel::<E, M, 64, 128, 32, EDGE>()),
        _ => None,
    })
    .flatten()
    .ok_or_else(|| OpError::Unsupported {
        op: OP,
        what: format!("no {dtype} grouped kernel with {bm}-row, {bk}-deep tiles (mode {mode})"),
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

/// Group rows of the unaligned benchmark call (8192 rows; no group boundary is a multiple of 128, every
/// one a multiple of 16: 16-row aligned group starts, which `torch._grouped_mm` may require).
pub const UNALIGNED_ROWS: [i64; 8] = [1008, 1104, 896, 1040, 960, 1024, 1072, 1088];

/// The calls the catalog compiles and the GPU runner checks and benchmarks: 8 ragged groups of
/// 8192 and 16384 rows in all at k = n = 4096 (the benchmark, groups on 128-row
/// boundaries; the plain GEMMs of the same totals are the harness's `grouped_benches`), 8 groups of
/// 8192 rows off the 128-row grid ([`UNALIGNED_ROWS`]), and two small ragged calls the runner checks
/// (one with the transposed-weight view), with empty and one-row groups.
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
    // Groups off the 128-row grid (as a router gives them): 7 boundaries straddle row tiles, so the
    // default launch runs both loops (interior view stores, edge masked scatters).
    out.push(c(
        "bf16",
        vec![
            vec![8192, 4096],
            vec![8, 4096, 4096],
            UNALIGNED_ROWS.to_vec(),
        ],
    ));
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
