//! The generic op path: fill any op's schema slots by name, for ops (or attribute combinations) that have no
//! typed method.

use crate::attr::EnumValue;
use crate::ir::{Block, OpAttr, Operation, ValueId};
use crate::schema::Opcode;
use crate::types::Type;
use crate::verify::structure::{attr_matches, kind_name};

use super::error::BuildError;
use super::function::FunctionBuilder;

/// Builds one op by slot name; see [`FunctionBuilder::op`]. Problems are reported by [`build`](Self::build).
#[derive(Debug)]
pub struct OpBuilder<'f, 'm> {
    fb: &'f mut FunctionBuilder<'m>,
    op: Operation,
    results: Vec<Type>,
    error: Option<BuildError>,
}

impl<'m> FunctionBuilder<'m> {
    /// Start an op of any opcode; fill its slots by the names in its [`OpSchema`](crate::OpSchema), then call
    /// [`OpBuilder::build`]. Example:
    /// `f.op(Opcode::AddF).operand("lhs", a).operand("rhs", b).enum_attr("rounding_mode", RoundingMode::NearestEven).result(t).build()?`
    pub fn op(&mut self, opcode: Opcode) -> OpBuilder<'_, 'm> {
        OpBuilder {
            fb: self,
            op: Operation::new(opcode),
            results: vec![],
            error: None,
        }
    }
}

impl<'f, 'm> OpBuilder<'f, 'm> {
    fn fail(&mut self, message: String) {
        if self.error.is_none() {
            self.error = Some(BuildError::op(self.op.opcode, message));
        }
    }

    fn operand_slot(&mut self, group: &str) -> Option<usize> {
        let s = self.op.opcode.schema();
        let i = s.operand_index(group);
        if i.is_none() {
            let names: Vec<&str> = s.operands.iter().map(|o| o.name).collect();
            self.fail(format!(
                "has no operand group `{group}`; its groups are [{}]",
                names.join(", ")
            ));
        }
        i
    }

    /// Append one value to the operand group `group`.
    pub fn operand(mut self, group: &str, v: ValueId) -> Self {
        if let Some(i) = self.operand_slot(group) {
            self.op.operands[i].push(v);
        }
        self
    }

    /// Append values to the operand group `group`.
    pub fn operands(mut self, group: &str, vs: &[ValueId]) -> Self {
        if let Some(i) = self.operand_slot(group) {
            self.op.operands[i].extend_from_slice(vs);
        }
        self
    }

    /// Set the attribute slot `name`; the value must have the slot's encoding.
    pub fn attr(mut self, name: &str, a: OpAttr) -> Self {
        let s = self.op.opcode.schema();
        match s.attr_index(name) {
            Some(i) => {
                if attr_matches(s.attrs[i].kind, &a) {
                    self.op.attrs[i] = Some(a);
                } else {
                    self.fail(format!(
                        "attribute `{name}` takes a {} value, got {a:?}",
                        kind_name(s.attrs[i].kind)
                    ));
                }
            }
            None => {
                let names: Vec<&str> = s.attrs.iter().map(|a| a.name).collect();
                self.fail(format!(
                    "has no attribute `{name}`; its attributes are [{}]",
                    names.join(", ")
                ));
            }
        }
        self
    }

    /// Set an enum attribute (`RoundingMode::Zero`, `Signedness::Signed`, …).
    pub fn enum_attr(self, name: &str, e: impl Into<EnumValue>) -> Self {
        self.attr(name, OpAttr::Enum(e.into()))
    }

    /// Set a unit attribute carried by a flags bit (`flush_to_zero`, `unsignedCmp`, …).
    pub fn flag(self, name: &str) -> Self {
        self.attr(name, OpAttr::Unit)
    }

    /// Declare the next result's type (results are declared in schema order).
    pub fn result(mut self, ty: Type) -> Self {
        self.results.push(ty);
        self
    }

    /// Declare several results.
    pub fn results(mut self, tys: impl IntoIterator<Item = Type>) -> Self {
        self.results.extend(tys);
        self
    }

    /// Add a region from a block built with [`FunctionBuilder::begin_block`] / [`FunctionBuilder::end_block`].
    pub fn region(mut self, block: Block) -> Self {
        self.op.regions.push(block);
        self
    }

    /// Add a region built by `body`, which receives the block arguments and must end the block with its own
    /// terminator. Declare the op's results before its regions so terminators inside can be checked.
    pub fn region_with(
        mut self,
        arg_types: &[Type],
        body: impl FnOnce(&mut FunctionBuilder<'m>, &[ValueId]) -> Result<(), BuildError>,
    ) -> Self {
        if self.error.is_some() {
            return self;
        }
        let depth = self.fb.depth();
        let args = self
            .fb
            .begin_block(self.op.opcode, &self.results, arg_types);
        let built = body(self.fb, &args).and_then(|()| self.fb.end_block());
        match built {
            Ok(b) => self.op.regions.push(b),
            Err(e) => {
                // The block may still be open if `body` failed inside it.
                self.fb.unwind_to(depth);
                self.error = Some(e);
            }
        }
        self
    }

    /// Check the op against its schema and type rules and append it; returns its results.
    pub fn build(self) -> Result<Vec<ValueId>, BuildError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.fb.emit(self.op, self.results)
    }
}
