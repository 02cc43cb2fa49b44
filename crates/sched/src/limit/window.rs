//! The measurement side of a limiter: windows of round-trip samples, and the baseline (the round trip
//! without queueing) with its probe. A window counts only requests dispatched after it opened, so a limit
//! change is judged by requests that ran under it, not by the queue the previous limit left behind.
//!
//! A window (and a probe) is summed up by the mean of its round trips: the mean is what queueing moves
//! (Little's law: in-flight = throughput × round trip, however the waits are spread over the requests — in
//! a backend that serves in waves, some requests wait a whole service time and others not at all, so a low
//! quantile or a trimmed mean would miss the queue).

use crate::Nanos;

/// One completed request, as the caller saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Dispatch to completion (the time the request held its permit).
    pub rtt: Nanos,
    /// Requests of the same limiter in flight when this one was dispatched, itself included.
    pub inflight: usize,
    /// The backend failed it (an error or timeout answer): AIMD backs off.
    pub dropped: bool,
}

impl Sample {
    /// When the request was dispatched, given that it finished at `now`.
    fn dispatched(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.rtt)
    }
}

/// A closed window's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WindowStats {
    /// The window's round trip: the mean of its samples.
    pub rtt: Nanos,
    pub max_inflight: usize,
    pub dropped: bool,
}

/// Samples of requests dispatched since `start`.
#[derive(Clone, Debug)]
pub(super) struct Window {
    start: Nanos,
    sum: u128,
    count: u32,
    max_inflight: usize,
    dropped: bool,
}

impl Window {
    pub fn new(start: Nanos) -> Self {
        Window {
            start,
            sum: 0,
            count: 0,
            max_inflight: 0,
            dropped: false,
        }
    }

    /// Start over at `start`.
    pub fn reset(&mut self, start: Nanos) {
        self.start = start;
        self.sum = 0;
        self.count = 0;
        self.max_inflight = 0;
        self.dropped = false;
    }

    /// Add a sample that finished now (ignored if its request was dispatched before the window opened).
    pub fn add_at(&mut self, now: Nanos, s: &Sample) {
        if s.dispatched(now) < self.start {
            return;
        }
        self.sum += u128::from(s.rtt);
        self.count += 1;
        self.max_inflight = self.max_inflight.max(s.inflight);
        self.dropped |= s.dropped;
    }

    /// The window's figures if it has lasted `span` and holds `min_samples` samples.
    pub fn close(&self, now: Nanos, span: Nanos, min_samples: u32) -> Option<WindowStats> {
        if self.count < min_samples.max(1) || now.saturating_sub(self.start) < span {
            return None;
        }
        Some(WindowStats {
            rtt: (self.sum / u128::from(self.count)) as Nanos,
            max_inflight: self.max_inflight,
            dropped: self.dropped,
        })
    }
}

/// A baseline probe under way: the limit is pinned to `min` and the round trips of requests dispatched at
/// that concurrency since `start` are collected; the baseline is their median (nothing queues at `min`, so
/// the spread is the host's noise, and a stall during the probe must not set the baseline for the next
/// `probe_interval`).
#[derive(Clone, Debug)]
struct Probe {
    start: Nanos,
    rtts: Vec<Nanos>,
}

/// The round trip without queueing.
#[derive(Clone, Debug)]
pub(super) struct Baseline {
    value: Option<Nanos>,
    probe: Option<Probe>,
    next_probe: Option<Nanos>,
}

impl Baseline {
    /// With `probe_now`, the first probe starts at `now`.
    pub fn new(probe_now: bool, now: Nanos) -> Self {
        Baseline {
            value: None,
            probe: probe_now.then(|| Probe {
                start: now,
                rtts: Vec::new(),
            }),
            next_probe: None,
        }
    }

    pub fn value(&self) -> Option<Nanos> {
        self.value
    }

    pub fn probing(&self) -> bool {
        self.probe.is_some()
    }

    /// Feed a sample to the probe; true when the probe is complete (the baseline is then its median).
    pub fn on_probe_sample(&mut self, now: Nanos, s: &Sample, min: usize, needed: u32) -> bool {
        let Some(p) = self.probe.as_mut() else {
            return false;
        };
        if s.dispatched(now) < p.start || s.inflight > min {
            return false;
        }
        p.rtts.push(s.rtt);
        if p.rtts.len() < needed.max(1) as usize {
            return false;
        }
        let mid = p.rtts.len() / 2;
        self.value = Some((*p.rtts.select_nth_unstable(mid).1).max(1));
        self.probe = None;
        true
    }

    /// After a probe: the next one `interval` ± 15% from now (never with 0; at least a few windows away).
    /// The jitter, drawn from `now`, keeps probes of servers started together (and of a load whose phases
    /// are multiples of the interval) from lining up.
    pub fn schedule_next(&mut self, now: Nanos, interval: Nanos, window: Nanos) {
        let u = ordo_util::SplitMix64::new(now).next_u64() as f64 / u64::MAX as f64;
        let jittered = (interval as f64 * (0.85 + 0.3 * u)) as Nanos;
        self.next_probe = (interval > 0).then(|| now.saturating_add(jittered.max(4 * window)));
    }

    pub fn probe_due(&self, now: Nanos) -> bool {
        self.probe.is_none() && self.next_probe.is_some_and(|t| now >= t)
    }

    pub fn start_probe(&mut self, now: Nanos) {
        self.probe = Some(Probe {
            start: now,
            rtts: Vec::new(),
        });
        self.next_probe = None;
    }

    /// A window was clearly faster than the baseline (by more than half the `tolerance`): move half of the
    /// way down to it, so a probe taken at a busy moment, or a backend that got faster, is followed within a
    /// few windows, while the spread of ordinary windows cannot walk the baseline far down. Only a probe
    /// raises it.
    pub fn lower_to(&mut self, rtt: Nanos, tolerance: f64) {
        if let Some(b) = self.value {
            if (rtt as f64) < b as f64 * (1.0 - tolerance / 2.0) {
                self.value = Some((b - (b - rtt) / 2).max(1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(rtt: Nanos, inflight: usize) -> Sample {
        Sample {
            rtt,
            inflight,
            dropped: false,
        }
    }

    #[test]
    fn window_counts_only_requests_dispatched_inside_it() {
        let mut w = Window::new(100);
        w.add_at(150, &s(80, 3)); // dispatched at 70: before the window
        assert_eq!(w.close(1000, 10, 1), None);
        w.add_at(150, &s(40, 5));
        w.add_at(160, &s(20, 9));
        assert_eq!(w.close(105, 10, 2), None, "too short");
        assert_eq!(w.close(160, 10, 3), None, "too few");
        assert_eq!(
            w.close(160, 10, 2),
            Some(WindowStats {
                rtt: 30,
                max_inflight: 9,
                dropped: false
            })
        );
        w.reset(1000);
        assert_eq!(w.close(1200, 10, 1), None, "empty after a reset");
    }

    #[test]
    fn baseline_lowers_gradually_and_probes_on_schedule() {
        let mut b = Baseline::new(false, 0);
        assert!(!b.probing());
        b.start_probe(10);
        assert!(!b.on_probe_sample(20, &s(10, 1), 2, 3));
        assert!(!b.on_probe_sample(100, &s(90, 1), 2, 3), "a stall");
        assert!(b.on_probe_sample(30, &s(11, 2), 2, 3));
        assert_eq!(b.value(), Some(11), "the median leaves the stall out");
        b.lower_to(10, 0.2);
        assert_eq!(b.value(), Some(11), "within half the tolerance: kept");
        b.lower_to(3, 0.2);
        assert_eq!(b.value(), Some(7));
        b.lower_to(50, 0.2);
        assert_eq!(b.value(), Some(7));
        b.schedule_next(30, 100, 1);
        assert!(!b.probe_due(30 + 84));
        assert!(b.probe_due(30 + 116));
        b.schedule_next(30, 0, 1);
        assert!(!b.probe_due(u64::MAX));
    }
}
