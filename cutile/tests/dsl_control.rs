//! Device control flow and the remaining op families, traced and (when tileiras is installed) compiled for
//! sm_90: `if`/`else` with values and assigned variables, stores under a branch (token threading), `while`,
//! host-condition branches, generic reductions and scans, gathers/scatters, atomics, print and assert.

#![allow(clippy::unwrap_used)]

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::ScalarType::*;

#[cutile::module]
mod kernels {
    use cutile::core::*;

    fn twice<S: Shape>(t: Tile<f32, S>) -> Tile<f32, S> {
        t * 2.0
    }

    #[cutile::entry]
    pub fn branchy<const B: i32>(
        x: &Tensor<f32, S1<DYN>>,
        n: Scalar<i32>,
        y: &mut Tensor<f32, S1<B>>,
    ) {
        let pid = block_id_x();
        let mut t = x.load_tile::<S1<B>>(pid);
        let scale = if pid < n {
            t = twice(t);
            scalar::<f32>(1.0)
        } else if pid == n {
            scalar(0.25)
        } else {
            scalar(0.5)
        };
        if pid >= 0 && pid < n {
            y.store(t * scale);
        }
    }

    /// No generics at all.
    #[cutile::entry]
    pub fn plain(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<128>>) {
        y.store(x.load_tile::<S1<128>>(block_id_x()) * 3);
    }

    #[cutile::entry]
    pub fn halving<const B: i32>(x: &Tensor<f32, S1<DYN>>, y: &mut Tensor<f32, S1<B>>) {
        let pid = block_id_x();
        let mut t = x.load_tile::<S1<B>>(pid);
        let mut i = scalar::<i32>(0);
        while i < 4 {
            t *= 0.5;
            i += 1;
        }
        y.store(t);
    }

    #[cutile::entry]
    pub fn host_branch<const B: i32, const DOUBLE: bool>(
        x: &Tensor<f32, S1<DYN>>,
        y: &mut Tensor<f32, S1<B>>,
    ) {
        assert!(
            B >= 16,
            "tiles of fewer than 16 elements are not worth a block"
        );
        let mut t = x.load_tile::<S1<B>>(block_id_x());
        if DOUBLE {
            t = t + t;
        }
        y.store(t);
    }

    #[cutile::entry]
    pub fn misc<const B: i32>(
        x: &Tensor<f32, S2<DYN, DYN>>,
        idx: &Tensor<i32, S1<DYN>>,
        y: &mut Tensor<f32, S2<B, B>>,
    ) {
        let (bx, by, _) = block_id();
        let t = x.load_tile_padded::<S2<B, B>>((bx, by), Padding::Zero);
        let absmax = t.reduce::<1>(0.0, |a, b| a.abs().max(b.abs()));
        let prefix = t.scan::<1>(0.0, false, |a, b| a + b);
        let cols = iota::<B>().reshape::<S2<1, B>>().broadcast::<S2<B, B>>();
        let rows = iota::<B>().reshape::<S2<B, 1>>().broadcast::<S2<B, B>>();
        let lower = select(cols <= rows, prefix, 0.0);
        let picked = idx.load_tile::<S1<B>>(bx);
        let gathered = x.gather::<S2<B, B>>(
            (rows, picked.reshape::<S2<1, B>>().broadcast()),
            Some(cols < 8),
            0.0,
        );
        assert!(
            absmax.reshape::<S2<B, 1>>().broadcast::<S2<B, B>>() >= 0.0,
            "abs max is non-negative"
        );
        println!(
            "block {} {}: first {}",
            bx,
            by,
            absmax.extract::<S1<1>>(&[0])
        );
        let r = fma(lower, gathered, t.exp().ln());
        y.store(r.transpose().transpose());
        let (_old, _tok) = y.atomic_add((rows, cols), r, None);
    }

    /// A block counter with acquire/release ordering at device scope: the last block to count itself
    /// in reads what the others wrote to `y` and copies the first tile to `first`.
    #[cutile::entry]
    pub fn counted<const B: i32>(
        x: &Tensor<f32, S1<DYN>>,
        count: &mut Tensor<i32, S1<1>>,
        y: &mut Tensor<f32, S1<B>>,
        first: &mut Tensor<f32, S1<B>>,
    ) {
        let t = x.load_tile::<S1<B>>(block_id_x());
        y.store(t);
        let (seen, _tok) = count.atomic_with(
            AtomicMode::Add,
            iota::<1>(),
            full::<i32, S1<1>>(1),
            None,
            AtomicOrder::AcqRel,
            AtomicScope::Device,
        );
        let (blocks, _, _) = num_blocks();
        if seen.reshape::<S0>().to_scalar() == blocks - 1 {
            let y0 = y.partition_padded::<S1<B>>(Padding::Zero).load(0);
            // SAFETY: only the last block writes `first`.
            unsafe { first.store_at(0, y0) };
        }
    }

    /// Rank-4 gather and masked scatter (a KV cache `[blocks, block_size, heads, D]`): row `i` of the
    /// block's `B x B` tile goes to `(i / 4, i % 4, block, lane)`.
    #[cutile::entry]
    pub fn gather4<const B: i32>(
        x: &Tensor<f32, S4<DYN, DYN, DYN, DYN>>,
        y: &mut Tensor<f32, S4<1, 1, 1, B>>,
    ) {
        let h = block_id_x().splat::<S2<B, B>>();
        let rows = iota::<B>().reshape::<S2<B, 1>>().broadcast::<S2<B, B>>();
        let lane = iota::<B>().reshape::<S2<1, B>>().broadcast::<S2<B, B>>();
        let idx = (rows / 4, rows % 4, h, lane);
        let t = x.gather::<S2<B, B>>(idx, None, 0.0);
        // SAFETY: block `h` writes only head `h`.
        unsafe { y.scatter(idx, t + 1.0, Some(rows < 6)) };
    }
}

fn meta(shape: &[i64]) -> TensorMeta {
    TensorMeta::contiguous(F32, shape)
}

fn cases() -> Vec<(&'static str, Kernel, Vec<TensorMeta>)> {
    vec![
        (
            "branchy",
            kernels::branchy::kernel::<256>(),
            vec![meta(&[1000]); 2],
        ),
        (
            "halving",
            kernels::halving::kernel::<256>(),
            vec![meta(&[1000]); 2],
        ),
        (
            "host_branch<true>",
            kernels::host_branch::kernel::<256, true>(),
            vec![meta(&[1000]); 2],
        ),
        (
            "host_branch<false>",
            kernels::host_branch::kernel::<256, false>(),
            vec![meta(&[1000]); 2],
        ),
        (
            "counted",
            kernels::counted::kernel::<256>(),
            vec![
                meta(&[1000]),
                TensorMeta::contiguous(I32, &[1]),
                meta(&[1000]),
                meta(&[256]),
            ],
        ),
        (
            "gather4",
            kernels::gather4::kernel::<32>(),
            vec![meta(&[8, 4, 3, 32]); 2],
        ),
        (
            "misc",
            kernels::misc::kernel::<32>(),
            vec![
                meta(&[100, 100]),
                TensorMeta::contiguous(I32, &[100]),
                meta(&[100, 100]),
            ],
        ),
    ]
}

#[test]
fn traces_and_verifies() {
    for (name, k, arrays) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        cutile_ir::verify::verify_module(&s.module, cutile_ir::V13_5)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
    }
}

#[test]
fn device_if_yields_value_and_threads_store_token() {
    let s = kernels::branchy::kernel::<256>()
        .specialize(&[meta(&[1000]), meta(&[1000])])
        .unwrap();
    let text = s.ir_text();
    // The first `if` yields the scale and the doubled tile; the second carries the output token.
    assert!(text.contains("-> (tile<f32>, tile<256xf32>)"), "{text}");
    assert!(text.contains("-> (token)"), "{text}");
}

/// `atomic_with` writes its ordering and scope into the op; `atomic` stays relaxed at device scope.
#[test]
fn atomic_ordering_and_scope_reach_the_ir() {
    let ir = |k: Kernel, arrays: Vec<TensorMeta>| {
        let text = k.specialize(&arrays).unwrap().ir_text();
        text.lines()
            .find(|l| l.contains("atomic_rmw"))
            .unwrap_or_else(|| panic!("no atomic in:\n{text}"))
            .to_string()
    };
    let ordered = ir(
        kernels::counted::kernel::<256>(),
        vec![
            meta(&[1000]),
            TensorMeta::contiguous(I32, &[1]),
            meta(&[1000]),
            meta(&[256]),
        ],
    );
    assert!(
        ordered.contains("acq_rel") && ordered.contains("device"),
        "{ordered}"
    );
    let relaxed = ir(
        kernels::misc::kernel::<32>(),
        vec![
            meta(&[100, 100]),
            TensorMeta::contiguous(I32, &[100]),
            meta(&[100, 100]),
        ],
    );
    assert!(
        relaxed.contains("relaxed") && relaxed.contains("device"),
        "{relaxed}"
    );
}

/// The ordering reaches the other outputs through the tokens: the acq_rel atomic waits for the
/// store to `y` (a join of its token), and the last block's load of `y` and store to `first` wait for
/// the atomic.
#[test]
fn acq_rel_atomic_orders_every_output() {
    let text = kernels::counted::kernel::<256>()
        .specialize(&[
            meta(&[1000]),
            TensorMeta::contiguous(I32, &[1]),
            meta(&[1000]),
            meta(&[256]),
        ])
        .unwrap()
        .ir_text();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let result = |l: &str| l.split(['=', ':']).next().unwrap().trim().to_string();
    let token_of = |l: &str| {
        let at = l.find("token").unwrap_or_else(|| panic!("no token in {l}"));
        let rest = l[at + 5..].trim_start_matches([' ', '=']);
        rest.split([' ', ',', ':']).next().unwrap().to_string()
    };
    let store = lines
        .iter()
        .position(|l| l.contains("store_view_tko"))
        .unwrap();
    let atomic = lines
        .iter()
        .position(|l| l.contains("atomic_rmw_tko"))
        .unwrap();
    assert!(store < atomic, "{text}");
    let join = token_of(lines[atomic]);
    let join_line = lines
        .iter()
        .find(|l| l.starts_with(&format!("{join} = join_tokens")))
        .unwrap_or_else(|| panic!("the atomic's token {join} is not a join:\n{text}"));
    assert!(
        join_line.contains(&result(lines[store])),
        "the join misses the store to y:\n{text}"
    );
    let after = format!("{}#1", result(lines[atomic]).trim_end_matches(":2"));
    for l in &lines[atomic + 1..] {
        if l.contains("load_view_tko") || l.contains("store_view_tko") {
            assert_eq!(
                token_of(l),
                after,
                "not ordered after the atomic: {l}\n{text}"
            );
        }
    }
}

#[test]
fn host_condition_specializes() {
    let a = kernels::host_branch::kernel::<256, true>()
        .specialize(&vec![meta(&[1000]); 2])
        .unwrap();
    let b = kernels::host_branch::kernel::<256, false>()
        .specialize(&vec![meta(&[1000]); 2])
        .unwrap();
    assert!(a.ir_text().contains("addf"));
    assert!(!b.ir_text().contains("addf"));
    assert!(!a.ir_text().contains(" if "));
}

#[test]
fn compile_sm90() {
    let t = match cutile::toolchain::Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip("compile_sm90", &format!("tileiras not found ({e})"));
            return;
        }
    };
    let req = cutile::toolchain::CompileRequest::new(cutile::toolchain::GpuArch::Sm90);
    for (name, k, arrays) in cases() {
        let s = k
            .specialize(&arrays)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        s.compile(&t, &req)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", s.ir_text()));
    }
}

/// Not a check: prints the IR of every case for inspection.
#[test]
#[ignore = "manual tool: cargo test -p cutile --test dsl_control dump -- --ignored --nocapture"]
fn dump() {
    for (name, k, arrays) in cases() {
        println!("// {name}\n{}", k.specialize(&arrays).unwrap().ir_text());
    }
}
