//! The in-memory layer with single-flight filling: for each key, one caller (the leader) produces the
//! value while later callers wait for it; successes are kept, failures are handed to every waiter and
//! forgotten so the next call tries again.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::error::CacheError;

type Outcome = Result<Arc<[u8]>, CacheError>;

enum Slot {
    Ready(Arc<[u8]>),
    Pending(Arc<Flight>),
}

/// One in-progress fill that waiters block on.
pub(crate) struct Flight {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

impl Flight {
    /// Blocks until the leader finishes and returns its outcome.
    pub(crate) fn wait(&self) -> Outcome {
        let mut guard = lock(&self.outcome);
        loop {
            if let Some(outcome) = guard.as_ref() {
                return outcome.clone();
            }
            guard = self.done.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// What a caller of [`SingleFlight::claim`] must do.
pub(crate) enum Claim<'a> {
    Ready(Arc<[u8]>),
    Wait(Arc<Flight>),
    Lead(Leader<'a>),
}

#[derive(Default)]
pub(crate) struct SingleFlight {
    slots: Mutex<HashMap<[u8; 32], Slot>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The protected data stays consistent across a panic (every update is a single insert/remove).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SingleFlight {
    pub(crate) fn claim(&self, id: &[u8; 32], key_display: impl FnOnce() -> String) -> Claim<'_> {
        let mut slots = lock(&self.slots);
        match slots.get(id) {
            Some(Slot::Ready(v)) => Claim::Ready(v.clone()),
            Some(Slot::Pending(f)) => Claim::Wait(f.clone()),
            None => {
                let flight = Arc::new(Flight {
                    outcome: Mutex::new(None),
                    done: Condvar::new(),
                });
                slots.insert(*id, Slot::Pending(flight.clone()));
                Claim::Lead(Leader {
                    owner: self,
                    id: *id,
                    key: key_display(),
                    flight,
                    finished: false,
                })
            }
        }
    }

    pub(crate) fn clear(&self) {
        // Pending fills keep their Flight alive through their leader and waiters.
        lock(&self.slots).retain(|_, s| matches!(s, Slot::Pending(_)));
    }
}

/// The caller responsible for filling one key. Dropping it unfinished (the fill panicked) releases
/// the waiters with [`CacheError::CompilePanicked`].
pub(crate) struct Leader<'a> {
    owner: &'a SingleFlight,
    id: [u8; 32],
    key: String,
    flight: Arc<Flight>,
    finished: bool,
}

impl Leader<'_> {
    /// Publishes the outcome to the map (successes only) and to all waiters.
    pub(crate) fn finish(mut self, outcome: Outcome) -> Outcome {
        self.publish(outcome.clone());
        outcome
    }

    fn publish(&mut self, outcome: Outcome) {
        self.finished = true;
        {
            let mut slots = lock(&self.owner.slots);
            match &outcome {
                Ok(v) => slots.insert(self.id, Slot::Ready(v.clone())),
                Err(_) => slots.remove(&self.id),
            };
        }
        *lock(&self.flight.outcome) = Some(outcome);
        self.flight.done.notify_all();
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let key = std::mem::take(&mut self.key);
            self.publish(Err(CacheError::CompilePanicked { key }));
        }
    }
}
