//! The layer rule of `ARCHITECTURE.md` ("Layers"), checked on the source: every `crate::X` path in a file
//! of `cutile/src/<module>/` (or `cutile/src/<module>.rs`) is an edge from `<module>` to `X`, and an
//! edge may only go to a strictly lower layer. The test names each edge that goes the wrong way (with
//! file and line) and each cycle among the top-level modules. Comments are not edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first. A module may import only modules of the layers before its own; modules of one layer
/// do not import each other.
const LAYERS: &[&[&str]] = &[
    // Leaves: they import nothing from the crate.
    &["toolchain", "trace", "key", "runtime"],
    // The device DSL: its ops record into `trace`.
    &["core"],
    // Kernels as values, specialization, the compile-only API, ArgError.
    &["dsl"],
    // AOT bundles of cubins by key.
    &["bundle"],
    // Memory / bundle / disk lookup with a compile step.
    &["cache"],
    // Launching DSL kernels on runtime tensors (plan, lookup chain, typed launchers).
    &["launch"],
    // Tuning on top of launches.
    &["tune"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// One `crate::X` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edge {
    to: String,
    file: PathBuf,
    line: usize,
}

/// Removes `//` comments (line and doc) and `/* */` blocks, keeping line breaks.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let b = src.as_bytes();
    let (mut i, mut in_str, mut block) = (0, false, 0usize);
    while i < b.len() {
        let c = b[i];
        if block > 0 {
            if c == b'*' && b.get(i + 1) == Some(&b'/') {
                block -= 1;
                i += 2;
                continue;
            }
            if c == b'/' && b.get(i + 1) == Some(&b'*') {
                block += 1;
                i += 2;
                continue;
            }
            if c == b'\n' {
                out.push('\n');
            }
            i += 1;
            continue;
        }
        if in_str {
            if c == b'\\' {
                out.push(' ');
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            out.push(if c == b'\n' { '\n' } else { ' ' });
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                out.push(' ');
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                block = 1;
                i += 2;
            }
            _ => {
                // Push the whole UTF-8 character.
                let ch = src[i..].chars().next().unwrap_or(' ');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level module names of a `use` group body starting right after `{`.
fn group_heads(s: &str) -> Vec<String> {
    let (mut depth, mut start, mut heads) = (0usize, 0usize, vec![]);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                heads.push(ident_at(s[start..i].trim_start()).to_string());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(ident_at(s[start..i].trim_start()).to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    heads.into_iter().filter(|h| !h.is_empty()).collect()
}

/// Every `crate::X` (and `use crate::{X, Y::..}`) in `src`, with its line.
fn crate_refs(src: &str) -> Vec<(String, usize)> {
    let code = strip_comments(src);
    let mut out = vec![];
    let mut from = 0;
    while let Some(k) = code[from..].find("crate::") {
        let at = from + k;
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c == '$' || c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[from..];
        if let Some(body) = rest.strip_prefix('{') {
            for h in group_heads(body) {
                out.push((h, line));
            }
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                out.push((id.to_string(), line));
            }
        }
    }
    out
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .expect("read a source folder")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// Top-level module → the edges out of it (self-references dropped).
fn module_edges(src_dir: &Path) -> BTreeMap<String, Vec<Edge>> {
    let mut modules = BTreeMap::new();
    let mut entries: Vec<_> = std::fs::read_dir(src_dir)
        .expect("read cutile/src")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let name = match path.file_stem().and_then(|s| s.to_str()) {
            Some(n) if path.is_dir() => n.to_string(),
            Some(n) if n != "lib" && path.extension().is_some_and(|e| e == "rs") => n.to_string(),
            _ => continue,
        };
        let mut files = vec![];
        rust_files(&path, &mut files);
        let edges: &mut Vec<Edge> = modules.entry(name.clone()).or_default();
        for file in files {
            let src = std::fs::read_to_string(&file).expect("read a source file");
            for (to, line) in crate_refs(&src) {
                if to != name {
                    edges.push(Edge {
                        to,
                        file: file.clone(),
                        line,
                    });
                }
            }
        }
    }
    modules
}

/// Edges that break the layer rule, as messages.
fn violations(modules: &BTreeMap<String, Vec<Edge>>) -> Vec<String> {
    let mut bad = vec![];
    for (from, edges) in modules {
        let Some(lf) = layer_of(from) else {
            bad.push(format!(
                "module `{from}` is in no layer: add it to LAYERS in tests/layers.rs and to \
                 ARCHITECTURE.md"
            ));
            continue;
        };
        for e in edges {
            // Paths into the crate root (e.g. `crate::entry`) are not modules of a layer.
            if !modules.contains_key(&e.to) {
                continue;
            }
            let lt = layer_of(&e.to).unwrap_or(usize::MAX);
            if lt >= lf {
                bad.push(format!(
                    "{}:{}: `{from}` (layer {lf}) uses `crate::{}` (layer {lt}); a module may only use \
                     lower layers",
                    e.file.display(),
                    e.line,
                    e.to
                ));
            }
        }
    }
    bad
}

/// Cycles among the modules, each as `a -> b -> … -> a`.
fn cycles(modules: &BTreeMap<String, Vec<Edge>>) -> Vec<String> {
    let graph: BTreeMap<&str, BTreeSet<&str>> = modules
        .iter()
        .map(|(m, es)| {
            let to = es
                .iter()
                .map(|e| e.to.as_str())
                .filter(|t| modules.contains_key(*t))
                .collect();
            (m.as_str(), to)
        })
        .collect();
    let mut found = BTreeSet::new();
    fn walk<'a>(
        g: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        node: &'a str,
        path: &mut Vec<&'a str>,
        found: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == node) {
            let mut cyc: Vec<&str> = path[i..].to_vec();
            // Start at the smallest name so each cycle is reported once.
            let min = (0..cyc.len()).min_by_key(|&k| cyc[k]).unwrap_or(0);
            cyc.rotate_left(min);
            cyc.push(cyc[0]);
            found.insert(cyc.join(" -> "));
            return;
        }
        path.push(node);
        for next in g.get(node).into_iter().flatten() {
            walk(g, next, path, found);
        }
        path.pop();
    }
    for m in graph.keys() {
        walk(&graph, m, &mut vec![], &mut found);
    }
    found.into_iter().collect()
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = module_edges(&src);
    assert!(
        modules.contains_key("launch") && modules.contains_key("core"),
        "did not find the modules under {}",
        src.display()
    );
    let mut problems = violations(&modules);
    for c in cycles(&modules) {
        problems.push(format!("cycle among top-level modules: {c}"));
    }
    assert!(
        problems.is_empty(),
        "the layer rule of ARCHITECTURE.md is broken:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn every_layer_module_exists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for m in LAYERS.iter().flat_map(|l| l.iter()) {
        assert!(
            src.join(m).is_dir() || src.join(format!("{m}.rs")).is_file(),
            "LAYERS names `{m}`, which is not a module of cutile/src"
        );
    }
}

#[test]
fn the_scanner_reads_paths_groups_and_skips_comments() {
    let src = r#"
use crate::a::X;
use crate::{b::Y, c, d::{e, f}};
// use crate::commented;
/// [`link`](crate::doc_link)
fn g() { let _ = "crate::in_string"; crate::h::call(); $crate::not_ours(); }
"#;
    let got: Vec<_> = crate_refs(src).into_iter().map(|(m, _)| m).collect();
    assert_eq!(got, ["a", "b", "c", "d", "h"]);
    assert_eq!(
        crate_refs("use crate::a;\n\nuse crate::b;")[1],
        ("b".into(), 3)
    );
}

#[test]
fn a_wrong_way_edge_and_a_cycle_are_named() {
    let edge = |to: &str| Edge {
        to: to.into(),
        file: PathBuf::from("x.rs"),
        line: 1,
    };
    let mut m = BTreeMap::new();
    m.insert("runtime".to_string(), vec![edge("cache")]);
    m.insert("cache".to_string(), vec![edge("runtime")]);
    let v = violations(&m);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("`runtime` (layer 0) uses `crate::cache`"),
        "{v:?}"
    );
    assert_eq!(cycles(&m), ["cache -> runtime -> cache"]);
}
