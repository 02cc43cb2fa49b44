//! The policy seam: every dispatch policy implements the small [`Policy`] trait, one implementation per file,
//! and the scheduler talks only to the trait. Policies see the class queues (heads, lengths) and keep any
//! extra index they need (srpt by size, edf by deadline) in sync through the enqueue/remove callbacks.

mod custom;
mod edf;
mod fcfs;
mod heap;
mod lottery;
mod priority;
mod srpt;
mod stride;
mod wfq;

pub use custom::{Head, HeadPicker};
pub(crate) use edf::estimated_start;

use crate::queue::{Handle, QEntry, Queues};
use crate::{ClassId, Meta, Nanos, PolicyKind, RejectReason, SchedConfig};

/// What a policy chose to serve next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The head (oldest request) of this class.
    Head(ClassId),
    /// A specific request (srpt and edf serve from anywhere in a queue).
    Entry(Handle),
}

/// Service-time estimates fed by `observe_service` / `set_capacity`, used by edf admission.
#[derive(Clone, Debug)]
pub(crate) struct Estimates {
    /// Per-class moving average of observed service times.
    pub per_class: Vec<Option<Nanos>>,
    /// Moving average over all classes (used for classes not yet observed).
    pub global: Option<Nanos>,
    /// Workers serving in parallel (at least 1).
    pub capacity: usize,
}

impl Estimates {
    pub(crate) fn new(classes: usize) -> Self {
        Estimates {
            per_class: vec![None; classes],
            global: None,
            capacity: 1,
        }
    }

    /// Expected service time of a request of `class` (0 when nothing has been observed yet).
    pub(crate) fn service(&self, class: ClassId) -> Nanos {
        self.per_class
            .get(class)
            .copied()
            .flatten()
            .or(self.global)
            .unwrap_or(0)
    }

    /// Exponentially weighted moving average with weight 1/8 for the new sample.
    pub(crate) fn observe(&mut self, class: ClassId, service: Nanos) {
        fn ewma(old: Option<Nanos>, new: Nanos) -> Option<Nanos> {
            Some(match old {
                None => new,
                Some(o) => ((u128::from(o) * 7 + u128::from(new)) / 8) as Nanos,
            })
        }
        if let Some(slot) = self.per_class.get_mut(class) {
            *slot = ewma(*slot, service);
        }
        self.global = ewma(self.global, service);
    }
}

/// A dispatch policy. All callbacks are O(log n) or O(classes).
pub(crate) trait Policy: Send {
    /// Admission check before a request is queued (edf refuses unreachable deadlines).
    fn admit(
        &self,
        _q: &Queues,
        _meta: &Meta,
        _now: Nanos,
        _est: &Estimates,
    ) -> Result<(), RejectReason> {
        Ok(())
    }
    /// `e` was appended to its class queue (`q` already contains it). `live` tells whether a handle still
    /// names a queued request (FIFOs may hold tombstones of requests removed from the middle).
    fn on_enqueue(&mut self, q: &Queues, e: &QEntry, live: &dyn Fn(Handle) -> bool);
    /// Choose what to serve next; called only when at least one request is queued.
    fn pick(&mut self, q: &Queues, now: Nanos) -> Option<Choice>;
    /// `e` left its queue (`q` no longer contains it): `dispatched`, or else expired or cancelled (a policy
    /// must treat those as never served: no virtual-time or share charge).
    fn on_remove(&mut self, q: &Queues, e: &QEntry, dispatched: bool);
    /// A queued request whose own deadline has passed at `now` (the scheduler then removes it).
    fn pop_expired(&mut self, _q: &Queues, _now: Nanos) -> Option<Handle> {
        None
    }
    /// Whether a request whose own deadline has passed must never be served (edf: `pop_expired` removes
    /// them when they fall due, and the scheduler refuses to start one that a late `expire` left queued).
    fn drops_late(&self) -> bool {
        false
    }
    /// The earliest time at which `pop_expired` will have work.
    fn next_expiry(&self, _q: &Queues) -> Option<Nanos> {
        None
    }
    /// Whether the policy counts live requests in ranges of a class FIFO (`ClassQueue::live_before`), so
    /// the scheduler must keep the positions of tombstones.
    fn counts_ranges(&self) -> bool {
        false
    }
    /// Give back the external picker, if this policy has one (so `reconfigure` can keep it).
    fn take_picker(self: Box<Self>) -> Option<Box<dyn HeadPicker>> {
        None
    }
}

/// A stateless stand-in while a policy is being replaced.
pub(crate) fn placeholder() -> Box<dyn Policy> {
    Box::new(fcfs::Fcfs)
}

/// Build the policy for `cfg` (the picker is used only for [`PolicyKind::Custom`]).
pub(crate) fn build(cfg: &SchedConfig, picker: Option<Box<dyn HeadPicker>>) -> Box<dyn Policy> {
    match cfg.policy {
        PolicyKind::Fcfs => Box::new(fcfs::Fcfs),
        PolicyKind::Priority => Box::new(priority::Priority::new(cfg)),
        PolicyKind::Lottery => Box::new(lottery::Lottery::new(cfg)),
        PolicyKind::Stride => Box::new(stride::Stride::new(cfg)),
        PolicyKind::Wfq => Box::new(wfq::Wfq::new(cfg)),
        PolicyKind::Srpt => Box::new(srpt::Srpt::new(cfg)),
        PolicyKind::Edf => Box::new(edf::Edf::new(cfg.classes.len())),
        PolicyKind::Custom => match picker {
            Some(p) => Box::new(custom::Custom::new(cfg, p)),
            None => Box::new(fcfs::Fcfs),
        },
    }
}
