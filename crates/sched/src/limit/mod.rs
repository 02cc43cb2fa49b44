//! Adaptive concurrency limits: how many requests one backend should serve at once, learned from the
//! latency it shows, so the queue forms in front of the backend (where a class policy can order it) and not
//! inside it. Pure: no I/O and no clock — the caller passes the time and each completed request's round trip.
//!
//! A [`Limiter`] collects [`Sample`]s in windows and, at the end of each window, moves its limit by its
//! algorithm ([`Algorithm::Gradient`], [`Algorithm::Aimd`], or [`Algorithm::Fixed`]). Both adaptive
//! algorithms compare the window's mean round trip with a *baseline*: the
//! backend's round trip without queueing, measured by a probe (the limit pinned to `min` until
//! `2 × min_samples` requests dispatched at that concurrency have come back) at start and every
//! `probe_interval`, and lowered when a window is clearly faster.
//! docs/overload.md describes the algorithms, their equilibria and when to choose which.

mod aimd;
mod gradient;
mod window;

use crate::Nanos;

pub use window::Sample;

use window::{Baseline, Window};

/// Which control law moves the limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// Multiply the limit by `target / rtt` (clamped to `[0.5, 1 + tolerance]`), where `target` is the
    /// baseline × (1 + tolerance): above the knee one window brings the limit back to it, below it the limit
    /// grows by `1 + tolerance` per window.
    Gradient,
    /// Additive increase (`increase` per window) while the window's mean round trip is at most the target
    /// (`latency_target`, else baseline × (1 + tolerance)) and no request failed; multiplicative decrease
    /// (× `backoff`) otherwise.
    Aimd,
    /// A constant limit (`initial`); no probe.
    Fixed,
}

impl Algorithm {
    /// The name used in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Gradient => "gradient",
            Algorithm::Aimd => "aimd",
            Algorithm::Fixed => "fixed",
        }
    }
}

/// A limiter's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct LimiterConfig {
    pub algorithm: Algorithm,
    /// Lowest limit, and the concurrency of a baseline probe (≥ 1).
    pub min: usize,
    /// Highest limit (≥ `min`).
    pub max: usize,
    /// Limit after the first probe (and the constant limit of `Fixed`).
    pub initial: usize,
    /// Allowed queueing, as a fraction of the baseline round trip: the target is baseline × (1 + tolerance).
    pub tolerance: f64,
    /// Shortest window; a window also lasts at least two baseline round trips.
    pub window: Nanos,
    /// Samples a window needs before it counts (a probe needs twice as many).
    pub min_samples: u32,
    /// Time between baseline probes; 0 probes only at start.
    pub probe_interval: Nanos,
    /// Gradient: the fraction of a window's correction applied (1: all of it at once; lower values ride
    /// out noisy windows at the cost of slower moves).
    pub smoothing: f64,
    /// AIMD: limit added per window without congestion.
    pub increase: f64,
    /// AIMD: factor applied on congestion (0 < backoff < 1).
    pub backoff: f64,
    /// AIMD: a fixed round-trip target instead of baseline × (1 + tolerance).
    pub latency_target: Option<Nanos>,
}

impl Default for LimiterConfig {
    fn default() -> Self {
        LimiterConfig {
            algorithm: Algorithm::Gradient,
            min: 3,
            max: 1000,
            initial: 16,
            tolerance: 0.03,
            window: 100_000_000,
            min_samples: 16,
            probe_interval: 30_000_000_000,
            smoothing: 0.5,
            increase: 1.0,
            backoff: 0.9,
            latency_target: None,
        }
    }
}

/// A refused limiter configuration: which field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct LimitConfigError {
    pub field: &'static str,
    pub reason: String,
}

impl LimiterConfig {
    /// Check the parameters; the error names the field.
    pub fn validate(&self) -> Result<(), LimitConfigError> {
        let bad = |field, reason: String| Err(LimitConfigError { field, reason });
        if self.min == 0 {
            return bad("min", "must be ≥ 1, got 0".into());
        }
        if self.max < self.min {
            return bad(
                "max",
                format!("must be ≥ min ({}), got {}", self.min, self.max),
            );
        }
        if self.initial < self.min || self.initial > self.max {
            return bad(
                "initial",
                format!(
                    "must be between min ({}) and max ({}), got {}",
                    self.min, self.max, self.initial
                ),
            );
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0 && self.tolerance <= 10.0) {
            return bad(
                "tolerance",
                format!("must be > 0 and ≤ 10, got {}", self.tolerance),
            );
        }
        if self.window == 0 {
            return bad("window", "must be > 0".into());
        }
        if self.min_samples == 0 {
            return bad("min_samples", "must be ≥ 1, got 0".into());
        }
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return bad(
                "smoothing",
                format!("must be > 0 and ≤ 1, got {}", self.smoothing),
            );
        }
        if !(self.increase.is_finite() && self.increase > 0.0) {
            return bad("increase", format!("must be > 0, got {}", self.increase));
        }
        if !(self.backoff > 0.0 && self.backoff < 1.0) {
            return bad(
                "backoff",
                format!("must be > 0 and < 1, got {}", self.backoff),
            );
        }
        if self.latency_target == Some(0) {
            return bad("latency_target", "must be > 0".into());
        }
        Ok(())
    }
}

/// What a limiter shows (for metrics and status).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LimiterSnapshot {
    pub algorithm: Algorithm,
    /// The limit in force now (the probe's `min` while probing).
    pub limit: usize,
    /// The round trip without queueing, once measured.
    pub baseline: Option<Nanos>,
    /// Mean round trip of the last window that counted.
    pub last_rtt: Option<Nanos>,
    /// A baseline probe is under way.
    pub probing: bool,
    /// Windows that changed the limit so far.
    pub updates: u64,
}

/// One control law: the limit after a window with round trip `rtt`.
trait Control: Send {
    fn next(&mut self, cfg: &LimiterConfig, w: &WindowResult, limit: f64) -> f64;
}

/// What a closed window hands to the control law.
#[derive(Clone, Copy, Debug)]
struct WindowResult {
    /// The window's mean round trip.
    rtt: Nanos,
    /// The lower of this window's and the previous window's round trips: what a decrease goes by, so one
    /// window spoiled by the host (a stall) does not cut the limit, while a lasting rise does one window
    /// later.
    sustained: Nanos,
    /// The baseline (always known once windows count).
    baseline: Nanos,
    /// Some request of the window failed (backend error or timeout).
    dropped: bool,
    /// The window used less than half the limit: growing would be blind.
    app_limited: bool,
}

/// A concurrency limit that adapts to the latency it observes. See the module documentation.
pub struct Limiter {
    cfg: LimiterConfig,
    control: Option<Box<dyn Control>>,
    limit: f64,
    window: Window,
    baseline: Baseline,
    last_rtt: Option<Nanos>,
    updates: u64,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

impl Limiter {
    /// A limiter starting at time `now`: adaptive ones begin with a baseline probe at `min`.
    pub fn new(cfg: LimiterConfig, now: Nanos) -> Result<Self, LimitConfigError> {
        cfg.validate()?;
        let control: Option<Box<dyn Control>> = match cfg.algorithm {
            Algorithm::Gradient => Some(Box::new(gradient::Gradient::default())),
            Algorithm::Aimd => Some(Box::new(aimd::Aimd::default())),
            Algorithm::Fixed => None,
        };
        let baseline = Baseline::new(control.is_some(), now);
        Ok(Limiter {
            limit: cfg.initial as f64,
            window: Window::new(now),
            baseline,
            control,
            cfg,
            last_rtt: None,
            updates: 0,
        })
    }

    /// The parameters.
    pub fn config(&self) -> &LimiterConfig {
        &self.cfg
    }

    /// Requests that may be in flight now.
    pub fn limit(&self) -> usize {
        if self.baseline.probing() {
            return self.cfg.min;
        }
        (self.limit.floor() as usize).clamp(self.cfg.min, self.cfg.max)
    }

    /// Numbers for metrics and status.
    pub fn snapshot(&self) -> LimiterSnapshot {
        LimiterSnapshot {
            algorithm: self.cfg.algorithm,
            limit: self.limit(),
            baseline: self.baseline.value(),
            last_rtt: self.last_rtt,
            probing: self.baseline.probing(),
            updates: self.updates,
        }
    }

    /// A request finished at `now`. Returns whether the limit changed.
    pub fn on_sample(&mut self, now: Nanos, s: Sample) -> bool {
        if self.control.is_none() {
            return false;
        }
        let before = self.limit();
        if self.baseline.probing() {
            if self
                .baseline
                .on_probe_sample(now, &s, self.cfg.min, 2 * self.cfg.min_samples)
            {
                // Probe done: the limit in force before it returns, and a fresh window starts.
                self.window.reset(now);
                self.baseline
                    .schedule_next(now, self.cfg.probe_interval, self.cfg.window);
            }
            return self.limit() != before;
        }
        self.window.add_at(now, &s);
        let base = self.baseline.value().unwrap_or(s.rtt.max(1));
        let span = self.cfg.window.max(base.saturating_mul(2));
        let Some(w) = self.window.close(now, span, self.cfg.min_samples) else {
            return false;
        };
        self.baseline.lower_to(w.rtt, self.cfg.tolerance);
        let result = WindowResult {
            rtt: w.rtt.max(1),
            sustained: self.last_rtt.map_or(w.rtt, |p| p.min(w.rtt)).max(1),
            baseline: self.baseline.value().unwrap_or(w.rtt).max(1),
            dropped: w.dropped,
            app_limited: (w.max_inflight as f64) < self.limit / 2.0,
        };
        self.last_rtt = Some(w.rtt);
        let next = match self.control.as_mut() {
            Some(control) => control.next(&self.cfg, &result, self.limit),
            None => self.limit,
        };
        self.limit = next.clamp(self.cfg.min as f64, self.cfg.max as f64);
        self.updates += 1;
        self.window.reset(now);
        if self.baseline.probe_due(now) {
            self.baseline.start_probe(now);
        }
        self.limit() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn cfg(algorithm: Algorithm) -> LimiterConfig {
        LimiterConfig {
            algorithm,
            min_samples: 4,
            window: 10 * MS,
            ..LimiterConfig::default()
        }
    }

    fn sample(rtt: Nanos, inflight: usize) -> Sample {
        Sample {
            rtt,
            inflight,
            dropped: false,
        }
    }

    #[test]
    fn validation_names_the_field() {
        let bad = |c: LimiterConfig| c.validate().unwrap_err().field;
        let d = LimiterConfig::default;
        assert_eq!(
            bad(LimiterConfig {
                initial: 5000,
                ..d()
            }),
            "initial"
        );
        assert_eq!(
            bad(LimiterConfig {
                backoff: 1.0,
                ..d()
            }),
            "backoff"
        );
        assert!(Limiter::new(LimiterConfig { min: 0, ..d() }, 0).is_err());
        assert!(LimiterConfig::default().validate().is_ok());
    }

    #[test]
    fn starts_with_a_probe_at_min_then_uses_initial() {
        let mut l = Limiter::new(cfg(Algorithm::Gradient), 0).unwrap();
        assert_eq!(l.limit(), 3);
        assert!(l.snapshot().probing);
        let mut now = 0;
        // a probe takes 2 × min_samples
        for _ in 0..8 {
            now += 20 * MS;
            l.on_sample(now, sample(20 * MS, 2));
        }
        assert!(!l.snapshot().probing);
        assert_eq!(l.snapshot().baseline, Some(20 * MS));
        assert_eq!(l.limit(), 16);
    }

    #[test]
    fn probe_ignores_requests_dispatched_above_min_or_before_it() {
        let mut l = Limiter::new(cfg(Algorithm::Gradient), 100 * MS).unwrap();
        // dispatched before the probe began (now - rtt < start), or at a higher concurrency
        l.on_sample(110 * MS, sample(50 * MS, 1));
        l.on_sample(200 * MS, sample(20 * MS, 9));
        for i in 0..7 {
            l.on_sample(300 * MS + i, sample(20 * MS, 1));
        }
        assert!(l.snapshot().probing, "only 7 usable samples so far");
        l.on_sample(400 * MS, sample(20 * MS, 2));
        assert!(!l.snapshot().probing);
    }

    #[test]
    fn fixed_never_moves() {
        let mut c = cfg(Algorithm::Fixed);
        c.initial = 7;
        let mut l = Limiter::new(c, 0).unwrap();
        for i in 0..100 {
            assert!(!l.on_sample(i * MS, sample(i * MS, 7)));
        }
        assert_eq!(l.limit(), 7);
        assert!(!l.snapshot().probing);
    }
}
