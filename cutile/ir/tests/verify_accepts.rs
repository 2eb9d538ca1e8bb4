//! The verifier accepts what NVIDIA's tools accept: every reference sample (cuTile Python output at
//! 13.1–13.5, the hand-built preview modules, the printer tests' modules), read back and verified at its own
//! version. Samples tileiras rejects for reasons the data model shows are rejected too.

use std::path::{Path, PathBuf};

use cutile_ir::bytecode::read_module_with_version;
use cutile_ir::verify::diagnose_module;

/// Samples the verifier must reject, and a fragment of the reason.
const REJECTED: &[(&str, &str)] = &[(
    "extern_impl_attempt_rejected.tilebc",
    "extern implementations are not supported",
)];

fn samples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut out = vec![];
    for dir in ["bytecode_data", "bytecode_data/preview", "print_data"] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            out.extend(
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "tilebc")),
            );
        }
    }
    out.sort();
    out
}

#[test]
fn reference_samples_verify_at_their_version() {
    let files = samples();
    assert!(
        files.len() >= 20,
        "expected the reference samples under tests/, found {}",
        files.len()
    );
    let mut failures = vec![];
    for p in &files {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let (m, version, _) = match read_module_with_version(&bytes) {
            Ok(x) => x,
            Err(e) => {
                failures.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        let ds = diagnose_module(&m, version);
        match REJECTED.iter().find(|(n, _)| *n == name) {
            Some((_, why)) => {
                if !ds.iter().any(|d| d.to_string().contains(why)) {
                    failures.push(format!("{name}: should be rejected ({why}), got {ds:?}"));
                }
            }
            None => {
                if !ds.is_empty() {
                    let list: Vec<String> = ds.iter().map(|d| format!("\n    {d}")).collect();
                    failures.push(format!("{name} (bytecode {version}):{}", list.concat()));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the verifier disagrees with NVIDIA's tools on:\n{}",
        failures.join("\n")
    );
}
