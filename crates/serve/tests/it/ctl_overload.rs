//! Shedding: class and global queue caps, queue timeouts and edf-unreachable requests are answered 503 with
//! Retry-After at once, with the reason counted per class.

use std::time::{Duration, Instant};

use crate::ctl_util::{busy, get, queued, request, start, wait_until};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_queue_cap_overflow_is_503_with_retry_after() {
    let h = start(
        r#"
workers = 1
retry_after = "3s"
[[classes]]
name = "a"
queue_cap = 1
[[classes]]
name = "b"
[[rules]]
class = "b"
path_prefix = "/b"
"#,
    )
    .await;
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=1500").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    let queued1 = tokio::spawn(async move { get(a, "/sleep?ms=1").await });
    wait_until(WAIT, || queued(&h) == 1).await;
    let t = Instant::now();
    let r = get(a, "/x").await;
    assert_eq!(r.status, 503, "{r:?}");
    // at once: before the blocker's 1.5 s ends (a margin for a loaded machine, not a speed bound)
    assert!(
        t.elapsed() < Duration::from_millis(1400),
        "answered at once"
    );
    assert_eq!(r.header("retry-after"), Some("3"));
    assert!(r.body.contains("class_queue_full"), "{}", r.body);
    // Class b has no cap: it queues.
    let qb = tokio::spawn(async move { get(a, "/b/sleep?ms=1").await });
    assert_eq!(blocker.await.unwrap().status, 200);
    assert_eq!(queued1.await.unwrap().status, 200);
    assert_eq!(qb.await.unwrap().status, 200);
    let m = h.metrics_text();
    assert!(
        m.contains(r#"ordo_serve_rejected_total{class="a",reason="class_queue_full"} 1"#),
        "{m}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_queue_cap_overflow_is_503() {
    let h = start(
        r#"
workers = 1
queue_cap = 1
[[classes]]
name = "a"
[[classes]]
name = "b"
[[rules]]
class = "b"
path_prefix = "/b"
"#,
    )
    .await;
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=600").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    let q = tokio::spawn(async move { get(a, "/sleep?ms=1").await });
    wait_until(WAIT, || queued(&h) == 1).await;
    let r = get(a, "/b/x").await;
    assert_eq!(r.status, 503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(r.body.contains("global_queue_full"), "{}", r.body);
    assert_eq!(blocker.await.unwrap().status, 200);
    assert_eq!(q.await.unwrap().status, 200);
    assert_eq!(
        h.status()["classes"][1]["rejected"]["global_queue_full"].as_u64(),
        Some(1)
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_is_503_when_it_expires() {
    let h = start(
        r#"
workers = 1
queue_timeout = "200ms"
"#,
    )
    .await;
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=2000").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    let t = Instant::now();
    let r = get(a, "/x").await;
    let took = t.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("queue_timeout"), "{}", r.body);
    assert!(
        took >= Duration::from_millis(180),
        "not before the timeout: {took:?}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "at the timeout, not when the worker frees: {took:?}"
    );
    assert_eq!(blocker.await.unwrap().status, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edf_rejects_unreachable_deadlines_at_once() {
    let h = start(
        r#"
workers = 1
policy = "edf"
[[classes]]
name = "rt"
deadline = "300ms"
[[classes]]
name = "bulk"
[[rules]]
class = "bulk"
path_prefix = "/bulk"
"#,
    )
    .await;
    let a = h.local_addr();
    // Teach the scheduler that rt requests take about 200 ms.
    for _ in 0..2 {
        assert_eq!(get(a, "/sleep?ms=200").await.status, 200);
    }
    let blocker = tokio::spawn(async move { get(a, "/bulk/sleep?ms=3000").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    let t0 = Instant::now();
    let first = tokio::spawn(async move { get(a, "/sleep?ms=1").await });
    wait_until(WAIT, || queued(&h) == 1).await;
    let second = tokio::spawn(async move { get(a, "/sleep?ms=1").await });
    wait_until(WAIT, || queued(&h) == 2).await;
    // Two requests of ~200 ms are ahead: this one cannot start within its 300 ms.
    let t = Instant::now();
    let r = get(a, "/sleep?ms=1").await;
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.body.contains("deadline_unreachable"), "{}", r.body);
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "rejected at admission: {:?}",
        t.elapsed()
    );
    // The admitted ones cannot start either (the worker is busy for 3 s): they are answered when their
    // deadline passes, well before the worker frees up or a queue timeout.
    for q in [first, second] {
        let r = q.await.unwrap();
        assert_eq!(r.status, 503, "{r:?}");
        assert!(r.body.contains("deadline_unreachable"), "{}", r.body);
    }
    assert!(
        t0.elapsed() < Duration::from_millis(2000),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(blocker.await.unwrap().status, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_gone_while_queued_does_not_leak_a_worker() {
    let h = start("workers = 1\n").await;
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=400").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    // Queue a request and drop the client before it is served.
    let gone = tokio::spawn(async move { request(a, "GET", "/sleep?ms=1", &[]).await });
    wait_until(WAIT, || queued(&h) == 1).await;
    gone.abort();
    let _ = gone.await;
    assert_eq!(blocker.await.unwrap().status, 200);
    // The worker is free again for the next request.
    assert_eq!(get(a, "/x").await.status, 200);
    wait_until(WAIT, || busy(&h) == 0 && queued(&h) == 0).await;
    h.shutdown().await.unwrap();
}
