//! Repository hygiene, over the files git tracks (`git ls-files` in the checkout above this crate). Each
//! check fails listing every offender:
//! - `src_files_start_with_a_module_doc`: every `.rs` under a `src/` directory opens with a `//!` doc;
//! - `no_machine_paths`: no tracked source, doc, manifest or script names an absolute path of a particular
//!   machine (anything under `/root` or `/work`, or a real-looking home directory `/home/<user>`);
//! - `markdown_links_resolve`: relative links in tracked `.md` files name files that exist;
//! - `every_dsl_entry_is_in_the_catalog`: every `#[cutile::entry]` of `cutile-kernels/src/**/dsl.rs` is a
//!   kernel of `cutile_kernels::catalog::compile_jobs_full()`, so none is dead code no host API launches.
//! - `catalog_test_files_are_modules_of_its_test_binary`: every `cutile-kernels/tests/*.rs` is a module of
//!   the crate's one test binary, `tests/kernels.rs` (with `autotests = false` an undeclared file never runs).

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The checkout: this crate's parent.
fn root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The tracked files, relative to [`root`]; `None` (after saying why) outside a git checkout, e.g. a
/// source archive, where the tidy checks have nothing to check.
fn tracked() -> Option<Vec<String>> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output();
    match out {
        Ok(o) if o.status.success() => Some(
            String::from_utf8_lossy(&o.stdout)
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        ),
        Ok(o) => {
            eprintln!(
                "SKIPPED tidy: not a git checkout ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            None
        }
        Err(e) => {
            eprintln!("SKIPPED tidy: cannot run git ({e})");
            None
        }
    }
}

/// A tracked file's text; `None` for binary (non-UTF-8) or vanished files (a deletion not yet staged).
fn text(path: &str) -> Option<String> {
    std::fs::read_to_string(root().join(path)).ok()
}

fn has_ext(path: &str, exts: &[&str]) -> bool {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e))
}

fn fail_if_any(what: &str, offenders: &[String]) {
    assert!(
        offenders.is_empty(),
        "{what} ({}):\n  {}",
        offenders.len(),
        offenders.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------------------
// (a) module docs

/// Files exempt from the module-doc rule, each with its reason.
const NO_MODULE_DOC_OK: &[&str] = &[
    // Generated op table, being rewritten elsewhere; its first line is a `// @generated` marker.
    "cutile/ir/src/schema/table.rs",
];

#[test]
fn src_files_start_with_a_module_doc() {
    let Some(files) = tracked() else { return };
    let mut bad = Vec::new();
    for f in &files {
        let in_src = f.starts_with("src/") || f.contains("/src/");
        if !in_src || !has_ext(f, &["rs"]) || NO_MODULE_DOC_OK.contains(&f.as_str()) {
            continue;
        }
        let Some(t) = text(f) else { continue };
        let first = t.lines().map(str::trim).find(|l| !l.is_empty());
        if !first.is_some_and(|l| l.starts_with("//!")) {
            bad.push(format!("{f}: first line {:?}", first.unwrap_or("")));
        }
    }
    fail_if_any("src files without a `//!` module doc", &bad);
}

// ---------------------------------------------------------------------------------------------------------
// (b) machine paths

/// Fake home directories tests use on purpose (e.g. `cutile/src/toolchain/layout.rs`'s `$HOME=/home/u`).
const FAKE_HOMES: &[&str] = &["u", "user", "me", "someone", "example"];

/// The machine paths in `line`: anything under `/root` or `/work`, and `/home/<name>` for a name not in
/// [`FAKE_HOMES`]. (The needles are assembled at run time so this file does not flag itself.)
fn machine_paths(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for dir in ["root", "work"] {
        let needle = format!("/{dir}/");
        if line.contains(&needle) {
            found.push(needle);
        }
    }
    let home = format!("/{}/", "home");
    let mut rest = line;
    while let Some(i) = rest.find(&home) {
        let after = &rest[i + home.len()..];
        let user: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .collect();
        let looks_real = !user.is_empty()
            && user.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && !FAKE_HOMES.contains(&user.as_str());
        if looks_real {
            found.push(format!("{home}{user}"));
        }
        rest = after;
    }
    found
}

#[test]
fn machine_path_detection() {
    let (r, w, h) = (
        ["/", "root", "/x"].concat(),
        ["/", "work", "/main"].concat(),
        ["/", "home", "/alice/src"].concat(),
    );
    assert_eq!(machine_paths(&r).len(), 1);
    assert_eq!(machine_paths(&w).len(), 1);
    assert_eq!(machine_paths(&h).len(), 1);
    assert!(machine_paths(&["/", "home", "/u/.cache"].concat()).is_empty());
    assert!(machine_paths("/homework/ and rootfs/ and src/work.rs").is_empty());
}

#[test]
fn no_machine_paths() {
    let Some(files) = tracked() else { return };
    let mut bad = Vec::new();
    for f in &files {
        if !has_ext(f, &["rs", "md", "toml", "py", "sh"])
            || f.starts_with("cutile/ir/tests/corpus/")
        {
            continue;
        }
        let Some(t) = text(f) else { continue };
        for (n, line) in t.lines().enumerate() {
            let found = machine_paths(line);
            if !found.is_empty() {
                bad.push(format!("{f}:{}: {}", n + 1, found.join(", ")));
            }
        }
    }
    fail_if_any(
        "absolute machine paths (use CARGO_MANIFEST_DIR, $HOME or an environment variable)",
        &bad,
    );
}

// ---------------------------------------------------------------------------------------------------------
// (c) markdown links

/// The targets of the inline links `[text](target)` in `md`, with their line numbers, outside fenced code
/// blocks and inline code spans.
fn md_links(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in md.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let inner = &after[..end];
            let target = match inner.strip_prefix('<') {
                Some(angled) => angled.split('>').next().unwrap_or(""),
                None => inner.split_whitespace().next().unwrap_or(""),
            };
            if !target.is_empty() {
                out.push((n + 1, target.to_string()));
            }
            rest = &after[end..];
        }
    }
    out
}

/// `base/rel` with `.` and `..` folded lexically.
fn join_lexically(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn markdown_link_parsing() {
    let md = "See [a](docs/a.md#x) and [b](<b c.md>) and [c](https://x.y) `[d](not/a/link)`\n\
              ```\n[e](in/a/fence.md)\n```\n[f](g.md \"title\")";
    let links: Vec<String> = md_links(md).into_iter().map(|(_, t)| t).collect();
    assert_eq!(links, ["docs/a.md#x", "b c.md", "https://x.y", "g.md"]);
    assert_eq!(
        join_lexically(Path::new("r/docs"), "../shared/x"),
        PathBuf::from("r/shared/x")
    );
}

#[test]
fn markdown_links_resolve() {
    let Some(files) = tracked() else { return };
    let root = root();
    // `shared/` lives beside the checkout, not in it.
    let shared = join_lexically(&root, "../shared");
    let mut bad = Vec::new();
    for f in files.iter().filter(|f| has_ext(f, &["md"])) {
        let Some(t) = text(f) else { continue };
        let dir = root
            .join(f)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        for (line, target) in md_links(&t) {
            let external = target.starts_with("http:")
                || target.starts_with("https:")
                || target.starts_with("mailto:")
                || target.starts_with('#');
            if external {
                continue;
            }
            let path = target.split('#').next().unwrap_or("");
            let resolved = if let Some(abs) = path.strip_prefix('/') {
                join_lexically(&root, abs)
            } else {
                join_lexically(&dir, path)
            };
            if resolved.starts_with(&shared) {
                continue;
            }
            if !resolved.exists() {
                bad.push(format!("{f}:{line}: ({target})"));
            }
        }
    }
    fail_if_any("markdown links to missing files", &bad);
}

// ---------------------------------------------------------------------------------------------------------
// (d) DSL entries reachable from the catalog

/// The names of the `#[cutile::entry]` functions in `src`: the `fn` that follows each attribute.
fn entry_names(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = false;
    for line in src.lines() {
        let l = line.trim();
        if l.starts_with("#[cutile::entry") {
            pending = true;
            continue;
        }
        if !pending {
            continue;
        }
        if let Some(i) = l.find("fn ") {
            let name: String = l[i + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
            pending = false;
        }
    }
    out
}

#[test]
fn every_dsl_entry_is_in_the_catalog() {
    let Some(files) = tracked() else { return };
    let mut entries = BTreeSet::new();
    for f in &files {
        if f.starts_with("cutile-kernels/src/") && f.ends_with("/dsl.rs") {
            let Some(t) = text(f) else { continue };
            for name in entry_names(&t) {
                entries.insert((name, f.clone()));
            }
        }
    }
    assert!(
        !entries.is_empty(),
        "no #[cutile::entry] found in cutile-kernels/src/**/dsl.rs"
    );
    let jobs = cutile_kernels::catalog::compile_jobs_full();
    let kernels: BTreeSet<&str> = jobs.iter().map(|j| j.kernel).collect();
    assert!(
        !kernels.contains("catalog"),
        "the catalog failed to plan its calls"
    );
    let missing: Vec<String> = entries
        .iter()
        .filter(|(name, _)| !kernels.contains(name.as_str()))
        .map(|(name, f)| format!("{f}: {name}"))
        .collect();
    fail_if_any(
        "DSL entries no compile job (hence no host API) uses: dead code, or a family's planner misses them",
        &missing,
    );
}

// ---------------------------------------------------------------------------------------------------------
// (e) the catalog's one test binary

/// `cutile-kernels` sets `autotests = false` and links its tests into `tests/kernels.rs`, so a test file
/// that file does not declare would never be compiled: this names any such file.
#[test]
fn catalog_test_files_are_modules_of_its_test_binary() {
    let dir = root().join("cutile-kernels/tests");
    let root_src = std::fs::read_to_string(dir.join("kernels.rs"))
        .unwrap_or_else(|e| panic!("cutile-kernels/tests/kernels.rs: {e}"));
    let declared: BTreeSet<&str> = root_src
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if has_ext(&path.to_string_lossy(), &["rs"])
            && stem != "kernels"
            && !declared.contains(stem)
        {
            missing.push(format!(
                "cutile-kernels/tests/{stem}.rs: add `mod {stem};` to tests/kernels.rs"
            ));
        }
    }
    fail_if_any("catalog test files no test binary compiles", &missing);
}
