//! Earliest deadline first, with admission control: the queued request with the earliest absolute
//! deadline is served (requests without a deadline come after all that have one, in enqueue order).
//!
//! Admission: a request whose deadline is already past, or that by estimate cannot *start* before its
//! deadline, is rejected at once with `DeadlineUnreachable` rather than after a timeout. The estimate is
//! `now + work_ahead / capacity`, where `capacity` is the worker count given to `set_capacity` and
//! `work_ahead` sums, over classes, the class's service-time estimate (moving average of
//! `observe_service`) times the number of its queued requests whose deadline is not later. That count is
//! a binary search in the class FIFO, exact when each class's deadlines do not decrease in arrival order
//! (true when deadlines come from a per-class relative deadline, as in ordo serve); otherwise it is an
//! approximation. Work already in service is not counted. With no observations the estimate is `now`.
//!
//! Queued requests whose deadline passes (`now > deadline`) are returned by `expire()`.

use std::collections::BTreeMap;

use super::{Choice, Estimates, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Meta, Nanos, RejectReason};

pub(crate) struct Edf {
    by_deadline: BTreeMap<(Nanos, u64), Handle>,
}

fn key_deadline(meta: &Meta) -> Nanos {
    meta.deadline.unwrap_or(Nanos::MAX)
}

impl Edf {
    pub fn new() -> Self {
        Edf {
            by_deadline: BTreeMap::new(),
        }
    }
}

/// The estimated time at which a request with deadline `d` enqueued at `now` would start.
pub(crate) fn estimated_start(q: &Queues, d: Nanos, now: Nanos, est: &Estimates) -> Nanos {
    let mut work: u128 = 0;
    for (c, cq) in q.classes.iter().enumerate() {
        let service = est.service(c);
        if service == 0 || cq.len == 0 {
            continue;
        }
        let ahead = cq
            .fifo
            .partition_point(|e| key_deadline(&e.meta) <= d)
            .min(cq.len);
        work += u128::from(service) * ahead as u128;
    }
    let wait = work / est.capacity.max(1) as u128;
    now.saturating_add(Nanos::try_from(wait).unwrap_or(Nanos::MAX))
}

impl Policy for Edf {
    fn admit(
        &self,
        q: &Queues,
        meta: &Meta,
        now: Nanos,
        est: &Estimates,
    ) -> Result<(), RejectReason> {
        match meta.deadline {
            Some(d) if now > d || estimated_start(q, d, now, est) > d => {
                Err(RejectReason::DeadlineUnreachable)
            }
            _ => Ok(()),
        }
    }

    fn on_enqueue(&mut self, _q: &Queues, e: &QEntry) {
        self.by_deadline.insert((key_deadline(&e.meta), e.seq), e.h);
    }

    fn pick(&mut self, _q: &Queues, _now: Nanos) -> Option<Choice> {
        self.by_deadline
            .first_key_value()
            .map(|(_, h)| Choice::Entry(*h))
    }

    fn on_remove(&mut self, _q: &Queues, e: &QEntry, _dispatched: bool, _now: Nanos) {
        self.by_deadline.remove(&(key_deadline(&e.meta), e.seq));
    }

    fn pop_expired(&mut self, now: Nanos) -> Option<Handle> {
        let (&(d, _), _) = self.by_deadline.first_key_value()?;
        if d != Nanos::MAX && now > d {
            self.by_deadline.pop_first().map(|(_, h)| h)
        } else {
            None
        }
    }

    fn next_expiry(&self) -> Option<Nanos> {
        let (&(d, _), _) = self.by_deadline.first_key_value()?;
        (d != Nanos::MAX).then(|| d.saturating_add(1))
    }
}
