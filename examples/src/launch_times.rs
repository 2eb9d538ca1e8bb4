//! The in-situ device time of each launch of one host-op call (`gpu-harness launches`).
//!
//! A call's launches are captured once (`cutile_kernels::op::capture`: planned by the host API through
//! `op::execute`, not queued), then replayed back to back on one stream behind the same L2 flush a
//! benchmark queues, with a CUDA event before the first launch and after each. Per launch: the median
//! over the replays of the time between its events (its kernel plus any gap before it); per call: the
//! median of the totals.
//!
//! The families that own their tensors (`run::Owned`) time themselves through [`time_call`]. Inside
//! [`per_launch`] it also captures and replays what it timed, while the family's tensors are alive,
//! and hands the result back; elsewhere it is `time_device`. Work a host API queues other than through
//! `op::execute` (a copy, a memset, a typed launch) runs once during the capture and is missing from
//! the replay: [`Replayed::timed`], the same call timed whole beforehand, shows such a gap.

use std::cell::RefCell;

use cutile::runtime::timing::{L2Flush, Stats, time_device};
use cutile::runtime::{Event, Stream};
use cutile_kernels::op::capture::{Captured, capture};
use serde::Serialize;

use crate::BoxError;

/// One launch of a call: its kernel, the configuration the host chose and its median time.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LaunchTime {
    pub kernel: String,
    pub config: String,
    pub median_us: f64,
}

/// A call's launches replayed: each launch's time in queue order, the median of the replays' totals,
/// and, where the call was also timed whole (an owned family's [`time_call`]), that timing.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub launches: Vec<LaunchTime>,
    pub total: Stats,
    pub timed: Option<Stats>,
}

/// Replays `captured` (whose operands must be alive) `iterations` times after one untimed replay,
/// each behind `flush` when given.
pub fn replay(
    stream: &Stream,
    captured: &[Captured],
    mut flush: Option<&mut L2Flush>,
    iterations: usize,
) -> Result<Replayed, BoxError> {
    let steps: Vec<_> = captured
        .iter()
        .flat_map(|c| c.launches.iter().map(move |l| (&c.operands, l)))
        .collect();
    if steps.is_empty() {
        return Err("the call queued nothing through op::execute".into());
    }
    let device = stream.device();
    let events = (0..=steps.len())
        .map(|_| Event::new(device))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_launch = vec![Vec::with_capacity(iterations); steps.len()];
    let mut totals = Vec::with_capacity(iterations);
    for it in 0..=iterations {
        if let Some(f) = flush.as_deref_mut() {
            f.enqueue(stream)?;
        }
        events[0].record(stream)?;
        for (i, (operands, launch)) in steps.iter().enumerate() {
            // SAFETY: the caller keeps the operands' tensors (and the stream's scratch) alive until
            // this function returns, and the synchronization below comes first; the guard is
            // forgotten because its drop would wait after every launch.
            let pending = unsafe {
                cutile_kernels::op::execute(stream, operands, std::slice::from_ref(*launch))
            }?;
            std::mem::forget(pending);
            events[i + 1].record(stream)?;
        }
        stream.synchronize()?;
        if it == 0 {
            continue;
        }
        for (i, times) in per_launch.iter_mut().enumerate() {
            times.push(events[i].elapsed_ms(&events[i + 1])? as f64 * 1e3);
        }
        totals.push(events[0].elapsed_ms(&events[steps.len()])? as f64 * 1e3);
    }
    Ok(Replayed {
        launches: steps
            .iter()
            .zip(per_launch)
            .map(|((_, l), times)| LaunchTime {
                kernel: l.kernel.name().to_string(),
                config: l.config.clone(),
                median_us: Stats::of(times).median_us,
            })
            .collect(),
        total: Stats::of(totals),
        timed: None,
    })
}

/// Captures what `launch` plans (queuing nothing through `op::execute`) and replays it; the operands
/// `launch` uses must outlive this call.
pub fn capture_and_replay(
    stream: &Stream,
    flush: Option<&mut L2Flush>,
    iterations: usize,
    launch: impl FnOnce() -> Result<(), BoxError>,
) -> Result<Replayed, BoxError> {
    let (result, captured) = capture(launch);
    result?;
    replay(stream, &captured, flush, iterations)
}

thread_local! {
    /// `Some` inside [`per_launch`]: the slot [`time_call`] fills.
    static REQUEST: RefCell<Option<Option<Result<Replayed, String>>>> = const { RefCell::new(None) };
}

/// Runs `f` (an owned family's timed run) with [`time_call`] also capturing and replaying the call it
/// times; returns `f`'s result and the replay (`None` when `f` timed nothing through [`time_call`]).
pub fn per_launch<R>(f: impl FnOnce() -> R) -> (R, Option<Result<Replayed, BoxError>>) {
    /// Ends the request even when `f` unwinds.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            REQUEST.with(|r| *r.borrow_mut() = None);
        }
    }
    REQUEST.with(|r| *r.borrow_mut() = Some(None));
    let clear = Clear;
    let out = f();
    let replayed = REQUEST.with(|r| r.borrow_mut().take().flatten());
    drop(clear);
    (out, replayed.map(|r| r.map_err(BoxError::from)))
}

/// `time_device` for the owned families: `warmup` untimed and `iters` timed calls of `launch`, each
/// after `flush` when given. Inside [`per_launch`] the call is then captured once and replayed
/// `iters` times ([`capture_and_replay`]) while the family's tensors are still alive.
pub fn time_call(
    stream: &Stream,
    warmup: usize,
    iters: usize,
    mut flush: Option<&mut L2Flush>,
    mut launch: impl FnMut() -> Result<(), BoxError>,
) -> Result<Stats, BoxError> {
    let stats = time_device(stream, warmup, iters, flush.as_deref_mut(), &mut launch)?;
    if REQUEST.with(|r| r.borrow().is_some()) {
        let replayed = capture_and_replay(stream, flush, iters, &mut launch)
            .map(|r| Replayed {
                timed: Some(stats),
                ..r
            })
            .map_err(|e| e.to_string());
        REQUEST.with(|r| {
            if let Some(slot) = r.borrow_mut().as_mut() {
                *slot = Some(replayed);
            }
        });
    }
    Ok(stats)
}

/// What a family's `run` was asked to time: the timed iterations and an optional L2 flush before each;
/// `None`: run once, untimed.
pub type Timing<'f> = Option<(usize, Option<&'f mut L2Flush>)>;

/// [`time_call`] with 5 warm-up calls as `timing` asks, `None` when it asks for none. `launch` leaves its
/// call queued (it forgets the launch's guard): `time_call` waits for each call's end event before the
/// next, and the caller's tensors outlive the timing.
pub fn time_queued(
    stream: &Stream,
    timing: Timing<'_>,
    launch: impl FnMut() -> Result<(), BoxError>,
) -> Result<Option<Stats>, BoxError> {
    match timing {
        None => Ok(None),
        Some((iters, flush)) => time_call(stream, 5, iters, flush, launch).map(Some),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn per_launch_clears_its_request_and_reports_nothing_when_nothing_was_timed() {
        let (v, r) = per_launch(|| REQUEST.with(|r| r.borrow().is_some()));
        assert!(v, "the request is set inside per_launch");
        assert!(r.is_none());
        assert!(REQUEST.with(|r| r.borrow().is_none()), "cleared after");
        let unwound = std::panic::catch_unwind(|| per_launch(|| panic!("family failed")));
        assert!(unwound.is_err());
        assert!(REQUEST.with(|r| r.borrow().is_none()), "cleared on unwind");
    }
}
