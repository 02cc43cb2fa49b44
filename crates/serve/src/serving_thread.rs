//! Which serving thread runs the current code: what is tied to one thread's runtime (the proxy's idle
//! upstream connections) is kept per index. A leaf module, so the backends can ask without importing the
//! server that starts the threads.

use std::cell::Cell;

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
