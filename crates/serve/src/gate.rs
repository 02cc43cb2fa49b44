//! The gate between classified requests and the workers: async permits over `ordo_sched::Scheduler`s. A
//! permit is taken before a request is served and released on drop, so no path can leak a worker; releasing
//! one dispatches the next waiter by the policy. Rejections are typed. A waiting request whose future is
//! dropped (its client went away) leaves the queue at once, so it stops counting toward the queue caps.
//!
//! Workers come in *lanes*: with a fixed number of `workers` there is one lane shared by every route; with
//! `workers = "auto"` each route (or group of routes) has its own lane, whose limit an
//! `ordo_sched::limit::Limiter` moves from the round trips of the requests it served. Each lane has its own
//! scheduler (the class policy orders what waits for that lane), and a class may have workers reserved in
//! every lane that no other class can take (docs/overload.md).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

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

/// One lane: its scheduler, its limit, and what it serves now.
struct Lane {
    key: Arc<str>,
    sched: Scheduler<Waiter>,
    /// The classes of this lane's scheduler configuration (a retired lane keeps its own).
    names: Vec<Arc<str>>,
    reserved: Vec<usize>,
    reserved_total: usize,
    busy: usize,
    /// In flight per class (kept only while the lane reserves workers).
    class_busy: Vec<usize>,
    /// In flight on reserved workers.
    reserved_busy: usize,
    limit: LimitState,
    /// No longer in the configuration: serves what it holds, takes only stragglers, then goes.
    retired: bool,
    /// Bumped when `names` change, so a permit can tell its class index is stale.
    generation: u64,
}

impl Lane {
    fn limit(&self) -> usize {
        self.limit.limit()
    }

    fn set_classes(&mut self, names: Vec<Arc<str>>, reserved: &[usize]) {
        let mut class_busy = vec![0; names.len()];
        for (old, b) in self.names.iter().zip(&self.class_busy) {
            if let Some(i) = names.iter().position(|n| n == old) {
                class_busy[i] += b;
            }
        }
        self.reserved = (0..names.len())
            .map(|i| reserved.get(i).copied().unwrap_or(0))
            .collect();
        self.reserved_total = self.reserved.iter().sum();
        self.reserved_busy = class_busy
            .iter()
            .zip(&self.reserved)
            .map(|(b, r)| (*b).min(*r))
            .sum();
        self.class_busy = class_busy;
        self.names = names;
        self.generation += 1;
    }

    /// A free worker reserved to `class`.
    fn reserve_room(&self, class: ClassId) -> bool {
        self.reserved_total > 0
            && self.class_busy.get(class).copied().unwrap_or(0)
                < self.reserved.get(class).copied().unwrap_or(0)
    }

    /// A free worker that any class may take.
    fn shared_room(&self) -> bool {
        self.busy - self.reserved_busy < self.limit().saturating_sub(self.reserved_total)
    }

    /// A class with a free reserved worker and a request waiting for it.
    fn reserved_waiting(&self) -> Option<ClassId> {
        if self.reserved_total == 0 {
            return None;
        }
        (0..self.names.len()).find(|&c| self.reserve_room(c) && self.sched.class_len(c) > 0)
    }

    /// A request of `class` starts; returns the lane's requests in flight, itself included.
    fn start(&mut self, class: ClassId) -> usize {
        if self.reserved_total > 0 && class < self.class_busy.len() {
            if self.reserve_room(class) {
                self.reserved_busy += 1;
            }
            self.class_busy[class] += 1;
        }
        self.busy += 1;
        self.busy
    }

    /// A request of `class` (None: a class no longer configured) ended.
    fn finish(&mut self, class: Option<ClassId>) {
        self.busy = self.busy.saturating_sub(1);
        let Some(c) = class.filter(|&c| self.reserved_total > 0 && c < self.class_busy.len())
        else {
            return;
        };
        if self.class_busy[c] > 0 && self.class_busy[c] <= self.reserved[c] {
            self.reserved_busy = self.reserved_busy.saturating_sub(1);
        }
        self.class_busy[c] = self.class_busy[c].saturating_sub(1);
    }

    fn class_of(&self, name: &str) -> ClassId {
        self.names.iter().position(|n| &**n == name).unwrap_or(0)
    }
}

struct State {
    lanes: Vec<Lane>,
    closed: bool,
    /// The expiry the timer task sleeps towards (None: sleeping until notified).
    timer_at: Option<Nanos>,
    /// Scratch space for requests the class overload control drops during a dispatch.
    dropped: Vec<Rejected<Waiter>>,
}

impl State {
    /// The lane with key `key`, else the first current one.
    fn lane_for(&self, key: Option<&Arc<str>>) -> usize {
        key.and_then(|k| {
            self.lanes
                .iter()
                .position(|l| Arc::ptr_eq(&l.key, k) || l.key == *k)
        })
        .or_else(|| self.lanes.iter().position(|l| !l.retired))
        .unwrap_or(0)
    }

    fn lane_by_key(&self, key: &Arc<str>) -> Option<usize> {
        self.lanes
            .iter()
            .position(|l| Arc::ptr_eq(&l.key, key) || l.key == *key)
    }

    /// Retired lanes that hold nothing more go.
    fn drop_idle_retired(&mut self) {
        self.lanes
            .retain(|l| !(l.retired && l.busy == 0 && l.sched.is_empty()));
    }
}

struct Shared {
    state: Mutex<State>,
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

    fn permit(
        self: &Arc<Self>,
        lane: &Lane,
        class: ClassId,
        waited: Nanos,
        inflight: usize,
        started: Nanos,
    ) -> Permit {
        Permit {
            shared: Some(self.clone()),
            lane: lane.key.clone(),
            class,
            class_name: lane
                .names
                .get(class)
                .cloned()
                .unwrap_or_else(|| Arc::from("")),
            generation: lane.generation,
            waited: Duration::from_nanos(waited),
            started,
            inflight,
            outcome: None,
        }
    }

    /// Hand lane `li`'s free workers to its queued requests — first a class's reserved workers to that
    /// class, then the shared ones by the policy — skipping waiters that went away and answering those the
    /// class overload control dropped.
    fn pump(self: &Arc<Self>, st: &mut State, li: usize) {
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
            let d = match lane.reserved_waiting() {
                Some(c) => lane.sched.dispatch_class(c, now, &mut dropped),
                None if lane.shared_room() => lane.sched.dispatch_or_drop(now, &mut dropped),
                None => break,
            };
            let Some(d) = d else {
                if dropped.len() > before {
                    continue;
                }
                break;
            };
            let class = d.meta.class;
            let inflight = lane.start(class);
            let permit = self.permit(lane, class, d.waited, inflight, now);
            if let Err(Ok(mut p)) = d.item.tx.send(Ok(permit)) {
                // The receiver is gone. A dropped wait cancels its entry first (`Queued`), so this is
                // only a safety net: disarm the permit (we hold the lock) and go on.
                p.shared = None;
                lane.finish(Some(class));
                self.abandoned.fetch_add(1, Ordering::Relaxed);
            }
        }
        for r in dropped.drain(..) {
            let _ = r.item.tx.send(Err(r.reason));
        }
        st.dropped = dropped;
    }

    fn pump_all(self: &Arc<Self>, st: &mut State) {
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
}

/// Permission to serve one request; dropping it frees the worker and dispatches the next waiter.
pub struct Permit {
    shared: Option<Arc<Shared>>,
    lane: Arc<str>,
    class: ClassId,
    class_name: Arc<str>,
    generation: u64,
    waited: Duration,
    /// Gate time at dispatch.
    started: Nanos,
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

    /// The class the request was dispatched from (after a reload this can differ from the one it was
    /// classified into).
    pub fn class_name(&self) -> &Arc<str> {
        &self.class_name
    }

    /// The backend answered (`failed`: with an error or timeout status): when the permit is dropped, its
    /// service time feeds the scheduler's estimates and the lane's limiter. A permit dropped without it (the
    /// client went away) teaches nothing. Returns that service time: from dispatch to now (one clock read
    /// for the caller's metrics and the scheduler's).
    pub fn finish(&mut self, failed: bool) -> Duration {
        let now = self.shared.as_ref().map_or(self.started, |s| s.now());
        self.outcome = Some((failed, now));
        Duration::from_nanos(now.saturating_sub(self.started))
    }

    /// A permit granted to a waiter that went away before taking it: free the worker without feeding the
    /// (empty) service time anywhere, count the request as abandoned, and dispatch the next.
    fn release_unused(mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut st = shared.lock();
        if let Some(li) = st.lane_by_key(&self.lane) {
            let lane = &mut st.lanes[li];
            let class = (lane.generation == self.generation).then_some(self.class);
            lane.finish(class.or_else(|| lane.names.iter().position(|n| *n == self.class_name)));
            shared.abandoned.fetch_add(1, Ordering::Relaxed);
            shared.pump(&mut st, li);
        }
        st.drop_idle_retired();
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut st = shared.lock();
        let Some(li) = st.lane_by_key(&self.lane) else {
            return;
        };
        let lane = &mut st.lanes[li];
        let class = if lane.generation == self.generation {
            Some(self.class)
        } else {
            lane.names.iter().position(|n| *n == self.class_name)
        };
        lane.finish(class);
        if let Some((failed, now)) = self.outcome {
            let service = now.saturating_sub(self.started);
            if let Some(c) = class {
                lane.sched.observe_service(c, service);
            }
            if let LimitState::Adaptive(l) = &mut lane.limit {
                let sample = Sample {
                    rtt: service,
                    inflight: self.inflight,
                    dropped: failed,
                };
                if l.on_sample(now, sample) {
                    let limit = l.limit();
                    lane.sched.set_capacity(limit);
                }
            }
        }
        shared.pump(&mut st, li);
        st.drop_idle_retired();
    }
}

/// A queued request's wait for its grant. Dropped before the grant arrived (the connection task drops the
/// `acquire` future when its client goes away), it takes the request out of the scheduler under the lock,
/// so the request stops counting toward queue caps, queue length and edf's admission estimate at once. If
/// the grant was already sent, the permit waiting in the channel is released instead.
struct Queued {
    shared: Arc<Shared>,
    lane: Arc<str>,
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
            let c = st
                .lane_by_key(&self.lane)
                .and_then(|li| st.lanes[li].sched.cancel(ticket));
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
    /// Per class: workers reserved to it in each lane.
    pub class_reserved: Vec<usize>,
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

fn new_lane(
    cfg: SchedConfig,
    picker: Option<Box<dyn HeadPicker>>,
    plan: &LanePlan,
    reserved: &[usize],
    now: Nanos,
) -> Result<Lane, GateConfigError> {
    let names = class_names(&cfg);
    let mut sched = match picker {
        Some(p) => Scheduler::with_picker(cfg, p),
        None => Scheduler::new(cfg),
    }
    .map_err(|e| GateConfigError(e.to_string()))?;
    let limit = LimitState::new(&plan.limit, now);
    sched.set_capacity(limit.limit());
    let mut lane = Lane {
        key: plan.key.clone(),
        sched,
        names: Vec::new(),
        reserved: Vec::new(),
        reserved_total: 0,
        busy: 0,
        class_busy: Vec::new(),
        reserved_busy: 0,
        limit,
        retired: false,
        generation: 0,
    };
    lane.set_classes(names, reserved);
    Ok(lane)
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
        let epoch = Instant::now();
        let mut pickers = pickers.into_iter();
        let lanes = plan
            .lanes
            .iter()
            .map(|lp| new_lane(cfg.clone(), pickers.next(), lp, &plan.reserved, 0))
            .collect::<Result<Vec<_>, _>>()?;
        if lanes.is_empty() {
            return Err(GateConfigError("the pool has no lane".into()));
        }
        Ok(Gate {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    lanes,
                    closed: false,
                    timer_at: None,
                    dropped: Vec::new(),
                }),
                epoch,
                timer: Notify::new(),
                abandoned: AtomicU64::new(0),
            }),
        })
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

    async fn acquire_in(
        &self,
        mut meta: Meta,
        class_name: &Arc<str>,
        lane_key: Option<&Arc<str>>,
    ) -> Result<Permit, Overloaded> {
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
            if lane.reserve_room(meta.class) || (lane.sched.is_empty() && lane.shared_room()) {
                let inflight = lane.start(meta.class);
                // dispatched on arrival: the arrival time (read by the caller just before) is the start
                return Ok(self
                    .shared
                    .permit(lane, meta.class, 0, inflight, meta.arrival));
            }
            let (tx, rx) = oneshot::channel();
            let now = self.shared.now();
            let ticket = match lane.sched.enqueue_ticket(Waiter { tx }, meta, now) {
                Ok(t) => t,
                Err(r) => return Err(Overloaded { reason: r.reason }),
            };
            let key = lane.key.clone();
            self.shared.pump(st, li);
            self.shared.maybe_wake_timer(st);
            Queued {
                shared: self.shared.clone(),
                lane: key,
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
        for lp in &plan.lanes {
            let picker = pickers.next();
            let lane = match old.iter().position(|l| l.key == lp.key) {
                Some(i) => {
                    let mut lane = old.swap_remove(i);
                    if let Err(e) = lane.sched.reconfigure(cfg.clone(), picker) {
                        // Checked above; should it happen anyway, keep everything serving.
                        lanes.push(lane);
                        lanes.append(&mut old);
                        st.lanes = lanes;
                        return Err(GateConfigError(e.to_string()));
                    }
                    lane.set_classes(names.clone(), &plan.reserved);
                    lane.retired = false;
                    if !lane.limit.same_plan(&lp.limit) {
                        lane.limit = LimitState::new(&lp.limit, now);
                    }
                    let limit = lane.limit();
                    lane.sched.set_capacity(limit);
                    lane
                }
                None => new_lane(cfg.clone(), picker, lp, &plan.reserved, now)?,
            };
            lanes.push(lane);
        }
        for mut l in old {
            l.retired = true;
            lanes.push(l);
        }
        st.lanes = lanes;
        st.drop_idle_retired();
        self.shared.pump_all(&mut st);
        st.timer_at = None;
        self.shared.timer.notify_one();
        Ok(())
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
            }
        }
        for w in drained {
            let _ = w.tx.send(Err(RejectReason::Shutdown));
        }
        self.shared.timer.notify_one();
    }

    /// Current numbers.
    pub fn snapshot(&self) -> GateSnapshot {
        let st = self.shared.lock();
        let current = st.lanes.iter().find(|l| !l.retired).or(st.lanes.first());
        let names: Vec<Arc<str>> = current.map(|l| l.names.clone()).unwrap_or_default();
        let mut class_queued = vec![0; names.len()];
        let mut class_standing = vec![false; names.len()];
        for lane in &st.lanes {
            for (c, n) in lane.names.iter().enumerate() {
                if let Some(i) = names.iter().position(|m| m == n) {
                    class_queued[i] += lane.sched.class_len(c);
                    class_standing[i] |= lane.sched.class_standing(c);
                }
            }
        }
        GateSnapshot {
            busy: st.lanes.iter().map(|l| l.busy).sum(),
            workers: st
                .lanes
                .iter()
                .filter(|l| !l.retired)
                .map(Lane::limit)
                .sum(),
            queued: st.lanes.iter().map(|l| l.sched.len()).sum(),
            class_queued,
            class_standing,
            class_reserved: current.map(|l| l.reserved.clone()).unwrap_or_default(),
            class_names: names,
            policy: current.map_or(PolicyKind::Fcfs, |l| l.sched.config().policy),
            abandoned: self.shared.abandoned.load(Ordering::Relaxed),
            closed: st.closed,
            lanes: st
                .lanes
                .iter()
                .map(|l| LaneSnapshot {
                    key: l.key.clone(),
                    limit: l.limit(),
                    busy: l.busy,
                    queued: l.sched.len(),
                    limiter: match &l.limit {
                        LimitState::Adaptive(lim) => Some(lim.snapshot()),
                        LimitState::Fixed(_) => None,
                    },
                    retired: l.retired,
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
        g.reconfigure(cfg, None, 3).unwrap();
        let p = g.acquire(meta(&g, 1), &Arc::from("b")).await.unwrap();
        assert_eq!(&**p.class_name(), "b");
        let s = g.snapshot();
        assert_eq!((s.workers, s.policy), (3, PolicyKind::Stride));
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
