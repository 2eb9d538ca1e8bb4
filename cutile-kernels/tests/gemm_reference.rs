//! The plain product's GEMM kernels against cuTile Python's (`ct_matmul` with the grouped "2-D swizzle"
//! order and `ct_matmul_persist`, `tests/cutile_reference/matmul*.tilebc`, made by
//! `tests/cutile_reference/gen_reference.py` from cuTile 1.7.0 at the configurations the shared `bench.py`
//! measures). What was compared and why: `docs/gemm-ir-diff.md`.
//!
//! - the host's configurations: `gemm bf16 4096³` runs `gemm_persistent 128x128x64`, `8192³` runs
//!   `gemm_persistent 128x256x64 w8` (`config::choose_product`), and the other configurations compared
//!   here are tuner candidates at both shapes;
//! - for each of our kernels and the cuTile kernel of the same configuration, a structural comparison
//!   that must match: memory ops in program order (family, ordering, view type with its tile and padding,
//!   hints, which token orders them), loops (nesting, induction type, loop-carried types, the memory ops
//!   inside), the `mmaf` forms, the accumulator's cast, the `assume` facts on every array parameter, the
//!   worker-warp hint, and where the K loop's trip count comes from (the persistent kernels: from `K`
//!   alone, outside the tile loop);
//! - the differences we keep on purpose, pinned so a change is noticed: no `occupancy = 1` entry hint
//!   (tileiras's default gives the same PTX), the tile order's `group` as a run-time parameter, and the
//!   tile index in truncating rather than floor division;
//! - both compiled by tileiras for sm_90 (needs tileiras: skipped without it, a failure under
//!   `CUTILE_REQUIRE_TOOLS=1`): the same registers, stack frame and shared memory, and our code no larger.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cutile::dsl::{Kernel, TensorMeta};
use cutile_ir::{
    Block, Function, FunctionKind, Module as IrModule, OpAttr, Opcode, Operation, ValueId,
};
use cutile_kernels::op::CallSpec;

/// (our configuration as the tuner names it, cuTile fixture stem without the shape).
const PAIRS: [(&str, &str); 5] = [
    ("gemm 128x128x64", "matmul_bf16_{S}_128x128x64_occ1"),
    ("gemm 128x256x64 w8", "matmul_bf16_{S}_128x256x64_nww8"),
    (
        "gemm_persistent 128x128x64",
        "matmul_persist_bf16_{S}_128x128x64_occ1",
    ),
    (
        "gemm_persistent 128x256x64 w8",
        "matmul_persist_bf16_{S}_128x256x64_nww8",
    ),
    (
        "gemm_persistent 256x256x64 w8 c2",
        "matmul_persist_bf16_{S}_256x256x64_nww8_cta2",
    ),
];

/// Every candidate of `gemm bf16 [s, s] @ [s, s]` as the catalog compiles it: (configuration, kernel,
/// arrays), the host's default first.
fn our_candidates(s: i64) -> Vec<(String, Kernel, Vec<TensorMeta>)> {
    let call = CallSpec::new("gemm", "bf16", &[&[s, s], &[s, s]], false);
    cutile_kernels::catalog::dsl_jobs(&[call], true)
        .unwrap()
        .iter()
        .map(|j| {
            let (k, metas) = j.dsl_spec().unwrap();
            let config = j.specialization.split(" [").next().unwrap().to_owned();
            (config, k.clone(), metas.to_vec())
        })
        .collect()
}

fn ours(s: i64, config: &str) -> (Kernel, Vec<TensorMeta>) {
    our_candidates(s)
        .into_iter()
        .find(|(c, _, _)| c == config)
        .map(|(_, k, m)| (k, m))
        .unwrap_or_else(|| panic!("no candidate `{config}` at {s}³"))
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/cutile_reference/{name}.tilebc",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn theirs(name: &str) -> IrModule {
    cutile_ir::bytecode::read_module(&fixture_bytes(name)).unwrap()
}

fn entry_fn(m: &IrModule) -> &Function {
    m.functions.iter().find(|f| f.is_entry()).unwrap()
}

// ---------------------------------------------------------------------------------------------------------
// The structural inventory.

/// What must agree between our GEMM and cuTile's of the same configuration.
#[derive(Debug, PartialEq, Eq)]
struct Inventory {
    /// Memory ops in program order: mnemonic, ordering, view type, hints, loop depth, token source.
    memory: Vec<String>,
    /// Loops in pre-order: depth, induction type, loop-carried types, memory ops inside.
    loops: Vec<String>,
    /// `mmaf` forms (operand and accumulator types, fast accumulation).
    mma: Vec<String>,
    /// Float casts (the accumulator to the output type).
    casts: Vec<String>,
    /// Per array parameter (a, b, c) and role (ptr, shape0, shape1, stride0, stride1): the `assume`
    /// predicates on it.
    assumes: BTreeMap<(usize, &'static str), BTreeSet<String>>,
    /// `num_worker_warps_per_cta` (None: tileiras's default, 4).
    worker_warps: Option<String>,
    /// `num_cta_in_cga` (None: one CTA per tile block).
    cga: Option<String>,
    /// The K loop's trip count: where it is defined (loop depth) and which entry parameters it depends
    /// on, as (array, role).
    k_bound: (usize, BTreeSet<(usize, &'static str)>),
    /// The K loop's trip count is the partition view's `get_index_space_shape`.
    k_bound_from_view: bool,
}

/// Every op's defining context: result value → (op, loop depth), and block args of loops.
struct Defs<'a> {
    op_of: HashMap<ValueId, (&'a Operation, usize)>,
    /// Values that are block arguments of a `for` (induction variable or loop-carried).
    loop_args: BTreeSet<ValueId>,
}

fn defs(body: &Block) -> Defs<'_> {
    fn go<'a>(b: &'a Block, depth: usize, d: &mut Defs<'a>) {
        for op in &b.ops {
            for &r in &op.results {
                d.op_of.insert(r, (op, depth));
            }
            let inner = depth + usize::from(op.opcode == Opcode::For);
            for region in &op.regions {
                if op.opcode == Opcode::For {
                    d.loop_args.extend(region.args.iter().copied());
                }
                go(region, inner, d);
            }
        }
    }
    let mut d = Defs {
        op_of: HashMap::new(),
        loop_args: BTreeSet::new(),
    };
    go(body, 0, &mut d);
    d
}

const ROLES: [&str; 5] = ["ptr", "shape0", "shape1", "stride0", "stride1"];

/// Entry parameter index → (array number, role), for every 2-D array parameter (a pointer and the four
/// i32 that follow it); other parameters (our `group`) are skipped.
fn array_params(f: &Function) -> BTreeMap<usize, (usize, &'static str)> {
    let mut out = BTreeMap::new();
    let mut array = 0;
    let mut i = 0;
    while i < f.param_types.len() {
        if f.param_types[i].to_string().contains("ptr<") {
            for (j, role) in ROLES.iter().enumerate() {
                out.insert(i + j, (array, *role));
            }
            array += 1;
            i += ROLES.len();
        } else {
            i += 1;
        }
    }
    out
}

fn hints_text(op: &Operation) -> String {
    match op.attr("optimization_hints") {
        Some(OpAttr::Hints(h)) => {
            let mut kv: Vec<String> = h
                .by_arch
                .iter()
                .flat_map(|(arch, v)| v.iter().map(move |(k, a)| format!("{arch}.{k}={a:?}")))
                .collect();
            kv.sort();
            kv.join(",")
        }
        _ => String::new(),
    }
}

fn inventory(m: &IrModule) -> Inventory {
    let f = entry_fn(m);
    let body = f.body.as_ref().unwrap();
    let d = defs(body);
    let ty = |v: ValueId| f.values[v.0 as usize].to_string();
    let params = array_params(f);
    let param_index: HashMap<ValueId, usize> =
        body.args.iter().enumerate().map(|(i, &v)| (v, i)).collect();

    // The entry parameters a value depends on (through any ops, stopping at parameters and loop args).
    let depends = |v: ValueId| -> BTreeSet<(usize, &'static str)> {
        let mut out = BTreeSet::new();
        let mut stack = vec![v];
        let mut seen = BTreeSet::new();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(&i) = param_index.get(&v) {
                out.insert(params.get(&i).copied().unwrap_or((usize::MAX, "scalar")));
            } else if let Some((op, _)) = d.op_of.get(&v) {
                stack.extend(op.all_operands());
            }
        }
        out
    };
    let token_source = |op: &Operation| -> &'static str {
        match op.operand_group("token").first() {
            None => "none",
            Some(t) if d.loop_args.contains(t) => "loop-carried",
            Some(t) => match d.op_of.get(t).map(|(o, _)| o.opcode) {
                Some(Opcode::MakeToken) => "entry",
                _ => "other",
            },
        }
    };
    let mem_text = |op: &Operation, depth: usize| {
        let view = op.operand_group("view")[0];
        format!(
            "{} {:?} view={} hints=[{}] depth={depth} token={}",
            op.opcode.mnemonic(),
            op.attr("memory_ordering_semantics"),
            ty(view),
            hints_text(op),
            token_source(op)
        )
    };

    let mut inv = Inventory {
        memory: vec![],
        loops: vec![],
        mma: vec![],
        casts: vec![],
        assumes: BTreeMap::new(),
        worker_warps: None,
        cga: None,
        k_bound: (usize::MAX, BTreeSet::new()),
        k_bound_from_view: false,
    };
    fn visit<'a>(b: &'a Block, depth: usize, f: &mut dyn FnMut(&'a Operation, usize)) {
        for op in &b.ops {
            f(op, depth);
            let inner = depth + usize::from(op.opcode == Opcode::For);
            for r in &op.regions {
                visit(r, inner, f);
            }
        }
    }
    visit(body, 0, &mut |op, depth| match op.opcode {
        Opcode::LoadViewTko | Opcode::StoreViewTko | Opcode::LoadPtrTko | Opcode::StorePtrTko => {
            inv.memory.push(mem_text(op, depth));
        }
        Opcode::For => {
            let region = &op.regions[0];
            let mut mem = vec![];
            let mut has_mma = false;
            region.walk(&mut |o| {
                if matches!(o.opcode, Opcode::LoadViewTko | Opcode::StoreViewTko) {
                    mem.push(o.opcode.mnemonic());
                }
                has_mma |= o.opcode == Opcode::MmaF;
            });
            let carried: Vec<String> = op
                .operand_group("initValues")
                .iter()
                .map(|&v| ty(v))
                .collect();
            inv.loops.push(format!(
                "depth={depth} iv={} carries=[{}] {{{}}}",
                ty(region.args[0]),
                carried.join(", "),
                mem.join("; ")
            ));
            // The innermost loop with the product is the K loop.
            let nested_for = region.ops.iter().any(|o| o.opcode == Opcode::For);
            if has_mma && !nested_for {
                let ub = op.operand_group("upperBound")[0];
                let (def, def_depth) = d
                    .op_of
                    .get(&ub)
                    .map(|(o, dd)| (Some(*o), *dd))
                    .unwrap_or((None, 0));
                inv.k_bound = (def_depth, depends(ub));
                inv.k_bound_from_view = def.is_some_and(|o| o.opcode == Opcode::GetIndexSpaceShape);
            }
        }
        Opcode::MmaF => {
            let [l, r, a] = ["lhs", "rhs", "acc"].map(|g| ty(op.operand_group(g)[0]));
            inv.mma.push(format!(
                "mmaf {l} {r} {a} fast_acc={}",
                op.attr("fast_acc").is_some()
            ));
        }
        Opcode::FToF => {
            inv.casts.push(format!(
                "ftof {} -> {} {:?}",
                ty(op.operand_group("from_")[0]),
                ty(op.results[0]),
                op.attr("rounding_mode")
            ));
        }
        Opcode::Assume => {
            // The parameter this assume (possibly of an assume) constrains.
            let mut v = op.operand_group("value")[0];
            while let Some((o, _)) = d.op_of.get(&v).filter(|(o, _)| o.opcode == Opcode::Assume) {
                v = o.operand_group("value")[0];
            }
            if let Some(p) = param_index.get(&v).and_then(|i| params.get(i)) {
                inv.assumes
                    .entry(*p)
                    .or_default()
                    .insert(format!("{:?}", op.attr("predicate")));
            }
        }
        _ => {}
    });
    inv.worker_warps = entry_hint(m, "num_worker_warps_per_cta");
    inv.cga = entry_hint(m, "num_cta_in_cga");
    inv
}

/// The entry's hint `name`, as text.
fn entry_hint(m: &IrModule, name: &str) -> Option<String> {
    match &entry_fn(m).kind {
        FunctionKind::Entry { hints } => hints
            .by_arch
            .iter()
            .flat_map(|(a, v)| v.iter().map(move |(k, x)| (a, k, x)))
            .find(|(_, k, _)| k.as_str() == name)
            .map(|(a, _, x)| format!("{a}={x:?}")),
        _ => None,
    }
}

fn count(m: &IrModule, opcode: Opcode) -> usize {
    let mut n = 0;
    entry_fn(m)
        .body
        .as_ref()
        .unwrap()
        .walk(&mut |o| n += usize::from(o.opcode == opcode));
    n
}

// ---------------------------------------------------------------------------------------------------------
// Tests.

#[test]
fn host_configurations() {
    // What `config::choose_product` gives the two benchmark shapes on an H200-sized target (the
    // catalog plans for 132 SMs), and the tuner candidates compared below.
    let c4 = our_candidates(4096);
    let c8 = our_candidates(8192);
    // Both take tiles split over 2-CTA clusters (`config::choose_plain`); the one-CTA defaults they
    // replaced come next.
    assert_eq!(c4[0].0, "gemm_persistent 256x256x64 w8 c2");
    assert_eq!(c8[0].0, "gemm_persistent 256x256x64 w8 c2");
    assert_eq!(c4[1].0, "gemm_persistent 128x128x64");
    assert_eq!(c8[1].0, "gemm_persistent 128x256x64 w8");
    for (config, _) in PAIRS {
        for c in [&c4, &c8] {
            assert!(c.iter().any(|(n, _, _)| n == config), "{config}");
        }
    }
}

/// Tiles split over 2-CTA clusters: a block of the grid is a cluster, so a persistent grid is half
/// the SMs and a one-tile-per-block grid is the tile count; the kernel carries the hint.
#[test]
fn cluster_candidates_grid_clusters() {
    use cutile_kernels::op::{Operand, Target};
    let t = Target::planning(cutile::toolchain::GpuArch::Sm90);
    let o = |n, i, s: &[i64]| Operand::described(n, i, cutile_ir::ScalarType::BF16, s);
    let ops = [
        o("a", 0, &[4096, 4096]),
        o("b", 1, &[4096, 4096]),
        o("c", 2, &[4096, 4096]),
    ];
    let all = cutile_kernels::gemm::plan(&ops, &t, true).unwrap();
    for (config, grid) in [
        ("gemm_persistent 256x256x64 w8 c2", 66),
        ("gemm_persistent 128x128x64 c2", 66),
        ("gemm 256x256x64 w8 c2", 16 * 16),
    ] {
        let l = all
            .iter()
            .find(|l| l.config == config)
            .unwrap_or_else(|| panic!("no candidate `{config}`"));
        assert_eq!(l.grid, Some((grid, 1, 1)), "{config}");
        let (k, metas) = ours(4096, config);
        let m = k.specialize(&metas).unwrap().module;
        // Its value is compared with cuTile's `num_ctas = 2` in `gemm_matches_cutile`.
        assert!(entry_hint(&m, "num_cta_in_cga").is_some(), "{config}");
    }
    // The one-CTA tile carries no cluster hint.
    let (k, metas) = ours(4096, "gemm_persistent 128x128x64");
    let m = k.specialize(&metas).unwrap().module;
    assert_eq!(entry_hint(&m, "num_cta_in_cga"), None);
    // sm_80 has no clusters: neither the default nor any candidate takes them there.
    let a100 = Target {
        arch: cutile::toolchain::GpuArch::Sm80,
        sm_count: 108,
        device: 0,
    };
    let all = cutile_kernels::gemm::plan(&ops, &a100, true).unwrap();
    assert_eq!(all[0].config, "gemm_persistent 128x128x64");
    assert!(all.iter().all(|l| !l.config.contains(" c2")));
}

#[test]
fn gemm_matches_cutile() {
    for s in [4096, 8192] {
        for (config, fixture) in PAIRS {
            let fixture = fixture.replace("{S}", &s.to_string());
            let (k, metas) = ours(s, config);
            let o = k.specialize(&metas).unwrap().module;
            let t = theirs(&fixture);
            let (oi, ti) = (inventory(&o), inventory(&t));
            assert_eq!(oi, ti, "{config} at {s}³: ours (left) against {fixture}");
            // Sanity of what the inventory caught.
            let persistent = config.starts_with("gemm_persistent");
            assert_eq!(oi.loops.len(), 1 + usize::from(persistent), "{config}");
            assert_eq!(oi.memory.len(), 3, "{config}");
            assert_eq!(oi.mma.len(), 1, "{config}");
            assert!(
                oi.memory
                    .iter()
                    .all(|m| m.contains("view_tko") && m.contains("hints=[]")),
                "{config}: {:?}",
                oi.memory
            );
            assert_eq!(oi.assumes.len(), 12, "{config}: {:?}", oi.assumes);
            if persistent {
                // The K loop's trip count comes from `K` alone and is computed once, before the tile
                // loop (cuTile: `cdiv(K, tk)`; ours: `gemm::dsl::k_tiles`), not from the view's
                // index space (3-4 more SASS instructions per K step: `docs/gemm-ir-diff.md`).
                assert_eq!(oi.k_bound.0, 0, "{config}");
                assert_eq!(
                    oi.k_bound.1,
                    BTreeSet::from([(0, "shape1")]),
                    "{config}: the K loop's bound must depend on `a`'s K extent only"
                );
                assert!(!oi.k_bound_from_view, "{config}");
            } else {
                // One tile per block: both use the view's index space (`ct.num_tiles`), outside loops.
                assert!(oi.k_bound_from_view && oi.k_bound.0 == 0, "{config}");
            }
        }
    }
}

#[test]
fn deliberate_differences() {
    for (config, fixture) in PAIRS {
        let fixture = fixture.replace("{S}", "8192");
        let (k, metas) = ours(8192, config);
        let o = k.specialize(&metas).unwrap().module;
        let t = theirs(&fixture);
        // `occupancy = 1`: cuTile's bench sets it; tileiras gives these kernels one block per SM
        // without it (the PTX is identical with and without: `docs/gemm-ir-diff.md`).
        assert!(entry_hint(&t, "occupancy").is_some(), "{fixture}");
        assert_eq!(entry_hint(&o, "occupancy"), None, "{config}");
        // The tile order's band height is a run-time parameter (the tuner's `g1` candidate), cuTile's a
        // constant 8: one more entry parameter.
        assert_eq!(
            entry_fn(&o).param_types.len(),
            entry_fn(&t).param_types.len() + 1,
            "{config}"
        );
        // The tile index: cuTile's floor division (`//`, `%` with sign fix-ups: `select`s) against our
        // truncating division (indices are never negative).
        assert_eq!(count(&o, Opcode::Select), 0, "{config}");
        assert!(count(&t, Opcode::Select) >= 2, "{fixture}");
    }
}

// ---------------------------------------------------------------------------------------------------------
// tileiras: the same resources.

#[test]
fn same_resources_as_cutile_sm90() {
    use cutile::toolchain::{CompileRequest, GpuArch, Tileiras};
    let test = "same_resources_as_cutile_sm90";
    let tileiras = match Tileiras::discover() {
        Ok(t) => t,
        Err(e) => {
            cutile_testkit::skip(test, &format!("tileiras not found ({e})"));
            return;
        }
    };
    let req = CompileRequest::new(GpuArch::Sm90);
    for (config, fixture) in PAIRS {
        let fixture = fixture.replace("{S}", "8192");
        let (k, metas) = ours(8192, config);
        let s = k.specialize(&metas).unwrap();
        let o = common::compile_cached(&tileiras, &s, GpuArch::Sm90).unwrap();
        let t = cutile::launch::compile_bytecode_cached(&tileiras, &fixture_bytes(&fixture), &req)
            .unwrap()
            .0;
        let (or, of, os, ot) = common::resources(&o);
        let (tr, tf, ts, tt) = common::resources(&t);
        println!(
            "{config}: ours {or} registers, {of} B frame, {os} B smem, {ot} B code; \
             {fixture}: {tr}, {tf}, {ts}, {tt}"
        );
        assert_eq!((or, of, os), (tr, tf, ts), "{config} against {fixture}");
        assert!(ot <= tt, "{config}: {ot} B of code against cuTile's {tt}");
    }
}
