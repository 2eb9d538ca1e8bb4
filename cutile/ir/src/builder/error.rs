//! The builder's error type.

/// Why the builder refused to create something. Each variant names the op (or function) and the offending
/// types, shapes or values, e.g. `addf: operand types differ: tile<4xf32> vs tile<8xf32>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// An op's operands, results or attributes break the op's type rules or schema.
    #[error("{op}: {message}")]
    Op { op: &'static str, message: String },
    /// An operand is not a value of this function, or is out of scope where it is used.
    #[error("{op}: operand %{value} {reason}")]
    Scope {
        op: &'static str,
        value: u32,
        reason: &'static str,
    },
    /// The builder was used out of order (an op after a terminator, a region left open, …).
    #[error("{0}")]
    Usage(String),
    /// A problem with a function as a whole (its name, signature or hints).
    #[error("@{function}: {message}")]
    Function { function: String, message: String },
}

impl BuildError {
    pub(crate) fn op(op: crate::schema::Opcode, message: impl Into<String>) -> BuildError {
        BuildError::Op {
            op: op.mnemonic(),
            message: message.into(),
        }
    }
}
