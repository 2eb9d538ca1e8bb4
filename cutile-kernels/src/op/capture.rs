//! Capturing the launches a host-API call plans, without queuing them.
//!
//! Inside [`capture`], [`execute`](super::execute) records each plan with the operands it was given and
//! returns as if the work were queued. A binding uses it to plan a call once (validation, the
//! configuration choice, the kernels) and then replay the recorded launches for later calls whose
//! tensors differ only in their addresses (`foreign::Replay`), which skips all of that host work.
//!
//! Only [`execute`](super::execute) is captured: a host API that touches memory some other way (a
//! copy, a read back to the host, a tuning trial) still does so, so callers capture only calls that
//! plan through `execute` alone.

use std::cell::RefCell;

use super::{Operand, PlannedLaunch};

/// One `execute` call: the operands as the family passed them and the launches it planned over them.
#[derive(Debug, Clone)]
pub struct Captured {
    pub operands: Vec<Operand>,
    pub launches: Vec<PlannedLaunch>,
}

thread_local! {
    static CAPTURING: RefCell<Option<Vec<Captured>>> = const { RefCell::new(None) };
}

/// Records `operands` and `plan` when this thread is capturing; returns whether it did (then the
/// caller must not launch).
pub(crate) fn record(operands: &[Operand], plan: &[PlannedLaunch]) -> bool {
    CAPTURING.with(|c| match c.borrow_mut().as_mut() {
        Some(log) => {
            log.push(Captured {
                operands: operands.to_vec(),
                launches: plan.to_vec(),
            });
            true
        }
        None => false,
    })
}

/// Runs `f` with this thread capturing, and returns its result with what `execute` recorded.
/// Captures do not nest: an inner `capture` takes the records made inside it.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Captured>) {
    /// Ends the capture even when `f` unwinds.
    struct Restore(Option<Vec<Captured>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            CAPTURING.with(|c| *c.borrow_mut() = outer);
        }
    }
    let outer = CAPTURING.with(|c| c.borrow_mut().replace(Vec::new()));
    let restore = Restore(outer);
    let r = f();
    let log = CAPTURING
        .with(|c| c.borrow_mut().take())
        .unwrap_or_default();
    drop(restore);
    (r, log)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Operand;
    use cutile_ir::ScalarType;

    #[test]
    fn records_only_inside_a_capture_and_restores_the_outer_one() {
        let ops = [Operand::described("x", 0, ScalarType::F32, &[4])];
        assert!(!record(&ops, &[]));
        let ((), outer) = capture(|| {
            assert!(record(&ops, &[]));
            let ((), inner) = capture(|| assert!(record(&ops, &[])));
            assert_eq!(inner.len(), 1);
            assert!(record(&ops, &[]));
        });
        assert_eq!(
            outer.len(),
            2,
            "the inner capture's record is not the outer one's"
        );
        assert!(!record(&ops, &[]));
    }

    #[test]
    fn a_panic_inside_ends_the_capture() {
        let r = std::panic::catch_unwind(|| capture(|| panic!("boom")));
        assert!(r.is_err());
        let ops = [Operand::described("x", 0, ScalarType::F32, &[4])];
        assert!(!record(&ops, &[]));
    }
}
