//! Strict priority by class with optional aging, the seed's "bidders first" rule made starvation-free.
//!
//! Without aging, the head of a class with the highest `priority` among non-empty classes is served (equal
//! priorities: the earlier arrival). With aging, a head that has waited at least its class's `age_after`
//! is *aged* and competes with the top priority level: the next request is the one with the earliest
//! arrival among the heads of the top level and all aged heads. A class's head is its oldest request, so it
//! is the first of the class to age; checking heads is enough.

use super::{Choice, Policy};
use crate::queue::{QEntry, Queues};
use crate::{Nanos, SchedConfig};

pub(crate) struct Priority {
    prio: Vec<i32>,
    age_after: Vec<Option<Nanos>>,
}

impl Priority {
    pub fn new(cfg: &SchedConfig) -> Self {
        Priority {
            prio: cfg.classes.iter().map(|c| c.priority).collect(),
            age_after: cfg.classes.iter().map(|c| c.age_after).collect(),
        }
    }
}

impl Policy for Priority {
    fn on_enqueue(&mut self, _q: &Queues, _e: &QEntry) {}

    fn pick(&mut self, q: &Queues, now: Nanos) -> Option<Choice> {
        let top = q.heads().map(|(c, _)| self.prio[c]).max()?;
        q.heads()
            .filter(|(c, e)| {
                self.prio[*c] == top || self.age_after[*c].is_some_and(|a| e.waited(now) >= a)
            })
            .min_by_key(|(_, e)| (e.meta.arrival, e.seq))
            .map(|(c, _)| Choice::Head(c))
    }

    fn on_remove(&mut self, _q: &Queues, _e: &QEntry, _dispatched: bool, _now: Nanos) {}
}
