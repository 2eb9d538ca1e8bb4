//! The sample kernels: they verify, write at 13.4 and 13.5, read back to the same module, and compile with
//! the real tileiras: vector add, softmax and matmul for sm_80, sm_90, sm_100 and sm_120, every variant for
//! sm_90 (skipped, with a message, when tileiras is absent).

mod builder_support;

use cutile_ir::bytecode::{read_module, write_module};
use cutile_ir::samples::*;
use cutile_ir::verify::verify_module;
use cutile_ir::*;

use ScalarType::*;

fn samples() -> Vec<(&'static str, Module)> {
    let ok = |r: Result<Module, cutile_ir::builder::BuildError>| r.expect("sample builds");
    vec![
        ("vadd_f32", ok(vector_add(1024, F32))),
        ("vadd_i32", ok(vector_add(256, I32))),
        ("softmax_f32", ok(row_softmax(1024, F32))),
        ("softmax_bf16", ok(row_softmax(512, BF16))),
        ("softmax_f16", ok(row_softmax(256, F16))),
        ("matmul_f16", ok(tiled_matmul(128, 128, 64, F16, F32))),
        ("matmul_bf16", ok(tiled_matmul(64, 64, 32, BF16, F32))),
        ("matmul_f32", ok(tiled_matmul(64, 64, 16, F32, F32))),
    ]
}

const ARCHS: [&str; 4] = ["sm_80", "sm_90", "sm_100", "sm_120"];

#[test]
fn samples_verify_write_and_read_back() {
    for (name, m) in samples() {
        for v in Version::WRITABLE {
            verify_module(&m, v).unwrap_or_else(|e| panic!("{name} at {v}: {e}"));
            let bytes = write_module(&m, v).unwrap_or_else(|e| panic!("{name}: write at {v}: {e}"));
            assert_eq!(&bytes[8..10], &[v.major, v.minor], "{name}: header version");
            let back =
                read_module(&bytes).unwrap_or_else(|e| panic!("{name}: read back at {v}: {e}"));
            assert_eq!(
                cutile_ir::print::print_module(&back),
                cutile_ir::print::print_module(&m),
                "{name} at {v}: the module read back prints differently"
            );
            let again =
                write_module(&back, v).unwrap_or_else(|e| panic!("{name}: rewrite at {v}: {e}"));
            assert_eq!(
                again, bytes,
                "{name} at {v}: write → read → write is not the identity"
            );
        }
    }
}

#[test]
fn samples_compile_with_tileiras() {
    let Some(tileiras) = builder_support::tileiras() else {
        builder_support::skip("samples_compile_with_tileiras", "tileiras");
        return;
    };
    // (name, version, arch, bytes) jobs, run on all cores: matmul takes seconds per arch.
    // The three reference kernels at 13.5 for every arch; every sample at 13.4 and 13.5 for sm_90.
    let mut jobs = Vec::new();
    for (name, m) in samples() {
        for v in Version::WRITABLE {
            let bytes = write_module(&m, v).expect("write");
            let full = v == V13_5 && ["vadd_f32", "softmax_bf16", "matmul_f16"].contains(&name);
            for arch in ARCHS {
                if full || arch == "sm_90" {
                    jobs.push((name, v, arch, bytes.clone()));
                }
            }
        }
    }
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(jobs.len());
    let queue = std::sync::Mutex::new(jobs);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let job = queue.lock().map(|mut q| q.pop()).unwrap_or(None);
                    let Some((name, v, arch, bytes)) = job else {
                        break;
                    };
                    let (run, cubin) = builder_support::compile(
                        &tileiras,
                        &bytes,
                        arch,
                        &format!("{name}-{v}-{arch}"),
                    );
                    let elf = cubin.starts_with(b"\x7fELF");
                    if (!run.ok || !elf)
                        && let Ok(mut f) = failures.lock()
                    {
                        f.push(format!(
                            "{name} {v} {arch}: {} (cubin {} bytes)",
                            run.stderr.trim(),
                            cubin.len()
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_default();
    assert!(
        failures.is_empty(),
        "tileiras rejected:\n{}",
        failures.join("\n")
    );
}
