//! ordo-sched: the request-scheduling core — classes, per-class queues and dispatch policies, with no I/O and
//! no clock of its own, so every property can be tested deterministically.
//!
//! The caller (ordo serve's gate) enqueues each classified request with its [`Meta`], asks for the next
//! request whenever a worker is free ([`Scheduler::dispatch`]), and calls [`Scheduler::expire`] at
//! [`Scheduler::next_expiry`] to answer requests that timed out. A request whose client went away is taken
//! out with [`Scheduler::cancel`] and the [`Ticket`] that [`Scheduler::enqueue_ticket`] returned. Capacity
//! (the number of workers) is enforced by the caller; the core only orders requests. The policies are described in docs/policies.md.
//!
//! Two pieces of overload control live here too, as pure state machines: per-class CoDel drops and adaptive
//! LIFO ([`CodelSpec`], applied by [`Scheduler::dispatch_or_drop`] after the policy chose the class), and
//! adaptive concurrency limits ([`limit::Limiter`]) that tell the caller how many workers a backend should
//! get (docs/overload.md).

mod config;
pub mod limit;
mod overload;
mod policy;
mod queue;
mod scheduler;

pub use config::{ClassId, ClassSpec, ConfigError, Nanos, PolicyKind, SchedConfig, UnknownPolicy};
pub use overload::CodelSpec;
pub use policy::{Head, HeadPicker};
pub use scheduler::{Scheduler, Ticket};

use std::fmt;

/// What the core knows about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The request's class (an out-of-range class is treated as class 0).
    pub class: ClassId,
    /// Expected cost (bytes or µs); srpt orders by it, wfq charges it.
    pub size_hint: u64,
    /// Absolute deadline; if `None` and the class has a relative `deadline`, enqueue sets `arrival + deadline`.
    pub deadline: Option<Nanos>,
    /// When the request arrived; queue wait and timeouts are measured from it.
    pub arrival: Nanos,
}

impl Meta {
    /// A request of `class` arriving at `arrival`, size hint 0, no deadline.
    pub fn new(class: ClassId, arrival: Nanos) -> Self {
        Meta {
            class,
            size_hint: 0,
            deadline: None,
            arrival,
        }
    }
}

/// Why a request was not (or is no longer) queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The class queue is at its `queue_cap`.
    ClassQueueFull,
    /// All queues together are at `global_queue_cap`.
    GlobalQueueFull,
    /// edf: the deadline has passed or cannot be met.
    DeadlineUnreachable,
    /// The request waited longer than its queue timeout.
    QueueTimeout,
    /// The scheduler is closed (shutting down).
    Shutdown,
    /// The class's queue stood above its CoDel target for an interval: its oldest request was dropped.
    StandingQueue,
}

impl RejectReason {
    /// Every reason, in a stable order (for metrics).
    pub const ALL: [RejectReason; 6] = [
        RejectReason::ClassQueueFull,
        RejectReason::GlobalQueueFull,
        RejectReason::DeadlineUnreachable,
        RejectReason::QueueTimeout,
        RejectReason::Shutdown,
        RejectReason::StandingQueue,
    ];

    /// A snake_case label, e.g. for a metrics label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::ClassQueueFull => "class_queue_full",
            RejectReason::GlobalQueueFull => "global_queue_full",
            RejectReason::DeadlineUnreachable => "deadline_unreachable",
            RejectReason::QueueTimeout => "queue_timeout",
            RejectReason::Shutdown => "shutdown",
            RejectReason::StandingQueue => "standing_queue",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request the core refused or removed, handed back to the caller to answer.
#[derive(Debug)]
pub struct Rejected<T> {
    /// The caller's item.
    pub item: T,
    /// Its metadata (with the class as the core used it).
    pub meta: Meta,
    /// Why.
    pub reason: RejectReason,
}

/// The request chosen to be served next.
#[derive(Debug)]
pub struct Dispatched<T> {
    /// The caller's item.
    pub item: T,
    /// Its metadata.
    pub meta: Meta,
    /// Time spent queued: `now - meta.arrival` at dispatch.
    pub waited: Nanos,
}
