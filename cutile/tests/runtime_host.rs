//! Runtime tests that need no GPU: driver discovery on a machine without one, argument packing,
//! shape/stride math, cubin inspection and host fills.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::runtime::cubin::{self, CubinError};
use cutile::runtime::layout::{self, Layout, LayoutError};
use cutile::runtime::{
    CudaVersion, DType, Device, DeviceElement, KernelArgs, ParamSlot, RuntimeError, check_grid,
    check_params, fill,
};
use half::{bf16, f16};
use proptest::prelude::*;

const VADD_SM90: &[u8] = include_bytes!("runtime_fixtures/vadd_f32_sm90.cubin");
const VADD_SM100: &[u8] = include_bytes!("runtime_fixtures/vadd_f32_sm100.cubin");
const VADD_NAME: &str = "vadd_Kt1_A1f32_1t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_I1024";

// ---------------------------------------------------------------- driver

#[test]
fn missing_driver_is_a_typed_error_not_a_panic() {
    match cutile::runtime::driver() {
        Ok(info) => println!(
            "skipped: a CUDA driver is present (CUDA {}), so the no-driver path cannot be observed",
            info.version
        ),
        Err(RuntimeError::NoDriver { searched, hint }) => {
            assert!(
                searched.iter().any(|s| s == "libcuda.so.1")
                    && searched.iter().any(|s| s == "libcuda.so"),
                "searched list should name libcuda.so.1 and libcuda.so: {searched:?}"
            );
            assert!(hint.contains("driver"), "{hint}");
            // Every entry point reports the same typed error.
            assert!(matches!(
                Device::count(),
                Err(RuntimeError::NoDriver { .. })
            ));
            assert!(matches!(Device::new(0), Err(RuntimeError::NoDriver { .. })));
            assert!(matches!(Device::all(), Err(RuntimeError::NoDriver { .. })));
            assert!(!cutile::runtime::is_available());
        }
        Err(other) => {
            // A libcuda exists but is unusable (stub, old driver, no device): still typed, never a panic.
            println!("skipped: libcuda present but unusable: {other}");
            assert!(matches!(
                other,
                RuntimeError::DriverInit { .. }
                    | RuntimeError::NoDevice { .. }
                    | RuntimeError::DriverTooOld { .. }
            ));
        }
    }
}

#[test]
fn driver_version_gate_is_cuda_13() {
    for (raw, ok, shown) in [
        (13000, true, "13.0"),
        (13010, true, "13.1"),
        (13050, true, "13.5"),
        (12080, false, "12.8"),
        (12090, false, "12.9"),
        (11080, false, "11.8"),
    ] {
        let got = cutile::runtime::check_driver_version(raw);
        assert_eq!(got.is_ok(), ok, "{raw}");
        let v = got.unwrap_or_else(|v| v);
        assert_eq!(v.to_string(), shown);
    }
    let e = RuntimeError::DriverTooOld {
        found: CudaVersion::from_driver_int(12080),
        required: cutile::runtime::MIN_DRIVER_VERSION,
    };
    let msg = e.to_string();
    assert!(
        msg.contains("12.8") && msg.contains("13.0") && msg.contains("r580"),
        "{msg}"
    );
}

// ---------------------------------------------------------------- kernel arguments

fn slots(list: &[(usize, usize)]) -> Vec<ParamSlot> {
    list.iter()
        .map(|&(offset, size)| ParamSlot { offset, size })
        .collect()
}

#[test]
fn args_pack_in_natural_c_layout() {
    // (arguments, expected (offset, size) per parameter, total bytes)
    type Case<'a> = (KernelArgs<'a>, Vec<(usize, usize)>, usize);
    let cases: Vec<Case> = vec![
        (
            KernelArgs::new().ptr(0x1000).arg(7i32).arg(1i32),
            vec![(0, 8), (8, 4), (12, 4)],
            16,
        ),
        (
            KernelArgs::new().arg(1i8).arg(2i64),
            vec![(0, 1), (8, 8)],
            16,
        ),
        (
            KernelArgs::new()
                .arg(f16::ONE)
                .arg(1.0f32)
                .arg(1.0f64)
                .arg(3u8),
            vec![(0, 2), (4, 4), (8, 8), (16, 1)],
            17,
        ),
        (
            KernelArgs::new()
                .arg(1u8)
                .arg(bf16::ONE)
                .arg(2u16)
                .arg(3u32)
                .arg(4u64),
            vec![(0, 1), (2, 2), (4, 2), (8, 4), (16, 8)],
            24,
        ),
        (
            KernelArgs::new().arg(5i32).ptr(0xdead_beef),
            vec![(0, 4), (8, 8)],
            16,
        ),
        (KernelArgs::new(), vec![], 0),
    ];
    for (args, expected, total) in cases {
        assert_eq!(args.slots(), slots(&expected).as_slice());
        assert_eq!(args.bytes().len(), total);
    }
}

#[test]
fn args_bytes_hold_values_and_zero_padding() {
    let args = KernelArgs::new()
        .arg(-1i32)
        .ptr(0x0102_0304_0506_0708)
        .arg(2.0f32)
        .arg(-2i16);
    let mut expected = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    expected.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
    expected.extend_from_slice(&2.0f32.to_le_bytes());
    expected.extend_from_slice(&(-2i16).to_le_bytes());
    assert_eq!(args.bytes(), expected.as_slice());

    let mut args = KernelArgs::new();
    args.push(1u8).push(0x1122_3344u32);
    assert_eq!(args.bytes(), &[1, 0, 0, 0, 0x44, 0x33, 0x22, 0x11]);
}

#[test]
fn args_match_the_layout_tileiras_recorded_in_a_real_cubin() {
    let info = cubin::inspect(VADD_SM90).expect("fixture cubin parses");
    let kernel = info.kernel(VADD_NAME).expect("vadd kernel present");
    let recorded = kernel.params.clone().expect("cubin records KPARAM_INFO");
    // vadd(a: ptr, len: i32, stride: i32, b: ptr, …, c: ptr, …)
    let mut args = KernelArgs::new();
    for _ in 0..3 {
        args.push(0u64).push(1024i32).push(1i32);
    }
    assert_eq!(args.slots(), recorded.as_slice());
    assert_eq!(kernel.param_bytes, Some(args.bytes().len() as u32));
    assert_eq!(args.bytes().len(), 0x30);
    check_params(VADD_NAME, Some(&recorded), args.slots()).expect("layouts agree");

    // One parameter short: the launch check names both layouts.
    let short = KernelArgs::new().ptr(0).arg(1i32);
    let err = check_params(VADD_NAME, Some(&recorded), short.slots()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RuntimeError::ParamMismatch { .. }));
    assert!(
        msg.contains(VADD_NAME) && msg.contains("offset: 44") && msg.contains("offset: 8"),
        "{msg}"
    );
}

#[test]
fn grid_limits() {
    for (grid, ok) in [
        ((1, 1, 1), true),
        ((i32::MAX as u32, 65535, 65535), true),
        ((0, 1, 1), false),
        ((1, 0, 1), false),
        ((1, 1, 0), false),
        ((i32::MAX as u32 + 1, 1, 1), false),
        ((1, 65536, 1), false),
        ((1, 1, 65536), false),
    ] {
        assert_eq!(check_grid(grid).is_ok(), ok, "{grid:?}");
    }
}

// ---------------------------------------------------------------- layout math

#[test]
fn contiguous_strides_and_numel() {
    for (shape, strides, numel) in [
        (vec![], vec![], 1),
        (vec![5], vec![1], 5),
        (vec![2, 3, 4], vec![12, 4, 1], 24),
        (vec![3, 0, 2], vec![2, 2, 1], 0),
        (vec![1 << 20, 1 << 20], vec![1 << 20, 1], 1 << 40),
    ] {
        assert_eq!(
            layout::contiguous_strides(&shape).unwrap(),
            strides,
            "{shape:?}"
        );
        assert_eq!(layout::numel(&shape).unwrap(), numel, "{shape:?}");
    }
    assert!(matches!(
        layout::numel(&[1 << 40, 1 << 40]),
        Err(LayoutError::Overflow { .. })
    ));
    assert!(matches!(
        layout::numel(&[2, -1]),
        Err(LayoutError::NegativeDim { .. })
    ));
}

#[test]
fn slices_transposes_and_reshapes() {
    let t = Layout::contiguous(&[4, 6]).unwrap();

    let rows = t.slice(0, 1..3).unwrap();
    assert_eq!(
        (rows.shape(), rows.strides(), rows.offset()),
        (&[2, 6][..], &[6, 1][..], 6)
    );
    assert!(rows.is_contiguous());

    let cols = t.slice(1, 2..5).unwrap();
    assert_eq!((cols.shape(), cols.offset()), (&[4, 3][..], 2));
    assert!(!cols.is_contiguous());
    assert_eq!(cols.span(), 2..23);

    let tt = t.transpose(0, 1).unwrap();
    assert_eq!((tt.shape(), tt.strides()), (&[6, 4][..], &[1, 6][..]));
    assert!(!tt.is_contiguous());
    assert_eq!(
        tt.offsets().take(5).collect::<Vec<_>>(),
        vec![0, 6, 12, 18, 1]
    );

    let r = rows.reshape(&[3, -1]).unwrap();
    assert_eq!(
        (r.shape(), r.strides(), r.offset()),
        (&[3, 4][..], &[4, 1][..], 6)
    );
    let flat = t.reshape(&[24]).unwrap();
    assert_eq!(flat.shape(), &[24]);

    // An empty slice at the very end does not point past the parent.
    let empty = t.slice(0, 4..4).unwrap();
    assert_eq!(
        (empty.shape(), empty.numel(), empty.span()),
        (&[0, 6][..], 0, 0..0)
    );

    // Axes of length 1 do not break contiguity, whatever their stride.
    let unit = Layout::with_strides(&[1, 5], &[99, 1], 0).unwrap();
    assert!(unit.is_contiguous());
}

#[test]
fn layout_errors_name_the_shapes_involved() {
    let t = Layout::contiguous(&[4, 6]).unwrap();
    let cases: Vec<(Result<Layout, LayoutError>, &[&str])> = vec![
        (t.reshape(&[5, 5]), &["[4, 6]", "[5, 5]", "24", "25"]),
        (
            t.transpose(0, 1).unwrap().reshape(&[24]),
            &["[6, 4]", "[24]", "contiguous"],
        ),
        (t.reshape(&[-1, -1]), &["[-1, -1]"]),
        (t.reshape(&[7, -1]), &["[4, 6]", "[7, -1]"]),
        (t.slice(1, 3..7), &["3..7", "axis 1", "6"]),
        (t.slice(2, 0..1), &["axis 2", "rank 2"]),
        (t.transpose(0, 3), &["axis 3"]),
        (Layout::with_strides(&[2, 2], &[1], 0), &["[2, 2]", "[1]"]),
        (
            Layout::with_strides(&[2, 2], &[2, -1], 0),
            &["negative stride"],
        ),
        (
            Layout::with_strides(&[i64::MAX, 2], &[2, 1], 0),
            &["overflow"],
        ),
    ];
    for (result, needles) in cases {
        let msg = result.expect_err("should fail").to_string();
        for n in needles {
            assert!(msg.contains(n), "{msg:?} should mention {n:?}");
        }
    }
    let e = layout::check_len(&[2, 3], 5).unwrap_err().to_string();
    assert!(
        e.contains("5") && e.contains("[2, 3]") && e.contains("6"),
        "{e}"
    );

    let e = RuntimeError::ShapeMismatch {
        op: "copy_from",
        left: vec![2, 3],
        right: vec![3, 2],
    }
    .to_string();
    assert!(e.contains("[2, 3]") && e.contains("[3, 2]"), "{e}");
}

#[test]
fn gather_reads_views_in_logical_order() {
    // A 3x4 buffer holding 0..12; view columns 1..3 then transpose.
    let buffer: Vec<i32> = (0..12).collect();
    let base = Layout::contiguous(&[3, 4]).unwrap();
    let view = base.slice(1, 1..3).unwrap().transpose(0, 1).unwrap();
    let span = view.span();
    let host = &buffer[span.start as usize..span.end as usize];
    assert_eq!(
        layout::gather(&view, host).unwrap(),
        vec![1, 5, 9, 2, 6, 10]
    );
    assert_eq!(layout::gather(&view, &host[..3]), None);
}

proptest! {
    /// Slicing and transposing never leave the parent's span, and gather matches direct indexing.
    #[test]
    fn views_stay_inside_their_parent(
        shape in proptest::collection::vec(1i64..6, 1..4),
        cuts in proptest::collection::vec((0usize..4, 0i64..6, 0i64..6), 0..4),
        swaps in proptest::collection::vec((0usize..4, 0usize..4), 0..3),
    ) {
        let parent = Layout::contiguous(&shape).unwrap();
        let mut v = parent.clone();
        for (axis, a, b) in cuts {
            if let Ok(s) = v.slice(axis, a.min(b)..a.max(b)) { v = s; }
        }
        for (a, b) in swaps {
            if let Ok(t) = v.transpose(a, b) { v = t; }
        }
        let n = parent.numel();
        let data: Vec<i64> = (0..n).collect();
        for o in v.offsets() {
            prop_assert!(o >= 0 && o < n);
        }
        let span = v.span();
        prop_assert!(span.start >= 0 && span.end <= n);
        let gathered = layout::gather(&v, &data[span.start as usize..span.end as usize]).unwrap();
        prop_assert_eq!(gathered, v.offsets().collect::<Vec<_>>());
    }
}

// ---------------------------------------------------------------- cubin inspection

#[test]
fn inspects_real_cubins() {
    for (bytes, sm) in [(VADD_SM90, 90), (VADD_SM100, 100)] {
        let info = cubin::inspect(bytes).expect("parses");
        assert_eq!(info.sm, sm);
        assert_eq!(info.arch(), format!("sm_{sm}"));
        let names: Vec<&str> = info.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, vec![VADD_NAME]);
        let expected: Vec<(usize, usize)> = (0..3)
            .flat_map(|i| [(i * 16, 8), (i * 16 + 8, 4), (i * 16 + 12, 4)])
            .collect();
        assert_eq!(info.kernels[0].params, Some(slots(&expected)));
    }
}

#[test]
fn rejects_bytecode_and_garbage_with_reasons() {
    let bytecode = b"\x7fTileIR\0\x0d\x05\0\0rest";
    assert_eq!(cubin::inspect(bytecode), Err(CubinError::TileIrBytecode));
    assert!(CubinError::TileIrBytecode.to_string().contains("tileiras"));
    for bad in [&b""[..], b"\x7fELF", b"hello world", &VADD_SM90[..64]] {
        assert!(matches!(
            cubin::inspect(bad),
            Err(CubinError::Malformed { .. })
        ));
    }
    let mut other_machine = VADD_SM90.to_vec();
    other_machine[18] = 62; // EM_X86_64
    let msg = cubin::inspect(&other_machine).unwrap_err().to_string();
    assert!(msg.contains("EM_CUDA"), "{msg}");
}

#[test]
fn every_truncation_is_rejected() {
    // The program header table ends exactly at the end of the file, so any shorter prefix is invalid.
    for len in 0..VADD_SM90.len() {
        assert!(
            cubin::inspect(&VADD_SM90[..len]).is_err(),
            "prefix of {len} bytes accepted"
        );
    }
}

proptest! {
    #[test]
    fn damaged_cubins_never_panic(
        flips in proptest::collection::vec((0usize..VADD_SM90.len(), any::<u8>()), 1..16)
    ) {
        let mut bytes = VADD_SM90.to_vec();
        for (at, v) in flips {
            bytes[at] = v;
        }
        let _ = cubin::inspect(&bytes);
    }
}

#[test]
fn which_cubins_run_on_which_devices() {
    for (sm, cc, ok) in [
        (90, (9, 0), true),
        (90, (10, 0), false),
        (100, (10, 0), true),
        (100, (10, 3), false),
        (120, (12, 1), false),
        (80, (8, 6), true),
        (86, (8, 0), false),
        (80, (9, 0), false),
    ] {
        assert_eq!(cubin::runs_on(sm, cc), ok, "sm_{sm} on {cc:?}");
    }
}

// ---------------------------------------------------------------- element types and fills

#[test]
fn dtypes_have_c_sizes() {
    fn check<T: DeviceElement>(d: DType, name: &str) {
        assert_eq!(T::DTYPE, d);
        assert_eq!(d.size_bytes(), size_of::<T>());
        assert_eq!(d.name(), name);
    }
    check::<f16>(DType::F16, "f16");
    check::<bf16>(DType::BF16, "bf16");
    check::<f32>(DType::F32, "f32");
    check::<f64>(DType::F64, "f64");
    check::<i8>(DType::I8, "i8");
    check::<i16>(DType::I16, "i16");
    check::<i32>(DType::I32, "i32");
    check::<i64>(DType::I64, "i64");
    check::<u8>(DType::U8, "u8");
    check::<u16>(DType::U16, "u16");
    check::<u32>(DType::U32, "u32");
    check::<u64>(DType::U64, "u64");
}

#[test]
fn fills_are_seeded_and_in_range() {
    assert_eq!(fill::arange::<i16>(4), vec![0, 1, 2, 3]);
    assert_eq!(fill::arange::<u8>(300)[299], 255, "saturates");
    assert_eq!(fill::arange::<bf16>(3)[2], bf16::from_f32(2.0));

    let a = fill::random::<f32>(1000, 7);
    assert_eq!(a, fill::random::<f32>(1000, 7));
    assert_ne!(a, fill::random::<f32>(1000, 8));
    assert!(a.iter().all(|&x| (-1.0..1.0).contains(&x)));
    assert!(a.iter().any(|&x| x < -0.5) && a.iter().any(|&x| x > 0.5));

    let i = fill::random::<i8>(1000, 1);
    assert!(i.iter().all(|&x| (-64..64).contains(&x)));
    let u = fill::uniform::<u32>(1000, 10.0, 13.0, 3);
    assert!(u.iter().all(|&x| (10..13).contains(&x)));
    for v in 10..13 {
        assert!(u.contains(&v), "{v} never drawn");
    }
}
