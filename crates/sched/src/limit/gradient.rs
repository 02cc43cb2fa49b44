//! The gradient control law (after Envoy's adaptive concurrency filter and Netflix's Gradient2): the limit
//! is multiplied by `target / rtt`, clamped to `[0.5, 1 + tolerance]`, with `target = baseline ×
//! (1 + tolerance)`; and, like TCP's slow start, windows that show no queueing at all one after another
//! grow it faster (× `1 + tolerance × 2^(n-1)` at the n-th, at most × 1.5), so a capacity that comes back is
//! found within a few windows.
//!
//! Against a backend that serves `C` requests at once and queues the rest, the round trip is the baseline
//! while the limit `L ≤ C` and `baseline × L / C` above it. So below the knee the limit grows, and above it
//! one window moves it to `(1 + tolerance) × C`: the equilibrium is the knee plus the allowed queueing,
//! whatever the limit was before. An overshoot of the slow start costs at most one window of queueing.

use super::{Control, LimiterConfig, WindowResult};

/// Growth factor cap of the slow start.
const MAX_GROWTH: f64 = 1.5;

#[derive(Default)]
pub(super) struct Gradient {
    /// Consecutive windows without queueing (round trip within half the tolerance of the baseline).
    streak: u32,
}

impl Control for Gradient {
    fn next(&mut self, cfg: &LimiterConfig, w: &WindowResult, limit: f64) -> f64 {
        let base = w.baseline as f64;
        let rtt = w.rtt as f64;
        let target = base * (1.0 + cfg.tolerance);
        if w.app_limited && rtt <= target {
            // The window did not use the limit: its round trips say nothing about a higher one.
            self.streak = 0;
            return limit;
        }
        if rtt <= base * (1.0 + cfg.tolerance / 2.0) {
            self.streak = self.streak.saturating_add(1);
            let boost = cfg.tolerance * 2f64.powi(self.streak.min(16) as i32 - 1);
            return limit
                * (1.0 + boost).clamp(1.0 + cfg.tolerance, MAX_GROWTH.max(1.0 + cfg.tolerance));
        }
        self.streak = 0;
        limit * (target / rtt).clamp(0.5, 1.0 + cfg.tolerance)
    }
}
