//! Lottery scheduling, the seed's probabilistic rule: each non-empty class holds `weight` tickets and the
//! next class is drawn at random in proportion to its tickets. The random numbers come from a hand-written
//! SplitMix64 generator seeded by `SchedConfig::seed`, so a run is reproducible.

use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Nanos, SchedConfig};
use ordo_util::SplitMix64;

pub(crate) struct Lottery {
    weight: Vec<u64>,
    rng: SplitMix64,
}

impl Lottery {
    pub(super) fn new(cfg: &SchedConfig) -> Self {
        Lottery {
            weight: cfg.classes.iter().map(|c| u64::from(c.weight)).collect(),
            rng: SplitMix64::new(cfg.seed),
        }
    }
}

impl Policy for Lottery {
    fn on_enqueue(&mut self, _q: &Queues, _e: &QEntry, _live: &dyn Fn(Handle) -> bool) {}

    fn pick(&mut self, q: &Queues, _now: Nanos) -> Option<Choice> {
        let total: u64 = q.heads().map(|(c, _)| self.weight[c]).sum();
        if total == 0 {
            return None;
        }
        let mut ticket = self.rng.below(total);
        let mut last = None;
        for (c, _) in q.heads() {
            last = Some(c);
            if ticket < self.weight[c] {
                return Some(Choice::Head(c));
            }
            ticket -= self.weight[c];
        }
        last.map(Choice::Head)
    }

    fn on_remove(&mut self, _q: &Queues, _e: &QEntry, _dispatched: bool) {}
}

#[cfg(test)]
mod tests {
    use crate::{ClassSpec, Meta, PolicyKind, SchedConfig, Scheduler};

    #[test]
    fn only_non_empty_classes_win() {
        let classes = vec![
            ClassSpec::new("a").weight(1000),
            ClassSpec::new("b").weight(1),
        ];
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Lottery)).unwrap();
        for i in 0..100 {
            s.enqueue(i, Meta::new(1, 0), 0).unwrap();
        }
        for i in 0..100 {
            assert_eq!(s.dispatch(0).unwrap().item, i);
        }
        assert!(s.dispatch(0).is_none());
    }
}
