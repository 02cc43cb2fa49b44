//! The gate's slow path, over the lanes' `ordo_sched` schedulers and under one lock: a request that finds
//! no free worker waits in its lane's queue; a release hands free workers to the waiters by the class
//! policy (`Shared::pump`); a waiter whose client went away leaves the queue at once (`Queued`); and the
//! timer task answers queue timeouts when they fall due. Grants are decided under the lock and sent after
//! it is released (`Locked`): sending one can wake another thread's runtime, a system call no other
//! thread's acquire or release should wait behind.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;
use ordo_sched::limit::Sample;
use ordo_sched::{Nanos, RejectReason, Rejected, Ticket};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use super::lane::{Lane, Lease, LimitState};
use super::permit::LaneCore;
use super::{Gate, Permit};

/// What a queued request is sent when the policy picks it (it becomes the caller's [`Permit`]).
pub(super) type Grant = Result<Permit, RejectReason>;

pub(super) struct Waiter {
    pub(super) tx: oneshot::Sender<Grant>,
}

pub(super) struct State {
    pub(super) lanes: Vec<Lane>,
    pub(super) closed: bool,
    /// The expiry the timer task sleeps towards (None: sleeping until notified).
    pub(super) timer_at: Option<Nanos>,
    /// Scratch space for requests the class overload control drops during a dispatch.
    pub(super) dropped: Vec<Rejected<Waiter>>,
    /// Fleet mode: lanes count in flight per class ([`Gate::count_classes`]).
    pub(super) counted: bool,
    /// Fleet mode's lease, applied to every current lane ([`Gate::set_lease`]).
    pub(super) lease: Option<Lease>,
    /// Answers `pump` decided under the lock, sent once it is released ([`Locked`]): so `pump` runs only
    /// under [`Shared::lock`], never under a bare guard of `Shared::state`.
    pub(super) answers: Vec<Answer>,
}

/// A waiter's answer, to be sent outside the lock: its grant (a permit) or its rejection.
pub(super) type Answer = (oneshot::Sender<Grant>, Grant);

thread_local! {
    /// An empty vector with room, swapped for `State::answers` as the lock is released (so sending the
    /// answers allocates nothing, and needs no second trip through the lock to give the room back).
    static SPARE_ANSWERS: Cell<Vec<Answer>> = const { Cell::new(Vec::new()) };
}

/// The gate's lock, held: derefs to the [`State`]; when dropped, releases the lock and then sends the
/// answers `pump` queued meanwhile. Sending one wakes the waiting request's task — on another serving
/// thread, a system call that wakes that thread's runtime — which under the lock would hold every other
/// thread's acquire and release back for its duration.
pub(super) struct Locked<'a> {
    guard: Option<MutexGuard<'a, State>>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let Some(mut st) = self.guard.take() else {
            return;
        };
        if st.answers.is_empty() {
            return;
        }
        let mut answers = SPARE_ANSWERS.try_with(Cell::take).unwrap_or_default();
        std::mem::swap(&mut answers, &mut st.answers);
        drop(st);
        for (tx, answer) in answers.drain(..) {
            if let Err(Ok(permit)) = tx.send(answer) {
                // The waiter went away between its dispatch and now (its `Queued` found itself no longer
                // queued and nothing in the channel yet): the worker goes back, counted abandoned.
                permit.release_unused();
            }
        }
        let _ = SPARE_ANSWERS.try_with(|c| c.set(answers));
    }
}

impl State {
    /// The lane with key `key`, else the first current one.
    pub(super) fn lane_for(&self, key: Option<&Arc<str>>) -> usize {
        key.and_then(|k| self.lane_by_key(k))
            .or_else(|| self.lanes.iter().position(|l| !l.retired()))
            .unwrap_or(0)
    }

    pub(super) fn lane_by_key(&self, key: &Arc<str>) -> Option<usize> {
        self.lanes
            .iter()
            .position(|l| Arc::ptr_eq(l.key(), key) || l.key() == key)
    }

    pub(super) fn lane_of(&self, core: &Arc<LaneCore>) -> Option<usize> {
        self.lanes.iter().position(|l| Arc::ptr_eq(&l.core, core))
    }

    /// Retired lanes that hold nothing more go.
    pub(super) fn drop_idle_retired(&mut self) {
        self.lanes
            .retain(|l| !(l.retired() && l.busy() == 0 && l.sched.is_empty()));
    }
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// The current lanes' cores, in plan order, for the fast path (replaced under the lock; empty once
    /// closed).
    pub(super) table: ArcSwap<Vec<Arc<LaneCore>>>,
    pub(super) epoch: Instant,
    pub(super) timer: Notify,
    pub(super) abandoned: AtomicU64,
}

impl Shared {
    pub(super) fn lock(&self) -> Locked<'_> {
        // A panic while holding the lock cannot leave the counters half-updated in a way that matters more
        // than stopping service, so keep going with the inner value.
        Locked {
            guard: Some(self.state.lock().unwrap_or_else(|p| p.into_inner())),
        }
    }

    pub(super) fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Publish the current lanes to the fast path (under the lock).
    pub(super) fn publish(&self, st: &State) {
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
    pub(super) fn pump(&self, st: &mut State, li: usize) {
        if st.closed || li >= st.lanes.len() {
            return;
        }
        // nothing queued (the usual case when a permit is dropped): nothing to dispatch, no clock to read
        if st.lanes[li].sched.is_empty() && st.dropped.is_empty() {
            return;
        }
        // the clock is read once a worker is there to hand out (not when the caller has just queued a
        // request because none was)
        let mut clock = None;
        let mut now = || *clock.get_or_insert_with(|| self.now());
        let mut dropped = std::mem::take(&mut st.dropped);
        let lane = &mut st.lanes[li];
        loop {
            if lane.sched.is_empty() {
                break;
            }
            let before = dropped.len();
            let (d, inflight) = match lane.reserved_waiting() {
                Some(c) => match lane.sched.dispatch_class(c, now(), &mut dropped) {
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
                    match lane.sched.dispatch_or_drop(now(), &mut dropped) {
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
                started: now(),
                epoch: self.epoch,
                inflight,
                outcome: None,
            };
            st.answers.push((d.item.tx, Ok(permit)));
        }
        lane.sync_queued();
        st.answers
            .extend(dropped.drain(..).map(|r| (r.item.tx, Err(r.reason))));
        st.dropped = dropped;
    }

    pub(super) fn pump_all(&self, st: &mut State) {
        for li in 0..st.lanes.len() {
            self.pump(st, li);
        }
    }

    pub(super) fn next_expiry(st: &State) -> Option<Nanos> {
        st.lanes.iter().filter_map(|l| l.sched.next_expiry()).min()
    }

    /// Wake the timer task if the next expiry moved earlier than what it sleeps towards.
    pub(super) fn maybe_wake_timer(&self, st: &State) {
        if let Some(next) = Self::next_expiry(st) {
            if st.timer_at.is_none_or(|t| next < t) {
                self.timer.notify_one();
            }
        }
    }

    /// A permit's release that needs the lock: a slow-path permit's bookkeeping, what the policy and the
    /// limiter learn from it, the next dispatch, and a retired lane's end.
    pub(super) fn release_locked(&self, p: &Permit, core: &Arc<LaneCore>, abandoned: bool) {
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

/// A queued request's wait for its grant. Dropped before the grant arrived (the connection task drops the
/// `acquire` future when its client goes away), it takes the request out of the scheduler under the lock,
/// so the request stops counting toward queue caps, queue length and edf's admission estimate at once. If
/// the grant was already sent, the permit waiting in the channel is released instead.
pub(super) struct Queued {
    pub(super) shared: Arc<Shared>,
    pub(super) lane: Arc<LaneCore>,
    /// `None` once the wait has its answer.
    pub(super) ticket: Option<Ticket>,
    pub(super) rx: oneshot::Receiver<Grant>,
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
        // No longer queued: `pump` dispatched it — its grant is in the channel, to release here, or still
        // on its way (sent once the lock is free: closing the channel makes that send fail, and the sender
        // releases it) — or the timer or `close` refused it (nothing to release).
        self.rx.close();
        if let Ok(Ok(permit)) = self.rx.try_recv() {
            permit.release_unused();
        }
    }
}

impl Gate {
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
    use super::super::tests::{gate, meta, poll_once, until};
    use super::*;
    use ordo_sched::{ClassSpec, PolicyKind, SchedConfig};

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

    /// A grant is sent once the lock is released, so a waiter can go away after its dispatch and before its
    /// answer arrives: the permit must then come back, whichever side runs first.
    #[test]
    fn a_grant_racing_its_waiters_departure_never_leaks_the_worker() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let g = gate(1, PolicyKind::Fcfs);
        let a: Arc<str> = Arc::from("a");
        for _ in 0..4000 {
            let p1 = rt.block_on(g.acquire(meta(&g, 0), &a)).unwrap();
            let mut waiting = Box::pin(g.acquire(meta(&g, 0), &a));
            poll_once(waiting.as_mut());
            assert_eq!(g.snapshot().queued, 1);
            let start = std::sync::Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    start.wait();
                    drop(p1);
                });
                s.spawn(|| {
                    start.wait();
                    drop(waiting);
                });
            });
            let s = g.snapshot();
            assert_eq!((s.busy, s.queued), (0, 0));
        }
        assert_eq!(g.snapshot().abandoned, 4000);
        rt.block_on(g.acquire(meta(&g, 0), &a)).unwrap();
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
