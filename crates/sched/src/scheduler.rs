//! The [`Scheduler`]: owns the queued requests and the active policy, applies caps, timeouts and admission,
//! lets the caller withdraw a queued request by its [`Ticket`] (a client that went away), and keeps every
//! queued request across `reconfigure`. This is the only type the caller talks to.

use std::collections::HashMap;

use crate::overload::{Codel, Verdict};
use crate::policy::{self, Choice, Estimates, HeadPicker, Policy};
use crate::queue::{ClassQueue, Handle, QEntry, Queues, Slab};
use crate::{
    ClassId, ConfigError, Dispatched, Meta, Nanos, PolicyKind, RejectReason, Rejected, SchedConfig,
};

/// Names one queued request, returned by [`Scheduler::enqueue_ticket`]; [`Scheduler::cancel`] takes it out
/// of the queue. A ticket stays valid across `reconfigure` and never matches another request, even after
/// its own request has left the queue and its storage was reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    h: Handle,
    /// The slot's full generation at enqueue.
    generation: u64,
}

/// Per-class FIFO queues plus a dispatch policy. Not thread-safe by itself; wrap it in a mutex.
pub struct Scheduler<T> {
    cfg: SchedConfig,
    slab: Slab<T>,
    queues: Queues,
    policy: Box<dyn Policy>,
    est: Estimates,
    len: usize,
    next_seq: u64,
    closed: bool,
    /// The policy counts live requests in FIFO ranges: keep tombstone positions (`ClassQueue::tombs`).
    track_tombs: bool,
    /// Per-class CoDel state (used by classes with a `codel` spec).
    codel: Vec<Codel>,
    /// Requests the overload control dropped during [`Scheduler::dispatch`], handed out by the next
    /// [`Scheduler::expire`] (or [`Scheduler::drain`]).
    dropped: Vec<Rejected<T>>,
}

/// What [`Scheduler::take_from`] did.
enum Take<T> {
    Served(Dispatched<T>),
    /// The class's overload control dropped its oldest request; ask again.
    Dropped,
    /// Nothing valid to take (a policy naming a request that is gone).
    Nothing,
}

impl<T> Scheduler<T> {
    /// A scheduler with a built-in policy (`cfg.policy` must not be `Custom`).
    pub fn new(cfg: SchedConfig) -> Result<Self, ConfigError> {
        Self::build(cfg, None)
    }

    /// A scheduler with the custom policy (`cfg.policy` must be `Custom`): `picker` chooses among the
    /// queue heads.
    pub fn with_picker(cfg: SchedConfig, picker: Box<dyn HeadPicker>) -> Result<Self, ConfigError> {
        Self::build(cfg, Some(picker))
    }

    fn build(cfg: SchedConfig, picker: Option<Box<dyn HeadPicker>>) -> Result<Self, ConfigError> {
        check(&cfg, picker.is_some(), false)?;
        let n = cfg.classes.len();
        let policy = policy::build(&cfg, picker);
        Ok(Scheduler {
            track_tombs: policy.counts_ranges(),
            policy,
            slab: Slab::new(),
            queues: Queues::new(n),
            est: Estimates::new(n),
            codel: vec![Codel::default(); n],
            dropped: Vec::new(),
            cfg,
            len: 0,
            next_seq: 0,
            closed: false,
        })
    }

    /// Queue a request, or hand it back with the reason it cannot be queued (caps, edf admission, closed).
    pub fn enqueue(&mut self, item: T, meta: Meta, now: Nanos) -> Result<(), Rejected<T>> {
        self.enqueue_ticket(item, meta, now).map(|_| ())
    }

    /// [`Scheduler::enqueue`], returning the [`Ticket`] that can later [`cancel`](Scheduler::cancel) the
    /// request while it is still queued.
    pub fn enqueue_ticket(
        &mut self,
        item: T,
        mut meta: Meta,
        now: Nanos,
    ) -> Result<Ticket, Rejected<T>> {
        if meta.class >= self.cfg.classes.len() {
            meta.class = 0;
        }
        let spec = &self.cfg.classes[meta.class];
        if meta.deadline.is_none() {
            meta.deadline = spec.deadline.map(|d| meta.arrival.saturating_add(d));
        }
        let reject = |item, reason| Err(Rejected { item, meta, reason });
        if self.closed {
            return reject(item, RejectReason::Shutdown);
        }
        if spec
            .queue_cap
            .is_some_and(|cap| self.queues.len(meta.class) >= cap)
        {
            return reject(item, RejectReason::ClassQueueFull);
        }
        if self.cfg.global_queue_cap.is_some_and(|cap| self.len >= cap) {
            return reject(item, RejectReason::GlobalQueueFull);
        }
        if let Err(reason) = self.policy.admit(&self.queues, &meta, now, &self.est) {
            return reject(item, reason);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = self.slab.insert(item, |h| QEntry { h, seq, meta });
        let ticket = Ticket {
            h: entry.h,
            generation: self.slab.full_generation(entry.h),
        };
        self.push(entry);
        Ok(ticket)
    }

    /// Take a still-queued request out of the queue (its client went away) and hand it back; `None` when
    /// the ticket's request is no longer queued (dispatched, expired, drained or already cancelled). The
    /// request stops counting towards `len`, `class_len`, the caps and edf's admission estimate at once,
    /// and no policy sees it again. O(log n).
    pub fn cancel(&mut self, ticket: Ticket) -> Option<T> {
        if !self.slab.matches(ticket.h, ticket.generation) {
            return None;
        }
        self.remove(ticket.h, false).map(|(item, _)| item)
    }

    /// Whether the ticket's request is still queued.
    pub fn is_queued(&self, ticket: Ticket) -> bool {
        self.slab.matches(ticket.h, ticket.generation)
    }

    fn push(&mut self, entry: QEntry) {
        let cq = &mut self.queues.classes[entry.meta.class];
        cq.fifo.push_back(entry);
        cq.len += 1;
        self.len += 1;
        if self.track_tombs && cq.dead > 0 {
            let slab = &self.slab;
            let ClassQueue { fifo, tombs, .. } = cq;
            tombs.grow(fifo.len(), |i| !slab.is_live(fifo[i].h));
        }
        let slab = &self.slab;
        self.policy
            .on_enqueue(&self.queues, &entry, &|h| slab.is_live(h));
    }

    /// The next request to serve, by the policy; `None` when nothing is queued. Requests that a class's
    /// overload control drops on the way are kept and handed out by the next [`Scheduler::expire`] (use
    /// [`Scheduler::dispatch_or_drop`] to get them at once).
    pub fn dispatch(&mut self, now: Nanos) -> Option<Dispatched<T>> {
        let mut dropped = std::mem::take(&mut self.dropped);
        let d = self.dispatch_or_drop(now, &mut dropped);
        self.dropped = dropped;
        d
    }

    /// The next request to serve: the policy picks the class (or, for srpt and edf, the request), then the
    /// class's overload control acts inside it — CoDel may drop the class's oldest request (appended to
    /// `dropped` with [`RejectReason::StandingQueue`]; the policy then picks again) and adaptive LIFO serves
    /// the class's newest request while its queue is standing. `None` when nothing is queued.
    pub fn dispatch_or_drop(
        &mut self,
        now: Nanos,
        dropped: &mut Vec<Rejected<T>>,
    ) -> Option<Dispatched<T>> {
        while self.len > 0 {
            let (class, entry) = match self.policy.pick(&self.queues, now) {
                Some(Choice::Head(c)) if self.queues.head(c).is_some() => (c, None),
                Some(Choice::Entry(h)) => match self.slab.get(h) {
                    Some(e) => (e.meta.class, Some(h)),
                    None => (self.queues.oldest_head()?, None),
                },
                // A policy that names nothing valid (it should not happen) falls back to FCFS.
                _ => (self.queues.oldest_head()?, None),
            };
            match self.take_from(class, entry, now, dropped) {
                Take::Served(d) => return Some(d),
                Take::Dropped => continue,
                Take::Nothing => {
                    let c = self.queues.oldest_head()?;
                    match self.take_from(c, None, now, dropped) {
                        Take::Served(d) => return Some(d),
                        Take::Dropped => continue,
                        Take::Nothing => return None,
                    }
                }
            }
        }
        None
    }

    /// The next request of `class` alone, bypassing the policy's choice of class (for a worker reserved to
    /// that class); the class's overload control applies as in [`Scheduler::dispatch_or_drop`]. The
    /// request counts toward the class's share as if the policy had picked it.
    pub fn dispatch_class(
        &mut self,
        class: ClassId,
        now: Nanos,
        dropped: &mut Vec<Rejected<T>>,
    ) -> Option<Dispatched<T>> {
        while self.queues.len(class) > 0 {
            match self.take_from(class, None, now, dropped) {
                Take::Served(d) => return Some(d),
                Take::Dropped => continue,
                Take::Nothing => return None,
            }
        }
        None
    }

    /// Whether `class`'s queue is standing (its CoDel detector fired and has not cleared).
    pub fn class_standing(&self, class: ClassId) -> bool {
        self.codel.get(class).is_some_and(Codel::standing)
    }

    /// Serve from non-empty `class`: `entry` if the policy named one, else its oldest request — or, under
    /// adaptive LIFO while the queue is standing, its newest. First the class's CoDel detector looks at the
    /// oldest request's sojourn and may drop that request instead.
    fn take_from(
        &mut self,
        class: ClassId,
        entry: Option<Handle>,
        now: Nanos,
        dropped: &mut Vec<Rejected<T>>,
    ) -> Take<T> {
        let Some(head) = self.queues.head(class) else {
            return Take::Nothing;
        };
        let mut lifo = false;
        if let Some(spec) = self.cfg.classes.get(class).and_then(|c| c.codel) {
            let (h, sojourn, last) = (head.h, head.waited(now), self.queues.len(class) == 1);
            let verdict = self.codel[class].on_dispatch(&spec, now, sojourn, last);
            if verdict == Verdict::Drop && spec.drop {
                return self.refuse(h, RejectReason::StandingQueue, dropped);
            }
            lifo = spec.lifo && self.codel[class].standing();
        }
        let h = match entry {
            Some(h) => h,
            None if lifo => {
                let slab = &self.slab;
                match self.queues.classes[class]
                    .fifo
                    .iter()
                    .rev()
                    .find(|e| slab.is_live(e.h))
                {
                    Some(e) => e.h,
                    None => return Take::Nothing,
                }
            }
            None => head.h,
        };
        // edf: a request whose deadline to start has passed is refused, not started — `expire` removes
        // such requests when they fall due, but a caller whose timer runs late (a busy thread) may
        // dispatch before it does
        if self.policy.drops_late()
            && self
                .slab
                .get(h)
                .and_then(|e| e.meta.deadline)
                .is_some_and(|d| now > d)
        {
            return self.refuse(h, RejectReason::DeadlineUnreachable, dropped);
        }
        match self.remove(h, true) {
            Some((item, e)) => Take::Served(Dispatched {
                item,
                meta: e.meta,
                waited: now.saturating_sub(e.meta.arrival),
            }),
            None => Take::Nothing,
        }
    }

    /// Take queued request `h` out instead of serving it, appending it to `dropped` with `reason`.
    fn refuse(
        &mut self,
        h: Handle,
        reason: RejectReason,
        dropped: &mut Vec<Rejected<T>>,
    ) -> Take<T> {
        match self.remove(h, false) {
            Some((item, e)) => {
                dropped.push(Rejected {
                    item,
                    meta: e.meta,
                    reason,
                });
                Take::Dropped
            }
            None => Take::Nothing,
        }
    }

    /// Take `h` out of the slab and its class FIFO (`dispatched`: it is being served, else it expired or
    /// was cancelled), keeping the FIFO invariants and telling the policy.
    fn remove(&mut self, h: Handle, dispatched: bool) -> Option<(T, QEntry)> {
        let (item, e) = self.slab.remove(h)?;
        let track = self.track_tombs;
        let slab = &self.slab;
        let cq = &mut self.queues.classes[e.meta.class];
        cq.len -= 1;
        self.len -= 1;
        if cq.fifo.front().is_some_and(|f| f.h == h) {
            cq.fifo.pop_front();
            if track && cq.dead > 0 {
                cq.tombs.pop_front(false);
            }
        } else {
            cq.dead += 1;
            if track {
                // The FIFO is in seq order, so the tombstone's position is a search away.
                if let Some(pos) = cq.position_of(e.seq) {
                    let ClassQueue { fifo, tombs, .. } = &mut *cq;
                    tombs.mark(pos, fifo.len(), |i| !slab.is_live(fifo[i].h));
                }
            }
        }
        if cq.dead > 0 && !track {
            // Removed from the back (adaptive LIFO, srpt): drop trailing tombstones at once.
            while cq.fifo.back().is_some_and(|f| !slab.is_live(f.h)) {
                cq.fifo.pop_back();
                cq.dead -= 1;
            }
        }
        if cq.dead > 0 {
            while cq.fifo.front().is_some_and(|f| !slab.is_live(f.h)) {
                cq.fifo.pop_front();
                cq.dead -= 1;
                if track {
                    cq.tombs.pop_front(true);
                }
            }
            if cq.dead > cq.len + 32 {
                cq.fifo.retain(|x| slab.is_live(x.h));
                cq.dead = 0;
                if track {
                    cq.tombs.clear(cq.fifo.len());
                }
            }
        }
        debug_assert_eq!(cq.fifo.len(), cq.len + cq.dead);
        self.policy.on_remove(&self.queues, &e, dispatched);
        Some((item, e))
    }

    /// Remove requests whose queue timeout has passed (`QueueTimeout`) and, under edf, whose deadline has
    /// passed (`DeadlineUnreachable`), appending them to `out`. Only class heads and the edf deadline index
    /// are examined, so the cost is proportional to the number of expired requests plus the classes.
    /// Requests that [`Scheduler::dispatch`] dropped for a standing queue come first.
    pub fn expire(&mut self, now: Nanos, out: &mut Vec<Rejected<T>>) {
        out.append(&mut self.dropped);
        for c in 0..self.queues.classes.len() {
            let Some(timeout) = self.cfg.timeout_of(c) else {
                continue;
            };
            while let Some(head) = self.queues.head(c) {
                if head.waited(now) < timeout {
                    break;
                }
                let h = head.h;
                if let Some((item, e)) = self.remove(h, false) {
                    out.push(Rejected {
                        item,
                        meta: e.meta,
                        reason: RejectReason::QueueTimeout,
                    });
                }
            }
        }
        while let Some(h) = self.policy.pop_expired(&self.queues, now) {
            // A stale handle (a policy bug) must not loop forever.
            let Some((item, e)) = self.remove(h, false) else {
                break;
            };
            out.push(Rejected {
                item,
                meta: e.meta,
                reason: RejectReason::DeadlineUnreachable,
            });
        }
    }

    /// The earliest time at which [`Scheduler::expire`] will have something to remove (0 while requests
    /// dropped by [`Scheduler::dispatch`] wait to be handed out).
    pub fn next_expiry(&self) -> Option<Nanos> {
        if !self.dropped.is_empty() {
            return Some(0);
        }
        let timeouts = (0..self.queues.classes.len()).filter_map(|c| {
            let t = self.cfg.timeout_of(c)?;
            Some(self.queues.head(c)?.meta.arrival.saturating_add(t))
        });
        timeouts.chain(self.policy.next_expiry(&self.queues)).min()
    }

    /// Switch to a new configuration without losing a queued request: classes are matched by name, the
    /// requests of removed classes move to class 0, each class queue is in arrival order, and the policy
    /// state is rebuilt from the queued requests so new weights and policy apply to them. Caps are not
    /// applied to requests already queued. With `custom` and no `picker`, the current picker is kept.
    /// A bad configuration is refused and the scheduler is left as it was.
    pub fn reconfigure(
        &mut self,
        cfg: SchedConfig,
        picker: Option<Box<dyn HeadPicker>>,
    ) -> Result<(), ConfigError> {
        check(
            &cfg,
            picker.is_some(),
            self.cfg.policy == PolicyKind::Custom,
        )?;
        let old = std::mem::replace(&mut self.policy, policy::placeholder());
        let picker = picker.or_else(|| old.take_picker());

        let mapping: Vec<ClassId> = self
            .cfg
            .classes
            .iter()
            .map(|c| cfg.class_by_name(&c.name).unwrap_or(0))
            .collect();
        let mut entries: Vec<QEntry> = Vec::with_capacity(self.len);
        for cq in self.queues.classes.drain(..) {
            entries.extend(cq.fifo.into_iter().filter(|e| self.slab.is_live(e.h)));
        }
        entries.sort_by_key(|e| (e.meta.arrival, e.seq));

        let by_name: HashMap<&str, Option<Nanos>> = self
            .cfg
            .classes
            .iter()
            .zip(&self.est.per_class)
            .map(|(c, e)| (c.name.as_str(), *e))
            .collect();
        let mut est = Estimates::new(cfg.classes.len());
        for (slot, c) in est.per_class.iter_mut().zip(&cfg.classes) {
            *slot = by_name.get(c.name.as_str()).copied().flatten();
        }
        est.global = self.est.global;
        est.capacity = self.est.capacity;

        self.queues = Queues::new(cfg.classes.len());
        self.codel = vec![Codel::default(); cfg.classes.len()];
        self.policy = policy::build(&cfg, picker);
        self.track_tombs = self.policy.counts_ranges();
        self.est = est;
        self.cfg = cfg;
        self.len = 0;
        for mut e in entries {
            e.meta.class = mapping[e.meta.class];
            e.seq = self.next_seq;
            self.next_seq += 1;
            if let Some(stored) = self.slab.get_mut(e.h) {
                *stored = e;
            }
            self.push(e);
        }
        Ok(())
    }

    /// Take every queued request out (for shutdown), in enqueue order.
    pub fn drain(&mut self, out: &mut Vec<T>) {
        out.extend(self.dropped.drain(..).map(|r| r.item));
        let mut all: Vec<(T, QEntry)> = self.slab.drain().collect();
        all.sort_by_key(|(_, e)| e.seq);
        out.extend(all.into_iter().map(|(item, _)| item));
        self.queues = Queues::new(self.cfg.classes.len());
        self.len = 0;
        let old = std::mem::replace(&mut self.policy, policy::placeholder());
        self.policy = policy::build(&self.cfg, old.take_picker());
    }

    /// Refuse every later enqueue with [`RejectReason::Shutdown`] (queued requests stay until drained).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether [`Scheduler::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Requests queued over all classes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Requests queued in `class` (0 for an unknown class).
    pub fn class_len(&self, class: ClassId) -> usize {
        self.queues.len(class)
    }

    /// The configuration in force.
    pub fn config(&self) -> &SchedConfig {
        &self.cfg
    }

    /// Record how long a request of `class` took to serve (feeds edf's admission estimate).
    pub fn observe_service(&mut self, class: ClassId, service: Nanos) {
        self.est.observe(class, service);
    }

    /// Record how many workers serve in parallel (feeds edf's admission estimate; 0 counts as 1).
    pub fn set_capacity(&mut self, workers: usize) {
        self.est.capacity = workers.max(1);
    }

    /// edf's current estimate of when a request with absolute deadline `deadline`, enqueued at `now`,
    /// would start (exposed for status pages and tests).
    pub fn estimated_start(&self, deadline: Nanos, now: Nanos) -> Nanos {
        policy::estimated_start(&self.queues, deadline, now, &self.est)
    }
}

/// Validate `cfg` and the picker/policy pairing.
fn check(cfg: &SchedConfig, has_picker: bool, keeps_picker: bool) -> Result<(), ConfigError> {
    cfg.validate()?;
    match (cfg.policy == PolicyKind::Custom, has_picker) {
        (true, false) if !keeps_picker => Err(ConfigError::MissingPicker),
        (false, true) => Err(ConfigError::UnexpectedPicker(cfg.policy)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClassSpec, Head};

    fn classes(names: &[&str]) -> Vec<ClassSpec> {
        names.iter().map(|n| ClassSpec::new(*n)).collect()
    }

    fn sched(names: &[&str], policy: PolicyKind) -> Scheduler<u32> {
        Scheduler::new(SchedConfig::new(classes(names), policy)).unwrap()
    }

    fn drain_ids(s: &mut Scheduler<u32>, now: Nanos) -> Vec<u32> {
        std::iter::from_fn(|| s.dispatch(now).map(|d| d.item)).collect()
    }

    /// edf never starts a request after its deadline, even when nobody called `expire` since it passed
    /// (the caller's timer runs late): the dispatch drops it first, and hands the next one out; the dropped
    /// request comes out of the next `expire` (or `dispatch_or_drop`'s list at once) as unreachable.
    #[test]
    fn edf_never_dispatches_past_a_deadline() {
        let mut s = sched(&["a"], PolicyKind::Edf);
        for (id, deadline) in [(1u32, 10), (2, 20), (3, 100)] {
            let mut m = Meta::new(0, 0);
            m.deadline = Some(deadline);
            s.enqueue(id, m, 0).unwrap();
        }
        let mut dropped = Vec::new();
        let d = s.dispatch_or_drop(15, &mut dropped).unwrap();
        assert_eq!(d.item, 2);
        let gone: Vec<(u32, RejectReason)> = dropped.iter().map(|r| (r.item, r.reason)).collect();
        assert_eq!(gone, [(1, RejectReason::DeadlineUnreachable)]);
        // through `dispatch`: kept for the next `expire`
        assert!(s.dispatch(150).is_none());
        assert!(s.is_empty());
        assert_eq!(s.next_expiry(), Some(0));
        let mut out = Vec::new();
        s.expire(150, &mut out);
        assert_eq!(out.iter().map(|r| r.item).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn fcfs_serves_in_enqueue_order_across_classes() {
        let mut s = sched(&["a", "b", "c"], PolicyKind::Fcfs);
        for i in 0..30u32 {
            s.enqueue(i, Meta::new((i % 3) as usize, u64::from(i)), u64::from(i))
                .unwrap();
        }
        assert_eq!(s.len(), 30);
        assert_eq!(s.class_len(1), 10);
        let d = s.dispatch(100).unwrap();
        assert_eq!((d.item, d.waited), (0, 100));
        assert_eq!(drain_ids(&mut s, 100), (1..30).collect::<Vec<_>>());
        assert!(s.is_empty() && s.dispatch(100).is_none());
    }

    #[test]
    fn unknown_class_goes_to_class_zero_and_deadline_is_filled() {
        let mut cs = classes(&["a", "b"]);
        cs[1].deadline = Some(50);
        let mut s: Scheduler<u32> = Scheduler::new(SchedConfig::new(cs, PolicyKind::Fcfs)).unwrap();
        s.enqueue(1, Meta::new(9, 0), 0).unwrap();
        s.enqueue(2, Meta::new(1, 10), 10).unwrap();
        assert_eq!(s.class_len(0), 1);
        assert_eq!(s.dispatch(10).unwrap().meta.class, 0);
        assert_eq!(s.dispatch(10).unwrap().meta.deadline, Some(60));
    }

    #[test]
    fn class_and_global_caps() {
        let mut cs = classes(&["a", "b"]);
        cs[0].queue_cap = Some(2);
        let mut cfg = SchedConfig::new(cs, PolicyKind::Fcfs);
        cfg.global_queue_cap = Some(3);
        let mut s: Scheduler<u32> = Scheduler::new(cfg).unwrap();
        s.enqueue(1, Meta::new(0, 0), 0).unwrap();
        s.enqueue(2, Meta::new(0, 0), 0).unwrap();
        let r = s.enqueue(3, Meta::new(0, 0), 0).unwrap_err();
        assert_eq!((r.item, r.reason), (3, RejectReason::ClassQueueFull));
        s.enqueue(4, Meta::new(1, 0), 0).unwrap();
        let r = s.enqueue(5, Meta::new(1, 0), 0).unwrap_err();
        assert_eq!((r.item, r.reason), (5, RejectReason::GlobalQueueFull));
        s.dispatch(0).unwrap();
        s.enqueue(6, Meta::new(0, 0), 0).unwrap();
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn timeouts_expire_heads_and_next_expiry_says_when() {
        let mut cs = classes(&["fast", "slow"]);
        cs[0].queue_timeout = Some(10);
        let mut cfg = SchedConfig::new(cs, PolicyKind::Fcfs);
        cfg.queue_timeout = Some(100);
        let mut s: Scheduler<u32> = Scheduler::new(cfg).unwrap();
        assert_eq!(s.next_expiry(), None);
        for t in 0..5u32 {
            s.enqueue(t, Meta::new(0, u64::from(t)), u64::from(t))
                .unwrap();
            s.enqueue(100 + t, Meta::new(1, u64::from(t)), u64::from(t))
                .unwrap();
        }
        assert_eq!(s.next_expiry(), Some(10));
        let mut out = Vec::new();
        s.expire(9, &mut out);
        assert!(out.is_empty());
        s.expire(12, &mut out);
        let ids: Vec<u32> = out.iter().map(|r| r.item).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert!(out.iter().all(|r| r.reason == RejectReason::QueueTimeout));
        assert_eq!(s.next_expiry(), Some(13));
        out.clear();
        s.expire(1000, &mut out);
        assert_eq!(out.len(), 7);
        assert!(s.is_empty());
        assert_eq!(s.next_expiry(), None);
    }

    #[test]
    fn reconfigure_keeps_every_request_and_moves_removed_classes_to_zero() {
        let mut s = sched(&["a", "b", "c"], PolicyKind::Fcfs);
        for i in 0..30u32 {
            s.enqueue(i, Meta::new((i % 3) as usize, u64::from(i)), u64::from(i))
                .unwrap();
        }
        // "b" removed, "c" moves to index 0, a new class "d".
        let cfg = SchedConfig::new(classes(&["c", "a", "d"]), PolicyKind::Priority);
        s.reconfigure(cfg, None).unwrap();
        assert_eq!(s.len(), 30);
        assert_eq!(
            (s.class_len(0), s.class_len(1), s.class_len(2)),
            (20, 10, 0)
        );
        let mut seen = Vec::new();
        while let Some(d) = s.dispatch(100) {
            let expect = if d.item % 3 == 0 { 1 } else { 0 };
            assert_eq!(d.meta.class, expect, "item {}", d.item);
            seen.push(d.item);
        }
        // Class 0 ("c" plus the old "b") keeps arrival order; all priorities equal, so FCFS overall.
        assert_eq!(seen, (0..30).collect::<Vec<_>>());
    }

    #[test]
    fn bad_reconfigure_leaves_the_scheduler_unchanged() {
        let mut s = sched(&["a"], PolicyKind::Fcfs);
        s.enqueue(1, Meta::new(0, 0), 0).unwrap();
        let bad = SchedConfig::new(vec![ClassSpec::new("a").weight(0)], PolicyKind::Stride);
        assert!(s.reconfigure(bad, None).is_err());
        let custom = SchedConfig::new(classes(&["a"]), PolicyKind::Custom);
        assert_eq!(s.reconfigure(custom, None), Err(ConfigError::MissingPicker));
        assert_eq!(s.config().policy, PolicyKind::Fcfs);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn constructor_checks_picker_pairing() {
        let cfg = SchedConfig::new(classes(&["a"]), PolicyKind::Custom);
        assert_eq!(
            Scheduler::<u32>::new(cfg).err(),
            Some(ConfigError::MissingPicker)
        );
        struct First;
        impl HeadPicker for First {
            fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
                heads.first().map(|h| h.class)
            }
        }
        let cfg = SchedConfig::new(classes(&["a"]), PolicyKind::Fcfs);
        assert_eq!(
            Scheduler::<u32>::with_picker(cfg, Box::new(First)).err(),
            Some(ConfigError::UnexpectedPicker(PolicyKind::Fcfs))
        );
    }

    #[test]
    fn drain_and_close() {
        let mut s = sched(&["a", "b"], PolicyKind::Srpt);
        for i in 0..10u32 {
            let mut m = Meta::new((i % 2) as usize, 0);
            m.size_hint = u64::from(10 - i);
            s.enqueue(i, m, 0).unwrap();
        }
        s.close();
        let r = s.enqueue(99, Meta::new(0, 0), 0).unwrap_err();
        assert_eq!(r.reason, RejectReason::Shutdown);
        let mut out = Vec::new();
        s.drain(&mut out);
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        assert!(s.is_empty() && s.dispatch(0).is_none());
    }

    #[test]
    fn cancel_takes_a_request_out_at_once_and_frees_its_cap() {
        let mut cs = classes(&["a", "b"]);
        cs[0].queue_cap = Some(3);
        let mut cfg = SchedConfig::new(cs, PolicyKind::Fcfs);
        cfg.global_queue_cap = Some(4);
        let mut s: Scheduler<u32> = Scheduler::new(cfg).unwrap();
        let t: Vec<Ticket> = (0..3)
            .map(|i| s.enqueue_ticket(i, Meta::new(0, 0), 0).unwrap())
            .collect();
        let r = s.enqueue(3, Meta::new(0, 0), 0).unwrap_err();
        assert_eq!(r.reason, RejectReason::ClassQueueFull);
        // The middle one goes away: it no longer counts, and it is never dispatched.
        assert_eq!(s.cancel(t[1]), Some(1));
        assert_eq!((s.len(), s.class_len(0)), (2, 2));
        assert!(!s.is_queued(t[1]) && s.is_queued(t[0]));
        assert_eq!(s.cancel(t[1]), None, "a second cancel finds nothing");
        s.enqueue(4, Meta::new(0, 0), 0).unwrap();
        let tb = s.enqueue_ticket(5, Meta::new(1, 0), 0).unwrap();
        let r = s.enqueue(6, Meta::new(1, 0), 0).unwrap_err();
        assert_eq!(r.reason, RejectReason::GlobalQueueFull);
        assert_eq!(s.cancel(tb), Some(5));
        s.enqueue(7, Meta::new(1, 0), 0).unwrap();
        assert_eq!(drain_ids(&mut s, 1), vec![0, 2, 4, 7]);
        // Tickets of dispatched requests are dead, even once their slots are reused.
        s.enqueue(8, Meta::new(0, 0), 0).unwrap();
        assert_eq!(s.cancel(t[0]), None);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn tickets_survive_reconfigure() {
        let mut s = sched(&["a", "b"], PolicyKind::Fcfs);
        let t: Vec<Ticket> = (0..6u32)
            .map(|i| {
                s.enqueue_ticket(i, Meta::new((i % 2) as usize, 0), 0)
                    .unwrap()
            })
            .collect();
        let cfg = SchedConfig::new(classes(&["b", "c"]), PolicyKind::Stride);
        s.reconfigure(cfg, None).unwrap();
        assert_eq!(s.cancel(t[3]), Some(3));
        assert_eq!(s.cancel(t[4]), Some(4));
        assert_eq!((s.class_len(0), s.class_len(1)), (4, 0));
        let mut out = Vec::new();
        s.drain(&mut out);
        assert_eq!(out, vec![0, 1, 2, 5]);
    }

    /// A cancelled request in a deadline-sorted edf class leaves a tombstone; when the class later turns
    /// unsorted (an earlier deadline arrives), the tombstone must not enter edf's heap. Were it there, its
    /// stale handle would surface as the earliest deadline and dispatch would fall back to FCFS (x first).
    #[test]
    fn edf_heap_never_holds_a_cancelled_request() {
        let cfg = SchedConfig::new(classes(&["c0", "c1"]), PolicyKind::Edf);
        let mut s: Scheduler<&str> = Scheduler::new(cfg).unwrap();
        let with = |class, d| {
            let mut m = Meta::new(class, 0);
            m.deadline = Some(d);
            m
        };
        s.enqueue("x", with(1, 100), 0).unwrap();
        s.enqueue("a", with(0, 10), 0).unwrap();
        let b = s.enqueue_ticket("b", with(0, 20), 0).unwrap();
        s.enqueue("c", with(0, 30), 0).unwrap();
        assert_eq!(s.cancel(b), Some("b"));
        s.enqueue("d", with(0, 5), 0).unwrap();
        let order: Vec<&str> = std::iter::from_fn(|| s.dispatch(0).map(|d| d.item)).collect();
        assert_eq!(order, vec!["d", "a", "c", "x"]);
    }

    /// Under edf the tombstones' positions are tracked: `live_before` counts only live requests, through
    /// cancels, dispatches from the middle, ring growth and compaction.
    #[test]
    fn tombstone_positions_give_exact_live_counts() {
        let mut cs = classes(&["a", "b", "c"]);
        for (i, c) in cs.iter_mut().enumerate() {
            c.deadline = Some(1_000 + 500 * i as u64);
        }
        let mut s: Scheduler<u64> = Scheduler::new(SchedConfig::new(cs, PolicyKind::Edf)).unwrap();
        let mut rng = ordo_util::SplitMix64::new(17);
        let mut tickets = Vec::new();
        let mut now = 0;
        for step in 0..20_000u64 {
            now += 1;
            match rng.below(10) {
                0..=4 => {
                    let class = rng.below(3) as usize;
                    // An occasional explicit early deadline turns a class unsorted (heap mode).
                    let mut m = Meta::new(class, now);
                    if rng.below(50) == 0 {
                        m.deadline = Some(now + rng.below(100));
                    }
                    if let Ok(t) = s.enqueue_ticket(step, m, now) {
                        tickets.push(t);
                    }
                }
                5..=7 if !tickets.is_empty() => {
                    let i = rng.below(tickets.len() as u64) as usize;
                    let t = tickets.swap_remove(i);
                    s.cancel(t);
                }
                8 => {
                    s.dispatch(now);
                }
                _ => {
                    let mut out = Vec::new();
                    s.expire(now.saturating_sub(2_000), &mut out);
                }
            }
            if step % 97 == 0 || step > 19_900 {
                check_live_counts(&s, step);
            }
        }
        // Cancel nearly everything, in random order: tombstones outnumber live requests, so the FIFOs are
        // compacted (and the rings cleared) along the way.
        let queued = s.len();
        assert!(queued > 500, "the run built a deep queue: {queued}");
        let mut compactions = 0;
        while tickets.len() > 5 {
            let i = rng.below(tickets.len() as u64) as usize;
            let before: Vec<usize> = s.queues.classes.iter().map(|q| q.dead).collect();
            s.cancel(tickets.swap_remove(i));
            // Only a compaction drops more than 32 tombstones of a class at once to none.
            compactions += s
                .queues
                .classes
                .iter()
                .zip(&before)
                .filter(|(q, b)| **b > 32 && q.dead == 0)
                .count();
            if tickets.len() % 37 == 0 {
                check_live_counts(&s, tickets.len());
            }
        }
        assert!(compactions > 0);
        check_live_counts(&s, 0);
    }

    fn check_live_counts(s: &Scheduler<u64>, step: impl std::fmt::Debug) {
        for cq in &s.queues.classes {
            let live: Vec<bool> = cq.fifo.iter().map(|e| s.slab.is_live(e.h)).collect();
            for p in [0, 1, live.len() / 3, live.len() / 2, live.len()] {
                let p = p.min(live.len());
                let expect = live[..p].iter().filter(|&&l| l).count();
                assert_eq!(cq.live_before(p), expect, "step {step:?} p {p}");
            }
        }
    }

    #[test]
    fn position_of_finds_every_seq_and_nothing_else() {
        let mut rng = ordo_util::SplitMix64::new(5);
        for n in [0usize, 1, 2, 3, 10, 1000] {
            let mut cq = ClassQueue::default();
            let mut slab = Slab::new();
            let mut seq = 0;
            let mut seqs = Vec::new();
            for _ in 0..n {
                // uneven gaps, sometimes huge
                let span = if rng.below(20) == 0 { 100_000 } else { 8 };
                seq += 1 + rng.below(span);
                seqs.push(seq);
                let e = slab.insert((), |h| QEntry {
                    h,
                    seq,
                    meta: Meta::new(0, 0),
                });
                cq.fifo.push_back(e);
            }
            for (i, s) in seqs.iter().enumerate() {
                assert_eq!(cq.position_of(*s), Some(i), "n {n}");
                if !seqs.contains(&(s + 1)) {
                    assert_eq!(cq.position_of(s + 1), None);
                }
            }
            assert_eq!(cq.position_of(0), None);
        }
    }

    #[test]
    fn removing_from_the_middle_keeps_memory_bounded() {
        // srpt serves the small requests behind a large head; tombstones must not pile up.
        let mut s = sched(&["a"], PolicyKind::Srpt);
        let mut big = Meta::new(0, 0);
        big.size_hint = 1_000_000;
        s.enqueue(0, big, 0).unwrap();
        for i in 1..10_000u32 {
            let mut m = Meta::new(0, 0);
            m.size_hint = 1;
            s.enqueue(i, m, 0).unwrap();
            assert_eq!(s.dispatch(0).unwrap().item, i);
            assert!(s.queues.classes[0].fifo.len() <= 2 * s.class_len(0) + 33);
            assert_eq!(
                s.queues.classes[0].fifo.len(),
                s.class_len(0) + s.queues.classes[0].dead
            );
        }
        assert_eq!(s.dispatch(0).unwrap().item, 0);
    }
}
