//! Overload control inside a class: a CoDel-style standing-queue detector (Nichols and Jacobson, RFC 8289)
//! that answers the class's oldest requests 503 while its queue stays above a delay target, and adaptive
//! LIFO (serve the newest request first while the queue is standing, as Facebook's "Fail at Scale"
//! describes), both acting *after* the policy has chosen the class.
//!
//! The detector runs at dispatch, on the sojourn of the class's oldest queued request: once that has stayed
//! at or above `target` for a whole `interval`, the class is *standing*; with `drop`, the oldest request is
//! dropped then and again at `interval / sqrt(count)` spacing while the queue stays standing (CoDel's
//! control law), and the drop rate starts near where it left off when the queue turns standing again soon
//! after. Pure state machine: time is passed in.

use crate::Nanos;

/// A class's overload-control parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelSpec {
    /// Acceptable standing queue delay (CoDel's `TARGET`).
    pub target: Nanos,
    /// How long the oldest request's sojourn must stay at or above `target` before the queue counts as
    /// standing; also the base of the drop spacing (CoDel's `INTERVAL`).
    pub interval: Nanos,
    /// Drop (503 `standing_queue`) the oldest request at CoDel's pace while standing. Without it the
    /// detector only drives adaptive LIFO.
    pub drop: bool,
    /// While standing, serve the class's newest request instead of its oldest.
    pub lifo: bool,
}

impl CodelSpec {
    /// A detector with `target` and `interval` that drops, without LIFO.
    pub fn new(target: Nanos, interval: Nanos) -> Self {
        CodelSpec {
            target,
            interval,
            drop: true,
            lifo: false,
        }
    }
}

/// What to do with the class's oldest request at this dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Serve,
    Drop,
}

/// One class's CoDel state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Codel {
    /// When the sojourn, above target since then, will have been so for an interval.
    first_above: Option<Nanos>,
    dropping: bool,
    drop_next: Nanos,
    count: u32,
    last_count: u32,
}

/// CoDel's control law: the next drop `interval / sqrt(count)` after `t`.
fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    t.saturating_add((interval as f64 / f64::from(count.max(1)).sqrt()) as Nanos)
}

impl Codel {
    /// Whether the queue is standing now (the oldest request's sojourn has been above target for an
    /// interval, as of the last dispatch).
    pub fn standing(&self) -> bool {
        self.dropping
    }

    /// Drops since the queue last turned standing.
    #[cfg(test)]
    pub fn count(&self) -> u32 {
        self.count
    }

    fn ok_to_drop(&mut self, spec: &CodelSpec, now: Nanos, sojourn: Nanos, last: bool) -> bool {
        if sojourn < spec.target || last {
            // Below target, or the request is the only one queued: no standing queue.
            self.first_above = None;
            return false;
        }
        match self.first_above {
            None => {
                self.first_above = Some(now.saturating_add(spec.interval));
                false
            }
            Some(t) => now >= t,
        }
    }

    /// The class is about to be served at `now`; its oldest request has waited `sojourn`, and `last` says it
    /// is the only one queued. `Drop` means: answer that request 503 and ask again (the caller then offers
    /// the next oldest, or the policy picks again).
    pub fn on_dispatch(
        &mut self,
        spec: &CodelSpec,
        now: Nanos,
        sojourn: Nanos,
        last: bool,
    ) -> Verdict {
        let ok = self.ok_to_drop(spec, now, sojourn, last);
        if self.dropping {
            if !ok {
                self.dropping = false;
                return Verdict::Serve;
            }
            if now >= self.drop_next {
                self.count = self.count.saturating_add(1);
                self.drop_next = control_law(self.drop_next, spec.interval, self.count);
                return Verdict::Drop;
            }
            return Verdict::Serve;
        }
        if ok {
            self.dropping = true;
            // Turning standing again soon after the last episode: resume near its drop rate.
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1
                && now.saturating_sub(self.drop_next) < spec.interval.saturating_mul(16)
            {
                delta
            } else {
                1
            };
            self.last_count = self.count;
            self.drop_next = control_law(now, spec.interval, self.count);
            return Verdict::Drop;
        }
        Verdict::Serve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn drops_only_after_an_interval_above_target_then_by_the_control_law() {
        let spec = CodelSpec::new(5 * MS, 100 * MS);
        let mut c = Codel::default();
        // Above target from t=0: nothing dropped during the first interval.
        for t in (0..100).map(|i| i * MS) {
            assert_eq!(
                c.on_dispatch(&spec, t, 20 * MS, false),
                Verdict::Serve,
                "{t}"
            );
        }
        assert!(!c.standing());
        assert_eq!(
            c.on_dispatch(&spec, 100 * MS, 20 * MS, false),
            Verdict::Drop
        );
        assert!(c.standing());
        // Next drop at 100 + 100/sqrt(1) = 200 ms, then + 100/sqrt(2) ≈ 70.7 ms.
        assert_eq!(
            c.on_dispatch(&spec, 150 * MS, 20 * MS, false),
            Verdict::Serve
        );
        assert_eq!(
            c.on_dispatch(&spec, 200 * MS, 20 * MS, false),
            Verdict::Drop
        );
        assert_eq!(
            c.on_dispatch(&spec, 270 * MS, 20 * MS, false),
            Verdict::Serve
        );
        assert_eq!(
            c.on_dispatch(&spec, 271 * MS, 20 * MS, false),
            Verdict::Drop
        );
        assert_eq!(c.count(), 3);
        // Below target: standing ends at once.
        assert_eq!(c.on_dispatch(&spec, 280 * MS, MS, false), Verdict::Serve);
        assert!(!c.standing());
    }

    #[test]
    fn a_single_queued_request_is_not_a_standing_queue() {
        let spec = CodelSpec::new(MS, 10 * MS);
        let mut c = Codel::default();
        for t in 0..100 {
            assert_eq!(c.on_dispatch(&spec, t * MS, 50 * MS, true), Verdict::Serve);
        }
    }

    #[test]
    fn re_entering_soon_resumes_the_drop_rate() {
        let spec = CodelSpec::new(MS, 100 * MS);
        let mut c = Codel::default();
        let mut t = 0;
        c.on_dispatch(&spec, t, 10 * MS, false);
        let mut drops = 0;
        while drops < 6 {
            t += MS;
            if c.on_dispatch(&spec, t, 10 * MS, false) == Verdict::Drop {
                drops += 1;
            }
        }
        assert_eq!(c.count(), 6);
        c.on_dispatch(&spec, t + MS, 0, false);
        // Standing again within 16 intervals: count resumes at 6 - 1 = 5, not 1.
        let t2 = t + 10 * MS;
        c.on_dispatch(&spec, t2, 10 * MS, false);
        assert_eq!(
            c.on_dispatch(&spec, t2 + 100 * MS, 10 * MS, false),
            Verdict::Drop
        );
        assert_eq!(c.count(), 5);
    }
}
