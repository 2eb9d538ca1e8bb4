//! The launcher on a GPU: a ragged vector add launched synchronously, asynchronously and from a captured
//! graph, checked element by element; warm launches add no loaded specialization.
//!
//! Without a CUDA driver or device the test prints "skipped: …"; without tileiras it needs the kernel in
//! a registered bundle (`CUTILE_BUNDLE`) and otherwise prints "skipped: …" with the launcher's error.

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
}

use cutile::launch::{LaunchArgs, LaunchError, Launcher, loaded_count};
use cutile::runtime::{Device, Stream, Tensor};

const N: i64 = 1_000_003;

#[test]
#[ignore = "needs a CUDA GPU: run with `-- --include-ignored` on a GPU machine"]
fn vadd_sync_async_and_graph() {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no CUDA driver or device ({e})");
            return;
        }
    };
    let stream = Stream::new(&device).unwrap();
    let a = Tensor::<f32>::random(&device, &[N], 1).unwrap();
    let b = Tensor::<f32>::random(&device, &[N], 2).unwrap();
    let mut c = Tensor::<f32>::zeros(&device, &[N]).unwrap();
    let want: Vec<f32> = {
        let (ha, hb) = (a.to_host().unwrap(), b.to_host().unwrap());
        ha.iter().zip(&hb).map(|(x, y)| x + y).collect()
    };
    let l = Launcher::new(kernels::vadd::kernel::<f32, 1024>());
    match l.launch(
        &stream,
        LaunchArgs::new().input(&a).input(&b).output(&mut c),
    ) {
        Ok(()) => {}
        Err(e @ LaunchError::NotAvailable { .. }) => {
            println!("skipped: the kernel cannot be compiled or found here: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    assert_eq!(c.to_host().unwrap(), want);
    let loaded = loaded_count();

    // Async: the guard holds the borrows; wait() reports errors.
    let mut c2 = Tensor::<f32>::zeros(&device, &[N]).unwrap();
    let pending = l
        .launch_async(
            &stream,
            LaunchArgs::new().input(&a).input(&b).output(&mut c2),
        )
        .unwrap();
    pending.wait().unwrap();
    assert_eq!(c2.to_host().unwrap(), want);
    assert_eq!(loaded_count(), loaded, "a warm launch loads nothing");

    // Graph: capture records the launch, replay runs it.
    let mut c3 = Tensor::<f32>::zeros(&device, &[N]).unwrap();
    stream.begin_capture().unwrap();
    l.launch(
        &stream,
        LaunchArgs::new().input(&a).input(&b).output(&mut c3),
    )
    .unwrap();
    let graph = stream.end_capture().unwrap();
    assert_eq!(c3.to_host().unwrap(), vec![0.0; N as usize], "not run yet");
    // SAFETY: a, b and c3 outlive the replay, which is waited for before they are read.
    unsafe { graph.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    assert_eq!(c3.to_host().unwrap(), want);
}
