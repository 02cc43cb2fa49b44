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
//!
//! The files: `plan` (the lanes' layout and the scaled limit), `lane` (one lane's limit, share, lease and
//! reserved workers, under the lock), `permit` (the lock-free fast path and the permit's release),
//! `waiting` (the queue over the lanes' schedulers: dispatch, cancellation, the timer), `reconfigure`
//! (reload, shares and leases at run time) and `snapshot` (numbers for metrics and status).

mod lane;
mod permit;
mod plan;
mod reconfigure;
mod snapshot;
mod waiting;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use ordo_sched::{HeadPicker, Meta, Nanos, PolicyKind, RejectReason, SchedConfig, Scheduler};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use lane::Lane;
pub use permit::Permit;
pub use plan::{FULL_SHARE, LaneLimit, LanePlan, PoolPlan, SHARED_LANE, scaled_limit};
pub use snapshot::{GateSnapshot, LaneSnapshot};
use waiting::{Queued, Shared, State, Waiter};

/// A request was refused instead of queued or served: answer 503 with Retry-After.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("overloaded: {}", .reason.as_str())]
pub struct Overloaded {
    pub reason: RejectReason,
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
                    answers: Vec::new(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_sched::ClassSpec;

    pub(super) fn gate(workers: usize, policy: PolicyKind) -> Gate {
        let cfg = SchedConfig::new(vec![ClassSpec::new("a"), ClassSpec::new("b")], policy);
        Gate::new(cfg, None, workers).unwrap()
    }

    pub(super) fn meta(g: &Gate, class: usize) -> Meta {
        Meta::new(class, g.now())
    }

    pub(super) async fn until(mut f: impl FnMut() -> bool) {
        for _ in 0..2000 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("condition not reached");
    }

    /// Poll `fut` once (it must not be ready).
    pub(super) fn poll_once<F: std::future::Future>(fut: std::pin::Pin<&mut F>) {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.poll(&mut cx).is_pending(), "expected to wait");
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
}
