//! The grouped GEMM kernel: `G` products `c[rows_g] = a[rows_g] @ b[g]` whose row ranges `rows_g`
//! (ragged, any start) partition the rows of `a` and `c`, in one persistent launch.
//!
//! Work items are `(g, t, tn)`: group `g`, a row tile `t` of the *global* `BM`-row grid of `a`/`c`
//! that meets the group's rows, and a column tile `tn`. Because `t` is a tile of the global grid, `a`
//! and `c` are read and written through the same `BM x BK` / `BM x BN` partitions as the plain
//! persistent GEMM (TMA tile loads), whatever row a group starts at. Items come in two kinds:
//!
//! - **interior**: every row of tile `t` belongs to group `g` (or the tile is the last one of `c`,
//!   clipped by the tensor's end, and the group ends there). Stored with a view store (`store_at`,
//!   TMA), as the plain persistent GEMM does;
//! - **edge**: tile `t` straddles a group boundary. It is an item of every group it meets: each
//!   computes the whole tile with its own `b[g]` and writes only its own rows (a masked scatter). A
//!   group has at most two edge row tiles.
//!
//! `MODE` ([`INTERIOR`], [`EDGE`], or both) says which loops a specialization runs: both in one launch
//! (interior items first, then the edge items, in two loops: one loop choosing the store per item
//! makes tileiras 13.5.37 fail, see docs/gemm.md), or one per launch. A call computes at most `G - 1`
//! extra row tiles per column tile, and no two items write the same element.
//!
//! The host's work table (`table`, i32, [`TABLE_ROWS`] rows of `P` entries, `P` at least the number of
//! row entries and of groups, see `grouped::Table`) lists *row entries*: the interior row tiles of
//! every group in order, then the edge row tiles:
//! - row 0: row entry `j`'s group;
//! - row 1: row entry `j`'s global row tile;
//! - rows 2, 3: group `g`'s first row and its end row (exclusive).
//!
//! Item `i` is row entry `i / tiles_n` and column tile `i % tiles_n`, so an item costs two table
//! reads (gathers) and no search. (The first version searched the group of an item through the
//! cumulative item counts with a 64-wide view load per step inside the item loop; that load made
//! tileiras give the kernel a warp-specialized 384-thread schedule with 168 registers, spills and
//! serialized `wgmma`, 1.8x slower than the plain GEMM: docs/gemm.md.) Block `p` takes items
//! `p, p + grid, …`; the edge loop continues that stride where the interior loop stopped, so the
//! blocks stay balanced.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Rows of the work table.
    pub const TABLE_ROWS: i32 = 4;
    /// `MODE` bit: run the interior items (view stores).
    pub const INTERIOR: i32 = 1;
    /// `MODE` bit: run the edge items (masked scatter stores).
    pub const EDGE: i32 = 2;

    /// Element `i` of a rank-1 i32 array.
    fn entry(t: &Tensor<i32, S1<DYN>>, i: Scalar<i32>) -> Scalar<i32> {
        t.gather::<S1<1>>(iota::<1>() + i, None, 0i32)
            .reshape::<S0>()
            .to_scalar()
    }

    /// `c[rows_g] = a[rows_g] @ b[g]` for every group of the work `table` (module docs): `a: [M, K]`,
    /// `b: [G, K, N]` (any strides), `c: [M, N]`; `items` is the interior item count (interior row
    /// entries × column tiles) and `edges` the edge row entry count. Launch with a fixed grid; f32 accumulation, operands
    /// multiplied as `M`.
    #[cutile::entry]
    #[allow(clippy::too_many_arguments)]
    pub fn grouped_gemm<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const MODE: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S3<DYN, DYN, DYN>>,
        table: &Tensor<i32, S1<DYN>>,
        items: Scalar<i32>,
        edges: Scalar<i32>,
        c: &mut Tensor<E, S2<BM, BN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S3<1, BK, BN>>(Padding::Zero);
        let tiles_n = pb.num_tiles(2);
        let k_tiles = pa.num_tiles(1);
        let n = c.dim(1);
        let p = table.dim(0) / TABLE_ROWS;
        let interior_rows = items / tiles_n;
        let (nblocks, _, _) = num_blocks();
        let first = block_id_x();
        if (MODE & INTERIOR) != 0 {
            for item in (first..items).step_by(nblocks) {
                let j = item / tiles_n;
                let tn = item - j * tiles_n;
                let g = entry(table, j);
                let t = entry(table, p + j);
                let mut acc = zeros::<f32, S2<BM, BN>>();
                for k in 0..k_tiles {
                    let tb = pb.load((g, k, tn)).reshape::<S2<BK, BN>>();
                    acc = mma(pa.load((t, k)).cast::<M>(), tb.cast::<M>(), acc);
                }
                // SAFETY: an interior tile's rows all belong to group `g` (or lie past `c`'s end,
                // which the view store clips), groups' rows are disjoint, and items of one group are
                // distinct (row tile, column tile) pairs.
                unsafe { c.store_at((t, tn), acc.cast::<E>()) };
            }
        }
        if (MODE & EDGE) != 0 {
            // Edge item `e` is `(j, tn)` with `j = e / tiles_n`; block `p` continues the interior
            // loop's stride: its first edge item is the one after its last interior item.
            let total = edges * tiles_n;
            // (An edge-only launch passes `items = 0`, so this is `first` there.)
            let start = (first + nblocks - items % nblocks) % nblocks;
            for e in (start..total).step_by(nblocks) {
                let j = e / tiles_n;
                let tn = e - j * tiles_n;
                let g = entry(table, interior_rows + j);
                let t = entry(table, p + interior_rows + j);
                let r0 = entry(table, p * 2i32 + g);
                let r1 = entry(table, p * 3i32 + g);
                let mut acc = zeros::<f32, S2<BM, BN>>();
                for k in 0..k_tiles {
                    let tb = pb.load((g, k, tn)).reshape::<S2<BK, BN>>();
                    acc = mma(pa.load((t, k)).cast::<M>(), tb.cast::<M>(), acc);
                }
                // Only group `g`'s rows of the tile (and columns inside `c`) are written.
                let rows = (iota::<BM>() + t * BM).reshape::<S2<BM, 1>>();
                let cols = (iota::<BN>() + tn * BN).reshape::<S2<1, BN>>();
                let mask = (rows.cmp_ge(r0) & rows.cmp_lt(r1)).broadcast::<S2<BM, BN>>()
                    & cols.cmp_lt(n).broadcast::<S2<BM, BN>>();
                // SAFETY: groups' rows are disjoint, an edge item writes only its group's rows of
                // its tile, and interior items never write an edge tile.
                unsafe {
                    c.scatter::<S2<BM, BN>>(
                        (
                            rows.broadcast::<S2<BM, BN>>(),
                            cols.broadcast::<S2<BM, BN>>(),
                        ),
                        acc.cast::<E>(),
                        Some(mask),
                    )
                };
            }
        }
    }
}
