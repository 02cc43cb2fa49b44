//! First come, first served: the request enqueued first, whatever its class. The baseline every other
//! policy is compared with, and the fallback of the custom policy.

use super::{Choice, Policy};
use crate::Nanos;
use crate::queue::{Handle, QEntry, Queues};

/// FCFS over the class heads: each class FIFO is in enqueue order, so the oldest head is the oldest request.
pub(crate) struct Fcfs;

impl Policy for Fcfs {
    fn on_enqueue(&mut self, _q: &Queues, _e: &QEntry, _live: &dyn Fn(Handle) -> bool) {}

    fn pick(&mut self, q: &Queues, _now: Nanos) -> Option<Choice> {
        q.oldest_head().map(Choice::Head)
    }

    fn on_remove(&mut self, _q: &Queues, _e: &QEntry, _dispatched: bool) {}
}
