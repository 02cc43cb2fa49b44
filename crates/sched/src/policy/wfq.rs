//! Weighted fair queuing by size: start-time fair queuing (SFQ, Goyal et al. 1996) over the class heads.
//! A class is charged `size_hint / weight` for each request it is served (a size hint of 0 counts as 1),
//! so classes receive *work* (not request counts) in proportion to their weights.
//!
//! Each non-empty class has a start tag for its head. The head with the smallest start tag is served (ties:
//! smaller finish tag `start + size/weight`, then lower class index); the virtual time becomes that start
//! tag and the class's next head starts where the served one finished. A class that becomes non-empty
//! starts at `max(virtual time, where its last request finished)`: a class that was idle cannot claim past
//! service, and one that sends small requests is never starved by a class that sends large ones — its
//! start tag is the current virtual time, so it waits at most for requests already started. Expired
//! requests are not charged. Tags are fixed point (2^32 units per byte per weight) in `u128`.

use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Nanos, SchedConfig};

const UNIT: u128 = 1 << 32;

pub(crate) struct Wfq {
    weight: Vec<u128>,
    /// For a non-empty class: the start tag of its head; for an idle one: the finish tag of its last request.
    tag: Vec<u128>,
    virtual_time: u128,
}

impl Wfq {
    pub(super) fn new(cfg: &SchedConfig) -> Self {
        Wfq {
            weight: cfg
                .classes
                .iter()
                .map(|c| u128::from(c.weight.max(1)))
                .collect(),
            tag: vec![0; cfg.classes.len()],
            virtual_time: 0,
        }
    }

    fn cost(&self, c: usize, size: u64) -> u128 {
        u128::from(size.max(1)) * UNIT / self.weight[c]
    }
}

impl Policy for Wfq {
    fn on_enqueue(&mut self, q: &Queues, e: &QEntry, _live: &dyn Fn(Handle) -> bool) {
        let c = e.meta.class;
        if q.len(c) == 1 {
            self.tag[c] = self.tag[c].max(self.virtual_time);
        }
    }

    fn pick(&mut self, q: &Queues, _now: Nanos) -> Option<Choice> {
        q.heads()
            .min_by_key(|(c, e)| {
                let start = self.tag[*c];
                (
                    start,
                    start.saturating_add(self.cost(*c, e.meta.size_hint)),
                    *c,
                )
            })
            .map(|(c, _)| Choice::Head(c))
    }

    fn on_remove(&mut self, _q: &Queues, e: &QEntry, dispatched: bool) {
        if dispatched {
            let c = e.meta.class;
            self.virtual_time = self.virtual_time.max(self.tag[c]);
            self.tag[c] = self.tag[c].saturating_add(self.cost(c, e.meta.size_hint));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{ClassSpec, Meta, PolicyKind, SchedConfig, Scheduler};

    fn sized(class: usize, size: u64) -> Meta {
        let mut m = Meta::new(class, 0);
        m.size_hint = size;
        m
    }

    #[test]
    fn equal_sizes_follow_weights_and_idle_time_earns_no_credit() {
        let classes = vec![ClassSpec::new("a").weight(2), ClassSpec::new("b").weight(1)];
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Wfq)).unwrap();
        for _ in 0..30 {
            s.enqueue(0, sized(0, 10), 0).unwrap();
        }
        // b idle while a is served 20 times, then b arrives with a backlog.
        for _ in 0..20 {
            assert_eq!(s.dispatch(0).unwrap().item, 0);
        }
        for _ in 0..30 {
            s.enqueue(1, sized(1, 10), 0).unwrap();
        }
        let next: Vec<usize> = (0..9).map(|_| s.dispatch(0).unwrap().item).collect();
        let b = next.iter().filter(|&&c| c == 1).count();
        assert_eq!(
            b, 3,
            "2:1 from the moment b arrives, no catch-up burst: {next:?}"
        );
    }
}
