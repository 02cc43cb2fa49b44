//! Overload control inside a class (CoDel drops, adaptive LIFO) composed with every policy: the policy
//! picks the class, the class's control acts inside it. Deterministic: time is passed in.

use ordo_sched::{
    ClassId, ClassSpec, CodelSpec, Head, HeadPicker, Meta, Nanos, PolicyKind, RejectReason,
    SchedConfig, Scheduler,
};

const MS: Nanos = 1_000_000;

struct LastHead;
impl HeadPicker for LastHead {
    fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
        heads.last().map(|h| h.class)
    }
}

fn sched(classes: Vec<ClassSpec>, policy: PolicyKind) -> Scheduler<u64> {
    let cfg = SchedConfig::new(classes, policy);
    if policy == PolicyKind::Custom {
        Scheduler::with_picker(cfg, Box::new(LastHead)).unwrap()
    } else {
        Scheduler::new(cfg).unwrap()
    }
}

fn meta(class: ClassId, arrival: Nanos) -> Meta {
    let mut m = Meta::new(class, arrival);
    m.size_hint = 1;
    m.deadline = Some(arrival + 3_600_000 * MS);
    m
}

fn codel_class(name: &str, drop: bool, lifo: bool) -> ClassSpec {
    let mut c = ClassSpec::new(name);
    c.codel = Some(CodelSpec {
        target: 5 * MS,
        interval: 100 * MS,
        drop,
        lifo,
    });
    c
}

/// Two classes, both fed 3 requests per 10 ms and served 2 per 10 ms (overloaded): class "guarded" has a
/// CoDel detector that drops, class "plain" has none. For every policy: only "guarded" loses requests, all
/// with `standing_queue`, none before its queue has stood above target for an interval; every request is
/// dispatched, dropped or still queued.
#[test]
fn codel_drops_only_the_guarded_class_under_every_policy() {
    for policy in PolicyKind::ALL {
        let mut s = sched(
            vec![codel_class("guarded", true, false), ClassSpec::new("plain")],
            policy,
        );
        let (mut enq, mut served, mut dropped) = (0u64, 0u64, Vec::new());
        let mut first_drop = None;
        for step in 0..400u64 {
            let now = step * 10 * MS;
            for k in 0..3 {
                let class = ((step + k) % 2) as usize;
                s.enqueue(enq, meta(class, now), now).unwrap();
                enq += 1;
            }
            for _ in 0..2 {
                let before = dropped.len();
                if s.dispatch_or_drop(now, &mut dropped).is_some() {
                    served += 1;
                }
                if dropped.len() > before && first_drop.is_none() {
                    first_drop = Some(now);
                }
            }
        }
        assert!(!dropped.is_empty(), "{policy}: the guarded class dropped");
        for r in &dropped {
            assert_eq!(r.meta.class, 0, "{policy}");
            assert_eq!(r.reason, RejectReason::StandingQueue, "{policy}");
        }
        // The guarded queue exceeds 5 ms from its first dispatches; drops come one interval later.
        assert!(first_drop.unwrap() >= 100 * MS, "{policy}: {first_drop:?}");
        assert_eq!(
            served + dropped.len() as u64 + s.len() as u64,
            enq,
            "{policy}: conservation"
        );
    }
}

/// Without `drop`, the detector drives adaptive LIFO only: nothing is dropped; before the queue stands the
/// class is served oldest first, while it stands newest first.
#[test]
fn adaptive_lifo_serves_newest_while_the_queue_stands() {
    let mut s = sched(vec![codel_class("a", false, true)], PolicyKind::Fcfs);
    let mut dropped = Vec::new();
    let mut id = 0u64;
    let mut order = Vec::new();
    for step in 0..100u64 {
        let now = step * 10 * MS;
        for _ in 0..2 {
            s.enqueue(id, meta(0, now), now).unwrap();
            id += 1;
        }
        let d = s.dispatch_or_drop(now, &mut dropped).unwrap();
        order.push((now, d.item, s.class_standing(0)));
    }
    assert!(dropped.is_empty());
    // FIFO at first: 0, 1, 2, ...
    assert_eq!(
        order[..3].iter().map(|o| o.1).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    // Standing after the head has waited ≥ 5 ms for 100 ms: from then on the newest (just enqueued) goes.
    let standing: Vec<_> = order.iter().filter(|o| o.2).collect();
    assert!(standing.len() > 50, "{}", standing.len());
    for (now, item, _) in standing {
        let newest = now / (10 * MS) * 2 + 1;
        assert_eq!(*item, newest, "at {now}");
    }
}

/// Drops are not charged to a class's share: stride over two backlogged classes (3:1) keeps every class
/// within one dispatch of its share while one of them is being dropped from.
#[test]
fn stride_shares_hold_while_a_class_is_dropped_from() {
    let mut guarded = codel_class("guarded", true, false);
    guarded.weight = 3;
    let mut s = sched(vec![guarded, ClassSpec::new("plain")], PolicyKind::Stride);
    let mut dropped = Vec::new();
    let mut counts = [0i64; 2];
    let mut id = 0;
    for c in 0..2 {
        for _ in 0..2000 {
            s.enqueue(id, meta(c, 0), 0).unwrap();
            id += 1;
        }
    }
    for n in 1..=1000i64 {
        let now = n as u64 * MS;
        let d = s.dispatch_or_drop(now, &mut dropped).unwrap();
        counts[d.meta.class] += 1;
        assert!((counts[0] * 4 - n * 3).abs() < 4, "n {n}: {counts:?}");
    }
    assert!(dropped.len() > 10, "{}", dropped.len());
}

/// `dispatch_class` serves only its class (a reserved worker), oldest first, and applies the class's
/// CoDel; plain `dispatch` keeps what it drops for the next `expire`.
#[test]
fn dispatch_class_and_drops_kept_for_expire() {
    let mut s = sched(
        vec![ClassSpec::new("a"), codel_class("b", true, false)],
        PolicyKind::Priority,
    );
    for i in 0..4 {
        s.enqueue(i, meta((i % 2) as usize, 0), 0).unwrap();
    }
    let mut dropped = Vec::new();
    assert_eq!(s.dispatch_class(1, 0, &mut dropped).unwrap().item, 1);
    assert_eq!(s.dispatch_class(0, 0, &mut dropped).unwrap().item, 0);
    // b's last request: sojourn above target but it is alone, so never a standing queue.
    assert_eq!(s.dispatch_class(1, 500 * MS, &mut dropped).unwrap().item, 3);
    assert!(s.dispatch_class(1, 500 * MS, &mut dropped).is_none());
    // Make b stand: two requests waiting > 5 ms for > 100 ms.
    for i in 10..14 {
        s.enqueue(i, meta(1, 600 * MS), 600 * MS).unwrap();
    }
    s.dispatch_class(1, 610 * MS, &mut dropped).unwrap(); // first above: arms the interval
    assert!(dropped.is_empty());
    // Through plain dispatch (priority: a and b equal, a's head is older) until b is picked and drops.
    let mut out = Vec::new();
    while s.class_len(1) > 0 {
        s.dispatch(800 * MS);
    }
    assert_eq!(
        s.next_expiry(),
        Some(0),
        "a drop is waiting to be handed out"
    );
    s.expire(800 * MS, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].reason, RejectReason::StandingQueue);
    assert_eq!(out[0].item, 11);
}
