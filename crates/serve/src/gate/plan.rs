//! How the gate's workers are laid out — the lanes, their limits, the workers reserved to classes — and the
//! limit a lane admits when its backends have lost part of their capacity: plain data the configuration
//! compiles to, and the one rule of scaling.

use std::sync::Arc;

use ordo_sched::limit::LimiterConfig;

/// How many requests one lane may serve at once.
#[derive(Clone, Debug, PartialEq)]
pub enum LaneLimit {
    Fixed(usize),
    Adaptive(LimiterConfig),
}

/// The key of the one pool when `workers` is a number.
pub const SHARED_LANE: &str = "*";

/// One lane of a [`PoolPlan`]: the routes whose requests share a limit and a queue.
#[derive(Clone, Debug, PartialEq)]
pub struct LanePlan {
    /// The route prefix or group name (`"*"`: the one pool of a fixed `workers`).
    pub key: Arc<str>,
    pub limit: LaneLimit,
}

/// How the workers are laid out: the lanes, and the workers each class has reserved in every lane.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolPlan {
    pub lanes: Vec<LanePlan>,
    /// Per class index of the scheduler configuration (missing entries: 0).
    pub reserved: Vec<usize>,
}

impl PoolPlan {
    /// One pool of `workers` shared by everything, nothing reserved.
    pub fn fixed(workers: usize) -> PoolPlan {
        PoolPlan {
            lanes: vec![LanePlan {
                key: Arc::from(SHARED_LANE),
                limit: LaneLimit::Fixed(workers.max(1)),
            }],
            reserved: Vec::new(),
        }
    }
}

/// A whole lane's limit in force, in thousandths.
pub const FULL_SHARE: u32 = 1000;

/// A lane's limit in force when its backends can take only `share` thousandths of their capacity: the
/// limit scaled to the nearest worker, at least one, and at least one more than the workers reserved to
/// classes (so every reservation still holds and one worker is shared).
pub fn scaled_limit(limit: usize, share: u32, reserved: usize) -> usize {
    if share >= FULL_SHARE {
        return limit;
    }
    let full = FULL_SHARE as usize;
    let scaled = (limit * share as usize + full / 2) / full;
    scaled.max(1).max(reserved + 1).min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_limit_rounds_up_and_keeps_the_reservations() {
        // (limit, share, reserved) → limit in force
        for (limit, share, reserved, want) in [
            (6, 1000, 0, 6),
            (6, 334, 0, 2),
            (6, 333, 0, 2),
            (6, 667, 0, 4),
            (8, 334, 0, 3),
            (8, 1, 0, 1),
            (8, 0, 0, 1),
            (8, 100, 2, 3),
            (3, 100, 2, 3),
            (100, 500, 10, 50),
        ] {
            assert_eq!(
                scaled_limit(limit, share, reserved),
                want,
                "{limit} × {share}‰ with {reserved} reserved"
            );
        }
    }
}
