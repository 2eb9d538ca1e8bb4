//! The grouped GEMM kernel: `G` products `c[rows_g] = a[rows_g] @ b[g]` whose row ranges `rows_g`
//! (ragged, any start) partition the rows of `a` and `c`, in one persistent launch.
//!
//! Work items are `(g, t, tn)`: group `g`, a row tile `t` of the *global* `BM`-row grid of `a`/`c`
//! that meets the group's rows, and a column tile `tn`. Because `t` is a tile of the global grid, `a`
//! and `c` are read and written through the same `BM x BK` / `BM x BN` partitions as the plain
//! persistent GEMM (TMA tile loads), whatever row a group starts at. A row tile that straddles a
//! group boundary is an item of every group it meets: each computes the whole tile with its own `b[g]`
//! and stores only its own rows (a masked scatter; every tile is stored that way, see the kernel). So a
//! call computes at most `G - 1` extra row tiles per column tile, and no two items write the same
//! element.
//!
//! The host's work table (`table`, i32, five rows of `GP` entries, `GP` a multiple of [`CHUNK`],
//! see `grouped::Table`):
//! - row 0: `item_end[g]`, the cumulative item count through group `g` (padding: `i32::MAX`);
//! - row 1: `item_start[g]` (= `item_end[g - 1]`);
//! - row 2: the first global row tile of group `g`;
//! - rows 3, 4: the group's first row and its end row (exclusive).
//!
//! Block `p` takes items `p, p + grid, …`; it finds an item's group by counting the `item_end`
//! entries at or below it, [`CHUNK`] at a time.

/// The kernels, written in the DSL.
#[cutile::module]
pub mod kernels {
    use cutile::core::*;

    /// Entries of the work table's group search per step (the table's rows are padded to a multiple).
    pub const CHUNK: i32 = 64;

    /// Element `i` of a rank-1 i32 array.
    fn entry(t: &Tensor<i32, S1<DYN>>, i: Scalar<i32>) -> Scalar<i32> {
        t.gather::<S1<1>>(iota::<1>() + i, None, 0i32)
            .reshape::<S0>()
            .to_scalar()
    }

    /// `c[rows_g] = a[rows_g] @ b[g]` for every group of the work `table` (module docs): `a: [M, K]`,
    /// `b: [G, K, N]` (any strides), `c: [M, N]`; `items` is the table's item count. Launch with a
    /// fixed grid; f32 accumulation, operands multiplied as `M`.
    #[cutile::entry]
    pub fn grouped_gemm<
        E: ElementType,
        M: MmaOperand<f32>,
        const BM: i32,
        const BN: i32,
        const BK: i32,
    >(
        a: &Tensor<E, S2<DYN, DYN>>,
        b: &Tensor<E, S3<DYN, DYN, DYN>>,
        table: &Tensor<i32, S1<DYN>>,
        items: Scalar<i32>,
        c: &mut Tensor<E, S2<DYN, DYN>>,
    ) {
        let pa = a.partition_padded::<S2<BM, BK>>(Padding::Zero);
        let pb = b.partition_padded::<S3<1, BK, BN>>(Padding::Zero);
        let pt = table.partition::<S1<CHUNK>>();
        let tiles_n = pb.num_tiles(2);
        let k_tiles = pa.num_tiles(1);
        let n = c.dim(1);
        let gp = table.dim(0) / 5i32;
        let chunks = gp / CHUNK;
        let (nblocks, _, _) = num_blocks();
        for item in (block_id_x()..items).step_by(nblocks) {
            // The item's group: how many groups end at or before it.
            let mut g = scalar::<i32>(0i32);
            for ch in 0..chunks {
                g += pt
                    .load(ch)
                    .cmp_le(item)
                    .cast::<i32>()
                    .sum_squeezed::<0>()
                    .to_scalar();
            }
            let local = item - entry(table, gp + g);
            let tm = local / tiles_n;
            let tn = local - tm * tiles_n;
            let t = entry(table, gp * 2i32 + g) + tm;
            let r0 = entry(table, gp * 3i32 + g);
            let r1 = entry(table, gp * 4i32 + g);
            let mut acc = zeros::<f32, S2<BM, BN>>();
            for k in 0..k_tiles {
                let tb = pb.load((g, k, tn)).reshape::<S2<BK, BN>>();
                acc = mma(pa.load((t, k)).cast::<M>(), tb.cast::<M>(), acc);
            }
            // Only group `g`'s rows of the tile (and columns inside `c`) are written. The store is a
            // masked scatter for every tile: tileiras 13.5.37 fails (exit 5, at -O1 and above) on
            // this kernel when a tile inside one group takes a view store (`store_at`) and a
            // straddling one the masked scatter (see docs/gemm.md).
            let rows = (iota::<BM>() + t * BM).reshape::<S2<BM, 1>>();
            let cols = (iota::<BN>() + tn * BN).reshape::<S2<1, BN>>();
            let mask = (rows.cmp_ge(r0) & rows.cmp_lt(r1)).broadcast::<S2<BM, BN>>()
                & cols.cmp_lt(n).broadcast::<S2<BM, BN>>();
            // SAFETY: groups' rows are disjoint, and items of one group are distinct (row tile,
            // column tile) pairs, so no two items write the same element.
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
