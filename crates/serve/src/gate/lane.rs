//! One lane under the gate's lock: its scheduler, its limit (fixed or adaptive), the share of it in force,
//! the workers reserved to classes or leased to them in fleet mode, and the per-class bookkeeping those
//! need; `settle` decides whether the lock-free fast path is open.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use ordo_sched::limit::Limiter;
use ordo_sched::{ClassId, Nanos, Scheduler};

use super::permit::LaneCore;
use super::waiting::{Shared, Waiter};
use super::{FULL_SHARE, LaneLimit, LanePlan, class_names, scaled_limit};

/// Fleet mode's workers per class name (`Gate::set_lease`).
pub(super) type Lease = Arc<[(Arc<str>, usize)]>;

pub(super) enum LimitState {
    Fixed(usize),
    Adaptive(Box<Limiter>),
}

impl LimitState {
    pub(super) fn new(plan: &LaneLimit, now: Nanos) -> Self {
        match plan {
            LaneLimit::Fixed(n) => LimitState::Fixed((*n).max(1)),
            // The plan was validated when the configuration was compiled.
            LaneLimit::Adaptive(c) => match Limiter::new(c.clone(), now) {
                Ok(l) => LimitState::Adaptive(Box::new(l)),
                Err(_) => LimitState::Fixed(c.initial.max(1)),
            },
        }
    }

    pub(super) fn limit(&self) -> usize {
        match self {
            LimitState::Fixed(n) => *n,
            LimitState::Adaptive(l) => l.limit(),
        }
    }

    pub(super) fn same_plan(&self, plan: &LaneLimit) -> bool {
        match (self, plan) {
            (LimitState::Fixed(a), LaneLimit::Fixed(b)) => a == b,
            (LimitState::Adaptive(l), LaneLimit::Adaptive(c)) => l.config() == c,
            _ => false,
        }
    }
}

/// One lane: its scheduler, its limit, and what it serves now.
pub(super) struct Lane {
    pub(super) core: Arc<LaneCore>,
    pub(super) sched: Scheduler<Waiter>,
    /// The classes of this lane's scheduler configuration (a retired lane keeps its own).
    pub(super) names: Vec<Arc<str>>,
    pub(super) reserved: Vec<usize>,
    pub(super) reserved_total: usize,
    /// In flight per class (kept only while the lane reserves workers).
    pub(super) class_busy: Vec<usize>,
    /// In flight on reserved workers.
    pub(super) reserved_busy: usize,
    pub(super) limit: LimitState,
    /// The share of `limit` in force, in thousandths (see [`Gate::set_share`]).
    pub(super) share: u32,
    /// Reserved workers per class as configured (the plan's, by class index).
    pub(super) plan_reserved: Vec<usize>,
    /// Count in flight per class even with nothing reserved (fleet mode: the demand it publishes, and
    /// the bookkeeping a lease needs from its first moment).
    pub(super) counted: bool,
    /// Fleet mode's workers per class name: while set, they are the lane's only workers, each reserved to
    /// its class (a class it leaves out gets none).
    pub(super) lease: Option<Lease>,
}

impl Lane {
    pub(super) fn new(
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

    pub(super) fn key(&self) -> &Arc<str> {
        &self.core.key
    }

    /// Workers now: the lease's total while a lease holds, else the configured or learned limit times the
    /// lane's share (see [`scaled_limit`]).
    pub(super) fn limit(&self) -> usize {
        match &self.lease {
            Some(_) => self.reserved_total,
            None => scaled_limit(self.limit.limit(), self.share, self.reserved_total),
        }
    }

    pub(super) fn busy(&self) -> usize {
        self.core.busy()
    }

    /// Whether requests are counted per class (reserved workers, or fleet mode).
    pub(super) fn counts(&self) -> bool {
        self.reserved_total > 0 || self.counted
    }

    pub(super) fn retired(&self) -> bool {
        self.core.retired.load(Ordering::Relaxed)
    }

    pub(super) fn generation(&self) -> u64 {
        self.core.generation.load(Ordering::Relaxed)
    }

    /// After the lane's settings changed (under the lock): the scheduler learns the limit, and the fast
    /// path opens only for a fixed limit with nothing reserved, on a lane still configured, outside fleet
    /// mode.
    pub(super) fn settle(&mut self) {
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
    pub(super) fn sync_queued(&self) {
        self.core.queued.store(self.sched.len(), Ordering::SeqCst);
    }

    pub(super) fn set_classes(&mut self, names: Vec<Arc<str>>, reserved: &[usize]) {
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
    pub(super) fn apply_reserved(&mut self) {
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
    pub(super) fn set_lease(&mut self, counted: bool, lease: Option<Lease>) {
        self.counted = counted;
        self.lease = lease;
        self.apply_reserved();
        self.settle();
    }

    /// A free worker reserved to `class`.
    pub(super) fn reserve_room(&self, class: ClassId) -> bool {
        self.reserved_total > 0
            && self.class_busy.get(class).copied().unwrap_or(0)
                < self.reserved.get(class).copied().unwrap_or(0)
    }

    /// A class with a free reserved worker and a request waiting for it.
    pub(super) fn reserved_waiting(&self) -> Option<ClassId> {
        if self.reserved_total == 0 {
            return None;
        }
        (0..self.names.len()).find(|&c| self.reserve_room(c) && self.sched.class_len(c) > 0)
    }

    /// Take one of the workers any class may use, if one is free (a compare-and-swap: the fast path
    /// takes them too). Returns the requests in flight, this one included.
    pub(super) fn take_shared(&self) -> Option<usize> {
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
    pub(super) fn untake(&self) {
        self.core.busy.fetch_sub(1, Ordering::SeqCst);
    }

    /// A request of `class` starts on a worker reserved to it; returns the requests in flight.
    pub(super) fn start_reserved(&mut self, class: ClassId) -> usize {
        self.reserved_busy += 1;
        self.count_class(class);
        self.core.busy.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Per-class bookkeeping of a start (while the lane counts per class: reserved workers, fleet mode).
    pub(super) fn count_class(&mut self, class: ClassId) {
        if self.counts() && class < self.class_busy.len() {
            self.class_busy[class] += 1;
        }
    }

    /// A request of `class` (None: a class no longer configured) taken under the lock ended.
    pub(super) fn finish(&mut self, class: Option<ClassId>) {
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

    pub(super) fn class_of(&self, name: &str) -> ClassId {
        self.names.iter().position(|n| &**n == name).unwrap_or(0)
    }

    /// The class a permit was counted in: its index while the classes are the same, else its name's.
    pub(super) fn class_for(
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
