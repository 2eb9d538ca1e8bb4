//! The launcher without a GPU: argument checking, grid derivation, argument packing against the
//! specialized entry's parameter types, warm-key/specialization agreement, key agreement between the
//! launch path and the AOT path, and the "no tileiras and no bundle" error.
//!
//! Tensors are described with `LaunchArgs::raw_tensor` at made-up device addresses; nothing is launched.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

#[cutile::module]
mod kernels {
    use cutile::core::*;

    #[cutile::entry]
    pub fn vadd<E: Numeric, const B: i32>(
        a: &Tensor<E, S1<DYN>>,
        b: &Tensor<E, S1<DYN>>,
        c: &mut Tensor<E, S1<B>>,
    ) {
        let pid = block_id_x();
        c.store(a.load_tile::<S1<B>>(pid) + b.load_tile::<S1<B>>(pid));
    }

    #[cutile::entry]
    pub fn scale<E: Float, const B: i32>(
        alpha: Scalar<f32>,
        x: &Tensor<E, S1<DYN>>,
        y: &mut Tensor<E, S1<B>>,
    ) {
        let t = x.load_tile::<S1<B>>(block_id_x()).cast::<f32>();
        y.store((alpha * t).cast::<E>());
    }

    /// Rows of a matrix whose second extent is fixed to 64 by the declaration.
    #[cutile::entry]
    pub fn rows64<E: Float, const BN: i32>(
        x: &Tensor<E, S2<DYN, 64>>,
        y: &mut Tensor<E, S2<1, BN>>,
    ) {
        let t = x.load_tile_padded::<S2<1, BN>>((block_id_x(), 0), Padding::Zero);
        y.store(t);
    }

    /// A rank-4 output written at an explicit tile index: no derivable grid.
    #[cutile::entry]
    pub fn first4<E: Numeric>(
        x: &Tensor<E, S4<DYN, DYN, DYN, DYN>>,
        y: &mut Tensor<E, S4<1, 1, 1, 16>>,
    ) {
        let t = x.load_tile::<S4<1, 1, 1, 16>>((0, 0, 0, 0));
        // SAFETY: only tile (0,0,0,0) is written, by every block, with the same value; tests never launch.
        unsafe { y.store_at((0, 0, 0, 0), t) };
    }
}

use cutile::bundle::{Bundle, BundleSet, BundleWriter};
use cutile::cache::{CacheConfig, KernelCache};
use cutile::dsl::{ArgError, TensorMeta};
use cutile::launch::{
    LaunchArgs, LaunchError, Launcher, NO_TOOLCHAIN, ParamLayout, Plan, overlaps,
};
use cutile::runtime::ParamSlot;
use cutile::toolchain::{GpuArch, ToolchainError};
use cutile_ir::ScalarType::{self, *};

const TC: &str = "13.5.37";
/// A 256-byte aligned made-up device address.
const PTR: u64 = 0x7f00_0000_0000;

fn row_major(shape: &[i64]) -> Vec<i64> {
    TensorMeta::contiguous(F32, shape).strides
}

/// A tensor description: (output?, dtype, shape, strides, address).
type Desc = (bool, ScalarType, Vec<i64>, Vec<i64>, u64);

fn t_in(dtype: ScalarType, shape: &[i64]) -> Desc {
    (false, dtype, shape.to_vec(), row_major(shape), PTR)
}
fn t_out(dtype: ScalarType, shape: &[i64]) -> Desc {
    (
        true,
        dtype,
        shape.to_vec(),
        row_major(shape),
        PTR + 0x1000_0000,
    )
}

fn args(descs: &[Desc]) -> LaunchArgs<'_> {
    let mut a = LaunchArgs::new();
    for (out, dtype, shape, strides, ptr) in descs {
        // SAFETY: nothing is launched; the descriptions only feed specialization and packing.
        a = unsafe { a.raw_tensor(*out, *dtype, shape, strides, *ptr, 0) };
    }
    a
}

fn vadd_f32() -> Launcher {
    Launcher::new(kernels::vadd::kernel::<f32, 1024>())
}

fn plan(l: &Launcher, a: &LaunchArgs<'_>) -> Result<Plan, LaunchError> {
    l.plan_for(a, GpuArch::Sm90, TC)
}

/// (what, launcher, tensors, scalar argument, phrases the message must contain)
type ErrCase = (
    &'static str,
    Launcher,
    Vec<Desc>,
    Option<f64>,
    &'static [&'static str],
);

#[test]
fn argument_errors_name_parameter_and_both_sides() {
    let n = [1000i64];
    let cases: Vec<ErrCase> = vec![
        (
            "too few arguments",
            vadd_f32(),
            vec![t_in(F32, &n), t_out(F32, &n)],
            None,
            &[
                "takes 3 arguments",
                "a: input, b: input, c: output",
                "2 were given",
            ],
        ),
        (
            "output passed as input",
            vadd_f32(),
            vec![t_in(F32, &n), t_in(F32, &n), t_in(F32, &n)],
            None,
            &["argument 2 (`c`)", "an output tensor", "an input tensor"],
        ),
        (
            "element type",
            vadd_f32(),
            vec![t_in(F32, &n), t_in(BF16, &n), t_out(F32, &n)],
            None,
            &["parameter `b`", "declared element type f32", "holds bf16"],
        ),
        (
            "rank",
            vadd_f32(),
            vec![t_in(F32, &n), t_in(F32, &[10, 100]), t_out(F32, &n)],
            None,
            &["parameter `b`", "declared rank 1", "rank 2"],
        ),
        (
            "static extent",
            Launcher::new(kernels::rows64::kernel::<f32, 64>()),
            vec![t_in(F32, &[10, 63]), t_out(F32, &[10, 63])],
            None,
            &["parameter `x`", "fixes axis 1 to 64", "extent 63"],
        ),
        (
            "scalar type",
            Launcher::new(kernels::scale::kernel::<f32, 1024>()),
            vec![t_in(F32, &n), t_out(F32, &n)],
            Some(2.0),
            &[
                "parameter `alpha`",
                "declared element type f32",
                "holds f64",
            ],
        ),
    ];
    for (what, launcher, descs, scalar, needles) in cases {
        let mut a = LaunchArgs::new();
        if let Some(s) = scalar {
            a = a.scalar(s);
        }
        for (out, dtype, shape, strides, ptr) in &descs {
            // SAFETY: nothing is launched.
            a = unsafe { a.raw_tensor(*out, *dtype, shape, strides, *ptr, 0) };
        }
        let err = plan(&launcher, &a).expect_err(what);
        let msg = err.to_string();
        for n in needles {
            assert!(msg.contains(n), "{what}: {msg:?} lacks {n:?}");
        }
    }
}

#[test]
fn typed_error_variants() {
    let n = [1000i64];
    let d = [t_in(F32, &n), t_in(BF16, &n), t_out(F32, &n)];
    match plan(&vadd_f32(), &args(&d)) {
        Err(LaunchError::Arg(ArgError::DType {
            declared, actual, ..
        })) => assert_eq!((declared, actual), (F32, BF16)),
        other => panic!("expected a dtype error, got {other:?}"),
    }
    let d = [t_in(F32, &n), t_in(F32, &n)];
    assert!(matches!(
        plan(&vadd_f32(), &args(&d)),
        Err(LaunchError::Arg(ArgError::Count {
            expected: 3,
            got: 2,
            ..
        }))
    ));
}

#[test]
fn static_extent_is_checked_on_the_warm_path_too() {
    // 64 and 48 have the same layout facts, so a launch with 48 columns reuses the 64-column kernel's
    // warm entry; the signature's static extents must still reject it.
    let l = Launcher::new(kernels::rows64::kernel::<f32, 64>());
    let p = plan(&l, &args(&[t_in(F32, &[10, 64]), t_out(F32, &[10, 64])])).unwrap();
    match &p.signature.params[0] {
        ParamLayout::Tensor { static_dims, .. } => assert_eq!(static_dims, &[None, Some(64)]),
        other => panic!("{other:?}"),
    }
    let p48 = plan(&l, &args(&[t_in(F32, &[10, 64]), t_out(F32, &[10, 48])])).unwrap();
    assert_eq!(p.key, p48.key, "output extents are dynamic");
    let bad = [t_in(F32, &[10, 48]), t_out(F32, &[10, 48])];
    let a = args(&bad);
    let grid_ok = p.signature.grid("rows64", &a).unwrap();
    assert_eq!(grid_ok, Some((10, 1, 1)));
    let err = check(&p, &a).expect_err("48 != 64");
    assert!(err.to_string().contains("fixes axis 1 to 64"), "{err}");
}

/// The checks the warm path runs before packing.
fn check(p: &Plan, a: &LaunchArgs<'_>) -> Result<(), LaunchError> {
    p.signature.check_args(p.entry(), a)
}

#[test]
fn grid_is_tiles_of_the_first_output() {
    let rows = |b: i64, shape: &[i64]| {
        let l = Launcher::new(match b {
            1024 => kernels::rows64::kernel::<f32, 1024>(),
            _ => kernels::rows64::kernel::<f32, 64>(),
        });
        let d = [t_in(F32, &[shape[0], 64]), t_out(F32, shape)];
        let a = args(&d);
        plan(&l, &a).unwrap().signature.grid("rows64", &a).unwrap()
    };
    let vadd = |n: i64| {
        let d = [t_in(F32, &[n]), t_in(F32, &[n]), t_out(F32, &[n])];
        let a = args(&d);
        plan(&vadd_f32(), &a)
            .unwrap()
            .signature
            .grid("vadd", &a)
            .unwrap()
    };
    assert_eq!(vadd(1_000_003), Some((977, 1, 1)));
    assert_eq!(vadd(1024), Some((1, 1, 1)));
    assert_eq!(vadd(1025), Some((2, 1, 1)));
    assert_eq!(vadd(1), Some((1, 1, 1)));
    assert_eq!(vadd(0), None, "an empty output launches nothing");
    assert_eq!(rows(64, &[1000, 1023]), Some((1000, 16, 1)));
    assert_eq!(rows(1024, &[4097, 129]), Some((4097, 1, 1)));

    // An explicit grid wins.
    let d = [t_in(F32, &[5000]), t_in(F32, &[5000]), t_out(F32, &[5000])];
    let a = args(&d).grid((132, 1, 1));
    let p = plan(&vadd_f32(), &a).unwrap();
    assert_eq!(p.signature.grid("vadd", &a).unwrap(), Some((132, 1, 1)));

    // A rank-4 output has no derivable grid; the error says how to give one.
    let l = Launcher::new(kernels::first4::kernel::<f32>());
    let d = [t_in(F32, &[2, 3, 4, 16]), t_out(F32, &[2, 3, 4, 16])];
    let a = args(&d);
    let p = plan(&l, &a).unwrap();
    let err = p.signature.grid("first4", &a).unwrap_err();
    assert!(err.to_string().contains("LaunchArgs::grid"), "{err}");
    assert_eq!(
        p.signature
            .grid("first4", &args(&d).grid((1, 1, 1)))
            .unwrap(),
        Some((1, 1, 1))
    );
}

/// Natural C layout of the entry's parameter types, as the cubin records them.
fn c_layout(types: &[(ScalarType, bool)]) -> Vec<ParamSlot> {
    let mut off = 0;
    types
        .iter()
        .map(|&(t, ptr)| {
            let size = if ptr { 8 } else { t.storage_bytes() };
            off = usize::next_multiple_of(off, size);
            let s = ParamSlot { offset: off, size };
            off += size;
            s
        })
        .collect()
}

fn read(bytes: &[u8], s: ParamSlot) -> i64 {
    let mut w = [0u8; 8];
    w[..s.size].copy_from_slice(&bytes[s.offset..s.offset + s.size]);
    match s.size {
        4 => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i64,
        2 => u16::from_le_bytes([w[0], w[1]]) as i64,
        _ => i64::from_le_bytes(w),
    }
}

#[test]
fn packing_follows_the_entry_parameter_types() {
    // (launcher, scalar, tensors)
    let big = 3_000_000_000i64; // needs the i64 index type
    let cases: Vec<(Launcher, Option<f32>, Vec<Desc>)> = vec![
        (
            vadd_f32(),
            None,
            vec![t_in(F32, &[1000]), t_in(F32, &[1000]), t_out(F32, &[1000])],
        ),
        (
            Launcher::new(kernels::scale::kernel::<half::bf16, 256>()),
            Some(1.5),
            vec![t_in(BF16, &[77]), t_out(BF16, &[77])],
        ),
        (
            Launcher::new(kernels::rows64::kernel::<f32, 64>()),
            None,
            vec![
                (false, F32, vec![33, 64], vec![128, 1], PTR + 4),
                t_out(F32, &[33, 64]),
            ],
        ),
        (
            vadd_f32(),
            None,
            vec![t_in(F32, &[big]), t_in(F32, &[big]), t_out(F32, &[big])],
        ),
    ];
    for (l, scalar, descs) in cases {
        let mut a = LaunchArgs::new();
        if let Some(s) = scalar {
            a = a.scalar(s);
        }
        for (out, dtype, shape, strides, ptr) in &descs {
            // SAFETY: nothing is launched.
            a = unsafe { a.raw_tensor(*out, *dtype, shape, strides, *ptr, 0) };
        }
        let p = plan(&l, &a).unwrap();
        let func = p.specialized.module.function(p.entry()).unwrap();
        let types = p.signature.slot_types();
        assert_eq!(types.len(), func.param_types.len());
        // Each slot type is the entry's parameter type.
        for ((elem, ptr), ty) in types.iter().zip(&func.param_types) {
            let expect = if *ptr {
                cutile_ir::Type::pointer_tile(*elem, &[])
            } else {
                cutile_ir::Type::scalar_tile(*elem)
            };
            assert_eq!(&expect, ty);
        }
        let packed = p.signature.pack(l.kernel().name(), &a).unwrap();
        let slots = packed.slots().to_vec();
        assert_eq!(slots, c_layout(&types), "{:?}", l.kernel());
        // Values: scalar bits, then per tensor address, extents, strides.
        let bytes = packed.bytes();
        let mut expect: Vec<i64> = vec![];
        if let Some(s) = scalar {
            expect.push(s.to_bits() as i64);
        }
        for (_, _, shape, strides, ptr) in &descs {
            expect.push(*ptr as i64);
            expect.extend(shape);
            expect.extend(strides);
        }
        let got: Vec<i64> = slots.iter().map(|&s| read(bytes, s)).collect();
        assert_eq!(got, expect);
        let want_index = if descs[0].2[0] == big { I64 } else { I32 };
        assert_eq!(p.signature.index_type, want_index);
    }
}

#[test]
fn extents_that_do_not_fit_the_index_type_are_refused() {
    let small = [t_in(F32, &[1000]), t_in(F32, &[1000]), t_out(F32, &[1000])];
    let p = plan(&vadd_f32(), &args(&small)).unwrap();
    let big = 3_000_000_000i64;
    let d = [t_in(F32, &[big]), t_in(F32, &[big]), t_out(F32, &[big])];
    match p.signature.pack("vadd", &args(&d)) {
        Err(LaunchError::Arg(ArgError::IndexOverflow {
            value, index_type, ..
        })) => assert_eq!((value, index_type), (big, I32)),
        other => panic!("expected an index overflow, got {other:?}"),
    }
}

#[test]
fn overlapping_outputs_are_refused() {
    let cases: &[(&[i64], &[i64], bool)] = &[
        (&[10, 10], &[10, 1], false),
        (&[10, 10], &[1, 10], false),
        (&[10, 10], &[11, 1], false),
        (&[10, 10], &[-10, 1], false),
        (&[10, 10], &[0, 1], true),
        (&[10, 10], &[5, 1], true),
        (&[10, 1], &[1, 0], false),
        (&[4, 3, 2], &[6, 2, 1], false),
        (&[4, 3, 2], &[6, 1, 3], false),
        (&[4, 3, 2], &[6, 1, 2], true),
        (&[0, 5], &[0, 0], false),
    ];
    for (shape, strides, want) in cases {
        assert_eq!(overlaps(shape, strides), *want, "{shape:?} {strides:?}");
    }
    let l = Launcher::new(kernels::rows64::kernel::<f32, 64>());
    let ok = [t_in(F32, &[10, 64]), t_out(F32, &[10, 64])];
    let p = plan(&l, &args(&ok)).unwrap();
    let bad = [
        t_in(F32, &[10, 64]),
        (true, F32, vec![10, 64], vec![0, 1], PTR),
    ];
    let err = check(&p, &args(&bad)).unwrap_err();
    assert!(
        matches!(err, LaunchError::Arg(ArgError::OverlappingOutput { .. })),
        "{err}"
    );
}

#[test]
fn launch_and_aot_paths_agree_on_keys() {
    let k = kernels::vadd::kernel::<f32, 1024>;
    for n in [1i64 << 20, 1_000_003, 1000] {
        let d = [t_in(F32, &[n]), t_in(F32, &[n]), t_out(F32, &[n])];
        let from_launch = plan(&vadd_f32(), &args(&d)).unwrap().key;
        let metas = vec![TensorMeta::contiguous(F32, &[n]); 3];
        let from_aot = cutile::launch::plan(&k(), &metas, GpuArch::Sm90, &Default::default(), TC)
            .unwrap()
            .key;
        assert_eq!(from_launch, from_aot, "n = {n}");
    }
    // Keys depend on the layout facts, not on the extents themselves.
    let key = |n: i64, ptr: u64| {
        let d = [
            (false, F32, vec![n], vec![1], ptr),
            t_in(F32, &[n]),
            t_out(F32, &[n]),
        ];
        plan(&vadd_f32(), &args(&d)).unwrap().key
    };
    assert_eq!(key(4096, PTR), key(8192, PTR));
    assert_ne!(key(4096, PTR), key(4097, PTR));
    assert_ne!(
        key(4096, PTR),
        key(4096, PTR + 4),
        "base alignment is a fact"
    );
    // Generic values, options and arch are part of the key.
    let d = [t_in(F32, &[4096]), t_in(F32, &[4096]), t_out(F32, &[4096])];
    let a = args(&d);
    let other_tile = Launcher::new(kernels::vadd::kernel::<f32, 512>());
    assert_ne!(plan(&other_tile, &a).unwrap().key, key(4096, PTR));
    let o1 = cutile::launch::CompileOptions {
        opt_level: 1,
        line_info: false,
        ..Default::default()
    };
    let l1 = Launcher::with_options(kernels::vadd::kernel::<f32, 1024>(), o1);
    assert_ne!(plan(&l1, &a).unwrap().key, key(4096, PTR));
    let k100 = vadd_f32().plan_for(&a, GpuArch::Sm100, TC).unwrap().key;
    assert_eq!(k100.arch(), "sm_100");
    let hinted = Launcher::new(kernels::vadd::kernel::<f32, 1024>().with_hint(
        "sm_90",
        "num_worker_warps_per_cta",
        8,
    ));
    let hk = plan(&hinted, &a).unwrap().key;
    assert_ne!(hk, key(4096, PTR));
    assert!(
        hk.specialization().contains("num_worker_warps_per_cta=8"),
        "{hk}"
    );
}

#[test]
fn warm_facts_agree_with_specialization_on_many_layouts() {
    // `plan_for` refuses (Signature error) whenever the launcher's stack-built facts differ from what
    // specialization used; sweep extents, strides, signs and base alignments.
    let l = Launcher::new(kernels::rows64::kernel::<f32, 64>());
    let mut n = 0;
    for rows in [1i64, 2, 3, 16, 48, 1000, 65536] {
        for stride0 in [64i64, 65, 96, 128, -64, 0] {
            for stride1 in [1i64, 2, 3] {
                for align in [0u64, 4, 8, 16, 32, 512] {
                    let d = [
                        (
                            false,
                            F32,
                            vec![rows, 64],
                            vec![stride0, stride1],
                            PTR + align,
                        ),
                        (true, F32, vec![rows, 64], vec![64, 1], PTR + 2 * align),
                    ];
                    plan(&l, &args(&d)).unwrap_or_else(|e| {
                        panic!("rows {rows} strides [{stride0},{stride1}] align {align}: {e}")
                    });
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 7 * 6 * 3 * 6);
}

#[test]
fn no_tileiras_and_no_bundle_names_the_key_and_the_fix() {
    let d = [t_in(F32, &[1000]), t_in(F32, &[1000]), t_out(F32, &[1000])];
    let p = vadd_f32()
        .plan_for(&args(&d), GpuArch::Sm90, NO_TOOLCHAIN)
        .unwrap();
    let cache = KernelCache::new(CacheConfig::memory_only());
    let missing = ToolchainError::NotFound { searched: vec![] };
    let err = cutile::launch::resolve_cubin(&cache, &BundleSet::new(), &p, Err(&missing))
        .expect_err("nothing can produce the cubin");
    assert!(
        matches!(err, LaunchError::NotAvailable { bundles: 0, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    for needle in [
        p.key.to_string().as_str(),
        "none of the 0 registered AOT bundle(s)",
        "tileiras not found",
        "cargo xtask aot --arch sm_90 -o kernels.bundle",
        "CUTILE_BUNDLE=kernels.bundle",
    ] {
        assert!(msg.contains(needle), "{msg:?} lacks {needle:?}");
    }
}

#[test]
fn a_bundle_made_with_tileiras_serves_a_machine_without_it() {
    let d = [t_in(F32, &[1000]), t_in(F32, &[1000]), t_out(F32, &[1000])];
    let aot = plan(&vadd_f32(), &args(&d)).unwrap();
    let here = vadd_f32()
        .plan_for(&args(&d), GpuArch::Sm90, NO_TOOLCHAIN)
        .unwrap();
    assert_ne!(aot.key, here.key, "the tileiras version differs");
    let fake_cubin = b"not really a cubin".to_vec();
    let mut w = BundleWriter::new();
    w.add(&aot.key, fake_cubin.clone()).unwrap();
    let set = BundleSet::new();
    set.add(Bundle::from_bytes(w.to_bytes()).unwrap());
    let cache = KernelCache::new(CacheConfig::memory_only());
    let missing = ToolchainError::NotFound { searched: vec![] };
    let got = cutile::launch::resolve_cubin(&cache, &set, &here, Err(&missing)).unwrap();
    assert_eq!(&*got, fake_cubin.as_slice());
    // A bundle for another arch does not serve sm_90, and the error still names the key.
    let p100 = vadd_f32()
        .plan_for(&args(&d), GpuArch::Sm100, NO_TOOLCHAIN)
        .unwrap();
    let err = cutile::launch::resolve_cubin(&cache, &set, &p100, Err(&missing)).unwrap_err();
    assert!(err.to_string().contains("--arch sm_100"), "{err}");
}

/// `Launch::hint` puts the hint on the kernel for every architecture, keeps the compile options, and
/// gives the hinted specialization a cache key of its own (the bytecode carries the hint).
#[test]
fn launch_hint_reaches_the_kernel_and_the_key() {
    use cutile::launch::{CompileOptions, Launch};
    let options = CompileOptions::default();
    let (plain, _) = Launch::new(kernels::vadd::kernel::<f32, 1024>())
        .options(options.clone())
        .into_parts();
    let (hinted, _) = Launch::new(kernels::vadd::kernel::<f32, 1024>())
        .options(options)
        .hint("occupancy", 3)
        .into_parts();
    let default = |l: &Launcher| {
        l.kernel()
            .hints()
            .by_arch
            .iter()
            .find(|(arch, _)| arch == "default")
            .map(|(_, kv)| kv.clone())
            .unwrap_or_default()
    };
    assert!(default(&plain).iter().all(|(k, _)| k != "occupancy"));
    assert!(
        default(&hinted)
            .iter()
            .any(|(k, v)| k == "occupancy" && *v == cutile_ir::Attribute::i32(3)),
        "{:?}",
        hinted.kernel().hints()
    );
    assert_eq!(plain.options(), hinted.options());
    let descs = [t_in(F32, &[4096]), t_in(F32, &[4096]), t_out(F32, &[4096])];
    let (a, b) = (args(&descs), args(&descs));
    let (p, q) = (plan(&plain, &a).unwrap(), plan(&hinted, &b).unwrap());
    assert_ne!(p.key, q.key);
}
