//! The AIMD control law (additive increase, multiplicative decrease, as TCP Reno and Netflix's AIMD
//! limiter): a window in which a request failed, or that is the second in a row with a mean round trip over
//! the target, multiplies the limit by `backoff`; any other window that used at least half the limit adds `increase`. Until the
//! first congested window the limit grows as in a slow start (× `1 + tolerance × 2^(n-1)` at the n-th
//! window, at most × 1.5), so a start far below the knee costs a few windows, not one per request slot.
//!
//! The target is `latency_target` when set (an SLO: the limit settles where that latency is reached), else
//! `baseline × (1 + tolerance)`. Around the knee the limit saw-tooths between `backoff × (1 + tolerance) × C`
//! and `(1 + tolerance) × C`. After the slow start it climbs by `increase` per window, so it follows a
//! capacity that grows by much more slowly than the gradient does, and it is indifferent to how far over
//! the target a window was.

use super::{Control, LimiterConfig, WindowResult};

#[derive(Default)]
pub(super) struct Aimd {
    /// A window has been congested: slow start is over.
    congested_once: bool,
    streak: u32,
}

impl Control for Aimd {
    fn next(&mut self, cfg: &LimiterConfig, w: &WindowResult, limit: f64) -> f64 {
        let target = cfg
            .latency_target
            .map_or(w.baseline as f64 * (1.0 + cfg.tolerance), |t| t as f64);
        if w.dropped || w.sustained as f64 > target {
            self.congested_once = true;
            limit * cfg.backoff
        } else if w.app_limited || w.rtt as f64 > target {
            // Over the target once (maybe a stall): hold until the next window says more.
            limit
        } else if !self.congested_once {
            self.streak = self.streak.saturating_add(1);
            let boost = cfg.tolerance * 2f64.powi(self.streak.min(16) as i32 - 1);
            (limit * (1.0 + boost).min(1.5)).max(limit + cfg.increase)
        } else {
            limit + cfg.increase
        }
    }
}
