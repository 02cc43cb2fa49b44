//! Stopping a run early (Ctrl-C, a caller's deadline): the one cancel token of the workspace. The caller
//! sets it from its signal handler; work checks it at its boundaries — the loop probe between samples and
//! every ~1 ms of a sample's work (`flag`), the pid watcher while it sleeps (`wait_timeout`), the load
//! generator's async tasks through a watch channel (`subscribe`) — so an interrupted run still ends with a
//! report of what was measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

#[derive(Debug)]
struct Inner {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    watch: watch::Sender<bool>,
}

/// A shared "stop now" flag; clones share it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CancelToken(Arc<Inner>);

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken(Arc::new(Inner {
            flag: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            watch: watch::channel(false).0,
        }))
    }

    /// Ask everything that holds a clone to stop at its next boundary (wakes `wait_timeout` and the
    /// `subscribe` receivers at once).
    pub fn cancel(&self) {
        let _g = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.wake.notify_all();
        self.0.watch.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }

    /// Sleep up to `d`; true (and at once) when cancelled before or during it.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if self.0.flag.load(Ordering::SeqCst) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = match self.0.wake.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The flag itself, for a hot loop that polls it.
    pub fn flag(&self) -> &AtomicBool {
        &self.0.flag
    }

    /// A receiver that turns true on `cancel`, for async code (`wait_for(|c| *c)`).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.watch.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_ends_on_timeout_or_at_once_on_cancel() {
        let c = CancelToken::new();
        let t = Instant::now();
        assert!(!c.wait_timeout(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let c2 = c.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            c2.cancel();
        });
        let t = Instant::now();
        assert!(c.wait_timeout(Duration::from_secs(20)));
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(c.is_cancelled());
        h.join().unwrap();
        assert!(c.wait_timeout(Duration::from_secs(20)));
    }

    #[test]
    fn subscribers_see_the_cancel() {
        let c = CancelToken::new();
        let rx = c.subscribe();
        assert!(!*rx.borrow());
        c.clone().cancel();
        assert!(*rx.borrow());
        assert!(*c.subscribe().borrow());
        assert!(c.flag().load(Ordering::SeqCst));
    }
}
