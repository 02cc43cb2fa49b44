//! Which serving thread runs the current code: what is tied to one thread's runtime (the proxy's idle
//! upstream connections) is kept per index. A leaf module, so the backends can ask without importing the
//! server that starts the threads. (The serving runtimes' wakeup coalescing, `coalesce`, is
//! `ordo_sys::coalesce`, shared with `ordo bench`.)

use std::cell::Cell;
use std::sync::OnceLock;

thread_local! {
    /// Which of the server's serving threads this is (0: the caller's runtime, also every thread that is
    /// not a serving thread).
    static SERVING_THREAD: Cell<usize> = const { Cell::new(0) };
}

/// The index of the serving thread running this code.
pub(crate) fn serving_thread() -> usize {
    SERVING_THREAD.try_with(Cell::get).unwrap_or(0)
}

/// Makes the calling thread serving thread `index` (set by the server when it starts a thread, and by tests
/// of what is kept per thread).
pub(crate) fn set_serving_thread(index: usize) {
    SERVING_THREAD.set(index);
}

/// The most serving threads a server runs (`threads` is validated against it).
pub(crate) const MAX_SERVING_THREADS: usize = 1024;

/// One `T` per serving thread, made on that thread's first use and aligned so no two threads' values share
/// a cache line: what one thread alone uses (its idle upstream connections, its place in a round robin)
/// costs it no lock or counter that other threads write too. A thread outside the range gets none.
pub(crate) struct PerThread<T> {
    slots: Box<[OnceLock<Box<Padded<T>>>]>,
}

#[repr(align(128))]
struct Padded<T>(T);

impl<T> PerThread<T> {
    pub(crate) fn new() -> Self {
        PerThread {
            slots: (0..MAX_SERVING_THREADS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The calling serving thread's value, made by `init` on its first use.
    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> Option<&T> {
        let slot = self.slots.get(serving_thread())?;
        Some(&slot.get_or_init(|| Box::new(Padded(init()))).0)
    }

    /// The calling serving thread's value, if it made one.
    pub(crate) fn get(&self) -> Option<&T> {
        Some(&self.slots.get(serving_thread())?.get()?.0)
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PerThread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.slots
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.get().map(|v| (i, &v.0))),
            )
            .finish()
    }
}
