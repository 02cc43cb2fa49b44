//! A client that closes its connection while its request waits in the queue or is being served does not
//! cost a worker: the connection notices the close, drops the request (releasing its queue place or its
//! permit) and the next request is served instead. Pipelined requests are unaffected.

use crate::ctl_util;

use std::time::{Duration, Instant};

use crate::ctl_util::{busy, get, parse, queued, start, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(10);

fn abandoned(h: &ordo_serve::ServerHandle) -> u64 {
    h.status()["abandoned"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_whose_client_left_is_skipped() {
    let h = start("workers = 1\n").await;
    let a = h.local_addr();
    let before = abandoned(&h);
    let t0 = Instant::now();
    // A occupies the only worker for 600 ms.
    let ca = tokio::spawn(async move { get(a, "/sleep?ms=600").await });
    wait_until(WAIT, || busy(&h) == 1).await;
    // B queues behind A, then gives up after ~100 ms.
    let mut b = TcpStream::connect(a).await.unwrap();
    b.write_all(b"GET /sleep?ms=600 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    wait_until(WAIT, || queued(&h) == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(b);
    // C comes after B left: it is served as soon as A is done, not after B's 600 ms as well.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cc = tokio::spawn(async move { get(a, "/bytes?n=1").await });
    let rc = tokio::time::timeout(WAIT, cc).await.unwrap().unwrap();
    let c_done = t0.elapsed();
    assert_eq!(rc.status, 200, "{rc:?}");
    assert_eq!(ca.await.unwrap().status, 200);
    assert!(
        c_done < Duration::from_millis(1000),
        "C answered {c_done:?} after A started: B's abandoned request was served"
    );
    wait_until(WAIT, || abandoned(&h) == before + 1).await;
    let m = h.metrics_text();
    assert!(m.contains("ordo_serve_abandoned_total 1"), "{m}");
    assert_eq!((busy(&h), queued(&h)), (0, 0));
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_request_whose_client_left_frees_its_worker() {
    let h = start("workers = 1\n").await;
    let a = h.local_addr();
    let mut s = TcpStream::connect(a).await.unwrap();
    s.write_all(b"GET /sleep?ms=5000 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    wait_until(WAIT, || busy(&h) == 1).await;
    let t = Instant::now();
    drop(s);
    // The worker is free again long before the 5 s sleep would have ended.
    wait_until(Duration::from_millis(2000), || busy(&h) == 0).await;
    assert!(t.elapsed() < Duration::from_millis(2000));
    let r = tokio::time::timeout(WAIT, get(a, "/bytes?n=2"))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    // It was never queued, so it is not an abandoned waiter.
    assert_eq!(abandoned(&h), 0);
    h.shutdown().await.unwrap();
}

/// Read one `Content-Length` response from `s` (bounded by the caller's timeout).
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> ctl_util::Resp {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let rest = buf.split_off(end + 4 + len);
                let r = parse(buf);
                *buf = rest;
                return r;
            }
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed early; got {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_sent_while_the_first_is_served_are_answered_in_order() {
    let h = start("workers = 1\n").await;
    let a = h.local_addr();
    let mut s = TcpStream::connect(a).await.unwrap();
    s.write_all(b"GET /sleep?ms=300 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    wait_until(WAIT, || busy(&h) == 1).await;
    // The next two arrive while the first is being served (the connection reads them meanwhile).
    s.write_all(
        b"GET /bytes?n=3 HTTP/1.1\r\nHost: t\r\n\r\nGET /bytes?n=5 HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    let (r1, r2, r3) = tokio::time::timeout(WAIT, async {
        let r1 = read_response(&mut s, &mut buf).await;
        let r2 = read_response(&mut s, &mut buf).await;
        let r3 = read_response(&mut s, &mut buf).await;
        (r1, r2, r3)
    })
    .await
    .expect("three responses");
    assert_eq!((r1.status, r2.status, r3.status), (200, 200, 200));
    assert_eq!(r2.body.len(), 3, "{r2:?}");
    assert_eq!(r3.body.len(), 5, "{r3:?}");
    assert!(buf.is_empty());
    assert_eq!(abandoned(&h), 0);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_input_beyond_the_watch_cap_is_kept() {
    // While a request is served the connection buffers at most max_head_bytes of further input; the rest
    // stays in the socket and is read after the response, so nothing is lost.
    let h = start("workers = 1\n[limits]\nmax_head_bytes = 1024\n").await;
    let a = h.local_addr();
    let mut s = TcpStream::connect(a).await.unwrap();
    s.write_all(b"GET /sleep?ms=300 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    wait_until(WAIT, || busy(&h) == 1).await;
    let one = b"GET /bytes?n=7 HTTP/1.1\r\nHost: t\r\n\r\n";
    let count = 3 * 1024 / one.len() + 1;
    s.write_all(&one.repeat(count)).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(WAIT, async {
        assert_eq!(read_response(&mut s, &mut buf).await.status, 200);
        for _ in 0..count {
            let r = read_response(&mut s, &mut buf).await;
            assert_eq!((r.status, r.body.len()), (200, 7), "{r:?}");
        }
    })
    .await
    .expect("every pipelined request answered");
    assert!(buf.is_empty());
    h.shutdown().await.unwrap();
}
