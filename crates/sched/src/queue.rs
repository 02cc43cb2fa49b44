//! Request storage: a slab that owns the queued items (so a request can leave from the middle of its class
//! queue in O(1), as srpt and edf need) and one FIFO of handles per class, in enqueue order.
//!
//! A request removed from the middle of its class FIFO leaves a tombstone there; the scheduler pops
//! tombstones off the front after every removal (so a non-empty FIFO always starts with a live request) and
//! compacts a FIFO that holds more tombstones than live requests, so memory stays proportional to the
//! number of queued requests and the amortised cost per request stays O(1).
//!
//! Where a policy needs to count the live requests in a stretch of a FIFO (edf's admission estimate), the
//! positions of the tombstones are also kept in a Fenwick tree over a ring of FIFO positions
//! ([`Tombs`]), so that count is exact in O(log n) whatever was cancelled or removed from the middle.

use std::collections::VecDeque;

use crate::{ClassId, Meta, Nanos};

/// Names one stored request; stale handles (of requests already removed) never match a live one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Handle {
    idx: u32,
    generation: u32,
}

impl Handle {
    /// The slot index (dense: below the largest number of requests queued at once).
    pub(crate) fn index(self) -> usize {
        self.idx as usize
    }

    /// The slot's generation when this handle was issued.
    pub(crate) fn generation(self) -> u32 {
        self.generation
    }
}

/// What a class FIFO holds for each request: enough for every policy to decide without the item.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QEntry {
    pub h: Handle,
    /// Global enqueue order (unique, increasing).
    pub seq: u64,
    pub meta: Meta,
}

impl QEntry {
    /// How long this request has waited at `now`.
    pub(crate) fn waited(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.meta.arrival)
    }
}

struct Stored<T> {
    item: T,
    entry: QEntry,
}

struct Slot<T> {
    /// Bumped on every removal. Handles carry its low 32 bits (enough to tell stale index entries apart);
    /// tickets carry all 64, so a ticket never matches a later request that reuses the slot. (A `u64`
    /// costs nothing: the slot is 8-byte aligned either way.)
    generation: u64,
    val: Option<Stored<T>>,
}

/// Owner of the queued items.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Store a request; `make` receives the handle it will have.
    pub(crate) fn insert(&mut self, item: T, make: impl FnOnce(Handle) -> QEntry) -> QEntry {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).expect("more than 2^32 queued requests");
                self.slots.push(Slot {
                    generation: 0,
                    val: None,
                });
                i
            }
        };
        let slot = &mut self.slots[idx as usize];
        let entry = make(Handle {
            idx,
            generation: slot.generation as u32,
        });
        slot.val = Some(Stored { item, entry });
        entry
    }

    /// The full generation of `h`'s slot (for a ticket).
    pub(crate) fn full_generation(&self, h: Handle) -> u64 {
        self.slots.get(h.idx as usize).map_or(0, |s| s.generation)
    }

    /// Whether `h`'s slot holds a request and has the full generation `generation`.
    pub(crate) fn matches(&self, h: Handle, generation: u64) -> bool {
        self.slots
            .get(h.idx as usize)
            .is_some_and(|s| s.generation == generation && s.val.is_some())
    }

    pub(crate) fn is_live(&self, h: Handle) -> bool {
        self.get(h).is_some()
    }

    pub(crate) fn get(&self, h: Handle) -> Option<&QEntry> {
        let slot = self.slots.get(h.idx as usize)?;
        if slot.generation as u32 != h.generation {
            return None;
        }
        slot.val.as_ref().map(|s| &s.entry)
    }

    pub(crate) fn get_mut(&mut self, h: Handle) -> Option<&mut QEntry> {
        let slot = self.slots.get_mut(h.idx as usize)?;
        if slot.generation as u32 != h.generation {
            return None;
        }
        slot.val.as_mut().map(|s| &mut s.entry)
    }

    pub(crate) fn remove(&mut self, h: Handle) -> Option<(T, QEntry)> {
        let slot = self.slots.get_mut(h.idx as usize)?;
        if slot.generation as u32 != h.generation {
            return None;
        }
        let s = slot.val.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(h.idx);
        Some((s.item, s.entry))
    }

    /// Remove everything, in slot order.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (T, QEntry)> + '_ {
        self.free.clear();
        self.slots
            .drain(..)
            .filter_map(|s| s.val.map(|v| (v.item, v.entry)))
    }
}

/// One class's FIFO. Invariants (kept by the scheduler): when `len > 0`, the front entry is live; `fifo` is
/// in increasing `seq` order.
#[derive(Default)]
pub(crate) struct ClassQueue {
    pub fifo: VecDeque<QEntry>,
    /// Live requests in `fifo`.
    pub len: usize,
    /// Tombstones in `fifo` (requests removed from the middle); while 0, no liveness checks are needed.
    pub dead: usize,
    /// Where the tombstones are (kept only when the policy asks for it, see `Policy::counts_ranges`).
    pub tombs: Tombs,
}

impl ClassQueue {
    /// The oldest live request of the class.
    pub(crate) fn head(&self) -> Option<&QEntry> {
        if self.len == 0 {
            None
        } else {
            self.fifo.front()
        }
    }

    /// The FIFO position of the entry with sequence number `seq`. Sequence numbers grow along the FIFO at a
    /// roughly even pace (classes interleave at random), so a few interpolation probes land next to it in
    /// far fewer cache misses than a binary search; after four probes it continues as a binary search, so
    /// the worst case stays O(log n).
    pub(crate) fn position_of(&self, seq: u64) -> Option<usize> {
        let fifo = &self.fifo;
        let (mut lo, mut hi) = (0, fifo.len());
        let mut probes = 0;
        while lo < hi {
            let (klo, khi) = (fifo[lo].seq, fifo[hi - 1].seq);
            if seq < klo || seq > khi {
                return None;
            }
            let pos = if probes < 4 && khi > klo {
                let guess = u128::from(seq - klo) * (hi - 1 - lo) as u128 / u128::from(khi - klo);
                lo + guess as usize
            } else {
                lo + (hi - lo) / 2
            };
            probes += 1;
            match fifo[pos].seq.cmp(&seq) {
                std::cmp::Ordering::Equal => return Some(pos),
                std::cmp::Ordering::Less => lo = pos + 1,
                std::cmp::Ordering::Greater => hi = pos,
            }
        }
        None
    }

    /// Live requests among the first `p` FIFO positions (exact when tombstone positions are tracked;
    /// otherwise tombstones count as live, an over-estimate by at most `dead`).
    pub(crate) fn live_before(&self, p: usize) -> usize {
        if self.dead == 0 {
            return p.min(self.len);
        }
        p.saturating_sub(self.tombs.count_before(p)).min(self.len)
    }
}

/// A Fenwick tree of tombstone counts over a ring of `cap` FIFO positions (`cap` a power of two, at least
/// the FIFO's length whenever a tombstone is marked). FIFO position `i` is ring slot `(front + i) % cap`,
/// where `front` counts the entries ever popped from the FIFO's front, so popping moves no data.
/// All counts are zero whenever the class has no tombstone.
#[derive(Default)]
pub(crate) struct Tombs {
    /// Ring slot of FIFO position 0 (kept modulo nothing: masked on use).
    front: u64,
    /// 1-based Fenwick tree; `len() == cap + 1`, or empty before the first tombstone.
    tree: Vec<u32>,
}

impl Tombs {
    fn cap(&self) -> usize {
        self.tree.len().saturating_sub(1)
    }

    fn add(&mut self, slot: usize, up: bool) {
        let cap = self.cap();
        let mut i = slot + 1;
        while i <= cap {
            if up {
                self.tree[i] += 1;
            } else {
                self.tree[i] -= 1;
            }
            i += i & i.wrapping_neg();
        }
    }

    /// Tombstones in ring slots `0..k`.
    fn prefix(&self, k: usize) -> usize {
        let mut i = k;
        let mut sum = 0usize;
        while i > 0 {
            sum += self.tree[i] as usize;
            i &= i - 1;
        }
        sum
    }

    fn slot(&self, pos: usize) -> usize {
        (self.front.wrapping_add(pos as u64) as usize) & (self.cap() - 1)
    }

    /// Tombstones among FIFO positions `0..p` (`p` at most the FIFO's length).
    pub(crate) fn count_before(&self, p: usize) -> usize {
        let cap = self.cap();
        if cap == 0 || p == 0 {
            return 0;
        }
        let r0 = self.slot(0);
        if r0 + p <= cap {
            self.prefix(r0 + p) - self.prefix(r0)
        } else {
            self.prefix(cap) - self.prefix(r0) + self.prefix(r0 + p - cap)
        }
    }

    /// The FIFO's front entry was popped; `tomb` says whether it was a tombstone.
    pub(crate) fn pop_front(&mut self, tomb: bool) {
        if tomb && self.cap() > 0 {
            let s = self.slot(0);
            self.add(s, false);
        }
        self.front = self.front.wrapping_add(1);
    }

    /// The entry at FIFO position `pos` became a tombstone. `fifo_len` is the FIFO's length and `is_tomb`
    /// tells the tombstones apart (used when the ring grows and is rebuilt, which includes `pos`).
    pub(crate) fn mark(&mut self, pos: usize, fifo_len: usize, is_tomb: impl Fn(usize) -> bool) {
        if self.cap() < fifo_len {
            let cap = fifo_len.next_power_of_two().max(64);
            self.tree.clear();
            self.tree.resize(cap + 1, 0);
            self.front = 0;
            for i in (0..fifo_len).filter(|&i| is_tomb(i)) {
                self.add(i, true);
            }
        } else {
            let s = self.slot(pos);
            self.add(s, true);
        }
    }

    /// The FIFO may have grown past the ring while it holds tombstones: rebuild before positions collide.
    pub(crate) fn grow(&mut self, fifo_len: usize, is_tomb: impl Fn(usize) -> bool) {
        if self.cap() < fifo_len {
            self.mark(0, fifo_len, is_tomb);
        }
    }

    /// Every tombstone was dropped (compaction) and the FIFO now holds `fifo_len` entries: all counts are
    /// zero again. A ring much larger than the FIFO is freed (the next `mark` sizes a new one).
    pub(crate) fn clear(&mut self, fifo_len: usize) {
        if self.cap() > 4 * fifo_len.max(64) {
            self.tree = Vec::new();
        } else {
            self.tree.iter_mut().for_each(|x| *x = 0);
        }
        self.front = 0;
    }
}

/// All class queues; what a policy sees.
pub(crate) struct Queues {
    pub classes: Vec<ClassQueue>,
}

impl Queues {
    pub(crate) fn new(n: usize) -> Self {
        Queues {
            classes: (0..n).map(|_| ClassQueue::default()).collect(),
        }
    }

    pub(crate) fn head(&self, c: ClassId) -> Option<&QEntry> {
        self.classes.get(c).and_then(ClassQueue::head)
    }

    pub(crate) fn len(&self, c: ClassId) -> usize {
        self.classes.get(c).map_or(0, |q| q.len)
    }

    /// Non-empty classes with their heads.
    pub(crate) fn heads(&self) -> impl Iterator<Item = (ClassId, &QEntry)> + '_ {
        self.classes
            .iter()
            .enumerate()
            .filter_map(|(c, q)| q.head().map(|h| (c, h)))
    }

    /// The class whose head was enqueued first (FCFS over heads).
    pub(crate) fn oldest_head(&self) -> Option<ClassId> {
        self.heads().min_by_key(|(_, e)| e.seq).map(|(c, _)| c)
    }
}
