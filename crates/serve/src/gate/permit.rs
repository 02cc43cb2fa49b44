//! The lock-free part of the gate: a lane's atomics (`LaneCore`), the fast path that takes a free worker
//! with one compare-and-swap when nothing waits, and the [`Permit`] whose drop gives the worker back —
//! with one decrement, or under the lock when someone waits or the permit was taken under it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, TryLockError, Weak};
use std::time::Duration;

use ordo_sched::{ClassId, Meta, Nanos};
use tokio::time::Instant;

use super::Gate;
use super::waiting::Shared;

/// The part of a lane that requests read and write without the lock. Laid out in order (`repr(C)`) so that
/// the permit counter and the queue length share the first cache line of the allocation with the `Arc`'s
/// reference counts: a permit clones the `Arc` and moves the counter, and both then touch one line.
#[repr(C)]
pub(super) struct LaneCore {
    /// Requests in flight (changed by the fast path without the lock, and under it by the slow path).
    pub(super) busy: AtomicUsize,
    /// Requests waiting in the lane's scheduler: a copy of its length, stored under the lock after every
    /// change.
    pub(super) queued: AtomicUsize,
    /// The limit while the fast path is open (a fixed limit, no reserved workers, not retired); 0 when
    /// every acquire takes the lock.
    pub(super) fast_limit: AtomicUsize,
    /// The policy learns service times (edf's admission estimate): a fast release offers each one.
    pub(super) learns: AtomicBool,
    /// No longer in the configuration: a release takes the lock so the lane can go once idle.
    pub(super) retired: AtomicBool,
    /// Bumped when the lane's classes change, so a permit can tell its class index is stale.
    pub(super) generation: AtomicU64,
    /// The share of the limit in force, in thousandths (1000: all): what its backends can still take
    /// (`Gate::set_share`). A copy of the lane's, read without the lock to skip unchanged updates.
    pub(super) share: AtomicU32,
    /// The gate, for a release that must dispatch (weak: the gate owns its lanes).
    pub(super) shared: Weak<Shared>,
    pub(super) key: Arc<str>,
}

impl LaneCore {
    /// Take a worker without the lock: only when the fast path is open, nothing waits and one is free.
    /// Returns the requests in flight, this one included.
    pub(super) fn try_fast(&self) -> Option<usize> {
        let limit = self.fast_limit.load(Ordering::Relaxed);
        if limit == 0 || self.queued.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let mut busy = self.busy.load(Ordering::Relaxed);
        loop {
            if busy >= limit {
                return None;
            }
            match self.busy.compare_exchange_weak(
                busy,
                busy + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(busy + 1),
                Err(now) => busy = now,
            }
        }
    }

    pub(super) fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }
}

/// Permission to serve one request; dropping it frees the worker and dispatches the next waiter.
pub struct Permit {
    /// The lane (None: disarmed).
    pub(super) core: Option<Arc<LaneCore>>,
    pub(super) class: ClassId,
    /// The class a queue dispatch chose (None: taken on arrival, in the class the caller classified into;
    /// not cloned there, since every request of the class would write the name's reference count).
    pub(super) class_name: Option<Arc<str>>,
    pub(super) generation: u64,
    /// Taken under the lock (counted per class where the lane reserves workers): released under it.
    pub(super) locked: bool,
    pub(super) waited: Duration,
    /// Gate time at dispatch.
    pub(super) started: Nanos,
    /// The gate's clock.
    pub(super) epoch: Instant,
    /// The lane's requests in flight when this one started, itself included.
    pub(super) inflight: usize,
    /// Set by [`Permit::finish`]: whether the backend failed the request, and the gate time it answered.
    pub(super) outcome: Option<(bool, Nanos)>,
}

impl Permit {
    /// How long the request waited in the queue (zero on the fast path).
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The class a queue dispatch served the request from — after a reload it can differ from the one it
    /// was classified into. None: it was served on arrival, in the class it was classified into.
    pub fn class_name(&self) -> Option<&Arc<str>> {
        self.class_name.as_ref()
    }

    /// The backend answered (`failed`: with an error or timeout status): when the permit is dropped, its
    /// service time feeds the scheduler's estimates and the lane's limiter. A permit dropped without it (the
    /// client went away) teaches nothing. Returns that service time: from dispatch to now (one clock read
    /// for the caller's metrics and the scheduler's).
    pub fn finish(&mut self, failed: bool) -> Duration {
        let now = if self.core.is_some() {
            self.epoch.elapsed().as_nanos() as Nanos
        } else {
            self.started
        };
        self.outcome = Some((failed, now));
        Duration::from_nanos(now.saturating_sub(self.started))
    }

    /// A permit granted to a waiter that went away before taking it: free the worker without feeding the
    /// (empty) service time anywhere, count the request as abandoned, and dispatch the next.
    pub(super) fn release_unused(mut self) {
        let Some(core) = self.core.take() else {
            return;
        };
        if let Some(shared) = core.shared.upgrade() {
            shared.release_locked(&self, &core, true);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(core) = self.core.take() else {
            return;
        };
        if self.locked {
            if let Some(shared) = core.shared.upgrade() {
                shared.release_locked(self, &core, false);
            }
            return;
        }
        // The fast path's release: one decrement; the lock only when someone waits or the lane retired.
        core.busy.fetch_sub(1, Ordering::SeqCst);
        let waiting = core.queued.load(Ordering::SeqCst) != 0;
        if waiting || core.retired.load(Ordering::Relaxed) {
            if let Some(shared) = core.shared.upgrade() {
                shared.release_locked(self, &core, false);
            }
            return;
        }
        // edf's admission estimate learns the service time, if the lock is free right now.
        let Some((_, now)) = self.outcome else {
            return;
        };
        if !core.learns.load(Ordering::Relaxed) {
            return;
        }
        let Some(shared) = core.shared.upgrade() else {
            return;
        };
        let mut st = match shared.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        if let Some(li) = st.lane_of(&core) {
            let lane = &mut st.lanes[li];
            if self.generation == lane.generation() {
                lane.sched
                    .observe_service(self.class, now.saturating_sub(self.started));
            }
        }
    }
}

impl Gate {
    /// The fast path: a free worker, nothing waiting, no lock.
    pub(super) fn try_fast(&self, meta: &Meta, lane_key: Option<&Arc<str>>) -> Option<Permit> {
        let table = self.shared.table.load();
        let core = match lane_key {
            Some(k) => table
                .iter()
                .find(|c| Arc::ptr_eq(&c.key, k) || c.key == *k)
                .or_else(|| table.first()),
            None => table.first(),
        }?;
        let generation = core.generation.load(Ordering::Relaxed);
        let inflight = core.try_fast()?;
        Some(Permit {
            core: Some(core.clone()),
            class: meta.class,
            class_name: None,
            generation,
            locked: false,
            waited: Duration::ZERO,
            // dispatched on arrival: the arrival time (read by the caller just before) is the start
            started: meta.arrival,
            epoch: self.shared.epoch,
            inflight,
            outcome: None,
        })
    }
}
