//! Stopping a probe early (Ctrl-C): a flag the caller sets from its signal handler and the probes check at
//! their boundaries — the loop probe between samples and every ~1 ms of a sample's work, the pid watcher
//! while it sleeps between intervals — so an interrupted run still ends with a report of what was measured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Inner {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// A shared "stop now" flag; clones share it.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<Inner>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Ask every probe that holds a clone to stop at its next boundary (wakes `wait_timeout` at once).
    pub fn cancel(&self) {
        let _g = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.wake.notify_all();
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

    /// The flag itself, for the hot loop that polls it.
    pub(crate) fn flag(&self) -> &AtomicBool {
        &self.0.flag
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
}
