//! The verifier: checks that a [`Module`] is one tileiras will accept at a given bytecode version, before any
//! bytecode is written.
//!
//! It checks, for every function:
//! - structure, driven by the op schema ([`structure`]): attribute kinds and enum ranges, required slots,
//!   operand-group arities, result and region counts, and that every op, attribute, operand, result and type
//!   exists at the target version;
//! - value scoping: each value is defined once and used only in its block or regions nested below it, after
//!   its definition (block arguments first, an op's results after its regions);
//! - terminators: every block ends with exactly one terminator of the kind its parent requires
//!   (`return` for entries, `continue` for `for`, `yield` for `reduce`/`scan`, …), and terminator operand types
//!   match what the enclosing op expects;
//! - type rules per op family ([`rules`]): float-only and integer-only element types, same-type operands and
//!   results, `cmpf`/`cmpi` results as i1 tiles of the operand shape, broadcast/reshape/permute/cat/extract
//!   shapes, mma `M×K · K×N` agreement and element combinations, view load/store tiles against the view's
//!   tile, memory-ordering/scope combinations, assume predicates, reduce/scan bodies;
//! - function kinds: entries are public and take rank-0 tiles and return nothing; extern declarations are
//!   private, bodiless, preview-only, with one `preview$access` per parameter;
//! - optimization hints (keys, value ranges) only in [`verify_module_strict`]: tileiras merely warns about
//!   them unless run with `--Werr-hints`.
//!
//! The rules follow tileiras 13.5, not only the open 13.3 dialect sources: each rejection in the test table
//! `tests/verify_reject.rs` is cross-checked against tileirdisasm, which must reject the same module, and every
//! reference sample must pass (`tests/verify_accepts.rs`).
//!
//! Every [`Diagnostic`] names the function, the op mnemonic and what is wrong. The builder runs the same
//! [`rules`] as it builds, so a module made by the builder fails here only through version limits.

pub mod rules;
pub mod structure;
pub mod text;
pub mod types;

use std::fmt;

use crate::attr::{Access, Attribute};
use crate::ir::{Block, Function, FunctionKind, Module, OpAttr, ValueId};
use crate::schema::Opcode;
use crate::types::{PreviewType, Type};
use crate::version::Version;

use rules::{Env, Frame};
use text::type_text as tt;

/// One problem found by the verifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The function's name (empty for module-level problems).
    pub function: String,
    /// The op's mnemonic, when the problem belongs to an op.
    pub op: Option<&'static str>,
    /// Where the op sits: `body[3]` is the fourth op of the body, `body[3].r0[1]` the second op of its
    /// first region.
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.function.is_empty() {
            write!(f, "@{}: ", self.function)?;
        }
        if let Some(op) = self.op {
            write!(f, "{op} (at {}): ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Everything wrong with a module (never empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the module is not valid Tile IR for bytecode {version} ({} problem(s)); fix the IR that produced it:\n{}",
    .diagnostics.len(),
    .diagnostics.iter().map(|d| format!("  {d}")).collect::<Vec<_>>().join("\n"))]
pub struct VerifyError {
    pub version: Version,
    pub diagnostics: Vec<Diagnostic>,
}

impl VerifyError {
    /// Whether any diagnostic contains `fragment` (for tests and tooling).
    pub fn mentions(&self, fragment: &str) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.to_string().contains(fragment))
    }
}

/// Verify a module for bytecode `version`: accept exactly what tileiras accepts, as far as known.
pub fn verify_module(module: &Module, version: Version) -> Result<(), VerifyError> {
    to_result(diagnose_module(module, version), version)
}

/// [`verify_module`] plus the optimization-hint checks tileiras only warns about by default (unknown keys,
/// values out of range; what `--Werr-hints` makes errors). The builder always applies these.
pub fn verify_module_strict(module: &Module, version: Version) -> Result<(), VerifyError> {
    to_result(diagnose(module, version, true), version)
}

fn to_result(diagnostics: Vec<Diagnostic>, version: Version) -> Result<(), VerifyError> {
    if diagnostics.is_empty() {
        Ok(())
    } else {
        Err(VerifyError {
            version,
            diagnostics,
        })
    }
}

/// All diagnostics for a module (empty when it is valid), as [`verify_module`] sees it.
pub fn diagnose_module(module: &Module, version: Version) -> Vec<Diagnostic> {
    diagnose(module, version, false)
}

/// [`diagnose_module`] with the hint checks of [`verify_module_strict`].
pub fn diagnose_module_strict(module: &Module, version: Version) -> Vec<Diagnostic> {
    diagnose(module, version, true)
}

fn diagnose(module: &Module, version: Version, strict_hints: bool) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut module_err = |message: String| {
        out.push(Diagnostic {
            function: String::new(),
            op: None,
            path: String::new(),
            message,
        })
    };
    if !version.is_readable() {
        module_err(format!(
            "bytecode version {version} does not exist; use one of 13.1–13.5"
        ));
    }
    if module.needs_preview() && version != Version::LATEST {
        module_err(format!(
            "the module has preview content (extern declarations or preview$call) and needs bytecode {}, not {version}",
            Version::LATEST
        ));
    }
    let mut names = std::collections::HashSet::new();
    for f in &module.functions {
        if !names.insert(f.name.as_str()) {
            module_err(format!("function name @{} is defined twice", f.name));
        }
    }
    let mut gnames = std::collections::HashSet::new();
    for g in &module.globals {
        if !gnames.insert(g.name.as_str()) {
            module_err(format!("global name @{} is defined twice", g.name));
        }
        let ok = match &g.ty {
            Type::Tile { elem, shape } if shape.len() == 1 => match **elem {
                Type::Scalar(s) => g.value.len() == s.storage_bytes() * shape[0] as usize,
                _ => false,
            },
            _ => false,
        };
        if !ok {
            module_err(format!(
                "global @{} must be a rank-1 tile of scalars with a matching initializer, got {} with {} bytes",
                g.name,
                tt(&g.ty),
                g.value.len()
            ));
        }
        if let Err(m) = types::type_ok(&g.ty) {
            module_err(format!("global @{}: {m}", g.name));
        }
        if g.alignment != 0 && !g.alignment.is_power_of_two() {
            module_err(format!(
                "global @{}: alignment {} is not a power of two",
                g.name, g.alignment
            ));
        }
    }
    for f in &module.functions {
        FnVerifier::new(module, f, version, strict_hints, &mut out).run();
    }
    out
}

struct FnVerifier<'a> {
    module: &'a Module,
    f: &'a Function,
    version: Version,
    strict_hints: bool,
    out: &'a mut Vec<Diagnostic>,
    visible: Vec<bool>,
    defined: Vec<bool>,
    frames: Vec<Frame>,
}

impl<'a> FnVerifier<'a> {
    fn new(
        module: &'a Module,
        f: &'a Function,
        version: Version,
        strict_hints: bool,
        out: &'a mut Vec<Diagnostic>,
    ) -> Self {
        FnVerifier {
            module,
            f,
            version,
            strict_hints,
            out,
            visible: vec![false; f.values.len()],
            defined: vec![false; f.values.len()],
            frames: vec![Frame::entry()],
        }
    }

    fn err(&mut self, op: Option<Opcode>, path: &str, message: String) {
        self.out.push(Diagnostic {
            function: self.f.name.clone(),
            op: op.map(Opcode::mnemonic),
            path: path.to_string(),
            message,
        });
    }

    fn run(&mut self) {
        let f = self.f;
        for (i, t) in f.param_types.iter().chain(&f.result_types).enumerate() {
            if let Err(m) = types::type_ok(t) {
                self.err(None, "", format!("signature type {i}: {m}"));
            }
            self.check_type_version(None, "", t);
        }
        match &f.kind {
            FunctionKind::Entry { hints } => self.check_entry(hints),
            FunctionKind::ExternDecl { const_params } => self.check_extern(const_params),
            FunctionKind::ExternImpl { .. } => {
                // tileiras requires every input of an implementation to be a `!preview$fragment`, a type
                // with no known encoding (toolchain.md §4.3), so no extern implementation can pass today.
                self.err(None, "", "extern implementations are not supported: tileiras needs !preview$fragment inputs, which have no known bytecode encoding".into());
                if !f.private {
                    self.err(None, "", "an extern implementation must be private".into());
                }
                if f.body.as_ref().is_some_and(|b| !b.ops.is_empty()) {
                    self.err(None, "", "an extern implementation carries no body".into());
                }
            }
        }
    }

    fn check_entry(&mut self, hints: &crate::attr::OptimizationHints) {
        let f = self.f;
        if f.private {
            self.err(None, "", "an entry must be public".into());
        }
        if !f.result_types.is_empty() {
            self.err(
                None,
                "",
                format!(
                    "an entry returns nothing, but the signature returns ({})",
                    text::types_text(&f.result_types)
                ),
            );
        }
        for (i, t) in f.param_types.iter().enumerate() {
            if t.tile_shape().is_none_or(|s| !s.is_empty()) {
                self.err(None, "", format!(
                    "entry parameter {i} must be a rank-0 tile (a scalar or a pointer), got {}; pass arrays as a pointer plus shape and stride scalars",
                    tt(t)
                ));
            }
        }
        if self.strict_hints
            && let Err(m) = rules::check_hints(
                hints,
                &["num_cta_in_cga", "num_worker_warps_per_cta", "occupancy"],
                Some(self.version),
            )
        {
            self.err(None, "", m);
        }
        for (i, a) in f.arg_attrs.iter().enumerate() {
            if !matches!(a, Attribute::Dictionary(d) if d.is_empty()) {
                self.err(None, "", format!("entry parameter {i} carries an attribute; tileiras supports none on entries"));
            }
        }
        let Some(body) = &f.body else {
            self.err(None, "", "an entry needs a body".into());
            return;
        };
        let args_ok = body.args.len() == f.param_types.len()
            && body
                .args
                .iter()
                .zip(&f.param_types)
                .all(|(v, t)| f.value_type(*v) == Some(t));
        if !args_ok {
            self.err(
                None,
                "",
                "the body's arguments must be the parameters, in order and of the same types"
                    .into(),
            );
        }
        self.block(body, "body", Some(&[Opcode::Return]));
    }

    fn check_extern(&mut self, const_params: &[Attribute]) {
        let f = self.f;
        if !f.private {
            self.err(None, "", "an extern declaration must be private".into());
        }
        if f.body.as_ref().is_some_and(|b| !b.ops.is_empty()) {
            self.err(
                None,
                "",
                "an extern declaration must not have a body".into(),
            );
        }
        if self.version != Version::LATEST {
            self.err(
                None,
                "",
                format!("extern declarations need bytecode {}", Version::LATEST),
            );
        }
        if f.param_types.is_empty() {
            self.err(
                None,
                "",
                "an extern declaration needs at least one parameter".into(),
            );
        }
        let mut outs = Vec::new();
        for (i, t) in f.param_types.iter().enumerate() {
            if !t.is_tile() {
                self.err(
                    None,
                    "",
                    format!("extern parameter {i} must be a tile, got {}", tt(t)),
                );
            }
            let access = f.arg_attrs.get(i).and_then(|a| match a {
                Attribute::Dictionary(d) => d.iter().find_map(|(k, v)| match v {
                    Attribute::Access(acc) if k == "cuda_tile.preview$access" => Some(*acc),
                    _ => None,
                }),
                _ => None,
            });
            match access {
                None => self.err(None, "", format!(
                    "extern parameter {i} needs a `cuda_tile.preview$access` attribute (in, out or inout)"
                )),
                Some(Access::Out | Access::InOut) => outs.push(t.clone()),
                Some(Access::In) => {}
            }
        }
        if outs != f.result_types {
            self.err(None, "", format!(
                "the out/inout parameters ({}) must bind, in order, to results of the same types ({})",
                text::types_text(&outs),
                text::types_text(&f.result_types)
            ));
        }
        for (i, p) in const_params.iter().enumerate() {
            let ok = matches!(p, Attribute::ConstParam { ty: Type::Preview(k), .. }
                if matches!(k, PreviewType::Datatype | PreviewType::Shape | PreviewType::String | PreviewType::Index));
            if !ok {
                self.err(None, "", format!(
                    "constant parameter {i} must be a const_param of kind !preview$Datatype, !preview$shape, !preview$string or index"
                ));
            }
        }
    }

    fn check_type_version(&mut self, op: Option<Opcode>, path: &str, t: &Type) {
        let since = types::type_since(t);
        if since > self.version {
            self.err(
                op,
                path,
                format!(
                    "type {} needs bytecode {since} or newer, not {}",
                    tt(t),
                    self.version
                ),
            );
        }
        if t.is_preview() && self.version != Version::LATEST {
            self.err(
                op,
                path,
                format!("preview type {} needs bytecode {}", tt(t), Version::LATEST),
            );
        }
    }

    /// Define a value in the current scope.
    fn define(&mut self, v: ValueId, op: Option<Opcode>, path: &str) {
        let i = v.0 as usize;
        let Some(t) = self.f.values.get(i) else {
            self.err(
                op,
                path,
                format!("value %{i} has no type in the function's value table"),
            );
            return;
        };
        if self.defined[i] {
            self.err(op, path, format!("value %{i} is defined twice"));
        }
        if let Err(m) = types::type_ok(t) {
            self.err(op, path, format!("value %{i}: {m}"));
        }
        self.check_type_version(op, path, t);
        self.defined[i] = true;
        self.visible[i] = true;
    }

    /// Walk a block; `ends_with` is checked for the body of the function (region ops check their own).
    fn block(&mut self, b: &Block, path: &str, ends_with: Option<&[Opcode]>) {
        let mut scope: Vec<ValueId> = Vec::new();
        for &a in &b.args {
            self.define(a, None, path);
            scope.push(a);
        }
        if let Some(allowed) = ends_with {
            let last = b.ops.last().map(|o| o.opcode);
            if !last.is_some_and(|o| allowed.contains(&o)) {
                let names: Vec<&str> = allowed.iter().map(|o| o.mnemonic()).collect();
                self.err(
                    None,
                    path,
                    format!(
                        "the {path} must end with {}, but ends with {}",
                        names.join(" or "),
                        last.map_or("nothing", |o| o.mnemonic())
                    ),
                );
            }
        }
        let n = b.ops.len();
        for (i, op) in b.ops.iter().enumerate() {
            let p = format!("{path}[{i}]");
            let code = Some(op.opcode);
            if op.opcode.is_terminator() && i + 1 != n {
                self.err(
                    code,
                    &p,
                    "a terminator must be the last op of its block".into(),
                );
            }
            if let Err(m) = structure::check_structure(op, self.version) {
                self.err(code, &p, m);
                // Rules index slots by schema position; skip them on a malformed op.
                continue;
            }
            for v in op.all_operands() {
                let vi = v.0 as usize;
                if vi >= self.f.values.len() {
                    self.err(
                        code,
                        &p,
                        format!("operand %{vi} does not exist in this function"),
                    );
                } else if !self.visible[vi] {
                    let why = if self.defined[vi] {
                        "defined in a region that has ended"
                    } else {
                        "used before its definition"
                    };
                    self.err(
                        code,
                        &p,
                        format!("operand %{vi} is not in scope here ({why})"),
                    );
                }
            }
            let all_exist = op
                .all_operands()
                .chain(op.results.iter().copied())
                .all(|v| (v.0 as usize) < self.f.values.len());
            let env = Env {
                module: self.module,
                values: &self.f.values,
                frames: &self.frames,
                strict_hints: self.strict_hints,
            };
            if all_exist && let Err(m) = rules::check_op(env, op) {
                self.err(code, &p, m);
            }
            if let Some(OpAttr::Type(t)) = op
                .attrs
                .iter()
                .flatten()
                .find(|a| matches!(a, OpAttr::Type(_)))
            {
                self.check_type_version(code, &p, t);
            }
            if !op.regions.is_empty() {
                self.frames.push(Frame::of_op(&self.f.values, op));
                for (ri, r) in op.regions.iter().enumerate() {
                    self.block(r, &format!("{p}.r{ri}"), None);
                }
                self.frames.pop();
            }
            for &r in &op.results {
                self.define(r, code, &p);
                scope.push(r);
            }
        }
        for v in scope {
            if let Some(x) = self.visible.get_mut(v.0 as usize) {
                *x = false;
            }
        }
    }
}
