//! Earliest deadline first, with admission control: the queued request with the earliest absolute
//! deadline is served (requests without a deadline come after all that have one, in enqueue order).
//!
//! Admission: a request whose deadline is already past, or that by estimate cannot *start* before its
//! deadline, is rejected at once with `DeadlineUnreachable` rather than after a timeout. The estimate is
//! `now + work_ahead / capacity`, where `capacity` is the worker count given to `set_capacity` and
//! `work_ahead` sums, over classes, the class's service-time estimate (moving average of
//! `observe_service`) times the number of its queued requests whose deadline is not later. That count is
//! an interpolation search in the class FIFO, exact when each class's deadlines do not decrease in arrival order
//! (true when deadlines come from a per-class relative deadline, as in ordo serve); otherwise it is an
//! approximation. Cancelled requests leave tombstones in the FIFO; their positions are kept
//! (`ClassQueue::live_before`), so they are not counted. Work already in service is not counted. With no
//! observations the estimate is `now`.
//!
//! Queued requests whose deadline passes (`now > deadline`) are returned by `expire()`.

use std::collections::VecDeque;

use super::heap::LazyMinHeap;
use super::{Choice, Estimates, Policy};
use crate::queue::{Handle, QEntry, Queues};
use crate::{Meta, Nanos, RejectReason};

/// The index. A class whose queued deadlines are non-decreasing in queue order ("sorted", the normal case:
/// deadlines from the class's relative deadline) needs none: its head is its earliest deadline, and the
/// earliest overall is found among the heads in O(classes). Requests of a class that received a deadline
/// earlier than its last one go into a heap (with lazy deletion) until the class is empty again.
pub(crate) struct Edf {
    /// Per class: its queue is sorted by deadline, and none of its requests are in `heap`.
    sorted: Vec<bool>,
    /// Per class: deadline key of the last request enqueued.
    tail: Vec<Nanos>,
    heap: LazyMinHeap<(Nanos, u64)>,
}

fn key_deadline(meta: &Meta) -> Nanos {
    meta.deadline.unwrap_or(Nanos::MAX)
}

impl Edf {
    pub(super) fn new(classes: usize) -> Self {
        Edf {
            sorted: vec![true; classes],
            tail: vec![0; classes],
            heap: LazyMinHeap::new(),
        }
    }

    /// The earliest (deadline key, seq) among sorted classes' heads and the heap.
    fn earliest(&self, q: &Queues) -> Option<((Nanos, u64), Choice)> {
        let heads = q
            .heads()
            .filter(|(c, _)| self.sorted[*c])
            .map(|(c, e)| ((key_deadline(&e.meta), e.seq), Choice::Head(c)));
        let top = self.heap.peek().map(|(k, h)| (k, Choice::Entry(h)));
        heads.chain(top).min_by_key(|(k, _)| *k)
    }
}

/// Expected service of the queued requests that edf serves before a new request with deadline `d`
/// (those with a deadline not later than `d`). Per class: O(1) when the class's queue lies wholly before
/// or after `d`, else a search in its FIFO.
fn work_ahead(q: &Queues, d: Nanos, est: &Estimates) -> u128 {
    let mut work: u128 = 0;
    for (c, cq) in q.classes.iter().enumerate() {
        let service = est.service(c);
        let (Some(head), Some(tail)) = (cq.head(), cq.fifo.back()) else {
            continue;
        };
        if service == 0 || key_deadline(&head.meta) > d {
            continue;
        }
        // The tail may be a tombstone; its deadline still bounds the live ones (FIFO order).
        let ahead = if key_deadline(&tail.meta) <= d {
            cq.len
        } else {
            cq.live_before(count_not_after(&cq.fifo, d))
        };
        work += u128::from(service) * ahead as u128;
    }
    work
}

/// The number of leading entries of `fifo` with deadline `<= d`, given that the first entry's deadline is
/// `<= d` and the last one's is `> d` (so `fifo` has at least two entries). Deadlines in a class FIFO grow
/// roughly linearly with position, so a few interpolation probes find the spot in far fewer cache misses
/// than a binary search; after four probes it continues as a binary search, so the worst case stays
/// O(log n). Equal to `partition_point` when the FIFO is sorted by deadline.
fn count_not_after(fifo: &VecDeque<QEntry>, d: Nanos) -> usize {
    let key = |i: usize| key_deadline(&fifo[i].meta);
    let n = fifo.len();
    // Invariant: entries before `lo` are <= d (`klo` is entry lo-1), entries from `hi` on are > d
    // (`khi` is entry hi).
    let (mut lo, mut hi) = (1, n - 1);
    let (mut klo, mut khi) = (key(0), key(n - 1));
    let mut probes = 0;
    while lo < hi {
        let pos = if probes < 4 && khi > klo {
            let span = (hi - lo + 1) as u128;
            let guess = u128::from(d - klo) * span / u128::from(khi - klo);
            (lo - 1 + guess as usize).clamp(lo, hi - 1)
        } else {
            lo + (hi - lo) / 2
        };
        probes += 1;
        let k = key(pos);
        if k <= d {
            lo = pos + 1;
            klo = k;
        } else {
            hi = pos;
            khi = k;
        }
    }
    lo
}

fn after(now: Nanos, work: u128, est: &Estimates) -> Nanos {
    let wait = work / est.capacity.max(1) as u128;
    now.saturating_add(Nanos::try_from(wait).unwrap_or(Nanos::MAX))
}

/// The estimated time at which a request with deadline `d` enqueued at `now` would start.
pub(crate) fn estimated_start(q: &Queues, d: Nanos, now: Nanos, est: &Estimates) -> Nanos {
    after(now, work_ahead(q, d, est), est)
}

/// Whether a request with deadline `d` can start in time. Fast path: if even all queued work ahead of it
/// would let it start in time, no search is needed.
fn reachable(q: &Queues, d: Nanos, now: Nanos, est: &Estimates) -> bool {
    if now > d {
        return false;
    }
    let all: u128 = q
        .classes
        .iter()
        .enumerate()
        .map(|(c, cq)| u128::from(est.service(c)) * cq.len as u128)
        .sum();
    after(now, all, est) <= d || estimated_start(q, d, now, est) <= d
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
            Some(d) if !reachable(q, d, now, est) => Err(RejectReason::DeadlineUnreachable),
            _ => Ok(()),
        }
    }

    fn on_enqueue(&mut self, q: &Queues, e: &QEntry, live: &dyn Fn(Handle) -> bool) {
        let c = e.meta.class;
        let key = key_deadline(&e.meta);
        let cq = &q.classes[c];
        if cq.len == 1 {
            // The class was empty: none of its requests are in the heap.
            self.sorted[c] = true;
        } else if self.sorted[c] && key < self.tail[c] {
            // Out of order: from now on this class's requests live in the heap. The FIFO may hold
            // tombstones of cancelled requests; they must not enter the heap.
            self.sorted[c] = false;
            for x in cq.fifo.iter().filter(|x| cq.dead == 0 || live(x.h)) {
                self.heap.push((key_deadline(&x.meta), x.seq), x.h);
            }
        } else if !self.sorted[c] {
            self.heap.push((key, e.seq), e.h);
        }
        self.tail[c] = key;
    }

    fn pick(&mut self, q: &Queues, _now: Nanos) -> Option<Choice> {
        self.earliest(q).map(|(_, choice)| choice)
    }

    fn counts_ranges(&self) -> bool {
        true
    }

    fn drops_late(&self) -> bool {
        true
    }

    fn on_remove(&mut self, _q: &Queues, e: &QEntry, _dispatched: bool) {
        if !self.sorted[e.meta.class] {
            self.heap.remove(e.h);
        }
    }

    fn pop_expired(&mut self, q: &Queues, now: Nanos) -> Option<Handle> {
        let ((d, _), choice) = self.earliest(q)?;
        if d == Nanos::MAX || now <= d {
            return None;
        }
        match choice {
            Choice::Head(c) => q.head(c).map(|e| e.h),
            Choice::Entry(h) => Some(h),
        }
    }

    fn next_expiry(&self, q: &Queues) -> Option<Nanos> {
        let ((d, _), _) = self.earliest(q)?;
        (d != Nanos::MAX).then(|| d.saturating_add(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Slab;
    use ordo_util::SplitMix64;

    fn fifo(deadlines: &[Nanos]) -> VecDeque<QEntry> {
        let mut slab = Slab::new();
        deadlines
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut meta = Meta::new(0, 0);
                meta.deadline = Some(*d);
                slab.insert((), |h| QEntry {
                    h,
                    seq: i as u64,
                    meta,
                })
            })
            .collect()
    }

    #[test]
    fn interpolation_count_matches_partition_point() {
        let mut rng = SplitMix64::new(3);
        for case in 0..300 {
            let n = 2 + rng.below(300) as usize;
            let range = if case % 2 == 0 { 50 } else { 1 << 40 };
            let mut v: Vec<Nanos> = (0..n).map(|_| rng.below(range)).collect();
            v.sort_unstable();
            if case % 3 == 0 {
                // skewed: one huge outlier at the end
                v[n - 1] = 1 << 50;
            }
            let f = fifo(&v);
            for _ in 0..20 {
                let d = v[0] + rng.below(v[n - 1] - v[0] + 1);
                if d >= v[n - 1] {
                    continue;
                }
                let expect = f.partition_point(|e| key_deadline(&e.meta) <= d);
                assert_eq!(count_not_after(&f, d), expect, "{v:?} d={d}");
            }
        }
    }
}
