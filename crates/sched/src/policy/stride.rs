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
use crate::queue::{QEntry, Queues};
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
}

impl Stride {
    pub fn new(cfg: &SchedConfig) -> Self {
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
    fn on_enqueue(&mut self, q: &Queues, e: &QEntry) {
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

    fn on_remove(&mut self, q: &Queues, e: &QEntry, dispatched: bool, _now: Nanos) {
        let c = e.meta.class;
        if dispatched && self.active_weight > 0 {
            self.global += BIG / self.active_weight;
            self.start[c] += self.stride[c];
        }
        if q.len(c) == 0 {
            self.active_weight -= self.weight[c];
        }
        if self.global >= REBASE_AT {
            self.rebase(q);
        }
    }
}
