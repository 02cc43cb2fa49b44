//! Graceful shutdown: what is queued is answered 503 at once, what is in flight completes, the listener
//! stops accepting.

use std::time::{Duration, Instant};

use crate::ctl_util::{busy, get, queued, start, wait_until};

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

/// Shuts `h` down and returns how long it took (panics if it takes more than 20 s: before shutdown_grace
/// existed, these shutdowns never returned).
async fn timed_shutdown(h: ordo_serve::ServerHandle) -> Duration {
    let t = Instant::now();
    tokio::time::timeout(Duration::from_secs(20), h.shutdown())
        .await
        .expect("shutdown returns within 20 s")
        .unwrap();
    t.elapsed()
}

/// Reads from `s` until it is closed (end of input or an error), for at most `limit`; returns what came.
async fn read_until_closed(s: &mut tokio::net::TcpStream, limit: Duration) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Err(_) => panic!("connection still open after {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Issue 10 defect 7: a client sending its body one byte at a time (each byte within head_timeout) kept the
/// process alive after SIGTERM for as long as it went on. Now shutdown closes it after `shutdown_grace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_a_slow_body_holds_shutdown_only_for_the_grace() {
    use tokio::io::AsyncWriteExt;
    let h = start("shutdown_grace = \"600ms\"\n").await;
    let mut s = tokio::net::TcpStream::connect(h.local_addr())
        .await
        .unwrap();
    s.write_all(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n")
        .await
        .unwrap();
    let (mut rd, mut wr) = s.into_split();
    // drips a byte every 50 ms for up to 30 s (far longer than the grace), until the server closes
    let dripper = tokio::spawn(async move {
        for _ in 0..600 {
            if wr.write_all(b"x").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let took = timed_shutdown(h).await;
    assert!(
        took >= Duration::from_millis(550),
        "waited the grace: {took:?}"
    );
    assert!(took < Duration::from_millis(600 + 2000), "{took:?}");
    // the server closed the connection without an answer
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut rd, &mut buf),
    )
    .await
    .expect("closed")
    .unwrap_or(0);
    assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&buf[..n]));
    dripper.abort();
}

/// A mock upstream that answers every request with a chunked response that never ends: a chunk every
/// 50 ms, for at most 30 s.
async fn dripping_upstream() -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                for _ in 0..600 {
                    if s.write_all(b"5\r\ndrip\n\r\n").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
        }
    });
    addr
}

/// Issue 10 defect 7: a response that never ends (a proxied stream) kept the process alive after SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_an_endless_stream_holds_shutdown_only_for_the_grace() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = dripping_upstream().await;
    let h = start(&format!(
        "shutdown_grace = \"600ms\"\n[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{up}\"] }}\n"
    ))
    .await;
    let mut s = tokio::net::TcpStream::connect(h.local_addr())
        .await
        .unwrap();
    s.write_all(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    // the stream is flowing before shutdown starts
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(4).filter(|w| w == b"drip").count() < 2 {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("stream flows")
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    let reader =
        tokio::spawn(async move { read_until_closed(&mut s, Duration::from_secs(20)).await });
    let took = timed_shutdown(h).await;
    assert!(
        took >= Duration::from_millis(550),
        "waited the grace: {took:?}"
    );
    assert!(took < Duration::from_millis(600 + 2000), "{took:?}");
    let rest = reader.await.unwrap();
    // the stream went on during the grace, then was cut: no final chunk
    assert!(
        rest.windows(4).any(|w| w == b"drip"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert!(
        !rest.ends_with(b"0\r\n\r\n"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
}

/// With a grace, a request already being served still completes, and shutdown returns as soon as it has
/// (not after the whole grace).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_a_quick_request_completes_within_a_short_grace() {
    let h = start("shutdown_grace = \"1500ms\"\nworkers = 1\n").await;
    let a = h.local_addr();
    let in_flight = tokio::spawn(async move { get(a, "/sleep?ms=300").await });
    wait_until(Duration::from_secs(10), || busy(&h) == 1).await;
    let took = timed_shutdown(h).await;
    let r = in_flight.await.unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        took < Duration::from_millis(1400),
        "returned once drained: {took:?}"
    );
}
