//! The generated cuTile Python corpus (`tests/corpus/*.tilebc`, see `tests/corpus/README.md`) against
//! tileirdisasm, for every file:
//! - our reader + printer give exactly tileirdisasm's text (after `print::normalize`);
//! - the same for the nvcc-made foreign-call fixture `cutile/tests/foreign_fixtures/calls.tilebc`;
//! - re-encoding with our writer (at the file's own version when it is writable, byte-identical for
//!   cuTile's files; at every writable version the content allows) gives a file tileirdisasm accepts and prints identically.
//!
//! Without tileirdisasm these tests print `SKIPPED` and pass, unless `CUTILE_REQUIRE_TOOLS=1` (set by CI),
//! in which case they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use cutile_ir::bytecode::{header_version, read_module_with_version, write_module};
use cutile_ir::print::{normalize, print_module};
use cutile_ir::{Module, Version};

/// Kernels the generator writes; a smaller corpus means files went missing.
const MIN_KERNELS: usize = 25;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every `.tilebc` of the corpus, sorted.
fn corpus() -> Vec<PathBuf> {
    let dir = corpus_dir();
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "tilebc"))
        .collect();
    out.sort();
    out
}

/// The corpus, plus the nvcc-made foreign-call fixture of the `cutile` crate (preview content and a Producer
/// section, which cuTile Python never writes).
fn corpus_and_fixtures() -> Vec<PathBuf> {
    let mut out = corpus();
    let calls =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/foreign_fixtures/calls.tilebc");
    assert!(calls.is_file(), "{} is missing", calls.display());
    out.push(calls);
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// tileirdisasm through the kit's discovery (`CUTILE_TILEIRDISASM`, the installed toolchain, `PATH`); `None`
/// after `cutile_testkit::skip` (which panics when `CUTILE_REQUIRE_TOOLS=1` says the tools must be there).
fn tileirdisasm_or_skip(test: &str) -> Option<PathBuf> {
    let found = cutile_testkit::tools::tileirdisasm();
    if found.is_none() {
        cutile_testkit::skip(test, &cutile_testkit::tools::not_found("tileirdisasm"));
    }
    found
}

/// tileirdisasm's text for `bytes` (with `--preview=simt` when the header has the preview flag); `Err`
/// carries its diagnostics.
fn disasm(tool: &Path, label: &str, bytes: &[u8]) -> Result<String, String> {
    let preview = header_version(bytes).is_ok_and(|(_, preview)| preview);
    let file = std::env::temp_dir().join(format!(
        "cutile-corpus-{}-{}",
        std::process::id(),
        label.replace('/', "_")
    ));
    std::fs::write(&file, bytes).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let mut cmd = Command::new(tool);
    if preview {
        cmd.arg("--preview=simt");
    }
    let out = cmd.arg(&file).output();
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| format!("running {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `None` if equal after normalization, else the first differing line of each.
fn text_difference(ours: &str, want: &str) -> Option<String> {
    let (a, b) = (normalize(ours), normalize(want));
    if a == b {
        return None;
    }
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return Some(format!(
                "first difference at normalized line {i}\n    ours: {x}\n    want: {y}"
            ));
        }
    }
    Some(format!(
        "line counts differ: {} vs {}",
        a.lines().count(),
        b.lines().count()
    ))
}

fn read(path: &Path) -> (Vec<u8>, Module, Version) {
    let label = file_name(path);
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{label}: {e}"));
    let (module, version, _) =
        read_module_with_version(&bytes).unwrap_or_else(|e| panic!("{label}: our reader: {e}"));
    (bytes, module, version)
}

fn finish(test: &str, checked: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{test}: {} of {checked} checks failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("{test}: {checked} checks passed");
}

#[test]
fn corpus_is_complete() {
    let files = corpus();
    let mut kernels = std::collections::BTreeSet::new();
    for f in &files {
        let name = file_name(f);
        let (stem, ver) = name
            .strip_suffix(".tilebc")
            .and_then(|s| s.rsplit_once("_v13_"))
            .unwrap_or_else(|| panic!("{name}: not named KERNEL_v13_N.tilebc"));
        let (_, _, version) = read(f);
        assert_eq!(
            version.to_string(),
            format!("13.{ver}"),
            "{name}: the header's version does not match the name"
        );
        kernels.insert(stem.to_string());
    }
    assert!(
        kernels.len() >= MIN_KERNELS,
        "only {} kernels in {}",
        kernels.len(),
        corpus_dir().display()
    );
    for v in Version::READABLE {
        let tag = format!("_v{}_{}.tilebc", v.major, v.minor);
        assert!(
            files
                .iter()
                .filter(|f| file_name(f).ends_with(&tag))
                .count()
                >= MIN_KERNELS - 5,
            "too few corpus files at {v}"
        );
    }
}

#[test]
fn corpus_prints_like_tileirdisasm() {
    const TEST: &str = "corpus_prints_like_tileirdisasm";
    let Some(tool) = tileirdisasm_or_skip(TEST) else {
        return;
    };
    let files = corpus_and_fixtures();
    let mut failures = vec![];
    for f in &files {
        let label = file_name(f);
        let (bytes, module, _) = read(f);
        let want = match disasm(&tool, &label, &bytes) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!(
                    "{label}: tileirdisasm rejects the corpus file: {e}"
                ));
                continue;
            }
        };
        if let Some(d) = text_difference(&print_module(&module), &want) {
            failures.push(format!("{label}: {d}"));
        }
    }
    finish(TEST, files.len(), &failures);
}

#[test]
fn corpus_reencodes_and_tileirdisasm_agrees() {
    const TEST: &str = "corpus_reencodes_and_tileirdisasm_agrees";
    let Some(tool) = tileirdisasm_or_skip(TEST) else {
        return;
    };
    let files = corpus_and_fixtures();
    let mut failures = vec![];
    let mut checked = 0;
    for f in &files {
        let label = file_name(f);
        let (bytes, module, version) = read(f);
        let want = match disasm(&tool, &label, &bytes) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!(
                    "{label}: tileirdisasm rejects the corpus file: {e}"
                ));
                continue;
            }
        };
        for target in Version::WRITABLE {
            let out = match write_module(&module, target) {
                Ok(out) => out,
                // Content newer than an older target (or preview content) cannot be written there; every
                // file fits 13.5.
                Err(e) if e.is_version_limit() && target < Version::LATEST => {
                    continue;
                }
                Err(e) => {
                    failures.push(format!("{label}: writing at {target}: {e}"));
                    continue;
                }
            };
            checked += 1;
            // Byte identity is promised for cuTile's files (the writer numbers tables as cuTile does), not
            // for nvcc's.
            let from_cutile = f.starts_with(corpus_dir());
            if from_cutile && target == version && out != bytes {
                failures.push(format!(
                    "{label}: re-encoding at its own version {target} is not byte-identical \
                     ({} bytes, original {})",
                    out.len(),
                    bytes.len()
                ));
            }
            let what = format!("{label} re-encoded at {target}");
            match disasm(&tool, &format!("{label}-{target}"), &out) {
                Ok(text) => {
                    if let Some(d) = text_difference(&text, &want) {
                        failures.push(format!("{what}: tileirdisasm prints it differently: {d}"));
                    }
                }
                Err(e) => failures.push(format!("{what}: tileirdisasm rejects it: {e}")),
            }
        }
    }
    finish(TEST, checked, &failures);
}

/// Needs no tools: every corpus file reads and passes our verifier, at its own version and at 13.5 (the
/// version older files are re-encoded at). (Not nvcc's `calls.tilebc`: it calls functions it does not
/// declare, which our verifier refuses by design; see `cutile/tests/foreign_fixtures/README.md`.)
#[test]
fn corpus_reads_and_verifies() {
    let mut failures = vec![];
    let files = corpus();
    for f in &files {
        let label = file_name(f);
        let (_, module, version) = read(f);
        for v in [version, Version::LATEST] {
            if let Err(e) = cutile_ir::verify::verify_module(&module, v) {
                failures.push(format!("{label} at {v}: {e}"));
            }
        }
    }
    finish("corpus_reads_and_verifies", files.len() * 2, &failures);
}

/// Bytecode 13.1 has no token result on `print_tko` (it came in 13.2). The reader gives the op a token
/// result anyway, so the model is version-independent, but that value has no index in the file: every later
/// value reference must still resolve to the value the file means (regression: they were shifted by one, so
/// `maxf` got a token operand and `atomic_cas_tko` listed a token among its operand types).
#[test]
fn print_in_13_1_does_not_shift_later_values() {
    use cutile_ir::{Opcode, Type};
    let path = corpus_dir().join("atomic_cas_lock_v13_1.tilebc");
    let (_, module, version) = read(&path);
    assert_eq!(version, cutile_ir::V13_1);
    let f = &module.functions[0];
    let mut seen_print = false;
    let mut stack = vec![f.body.as_ref().expect("an entry has a body")];
    while let Some(block) = stack.pop() {
        for op in &block.ops {
            stack.extend(op.regions.iter());
            seen_print |= op.opcode == Opcode::PrintTko;
            if op.opcode == Opcode::PrintTko {
                assert_eq!(
                    op.results.len(),
                    1,
                    "print_tko gets its (13.2+) token result"
                );
            }
            // Value operands of these ops are never tokens; with shifted indices they were.
            if matches!(
                op.opcode,
                Opcode::MaxF | Opcode::CmpI | Opcode::AtomicCASTko | Opcode::AtomicRMWTko
            ) {
                let schema = op.opcode.schema();
                for (spec, group) in schema.operands.iter().zip(&op.operands) {
                    for &v in group.iter().filter(|_| spec.name != "token") {
                        assert_ne!(
                            f.value_type(v),
                            Some(&Type::Token),
                            "operand `{}` of `{}` resolved to a token",
                            spec.name,
                            schema.mnemonic
                        );
                    }
                }
            }
        }
    }
    assert!(seen_print, "the fixture has a print");
}
