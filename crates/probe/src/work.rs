//! The fixed piece of CPU work the loop probe times (seed 004's PHP loop, in Rust), its calibration to a
//! nominal duration, and the memory footprint a sample touches.

use std::hint::black_box;

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
    fn footprint_touches() {
        let mut f = Footprint::new(2);
        assert_eq!(f.bytes(), 2 * 1024 * 1024);
        f.touch();
        assert_eq!(f.buf[0], 2);
        assert_eq!(Footprint::new(0).bytes(), 0);
    }
}
