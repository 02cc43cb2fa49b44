//! Changes to a running gate: a reload's new scheduler configuration and lanes (queues and learned limits
//! kept where the lane stays), a lane's share when its backends lose capacity, and fleet mode's per-class
//! counting and leases.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ordo_sched::{HeadPicker, PolicyKind, SchedConfig};

use super::lane::{Lane, Lease, LimitState};
use super::{FULL_SHARE, Gate, GateConfigError, PoolPlan, check, class_names, new_sched};

impl Gate {
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
    /// [`scaled_limit`](super::scaled_limit)): its backends lost that much of their capacity (upstreams
    /// ejected or down). The requests over the new limit wait in the lane's queue, where the class policy
    /// orders them and the queue caps and timeouts shed them; none in flight is stopped. A raised share
    /// dispatches what waits at once. Returns whether anything changed (an unchanged share takes no lock).
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
}

#[cfg(test)]
mod tests {
    use super::super::tests::{gate, meta, poll_once, until};
    use super::*;
    use crate::gate::SHARED_LANE;
    use ordo_sched::ClassSpec;
    use std::sync::atomic::AtomicUsize;

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
}
