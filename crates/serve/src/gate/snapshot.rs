//! The gate's numbers for metrics and the status page: per lane, per class and in total, read under the
//! lock in one pass.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ordo_sched::PolicyKind;
use ordo_sched::limit::LimiterSnapshot;

use super::Gate;
use super::lane::{Lane, LimitState};

/// One lane's numbers.
#[derive(Clone, Debug)]
pub struct LaneSnapshot {
    /// Route prefix or group (`"*"`: the shared pool of a fixed `workers`).
    pub key: Arc<str>,
    pub limit: usize,
    pub busy: usize,
    pub queued: usize,
    /// The adaptive limiter's state (None for a fixed limit).
    pub limiter: Option<LimiterSnapshot>,
    pub retired: bool,
    /// The share of the limit in force, in thousandths ([`Gate::set_share`]; 1000: all).
    pub share: u32,
}

/// Numbers for metrics and status.
#[derive(Clone, Debug)]
pub struct GateSnapshot {
    pub busy: usize,
    /// Workers now: the sum of the current lanes' limits.
    pub workers: usize,
    pub queued: usize,
    pub class_names: Vec<Arc<str>>,
    pub class_queued: Vec<usize>,
    pub policy: PolicyKind,
    pub abandoned: u64,
    pub closed: bool,
    pub lanes: Vec<LaneSnapshot>,
    /// Per class: its queue is standing (CoDel) in some lane.
    pub class_standing: Vec<bool>,
    /// Per class: workers reserved to it in each lane (the lease's, while one holds).
    pub class_reserved: Vec<usize>,
    /// Per class: requests in flight (counted only in fleet mode or where workers are reserved; else 0).
    pub class_busy: Vec<usize>,
    /// Fleet mode: a lease sets the workers now.
    pub leased: bool,
}

impl Gate {
    /// Current numbers.
    pub fn snapshot(&self) -> GateSnapshot {
        let st = self.shared.lock();
        let current = st.lanes.iter().find(|l| !l.retired()).or(st.lanes.first());
        let names: Vec<Arc<str>> = current.map(|l| l.names.clone()).unwrap_or_default();
        let mut class_queued = vec![0; names.len()];
        let mut class_standing = vec![false; names.len()];
        let mut class_busy = vec![0; names.len()];
        for lane in &st.lanes {
            for (c, n) in lane.names.iter().enumerate() {
                if let Some(i) = names.iter().position(|m| m == n) {
                    class_queued[i] += lane.sched.class_len(c);
                    class_busy[i] += lane.class_busy.get(c).copied().unwrap_or(0);
                    class_standing[i] |= lane.sched.class_standing(c);
                }
            }
        }
        GateSnapshot {
            busy: st.lanes.iter().map(Lane::busy).sum(),
            workers: st
                .lanes
                .iter()
                .filter(|l| !l.retired())
                .map(Lane::limit)
                .sum(),
            queued: st.lanes.iter().map(|l| l.sched.len()).sum(),
            class_queued,
            class_standing,
            class_busy,
            leased: st.lease.is_some(),
            class_reserved: current.map(|l| l.reserved.clone()).unwrap_or_default(),
            class_names: names,
            policy: current.map_or(PolicyKind::Fcfs, |l| l.sched.config().policy),
            abandoned: self.shared.abandoned.load(Ordering::Relaxed),
            closed: st.closed,
            lanes: st
                .lanes
                .iter()
                .map(|l| LaneSnapshot {
                    key: l.key().clone(),
                    limit: l.limit(),
                    busy: l.busy(),
                    queued: l.sched.len(),
                    limiter: match &l.limit {
                        LimitState::Adaptive(lim) => Some(lim.snapshot()),
                        LimitState::Fixed(_) => None,
                    },
                    retired: l.retired(),
                    share: l.share,
                })
                .collect(),
        }
    }
}
