//! Our DSL softmax and GEMM lower to the same op inventory as cuTile Python's versions of the same kernels
//! (the reference bytecode in `cutile/ir/tests/bytecode_data/`, produced by cuTile 1.7.0): the same memory-op
//! families, reductions on the same axes with the same combiners, the same `mma`, and the same loop structure.
//! Incidental differences (constants, assume hints, optimization hints, SSA order) are not part of the
//! inventory.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use cutile::dsl::TensorMeta;
use cutile_ir::ScalarType::{F16, F32};
use cutile_ir::{Block, Module, OpAttr, Opcode, Operation};

/// What must agree between two lowerings of one kernel.
#[derive(Debug, PartialEq, Eq)]
struct Inventory {
    /// Memory-op families used (view loads/stores, pointer loads/stores, view construction).
    memory: BTreeSet<&'static str>,
    /// Reductions as (axis, combining op of the region body), sorted.
    reductions: Vec<(u64, &'static str)>,
    /// Matrix ops (`mmaf`, `mmai`, `mmaf_scaled`) in order.
    mma: Vec<&'static str>,
    /// Control-flow skeleton: region ops with the memory/mma ops they contain, e.g.
    /// `for{load_view_tko,load_view_tko,mmaf}`.
    control: Vec<String>,
}

const MEMORY: [Opcode; 6] = [
    Opcode::LoadViewTko,
    Opcode::StoreViewTko,
    Opcode::LoadPtrTko,
    Opcode::StorePtrTko,
    Opcode::MakeTensorView,
    Opcode::MakePartitionView,
];
const MMA: [Opcode; 3] = [Opcode::MmaF, Opcode::MmaI, Opcode::MmaFScaled];

fn inventory(m: &Module) -> Inventory {
    let mut inv = Inventory {
        memory: BTreeSet::new(),
        reductions: vec![],
        mma: vec![],
        control: vec![],
    };
    for f in m.functions.iter().filter(|f| f.is_entry()) {
        f.walk(&mut |op: &Operation| {
            if MEMORY.contains(&op.opcode) {
                inv.memory.insert(op.opcode.mnemonic());
            }
            if MMA.contains(&op.opcode) {
                inv.mma.push(op.opcode.mnemonic());
            }
            if op.opcode == Opcode::Reduce {
                let dim = match op.attr("dim") {
                    Some(OpAttr::Int(d)) => *d,
                    other => panic!("reduce without an integer dim: {other:?}"),
                };
                let combiner = op.regions[0]
                    .ops
                    .iter()
                    .find(|o| !o.opcode.is_terminator())
                    .map(|o| o.opcode.mnemonic())
                    .unwrap_or("none");
                inv.reductions.push((dim, combiner));
            }
            if matches!(op.opcode, Opcode::For | Opcode::Loop | Opcode::If) {
                inv.control.push(format!(
                    "{}{{{}}}",
                    op.opcode.mnemonic(),
                    body_summary(&op.regions)
                ));
            }
        });
    }
    inv.reductions.sort();
    inv
}

/// The memory and mma ops inside a region op's blocks, in order.
fn body_summary(blocks: &[Block]) -> String {
    let mut names = vec![];
    for b in blocks {
        b.walk(&mut |o: &Operation| {
            if MEMORY.contains(&o.opcode) || MMA.contains(&o.opcode) {
                names.push(o.opcode.mnemonic());
            }
        });
    }
    names.join(",")
}

fn cutile_sample(name: &str) -> Module {
    let path = format!(
        "{}/../cutile/ir/tests/bytecode_data/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    cutile_ir::bytecode::read_module(&bytes).unwrap()
}

#[test]
fn softmax_matches_cutile_inventory() {
    // cuTile's sample: softmax of 1x1024 f32 tiles over a 2-D f32 array, -inf padding.
    let theirs = inventory(&cutile_sample("softmax_v13_5.tilebc"));
    let k = cutile_kernels::softmax::kernels::row_softmax::kernel::<f32, 1024>();
    let arrays = vec![TensorMeta::contiguous(F32, &[64, 1024]); 2];
    let ours = inventory(&k.specialize(&arrays).unwrap().module);
    assert_eq!(
        theirs.reductions,
        vec![(1, "addf"), (1, "maxf")],
        "fixture changed"
    );
    assert_eq!(ours, theirs);
}

#[test]
fn gemm_matches_cutile_inventory() {
    // cuTile's sample: 128x128x64 f16 tiles, f32 accumulation, a for loop over K with one mma per step.
    let theirs = inventory(&cutile_sample("matmul_v13_5.tilebc"));
    let k = cutile_kernels::gemm::kernels::gemm::kernel::<half::f16, half::f16, 128, 128, 64>();
    let arrays = vec![
        TensorMeta::contiguous(F16, &[512, 256]),
        TensorMeta::contiguous(F16, &[256, 384]),
        TensorMeta::contiguous(F16, &[512, 384]),
    ];
    let ours = inventory(&k.specialize(&arrays).unwrap().module);
    assert_eq!(theirs.mma, vec!["mmaf"], "fixture changed");
    assert_eq!(ours, theirs);
}
