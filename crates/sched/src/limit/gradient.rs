//! The gradient control law (after Envoy's adaptive concurrency filter and Netflix's Gradient2): the limit
//! is multiplied by `target / rtt`, clamped to `[0.5, 1 + tolerance]`, with `target = baseline ×
//! (1 + tolerance)` — of which the fraction `smoothing` is applied per window. A decrease goes by the lower
//! round trip of this window and the last, so it takes two windows over the target in a row.
//!
//! Against a backend that serves `C` requests at once and queues the rest, the round trip is the baseline
//! while the limit `L ≤ C` and `baseline × L / C` above it. So above the knee each window moves the limit
//! `smoothing` of the way to `(1 + tolerance) × C`: the equilibrium is the knee plus the allowed queueing,
//! whatever the limit was before.
//!
//! Growth, when a window shows no queueing (round trip within half the tolerance of the baseline, or no
//! higher than the last window's although the limit grew by 4% or more), is
//! shaped like TCP CUBIC's around the limit of the last congested window (`knee`): far below it (under 85%,
//! or before any congestion) the limit grows as in a slow start (× `1 + tolerance × 2^n` at the n-th such
//! window in a row, at most × 1.5), so a capacity that comes back is found within a few windows; close below
//! it, by the plain gradient, which slows down as the knee nears, so a dip caused by noise does not
//! overshoot; above it, by a slow start again from the second such window in a row — the knee has moved up.

use super::{Control, LimiterConfig, WindowResult};

/// Growth factor cap of the slow start.
const MAX_GROWTH: f64 = 1.5;
/// Below this fraction of the last congested limit, growth is a slow start.
const NEAR: f64 = 0.85;

#[derive(Default)]
pub(super) struct Gradient {
    /// Consecutive windows without queueing in the current growth region.
    streak: u32,
    /// The limit at the last window over the target.
    knee: Option<f64>,
    /// The previous window's (limit, round trip).
    prev: Option<(f64, f64)>,
}

impl Control for Gradient {
    fn next(&mut self, cfg: &LimiterConfig, w: &WindowResult, limit: f64) -> f64 {
        let base = w.baseline as f64;
        let rtt = w.rtt as f64;
        let target = base * (1.0 + cfg.tolerance);
        // The round trip stayed flat while the limit grew: below the knee, whatever the baseline's error.
        let flat = self.prev.replace((limit, rtt)).is_some_and(|(l0, r0)| {
            let grew = limit / l0 - 1.0;
            grew >= 0.04 && rtt <= r0 * (1.0 + grew / 3.0)
        });
        if w.app_limited && rtt <= target {
            // The window did not use the limit: its round trips say nothing about a higher one.
            self.streak = 0;
            return limit;
        }
        if flat || rtt <= base * (1.0 + cfg.tolerance / 2.0) {
            let (far_below, above) = match self.knee {
                None => (true, false),
                Some(k) => (limit < NEAR * k, limit >= k),
            };
            if far_below || above {
                self.streak = self.streak.saturating_add(1);
                // Far below: a slow start at once. Above the last knee: once the second window in a row
                // says the knee has moved up (the first could be luck).
                let n = if far_below {
                    self.streak
                } else {
                    self.streak - 1
                };
                if n > 0 {
                    let boost = cfg.tolerance * 2f64.powi(n.min(16) as i32);
                    return limit * (1.0 + boost).min(MAX_GROWTH.max(1.0 + cfg.tolerance));
                }
                return limit * (1.0 + cfg.smoothing * cfg.tolerance);
            }
            // Close below the last knee: the plain gradient, which slows down as the knee nears.
        }
        self.streak = 0;
        if rtt > target {
            // A decrease goes by the better of this window and the last: one spoiled window only holds.
            let rtt = rtt.min(w.sustained as f64);
            if rtt <= target {
                return limit;
            }
            self.knee = Some(limit);
            let g = (target / rtt).max(0.5);
            return limit * (1.0 + cfg.smoothing * (g - 1.0));
        }
        let g = (target / rtt).clamp(0.5, 1.0 + cfg.tolerance);
        limit * (1.0 + cfg.smoothing * (g - 1.0))
    }
}
