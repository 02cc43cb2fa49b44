//! Queued requests whose clients went away leave the queue at once: under overload, clients that give up
//! must not keep their places under the class or global queue cap until a worker frees up, or live
//! requests behind them would be refused 503 early.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::ctl_util::{busy, get, queued, start, wait_until};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(10);
const CAP: u64 = 4;

fn abandoned(h: &ordo_serve::ServerHandle) -> u64 {
    h.status()["abandoned"].as_u64().unwrap_or(0)
}

/// Send a request on a fresh connection and keep the connection open (the caller drops it to go away).
async fn send_and_hold(a: SocketAddr, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(a).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// The only worker is held by a request that sleeps far longer than the test (its connection is dropped
/// at the end, which frees the worker). `CAP` clients fill the queue to its cap and then disconnect; the
/// queue must be empty again while the worker is still busy, so `CAP` live requests queue in their place
/// (and one more is refused: the cap still holds for live requests), and all are served once the worker
/// is free.
async fn cap_is_freed_by_clients_that_left(toml: &str, reason: &str) {
    let h = start(toml).await;
    let a = h.local_addr();
    let blocker = send_and_hold(a, "/sleep?ms=30000").await;
    wait_until(WAIT, || busy(&h) == 1).await;

    let mut gone = Vec::new();
    for _ in 0..CAP {
        gone.push(send_and_hold(a, "/bytes?n=1").await);
    }
    wait_until(WAIT, || queued(&h) == CAP).await;
    let full = get(a, "/bytes?n=1").await;
    assert_eq!(full.status, 503, "the queue is at its cap: {full:?}");
    assert!(full.body.contains(reason), "{}", full.body);

    drop(gone);
    // The server notices each close within milliseconds (the bound only allows for a starved machine);
    // before the cancel path the entries stayed queued (and counted toward the cap) until the blocker's
    // worker freed up, 30 s from now.
    let t = Instant::now();
    while queued(&h) != 0 {
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "requests whose clients left still count toward the cap: queued = {}",
            queued(&h)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(abandoned(&h), CAP);
    assert_eq!(busy(&h), 1, "the blocker still holds the worker");

    // Live requests take the freed places.
    let live: Vec<_> = (0..CAP)
        .map(|_| tokio::spawn(async move { get(a, "/bytes?n=3").await }))
        .collect();
    wait_until(WAIT, || queued(&h) == CAP).await;
    let over = get(a, "/bytes?n=1").await;
    assert_eq!(over.status, 503, "{over:?}");

    drop(blocker);
    for r in live {
        let r = tokio::time::timeout(WAIT, r).await.unwrap().unwrap();
        assert_eq!((r.status, r.body.len()), (200, 3), "{r:?}");
    }
    wait_until(WAIT, || busy(&h) == 0 && queued(&h) == 0).await;
    assert_eq!(abandoned(&h), CAP, "served requests are not abandoned");
    let m = h.metrics_text();
    assert!(
        m.contains(&format!("ordo_serve_abandoned_total {CAP}")),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            r#"ordo_serve_rejected_total{{class="a",reason="{reason}"}} 2"#
        )),
        "exactly the two over-cap requests were refused: {m}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_left_free_the_class_queue_cap() {
    let toml = format!("workers = 1\n[[classes]]\nname = \"a\"\nqueue_cap = {CAP}\n");
    cap_is_freed_by_clients_that_left(&toml, "class_queue_full").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_left_free_the_global_queue_cap() {
    let toml = format!("workers = 1\nqueue_cap = {CAP}\n[[classes]]\nname = \"a\"\n");
    cap_is_freed_by_clients_that_left(&toml, "global_queue_full").await;
}
