//! Property tests of `Scheduler::cancel` (a queued request whose client went away): random interleavings of
//! enqueue, dispatch, cancel, expire and reconfigure under every policy keep the counts exact (len,
//! class_len, caps), never dispatch, expire or drain a cancelled request, and never show one to a custom
//! picker; under edf the admission estimate ignores cancelled requests at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ordo_sched::{
    ClassId, ClassSpec, Head, HeadPicker, Meta, Nanos, PolicyKind, RejectReason, SchedConfig,
    Scheduler, Ticket,
};
use proptest::prelude::*;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// The custom policy's picker: checks that every head it is shown is a live request (size hints are
/// unique per request), then picks the longest queue.
struct Checking(Arc<Mutex<HashSet<u64>>>);

impl HeadPicker for Checking {
    fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
        let live = self.0.lock().unwrap();
        for h in heads {
            assert!(h.queued > 0, "an empty class among the heads");
            assert!(
                live.contains(&h.size_hint),
                "the picker was shown request {} that is not queued",
                h.size_hint
            );
        }
        heads.iter().max_by_key(|h| h.queued).map(|h| h.class)
    }
}

#[derive(Clone, Debug)]
struct ClassGen {
    name: usize,
    weight: u32,
    priority: i32,
    cap: Option<usize>,
    timeout: Option<Nanos>,
    age_after: Option<Nanos>,
    deadline: Option<Nanos>,
}

#[derive(Clone, Debug)]
struct CfgGen {
    policy: PolicyKind,
    classes: Vec<ClassGen>,
    global_cap: Option<usize>,
}

fn class_gen() -> impl Strategy<Value = ClassGen> {
    (
        0usize..4,
        1u32..5,
        0i32..3,
        prop::option::of(1usize..6),
        prop::option::of(200u64..800),
        prop::option::of(50u64..300),
        prop::option::of(100u64..600),
    )
        .prop_map(
            |(name, weight, priority, cap, timeout, age_after, deadline)| ClassGen {
                name,
                weight,
                priority,
                cap,
                timeout,
                age_after,
                deadline,
            },
        )
}

fn cfg_gen() -> impl Strategy<Value = CfgGen> {
    (
        prop::sample::select(PolicyKind::ALL.to_vec()),
        prop::collection::vec(class_gen(), 1..4),
        prop::option::of(3usize..14),
    )
        .prop_map(|(policy, classes, global_cap)| CfgGen {
            policy,
            classes,
            global_cap,
        })
}

impl CfgGen {
    /// The configuration (duplicate names dropped: names must be unique).
    fn build(&self) -> SchedConfig {
        let mut seen = HashSet::new();
        let classes = self
            .classes
            .iter()
            .filter(|c| seen.insert(c.name))
            .map(|c| {
                let mut s = ClassSpec::new(NAMES[c.name])
                    .weight(c.weight)
                    .priority(c.priority);
                s.queue_cap = c.cap;
                s.queue_timeout = c.timeout;
                s.age_after = c.age_after;
                s.deadline = c.deadline;
                s
            })
            .collect();
        let mut cfg = SchedConfig::new(classes, self.policy);
        cfg.global_queue_cap = self.global_cap;
        cfg.seed = 7;
        cfg
    }
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        class: usize,
        size: u64,
        deadline: Option<Nanos>,
    },
    Dispatch,
    /// Cancel the ticket at this index (modulo) among every ticket ever issued, live or not.
    Cancel(usize),
    Expire,
    Reconfigure(CfgGen),
    Observe(usize, Nanos),
}

fn op_gen() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..5, 0u64..1000, prop::option::of(0u64..2000)).prop_map(|(class, size, deadline)| {
            Op::Enqueue { class, size, deadline }
        }),
        3 => Just(Op::Dispatch),
        5 => (0usize..1000).prop_map(Op::Cancel),
        1 => Just(Op::Expire),
        1 => cfg_gen().prop_map(Op::Reconfigure),
        1 => (0usize..4, 1u64..200).prop_map(|(c, s)| Op::Observe(c, s)),
    ]
}

fn new_sched(cfg: SchedConfig, live: &Arc<Mutex<HashSet<u64>>>) -> Scheduler<u64> {
    if cfg.policy == PolicyKind::Custom {
        Scheduler::with_picker(cfg, Box::new(Checking(live.clone()))).unwrap()
    } else {
        Scheduler::new(cfg).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The model: the set of live requests with their class names. After every operation the scheduler's
    /// counts match it, caps are applied to live requests only, and whatever leaves the scheduler
    /// (dispatch, expire, cancel, drain) was live and leaves exactly once.
    #[test]
    fn cancel_interleavings_keep_every_policy_consistent(
        first in cfg_gen(),
        ops in prop::collection::vec(op_gen(), 1..250),
    ) {
        let shared: Arc<Mutex<HashSet<u64>>> = Arc::default();
        let mut cfg = first.build();
        let mut s = new_sched(cfg.clone(), &shared);
        s.set_capacity(2);
        // request id -> class name; ids double as (unique) size hints so the picker can check heads
        let mut live: BTreeMap<u64, String> = BTreeMap::new();
        // request id -> its deadline to start (its own, else its class's at enqueue)
        let mut deadline_of: HashMap<u64, Nanos> = HashMap::new();
        // dropped by an edf dispatch for a passed deadline, handed out by the next expire (or drain)
        let mut gone: HashSet<u64> = HashSet::new();
        let mut tickets: Vec<(Ticket, u64)> = Vec::new();
        let mut now: Nanos = 0;
        let mut next_id: u64 = 0;
        for op in ops {
            now += 7;
            match op {
                Op::Enqueue { class, size, deadline } => {
                    let id = (size << 20) | next_id;
                    next_id += 1;
                    let m = Meta { class, size_hint: id, deadline: deadline.map(|d| now + d), arrival: now };
                    let c = if class < cfg.classes.len() { class } else { 0 };
                    let name = cfg.classes[c].name.clone();
                    let in_class = live.values().filter(|n| **n == name).count();
                    shared.lock().unwrap().insert(id);
                    match s.enqueue_ticket(id, m, now) {
                        Ok(t) => {
                            prop_assert!(cfg.classes[c].queue_cap.is_none_or(|cap| in_class < cap));
                            prop_assert!(cfg.global_queue_cap.is_none_or(|cap| live.len() < cap));
                            live.insert(id, name);
                            if let Some(d) = m.deadline.or(cfg.classes[c].deadline.map(|d| now + d)) {
                                deadline_of.insert(id, d);
                            }
                            tickets.push((t, id));
                        }
                        Err(r) => {
                            shared.lock().unwrap().remove(&id);
                            prop_assert_eq!(r.item, id);
                            let expect = if cfg.classes[c].queue_cap.is_some_and(|cap| in_class >= cap) {
                                RejectReason::ClassQueueFull
                            } else if cfg.global_queue_cap.is_some_and(|cap| live.len() >= cap) {
                                RejectReason::GlobalQueueFull
                            } else {
                                // Only edf admission may refuse a request under its caps.
                                prop_assert_eq!(cfg.policy, PolicyKind::Edf, "refused {:?}", r.reason);
                                RejectReason::DeadlineUnreachable
                            };
                            prop_assert_eq!(r.reason, expect);
                        }
                    }
                }
                Op::Dispatch => {
                    if cfg.policy == PolicyKind::Edf {
                        let late: Vec<u64> = live
                            .keys()
                            .copied()
                            .filter(|id| deadline_of.get(id).is_some_and(|d| *d < now))
                            .collect();
                        for id in late {
                            live.remove(&id);
                            shared.lock().unwrap().remove(&id);
                            gone.insert(id);
                        }
                    }
                    let d = s.dispatch(now);
                    prop_assert_eq!(d.is_some(), !live.is_empty());
                    if let Some(d) = d {
                        let name = live.remove(&d.item);
                        prop_assert!(name.is_some(), "dispatched {} which is not queued", d.item);
                        prop_assert_eq!(name.unwrap(), cfg.classes[d.meta.class].name.clone());
                        shared.lock().unwrap().remove(&d.item);
                    }
                }
                Op::Cancel(i) => {
                    if !tickets.is_empty() {
                        let (t, id) = tickets[i % tickets.len()];
                        let was = live.remove(&id).is_some();
                        prop_assert_eq!(s.is_queued(t), was);
                        prop_assert_eq!(s.cancel(t), was.then_some(id));
                        prop_assert!(!s.is_queued(t));
                        shared.lock().unwrap().remove(&id);
                    }
                }
                Op::Expire => {
                    now += 150;
                    let mut out = Vec::new();
                    s.expire(now, &mut out);
                    for r in out {
                        let was = live.remove(&r.item).is_some() || gone.remove(&r.item);
                        prop_assert!(was, "expired {} which is not queued", r.item);
                        shared.lock().unwrap().remove(&r.item);
                    }
                }
                Op::Reconfigure(g) => {
                    let new = g.build();
                    for name in live.values_mut() {
                        if new.class_by_name(name).is_none() {
                            *name = new.classes[0].name.clone();
                        }
                    }
                    // A picker is needed when switching to custom from a built-in policy.
                    let picker: Option<Box<dyn HeadPicker>> = (new.policy == PolicyKind::Custom)
                        .then(|| Box::new(Checking(shared.clone())) as Box<dyn HeadPicker>);
                    s.reconfigure(new.clone(), picker).unwrap();
                    cfg = new;
                }
                Op::Observe(c, service) => s.observe_service(c, service),
            }
            prop_assert_eq!(s.len(), live.len());
            prop_assert_eq!(s.is_empty(), live.is_empty());
            for (c, spec) in cfg.classes.iter().enumerate() {
                let n = live.values().filter(|n| **n == spec.name).count();
                prop_assert_eq!(s.class_len(c), n, "class {}", spec.name);
            }
        }
        // Nothing cancelled (or otherwise gone) comes back from drain; everything live does.
        let mut out = Vec::new();
        s.drain(&mut out);
        let drained: HashSet<u64> = out.iter().copied().collect();
        prop_assert_eq!(drained.len(), out.len());
        prop_assert_eq!(drained, live.keys().chain(&gone).copied().collect::<HashSet<u64>>());
        for (t, _) in tickets {
            prop_assert_eq!(s.cancel(t), None);
        }
    }

    /// edf's admission estimate counts exactly the live requests: with each class's deadlines from its
    /// relative deadline (sorted queues) the estimate equals the model's, through cancels from anywhere in
    /// the queues, dispatches and expiries, and a request is admitted exactly when the model says it can
    /// start in time.
    #[test]
    fn edf_estimate_ignores_cancelled_requests(
        rel in prop::collection::vec(100u64..5_000, 1..4),
        service in prop::collection::vec(1u64..50, 4),
        capacity in 1usize..4,
        ops in prop::collection::vec((0u8..10, 0usize..1000, 0u64..20), 1..400),
    ) {
        let classes = rel
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut c = ClassSpec::new(format!("c{i}"));
                c.deadline = Some(*d);
                c
            })
            .collect();
        let mut s: Scheduler<u64> = Scheduler::new(SchedConfig::new(classes, PolicyKind::Edf)).unwrap();
        s.set_capacity(capacity);
        for (c, sv) in service.iter().enumerate().take(rel.len()) {
            s.observe_service(c, *sv);
        }
        // id -> (class, absolute deadline)
        let mut live: BTreeMap<u64, (usize, Nanos)> = BTreeMap::new();
        let mut tickets: Vec<(Ticket, u64)> = Vec::new();
        let model = |live: &BTreeMap<u64, (usize, Nanos)>, d: Nanos, now: Nanos| -> Nanos {
            let work: u128 = live
                .values()
                .filter(|(_, dl)| *dl <= d)
                .map(|(c, _)| u128::from(service[*c]))
                .sum();
            now + (work / capacity as u128) as Nanos
        };
        let mut now: Nanos = 0;
        for (step, (kind, pick, dt)) in ops.into_iter().enumerate() {
            now += dt;
            match kind {
                0..=4 => {
                    let c = pick % rel.len();
                    let d = now + rel[c];
                    let admit = model(&live, d, now) <= d;
                    let id = step as u64;
                    match s.enqueue_ticket(id, Meta::new(c, now), now) {
                        Ok(t) => {
                            prop_assert!(admit, "admitted against the model");
                            live.insert(id, (c, d));
                            tickets.push((t, id));
                        }
                        Err(r) => {
                            prop_assert!(!admit, "refused against the model");
                            prop_assert_eq!(r.reason, RejectReason::DeadlineUnreachable);
                        }
                    }
                }
                5..=7 => {
                    if !tickets.is_empty() {
                        let (t, id) = tickets.swap_remove(pick % tickets.len());
                        prop_assert_eq!(s.cancel(t), live.remove(&id).map(|_| id));
                    }
                }
                8 => {
                    // the requests whose deadline has passed are dropped first (handed out by expire)
                    live.retain(|_, (_, dl)| *dl >= now);
                    if let Some(d) = s.dispatch(now) {
                        // Earliest deadline first among the live requests.
                        let min = live.values().map(|(_, dl)| *dl).min();
                        let (_, dl) = live.remove(&d.item).expect("dispatched a live request");
                        prop_assert_eq!(Some(dl), min);
                    }
                }
                _ => {
                    let mut out = Vec::new();
                    s.expire(now, &mut out);
                    for r in out {
                        if let Some((_, dl)) = live.remove(&r.item) {
                            prop_assert!(dl < now);
                        }
                    }
                }
            }
            prop_assert_eq!(s.len(), live.len());
            for probe in [now, now + 50, now + 300, now + 1_000, now + 2_500, now + 6_000] {
                prop_assert_eq!(s.estimated_start(probe, now), model(&live, probe, now), "d = {}", probe);
            }
        }
    }
}
