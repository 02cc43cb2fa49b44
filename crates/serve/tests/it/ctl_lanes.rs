//! The gate's rules for lanes of workers, reserved workers, adaptive limits and CoDel, driven through the
//! public `Gate` API (no server, no sockets): reserved workers cannot be taken by another class and let
//! their class skip the queue; lanes do not block each other; an adaptive lane's limit follows the round
//! trips its permits report; a standing class queue is shed with `standing_queue`; a reload that changes
//! the lanes keeps every queued request. Time is paused (tokio's test clock), so timings are exact.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ordo_sched::limit::{Algorithm, LimiterConfig};
use ordo_sched::{ClassSpec, CodelSpec, Meta, PolicyKind, RejectReason, SchedConfig};
use ordo_serve::gate::{Gate, LaneLimit, LanePlan, Permit, PoolPlan};

fn classes(policy: PolicyKind) -> SchedConfig {
    SchedConfig::new(vec![ClassSpec::new("top"), ClassSpec::new("low")], policy)
}

fn name(s: &str) -> Arc<str> {
    Arc::from(s)
}

fn lane(key: &str, limit: LaneLimit) -> LanePlan {
    LanePlan {
        key: name(key),
        limit,
    }
}

/// Poll once: `Some` if it finished.
fn poll_once<F: Future>(fut: Pin<&mut F>) -> Option<F::Output> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

async fn take(g: &Gate, class: usize, cname: &str) -> Permit {
    g.acquire(Meta::new(class, g.now()), &name(cname))
        .await
        .unwrap()
}

/// Issue 10's isolation rule: with 4 workers and 1 reserved to "top", "low" can never hold more than 3 —
/// its fourth request waits although a worker is idle — and "top" gets its reserved worker at once even
/// while "low" requests are queued ahead of it, under every policy.
#[tokio::test(start_paused = true)]
async fn reserved_workers_cannot_be_taken_by_another_class() {
    for policy in [
        PolicyKind::Fcfs,
        PolicyKind::Priority,
        PolicyKind::Lottery,
        PolicyKind::Stride,
        PolicyKind::Wfq,
        PolicyKind::Srpt,
    ] {
        let plan = PoolPlan {
            lanes: vec![lane("*", LaneLimit::Fixed(4))],
            reserved: vec![1, 0],
        };
        let g = Gate::with_plan(classes(policy), Vec::new(), plan).unwrap();
        let mut low = Vec::new();
        for _ in 0..3 {
            low.push(take(&g, 1, "low").await);
        }
        let low_name = name("low");
        let mut fourth = Box::pin(g.acquire(Meta::new(1, g.now()), &low_name));
        assert!(
            poll_once(fourth.as_mut()).is_none(),
            "{policy}: low took the reserved worker"
        );
        let mut fifth = Box::pin(g.acquire(Meta::new(1, g.now()), &low_name));
        assert!(poll_once(fifth.as_mut()).is_none());
        let s = g.snapshot();
        assert_eq!((s.busy, s.queued, s.workers), (3, 2, 4), "{policy}");
        // "top" skips the two queued "low" requests: its reserved worker is free.
        let top = take(&g, 0, "top").await;
        assert_eq!(top.waited(), Duration::ZERO);
        assert_eq!(g.snapshot().busy, 4);
        // A second "top" request has no reserved worker left and the shared ones are full: it queues.
        let top_name = name("top");
        let mut top2 = Box::pin(g.acquire(Meta::new(0, g.now()), &top_name));
        assert!(poll_once(top2.as_mut()).is_none(), "{policy}");
        // When "top" finishes, its reserved worker goes to the queued "top" request, not to "low".
        drop(top);
        let _top2 = poll_once(top2.as_mut()).unwrap().unwrap();
        assert!(poll_once(fourth.as_mut()).is_none(), "{policy}");
        // When a "low" finishes, the shared worker goes to a queued "low".
        drop(low.pop());
        let _fourth = poll_once(fourth.as_mut()).unwrap().unwrap();
        let s = g.snapshot();
        assert!(
            poll_once(fifth.as_mut()).is_none(),
            "{policy}: busy {} queued {}",
            s.busy,
            s.queued
        );
    }
}

/// Lanes are independent: a full lane with a queue does not hold up another lane's requests.
#[tokio::test(start_paused = true)]
async fn a_full_lane_does_not_block_another() {
    let plan = PoolPlan {
        lanes: vec![
            lane("/slow", LaneLimit::Fixed(1)),
            lane("/fast", LaneLimit::Fixed(1)),
        ],
        reserved: Vec::new(),
    };
    let g = Gate::with_plan(classes(PolicyKind::Fcfs), Vec::new(), plan).unwrap();
    let (slow, fast, low) = (name("/slow"), name("/fast"), name("low"));
    let _p = g.acquire_on(Meta::new(1, 0), &low, &slow).await.unwrap();
    let mut queued = Box::pin(g.acquire_on(Meta::new(1, 0), &low, &slow));
    assert!(poll_once(queued.as_mut()).is_none());
    let f = g.acquire_on(Meta::new(1, 0), &low, &fast).await.unwrap();
    assert_eq!(f.waited(), Duration::ZERO);
    let s = g.snapshot();
    let lanes: Vec<(&str, usize, usize)> = s
        .lanes
        .iter()
        .map(|l| (&*l.key, l.busy, l.queued))
        .collect();
    assert_eq!(lanes, vec![("/slow", 1, 1), ("/fast", 1, 0)]);
}

fn adaptive(algorithm: Algorithm) -> LaneLimit {
    LaneLimit::Adaptive(LimiterConfig {
        algorithm,
        min: 2,
        max: 64,
        initial: 8,
        min_samples: 4,
        window: 1_000_000,
        probe_interval: 0,
        ..LimiterConfig::default()
    })
}

/// Serve `n` requests on `lane`, `c` at a time, each holding its permit `hold`.
async fn serve_batch(g: &Gate, n: usize, c: usize, hold: Duration) {
    let low = name("low");
    let mut done = 0;
    while done < n {
        let mut ps = Vec::new();
        for _ in 0..c.min(n - done) {
            ps.push(g.acquire(Meta::new(1, g.now()), &low).await.unwrap());
        }
        tokio::time::sleep(hold).await;
        for mut p in ps {
            p.finish(false);
        }
        done += c;
    }
}

/// An adaptive lane starts with a probe at `min`, then uses `initial`, grows while round trips stay at the
/// baseline and shrinks when they rise: the permits' service times drive it.
#[tokio::test(start_paused = true)]
async fn an_adaptive_lane_follows_the_round_trips() {
    for algorithm in [Algorithm::Gradient, Algorithm::Aimd] {
        let plan = PoolPlan {
            lanes: vec![lane("/", adaptive(algorithm))],
            reserved: Vec::new(),
        };
        let g = Gate::with_plan(classes(PolicyKind::Fcfs), Vec::new(), plan).unwrap();
        let limit = |g: &Gate| g.snapshot().lanes[0].limit;
        let probing = |g: &Gate| g.snapshot().lanes[0].limiter.unwrap().probing;
        assert_eq!(limit(&g), 2);
        assert!(probing(&g));
        serve_batch(&g, 8, 2, Duration::from_millis(10)).await; // a probe: 2 × min_samples
        assert!(!probing(&g), "{algorithm:?}");
        assert_eq!(limit(&g), 8, "{algorithm:?}");
        let base = g.snapshot().lanes[0].limiter.unwrap().baseline;
        assert_eq!(base, Some(10_000_000), "{algorithm:?}");
        // Uncongested: full batches at the baseline round trip make it grow.
        for _ in 0..10 {
            let l = limit(&g);
            serve_batch(&g, l, l, Duration::from_millis(10)).await;
        }
        let grown = limit(&g);
        assert!(grown > 8, "{algorithm:?}: {grown}");
        // Congested: round trips 3 times the baseline make it shrink.
        for _ in 0..10 {
            let l = limit(&g);
            serve_batch(&g, l, l, Duration::from_millis(30)).await;
        }
        assert!(limit(&g) < grown, "{algorithm:?}: {} ≥ {grown}", limit(&g));
        // A permit dropped without `finish` (client gone) teaches nothing.
        let before = g.snapshot().lanes[0].limiter.unwrap().updates;
        for _ in 0..20 {
            let p = take(&g, 1, "low").await;
            tokio::time::sleep(Duration::from_millis(1)).await;
            drop(p);
        }
        assert_eq!(g.snapshot().lanes[0].limiter.unwrap().updates, before);
    }
}

/// A class whose queue stands above its CoDel target for an interval has its oldest requests answered
/// `standing_queue` when the policy next picks it; the other class is untouched.
#[tokio::test(start_paused = true)]
async fn codel_sheds_a_standing_class_through_the_gate() {
    let mut cfg = classes(PolicyKind::Stride);
    cfg.classes[1].codel = Some(CodelSpec::new(5_000_000, 50_000_000));
    let g = Gate::new(cfg, None, 1).unwrap();
    tokio::spawn(g.clone().run_timer());
    let mut held = take(&g, 1, "low").await;
    let low = name("low");
    let mut waits: Vec<_> = (0..6)
        .map(|_| Box::pin(g.acquire(Meta::new(1, g.now()), &low)))
        .collect();
    for w in &mut waits {
        assert!(poll_once(w.as_mut()).is_none());
    }
    // Serve one every 40 ms: the oldest waiting request's sojourn stays above 5 ms.
    let mut outcomes = Vec::new();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(40)).await;
        held.finish(false);
        drop(held);
        // whoever got the worker now holds it
        let mut next = None;
        for (i, w) in waits.iter_mut().enumerate() {
            if outcomes.iter().any(|(j, _)| *j == i) {
                continue;
            }
            match poll_once(w.as_mut()) {
                Some(Ok(p)) => {
                    outcomes.push((i, "served"));
                    next = Some(p);
                }
                Some(Err(e)) => {
                    assert_eq!(e.reason, RejectReason::StandingQueue);
                    outcomes.push((i, "dropped"));
                }
                None => {}
            }
        }
        match next {
            Some(p) => held = p,
            None => break,
        }
    }
    let dropped: Vec<usize> = outcomes
        .iter()
        .filter(|o| o.1 == "dropped")
        .map(|o| o.0)
        .collect();
    assert!(!dropped.is_empty(), "{outcomes:?}");
    // The ones dropped are the oldest still waiting at the time: never a newer one before an older one.
    let served_first = outcomes.iter().position(|o| o.1 == "served").unwrap();
    assert_eq!(
        outcomes[served_first].0, 0,
        "the first was served before the queue stood"
    );
    assert!(dropped.windows(2).all(|w| w[0] < w[1]), "{outcomes:?}");
}

/// Reloading from one shared pool to per-route lanes keeps every queued request: the old pool serves what
/// it holds, then goes; new requests use the new lanes.
#[tokio::test(start_paused = true)]
async fn a_reload_that_changes_the_lanes_keeps_queued_requests() {
    let g = Gate::new(classes(PolicyKind::Fcfs), None, 1).unwrap();
    let p = take(&g, 1, "low").await;
    let low = name("low");
    let mut queued = Box::pin(g.acquire(Meta::new(1, g.now()), &low));
    assert!(poll_once(queued.as_mut()).is_none());
    let plan = PoolPlan {
        lanes: vec![lane("/a", LaneLimit::Fixed(2))],
        reserved: Vec::new(),
    };
    g.reconfigure_plan(classes(PolicyKind::Stride), Vec::new(), plan)
        .unwrap();
    let keys: Vec<(String, bool)> = g
        .snapshot()
        .lanes
        .iter()
        .map(|l| (l.key.to_string(), l.retired))
        .collect();
    assert_eq!(
        keys,
        vec![("/a".to_string(), false), ("*".to_string(), true)]
    );
    let a = g
        .acquire_on(Meta::new(1, 0), &low, &name("/a"))
        .await
        .unwrap();
    drop(p);
    let served = poll_once(queued.as_mut()).unwrap().unwrap();
    drop(served);
    let keys: Vec<String> = g
        .snapshot()
        .lanes
        .iter()
        .map(|l| l.key.to_string())
        .collect();
    assert_eq!(keys, vec!["/a"], "the retired pool went once empty");
    drop(a);
    assert_eq!(g.snapshot().busy, 0);
}
