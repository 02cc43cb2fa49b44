//! Strict priority by class with optional aging, the seed's "bidders first" rule made starvation-free.
//!
//! Without aging, the head of a class with the highest `priority` among non-empty classes is served (equal
//! priorities: the earlier arrival). With aging, a head that has waited at least its class's `age_after`
//! is *aged* and competes with the top priority level: the next request is the one with the earliest
//! arrival among the heads of the top level and all aged heads. A class's head is its oldest request, so it
//! is the first of the class to age; checking heads is enough.

use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Nanos, SchedConfig};

pub(crate) struct Priority {
    prio: Vec<i32>,
    age_after: Vec<Option<Nanos>>,
}

impl Priority {
    pub(super) fn new(cfg: &SchedConfig) -> Self {
        Priority {
            prio: cfg.classes.iter().map(|c| c.priority).collect(),
            age_after: cfg.classes.iter().map(|c| c.age_after).collect(),
        }
    }
}

impl Policy for Priority {
    fn on_enqueue(&mut self, _q: &Queues, _e: &QEntry, _live: &dyn Fn(Handle) -> bool) {}

    fn pick(&mut self, q: &Queues, now: Nanos) -> Option<Choice> {
        let top = q.heads().map(|(c, _)| self.prio[c]).max()?;
        q.heads()
            .filter(|(c, e)| {
                self.prio[*c] == top || self.age_after[*c].is_some_and(|a| e.waited(now) >= a)
            })
            .min_by_key(|(_, e)| (e.meta.arrival, e.seq))
            .map(|(c, _)| Choice::Head(c))
    }

    fn on_remove(&mut self, _q: &Queues, _e: &QEntry, _dispatched: bool) {}
}

#[cfg(test)]
mod tests {
    use crate::{ClassSpec, Meta, PolicyKind, SchedConfig, Scheduler};

    #[test]
    fn equal_priorities_go_by_arrival_and_aged_heads_compete_by_arrival() {
        let mut low = ClassSpec::new("low").priority(1);
        low.age_after = Some(50);
        let classes = vec![
            ClassSpec::new("a").priority(5),
            ClassSpec::new("b").priority(5),
            low,
        ];
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Priority)).unwrap();
        s.enqueue("low@0", Meta::new(2, 0), 0).unwrap();
        s.enqueue("b@10", Meta::new(1, 10), 10).unwrap();
        s.enqueue("a@20", Meta::new(0, 20), 20).unwrap();
        s.enqueue("a@30", Meta::new(0, 30), 30).unwrap();
        // Not aged yet: top level by arrival.
        assert_eq!(s.dispatch(40).unwrap().item, "b@10");
        // Aged at 50 and older than every top-level head.
        assert_eq!(s.dispatch(50).unwrap().item, "low@0");
        assert_eq!(s.dispatch(50).unwrap().item, "a@20");
        // An aged request younger than the top level's head waits for it.
        s.enqueue("low@35", Meta::new(2, 35), 35).unwrap();
        assert_eq!(s.dispatch(100).unwrap().item, "a@30");
        assert_eq!(s.dispatch(100).unwrap().item, "low@35");
    }
}
