//! GPU smoke tests of the runtime: tensors, views, kernel loading and launching (sync, async, graph),
//! events and the kernel lookup chain, using a vector-add cubin compiled by tileiras 13.5 from
//! cuTile's `vadd` sample (see `runtime_fixtures/README.md`).
//!
//! Every test is `#[ignore]`d so that a machine without a GPU reports them as skipped (ignored), never as
//! passed; run them on a GPU machine with `cargo test -p cutile --test runtime_gpu -- --include-ignored`.
//! Even then, without a usable driver or device each test prints "skipped: …" and returns.

// Test code: an unwrap is an assertion.
#![allow(clippy::unwrap_used)]

use cutile::bundle::{self, Bundle, BundleWriter};
use cutile::cache::{CacheKey, KeyParts};
use cutile::launch::{LaunchError, load_kernel};
use cutile::runtime::{
    CuModule, Device, DeviceElement, Event, KernelArgs, RuntimeError, Stream, Tensor,
};
use half::{bf16, f16};

const VADD: &str = "vadd_Kt1_A1f32_1t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_I1024";
const TILE: i64 = 1024;
const FIXTURES: [(&str, &[u8]); 2] = [
    (
        "sm_90",
        include_bytes!("runtime_fixtures/vadd_f32_sm90.cubin"),
    ),
    (
        "sm_100",
        include_bytes!("runtime_fixtures/vadd_f32_sm100.cubin"),
    ),
];

/// The first device, or `None` after printing why the test is skipped.
fn gpu(test: &str) -> Option<Device> {
    match Device::new(0) {
        Ok(d) => Some(d),
        Err(RuntimeError::NoDriver { .. }) => {
            println!("skipped: no CUDA driver ({test})");
            None
        }
        Err(e) => {
            println!("skipped: no usable CUDA device ({test}): {e}");
            None
        }
    }
}

/// The vadd cubin for this device, or `None` after printing why the test is skipped.
fn vadd_cubin(device: &Device, test: &str) -> Option<&'static [u8]> {
    let found = FIXTURES.iter().find(|(arch, _)| *arch == device.arch());
    if found.is_none() {
        println!(
            "skipped: no vadd fixture cubin for {} ({test})",
            device.arch()
        );
    }
    found.map(|(_, c)| *c)
}

fn vadd_args<'a>(a: &'a Tensor<f32>, b: &'a Tensor<f32>, c: &'a mut Tensor<f32>) -> KernelArgs<'a> {
    let n = a.numel() as i32;
    KernelArgs::new()
        .input(a)
        .arg(n)
        .arg(1i32)
        .input(b)
        .arg(n)
        .arg(1i32)
        .output(c)
        .arg(n)
        .arg(1i32)
}

fn grid_for(n: i64) -> (u32, u32, u32) {
    (((n + TILE - 1) / TILE) as u32, 1, 1)
}

fn expected_sum(a: &Tensor<f32>, b: &Tensor<f32>) -> Vec<f32> {
    let (a, b) = (a.to_host().unwrap(), b.to_host().unwrap());
    a.iter().zip(&b).map(|(x, y)| x + y).collect()
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn device_properties() {
    let Some(dev) = gpu("device_properties") else {
        return;
    };
    let info = cutile::runtime::driver().unwrap();
    assert!(info.version >= cutile::runtime::MIN_DRIVER_VERSION);
    let (major, minor) = dev.compute_capability();
    assert_eq!(dev.arch(), format!("sm_{major}{minor}"));
    assert!(dev.sm_count() > 0 && dev.total_memory() > 0 && !dev.name().is_empty());
    assert!(matches!(
        Device::new(Device::count().unwrap()),
        Err(RuntimeError::DeviceOutOfRange { .. })
    ));
    println!(
        "device 0: {} {} ({} SMs, {} GiB), driver CUDA {}",
        dev.name(),
        dev.arch(),
        dev.sm_count(),
        dev.total_memory() >> 30,
        info.version
    );
}

fn round_trip<T: DeviceElement>(dev: &Device) {
    let shape = [3, 5];
    let host: Vec<T> = cutile::runtime::fill::random(15, 42);
    let t = Tensor::from_host(dev, &host, &shape).unwrap();
    assert_eq!(
        (t.shape(), t.strides(), t.dtype()),
        (&shape[..], &[5i64, 1][..], T::DTYPE)
    );
    assert_eq!(t.to_host().unwrap(), host, "{}", T::DTYPE);
    assert_eq!(
        Tensor::<T>::zeros(dev, &shape).unwrap().to_host().unwrap(),
        vec![T::from_f64(0.0); 15]
    );
    assert_eq!(
        Tensor::<T>::ones(dev, &shape).unwrap().to_host().unwrap(),
        vec![T::from_f64(1.0); 15]
    );
    assert_eq!(
        Tensor::<T>::arange(dev, &[15]).unwrap().to_host().unwrap(),
        cutile::runtime::fill::arange::<T>(15)
    );
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn tensors_round_trip_every_dtype() {
    let Some(dev) = gpu("tensors_round_trip_every_dtype") else {
        return;
    };
    round_trip::<f16>(&dev);
    round_trip::<bf16>(&dev);
    round_trip::<f32>(&dev);
    round_trip::<f64>(&dev);
    round_trip::<i8>(&dev);
    round_trip::<i16>(&dev);
    round_trip::<i32>(&dev);
    round_trip::<i64>(&dev);
    round_trip::<u8>(&dev);
    round_trip::<u16>(&dev);
    round_trip::<u32>(&dev);
    round_trip::<u64>(&dev);
    let empty = Tensor::<f32>::zeros(&dev, &[0, 7]).unwrap();
    assert_eq!(empty.to_host().unwrap(), Vec::<f32>::new());
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn views_read_and_write_the_right_elements() {
    let Some(dev) = gpu("views_read_and_write_the_right_elements") else {
        return;
    };
    let mut t = Tensor::<i32>::arange(&dev, &[4, 6]).unwrap();
    assert_eq!(
        t.slice(0, 1..3).unwrap().to_host().unwrap(),
        (6..18).collect::<Vec<_>>()
    );
    assert_eq!(
        t.slice(1, 4..6).unwrap().to_host().unwrap(),
        vec![4, 5, 10, 11, 16, 17, 22, 23]
    );
    let tt = t.transpose(0, 1).unwrap();
    assert_eq!(&tt.to_host().unwrap()[..5], &[0, 6, 12, 18, 1]);
    assert!(matches!(
        tt.reshape(&[24]),
        Err(RuntimeError::Layout(
            cutile::runtime::LayoutError::ReshapeNotContiguous { .. }
        ))
    ));
    assert_eq!(
        t.reshape(&[2, 12]).unwrap().to_host().unwrap(),
        (0..24).collect::<Vec<_>>()
    );

    // Write one row through a mutable view, then read everything back.
    t.slice_mut(0, 2..3)
        .unwrap()
        .copy_from_host(&[-1; 6])
        .unwrap();
    let all = t.to_host().unwrap();
    assert_eq!(&all[12..18], &[-1; 6]);
    assert_eq!(all[11], 11);
    assert!(matches!(
        t.slice_mut(1, 0..2).unwrap().copy_from_host(&[0; 8]),
        Err(RuntimeError::NotContiguous { .. })
    ));

    let src = Tensor::<i32>::full(&dev, &[4, 6], 7).unwrap();
    t.copy_from(&src.view()).unwrap();
    assert_eq!(t.to_host().unwrap(), vec![7; 24]);
    let wrong = Tensor::<i32>::zeros(&dev, &[6, 4]).unwrap();
    let msg = t.copy_from(&wrong.view()).unwrap_err().to_string();
    assert!(msg.contains("[4, 6]") && msg.contains("[6, 4]"), "{msg}");

    // Borrowed memory: reads through the alias, and dropping it frees nothing.
    let alias =
        unsafe { Tensor::<i32>::from_raw_parts(t.device_ptr(), &[6, 4], &[1, 6], &dev) }.unwrap();
    assert!(!alias.is_owned());
    assert_eq!(alias.to_host().unwrap(), vec![7; 24]);
    drop(alias);
    assert_eq!(t.to_host().unwrap(), vec![7; 24]);
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn vadd_from_a_cubin() {
    let Some(dev) = gpu("vadd_from_a_cubin") else {
        return;
    };
    let Some(cubin) = vadd_cubin(&dev, "vadd_from_a_cubin") else {
        return;
    };
    let module = CuModule::from_cubin(&dev, cubin).unwrap();
    assert_eq!(module.kernel_names(), vec![VADD.to_string()]);
    let kernel = module.kernel(VADD).unwrap();
    let stream = Stream::new(&dev).unwrap();

    // Ragged sizes: one element, one off a tile boundary either way, a prime.
    for n in [1i64, 1023, 1025, 7 * 1024 + 13, 1_000_003] {
        let a = Tensor::<f32>::random(&dev, &[n], 1).unwrap();
        let b = Tensor::<f32>::random(&dev, &[n], 2).unwrap();
        let mut c = Tensor::<f32>::full(&dev, &[n], f32::NAN).unwrap();
        let args = vadd_args(&a, &b, &mut c);
        // SAFETY: the arguments follow vadd's signature and point to tensors of n elements.
        unsafe { kernel.launch(&stream, grid_for(n), &args) }.unwrap();
        drop(args);
        assert_eq!(c.to_host().unwrap(), expected_sum(&a, &b), "n = {n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn async_launches_events_and_graphs() {
    let Some(dev) = gpu("async_launches_events_and_graphs") else {
        return;
    };
    let Some(cubin) = vadd_cubin(&dev, "async_launches_events_and_graphs") else {
        return;
    };
    let kernel = CuModule::from_cubin(&dev, cubin)
        .unwrap()
        .kernel(VADD)
        .unwrap();
    let stream = Stream::new(&dev).unwrap();
    let n = 1 << 24;
    let a = Tensor::<f32>::random(&dev, &[n], 3).unwrap();
    let b = Tensor::<f32>::random(&dev, &[n], 4).unwrap();
    let mut c = Tensor::<f32>::zeros(&dev, &[n]).unwrap();
    let expected = expected_sum(&a, &b);

    let (start, end) = (Event::new(&dev).unwrap(), Event::new(&dev).unwrap());
    {
        let args = vadd_args(&a, &b, &mut c);
        start.record(&stream).unwrap();
        // SAFETY: as in vadd_from_a_cubin.
        let pending = unsafe { kernel.launch_async(&stream, grid_for(n), &args) }.unwrap();
        end.record(&stream).unwrap();
        pending.wait().unwrap();
    }
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms > 0.0);
    println!(
        "vadd of {n} f32: {ms:.3} ms, {:.0} GB/s",
        12.0 * n as f64 / (ms as f64 * 1e6)
    );
    assert_eq!(c.to_host().unwrap(), expected);

    // Capture one launch into a graph, clear the output, replay.
    let graph = {
        let args = vadd_args(&a, &b, &mut c);
        stream.begin_capture().unwrap();
        assert!(stream.is_capturing().unwrap());
        // SAFETY: as above; the guard does not synchronise while capturing.
        let pending = unsafe { kernel.launch_async(&stream, grid_for(n), &args) }.unwrap();
        pending.wait().unwrap();
        stream.end_capture().unwrap()
    };
    c.copy_from_host(&vec![0.0; n as usize]).unwrap();
    // SAFETY: a, b and c are alive and not otherwise in use during the replay.
    unsafe { graph.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(c.to_host().unwrap(), expected);

    // Host launch overhead on a warm kernel (enqueue only).
    let args = vadd_args(&a, &b, &mut c);
    let reps = 2000;
    let t0 = std::time::Instant::now();
    for _ in 0..reps {
        // SAFETY: as above.
        unsafe { kernel.enqueue(&stream, (1, 1, 1), &args) }.unwrap();
    }
    let per = t0.elapsed() / reps;
    stream.synchronize().unwrap();
    println!("host enqueue time per launch: {per:?}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn launch_errors_are_typed() {
    let Some(dev) = gpu("launch_errors_are_typed") else {
        return;
    };
    let Some(cubin) = vadd_cubin(&dev, "launch_errors_are_typed") else {
        return;
    };
    let module = CuModule::from_cubin(&dev, cubin).unwrap();
    let msg = module.kernel("nope").unwrap_err().to_string();
    assert!(msg.contains("nope") && msg.contains(VADD), "{msg}");

    let kernel = module.kernel(VADD).unwrap();
    let stream = Stream::new(&dev).unwrap();
    let a = Tensor::<f32>::zeros(&dev, &[8]).unwrap();
    let short = KernelArgs::new().input(&a).arg(8i32);
    // SAFETY: rejected before reaching the driver.
    let err = unsafe { kernel.launch(&stream, (1, 1, 1), &short) }.unwrap_err();
    assert!(matches!(err, RuntimeError::ParamMismatch { .. }), "{err}");
    // SAFETY: rejected before reaching the driver.
    let err = unsafe { kernel.launch(&stream, (0, 1, 1), &short) }.unwrap_err();
    assert!(matches!(err, RuntimeError::InvalidGrid { .. }), "{err}");

    let other = FIXTURES
        .iter()
        .find(|(arch, _)| *arch != dev.arch())
        .unwrap();
    let err = CuModule::from_cubin(&dev, other.1).unwrap_err();
    assert!(
        matches!(err, RuntimeError::CubinArchMismatch { .. }),
        "{err}"
    );
    let err = CuModule::from_cubin(&dev, b"\x7fTileIR\0\x0d\x05\0\0").unwrap_err();
    assert!(err.to_string().contains("tileiras"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn kernels_load_from_a_registered_bundle_without_a_compiler() {
    let Some(dev) = gpu("kernels_load_from_a_registered_bundle") else {
        return;
    };
    let Some(cubin) = vadd_cubin(&dev, "kernels_load_from_a_registered_bundle") else {
        return;
    };
    let key = CacheKey::new(KeyParts {
        kernel: "tests::vadd",
        source_hash: "fixture",
        specialization: "T=f32,TILE=1024",
        arch: &dev.arch(),
        tileiras_version: "13.5.37",
        options: "O3",
    });
    let mut w = BundleWriter::new();
    w.add(&key, cubin.to_vec()).unwrap();
    bundle::register(Bundle::from_bytes(w.to_bytes()).unwrap());

    #[derive(Debug, thiserror::Error)]
    #[error("no tileiras on this machine")]
    struct NoCompiler;
    let kernel = load_kernel(&dev, &key, VADD, || Err::<Vec<u8>, _>(NoCompiler)).unwrap();
    let again = load_kernel(&dev, &key, VADD, || Err::<Vec<u8>, _>(NoCompiler)).unwrap();
    assert_eq!(kernel.name(), again.name());

    let n = 5000;
    let a = Tensor::<f32>::random(&dev, &[n], 5).unwrap();
    let b = Tensor::<f32>::random(&dev, &[n], 6).unwrap();
    let mut c = Tensor::<f32>::zeros(&dev, &[n]).unwrap();
    let stream = Stream::new(&dev).unwrap();
    let args = vadd_args(&a, &b, &mut c);
    // SAFETY: as in vadd_from_a_cubin.
    unsafe { again.launch(&stream, grid_for(n), &args) }.unwrap();
    drop(args);
    assert_eq!(c.to_host().unwrap(), expected_sum(&a, &b));

    let wrong_arch = CacheKey::new(KeyParts {
        arch: "sm_80",
        ..key.parts()
    });
    let err = load_kernel(&dev, &wrong_arch, VADD, || Err::<Vec<u8>, _>(NoCompiler)).unwrap_err();
    assert!(matches!(err, LaunchError::KeyArchMismatch { .. }), "{err}");
}
