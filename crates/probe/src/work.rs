//! The fixed piece of CPU work the loop probe times (seed 004's PHP loop, in Rust), its calibration to a
//! nominal duration, and the memory footprint a sample touches.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};

use ordo_sys::clock::thread_cpu_ns;

/// Run the work: `iterations` dependent integer steps that the compiler cannot fold or vectorise.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iterations {
        x = black_box(x.rotate_left(5) ^ i).wrapping_mul(3);
    }
    x
}

/// Iterations `spin_cancellable` runs between two looks at the stop flag: about 0.8 ms of CPU at the
/// 0.8 ns per iteration measured here, so a stop request waits at most that much CPU time (plus any
/// run-queue wait), while the look itself (one relaxed load and a call) costs under 10 ns per chunk.
pub(crate) const SPIN_CHECK_EVERY: u64 = 1 << 20;

/// `spin(iterations)` in chunks of `SPIN_CHECK_EVERY`, stopping early when `stop` is set: `None` then
/// (the sample is incomplete and must be dropped). The chunks call the same `spin`, so the work per
/// iteration is the one `Calibration` measured.
pub(crate) fn spin_cancellable(iterations: u64, stop: &AtomicBool) -> Option<u64> {
    let mut left = iterations;
    let mut acc = 0u64;
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let n = left.min(SPIN_CHECK_EVERY);
        acc ^= spin(n);
        left -= n;
    }
    Some(acc)
}

/// The outcome of calibrating `spin`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// CPU ns per iteration (the fastest of several trials, so preemption during calibration does not
    /// inflate it: trials are timed with the thread's CPU clock).
    pub ns_per_iteration: f64,
}

impl Calibration {
    /// Measure `spin` on the calling thread (about 60 ms of CPU).
    pub fn measure() -> Calibration {
        let mut chunk: u64 = 100_000;
        loop {
            let t = thread_cpu_ns();
            black_box(spin(chunk));
            let took = thread_cpu_ns().saturating_sub(t);
            if took >= 5_000_000 || chunk >= 1 << 34 {
                break;
            }
            chunk *= 2;
        }
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = thread_cpu_ns();
            black_box(spin(chunk));
            let took = thread_cpu_ns().saturating_sub(t).max(1);
            best = best.min(took as f64 / chunk as f64);
        }
        Calibration {
            ns_per_iteration: best,
        }
    }

    /// Iterations for a nominal duration (at least 1).
    pub fn iterations_for(&self, nominal_ns: u64) -> u64 {
        ((nominal_ns as f64 / self.ns_per_iteration).round() as u64).max(1)
    }

    /// The nominal duration of `iterations`.
    pub fn nominal_ns(&self, iterations: u64) -> u64 {
        (iterations as f64 * self.ns_per_iteration).round() as u64
    }
}

/// Memory the probe holds and touches before every sample (one write per 4 KiB page), so the process keeps
/// a working set of that size, as seed 004's larger processes did.
#[derive(Debug, Default)]
pub struct Footprint {
    buf: Vec<u8>,
}

const PAGE: usize = 4096;

impl Footprint {
    /// Allocate `mb` MiB (0 = none) and touch it once.
    pub fn new(mb: usize) -> Footprint {
        let mut f = Footprint {
            buf: vec![0u8; mb * 1024 * 1024],
        };
        f.touch();
        f
    }

    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Write one byte in every page.
    pub fn touch(&mut self) {
        let mut i = 0;
        while i < self.buf.len() {
            self.buf[i] = black_box(self.buf[i].wrapping_add(1));
            i += PAGE;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_is_consistent() {
        let c = Calibration::measure();
        assert!(
            c.ns_per_iteration > 0.01 && c.ns_per_iteration < 1000.0,
            "{c:?}"
        );
        let n = c.iterations_for(5_000_000);
        let t = thread_cpu_ns();
        black_box(spin(n));
        let took = thread_cpu_ns() - t;
        // Within a factor of three of the target, even on a busy machine (CPU time, not wall time).
        assert!(
            took > 5_000_000 / 3 && took < 15_000_000,
            "took {took} ns for {n} iterations"
        );
        assert_eq!(c.iterations_for(0), 1);
    }

    #[test]
    fn cancellable_spin_stops_at_a_chunk_boundary() {
        let stop = AtomicBool::new(false);
        assert!(spin_cancellable(3 * SPIN_CHECK_EVERY + 5, &stop).is_some());
        assert!(spin_cancellable(0, &stop).is_some());
        // Set during the work: it ends at the next chunk, not after u64::MAX iterations.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(30));
                stop.store(true, Ordering::Relaxed);
            });
            assert_eq!(spin_cancellable(u64::MAX, &stop), None);
        });
        // Set before the start: not one chunk runs.
        let t = thread_cpu_ns();
        assert_eq!(spin_cancellable(u64::MAX, &stop), None);
        assert!(thread_cpu_ns() - t < 50_000_000);
    }

    #[test]
    fn footprint_touches() {
        let mut f = Footprint::new(2);
        assert_eq!(f.bytes(), 2 * 1024 * 1024);
        f.touch();
        assert_eq!(f.buf[0], 2);
        assert_eq!(Footprint::new(0).bytes(), 0);
    }
}
