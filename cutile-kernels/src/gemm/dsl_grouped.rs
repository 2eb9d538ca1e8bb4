//! The grouped GEMM kernel: `G` products `c[rows_g] = a[rows_g] @ b[g]` whose row ranges `rows_g`
//! (ragged, any start) partition the rows of `a` and `c`, in one persistent launch.
//!
//! The output is cut into the *global* `BM x BN` tile grid of `c`, so `a` and `c` are read and
//! written through the same partitions as the plain persistent GEMM (TMA tile loads and view
//! stores), whatever row a group starts at; `b[g]` is a tile of the 3-D `b`. Row tiles come in two
//! kinds:
//!
//! - **interior**: every row of tile `t` belongs to one group `g` (or the tile is the last one of
//!   `c`, clipped by the tensor's end, and the group ends there): item `(t, tn)` is one product
//!   with `b[g]`;
//! - **edge**: tile `t` straddles group boundaries. Item `(t, tn)` computes the whole tile once per
//!   group that meets it, each with its own `b[g]`, and keeps in each row the product of the row's
//!   group (`select`), then stores the merged tile with the same view store. No masked scatter: the
//!   groups partition the rows, so the merged tile is complete. A call computes at most `G - 1` extra
//!   row tiles per column tile, and every output tile is written by exactly one item.
//!
//! `MODE` ([`INTERIOR`], [`EDGE`], or both) says which loops a specialization runs: one per launch
//! (the default: an interior launch, then an edge launch when there are edge tiles), or both in one
//! launch (interior items first, then the edge items; a tuner candidate). The split is the default
//! because tileiras gives a kernel that holds the edge loop (two 128 x 128 f32 tiles live, a loop
//! over groups) the slow 384-thread schedule, which an interior-only kernel escapes.
//!
//! The host's work table (`table`, i32, [`TABLE_ROWS`] rows of `P` entries, `P` a multiple of 64 at
//! least every list's length, see `grouped::Table`):
//! - rows 0, 1: interior row entry `j`'s group and global row tile (in group order);
//! - rows 2, 3: group `g`'s first row and its end row (exclusive);
//! - row 4: edge tile `j`'s global row tile;
//! - rows 5, 7: edge tile `j`'s first and end entry into row 6;
//! - row 6: edge entry `q`'s group (the non-empty groups meeting an edge tile, in order).
//!
//! Interior item `i` is row entry `i / tiles_n` and column tile `i % tiles_n`: two table reads
//! (gathers) and no search. Block `p` takes items `p, p + grid, …`; the edge loop continues that
//! stride where the interior loop stopped, so the blocks stay balanced.
//!
//! What tileiras 13.5.37 makes of the choices here (sm_90, `ptxas -v`; docs/gemm.md): a view load
//! inside the item loop (the first version searched the item's group 64 table entries at a time) or
//! a masked 128 x 128 scatter store (the first version's store for every tile) gives the kernel a
//! warp-specialized 384-thread schedule with 168 registers, spills and serialized `wgmma`, 1.8x
//! slower than the plain GEMM. With gathers for the table and view stores only, the interior loop
//! compiles as the plain persistent GEMM does (256 threads, 255 registers, no spills).

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Rows of the work table.
    pub const TABLE_ROWS: i32 = 8;
    /// `MODE` bit: run the interior items (view stores).
    pub const INTERIOR: i32 = 1;
    /// `MODE` bit: run the edge items (every group meeting the tile, merged by row).
    pub const EDGE: i32 = 2;

    /// Element `i` of a rank-1 i32 array.
    fn entry(t: &Tensor<i32, S1<DYN>>, i: Scalar<i32>) -> Scalar<i32> {
        t.gather::<S1<1>>(iota::<1>() + i, None, 0i32)
            .reshape::<S0>()
            .to_scalar()
    }

    /// `c[rows_g] = a[rows_g] @ b[g]` for every group of the work `table` (module docs): `a: [M, K]`,
    /// `b: [G, K, N]` (any strides), `c: [M, N]`; `items` is the interior item count (interior row
    /// entries × column tiles) and `edges` the edge tile count. Launch with a fixed grid; f32 accumulation, operands
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
        let k_tiles = crate::gemm::dsl::k_tiles::<BK>(a.dim(1));
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
            // Edge item `e` is `(j, tn)` with `j = e / tiles_n`, edge tile `j` of the table; block `p`
            // continues the interior loop's stride: its first edge item is the one after its last
            // interior item. (An edge-only launch passes `items = 0`, so this is `first` there.)
            let total = edges * tiles_n;
            let start = (first + nblocks - items % nblocks) % nblocks;
            for e in (start..total).step_by(nblocks) {
                let j = e / tiles_n;
                let tn = e - j * tiles_n;
                let t = entry(table, p * 4i32 + j);
                let q0 = entry(table, p * 5i32 + j);
                let q1 = entry(table, p * 7i32 + j);
                let rows = (iota::<BM>() + t * BM).reshape::<S2<BM, 1>>();
                // Every group that meets the tile computes it with its own `b[g]`; each row keeps
                // the product of the group it belongs to. The groups partition the rows, so the
                // merged tile is complete and takes a view store, as an interior one.
                let mut out = zeros::<f32, S2<BM, BN>>();
                for q in q0..q1 {
                    let g = entry(table, p * 6i32 + q);
                    let r0 = entry(table, p * 2i32 + g);
                    let r1 = entry(table, p * 3i32 + g);
                    let mut acc = zeros::<f32, S2<BM, BN>>();
                    for k in 0..k_tiles {
                        let tb = pb.load((g, k, tn)).reshape::<S2<BK, BN>>();
                        acc = mma(pa.load((t, k)).cast::<M>(), tb.cast::<M>(), acc);
                    }
                    let mine = (rows.cmp_ge(r0) & rows.cmp_lt(r1)).broadcast::<S2<BM, BN>>();
                    out = select(mine, acc, out);
                }
                // SAFETY: edge tiles are distinct from each other and from every interior tile, and
                // one item writes a whole (tile, column tile) pair.
                unsafe { c.store_at((t, tn), out.cast::<E>()) };
            }
        }
    }
}
