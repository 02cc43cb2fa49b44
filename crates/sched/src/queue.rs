//! Request storage: a slab that owns the queued items (so a request can leave from the middle of its class
//! queue in O(1), as srpt and edf need) and one FIFO of handles per class, in enqueue order.
//!
//! A request removed from the middle of its class FIFO leaves a tombstone there; the scheduler pops
//! tombstones off the front after every removal (so a non-empty FIFO always starts with a live request) and
//! compacts a FIFO that holds more tombstones than live requests, so memory stays proportional to the
//! number of queued requests and the amortised cost per request stays O(1).

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
    pub fn index(self) -> usize {
        self.idx as usize
    }

    /// The slot's generation when this handle was issued.
    pub fn generation(self) -> u32 {
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
    pub fn waited(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.meta.arrival)
    }
}

struct Stored<T> {
    item: T,
    entry: QEntry,
}

struct Slot<T> {
    generation: u32,
    val: Option<Stored<T>>,
}

/// Owner of the queued items.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Store a request; `make` receives the handle it will have.
    pub fn insert(&mut self, item: T, make: impl FnOnce(Handle) -> QEntry) -> QEntry {
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
            generation: slot.generation,
        });
        slot.val = Some(Stored { item, entry });
        entry
    }

    pub fn is_live(&self, h: Handle) -> bool {
        self.get(h).is_some()
    }

    pub fn get(&self, h: Handle) -> Option<&QEntry> {
        let slot = self.slots.get(h.idx as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.val.as_ref().map(|s| &s.entry)
    }

    pub fn get_mut(&mut self, h: Handle) -> Option<&mut QEntry> {
        let slot = self.slots.get_mut(h.idx as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.val.as_mut().map(|s| &mut s.entry)
    }

    pub fn remove(&mut self, h: Handle) -> Option<(T, QEntry)> {
        let slot = self.slots.get_mut(h.idx as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        let s = slot.val.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(h.idx);
        Some((s.item, s.entry))
    }

    /// Remove everything, in slot order.
    pub fn drain(&mut self) -> impl Iterator<Item = (T, QEntry)> + '_ {
        self.free.clear();
        self.slots
            .drain(..)
            .filter_map(|s| s.val.map(|v| (v.item, v.entry)))
    }
}

/// One class's FIFO. Invariant (kept by the scheduler): when `len > 0`, the front entry is live.
#[derive(Default)]
pub(crate) struct ClassQueue {
    pub fifo: VecDeque<QEntry>,
    /// Live requests in `fifo`.
    pub len: usize,
    /// Tombstones in `fifo` (requests removed from the middle); while 0, no liveness checks are needed.
    pub dead: usize,
}

impl ClassQueue {
    /// The oldest live request of the class.
    pub fn head(&self) -> Option<&QEntry> {
        if self.len == 0 {
            None
        } else {
            self.fifo.front()
        }
    }
}

/// All class queues; what a policy sees.
pub(crate) struct Queues {
    pub classes: Vec<ClassQueue>,
}

impl Queues {
    pub fn new(n: usize) -> Self {
        Queues {
            classes: (0..n).map(|_| ClassQueue::default()).collect(),
        }
    }

    pub fn head(&self, c: ClassId) -> Option<&QEntry> {
        self.classes.get(c).and_then(ClassQueue::head)
    }

    pub fn len(&self, c: ClassId) -> usize {
        self.classes.get(c).map_or(0, |q| q.len)
    }

    /// Non-empty classes with their heads.
    pub fn heads(&self) -> impl Iterator<Item = (ClassId, &QEntry)> + '_ {
        self.classes
            .iter()
            .enumerate()
            .filter_map(|(c, q)| q.head().map(|h| (c, h)))
    }

    /// The class whose head was enqueued first (FCFS over heads).
    pub fn oldest_head(&self) -> Option<ClassId> {
        self.heads().min_by_key(|(_, e)| e.seq).map(|(c, _)| c)
    }
}
