//! Property tests of the scheduling core, the checks named in issue 2: stride's one-dispatch share bound,
//! lottery's binomial bounds, strict priority and its aging, srpt's size order and aging bound, edf's
//! deadline order and admission, wfq's weighted work shares, and conservation of requests for every policy
//! through caps, timeouts and reconfiguration.

use std::collections::{BTreeMap, HashMap, HashSet};

use ordo_sched::{
    ClassId, ClassSpec, Head, HeadPicker, Meta, Nanos, PolicyKind, RejectReason, SchedConfig,
    Scheduler,
};
use proptest::prelude::*;

fn config(weights: &[u32], policy: PolicyKind) -> SchedConfig {
    let classes = weights
        .iter()
        .enumerate()
        .map(|(i, w)| ClassSpec::new(format!("c{i}")).weight(*w))
        .collect();
    SchedConfig::new(classes, policy)
}

fn meta(class: ClassId, arrival: Nanos, size: u64) -> Meta {
    Meta {
        class,
        size_hint: size,
        deadline: None,
        arrival,
    }
}

/// Keep every class backlogged: enqueue `depth` requests per class, refill the class that was served.
fn backlogged(s: &mut Scheduler<ClassId>, classes: usize, depth: usize) {
    for c in 0..classes {
        for _ in 0..depth {
            s.enqueue(c, meta(c, 0, 1), 0).unwrap();
        }
    }
}

struct FirstPicker;
impl HeadPicker for FirstPicker {
    fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
        heads.last().map(|h| h.class)
    }
}

fn new_sched<T>(cfg: SchedConfig) -> Scheduler<T> {
    if cfg.policy == PolicyKind::Custom {
        Scheduler::with_picker(cfg, Box::new(FirstPicker)).unwrap()
    } else {
        Scheduler::new(cfg).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Stride, every class backlogged: after every dispatch n, each class's count differs from its ideal
    /// share n*w/W by strictly less than one dispatch (checked exactly: |count*W - n*w| < W).
    #[test]
    fn stride_stays_within_one_dispatch_of_ideal(weights in prop::collection::vec(1u32..=64, 1..=8)) {
        let k = weights.len();
        let mut s = Scheduler::new(config(&weights, PolicyKind::Stride)).unwrap();
        backlogged(&mut s, k, 2);
        let total: i128 = weights.iter().map(|w| i128::from(*w)).sum();
        let mut count = vec![0i128; k];
        for n in 1..=(40 * total as usize).min(3000) {
            let c = s.dispatch(0).unwrap().item;
            count[c] += 1;
            s.enqueue(c, meta(c, 0, 1), 0).unwrap();
            for (i, w) in weights.iter().enumerate() {
                let err = count[i] * total - n as i128 * i128::from(*w);
                prop_assert!(err.abs() < total, "class {i} count {} after {n}, weights {weights:?}", count[i]);
            }
        }
    }

    /// Stride: a class that was idle rejoins at the current global pass; it gets no burst for its idle time.
    #[test]
    fn stride_returning_class_does_not_monopolise(w0 in 1u32..=16, w1 in 1u32..=16, idle in 10usize..200) {
        let mut s = Scheduler::new(config(&[w0, w1], PolicyKind::Stride)).unwrap();
        for _ in 0..2 { s.enqueue(0, meta(0, 0, 1), 0).unwrap(); }
        for _ in 0..idle {
            let c = s.dispatch(0).unwrap().item;
            s.enqueue(c, meta(c, 0, 1), 0).unwrap();
        }
        // class 1 returns with a deep backlog
        for _ in 0..1000 { s.enqueue(1, meta(1, 0, 1), 0).unwrap(); }
        let total = i128::from(w0 + w1);
        let mut got = 0i128;
        for n in 1..=200i128 {
            let c = s.dispatch(0).unwrap().item;
            if c == 1 { got += 1; } else { s.enqueue(0, meta(0, 0, 1), 0).unwrap(); }
            prop_assert!(got * total - n * i128::from(w1) < 2 * total, "class 1 got {got} of {n}");
        }
    }

    /// Strict priority without aging never serves a lower class while a higher one waits.
    #[test]
    fn priority_never_serves_lower_while_higher_waits(
        prios in prop::collection::vec(-3i32..3, 1..=6),
        ops in prop::collection::vec((0usize..6, any::<bool>()), 1..300),
    ) {
        let classes = prios.iter().enumerate().map(|(i, p)| ClassSpec::new(format!("c{i}")).priority(*p)).collect();
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Priority)).unwrap();
        for (t, (c, is_dispatch)) in ops.into_iter().enumerate() {
            let now = t as Nanos;
            if is_dispatch {
                let waiting_top = (0..prios.len()).filter(|&c| s.class_len(c) > 0).map(|c| prios[c]).max();
                let d = s.dispatch(now);
                prop_assert_eq!(d.as_ref().map(|d| prios[d.item]), waiting_top);
            } else {
                let c = c % prios.len();
                s.enqueue(c, meta(c, now, 1), now).unwrap();
            }
        }
    }

    /// srpt without aging: every dispatch returns a smallest queued size.
    #[test]
    fn srpt_serves_smallest_first(ops in prop::collection::vec((0usize..4, 0u64..50, any::<bool>()), 1..400)) {
        let mut s = Scheduler::new(config(&[1, 1, 1, 1], PolicyKind::Srpt)).unwrap();
        let mut model: BTreeMap<u64, usize> = BTreeMap::new();
        for (t, (c, size, is_dispatch)) in ops.into_iter().enumerate() {
            let now = t as Nanos;
            if is_dispatch {
                let d = s.dispatch(now);
                let min = model.keys().next().copied();
                prop_assert_eq!(d.as_ref().map(|d| d.meta.size_hint), min);
                if let Some(m) = min {
                    let e = model.get_mut(&m).unwrap();
                    *e -= 1;
                    if *e == 0 { model.remove(&m); }
                }
            } else {
                s.enqueue(t, meta(c, now, size), now).unwrap();
                *model.entry(size).or_default() += 1;
            }
        }
    }

    /// srpt with aging: under a continuous stream of small requests, a large request is dispatched at the
    /// first dispatch at or after arrival + age_after (no other request is aged before it).
    #[test]
    fn srpt_aging_bounds_large_request_wait(age in 1u64..500, step in 1u64..20, arrive_at in 0u64..100) {
        let mut cs = vec![ClassSpec::new("small"), ClassSpec::new("large")];
        cs[1].age_after = Some(age);
        let mut s = Scheduler::new(SchedConfig::new(cs, PolicyKind::Srpt)).unwrap();
        let mut now = 0;
        let mut large_enqueued = false;
        let mut served_at = None;
        for _ in 0..10 { s.enqueue(0u8, meta(0, 0, 1), 0).unwrap(); }
        while now < arrive_at + age + 10 * step + 100 {
            if !large_enqueued && now >= arrive_at {
                s.enqueue(1u8, meta(1, now, 1_000_000), now).unwrap();
                large_enqueued = true;
            }
            s.enqueue(0, meta(0, now, 1), now).unwrap();
            let d = s.dispatch(now).unwrap();
            if d.item == 1 {
                served_at = Some(now);
                prop_assert!(d.waited >= age, "served early after {}", d.waited);
                prop_assert!(d.waited < age + step, "waited {} with age_after {age}", d.waited);
                break;
            }
            now += step;
        }
        prop_assert!(served_at.is_some());
    }

    /// edf: serves in deadline order and admits exactly what the estimate says can start in time.
    #[test]
    fn edf_orders_by_deadline_and_rejects_unreachable(
        rel in prop::collection::vec(1u64..2000, 1..=4),
        service in 0u64..100,
        workers in 1usize..4,
        ops in prop::collection::vec((0usize..4, 0u64..30, any::<bool>()), 1..300),
    ) {
        let classes = rel.iter().enumerate().map(|(i, d)| {
            let mut c = ClassSpec::new(format!("c{i}"));
            c.deadline = Some(*d);
            c
        }).collect();
        let mut s = Scheduler::new(SchedConfig::new(classes, PolicyKind::Edf)).unwrap();
        s.set_capacity(workers);
        if service > 0 {
            for c in 0..rel.len() { s.observe_service(c, service); }
        }
        // model: queued (deadline, seq)
        let mut queued: Vec<(Nanos, usize)> = Vec::new();
        let mut now = 0;
        for (i, (c, dt, is_dispatch)) in ops.into_iter().enumerate() {
            now += dt;
            if is_dispatch {
                let mut out = Vec::new();
                s.expire(now, &mut out);
                for r in &out {
                    prop_assert_eq!(r.reason, RejectReason::DeadlineUnreachable);
                    prop_assert!(r.meta.deadline.unwrap() < now);
                }
                queued.retain(|(d, _)| *d >= now);
                prop_assert_eq!(queued.len(), s.len());
                let d = s.dispatch(now);
                let min = queued.iter().min().copied();
                prop_assert_eq!(d.as_ref().map(|d| (d.meta.deadline.unwrap(), d.item)), min);
                if let Some(m) = min { queued.retain(|x| *x != m); }
            } else {
                let c = c % rel.len();
                let deadline = now + rel[c];
                let ahead = queued.iter().filter(|(d, _)| *d <= deadline).count() as u64;
                let start = now + ahead * service / workers as u64;
                let r = s.enqueue(i, meta(c, now, 1), now);
                if start > deadline {
                    prop_assert_eq!(r.map_err(|r| r.reason), Err(RejectReason::DeadlineUnreachable));
                } else {
                    prop_assert!(r.is_ok());
                    queued.push((deadline, i));
                }
            }
        }
    }

    /// edf with caller-supplied deadlines in any order (and some without one), queue timeouts and
    /// deadline expiry: every dispatch first drops the requests whose deadline has passed (handed out by the
    /// next expire()) and returns the earliest (deadline, enqueue order) of the rest, and expire() removes
    /// exactly the requests whose deadline or timeout has passed.
    #[test]
    fn edf_any_deadline_order(
        ops in prop::collection::vec((0usize..3, prop::option::weighted(0.8, 0u64..500), 0u64..20, 0u8..3), 1..400),
    ) {
        let mut cfg = config(&[1, 1, 1], PolicyKind::Edf);
        cfg.classes[2].queue_timeout = Some(300);
        let mut s = Scheduler::new(cfg).unwrap();
        // model: (deadline key, id, class, arrival)
        let mut queued: Vec<(Nanos, usize, usize, Nanos)> = Vec::new();
        // dropped by a dispatch for a passed deadline, not yet handed out by expire()
        let mut dropped: Vec<usize> = Vec::new();
        let mut now = 0;
        for (i, (c, deadline, dt, op)) in ops.into_iter().enumerate() {
            now += dt;
            match op {
                0 => {
                    let mut m = meta(c, now, 1);
                    m.deadline = deadline.map(|d| now + d / 2 + d % 7);
                    let r = s.enqueue(i, m, now);
                    prop_assert!(r.is_ok());
                    queued.push((m.deadline.unwrap_or(Nanos::MAX), i, c, now));
                }
                1 => {
                    let mut out = Vec::new();
                    s.expire(now, &mut out);
                    let mut got: Vec<usize> = out.iter().map(|r| r.item).collect();
                    let mut want: Vec<usize> = queued
                        .iter()
                        .filter(|(d, _, c, a)| (*d != Nanos::MAX && now > *d) || (*c == 2 && now - a >= 300))
                        .map(|x| x.1)
                        .collect();
                    queued.retain(|x| !want.contains(&x.1));
                    want.append(&mut dropped);
                    got.sort_unstable();
                    want.sort_unstable();
                    prop_assert_eq!(&got, &want);
                    let next = queued
                        .iter()
                        .map(|(d, _, c, a)| {
                            let dl = if *d == Nanos::MAX { Nanos::MAX } else { d + 1 };
                            if *c == 2 { dl.min(a + 300) } else { dl }
                        })
                        .min()
                        .filter(|t| *t != Nanos::MAX);
                    prop_assert_eq!(s.next_expiry(), next);
                }
                _ => {
                    let late: Vec<usize> =
                        queued.iter().filter(|x| x.0 != Nanos::MAX && now > x.0).map(|x| x.1).collect();
                    queued.retain(|x| !late.contains(&x.1));
                    dropped.extend(late);
                    let d = s.dispatch(now);
                    let min = queued.iter().map(|x| (x.0, x.1)).min();
                    prop_assert_eq!(d.map(|d| d.item), min.map(|m| m.1));
                    if let Some(m) = min {
                        queued.retain(|x| x.1 != m.1);
                    }
                }
            }
            prop_assert_eq!(s.len(), queued.len());
        }
    }

    /// wfq, all classes backlogged with random sizes: normalised work never differs between two classes by
    /// more than the SFQ bound max_i/w_i + max_j/w_j.
    #[test]
    fn wfq_shares_work_by_weight(
        weights in prop::collection::vec(1u32..=8, 2..=4),
        sizes in prop::collection::vec(1u64..=100, 64),
    ) {
        let k = weights.len();
        let mut s = Scheduler::new(config(&weights, PolicyKind::Wfq)).unwrap();
        let mut next = 0usize;
        let mut size = || { next += 1; sizes[next % sizes.len()] };
        for c in 0..k { for _ in 0..2 { let z = size(); s.enqueue(c, meta(c, 0, z), 0).unwrap(); } }
        let mut work = vec![0f64; k];
        for _ in 0..2000 {
            let d = s.dispatch(0).unwrap();
            let c = d.item;
            work[c] += d.meta.size_hint as f64;
            let z = size();
            s.enqueue(c, meta(c, 0, z), 0).unwrap();
            for i in 0..k {
                for j in 0..k {
                    let diff = work[i] / f64::from(weights[i]) - work[j] / f64::from(weights[j]);
                    let bound = 100.0 / f64::from(weights[i]) + 100.0 / f64::from(weights[j]) + 1e-6;
                    prop_assert!(diff.abs() <= bound, "classes {i},{j}: {diff} > {bound}");
                }
            }
        }
    }

    /// Every policy, random enqueues, dispatches, expiries and reconfigurations with caps and timeouts:
    /// every accepted request leaves exactly once (dispatched, expired or drained), caps hold, dispatch
    /// returns something exactly when something is queued, and nothing dispatched right after expire()
    /// has outlived its queue timeout.
    #[test]
    fn every_request_accounted_for_exactly_once(
        policy in prop::sample::select(PolicyKind::ALL.to_vec()),
        ops in prop::collection::vec((0u8..4, 0usize..4, 0u64..40), 1..400),
        cap in 1usize..20,
        gcap in 5usize..50,
        timeout in 50u64..400,
    ) {
        let mut cfg = config(&[3, 2, 1], policy);
        cfg.classes[1].queue_cap = Some(cap);
        cfg.classes[2].queue_timeout = Some(timeout);
        cfg.classes[0].age_after = Some(timeout / 2);
        cfg.classes[0].deadline = Some(timeout * 2);
        cfg.global_queue_cap = Some(gcap);
        let mut s: Scheduler<usize> = new_sched(cfg.clone());
        let mut live: HashSet<usize> = HashSet::new();
        let mut left: HashSet<usize> = HashSet::new();
        let mut now = 0;
        let mut flip = false;
        for (i, (op, c, dt)) in ops.into_iter().enumerate() {
            now += dt;
            match op {
                0 | 1 => {
                    if s.enqueue(i, meta(c % 4, now, dt), now).is_ok() { live.insert(i); }
                }
                2 => {
                    let mut out = Vec::new();
                    s.expire(now, &mut out);
                    for r in out {
                        prop_assert!(live.remove(&r.item) && left.insert(r.item));
                    }
                    if let Some(d) = s.dispatch(now) {
                        prop_assert!(live.remove(&d.item) && left.insert(d.item));
                        if let Some(t) = s.config().timeout_of(d.meta.class) {
                            prop_assert!(d.waited < t);
                        }
                    } else {
                        prop_assert!(s.is_empty());
                    }
                }
                _ => {
                    // alternate between two class layouts and policies
                    flip = !flip;
                    let mut next = cfg.clone();
                    if flip {
                        next.classes.remove(1);
                        next.classes.reverse();
                        next.policy = PolicyKind::ALL[(i % 7) + usize::from(i % 11 == 0)];
                    }
                    let picker: Option<Box<dyn HeadPicker>> =
                        (next.policy == PolicyKind::Custom).then(|| Box::new(FirstPicker) as Box<dyn HeadPicker>);
                    s.reconfigure(next, picker).unwrap();
                }
            }
            prop_assert_eq!(s.len(), live.len());
            prop_assert!(s.len() <= gcap);
            if let Some(c1) = s.config().class_by_name("c1") {
                prop_assert!(s.class_len(c1) <= cap);
            }
            let per_class: usize = (0..s.config().classes.len()).map(|c| s.class_len(c)).sum();
            prop_assert_eq!(per_class, s.len());
        }
        let mut rest = Vec::new();
        s.drain(&mut rest);
        for item in rest {
            prop_assert!(live.remove(&item) && left.insert(item));
        }
        prop_assert!(live.is_empty());
    }
}

/// Lottery over fixed seeds: each class's share of N dispatches is within 4.5 binomial standard deviations.
#[test]
fn lottery_shares_within_binomial_bounds() {
    let cases: &[&[u32]] = &[
        &[4, 2, 1],
        &[1, 1],
        &[9, 1],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &[100, 1, 10],
    ];
    for (seed, weights) in [11u64, 42, 7, 2024, 99].into_iter().zip(cases) {
        let mut cfg = config(weights, PolicyKind::Lottery);
        cfg.seed = seed;
        let mut s = Scheduler::new(cfg).unwrap();
        backlogged(&mut s, weights.len(), 1);
        let n = 20_000u32;
        let mut count = vec![0u32; weights.len()];
        for _ in 0..n {
            let c = s.dispatch(0).unwrap().item;
            count[c] += 1;
            s.enqueue(c, meta(c, 0, 1), 0).unwrap();
        }
        let total: u32 = weights.iter().sum();
        for (c, w) in weights.iter().enumerate() {
            let p = f64::from(*w) / f64::from(total);
            let mean = f64::from(n) * p;
            let sigma = (f64::from(n) * p * (1.0 - p)).sqrt();
            let dev = (f64::from(count[c]) - mean).abs();
            assert!(
                dev <= 4.5 * sigma,
                "seed {seed} weights {weights:?} class {c}: {} vs {mean:.0} ± {sigma:.1}",
                count[c]
            );
        }
    }
}

/// Lottery is reproducible from its seed.
#[test]
fn lottery_is_deterministic_per_seed() {
    let run = |seed| {
        let mut cfg = config(&[3, 2, 1], PolicyKind::Lottery);
        cfg.seed = seed;
        let mut s = Scheduler::new(cfg).unwrap();
        backlogged(&mut s, 3, 100);
        (0..200)
            .map(|_| s.dispatch(0).unwrap().item)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

/// Priority with aging: a starved low class gets through once its head has waited age_after and is older
/// than the top level's head, and not before.
#[test]
fn priority_aging_lets_starved_class_through() {
    let mut cs = vec![
        ClassSpec::new("high").priority(10),
        ClassSpec::new("low").priority(0),
    ];
    cs[1].age_after = Some(100);
    let mut s = Scheduler::new(SchedConfig::new(cs, PolicyKind::Priority)).unwrap();
    for _ in 0..5 {
        s.enqueue("high", meta(0, 0, 1), 0).unwrap();
    }
    s.enqueue("low", meta(1, 0, 1), 0).unwrap();
    let mut t = 0;
    loop {
        let d = s.dispatch(t).unwrap();
        if d.item == "low" {
            assert_eq!(t, 100, "the low request is served as soon as it ages");
            break;
        }
        assert!(t < 100);
        t += 10;
        s.enqueue("high", meta(0, t, 1), t).unwrap();
    }
    // Without aging the same low request would still wait.
    let cs = vec![
        ClassSpec::new("high").priority(10),
        ClassSpec::new("low").priority(0),
    ];
    let mut s = Scheduler::new(SchedConfig::new(cs, PolicyKind::Priority)).unwrap();
    s.enqueue("low", meta(1, 0, 1), 0).unwrap();
    for t in 0..1000 {
        s.enqueue("high", meta(0, t, 1), t).unwrap();
        assert_eq!(s.dispatch(t).unwrap().item, "high");
    }
}

/// wfq: a class of small requests is served promptly while a class of large requests is backlogged.
#[test]
fn wfq_small_requests_not_starved_by_large() {
    let mut s = Scheduler::new(config(&[1, 1], PolicyKind::Wfq)).unwrap();
    for _ in 0..100 {
        s.enqueue(0, meta(0, 0, 1_000_000), 0).unwrap();
    }
    for round in 0..50 {
        s.enqueue(1, meta(1, 0, 100), 0).unwrap();
        assert_eq!(
            s.dispatch(0).unwrap().item,
            1,
            "round {round}: the small request goes first"
        );
        assert_eq!(s.dispatch(0).unwrap().item, 0);
        s.enqueue(0, meta(0, 0, 1_000_000), 0).unwrap();
    }
    // With equal weights and both backlogged, bytes are shared equally: 10 small per large of 10x size.
    let mut s = Scheduler::new(config(&[1, 1], PolicyKind::Wfq)).unwrap();
    let mut served = HashMap::new();
    for c in 0..2 {
        for _ in 0..2 {
            s.enqueue(c, meta(c, 0, if c == 0 { 1000 } else { 100 }), 0)
                .unwrap();
        }
    }
    for _ in 0..1100 {
        let d = s.dispatch(0).unwrap();
        *served.entry(d.item).or_insert(0u64) += d.meta.size_hint;
        s.enqueue(d.item, d.meta, 0).unwrap();
    }
    let (a, b) = (served[&0] as f64, served[&1] as f64);
    assert!((a / b - 1.0).abs() < 0.02, "work shares {a} vs {b}");
}

/// edf: a deadline already past is rejected, and the estimate uses observed service and capacity.
#[test]
fn edf_rejects_past_and_infeasible_deadlines() {
    let mut s = Scheduler::new(config(&[1], PolicyKind::Edf)).unwrap();
    let mut m = meta(0, 100, 1);
    m.deadline = Some(99);
    assert_eq!(
        s.enqueue(1, m, 100).unwrap_err().reason,
        RejectReason::DeadlineUnreachable
    );
    s.observe_service(0, 10);
    s.set_capacity(2);
    // Requests with deadline 1000: the k-th (0-based) starts at 100 + k*10/2.
    for k in 0..300u64 {
        let mut m = meta(0, 100, 1);
        m.deadline = Some(1000);
        let ok = s.enqueue(k, m, 100).is_ok();
        assert_eq!(ok, 100 + k * 10 / 2 <= 1000, "k={k}");
    }
    assert_eq!(s.len(), 181);
    // A request with an earlier deadline is ahead of all of them and is admitted.
    let mut m = meta(0, 100, 1);
    m.deadline = Some(150);
    s.enqueue(999, m, 100).unwrap();
    assert_eq!(s.dispatch(100).unwrap().item, 999);
    // Requests without a deadline are served after those with one.
    s.enqueue(7777, meta(0, 100, 1), 100).unwrap();
    let mut out = Vec::new();
    s.expire(1001, &mut out);
    assert_eq!(out.len(), 181);
    assert_eq!(s.dispatch(1001).unwrap().item, 7777);
}

/// The custom policy: a picker that names an empty or unknown class falls back to FCFS over the heads.
#[test]
fn custom_picker_invalid_pick_falls_back_to_fcfs() {
    struct Bad(usize);
    impl HeadPicker for Bad {
        fn pick(&mut self, _heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
            self.0 += 1;
            match self.0 % 3 {
                0 => Some(2),  // empty class
                1 => Some(99), // unknown class
                _ => None,
            }
        }
    }
    let mut s =
        Scheduler::with_picker(config(&[1, 1, 1], PolicyKind::Custom), Box::new(Bad(0))).unwrap();
    for i in 0..30usize {
        s.enqueue(i, meta(i % 2, i as Nanos, 1), i as Nanos)
            .unwrap();
    }
    let order: Vec<usize> = std::iter::from_fn(|| s.dispatch(100).map(|d| d.item)).collect();
    assert_eq!(order, (0..30).collect::<Vec<_>>());

    // A valid picker is obeyed; it sees each non-empty class's head, name and length.
    struct Longest;
    impl HeadPicker for Longest {
        fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
            assert!(
                heads
                    .iter()
                    .all(|h| h.class_name.starts_with('c') && h.queued > 0)
            );
            heads
                .iter()
                .max_by_key(|h| (h.queued, h.class))
                .map(|h| h.class)
        }
    }
    let mut s =
        Scheduler::with_picker(config(&[1, 1], PolicyKind::Custom), Box::new(Longest)).unwrap();
    s.enqueue(0, meta(0, 0, 1), 0).unwrap();
    for _ in 0..3 {
        s.enqueue(1, meta(1, 5, 1), 5).unwrap();
    }
    assert_eq!(s.dispatch(10).unwrap().item, 1);
    // reconfigure keeps the picker when none is given
    s.reconfigure(config(&[2, 1], PolicyKind::Custom), None)
        .unwrap();
    assert_eq!(s.dispatch(10).unwrap().item, 1);
}
