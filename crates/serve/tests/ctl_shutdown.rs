//! Graceful shutdown: what is queued is answered 503 at once, what is in flight completes, the listener
//! stops accepting.

mod ctl_util;

use std::time::{Duration, Instant};

use ctl_util::{busy, get, queued, start, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_get_503_and_in_flight_completes() {
    let h = start("workers = 1\n").await;
    let a = h.local_addr();
    let in_flight = tokio::spawn(async move {
        let t = Instant::now();
        (get(a, "/sleep?ms=1500").await, t.elapsed())
    });
    wait_until(Duration::from_secs(10), || busy(&h) == 1).await;
    let q1 = tokio::spawn(async move { (get(a, "/x").await, Instant::now()) });
    let q2 = tokio::spawn(async move { (get(a, "/x").await, Instant::now()) });
    wait_until(Duration::from_secs(10), || queued(&h) == 2).await;
    let t = Instant::now();
    h.shutdown().await.unwrap();
    let shutdown_took = t.elapsed();
    for q in [q1, q2] {
        let (r, at) = q.await.unwrap();
        assert_eq!(r.status, 503, "{r:?}");
        assert!(r.body.contains("shutdown"), "{}", r.body);
        assert!(
            at.duration_since(t) < Duration::from_millis(700),
            "answered at once"
        );
    }
    let (r, took) = in_flight.await.unwrap();
    assert_eq!(r.status, 200, "in-flight request completes");
    assert!(took >= Duration::from_millis(1450));
    assert!(shutdown_took < Duration::from_secs(5));
    // Nothing listens any more.
    assert!(tokio::net::TcpStream::connect(a).await.is_err());
}
