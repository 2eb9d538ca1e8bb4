//! Schema-driven structural checks of one op: slot counts, attribute kinds and enum ranges, required slots,
//! operand-group arities, result and region counts, and which bytecode version has each part.

use crate::attr::Attribute;
use crate::ir::{OpAttr, Operation};
use crate::schema::{AttrKind, OperandKind, Presence, ResultSpec, default_before_since};
use crate::version::Version;

/// Whether an attribute value has the encoding its slot declares.
pub fn attr_matches(kind: AttrKind, a: &OpAttr) -> bool {
    match (kind, a) {
        (AttrKind::Enum(k), OpAttr::Enum(e)) => e.kind == k && e.value < k.count(),
        (AttrKind::Int, OpAttr::Int(_))
        | (AttrKind::Bool, OpAttr::Bool(_))
        | (AttrKind::Str, OpAttr::Str(_))
        | (AttrKind::TypeRef, OpAttr::Type(_))
        | (AttrKind::DenseConst, OpAttr::Dense(_))
        | (AttrKind::I32Array, OpAttr::I32Array(_))
        | (AttrKind::BoolArray, OpAttr::BoolArray(_))
        | (AttrKind::Hints, OpAttr::Hints(_))
        | (AttrKind::Tagged, OpAttr::Tagged(_))
        | (AttrKind::TaggedArray, OpAttr::TaggedArray(_))
        | (AttrKind::UnitFlag, OpAttr::Unit) => true,
        _ => false,
    }
}

/// A readable name for an attribute encoding.
pub fn kind_name(kind: AttrKind) -> String {
    match kind {
        AttrKind::Enum(k) => format!("{k:?} enum"),
        other => format!("{other:?}"),
    }
}

/// Whether a set attribute can still be written at a version older than the one that introduced it
/// (it then equals what the older encoding implies).
fn representable_before_since(op: &Operation, name: &str, a: &OpAttr) -> bool {
    match a {
        OpAttr::BoolArray(b) => b.iter().all(|x| !x),
        OpAttr::Enum(e) => default_before_since(op.opcode, name) == Some(*e),
        OpAttr::Tagged(Attribute::Array(v)) | OpAttr::TaggedArray(v) => v.is_empty(),
        _ => false,
    }
}

/// Check one op's layout against its schema at `version`. Messages omit the mnemonic.
pub fn check_structure(op: &Operation, version: Version) -> Result<(), String> {
    let s = op.opcode.schema();
    if s.since > version {
        return Err(format!(
            "needs bytecode {} or newer, not {version}",
            s.since
        ));
    }
    if op.opcode.is_preview() && version != Version::LATEST {
        return Err(format!(
            "is a preview op and needs bytecode {}",
            Version::LATEST
        ));
    }
    if op.attrs.len() != s.attrs.len() {
        return Err(format!(
            "has {} attribute slots, the schema has {}",
            op.attrs.len(),
            s.attrs.len()
        ));
    }
    if op.operands.len() != s.operands.len() {
        return Err(format!(
            "has {} operand groups, the schema has {}",
            op.operands.len(),
            s.operands.len()
        ));
    }
    for (spec, a) in s.attrs.iter().zip(&op.attrs) {
        let exists = spec.since.is_none_or(|v| v <= version);
        match a {
            Some(a) => {
                if !attr_matches(spec.kind, a) {
                    return Err(format!(
                        "attribute `{}` must be a {} value, got {a:?}",
                        spec.name,
                        kind_name(spec.kind)
                    ));
                }
                if !exists && !representable_before_since(op, spec.name, a) {
                    return Err(format!(
                        "attribute `{}` needs bytecode {} or newer, not {version}",
                        spec.name,
                        spec.since.unwrap_or(version)
                    ));
                }
            }
            None => {
                if spec.presence == Presence::Required && exists {
                    return Err(format!("required attribute `{}` is not set", spec.name));
                }
            }
        }
    }
    for (spec, vals) in s.operands.iter().zip(&op.operands) {
        let ok = match spec.kind {
            OperandKind::Single => vals.len() == 1,
            OperandKind::Optional(_) | OperandKind::CountedOptional => vals.len() <= 1,
            OperandKind::SizedVariadic | OperandKind::UnsizedVariadic => true,
        };
        if !ok {
            let want = if spec.kind == OperandKind::Single {
                "exactly one value"
            } else {
                "at most one value"
            };
            return Err(format!(
                "operand `{}` takes {want}, got {}",
                spec.name,
                vals.len()
            ));
        }
        if !vals.is_empty() && spec.since.is_some_and(|v| v > version) {
            return Err(format!(
                "operand `{}` needs bytecode {} or newer, not {version}",
                spec.name,
                spec.since.unwrap_or(version)
            ));
        }
    }
    match s.results {
        ResultSpec::Fixed(slots) | ResultSpec::Counted(slots) => {
            let at_version = slots
                .iter()
                .filter(|r| r.since.is_none_or(|v| v <= version))
                .count();
            if op.results.len() != slots.len() && op.results.len() != at_version {
                return Err(format!(
                    "has {} results, the schema has {} ({})",
                    op.results.len(),
                    slots.len(),
                    slots.iter().map(|r| r.name).collect::<Vec<_>>().join(", ")
                ));
            }
            // The reader gives an op the token results newer versions added (so the model is the same whatever
            // the version); at the older version they are simply not written. Any other newer result is an
            // error.
            let newer_are_tokens = slots
                .iter()
                .filter(|r| r.since.is_some_and(|v| v > version))
                .all(|r| r.name.contains("token"));
            if op.results.len() > at_version && !newer_are_tokens {
                return Err(format!(
                    "result `{}` needs a newer bytecode than {version}",
                    slots[at_version].name
                ));
            }
        }
        ResultSpec::Variadic => {}
    }
    if op.regions.len() != s.regions as usize {
        return Err(format!(
            "has {} regions, needs {}",
            op.regions.len(),
            s.regions
        ));
    }
    Ok(())
}
