//! The gate between classified requests and the workers: async permits over `ordo_sched::Scheduler`s. A
//! permit is taken before a request is served and released on drop, so no path can leak a worker; releasing
//! one dispatches the next waiter by the policy. Rejections are typed. A waiting request whose future is
//! dropped (its client went away) leaves the queue at once, so it stops counting toward the queue caps.
//!
//! Workers come in *lanes*: with a fixed number of `workers` there is one lane shared by every route; with
//! `workers = "auto"` each route (or group of routes) has its own lane, whose limit an
//! `ordo_sched::limit::Limiter` moves from the round trips of the requests it served. Each lane has its own
//! scheduler (the class policy orders what waits for that lane), and a class may have workers reserved in
//! every lane that no other class can take (docs/overload.md). While a lane's backends have lost part of
//! their capacity (a proxy group's upstreams ejected or down), the lane admits only that share of its limit
//! (`Gate::set_share`): the rest wait in its queue, ordered by the class policy.
//!
//! **The fast path.** Below saturation nothing waits, and the policy has nothing to decide: a request that
//! finds a free worker and an empty queue takes it with one compare-and-swap on its lane's permit counter
//! (`LaneCore`), and gives it back with one decrement, without the lock that guards the schedulers. The
//! lock is taken only when a request must wait, when a release finds requests waiting, by lanes whose
//! limit is adaptive or that reserve workers for classes (their bookkeeping needs it), and — without ever
//! waiting for it — by a release in an edf lane, to teach edf the service time. Whether a waiter or a
//! release comes second, one of them sees the other (both use sequentially consistent order on `busy`
//! and `queued`), so no request waits while a worker is free.
//!
//! **Leases.** In fleet mode (`crate::fleet`) the gate counts what each class has in flight, and a *lease*
//! — workers per class, set at run time from the fleet's shared demand — replaces the lanes' limits: each
//! class may have at most its lease in flight, as if every leased worker were reserved to its class. Without
//! a lease (Redis unreachable, or never reached) the configured limits apply again.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use ordo_sched::limit::{Limiter, LimiterConfig, LimiterSnapshot, Sample};
use ordo_sched::{
    ClassId, HeadPicker, Meta, Nanos, PolicyKind, RejectReason, Rejected, SchedConfig, Scheduler,
    Ticket,
};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// A request was refused instead of queued or served: answer 503 with Retry-After.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("overloaded: {}", .reason.as_str())]
pub struct Overloaded {
    pub reason: RejectReason,
}

/// How many requests one lane may serve at once.
#[derive(Clone, Debug, PartialEq)]
pub enum LaneLimit {
    Fixed(usize),
    Adaptive(LimiterConfig),
}

/// The key of the one pool when `workers` is a number.
pub const SHARED_LANE: &str = "*";

/// One lane of a [`PoolPlan`]: the routes whose requests share a limit and a queue.
#[derive(Clone, Debug, PartialEq)]
pub struct LanePlan {
    /// The route prefix or group name (`"*"`: the one pool of a fixed `workers`).
    pub key: Arc<str>,
    pub limit: LaneLimit,
}

/// How the workers are laid out: the lanes, and the workers each class has reserved in every lane.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolPlan {
    pub lanes: Vec<LanePlan>,
    /// Per class index of the scheduler configuration (missing entries: 0).
    pub reserved: Vec<usize>,
}

impl PoolPlan {
    /// One pool of `workers` shared by everything, nothing reserved.
    pub fn fixed(workers: usize) -> PoolPlan {
        PoolPlan {
            lanes: vec![LanePlan {
                key: Arc::from(SHARED_LANE),
                limit: LaneLimit::Fixed(workers.max(1)),
            }],
            reserved: Vec::new(),
        }
    }
}

/// A whole lane's limit in force, in thousandths.
pub const FULL_SHARE: u32 = 1000;

/// A lane's limit in force when its backends can take only `share` thousandths of their capacity: the
/// limit scaled to the nearest worker, at least one, and at least one more than the workers reserved to
/// classes (so every reservation still holds and one worker is shared).
pub fn scaled_limit(limit: usize, share: u32, reserved: usize) -> usize {
    if share >= FULL_SHARE {
        return limit;
    }
    let full = FULL_SHARE as usize;
    let scaled = (limit * share as usize + full / 2) / full;
    scaled.max(1).max(reserved + 1).min(limit)
}

/// Fleet mode's workers per class name (`Gate::set_lease`).
type Lease = Arc<[(Arc<str>, usize)]>;

/// What a queued request is sent when the policy picks it (it becomes the caller's [`Permit`]).
type Grant = Result<Permit, RejectReason>;

struct Waiter {
    tx: oneshot::Sender<Grant>,
}

enum LimitState {
    Fixed(usize),
    Adaptive(Box<Limiter>),
}

impl LimitState {
    fn new(plan: &LaneLimit, now: Nanos) -> Self {
        match plan {
            LaneLimit::Fixed(n) => LimitState::Fixed((*n).max(1)),
            // The plan was validated when the configuration was compiled.
            LaneLimit::Adaptive(c) => match Limiter::new(c.clone(), now) {
                Ok(l) => LimitState::Adaptive(Box::new(l)),
                Err(_) => LimitState::Fixed(c.initial.max(1)),
            },
        }
    }

    fn limit(&self) -> usize {
        match self {
            LimitState::Fixed(n) => *n,
            LimitState::Adaptive(l) => l.limit(),
        }
    }

    fn same_plan(&self, plan: &LaneLimit) -> bool {
        match (self, plan) {
            (LimitState::Fixed(a), LaneLimit::Fixed(b)) => a == b,
            (LimitState::Adaptive(l), LaneLimit::Adaptive(c)) => l.config() == c,
            _ => false,
        }
    }
}

/// The part of a lane that requests read and write without the lock. Laid out in order (`repr(C)`) so that
/// the permit counter and the queue length share the first cache line of the allocation with the `Arc`'s
/// reference counts: a permit clones the `Arc` and moves the counter, and both then touch one line.
#[repr(C)]
struct LaneCore {
    /// Requests in flight (changed by the fast path without the lock, and under it by the slow path).
    busy: AtomicUsize,
    /// Requests waiting in the lane's scheduler: a copy of its length, stored under the lock after every
    /// change.
    queued: AtomicUsize,
    /// The limit while the fast path is open (a fixed limit, no reserved workers, not retired); 0 when
    /// every acquire takes the lock.
    fast_limit: AtomicUsize,
    /// The policy learns service times (edf's admission estimate): a fast release offers each one.
    learns: AtomicBool,
    /// No longer in the configuration: a release takes the lock so the lane can go once idle.
    retired: AtomicBool,
    /// Bumped when the lane's classes change, so a permit can tell its class index is stale.
    generation: AtomicU64,
    /// The share of the limit in force, in thousandths (1000: all): what its backends can still take
    /// (`Gate::set_share`). A copy of the lane's, read without the lock to skip unchanged updates.
    share: AtomicU32,
    /// The gate, for a release that must dispatch (weak: the gate owns its lanes).
    shared: Weak<Shared>,
    key: Arc<str>,
}

impl LaneCore {
    /// Take a worker without the lock: only when the fast path is open, nothing waits and one is free.
    /// Returns the requests in flight, this one included.
    fn try_fast(&self) -> Option<usize> {
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

    fn busy(&self) -> usize {
        self.busy.load(Ordering::SeqCst)
    }
}

/// One lane: its scheduler, its limit, and what it serves now.
struct Lane {
    core: Arc<LaneCore>,
    sched: Scheduler<Waiter>,
    /// The classes of this lane's scheduler configuration (a retired lane keeps its own).
    names: Vec<Arc<str>>,
    reserved: Vec<usize>,
    reserved_total: usize,
    /// In flight per class (kept only while the lane reserves workers).
    class_busy: Vec<usize>,
    /// In flight on reserved workers.
    reserved_busy: usize,
    limit: LimitState,
    /// The share of `limit` in force, in thousandths (see [`Gate::set_share`]).
    share: u32,
    /// Reserved workers per class as configured (the plan's, by class index).
    plan_reserved: Vec<usize>,
    /// Count in flight per class even with nothing reserved (fleet mode: the demand it publishes, and
    /// the bookkeeping a lease needs from its first moment).
    counted: bool,
    /// Fleet mode's workers per class name: while set, they are the lane's only workers, each reserved to
    /// its class (a class it leaves out gets none).
    lease: Option<Lease>,
}

impl Lane {
    fn new(
        sched: Scheduler<Waiter>,
        plan: &LanePlan,
        reserved: &[usize],
        now: Nanos,
        shared: Weak<Shared>,
    ) -> Lane {
        let names = class_names(sched.config());
        let limit = LimitState::new(&plan.limit, now);
        let mut lane = Lane {
            core: Arc::new(LaneCore {
                key: plan.key.clone(),
                busy: AtomicUsize::new(0),
                queued: AtomicUsize::new(0),
                fast_limit: AtomicUsize::new(0),
                learns: AtomicBool::new(false),
                retired: AtomicBool::new(false),
                generation: AtomicU64::new(0),
                share: AtomicU32::new(FULL_SHARE),
                shared,
            }),
            sched,
            names: Vec::new(),
            reserved: Vec::new(),
            reserved_total: 0,
            class_busy: Vec::new(),
            reserved_busy: 0,
            limit,
            share: FULL_SHARE,
            plan_reserved: Vec::new(),
            counted: false,
            lease: None,
        };
        lane.set_classes(names, reserved);
        lane.settle();
        lane
    }

    fn key(&self) -> &Arc<str> {
        &self.core.key
    }

    /// Workers now: the lease's total while a lease holds, else the configured or learned limit times the
    /// lane's share (see [`scaled_limit`]).
    fn limit(&self) -> usize {
        match &self.lease {
            Some(_) => self.reserved_total,
            None => scaled_limit(self.limit.limit(), self.share, self.reserved_total),
        }
    }

    fn busy(&self) -> usize {
        self.core.busy()
    }

    /// Whether requests are counted per class (reserved workers, or fleet mode).
    fn counts(&self) -> bool {
        self.reserved_total > 0 || self.counted
    }

    fn retired(&self) -> bool {
        self.core.retired.load(Ordering::Relaxed)
    }

    fn generation(&self) -> u64 {
        self.core.generation.load(Ordering::Relaxed)
    }

    /// After the lane's settings changed (under the lock): the scheduler learns the limit, and the fast
    /// path opens only for a fixed limit with nothing reserved, on a lane still configured, outside fleet
    /// mode.
    fn settle(&mut self) {
        let limit = self.limit();
        self.sched.set_capacity(limit.max(1));
        let fast = match self.limit {
            LimitState::Fixed(_) if !self.counts() && !self.retired() => limit,
            _ => 0,
        };
        self.core.fast_limit.store(fast, Ordering::SeqCst);
        self.core.learns.store(
            self.sched.config().policy.learns_service_time(),
            Ordering::Relaxed,
        );
        self.sync_queued();
    }

    /// Publish the scheduler's length to the fast path (after every change of it, under the lock).
    fn sync_queued(&self) {
        self.core.queued.store(self.sched.len(), Ordering::SeqCst);
    }

    fn set_classes(&mut self, names: Vec<Arc<str>>, reserved: &[usize]) {
        let mut class_busy = vec![0; names.len()];
        for (old, b) in self.names.iter().zip(&self.class_busy) {
            if let Some(i) = names.iter().position(|n| n == old) {
                class_busy[i] += b;
            }
        }
        self.plan_reserved = (0..names.len())
            .map(|i| reserved.get(i).copied().unwrap_or(0))
            .collect();
        self.class_busy = class_busy;
        self.names = names;
        self.apply_reserved();
        self.core.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The workers reserved per class: the lease's while one holds, else the plan's.
    fn apply_reserved(&mut self) {
        self.reserved = match &self.lease {
            Some(lease) => self
                .names
                .iter()
                .map(|n| lease.iter().find(|(m, _)| m == n).map_or(0, |(_, w)| *w))
                .collect(),
            None => self.plan_reserved.clone(),
        };
        self.reserved_total = self.reserved.iter().sum();
        self.reserved_busy = self
            .class_busy
            .iter()
            .zip(&self.reserved)
            .map(|(b, r)| (*b).min(*r))
            .sum();
    }

    /// Fleet mode: set (or, with None, lift) the lease, under the lock.
    fn set_lease(&mut self, counted: bool, lease: Option<Lease>) {
        self.counted = counted;
        self.lease = lease;
        self.apply_reserved();
        self.settle();
    }

    /// A free worker reserved to `class`.
    fn reserve_room(&self, class: ClassId) -> bool {
        self.reserved_total > 0
            && self.class_busy.get(class).copied().unwrap_or(0)
                < self.reserved.get(class).copied().unwrap_or(0)
    }

    /// A class with a free reserved worker and a request waiting for it.
    fn reserved_waiting(&self) -> Option<ClassId> {
        if self.reserved_total == 0 {
            return None;
        }
        (0..self.names.len()).find(|&c| self.reserve_room(c) && self.sched.class_len(c) > 0)
    }

    /// Take one of the workers any class may use, if one is free (a compare-and-swap: the fast path
    /// takes them too). Returns the requests in flight, this one included.
    fn take_shared(&self) -> Option<usize> {
        let shared = self.limit().saturating_sub(self.reserved_total);
        let mut busy = self.core.busy.load(Ordering::SeqCst);
        loop {
            if busy.saturating_sub(self.reserved_busy) >= shared {
                return None;
            }
            match self.core.busy.compare_exchange_weak(
                busy,
                busy + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Some(busy + 1),
                Err(now) => busy = now,
            }
        }
    }

    /// Give back a worker taken by [`Lane::take_shared`] that nobody used.
    fn untake(&self) {
        self.core.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// A request of `class` starts on a worker reserved to it; returns the requests in flight.
    fn start_reserved(&mut self, class: ClassId) -> usize {
        self.reserved_busy += 1;
        self.count_class(class);
        self.core.busy.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Per-class bookkeeping of a start (while the lane counts per class: reserved workers, fleet mode).
    fn count_class(&mut self, class: ClassId) {
        if self.counts() && class < self.class_busy.len() {
            self.class_busy[class] += 1;
        }
    }

    /// A request of `class` (None: a class no longer configured) taken under the lock ended.
    fn finish(&mut self, class: Option<ClassId>) {
        let _ = self
            .core
            .busy
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1));
        let Some(c) = class.filter(|&c| self.counts() && c < self.class_busy.len()) else {
            return;
        };
        if self.class_busy[c] > 0
            && self.class_busy[c] <= self.reserved.get(c).copied().unwrap_or(0)
        {
            self.reserved_busy = self.reserved_busy.saturating_sub(1);
        }
        self.class_busy[c] = self.class_busy[c].saturating_sub(1);
    }

    fn class_of(&self, name: &str) -> ClassId {
        self.names.iter().position(|n| &**n == name).unwrap_or(0)
    }

    /// The class a permit was counted in: its index while the classes are the same, else its name's.
    fn class_for(
        &self,
        generation: u64,
        class: ClassId,
        name: Option<&Arc<str>>,
    ) -> Option<ClassId> {
        if generation == self.generation() {
            Some(class)
        } else {
            name.and_then(|n| self.names.iter().position(|m| m == n))
        }
    }
}

struct State {
    lanes: Vec<Lane>,
    closed: bool,
    /// The expiry the timer task sleeps towards (None: sleeping until notified).
    timer_at: Option<Nanos>,
    /// Scratch space for requests the class overload control drops during a dispatch.
    dropped: Vec<Rejected<Waiter>>,
    /// Fleet mode: lanes count in flight per class ([`Gate::count_classes`]).
    counted: bool,
    /// Fleet mode's lease, applied to every current lane ([`Gate::set_lease`]).
    lease: Option<Lease>,
}

impl State {
    /// The lane with key `key`, else the first current one.
    fn lane_for(&self, key: Option<&Arc<str>>) -> usize {
        key.and_then(|k| self.lane_by_key(k))
            .or_else(|| self.lanes.iter().position(|l| !l.retired()))
            .unwrap_or(0)
    }

    fn lane_by_key(&self, key: &Arc<str>) -> Option<usize> {
        self.lanes
            .iter()
            .position(|l| Arc::ptr_eq(l.key(), key) || l.key() == key)
    }

    fn lane_of(&self, core: &Arc<LaneCore>) -> Option<usize> {
        self.lanes.iter().position(|l| Arc::ptr_eq(&l.core, core))
    }

    /// Retired lanes that hold nothing more go.
    fn drop_idle_retired(&mut self) {
        self.lanes
            .retain(|l| !(l.retired() && l.busy() == 0 && l.sched.is_empty()));
    }
}

struct Shared {
    state: Mutex<State>,
    /// The current lanes' cores, in plan order, for the fast path (replaced under the lock; empty once
    /// closed).
    table: ArcSwap<Vec<Arc<LaneCore>>>,
    epoch: Instant,
    timer: Notify,
    abandoned: AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the counters half-updated in a way that matters more
        // than stopping service, so keep going with the inner value.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Publish the current lanes to the fast path (under the lock).
    fn publish(&self, st: &State) {
        let cores = if st.closed {
            Vec::new()
        } else {
            st.lanes
                .iter()
                .filter(|l| !l.retired())
                .map(|l| l.core.clone())
                .collect()
        };
        self.table.store(Arc::new(cores));
    }

    /// Hand lane `li`'s free workers to its queued requests — first a class's reserved workers to that
    /// class, then the shared ones by the policy — skipping waiters that went away and answering those the
    /// class overload control dropped.
    fn pump(&self, st: &mut State, li: usize) {
        if st.closed || li >= st.lanes.len() {
            return;
        }
        // nothing queued (the usual case when a permit is dropped): nothing to dispatch, no clock to read
        if st.lanes[li].sched.is_empty() && st.dropped.is_empty() {
            return;
        }
        let now = self.now();
        let mut dropped = std::mem::take(&mut st.dropped);
        let lane = &mut st.lanes[li];
        loop {
            if lane.sched.is_empty() {
                break;
            }
            let before = dropped.len();
            let (d, inflight) = match lane.reserved_waiting() {
                Some(c) => match lane.sched.dispatch_class(c, now, &mut dropped) {
                    Some(d) => {
                        let inflight = lane.start_reserved(d.meta.class);
                        (Some(d), inflight)
                    }
                    None => (None, 0),
                },
                None => {
                    // the worker first: the fast path may take the last one meanwhile
                    let Some(inflight) = lane.take_shared() else {
                        break;
                    };
                    match lane.sched.dispatch_or_drop(now, &mut dropped) {
                        Some(d) => {
                            lane.count_class(d.meta.class);
                            (Some(d), inflight)
                        }
                        None => {
                            lane.untake();
                            (None, 0)
                        }
                    }
                }
            };
            let Some(d) = d else {
                if dropped.len() > before {
                    continue;
                }
                break;
            };
            let class = d.meta.class;
            let permit = Permit {
                core: Some(lane.core.clone()),
                class,
                class_name: Some(
                    lane.names
                        .get(class)
                        .cloned()
                        .unwrap_or_else(|| Arc::from("")),
                ),
                generation: lane.generation(),
                locked: true,
                waited: Duration::from_nanos(d.waited),
                started: now,
                epoch: self.epoch,
                inflight,
                outcome: None,
            };
            if let Err(Ok(mut p)) = d.item.tx.send(Ok(permit)) {
                // The receiver is gone. A dropped wait cancels its entry first (`Queued`), so this is
                // only a safety net: disarm the permit (we hold the lock) and go on.
                p.core = None;
                lane.finish(Some(class));
                self.abandoned.fetch_add(1, Ordering::Relaxed);
            }
        }
        lane.sync_queued();
        for r in dropped.drain(..) {
            let _ = r.item.tx.send(Err(r.reason));
        }
        st.dropped = dropped;
    }

    fn pump_all(&self, st: &mut State) {
        for li in 0..st.lanes.len() {
            self.pump(st, li);
        }
    }

    fn next_expiry(st: &State) -> Option<Nanos> {
        st.lanes.iter().filter_map(|l| l.sched.next_expiry()).min()
    }

    /// Wake the timer task if the next expiry moved earlier than what it sleeps towards.
    fn maybe_wake_timer(&self, st: &State) {
        if let Some(next) = Self::next_expiry(st) {
            if st.timer_at.is_none_or(|t| next < t) {
                self.timer.notify_one();
            }
        }
    }

    /// A permit's release that needs the lock: a slow-path permit's bookkeeping, what the policy and the
    /// limiter learn from it, the next dispatch, and a retired lane's end.
    fn release_locked(&self, p: &Permit, core: &Arc<LaneCore>, abandoned: bool) {
        let mut st = self.lock();
        if let Some(li) = st.lane_of(core) {
            let lane = &mut st.lanes[li];
            let class = lane.class_for(p.generation, p.class, p.class_name.as_ref());
            if p.locked {
                lane.finish(class);
            }
            if abandoned {
                self.abandoned.fetch_add(1, Ordering::Relaxed);
            } else if let Some((failed, now)) = p.outcome {
                let service = now.saturating_sub(p.started);
                if let Some(c) = class {
                    lane.sched.observe_service(c, service);
                }
                let moved = match &mut lane.limit {
                    LimitState::Adaptive(l) => l.on_sample(
                        now,
                        Sample {
                            rtt: service,
                            inflight: p.inflight,
                            dropped: failed,
                        },
                    ),
                    LimitState::Fixed(_) => false,
                };
                if moved {
                    lane.settle();
                }
            }
            self.pump(&mut st, li);
        }
        st.drop_idle_retired();
    }
}

/// Permission to serve one request; dropping it frees the worker and dispatches the next waiter.
pub struct Permit {
    /// The lane (None: disarmed).
    core: Option<Arc<LaneCore>>,
    class: ClassId,
    /// The class a queue dispatch chose (None: taken on arrival, in the class the caller classified into;
    /// not cloned there, since every request of the class would write the name's reference count).
    class_name: Option<Arc<str>>,
    generation: u64,
    /// Taken under the lock (counted per class where the lane reserves workers): released under it.
    locked: bool,
    waited: Duration,
    /// Gate time at dispatch.
    started: Nanos,
    /// The gate's clock.
    epoch: Instant,
    /// The lane's requests in flight when this one started, itself included.
    inflight: usize,
    /// Set by [`Permit::finish`]: whether the backend failed the request, and the gate time it answered.
    outcome: Option<(bool, Nanos)>,
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
    fn release_unused(mut self) {
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

/// A queued request's wait for its grant. Dropped before the grant arrived (the connection task drops the
/// `acquire` future when its client goes away), it takes the request out of the scheduler under the lock,
/// so the request stops counting toward queue caps, queue length and edf's admission estimate at once. If
/// the grant was already sent, the permit waiting in the channel is released instead.
struct Queued {
    shared: Arc<Shared>,
    lane: Arc<LaneCore>,
    /// `None` once the wait has its answer.
    ticket: Option<Ticket>,
    rx: oneshot::Receiver<Grant>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let cancelled = {
            let mut st = self.shared.lock();
            let c = st.lane_of(&self.lane).and_then(|li| {
                let lane = &mut st.lanes[li];
                let c = lane.sched.cancel(ticket);
                lane.sync_queued();
                c
            });
            st.drop_idle_retired();
            c
        };
        // (the waiter, if any, is dropped here, outside the lock)
        if cancelled.is_some() {
            self.shared.abandoned.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // No longer queued: `pump` sent a grant (under the lock, so it is in the channel now), or the
        // timer or `close` refused it (nothing to release).
        if let Ok(Ok(permit)) = self.rx.try_recv() {
            permit.release_unused();
        }
    }
}

/// One lane's numbers.
#[derive(Clone, Debug)]
pub struct LaneSnapshot {
    /// Route prefix or group (`"*"`: the shared pool of a fixed `workers`).
    pub key: Arc<str>,
    pub limit: usize,
    pub busy: usize,
    pub queued: usize,
    /// The adaptive limiter's state (None for a fixed limit).
    pub limiter: Option<LimiterSnapshot>,
    pub retired: bool,
    /// The share of the limit in force, in thousandths ([`Gate::set_share`]; 1000: all).
    pub share: u32,
}

/// Numbers for metrics and status.
#[derive(Clone, Debug)]
pub struct GateSnapshot {
    pub busy: usize,
    /// Workers now: the sum of the current lanes' limits.
    pub workers: usize,
    pub queued: usize,
    pub class_names: Vec<Arc<str>>,
    pub class_queued: Vec<usize>,
    pub policy: PolicyKind,
    pub abandoned: u64,
    pub closed: bool,
    pub lanes: Vec<LaneSnapshot>,
    /// Per class: its queue is standing (CoDel) in some lane.
    pub class_standing: Vec<bool>,
    /// Per class: workers reserved to it in each lane (the lease's, while one holds).
    pub class_reserved: Vec<usize>,
    /// Per class: requests in flight (counted only in fleet mode or where workers are reserved; else 0).
    pub class_busy: Vec<usize>,
    /// Fleet mode: a lease sets the workers now.
    pub leased: bool,
}

/// The gate: clone it freely (all clones share the lanes).
#[derive(Clone)]
pub struct Gate {
    shared: Arc<Shared>,
}

/// The scheduler refused a configuration.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GateConfigError(pub String);

fn class_names(cfg: &SchedConfig) -> Vec<Arc<str>> {
    cfg.classes
        .iter()
        .map(|c| Arc::from(c.name.as_str()))
        .collect()
}

/// Refuse what a lane's scheduler would refuse, before anything changes.
fn check(
    cfg: &SchedConfig,
    pickers: usize,
    lanes: usize,
    keeps_picker: impl Fn(usize) -> bool,
) -> Result<(), GateConfigError> {
    cfg.validate().map_err(|e| GateConfigError(e.to_string()))?;
    let custom = cfg.policy == PolicyKind::Custom;
    if !custom && pickers > 0 {
        return Err(GateConfigError(
            ordo_sched::ConfigError::UnexpectedPicker(cfg.policy).to_string(),
        ));
    }
    if custom && (0..lanes).any(|i| i >= pickers && !keeps_picker(i)) {
        return Err(GateConfigError(
            ordo_sched::ConfigError::MissingPicker.to_string(),
        ));
    }
    Ok(())
}

fn new_sched(
    cfg: SchedConfig,
    picker: Option<Box<dyn HeadPicker>>,
) -> Result<Scheduler<Waiter>, GateConfigError> {
    match picker {
        Some(p) => Scheduler::with_picker(cfg, p),
        None => Scheduler::new(cfg),
    }
    .map_err(|e| GateConfigError(e.to_string()))
}

impl Gate {
    /// A gate with one pool of `workers` permits over a scheduler built from `cfg` (and `picker` for a
    /// custom policy).
    pub fn new(
        cfg: SchedConfig,
        picker: Option<Box<dyn HeadPicker>>,
        workers: usize,
    ) -> Result<Gate, GateConfigError> {
        Self::with_plan(cfg, picker.into_iter().collect(), PoolPlan::fixed(workers))
    }

    /// A gate with the lanes of `plan`, each with a scheduler built from `cfg` (a custom policy needs one
    /// picker per lane, in plan order).
    pub fn with_plan(
        cfg: SchedConfig,
        pickers: Vec<Box<dyn HeadPicker>>,
        plan: PoolPlan,
    ) -> Result<Gate, GateConfigError> {
        check(&cfg, pickers.len(), plan.lanes.len(), |_| false)?;
        if plan.lanes.is_empty() {
            return Err(GateConfigError("the pool has no lane".into()));
        }
        let epoch = Instant::now();
        let mut pickers = pickers.into_iter();
        let scheds = plan
            .lanes
            .iter()
            .map(|_| new_sched(cfg.clone(), pickers.next()))
            .collect::<Result<Vec<_>, _>>()?;
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let lanes: Vec<Lane> = scheds
                .into_iter()
                .zip(&plan.lanes)
                .map(|(s, lp)| Lane::new(s, lp, &plan.reserved, 0, weak.clone()))
                .collect();
            let table = lanes.iter().map(|l| l.core.clone()).collect();
            Shared {
                state: Mutex::new(State {
                    lanes,
                    closed: false,
                    timer_at: None,
                    dropped: Vec::new(),
                    counted: false,
                    lease: None,
                }),
                table: ArcSwap::from_pointee(table),
                epoch,
                timer: Notify::new(),
                abandoned: AtomicU64::new(0),
            }
        });
        Ok(Gate { shared })
    }

    /// Nanoseconds since the gate was created: the time base of `Meta::arrival` and deadlines.
    pub fn now(&self) -> Nanos {
        self.shared.now()
    }

    /// [`Gate::acquire_on`] the first lane (the only one with a fixed number of workers).
    pub async fn acquire(&self, meta: Meta, class_name: &Arc<str>) -> Result<Permit, Overloaded> {
        self.acquire_in(meta, class_name, None).await
    }

    /// Take a permit in lane `lane` (a route prefix or group; an unknown one means the first lane) for a
    /// request of class `class_name` (its index in the configuration the classifier used is `meta.class`;
    /// when a reload changed the classes, the name decides). Returns at once when a worker of the lane is
    /// free and nothing waits for it, or when a worker reserved to the class is free; otherwise queues and
    /// waits for the policy to pick it. Dropping the future while it waits (the client went away) takes the
    /// request out of the queue at once and counts it abandoned.
    pub async fn acquire_on(
        &self,
        meta: Meta,
        class_name: &Arc<str>,
        lane: &Arc<str>,
    ) -> Result<Permit, Overloaded> {
        self.acquire_in(meta, class_name, Some(lane)).await
    }

    /// The fast path: a free worker, nothing waiting, no lock.
    fn try_fast(&self, meta: &Meta, lane_key: Option<&Arc<str>>) -> Option<Permit> {
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

    async fn acquire_in(
        &self,
        mut meta: Meta,
        class_name: &Arc<str>,
        lane_key: Option<&Arc<str>>,
    ) -> Result<Permit, Overloaded> {
        if let Some(p) = self.try_fast(&meta, lane_key) {
            return Ok(p);
        }
        let mut wait = {
            let mut guard = self.shared.lock();
            let st = &mut *guard;
            if st.closed {
                return Err(Overloaded {
                    reason: RejectReason::Shutdown,
                });
            }
            let li = st.lane_for(lane_key);
            let lane = &mut st.lanes[li];
            if lane.names.get(meta.class).is_none_or(|n| n != class_name) {
                meta.class = lane.class_of(class_name);
            }
            let on_arrival = if lane.reserve_room(meta.class) {
                Some(lane.start_reserved(meta.class))
            } else if lane.sched.is_empty() {
                lane.take_shared().inspect(|_| lane.count_class(meta.class))
            } else {
                None
            };
            if let Some(inflight) = on_arrival {
                return Ok(Permit {
                    core: Some(lane.core.clone()),
                    class: meta.class,
                    class_name: lane.names.get(meta.class).cloned(),
                    generation: lane.generation(),
                    locked: true,
                    waited: Duration::ZERO,
                    started: meta.arrival,
                    epoch: self.shared.epoch,
                    inflight,
                    outcome: None,
                });
            }
            let (tx, rx) = oneshot::channel();
            let now = self.shared.now();
            let ticket = match lane.sched.enqueue_ticket(Waiter { tx }, meta, now) {
                Ok(t) => t,
                Err(r) => return Err(Overloaded { reason: r.reason }),
            };
            // published before the pump looks for a free worker: a fast release either sees it, or freed
            // its worker before the pump looked
            lane.sync_queued();
            let core = lane.core.clone();
            self.shared.pump(st, li);
            self.shared.maybe_wake_timer(st);
            Queued {
                shared: self.shared.clone(),
                lane: core,
                ticket: Some(ticket),
                rx,
            }
        };
        let answer = (&mut wait.rx).await;
        wait.ticket = None;
        match answer {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(reason)) => Err(Overloaded { reason }),
            // The waiter was dropped without an answer: only possible when the gate itself is gone.
            Err(_) => Err(Overloaded {
                reason: RejectReason::Shutdown,
            }),
        }
    }

    /// Replace the scheduler configuration (queued requests stay queued, matched to classes by name) and
    /// make it one pool of `workers`.
    pub fn reconfigure(
        &self,
        cfg: SchedConfig,
        picker: Option<Box<dyn HeadPicker>>,
        workers: usize,
    ) -> Result<(), GateConfigError> {
        self.reconfigure_plan(cfg, picker.into_iter().collect(), PoolPlan::fixed(workers))
    }

    /// Replace the scheduler configuration and the lanes. A lane whose key stays keeps its queue (classes
    /// matched by name) and, when its limit settings are unchanged, what its limiter learned; a lane that
    /// is no longer in the plan serves what it holds and then goes; new lanes start empty. With a custom
    /// policy, `pickers` gives one per lane in plan order (a lane already custom may keep its own).
    pub fn reconfigure_plan(
        &self,
        cfg: SchedConfig,
        pickers: Vec<Box<dyn HeadPicker>>,
        plan: PoolPlan,
    ) -> Result<(), GateConfigError> {
        let names = class_names(&cfg);
        let mut st = self.shared.lock();
        let keeps = |i: usize| {
            st.lane_by_key(&plan.lanes[i].key)
                .is_some_and(|li| st.lanes[li].sched.config().policy == PolicyKind::Custom)
        };
        check(&cfg, pickers.len(), plan.lanes.len(), keeps)?;
        let now = self.shared.now();
        let mut pickers = pickers.into_iter();
        let mut old = std::mem::take(&mut st.lanes);
        let mut lanes = Vec::with_capacity(plan.lanes.len() + old.len());
        let mut failed = None;
        for lp in &plan.lanes {
            let picker = pickers.next();
            let lane = match old.iter().position(|l| *l.key() == lp.key) {
                Some(i) => {
                    let mut lane = old.swap_remove(i);
                    if let Err(e) = lane.sched.reconfigure(cfg.clone(), picker) {
                        // Checked above; should it happen anyway, keep everything serving.
                        lanes.push(lane);
                        failed = Some(GateConfigError(e.to_string()));
                        break;
                    }
                    lane.set_classes(names.clone(), &plan.reserved);
                    lane.core.retired.store(false, Ordering::Relaxed);
                    if !lane.limit.same_plan(&lp.limit) {
                        lane.limit = LimitState::new(&lp.limit, now);
                    }
                    lane
                }
                None => match new_sched(cfg.clone(), picker) {
                    Ok(s) => Lane::new(s, lp, &plan.reserved, now, Arc::downgrade(&self.shared)),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                },
            };
            lanes.push(lane);
        }
        for l in &old {
            if failed.is_none() {
                l.core.retired.store(true, Ordering::Relaxed);
            }
        }
        lanes.append(&mut old);
        for l in &mut lanes {
            l.counted = st.counted;
            l.lease = st.lease.clone();
            l.apply_reserved();
            l.settle();
        }
        st.lanes = lanes;
        st.drop_idle_retired();
        self.shared.publish(&st);
        if let Some(e) = failed {
            return Err(e);
        }
        self.shared.pump_all(&mut st);
        st.timer_at = None;
        self.shared.timer.notify_one();
        Ok(())
    }

    /// Let lane `key` admit only `share` thousandths of its limit (at most [`FULL_SHARE`]; see
    /// [`scaled_limit`]): its backends lost that much of their capacity (upstreams ejected or down). The
    /// requests over the new limit wait in the lane's queue, where the class policy orders them and the
    /// queue caps and timeouts shed them; none in flight is stopped. A raised share dispatches what waits
    /// at once. Returns whether anything changed (an unchanged share takes no lock).
    pub fn set_share(&self, key: &str, share: u32) -> bool {
        let share = share.min(FULL_SHARE);
        let unchanged = self
            .shared
            .table
            .load()
            .iter()
            .find(|c| &*c.key == key)
            .is_none_or(|c| c.share.load(Ordering::Relaxed) == share);
        if unchanged {
            return false;
        }
        let mut st = self.shared.lock();
        let Some(li) = st
            .lanes
            .iter()
            .position(|l| &**l.key() == key && !l.retired())
        else {
            return false;
        };
        let lane = &mut st.lanes[li];
        lane.share = share;
        lane.core.share.store(share, Ordering::Relaxed);
        lane.settle();
        self.shared.pump(&mut st, li);
        true
    }

    /// Fleet mode: count what each class has in flight (its demand, and a lease's bookkeeping) in every
    /// lane, from now on; the lock-free fast path closes. Call before the first request.
    pub fn count_classes(&self) {
        let mut st = self.shared.lock();
        st.counted = true;
        let lease = st.lease.clone();
        for l in st.lanes.iter_mut().filter(|l| !l.retired()) {
            l.set_lease(true, lease.clone());
        }
        self.shared.publish(&st);
    }

    /// Fleet mode: `lease` (workers per class name) replaces the lanes' limits — each class may have at
    /// most its lease in flight in each lane, and a class it leaves out none; `None` lifts it and the
    /// configured limits and reserved workers apply again. Waiters are dispatched at once if it grew.
    pub fn set_lease(&self, lease: Option<Vec<(Arc<str>, usize)>>) {
        let lease: Option<Lease> = lease.map(Arc::from);
        let mut st = self.shared.lock();
        if st.lease == lease {
            return;
        }
        st.lease = lease.clone();
        let counted = st.counted;
        for l in st.lanes.iter_mut().filter(|l| !l.retired()) {
            l.set_lease(counted, lease.clone());
        }
        self.shared.publish(&st);
        self.shared.pump_all(&mut st);
    }

    /// Stop: every queued request is answered `Shutdown` at once; later acquires are refused. In-flight
    /// permits finish normally.
    pub fn close(&self) {
        let mut drained = Vec::new();
        {
            let mut st = self.shared.lock();
            st.closed = true;
            for lane in &mut st.lanes {
                lane.sched.drain(&mut drained);
                lane.sync_queued();
            }
            self.shared.publish(&st);
        }
        for w in drained {
            let _ = w.tx.send(Err(RejectReason::Shutdown));
        }
        self.shared.timer.notify_one();
    }

    /// Current numbers.
    pub fn snapshot(&self) -> GateSnapshot {
        let st = self.shared.lock();
        let current = st.lanes.iter().find(|l| !l.retired()).or(st.lanes.first());
        let names: Vec<Arc<str>> = current.map(|l| l.names.clone()).unwrap_or_default();
        let mut class_queued = vec![0; names.len()];
        let mut class_standing = vec![false; names.len()];
        let mut class_busy = vec![0; names.len()];
        for lane in &st.lanes {
            for (c, n) in lane.names.iter().enumerate() {
                if let Some(i) = names.iter().position(|m| m == n) {
                    class_queued[i] += lane.sched.class_len(c);
                    class_busy[i] += lane.class_busy.get(c).copied().unwrap_or(0);
                    class_standing[i] |= lane.sched.class_standing(c);
                }
            }
        }
        GateSnapshot {
            busy: st.lanes.iter().map(Lane::busy).sum(),
            workers: st
                .lanes
                .iter()
                .filter(|l| !l.retired())
                .map(Lane::limit)
                .sum(),
            queued: st.lanes.iter().map(|l| l.sched.len()).sum(),
            class_queued,
            class_standing,
            class_busy,
            leased: st.lease.is_some(),
            class_reserved: current.map(|l| l.reserved.clone()).unwrap_or_default(),
            class_names: names,
            policy: current.map_or(PolicyKind::Fcfs, |l| l.sched.config().policy),
            abandoned: self.shared.abandoned.load(Ordering::Relaxed),
            closed: st.closed,
            lanes: st
                .lanes
                .iter()
                .map(|l| LaneSnapshot {
                    key: l.key().clone(),
                    limit: l.limit(),
                    busy: l.busy(),
                    queued: l.sched.len(),
                    limiter: match &l.limit {
                        LimitState::Adaptive(lim) => Some(lim.snapshot()),
                        LimitState::Fixed(_) => None,
                    },
                    retired: l.retired(),
                    share: l.share,
                })
                .collect(),
        }
    }

    /// The task that answers queue timeouts and EDF-unreachable requests when they happen (not when a
    /// worker frees up). Ends after [`Gate::close`].
    pub async fn run_timer(self) {
        let shared = self.shared;
        let mut expired = Vec::new();
        loop {
            let next = {
                let mut st = shared.lock();
                if st.closed {
                    return;
                }
                let next = Shared::next_expiry(&st);
                st.timer_at = next;
                next
            };
            match next {
                Some(at) => {
                    let now = shared.now();
                    if at > now {
                        let deadline = Instant::now() + Duration::from_nanos(at - now);
                        tokio::select! {
                            _ = tokio::time::sleep_until(deadline) => {}
                            _ = shared.timer.notified() => continue,
                        }
                    }
                }
                None => {
                    shared.timer.notified().await;
                    continue;
                }
            }
            {
                let mut st = shared.lock();
                let now = shared.now();
                for lane in &mut st.lanes {
                    lane.sched.expire(now, &mut expired);
                    lane.sync_queued();
                }
                st.timer_at = None;
                st.drop_idle_retired();
            }
            if expired.is_empty() {
                // Nothing was due after all (the clock is coarser than the scheduler's): do not spin.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            for r in expired.drain(..) {
                let _ = r.item.tx.send(Err(r.reason));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_sched::ClassSpec;

    fn gate(workers: usize, policy: PolicyKind) -> Gate {
        let cfg = SchedConfig::new(vec![ClassSpec::new("a"), ClassSpec::new("b")], policy);
        Gate::new(cfg, None, workers).unwrap()
    }

    fn meta(g: &Gate, class: usize) -> Meta {
        Meta::new(class, g.now())
    }

    async fn until(mut f: impl FnMut() -> bool) {
        for _ in 0..2000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("condition not reached");
    }

    #[tokio::test]
    async fn fast_path_then_queue_then_release_dispatches() {
        let g = gate(1, PolicyKind::Fcfs);
        let a: Arc<str> = Arc::from("a");
        let p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        assert_eq!(p1.waited(), Duration::ZERO);
        assert_eq!(g.snapshot().busy, 1);
        let g2 = g.clone();
        let a2 = a.clone();
        let waiter =
            tokio::spawn(async move { g2.acquire(meta(&g2, 0), &a2).await.map(|p| p.waited()) });
        until(|| g.snapshot().queued == 1).await;
        drop(p1);
        let waited = waiter.await.unwrap().unwrap();
        assert!(waited > Duration::ZERO);
        until(|| g.snapshot().busy == 0).await;
    }

    #[test]
    fn a_scaled_limit_rounds_up_and_keeps_the_reservations() {
        // (limit, share, reserved) → limit in force
        for (limit, share, reserved, want) in [
            (6, 1000, 0, 6),
            (6, 334, 0, 2),
            (6, 333, 0, 2),
            (6, 667, 0, 4),
            (8, 334, 0, 3),
            (8, 1, 0, 1),
            (8, 0, 0, 1),
            (8, 100, 2, 3),
            (3, 100, 2, 3),
            (100, 500, 10, 50),
        ] {
            assert_eq!(
                scaled_limit(limit, share, reserved),
                want,
                "{limit} × {share}‰ with {reserved} reserved"
            );
        }
    }

    /// Capacity lost (a share below the whole): the requests over the lane's new limit wait, the class
    /// policy picks who goes first (priority: the top class), and a restored share dispatches the rest.
    #[tokio::test]
    async fn a_lane_admits_its_share_and_the_policy_orders_the_rest() {
        let mut cs = vec![ClassSpec::new("top"), ClassSpec::new("low")];
        cs[0].priority = 10;
        let g = Gate::new(SchedConfig::new(cs, PolicyKind::Priority), None, 6).unwrap();
        let (top, low): (Arc<str>, Arc<str>) = (Arc::from("top"), Arc::from("low"));
        let mut held = Vec::new();
        for _ in 0..6 {
            held.push(g.acquire(meta(&g, 1), &low).await.unwrap());
        }
        assert!(g.set_share(SHARED_LANE, 333));
        assert!(!g.set_share(SHARED_LANE, 333), "unchanged");
        let s = g.snapshot();
        assert_eq!((s.workers, s.busy, s.lanes[0].share), (2, 6, 333));
        let spawn = |class: Arc<str>, i: usize| {
            let g = g.clone();
            tokio::spawn(async move { g.acquire(meta(&g, i), &class).await })
        };
        let l = spawn(low.clone(), 1);
        until(|| g.snapshot().queued == 1).await;
        let t = spawn(top.clone(), 0);
        until(|| g.snapshot().queued == 2).await;
        // four finish: 2 in flight, the limit in force; nothing is dispatched
        held.truncate(2);
        tokio::task::yield_now().await;
        assert_eq!(g.snapshot().queued, 2);
        // one more: the top class goes first (and takes the second worker)
        held.pop();
        let _top = t.await.unwrap().unwrap();
        assert_eq!(g.snapshot().queued, 1);
        assert!(!l.is_finished());
        // the capacity is back: the low class's request is dispatched at once
        assert!(g.set_share(SHARED_LANE, FULL_SHARE));
        let _low = l.await.unwrap().unwrap();
        let s = g.snapshot();
        assert_eq!((s.workers, s.busy, s.queued), (6, 3, 0));
    }

    /// With a share policy the classes keep their shares of the smaller limit: stride 3:1 over a lane
    /// scaled from 6 workers to 2.
    #[tokio::test]
    async fn a_scaled_lane_keeps_the_stride_shares() {
        let mut cs = vec![ClassSpec::new("a"), ClassSpec::new("b")];
        cs[0].weight = 3;
        let g = Gate::new(SchedConfig::new(cs, PolicyKind::Stride), None, 6).unwrap();
        let names: [Arc<str>; 2] = [Arc::from("a"), Arc::from("b")];
        let mut held = Vec::new();
        for _ in 0..6 {
            held.push(g.acquire(meta(&g, 1), &names[1]).await.unwrap());
        }
        assert!(g.set_share(SHARED_LANE, 333));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let peak = Arc::new(AtomicUsize::new(0));
        for i in 0..32 {
            let (g, tx, peak) = (g.clone(), tx.clone(), peak.clone());
            let class = i % 2;
            let name = names[class].clone();
            tokio::spawn(async move {
                let p = g.acquire(meta(&g, class), &name).await.unwrap();
                peak.fetch_max(g.snapshot().busy, Ordering::SeqCst);
                tokio::task::yield_now().await;
                let _ = tx.send(class);
                drop(p);
            });
        }
        until(|| g.snapshot().queued == 32).await;
        held.clear();
        let mut order = Vec::new();
        while order.len() < 16 {
            order.push(rx.recv().await.unwrap());
        }
        let a = order.iter().filter(|&&c| c == 0).count();
        assert!(
            (11..=13).contains(&a),
            "{a} of 16 to the 3:1 class: {order:?}"
        );
        assert_eq!(
            peak.load(Ordering::SeqCst),
            2,
            "never more than the scaled limit"
        );
    }

    #[tokio::test]
    async fn a_waiter_that_went_away_leaves_the_queue_at_once() {
        let g = gate(1, PolicyKind::Fcfs);
        let a: Arc<str> = Arc::from("a");
        let p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let g2 = g.clone();
        let a2 = a.clone();
        let gone = tokio::spawn(async move { g2.acquire(meta(&g2, 0), &a2).await.is_ok() });
        until(|| g.snapshot().queued == 1).await;
        gone.abort();
        let _ = gone.await;
        // Cancelled when its future was dropped, not when a worker frees up.
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued, s.abandoned), (1, 0, 1));
        drop(p1);
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued, s.abandoned), (0, 0, 1));
        // The worker is free for the next one.
        let _p = g.acquire(meta(&g, 1), &Arc::from("b")).await.unwrap();
    }

    /// Poll `fut` once (it must not be ready).
    fn poll_once<F: std::future::Future>(fut: std::pin::Pin<&mut F>) {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.poll(&mut cx).is_pending(), "expected to wait");
    }

    #[tokio::test]
    async fn a_cancelled_waiter_frees_its_place_under_the_class_cap() {
        let mut cs = vec![ClassSpec::new("a")];
        cs[0].queue_cap = Some(1);
        let g = Gate::new(SchedConfig::new(cs, PolicyKind::Fcfs), None, 1).unwrap();
        let a: Arc<str> = Arc::from("a");
        let p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let mut first = Box::pin(g.acquire(meta(&g, 0), &a));
        poll_once(first.as_mut());
        assert_eq!(
            g.acquire(meta(&g, 0), &a).await.err().map(|o| o.reason),
            Some(RejectReason::ClassQueueFull)
        );
        drop(first);
        let mut second = Box::pin(g.acquire(meta(&g, 0), &a));
        poll_once(second.as_mut());
        assert_eq!((g.snapshot().queued, g.snapshot().abandoned), (1, 1));
        drop(p1);
        let p2 = second.await.unwrap();
        assert!(p2.waited() > Duration::ZERO);
    }

    #[tokio::test]
    async fn a_grant_sent_to_a_waiter_that_went_away_is_released() {
        let g = gate(1, PolicyKind::Fcfs);
        let a: Arc<str> = Arc::from("a");
        let p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let mut waiting = Box::pin(g.acquire(meta(&g, 0), &a));
        poll_once(waiting.as_mut());
        // The worker goes to the waiter: its permit is in the channel, not yet taken.
        drop(p1);
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued, s.abandoned), (1, 0, 0));
        // The waiter goes away without taking it: the worker is freed and the request counted abandoned.
        drop(waiting);
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued, s.abandoned), (0, 0, 1));
        let _p = g.acquire(meta(&g, 0), &a).await.unwrap();
    }

    #[tokio::test]
    async fn close_answers_queued_with_shutdown_and_refuses_new() {
        let g = gate(1, PolicyKind::Fcfs);
        let a: Arc<str> = Arc::from("a");
        let p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let g2 = g.clone();
        let a2 = a.clone();
        let waiter = tokio::spawn(async move { g2.acquire(meta(&g2, 0), &a2).await.err() });
        until(|| g.snapshot().queued == 1).await;
        g.close();
        assert_eq!(
            waiter.await.unwrap(),
            Some(Overloaded {
                reason: RejectReason::Shutdown
            })
        );
        assert_eq!(
            g.acquire(meta(&g, 0), &a).await.err().map(|o| o.reason),
            Some(RejectReason::Shutdown)
        );
        drop(p1);
        assert_eq!(g.snapshot().busy, 0);
    }

    #[tokio::test]
    async fn class_names_decide_after_a_reconfigure() {
        let g = gate(2, PolicyKind::Fcfs);
        // Classes swap places: a request classified as "b" with the old index 1 must land in "b" (now 0).
        let cfg = SchedConfig::new(
            vec![ClassSpec::new("b"), ClassSpec::new("a")],
            PolicyKind::Stride,
        );
        g.reconfigure(cfg, None, 1).unwrap();
        let a: Arc<str> = Arc::from("a");
        let first = g.acquire(meta(&g, 0), &a).await.unwrap();
        // served on arrival: in the class it was classified into, which the caller knows
        assert_eq!(first.class_name(), None);
        let b: Arc<str> = Arc::from("b");
        let mut queued = Box::pin(g.acquire(meta(&g, 1), &b));
        poll_once(queued.as_mut());
        drop(first);
        let p = queued.await.unwrap();
        assert_eq!(p.class_name().map(|n| &**n), Some("b"));
        let s = g.snapshot();
        assert_eq!((s.workers, s.policy), (1, PolicyKind::Stride));
    }

    #[tokio::test]
    async fn a_lease_caps_each_class_and_lifting_it_restores_the_limit() {
        let g = gate(10, PolicyKind::Fcfs);
        g.count_classes();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        g.set_lease(Some(vec![(a.clone(), 2), (b.clone(), 1)]));
        let s = g.snapshot();
        assert_eq!(
            (s.workers, s.leased, s.class_reserved.clone()),
            (3, true, vec![2, 1])
        );
        let pa1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let pa2 = g.acquire(meta(&g, 0), &a).await.unwrap();
        // a's lease is spent: its third waits, while b still has its own
        let mut a3 = Box::pin(g.acquire(meta(&g, 0), &a));
        poll_once(a3.as_mut());
        let pb1 = g.acquire(meta(&g, 1), &b).await.unwrap();
        let mut b2 = Box::pin(g.acquire(meta(&g, 1), &b));
        poll_once(b2.as_mut());
        let s = g.snapshot();
        assert_eq!((s.class_busy.clone(), s.queued), (vec![2, 1], 2));
        // a lease that grows a's share dispatches its waiter at once; b's stays waiting
        g.set_lease(Some(vec![(a.clone(), 3), (b.clone(), 1)]));
        let pa3 = a3.await.unwrap();
        assert_eq!(g.snapshot().queued, 1);
        // a class the lease leaves out gets nothing, even with workers free elsewhere
        g.set_lease(Some(vec![(a.clone(), 5)]));
        poll_once(b2.as_mut());
        // lifted: the configured 10 workers again
        g.set_lease(None);
        let pb2 = b2.await.unwrap();
        let s = g.snapshot();
        assert_eq!((s.workers, s.leased, s.busy), (10, false, 5));
        drop((pa1, pa2, pa3, pb1, pb2));
        let s = g.snapshot();
        assert_eq!((s.busy, s.class_busy), (0, vec![0, 0]));
    }

    #[tokio::test]
    async fn timer_answers_queue_timeouts() {
        let mut cfg = SchedConfig::new(vec![ClassSpec::new("a")], PolicyKind::Fcfs);
        cfg.queue_timeout = Some(30_000_000);
        let g = Gate::new(cfg, None, 1).unwrap();
        tokio::spawn(g.clone().run_timer());
        let a: Arc<str> = Arc::from("a");
        let _p1 = g.acquire(meta(&g, 0), &a).await.unwrap();
        let t = Instant::now();
        let r = g.acquire(meta(&g, 0), &a).await;
        assert_eq!(r.err().map(|o| o.reason), Some(RejectReason::QueueTimeout));
        assert!(t.elapsed() >= Duration::from_millis(29));
        g.close();
    }
}
