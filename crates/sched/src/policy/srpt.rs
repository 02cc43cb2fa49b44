//! Shortest remaining processing time (by size hint): the queued request with the smallest `size_hint`
//! is served, across all queued requests of all classes (not only class heads); ties go to the earlier
//! enqueue. An index ordered by (size, enqueue order) makes this O(log n) (a heap with lazy deletion, policy/heap.rs).
//!
//! Aging keeps large requests from starving: a request that has waited at least its class's `age_after` is
//! *aged*, and aged requests are served before any other, in the order in which they aged
//! (`arrival + age_after`). So a request never waits longer than `age_after` plus the service of the
//! requests that aged before it. A class's oldest request is its FIFO head, so only heads need checking.

use super::heap::LazyMinHeap;
use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Nanos, SchedConfig};

pub(crate) struct Srpt {
    age_after: Vec<Option<Nanos>>,
    by_size: LazyMinHeap<(u64, u64)>,
}

impl Srpt {
    pub(super) fn new(cfg: &SchedConfig) -> Self {
        Srpt {
            age_after: cfg.classes.iter().map(|c| c.age_after).collect(),
            by_size: LazyMinHeap::new(),
        }
    }
}

impl Policy for Srpt {
    fn on_enqueue(&mut self, _q: &Queues, e: &QEntry, _live: &dyn Fn(Handle) -> bool) {
        self.by_size.push((e.meta.size_hint, e.seq), e.h);
    }

    fn pick(&mut self, q: &Queues, now: Nanos) -> Option<Choice> {
        let aged = q
            .heads()
            .filter_map(|(c, e)| {
                let a = self.age_after[c]?;
                (e.waited(now) >= a).then(|| (e.meta.arrival.saturating_add(a), e.seq, c))
            })
            .min();
        if let Some((_, _, c)) = aged {
            return Some(Choice::Head(c));
        }
        self.by_size.peek().map(|(_, h)| Choice::Entry(h))
    }

    fn on_remove(&mut self, _q: &Queues, e: &QEntry, _dispatched: bool) {
        self.by_size.remove(e.h);
    }
}

#[cfg(test)]
mod tests {
    use crate::{ClassSpec, Meta, PolicyKind, SchedConfig, Scheduler};

    fn req(class: usize, arrival: u64, size: u64) -> Meta {
        let mut m = Meta::new(class, arrival);
        m.size_hint = size;
        m
    }

    #[test]
    fn aged_requests_go_first_in_the_order_they_aged() {
        let mut patient = ClassSpec::new("patient");
        patient.age_after = Some(100);
        let mut hasty = ClassSpec::new("hasty");
        hasty.age_after = Some(10);
        let classes = vec![ClassSpec::new("never"), patient, hasty];
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Srpt)).unwrap();
        s.enqueue("patient", req(1, 0, 500), 0).unwrap(); // ages at 100
        s.enqueue("hasty", req(2, 50, 900), 50).unwrap(); // ages at 60
        s.enqueue("tiny", req(0, 55, 1), 55).unwrap(); // never ages
        assert_eq!(s.dispatch(55).unwrap().item, "tiny");
        s.enqueue("tiny2", req(0, 56, 1), 56).unwrap();
        assert_eq!(s.dispatch(150).unwrap().item, "hasty");
        assert_eq!(s.dispatch(150).unwrap().item, "patient");
        assert_eq!(s.dispatch(150).unwrap().item, "tiny2");
    }
}
