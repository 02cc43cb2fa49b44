//! Which serving thread runs the current code: what is tied to one thread's runtime (the proxy's idle
//! upstream connections) is kept per index. A leaf module, so the backends can ask without importing the
//! server that starts the threads. Also the serving runtimes' wakeup coalescing (`coalesce`).

use std::cell::Cell;
use std::time::{Duration, Instant};

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

/// A nap before parking counts only if the thread last woke this recently: a thread that has been busy. An
/// idle server parks at once (and sleeps until a socket or timer wakes it).
const BUSY_WITHIN: Duration = Duration::from_millis(1);

thread_local! {
    /// When this thread's runtime last woke from parking.
    static LAST_UNPARK: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Wakeup coalescing for a serving runtime (the `coalesce` setting; nothing when it is zero): when the
/// runtime runs out of ready tasks after having been busy, its thread sleeps `nap` before it parks in
/// `epoll_wait`. Data that arrives during the nap queues on its sockets without waking anyone — the
/// sender (a client, an upstream, on another core) skips the wakeup and its inter-processor interrupt — and
/// the runtime then takes all of it in one batch instead of waking for each packet. A proxy that finishes
/// its work quickly otherwise blocks and is woken several times per request, and those wakeups are paid on
/// the other core (docs/serve.md, "Wakeup coalescing").
pub fn coalesce_wakeups(
    builder: &mut tokio::runtime::Builder,
    nap: Duration,
) -> &mut tokio::runtime::Builder {
    if nap.is_zero() {
        return builder;
    }
    builder
        .on_thread_unpark(|| {
            let _ = LAST_UNPARK.try_with(|l| l.set(Some(Instant::now())));
        })
        .on_thread_park(move || {
            let busy = LAST_UNPARK
                .try_with(|l| l.get().is_some_and(|t| t.elapsed() < BUSY_WITHIN))
                .unwrap_or(false);
            if busy {
                std::thread::sleep(nap);
            }
        })
}
