//! Stages (k6's `stages`): a run made of consecutive stages, each moving the load linearly from where the
//! previous one ended to its target — the concurrency in a closed loop (clients switched on and off), the
//! request rate in an open loop (the due time of each request slot from the integral of the rate). The
//! engine asks the [`Ramp`] when a client may run and when a slot is due; the report gives each stage its
//! own counts and latency.

use std::time::Duration;

/// One stage: over `duration`, the load moves linearly to `target` (clients, or requests per second with
/// `--rate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    pub target: f64,
}

impl Stage {
    /// `DURATION:TARGET`, e.g. `10s:50` or `1m:2000`.
    pub fn parse(s: &str) -> Result<Stage, String> {
        let (d, t) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}`: expected DURATION:TARGET, e.g. 10s:50"))?;
        let duration = crate::parse_duration(d.trim()).map_err(|e| format!("`{s}`: {e}"))?;
        let target: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: the target `{}` is not a number", t.trim()))?;
        Ok(Stage { duration, target })
    }
}

/// What a ramp moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Clients,
    Rate,
}

impl Unit {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Unit::Clients => "connections",
            Unit::Rate => "req/s",
        }
    }
}

/// One stage in seconds from the measured start: `[t0, t0 + len)`, `from` → `to`, and (open loop) the
/// requests due before it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub t0: f64,
    pub len: f64,
    pub from: f64,
    pub to: f64,
    cum0: f64,
}

impl Segment {
    fn at(&self, t: f64) -> f64 {
        if self.len <= 0.0 {
            return self.to;
        }
        self.from + (self.to - self.from) * ((t - self.t0) / self.len).clamp(0.0, 1.0)
    }

    fn total(&self) -> f64 {
        (self.from + self.to) / 2.0 * self.len
    }
}

/// The run's stages as piecewise-linear load over time.
#[derive(Clone, Debug)]
pub(crate) struct Ramp {
    pub unit: Unit,
    pub segments: Vec<Segment>,
}

/// Slack for float comparisons (a level of exactly 3 runs 3 clients).
const EPS: f64 = 1e-9;

impl Ramp {
    /// Stages starting from `start` (0 clients, or the `--rate` value).
    pub(crate) fn new(unit: Unit, start: f64, stages: &[Stage]) -> Ramp {
        let mut segments = Vec::with_capacity(stages.len());
        let (mut t, mut from, mut cum) = (0.0, start, 0.0);
        for s in stages {
            let seg = Segment {
                t0: t,
                len: s.duration.as_secs_f64(),
                from,
                to: s.target,
                cum0: cum,
            };
            cum += seg.total();
            t += seg.len;
            from = s.target;
            segments.push(seg);
        }
        Ramp { unit, segments }
    }

    pub(crate) fn len(&self) -> usize {
        self.segments.len()
    }

    /// The stage holding time `t` (seconds from the measured start); past the end, none.
    pub(crate) fn stage_at(&self, t: f64) -> Option<usize> {
        self.segments
            .iter()
            .position(|s| t >= s.t0 && t < s.t0 + s.len)
    }

    /// The load at `t`.
    #[cfg(test)]
    pub(crate) fn level(&self, t: f64) -> f64 {
        match self.stage_at(t) {
            Some(i) => self.segments[i].at(t),
            None => self.segments.last().map_or(0.0, |s| s.to),
        }
    }

    /// Closed loop: the earliest time from `t` on when at least `need` clients run (client `j` runs while
    /// the level is at least `j + 1`); none before the end.
    pub(crate) fn first_at_least(&self, t: f64, need: f64) -> Option<f64> {
        for s in &self.segments {
            let end = s.t0 + s.len;
            if end <= t {
                continue;
            }
            let from = t.max(s.t0);
            if s.at(from) + EPS >= need {
                return Some(from);
            }
            if s.to > s.from && s.to + EPS >= need {
                let at = s.t0 + (need - s.from) / (s.to - s.from) * s.len;
                return Some(at.max(from));
            }
        }
        None
    }

    /// Open loop: when slot `n` (0-based) is due — when the integral of the rate reaches `n`; none when
    /// the stages end first.
    pub(crate) fn time_of_slot(&self, n: f64) -> Option<f64> {
        for s in &self.segments {
            if s.cum0 + s.total() < n - EPS {
                continue;
            }
            let k = n - s.cum0;
            if k <= 0.0 {
                return Some(s.t0);
            }
            // k = from·τ + (to − from)/(2·len)·τ², solved in the form stable for either sign of the slope
            let a = if s.len > 0.0 {
                (s.to - s.from) / (2.0 * s.len)
            } else {
                0.0
            };
            let b = s.from;
            let disc = (b * b + 4.0 * a * k).max(0.0);
            let den = b + disc.sqrt();
            if den <= 0.0 {
                continue;
            }
            let tau = (2.0 * k / den).min(s.len);
            return Some(s.t0 + tau);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(v: &[(u64, f64)]) -> Vec<Stage> {
        v.iter()
            .map(|&(s, target)| Stage {
                duration: Duration::from_secs(s),
                target,
            })
            .collect()
    }

    #[test]
    fn parses_duration_colon_target() {
        assert_eq!(
            Stage::parse("10s:50").unwrap(),
            Stage {
                duration: Duration::from_secs(10),
                target: 50.0
            }
        );
        assert_eq!(Stage::parse("500ms:2.5").unwrap().target, 2.5);
        assert!(Stage::parse("10s").unwrap_err().contains("DURATION:TARGET"));
        assert!(
            Stage::parse("10s:lots")
                .unwrap_err()
                .contains("`lots` is not a number")
        );
        assert!(Stage::parse("soon:5").is_err());
    }

    #[test]
    fn closed_loop_clients_switch_on_along_the_ramp_and_off_on_the_way_down() {
        // 0 → 10 clients over 10 s, hold 10 s, down to 2 over 4 s
        let r = Ramp::new(
            Unit::Clients,
            0.0,
            &stages(&[(10, 10.0), (10, 10.0), (4, 2.0)]),
        );
        assert_eq!(r.level(5.0), 5.0);
        // client j runs from when the level reaches j + 1
        assert_eq!(r.first_at_least(0.0, 1.0), Some(1.0));
        assert_eq!(r.first_at_least(0.0, 10.0), Some(10.0));
        assert_eq!(r.first_at_least(12.0, 10.0), Some(12.0));
        // on the way down (10 → 2 over 20–24 s) client 9 (needs 10) stops at once, client 2 (needs 3) once
        // the level is under 3 (after 23.5 s), neither runs again
        assert_eq!(r.first_at_least(20.5, 10.0), None);
        assert_eq!(r.first_at_least(22.0, 3.0), Some(22.0));
        assert_eq!(r.first_at_least(23.5, 3.0), Some(23.5));
        assert_eq!(r.first_at_least(23.6, 3.0), None);
        assert_eq!(r.first_at_least(23.6, 2.0), Some(23.6));
        assert_eq!(r.stage_at(0.0), Some(0));
        assert_eq!(r.stage_at(10.0), Some(1));
        assert_eq!(r.stage_at(23.9), Some(2));
        assert_eq!(r.stage_at(24.0), None);
    }

    #[test]
    fn open_loop_slots_follow_the_integral_of_the_rate() {
        // 100 req/s held 2 s (200 slots), then 100 → 300 over 2 s (400 slots)
        let r = Ramp::new(Unit::Rate, 100.0, &stages(&[(2, 100.0), (2, 300.0)]));
        assert_eq!(r.time_of_slot(0.0), Some(0.0));
        assert!((r.time_of_slot(100.0).unwrap() - 1.0).abs() < 1e-9);
        assert!((r.time_of_slot(200.0).unwrap() - 2.0).abs() < 1e-9);
        // after τ s of the ramp: 100τ + 50τ² slots; τ = 1 → 150
        assert!((r.time_of_slot(350.0).unwrap() - 3.0).abs() < 1e-9);
        assert!((r.time_of_slot(600.0).unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(r.time_of_slot(601.0), None);
        // every slot due in order, and the count per stage is the integral
        let mut last = 0.0;
        let mut per_stage = [0usize; 2];
        for n in 0..600 {
            let t = r.time_of_slot(n as f64).unwrap();
            assert!(t >= last);
            last = t;
            per_stage[r.stage_at(t).unwrap()] += 1;
        }
        assert_eq!(per_stage, [200, 400]);
        // a ramp down to 0: 100 → 0 over 2 s is 100 slots
        let r = Ramp::new(Unit::Rate, 100.0, &stages(&[(2, 0.0)]));
        assert!((r.time_of_slot(75.0).unwrap() - 1.0).abs() < 1e-9);
        assert!(r.time_of_slot(100.0).unwrap() <= 2.0);
        assert_eq!(r.time_of_slot(101.0), None);
    }
}
