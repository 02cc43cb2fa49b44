//! What a front end may skip for a policy is what the policy does not read: `PolicyKind::uses_size_hint`
//! and `PolicyKind::learns_service_time` checked against the schedulers' behaviour, so the flags cannot
//! drift from the policies.

use ordo_sched::{ClassSpec, Meta, PolicyKind, SchedConfig, Scheduler};

fn classes() -> Vec<ClassSpec> {
    let mut cs = vec![ClassSpec::new("a"), ClassSpec::new("b")];
    cs[0].weight = 3;
    cs[0].priority = 1;
    for c in &mut cs {
        c.deadline = Some(1_000_000_000);
    }
    cs
}

/// The order 12 requests are dispatched in, with the given size hints.
fn order(policy: PolicyKind, hints: &[u64]) -> Vec<u64> {
    let mut s = Scheduler::new(SchedConfig::new(classes(), policy)).unwrap();
    for (i, h) in hints.iter().enumerate() {
        let mut m = Meta::new(i % 2, i as u64 * 10);
        m.size_hint = *h;
        s.enqueue(i as u64, m, i as u64 * 10).unwrap();
    }
    let mut out = Vec::new();
    while let Some(d) = s.dispatch(1_000) {
        out.push(d.item);
    }
    out
}

#[test]
fn only_policies_that_use_size_hints_order_by_them() {
    let flat = [1u64; 12];
    let varied = [900, 5, 700, 3, 500, 9, 100, 7, 300, 1, 50, 2];
    for policy in PolicyKind::ALL {
        if policy == PolicyKind::Custom {
            continue; // a picker of the operator's (it is handed the hints)
        }
        let changed = order(policy, &flat) != order(policy, &varied);
        assert_eq!(
            changed,
            policy.uses_size_hint(),
            "{policy}: size hints changed the order: {changed}, but uses_size_hint() says {}",
            policy.uses_size_hint()
        );
    }
    assert!(PolicyKind::Custom.uses_size_hint());
}

#[test]
fn only_policies_that_learn_service_times_change_with_them() {
    for policy in PolicyKind::ALL {
        if policy == PolicyKind::Custom {
            continue;
        }
        // with a long learned service time, a request whose deadline is near cannot be admitted behind
        // a queue; without one it can
        let admitted = |learn: bool| {
            let mut s = Scheduler::<u64>::new(SchedConfig::new(classes(), policy)).unwrap();
            if learn {
                s.observe_service(0, 600_000_000);
                s.observe_service(1, 600_000_000);
            }
            (0..4u64)
                .filter(|i| s.enqueue(*i, Meta::new(0, 0), 0).is_ok())
                .count()
        };
        let changed = admitted(false) != admitted(true);
        assert_eq!(
            changed,
            policy.learns_service_time(),
            "{policy}: learned service times changed admission: {changed}"
        );
    }
}
