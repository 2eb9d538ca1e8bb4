//! The gather / persistent softmax and norm kernels against cuTile Python's fastest forms of the same kernels.
//!
//! - IR of each new kernel pinned as an insta snapshot and verified;
//! - a structural comparison with cuTile's IR (`tests/cutile_reference/*.tilebc`, made by
//!   `tests/cutile_reference/gen_reference.py` from cuTile 1.7.0): per memory op its family, mask and hints;
//!   the rounding / flush-to-zero attributes of `exp`, `exp2` and `divf`; reductions; loop skeleton; entry
//!   hints (occupancy, worker warps). Our whole-row gather kernels branch on "the row is exactly `BN` wide":
//!   the `then` branch must match cuTile's `check_bounds=False` IR, the `else` branch its masked IR;
//! - every new kernel compiled by tileiras for sm_80, sm_90, sm_100 and sm_120 (skipped without tileiras);
//! - GPU runs on ragged shapes (and -inf entries for softmax) against the CPU references, f32/f16/bf16
//!   (ignored without `--include-ignored`; skipped without a GPU).

#![allow(clippy::unwrap_used)]

use crate::common;
use std::collections::BTreeSet;

use common::*;
use cutile::dsl::{Kernel, TensorMeta};
use cutile::runtime::{CuModule, Device, DeviceElement, KernelArgs, Stream, Tensor};
use cutile_ir::ScalarType::{self, *};
use cutile_ir::{Block, FunctionKind, Module as IrModule, OpAttr, Opcode, Operation};
use cutile_kernels::norm::{self, kernels as n};
use cutile_kernels::softmax::{self, kernels as sm};
use half::{bf16, f16};

/// (name, kernel, arrays, snapshot it?): one bf16 benchmark shape per kernel (snapshotted) and a ragged one.
fn cases() -> Vec<common::IrCase> {
    vec![
        (
            "softmax_gather_bf16_8192",
            sm::softmax_gather::kernel::<bf16, 8192>(),
            softmax_arrays(BF16, 8192, 8192),
            true,
        ),
        (
            "softmax_gather_f16_1024_cols1000",
            sm::softmax_gather::kernel::<f16, 1024>(),
            softmax_arrays(F16, 37, 1000),
            false,
        ),
        (
            "softmax_gather_online_bf16_4096",
            sm::softmax_gather_online::kernel::<bf16, 4096>(),
            softmax_arrays(BF16, 16, 131072),
            true,
        ),
        (
            "rms_norm_gather_bf16_8192",
            n::rms_norm_gather::kernel::<bf16, 8192>(),
            rms_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "layer_norm_gather_bf16_1024",
            n::layer_norm_gather::kernel::<bf16, 1024>(),
            ln_arrays(BF16, 8192, 1024),
            true,
        ),
        (
            "layer_norm_persistent_bf16_2x8192",
            n::layer_norm_persistent::kernel::<bf16, 2, 8192>(),
            ln_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "layer_norm_persistent_f32_4x1024_cols1000",
            n::layer_norm_persistent::kernel::<f32, 4, 1024>(),
            ln_arrays(F32, 37, 1000),
            false,
        ),
        (
            "rms_norm_gather_looped_bf16_2048",
            n::rms_norm_gather_looped::kernel::<bf16, 2048>(),
            rms_arrays(BF16, 16384, 8192),
            true,
        ),
        (
            "layer_norm_gather_looped_bf16_2048",
            n::layer_norm_gather_looped::kernel::<bf16, 2048>(),
            ln_arrays(BF16, 16384, 8192),
            true,
        ),
    ]
}

#[test]
fn ir_snapshots_verify() {
    for (name, ir) in common::verified_snapshot_irs(cases()) {
        insta::assert_snapshot!(name, ir);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Structural comparison with cuTile.

/// What must agree between our lowering and cuTile's.
#[derive(Debug, PartialEq, Eq)]
struct Inventory {
    /// Memory ops in program order: `mnemonic mask=… hints=…`.
    memory: Vec<String>,
    /// `exp`/`exp2`/`divf` forms used: `mnemonic rounding=… ftz=…`.
    math: BTreeSet<String>,
    /// Reductions as (axis, combiner), sorted.
    reductions: Vec<(u64, &'static str)>,
    /// Loops with the memory ops they contain.
    loops: Vec<String>,
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

fn mem_text(op: &Operation) -> String {
    let masked = !op.operand_group("mask").is_empty();
    format!(
        "{} mask={masked} hints=[{}]",
        op.opcode.mnemonic(),
        hints_text(op)
    )
}

const MEMORY: [Opcode; 4] = [
    Opcode::LoadViewTko,
    Opcode::StoreViewTko,
    Opcode::LoadPtrTko,
    Opcode::StorePtrTko,
];

fn inventory(ops: &[Operation]) -> Inventory {
    let mut inv = Inventory {
        memory: vec![],
        math: BTreeSet::new(),
        reductions: vec![],
        loops: vec![],
    };
    let mut visit = |op: &Operation| {
        if MEMORY.contains(&op.opcode) {
            inv.memory.push(mem_text(op));
        }
        if matches!(op.opcode, Opcode::Exp | Opcode::Exp2 | Opcode::DivF) {
            const NAMES: [&str; 8] = [
                "nearest_even",
                "zero",
                "negative_inf",
                "positive_inf",
                "approx",
                "full",
                "nearest_int_to_zero",
                "nearest_away",
            ];
            let rounding = match op.attr("rounding_mode") {
                Some(OpAttr::Enum(e)) => NAMES
                    .get(e.value as usize)
                    .map_or_else(|| format!("{e:?}"), |n| (*n).to_owned()),
                _ => "-".into(),
            };
            let ftz = op.attr("flush_to_zero").is_some();
            inv.math.insert(format!(
                "{} rounding={rounding} ftz={ftz}",
                op.opcode.mnemonic()
            ));
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
        if matches!(op.opcode, Opcode::For | Opcode::Loop) {
            let mut names = vec![];
            for b in &op.regions {
                b.walk(&mut |o: &Operation| {
                    if MEMORY.contains(&o.opcode) {
                        names.push(mem_text(o));
                    }
                });
            }
            inv.loops
                .push(format!("{}{{{}}}", op.opcode.mnemonic(), names.join("; ")));
        }
    };
    for op in ops {
        visit_all(op, &mut visit);
    }
    inv.reductions.sort();
    inv
}

fn visit_all(op: &Operation, f: &mut impl FnMut(&Operation)) {
    f(op);
    for b in &op.regions {
        for o in &b.ops {
            visit_all(o, f);
        }
    }
}

/// The single entry's body and its (occupancy, num_worker_warps) hints.
fn entry(m: &IrModule) -> (&Block, Vec<String>) {
    let f = m.functions.iter().find(|f| f.is_entry()).unwrap();
    let hints = match &f.kind {
        FunctionKind::Entry { hints } => hints
            .by_arch
            .iter()
            .flat_map(|(a, v)| {
                v.iter()
                    .filter(|(k, _)| k == "occupancy" || k == "num_worker_warps")
                    .map(move |(k, x)| format!("{a}.{k}={x:?}"))
            })
            .collect(),
        _ => vec![],
    };
    (f.body.as_ref().unwrap(), hints)
}

fn theirs(name: &str) -> IrModule {
    let path = format!(
        "{}/tests/cutile_reference/{name}.tilebc",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    cutile_ir::bytecode::read_module(&bytes).unwrap()
}

fn ours(k: Kernel, arrays: Vec<TensorMeta>) -> IrModule {
    k.specialize(&arrays).unwrap().module
}

/// Our whole-row gather kernel: the `then` branch (row exactly `BN` wide) against cuTile's unmasked
/// fixture, the `else` branch against its masked (ragged) fixture, and the entry hints.
fn compare_branches(ours: &IrModule, exact: &str, ragged: &str) {
    let (body, our_hints) = entry(ours);
    let ifs: Vec<&Operation> = body.ops.iter().filter(|o| o.opcode == Opcode::If).collect();
    assert_eq!(ifs.len(), 1, "one top-level if expected");
    let outside = inventory(
        &body
            .ops
            .iter()
            .filter(|o| o.opcode != Opcode::If)
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert!(
        outside.memory.is_empty(),
        "memory ops outside the branch: {outside:?}"
    );
    for (region, fixture) in [(&ifs[0].regions[0], exact), (&ifs[0].regions[1], ragged)] {
        let m = theirs(fixture);
        let (their_body, their_hints) = entry(&m);
        let t = inventory(&their_body.ops);
        let o = inventory(&region.ops);
        assert_eq!(o, t, "{fixture}: ours (left) differs from cuTile (right)");
        assert_eq!(our_hints, their_hints, "{fixture}: entry hints");
    }
}

#[test]
fn softmax_gather_matches_cutile() {
    for (dt, meta, fixture) in [
        (
            BF16,
            sm::softmax_gather::kernel::<bf16, 8192>(),
            "softmax_gather_bf16_8192x8192",
        ),
        (
            F16,
            sm::softmax_gather::kernel::<f16, 8192>(),
            "softmax_gather_f16_8192x8192",
        ),
        (
            F32,
            sm::softmax_gather::kernel::<f32, 8192>(),
            "softmax_gather_f32_8192x8192",
        ),
    ] {
        compare_branches(
            &ours(meta, softmax_arrays(dt, 8192, 8192)),
            fixture,
            if dt == BF16 {
                "softmax_gather_bf16_37x1000"
            } else {
                fixture_masked_softmax()
            },
        );
    }
    for (rows, cols) in [(4096, 4096), (32768, 1024), (1024, 32768), (16, 131072)] {
        let k = match cols {
            1024 => sm::softmax_gather::kernel::<bf16, 1024>(),
            4096 => sm::softmax_gather::kernel::<bf16, 4096>(),
            32768 => sm::softmax_gather::kernel::<bf16, 32768>(),
            _ => sm::softmax_gather::kernel::<bf16, 131072>(),
        };
        compare_branches(
            &ours(k, softmax_arrays(BF16, rows, cols)),
            &format!("softmax_gather_bf16_{rows}x{cols}"),
            "softmax_gather_bf16_37x1000",
        );
    }
    // The ragged specialization has the same two branches.
    compare_branches(
        &ours(
            sm::softmax_gather::kernel::<bf16, 1024>(),
            softmax_arrays(BF16, 37, 1000),
        ),
        "softmax_gather_bf16_32768x1024",
        "softmax_gather_bf16_37x1000",
    );
}

/// The only masked cuTile softmax fixture is bf16; the memory/math inventory does not depend on the
/// element type, which the unmasked f16/f32 comparisons above confirm.
fn fixture_masked_softmax() -> &'static str {
    "softmax_gather_bf16_37x1000"
}

#[test]
fn rms_norm_gather_matches_cutile() {
    for (rows, cols) in [(16384, 8192), (8192, 1024), (4096, 4096)] {
        let k = match cols {
            1024 => n::rms_norm_gather::kernel::<bf16, 1024>(),
            4096 => n::rms_norm_gather::kernel::<bf16, 4096>(),
            _ => n::rms_norm_gather::kernel::<bf16, 8192>(),
        };
        compare_branches(
            &ours(k, rms_arrays(BF16, rows, cols)),
            &format!("rmsnorm_row_bf16_{rows}x{cols}"),
            "rmsnorm_row_bf16_37x1000",
        );
    }
    for (dt, k) in [
        (F16, n::rms_norm_gather::kernel::<f16, 1024>()),
        (F32, n::rms_norm_gather::kernel::<f32, 1024>()),
    ] {
        let name = if dt == F16 {
            "rmsnorm_row_f16_8192x1024"
        } else {
            "rmsnorm_row_f32_8192x1024"
        };
        compare_branches(
            &ours(k, rms_arrays(dt, 8192, 1024)),
            name,
            "rmsnorm_row_bf16_37x1000",
        );
    }
}

#[test]
fn layer_norm_gather_matches_rms_norm_gather_pattern() {
    // cuTile's reference set has no gather LayerNorm; its memory pattern must be cuTile's gather RMSNorm's
    // with one more gather (the bias), and its math the same full-precision forms.
    let m = ours(
        n::layer_norm_gather::kernel::<bf16, 1024>(),
        ln_arrays(BF16, 8192, 1024),
    );
    let (body, _) = entry(&m);
    let iff = body.ops.iter().find(|o| o.opcode == Opcode::If).unwrap();
    for (region, fixture) in [
        (&iff.regions[0], "rmsnorm_row_bf16_8192x1024"),
        (&iff.regions[1], "rmsnorm_row_bf16_37x1000"),
    ] {
        let t = inventory(&entry(&theirs(fixture)).0.ops);
        let o = inventory(&region.ops);
        let mut want = t.memory.clone();
        want.insert(2, t.memory[1].clone());
        assert_eq!(o.memory, want, "{fixture}");
        assert_eq!(o.math, t.math, "{fixture}");
    }
}

#[test]
fn layer_norm_persistent_matches_cutile() {
    for (dt, rows, cols, k) in [
        (
            BF16,
            16384,
            8192,
            n::layer_norm_persistent::kernel::<bf16, 2, 8192>(),
        ),
        (
            BF16,
            4096,
            4096,
            n::layer_norm_persistent::kernel::<bf16, 4, 4096>(),
        ),
        (
            BF16,
            8192,
            1024,
            n::layer_norm_persistent::kernel::<bf16, 16, 1024>(),
        ),
        (
            F16,
            8192,
            1024,
            n::layer_norm_persistent::kernel::<f16, 16, 1024>(),
        ),
        (
            F32,
            8192,
            1024,
            n::layer_norm_persistent::kernel::<f32, 16, 1024>(),
        ),
    ] {
        let name = format!(
            "layernorm_persist_{}_{rows}x{cols}",
            match dt {
                BF16 => "bf16",
                F16 => "f16",
                _ => "f32",
            }
        );
        let o = ours(k, ln_arrays(dt, rows, cols));
        let t = theirs(&name);
        let (ob, oh) = entry(&o);
        let (tb, th) = entry(&t);
        assert_eq!(inventory(&ob.ops), inventory(&tb.ops), "{name}");
        assert_eq!(oh, th, "{name}: entry hints");
    }
}

#[test]
fn long_row_gather_kernels_use_cutiles_fast_forms() {
    // No cuTile counterpart: the chunked kernels must use the same memory-op family, hints and math forms
    // as cuTile's whole-row gather kernels, inside two loops.
    let sm_ref = inventory(&entry(&theirs("softmax_gather_bf16_37x1000")).0.ops);
    let o = inventory(
        &entry(&ours(
            sm::softmax_gather_online::kernel::<bf16, 4096>(),
            softmax_arrays(BF16, 16, 131072),
        ))
        .0
        .ops,
    );
    assert!(o.math.is_superset(&sm_ref.math), "{o:?}");
    assert!(
        o.math
            .iter()
            .all(|m| !m.starts_with("exp ") || m.contains("rounding=approx")),
        "{o:?}"
    );
    assert_eq!(o.loops.len(), 2, "{o:?}");
    let rms_ref = inventory(&entry(&theirs("rmsnorm_row_bf16_37x1000")).0.ops);
    for (name, m) in [
        (
            "rms",
            ours(
                n::rms_norm_gather_looped::kernel::<bf16, 2048>(),
                rms_arrays(BF16, 64, 5000),
            ),
        ),
        (
            "ln",
            ours(
                n::layer_norm_gather_looped::kernel::<bf16, 2048>(),
                ln_arrays(BF16, 64, 5000),
            ),
        ),
    ] {
        let o = inventory(&entry(&m).0.ops);
        let allowed: BTreeSet<&String> = rms_ref.memory.iter().collect();
        assert!(
            o.memory.iter().all(|x| allowed.contains(x)),
            "{name}: {o:?}"
        );
        assert_eq!(o.loops.len(), 2, "{name}: {o:?}");
    }
    assert!(
        sm_ref
            .memory
            .iter()
            .all(|x| x.starts_with("load_ptr_tko") || x.starts_with("store_ptr_tko"))
    );
}

#[test]
fn softmax_reference_with_neg_inf_entries() {
    // -inf entries get probability 0; the rest is the softmax of the finite entries.
    let inf = f32::NEG_INFINITY;
    let got = softmax::row_softmax_reference(&[inf, 0.0, inf, 0.0], 4);
    assert_all_close("softmax", &got, &[0.0, 0.5, 0.0, 0.5], 1e-7, 0.0);
}

// ---------------------------------------------------------------------------------------------------------
// tileiras for four architectures.

#[test]
fn compile_four_archs() {
    let mut all: Vec<(&'static str, Kernel, Vec<TensorMeta>)> =
        cases().into_iter().map(|(a, b, c, _)| (a, b, c)).collect();
    all.extend(gpu_cases().into_iter().map(|c| {
        let a = c.arrays();
        (c.name, c.kernel, a)
    }));
    common::compile_four_archs("compile_four_archs", all);
    // sm_90 cubins of the GPU cases for a GPU machine without tileiras.
    compile_all_sm90(
        "compile_four_archs",
        gpu_cases().into_iter().map(|c| {
            let a = c.arrays();
            (c.name, c.kernel, a)
        }),
    );
}

// ---------------------------------------------------------------------------------------------------------
// GPU runs against the CPU references.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Softmax,
    Rms,
    Ln,
}

struct GpuCase {
    name: &'static str,
    kernel: Kernel,
    family: Family,
    dtype: ScalarType,
    rows: i64,
    cols: i64,
    /// Grid x; `None`: one block per row.
    grid: Option<u32>,
}

impl GpuCase {
    fn arrays(&self) -> Vec<TensorMeta> {
        match self.family {
            Family::Softmax => softmax_arrays(self.dtype, self.rows, self.cols),
            Family::Rms => rms_arrays(self.dtype, self.rows, self.cols),
            Family::Ln => ln_arrays(self.dtype, self.rows, self.cols),
        }
    }
}

/// Ragged shapes (37 rows; 1000 columns in a 1024 tile; 5000 = 2 chunks of 2048 and a partial one) and
/// the exact-width branch (1024 columns in a 1024 tile), in f32, f16 and bf16.
fn gpu_cases() -> Vec<GpuCase> {
    let c = |name, kernel, family, dtype, cols, grid| GpuCase {
        name,
        kernel,
        family,
        dtype,
        rows: 37,
        cols,
        grid,
    };
    use Family::*;
    vec![
        c(
            "g_softmax_gather_f32",
            sm::softmax_gather::kernel::<f32, 1024>(),
            Softmax,
            F32,
            1000,
            None,
        ),
        c(
            "g_softmax_gather_f16",
            sm::softmax_gather::kernel::<f16, 1024>(),
            Softmax,
            F16,
            1000,
            None,
        ),
        c(
            "g_softmax_gather_bf16",
            sm::softmax_gather::kernel::<bf16, 1024>(),
            Softmax,
            BF16,
            1000,
            None,
        ),
        c(
            "g_softmax_gather_bf16_exact",
            sm::softmax_gather::kernel::<bf16, 1024>(),
            Softmax,
            BF16,
            1024,
            None,
        ),
        c(
            "g_softmax_online_f32",
            sm::softmax_gather_online::kernel::<f32, 2048>(),
            Softmax,
            F32,
            5000,
            None,
        ),
        c(
            "g_softmax_online_bf16",
            sm::softmax_gather_online::kernel::<bf16, 2048>(),
            Softmax,
            BF16,
            5000,
            None,
        ),
        c(
            "g_rms_gather_f32",
            n::rms_norm_gather::kernel::<f32, 1024>(),
            Rms,
            F32,
            1000,
            None,
        ),
        c(
            "g_rms_gather_f16",
            n::rms_norm_gather::kernel::<f16, 1024>(),
            Rms,
            F16,
            1000,
            None,
        ),
        c(
            "g_rms_gather_bf16_exact",
            n::rms_norm_gather::kernel::<bf16, 1024>(),
            Rms,
            BF16,
            1024,
            None,
        ),
        c(
            "g_rms_gather_looped_bf16",
            n::rms_norm_gather_looped::kernel::<bf16, 2048>(),
            Rms,
            BF16,
            5000,
            None,
        ),
        c(
            "g_ln_gather_f32",
            n::layer_norm_gather::kernel::<f32, 1024>(),
            Ln,
            F32,
            1000,
            None,
        ),
        c(
            "g_ln_gather_bf16",
            n::layer_norm_gather::kernel::<bf16, 1024>(),
            Ln,
            BF16,
            1000,
            None,
        ),
        c(
            "g_ln_gather_f16_exact",
            n::layer_norm_gather::kernel::<f16, 1024>(),
            Ln,
            F16,
            1024,
            None,
        ),
        c(
            "g_ln_gather_looped_f32",
            n::layer_norm_gather_looped::kernel::<f32, 2048>(),
            Ln,
            F32,
            5000,
            None,
        ),
        c(
            "g_ln_persistent_f32",
            n::layer_norm_persistent::kernel::<f32, 4, 1024>(),
            Ln,
            F32,
            1000,
            Some(3),
        ),
        c(
            "g_ln_persistent_bf16",
            n::layer_norm_persistent::kernel::<bf16, 2, 1024>(),
            Ln,
            BF16,
            1000,
            Some(5),
        ),
    ]
}

/// Append a row-major `shape` array's pointer, extents and strides (i32 index type) to `args`.
fn tensor_args<'a>(args: KernelArgs<'a>, ptr: u64, shape: &[i64]) -> KernelArgs<'a> {
    let strides = TensorMeta::contiguous(F32, shape).strides;
    let args = shape.iter().fold(args.ptr(ptr), |a, &d| a.arg(d as i32));
    strides.iter().fold(args, |a, &s| a.arg(s as i32))
}

/// Max abs error against the reference (NaN where the reference is finite counts as infinite), or `None`
/// when skipped.
fn run_case<T: DeviceElement>(c: &GpuCase, dev: &Device, stream: &Stream) -> Option<f32> {
    let s = c.kernel.specialize(&c.arrays()).expect("specialize");
    let cubin = gpu_cubin(c.name, &s)?;
    let (rows, cols) = (c.rows as usize, c.cols as usize);
    let round = |v: Vec<f32>| -> Vec<f32> {
        v.into_iter()
            .map(|x| T::from_f64(x as f64).to_f64() as f32)
            .collect()
    };
    let mut x: Vec<f32> = data(rows * cols, 1).iter().map(|v| 4.0 * v).collect();
    if c.family == Family::Softmax {
        // -inf entries: scattered ones, and (row 3) the whole first 2100 columns, so the online kernel sees a
        // chunk of only -inf before finite values.
        for (i, v) in x.iter_mut().enumerate() {
            if i % 7 == 3 || (i / cols == 3 && i % cols < 2100.min(cols - 1)) {
                *v = f32::NEG_INFINITY;
            }
        }
    }
    let x = round(x);
    let w = round(data(cols, 2).iter().map(|v| 1.0 + 0.5 * v).collect());
    let b = round(data(cols, 3).iter().map(|v| 0.1 * v).collect());
    let eps = 1e-5f32;
    let up = |v: &[f32], shape: &[i64]| {
        let h: Vec<T> = v.iter().map(|&x| T::from_f64(x as f64)).collect();
        Tensor::from_host(dev, &h, shape).expect("upload")
    };
    let tx = up(&x, &[c.rows, c.cols]);
    let (tw, tb) = (up(&w, &[c.cols]), up(&b, &[c.cols]));
    let ty = Tensor::<T>::zeros(dev, &[c.rows, c.cols]).expect("allocate");
    let mut args = tensor_args(KernelArgs::new(), tx.device_ptr(), &[c.rows, c.cols]);
    if c.family != Family::Softmax {
        args = tensor_args(args, tw.device_ptr(), &[c.cols]);
    }
    if c.family == Family::Ln {
        args = tensor_args(args, tb.device_ptr(), &[c.cols]);
    }
    if c.family != Family::Softmax {
        args = args.arg(eps);
    }
    args = tensor_args(args, ty.device_ptr(), &[c.rows, c.cols]);
    let module = CuModule::from_cubin(dev, &cubin).expect("load the cubin");
    let kernel = module.kernel(s.entry).expect("find the kernel");
    let grid = c.grid.unwrap_or(c.rows as u32);
    // SAFETY: every pointer is a live allocation of the shape passed next to it; the grid is one block per
    // row (gather kernels) or any positive count (persistent kernel).
    unsafe { kernel.launch(stream, (grid, 1, 1), &args) }.expect("launch");
    let got: Vec<f32> = ty
        .to_host()
        .expect("download")
        .into_iter()
        .map(|v| v.to_f64() as f32)
        .collect();
    let want = match c.family {
        Family::Softmax => softmax::row_softmax_reference(&x, cols),
        Family::Rms => norm::rms_norm_reference(&x, &w, eps, cols),
        Family::Ln => norm::layer_norm_reference(&x, &w, &b, eps, cols),
    };
    Some(max_abs_err(&got, &want))
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn gpu_matches_reference() {
    let Some((dev, stream)) = gpu_device("gpu_matches_reference") else {
        return;
    };
    let mut failures = vec![];
    for c in gpu_cases() {
        let r = match c.dtype {
            F32 => run_case::<f32>(&c, &dev, &stream),
            F16 => run_case::<f16>(&c, &dev, &stream),
            _ => run_case::<bf16>(&c, &dev, &stream),
        };
        // Softmax outputs are ≤ 1: approximate exp/div add a few f32 ulp; f16/bf16 output rounding dominates.
        // Norm outputs reach ~6 (|x| ≤ 4 normalized, w ≤ 1.5).
        let tol = match (c.family, c.dtype) {
            (Family::Softmax, F32) => 1e-5,
            (Family::Softmax, F16) => 1e-3,
            (Family::Softmax, _) => 8e-3,
            (_, F32) => 1e-4,
            (_, F16) => 8e-3,
            _ => 5e-2,
        };
        if let Some(err) = r {
            println!("{}: max abs error {err:e} (tolerance {tol:e})", c.name);
            if err > tol {
                failures.push(c.name);
            }
        }
    }
    assert!(failures.is_empty(), "mismatches: {failures:?}");
}
