//! A min-heap of queued requests with lazy deletion, the index behind srpt (by size) and edf (by
//! deadline). A request removed from anywhere but the top (a queue timeout, an aged srpt head) is only
//! marked dead in a dense table indexed by its slab slot; dead entries are dropped when they reach the top,
//! and the heap is rebuilt when they outnumber the live ones. Pushing a random key is O(1) on average and
//! popping O(log n), with better cache behaviour than a B-tree of the same size.
//!
//! Invariant: after every operation the top entry (if any) is live, so `peek` needs no `&mut`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::queue::Handle;

const LIVE: u64 = 1 << 32;

pub(crate) struct LazyMinHeap<K: Ord + Copy> {
    heap: BinaryHeap<Reverse<(K, Handle)>>,
    /// Per slab slot: `LIVE | generation` while that request is in the heap, 0 otherwise.
    alive: Vec<u64>,
    live: usize,
    dead: usize,
}

impl<K: Ord + Copy> LazyMinHeap<K> {
    pub(super) fn new() -> Self {
        LazyMinHeap {
            heap: BinaryHeap::new(),
            alive: Vec::new(),
            live: 0,
            dead: 0,
        }
    }

    fn is_live(&self, h: Handle) -> bool {
        self.alive.get(h.index()) == Some(&(LIVE | u64::from(h.generation())))
    }

    pub(super) fn push(&mut self, key: K, h: Handle) {
        if self.alive.len() <= h.index() {
            self.alive.resize(h.index() + 1, 0);
        }
        self.alive[h.index()] = LIVE | u64::from(h.generation());
        self.live += 1;
        self.heap.push(Reverse((key, h)));
    }

    /// The smallest live entry.
    pub(super) fn peek(&self) -> Option<(K, Handle)> {
        self.heap.peek().map(|Reverse(x)| *x)
    }

    /// Remove and return the smallest live entry.
    #[cfg(test)]
    pub(super) fn pop(&mut self) -> Option<(K, Handle)> {
        let (k, h) = self.peek()?;
        self.remove(h);
        Some((k, h))
    }

    /// Remove `h` wherever it is (a no-op if it is not in the heap).
    pub(super) fn remove(&mut self, h: Handle) {
        if !self.is_live(h) {
            return;
        }
        self.alive[h.index()] = 0;
        self.live -= 1;
        self.dead += 1;
        while let Some(Reverse((_, top))) = self.heap.peek() {
            if self.is_live(*top) {
                break;
            }
            self.heap.pop();
            self.dead -= 1;
        }
        if self.dead > self.live + 1024 {
            let alive = &self.alive;
            self.heap.retain(|Reverse((_, x))| {
                alive.get(x.index()) == Some(&(LIVE | u64::from(x.generation())))
            });
            self.dead = 0;
        }
        debug_assert_eq!(self.heap.len(), self.live + self.dead);
    }

    #[cfg(test)]
    pub(super) fn stored(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Meta;
    use crate::queue::{QEntry, Slab};
    use ordo_util::SplitMix64;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_like_an_ordered_map_and_stays_small() {
        let mut rng = SplitMix64::new(9);
        let mut slab = Slab::new();
        let mut heap = LazyMinHeap::new();
        let mut model: BTreeMap<(u64, u64), Handle> = BTreeMap::new();
        for seq in 0..50_000u64 {
            match rng.below(4) {
                0 | 1 => {
                    let key = (rng.below(1000), seq);
                    let e = slab.insert((), |h| QEntry {
                        h,
                        seq,
                        meta: Meta::new(0, 0),
                    });
                    heap.push(key, e.h);
                    model.insert(key, e.h);
                }
                2 => {
                    assert_eq!(heap.pop(), model.pop_first());
                }
                _ => {
                    // remove a random live entry from the middle
                    let k = (rng.below(1000), 0);
                    if let Some((&key, &h)) = model.range(k..).next() {
                        model.remove(&key);
                        heap.remove(h);
                        heap.remove(h); // twice is harmless
                        slab.remove(h);
                    }
                }
            }
            assert_eq!(heap.peek(), model.first_key_value().map(|(k, h)| (*k, *h)));
            assert!(heap.stored() <= 2 * model.len() + 1025);
        }
    }
}
