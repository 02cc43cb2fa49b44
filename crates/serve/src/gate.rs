//! The gate between classified requests and the bounded pool of workers: async permits over one
//! `ordo_sched::Scheduler`. A permit is taken before a request is served and released on drop, so no path
//! can leak a worker; releasing one dispatches the next waiter by the policy. Rejections are typed. A
//! waiting request whose future is dropped (its client went away) leaves the queue at once, so it stops
//! counting toward the queue caps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ordo_sched::{
    ClassId, HeadPicker, Meta, Nanos, PolicyKind, RejectReason, SchedConfig, Scheduler, Ticket,
};
use tokio::sync::{Notify, oneshot};

/// A request was refused instead of queued or served: answer 503 with Retry-After.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("overloaded: {}", reason_str(*.reason))]
pub struct Overloaded {
    pub reason: RejectReason,
}

/// The metric label of a reject reason.
pub fn reason_str(r: RejectReason) -> &'static str {
    match r {
        RejectReason::ClassQueueFull => "class_queue_full",
        RejectReason::GlobalQueueFull => "global_queue_full",
        RejectReason::DeadlineUnreachable => "deadline_unreachable",
        RejectReason::QueueTimeout => "queue_timeout",
        RejectReason::Shutdown => "shutdown",
        RejectReason::StandingQueue => "standing_queue",
    }
}

/// Every reject reason, for metrics and status.
pub const REASONS: [RejectReason; 6] = RejectReason::ALL;

type Grant = Result<Permit, RejectReason>;

struct Waiter {
    tx: oneshot::Sender<Grant>,
}

struct State {
    sched: Scheduler<Waiter>,
    busy: usize,
    workers: usize,
    closed: bool,
    names: Vec<Arc<str>>,
    /// The expiry the timer task sleeps towards (None: sleeping until notified).
    timer_at: Option<Nanos>,
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

    /// Hand free workers to queued requests, skipping waiters that went away.
    fn pump(self: &Arc<Self>, st: &mut State) {
        if st.closed {
            return;
        }
        let now = self.now();
        while st.busy < st.workers {
            let Some(d) = st.sched.dispatch(now) else {
                break;
            };
            st.busy += 1;
            let class = d.meta.class;
            let permit = Permit {
                shared: Some(self.clone()),
                class,
                class_name: st
                    .names
                    .get(class)
                    .cloned()
                    .unwrap_or_else(|| Arc::from("")),
                waited: Duration::from_nanos(d.waited),
                started: Instant::now(),
            };
            if let Err(Ok(mut p)) = d.item.tx.send(Ok(permit)) {
                // The receiver is gone. A dropped wait cancels its entry first (`Queued`), so this is
                // only a safety net: disarm the permit (we hold the lock) and go on.
                p.shared = None;
                st.busy -= 1;
                self.abandoned.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Wake the timer task if the next expiry moved earlier than what it sleeps towards.
    fn maybe_wake_timer(&self, st: &State) {
        if let Some(next) = st.sched.next_expiry() {
            if st.timer_at.is_none_or(|t| next < t) {
                self.timer.notify_one();
            }
        }
    }
}

/// Permission to serve one request; dropping it frees the worker and dispatches the next waiter.
pub struct Permit {
    shared: Option<Arc<Shared>>,
    class: ClassId,
    class_name: Arc<str>,
    waited: Duration,
    started: Instant,
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
}

impl Permit {
    /// A permit granted to a waiter that went away before taking it: free the worker without feeding the
    /// (empty) service time to the scheduler, count the request as abandoned, and dispatch the next.
    fn release_unused(mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let mut st = shared.lock();
        st.busy = st.busy.saturating_sub(1);
        shared.abandoned.fetch_add(1, Ordering::Relaxed);
        shared.pump(&mut st);
    }
}

/// A queued request's wait for its grant. Dropped before the grant arrived (the connection task drops the
/// `acquire` future when its client goes away), it takes the request out of the scheduler under the lock,
/// so the request stops counting toward queue caps, queue length and edf's admission estimate at once. If
/// the grant was already sent, the permit waiting in the channel is released instead.
struct Queued {
    shared: Arc<Shared>,
    /// `None` once the wait has its answer.
    ticket: Option<Ticket>,
    rx: oneshot::Receiver<Grant>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        let cancelled = self.shared.lock().sched.cancel(ticket);
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

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let service = self.started.elapsed().as_nanos() as Nanos;
        let mut st = shared.lock();
        st.busy = st.busy.saturating_sub(1);
        if st
            .names
            .get(self.class)
            .is_some_and(|n| *n == self.class_name)
        {
            st.sched.observe_service(self.class, service);
        }
        shared.pump(&mut st);
    }
}

/// Numbers for metrics and status.
#[derive(Clone, Debug)]
pub struct GateSnapshot {
    pub busy: usize,
    pub workers: usize,
    pub queued: usize,
    pub class_names: Vec<Arc<str>>,
    pub class_queued: Vec<usize>,
    pub policy: PolicyKind,
    pub abandoned: u64,
    pub closed: bool,
}

/// The gate: clone it freely (all clones share one scheduler).
#[derive(Clone)]
pub struct Gate {
    shared: Arc<Shared>,
}

/// The scheduler refused a configuration.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct GateConfigError(pub String);

impl Gate {
    /// A gate with `workers` permits over a scheduler built from `cfg` (and `picker` for a custom policy).
    pub fn new(
        cfg: SchedConfig,
        picker: Option<Box<dyn HeadPicker>>,
        workers: usize,
    ) -> Result<Gate, GateConfigError> {
        let names = cfg
            .classes
            .iter()
            .map(|c| Arc::from(c.name.as_str()))
            .collect();
        let mut sched = match picker {
            Some(p) => Scheduler::with_picker(cfg, p),
            None => Scheduler::new(cfg),
        }
        .map_err(|e| GateConfigError(e.to_string()))?;
        sched.set_capacity(workers);
        Ok(Gate {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    sched,
                    busy: 0,
                    workers: workers.max(1),
                    closed: false,
                    names,
                    timer_at: None,
                }),
                epoch: Instant::now(),
                timer: Notify::new(),
                abandoned: AtomicU64::new(0),
            }),
        })
    }

    /// Nanoseconds since the gate was created: the time base of `Meta::arrival` and deadlines.
    pub fn now(&self) -> Nanos {
        self.shared.now()
    }

    /// Take a permit for a request of class `class_name` (its index in the configuration the classifier
    /// used is `meta.class`; when a reload changed the classes, the name decides). Returns at once when a
    /// worker is free and nothing is queued; otherwise queues and waits for the policy to pick it. Dropping
    /// the future while it waits (the client went away) takes the request out of the queue at once and
    /// counts it abandoned.
    pub async fn acquire(
        &self,
        mut meta: Meta,
        class_name: &Arc<str>,
    ) -> Result<Permit, Overloaded> {
        let mut wait = {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(Overloaded {
                    reason: RejectReason::Shutdown,
                });
            }
            if st.names.get(meta.class).is_none_or(|n| n != class_name) {
                meta.class = st.names.iter().position(|n| n == class_name).unwrap_or(0);
            }
            if st.busy < st.workers && st.sched.is_empty() {
                st.busy += 1;
                return Ok(Permit {
                    shared: Some(self.shared.clone()),
                    class: meta.class,
                    class_name: st.names[meta.class].clone(),
                    waited: Duration::ZERO,
                    started: Instant::now(),
                });
            }
            let (tx, rx) = oneshot::channel();
            let now = self.shared.now();
            let ticket = match st.sched.enqueue_ticket(Waiter { tx }, meta, now) {
                Ok(t) => t,
                Err(r) => return Err(Overloaded { reason: r.reason }),
            };
            self.shared.pump(&mut st);
            self.shared.maybe_wake_timer(&st);
            Queued {
                shared: self.shared.clone(),
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
    /// the number of workers.
    pub fn reconfigure(
        &self,
        cfg: SchedConfig,
        picker: Option<Box<dyn HeadPicker>>,
        workers: usize,
    ) -> Result<(), GateConfigError> {
        let names: Vec<Arc<str>> = cfg
            .classes
            .iter()
            .map(|c| Arc::from(c.name.as_str()))
            .collect();
        let mut st = self.shared.lock();
        st.sched
            .reconfigure(cfg, picker)
            .map_err(|e| GateConfigError(e.to_string()))?;
        st.workers = workers.max(1);
        st.sched.set_capacity(workers.max(1));
        st.names = names;
        self.shared.pump(&mut st);
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
            st.sched.drain(&mut drained);
        }
        for w in drained {
            let _ = w.tx.send(Err(RejectReason::Shutdown));
        }
        self.shared.timer.notify_one();
    }

    /// Current numbers.
    pub fn snapshot(&self) -> GateSnapshot {
        let st = self.shared.lock();
        GateSnapshot {
            busy: st.busy,
            workers: st.workers,
            queued: st.sched.len(),
            class_queued: (0..st.names.len()).map(|c| st.sched.class_len(c)).collect(),
            class_names: st.names.clone(),
            policy: st.sched.config().policy,
            abandoned: self.shared.abandoned.load(Ordering::Relaxed),
            closed: st.closed,
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
                let next = st.sched.next_expiry();
                st.timer_at = next;
                next
            };
            match next {
                Some(at) => {
                    let now = shared.now();
                    if at > now {
                        let deadline = tokio::time::Instant::now() + Duration::from_nanos(at - now);
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
                st.sched.expire(now, &mut expired);
                st.timer_at = None;
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
