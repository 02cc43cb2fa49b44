//! Stride scheduling: deterministic proportional share. Each class has `stride = BIG / weight`; the class
//! with the smallest pass is served and its pass advances by its stride.
//!
//! Two refinements keep the share exact and fair:
//! - **Eligibility (as in WF²Q).** A global pass advances by `BIG / (sum of weights of backlogged classes)`
//!   per dispatch — the fluid ideal's virtual time. A class is eligible when the start of its next
//!   quantum (`pass - stride`) is not after the global pass; the eligible class with the smallest pass is
//!   served (if none is eligible, the smallest pass overall). With every class backlogged this keeps each
//!   class strictly within one dispatch of its ideal share `n * weight / total_weight` after every dispatch
//!   `n`, whatever the weights (plain smallest-pass stride can lag by up to the number of classes).
//! - **Rejoining.** A class that goes idle keeps its pass; when it has work again its start is
//!   `max(own start, global pass)`: it cannot bank credit while idle (no monopolising on return) and
//!   leaving and rejoining does not reset a pass that was ahead.
//!
//! Passes are fixed point with `BIG = 2^100` in `u128`; they are rebased when they grow large. Rounding is
//! covered by a tolerance of 2^32 units in the eligibility test, far below the smallest real gap
//! (`BIG / (weight * total_weight)`) for weights up to about a million.

use super::{Choice, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Nanos, SchedConfig};

const BIG: u128 = 1 << 100;
const TOLERANCE: u128 = 1 << 32;
const REBASE_AT: u128 = 1 << 125;

pub(crate) struct Stride {
    weight: Vec<u128>,
    stride: Vec<u128>,
    /// Start of each class's next quantum (its pass minus its stride).
    start: Vec<u128>,
    /// Virtual time of the fluid ideal.
    global: u128,
    /// Sum of weights of non-empty classes.
    active_weight: u128,
    /// Rebase all passes when the global pass reaches this.
    rebase_at: u128,
}

impl Stride {
    pub(super) fn new(cfg: &SchedConfig) -> Self {
        let weight: Vec<u128> = cfg
            .classes
            .iter()
            .map(|c| u128::from(c.weight.max(1)))
            .collect();
        Stride {
            stride: weight.iter().map(|w| BIG / w).collect(),
            start: vec![0; weight.len()],
            weight,
            global: 0,
            active_weight: 0,
            rebase_at: REBASE_AT,
        }
    }

    fn rebase(&mut self, q: &Queues) {
        let base = q
            .heads()
            .map(|(c, _)| self.start[c])
            .chain(std::iter::once(self.global))
            .min()
            .unwrap_or(self.global);
        self.global -= base;
        for s in &mut self.start {
            *s = s.saturating_sub(base);
        }
    }
}

impl Policy for Stride {
    fn on_enqueue(&mut self, q: &Queues, e: &QEntry, _live: &dyn Fn(Handle) -> bool) {
        let c = e.meta.class;
        if q.len(c) == 1 {
            self.start[c] = self.start[c].max(self.global);
            self.active_weight += self.weight[c];
        }
    }

    fn pick(&mut self, q: &Queues, _now: Nanos) -> Option<Choice> {
        let mut best_eligible: Option<(u128, usize)> = None;
        let mut best_any: Option<(u128, usize)> = None;
        for (c, _) in q.heads() {
            let pass = self.start[c] + self.stride[c];
            if best_any.is_none_or(|(p, _)| pass < p) {
                best_any = Some((pass, c));
            }
            if self.start[c] <= self.global + TOLERANCE
                && best_eligible.is_none_or(|(p, _)| pass < p)
            {
                best_eligible = Some((pass, c));
            }
        }
        best_eligible.or(best_any).map(|(_, c)| Choice::Head(c))
    }

    fn on_remove(&mut self, q: &Queues, e: &QEntry, dispatched: bool) {
        let c = e.meta.class;
        if dispatched && self.active_weight > 0 {
            self.global += BIG / self.active_weight;
            self.start[c] += self.stride[c];
        }
        if q.len(c) == 0 {
            self.active_weight -= self.weight[c];
        }
        if self.global >= self.rebase_at {
            self.rebase(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Slab;
    use crate::{ClassSpec, Meta, PolicyKind};

    /// Drives the policy directly over real queues, with every class kept backlogged.
    fn run(weights: &[u32], rebase_at: u128, dispatches: usize) -> u128 {
        let classes = weights
            .iter()
            .enumerate()
            .map(|(i, w)| ClassSpec::new(format!("c{i}")).weight(*w))
            .collect();
        let mut p = Stride::new(&SchedConfig::new(classes, PolicyKind::Stride));
        p.rebase_at = rebase_at;
        let mut q = Queues::new(weights.len());
        let mut slab = Slab::new();
        let mut seq = 0;
        let mut push = |p: &mut Stride, q: &mut Queues, c: usize| {
            seq += 1;
            let e = slab.insert((), |h| QEntry {
                h,
                seq,
                meta: Meta::new(c, 0),
            });
            q.classes[c].fifo.push_back(e);
            q.classes[c].len += 1;
            p.on_enqueue(q, &e, &|_| true);
        };
        for c in 0..weights.len() {
            push(&mut p, &mut q, c);
        }
        let total: i128 = weights.iter().map(|w| i128::from(*w)).sum();
        let mut count = vec![0i128; weights.len()];
        let mut max_global = 0;
        for n in 1..=dispatches {
            let Some(Choice::Head(c)) = p.pick(&q, 0) else {
                panic!("no choice")
            };
            let e = q.classes[c].fifo.pop_front().unwrap();
            q.classes[c].len -= 1;
            p.on_remove(&q, &e, true);
            push(&mut p, &mut q, c);
            count[c] += 1;
            max_global = max_global.max(p.global);
            for (i, w) in weights.iter().enumerate() {
                let err = count[i] * total - n as i128 * i128::from(*w);
                assert!(err.abs() < total, "class {i} after {n}: {count:?}");
            }
        }
        max_global
    }

    #[test]
    fn rebasing_keeps_the_share_bound() {
        // Rebase every few dispatches: the bound must hold across rebases and the passes stay small.
        let max_global = run(&[5, 3, 1, 1], 4 * BIG, 5_000);
        assert!(
            max_global < 5 * BIG,
            "passes were not rebased: {max_global}"
        );
        run(&[7, 1], REBASE_AT, 2_000);
    }
}
