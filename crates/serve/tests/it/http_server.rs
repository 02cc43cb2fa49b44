//! The HTTP layer against raw clients: keep-alive, pipelining, HTTP/1.0, chunked bodies, 100-continue, every
//! limit with its status, every smuggling shape answered 400 and closed, an unknown transfer coding answered
//! 501 and closed, bad request lines, garbage input, and graceful shutdown finishing an in-flight request.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::http_util::*;
use ordo_serve::http::{Handler, Limits, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Echoes what it parsed; `?sleep=MS` waits first.
struct Echo {
    calls: Arc<AtomicUsize>,
}

fn echo() -> Echo {
    Echo {
        calls: Arc::new(AtomicUsize::new(0)),
    }
}

impl Handler for Echo {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
        self.calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if let Some(ms) = req.query_param("sleep").and_then(|v| v.parse().ok()) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let body = format!(
                "{} {} {:?} ka={} body={}",
                req.method,
                req.path,
                req.version,
                req.keep_alive,
                String::from_utf8_lossy(&req.body)
            );
            Response::text(200, &body)
        }
    }
}

fn limits() -> Limits {
    Limits {
        max_head_bytes: 1024,
        max_uri_bytes: 512,
        head_timeout: Duration::from_secs(1),
        max_body_bytes: 1000,
        idle_timeout: Duration::from_millis(400),
        max_connections: 100,
        max_requests_per_connection: None,
        defer_accept: false,
        ..Limits::default()
    }
}

#[tokio::test]
async fn keep_alive_and_pipelining_in_order() {
    let s = start(echo(), limits()).await;
    let mut c = Client::connect(s.addr).await;
    let mut batch = Vec::new();
    for p in ["/a?sleep=50", "/b", "/c?sleep=20"] {
        batch.extend(get(p));
    }
    c.send(&batch).await;
    for p in ["/a", "/b", "/c"] {
        let r = c.response().await;
        assert_eq!(r.status, 200);
        assert!(
            r.text().starts_with(&format!("GET {p} Http11 ka=true")),
            "{}",
            r.text()
        );
        assert_eq!(r.header("server"), Some("ordo"));
        assert!(httpdate_ok(r.header("date").unwrap()));
        assert_eq!(r.header("connection"), None);
    }
    c.send(&get("/d")).await;
    assert!(c.response().await.text().starts_with("GET /d"));
}

fn httpdate_ok(s: &str) -> bool {
    s.ends_with(" GMT") && s.len() == 29
}

#[tokio::test]
async fn http10_closes_unless_keep_alive() {
    let s = start(echo(), limits()).await;
    let r = one_shot_and_close(s.addr, b"GET /x HTTP/1.0\r\n\r\n").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(r.text().contains("Http10 ka=false"));

    let mut c = Client::connect(s.addr).await;
    c.send(b"GET /y HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(b"GET /z HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    assert!(c.response().await.text().starts_with("GET /z"));
    // HTTP/1.1 with Connection: close
    let r = one_shot_and_close(
        s.addr,
        b"GET /w HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(r.header("connection"), Some("close"));
}

#[tokio::test]
async fn head_has_length_but_no_body() {
    let s = start(echo(), limits()).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n").await;
    let r = c.try_response(true).await.unwrap();
    assert_eq!(r.status, 200);
    let expected_len = "HEAD /h Http11 ka=true body=\n".len().to_string();
    assert_eq!(r.header("content-length"), Some(expected_len.as_str()));
    // the next response on the connection starts right after the head: no stray body bytes
    c.send(&get("/next")).await;
    assert!(c.response().await.text().starts_with("GET /next"));
}

#[tokio::test]
async fn bodies_length_chunked_and_expect_continue() {
    let s = start(echo(), limits()).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        .await;
    assert!(c.response().await.text().ends_with("body=hello\n"));
    c.send(b"POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n")
        .await;
    assert!(c.response().await.text().ends_with("body=abcde\n"));
    c.send(b"PUT /e HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        .await;
    let interim = c.response().await;
    assert_eq!(interim.status, 100);
    c.send(b"data").await;
    assert!(c.response().await.text().ends_with("body=data\n"));
    // chunked body delivered in small pieces
    c.send(b"POST /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await;
    for piece in [&b"4\r"[..], b"\nwxyz", b"\r\n0\r\n", b"\r\n"] {
        tokio::time::sleep(Duration::from_millis(10)).await;
        c.send(piece).await;
    }
    assert!(c.response().await.text().ends_with("body=wxyz\n"));
}

#[tokio::test]
async fn head_too_large_is_431() {
    let s = start(echo(), limits()).await;
    let raw = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(2000)
    );
    assert_eq!(one_shot_and_close(s.addr, raw.as_bytes()).await.status, 431);
    // also when the head never ends
    let raw = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}", "a".repeat(2000));
    assert_eq!(one_shot_and_close(s.addr, raw.as_bytes()).await.status, 431);
}

#[tokio::test]
async fn slowloris_gets_408() {
    let s = start(echo(), limits()).await; // head_timeout 1 s
    let stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let raw: &'static [u8] =
        b"GET /slow HTTP/1.1\r\nHost: t\r\nX-Drip: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let t0 = Instant::now();
    let drip = tokio::spawn(async move {
        for b in raw {
            if wr.write_all(std::slice::from_ref(b)).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        wr
    });
    let mut got = Vec::new();
    tokio::time::timeout(WAIT, rd.read_to_end(&mut got))
        .await
        .unwrap()
        .unwrap();
    let elapsed = t0.elapsed();
    drip.abort();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    assert!(text.contains("Connection: close\r\n"));
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn body_too_large_is_413() {
    let s = start(echo(), limits()).await; // max_body 1000
    let r = one_shot_and_close(
        s.addr,
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 413);
    let mut raw = b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..3 {
        raw.extend_from_slice(format!("{:x}\r\n{}\r\n", 400, "z".repeat(400)).as_bytes());
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(one_shot_and_close(s.addr, &raw).await.status, 413);
    // exactly at the limit is fine
    let mut c = Client::connect(s.addr).await;
    let mut raw = b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n".to_vec();
    raw.extend(std::iter::repeat_n(b'q', 1000));
    c.send(&raw).await;
    assert_eq!(c.response().await.status, 200);
}

#[tokio::test]
async fn idle_keep_alive_is_closed_silently() {
    let s = start(echo(), limits()).await; // idle 400 ms
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/")).await;
    assert_eq!(c.response().await.status, 200);
    let t0 = Instant::now();
    assert!(c.closed().await, "idle close must not send bytes");
    let e = t0.elapsed();
    assert!(
        e >= Duration::from_millis(300) && e < Duration::from_secs(3),
        "{e:?}"
    );
    // a fresh connection that never sends anything is closed after the head timeout, silently
    let mut c = Client::connect(s.addr).await;
    assert!(c.closed().await);
}

#[tokio::test]
async fn max_requests_per_connection() {
    let s = start(
        echo(),
        Limits {
            max_requests_per_connection: Some(2),
            ..limits()
        },
    )
    .await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/1")).await;
    assert_eq!(c.response().await.header("connection"), None);
    c.send(&get("/2")).await;
    assert_eq!(c.response().await.header("connection"), Some("close"));
    assert!(c.closed().await);
}

#[tokio::test]
async fn max_connections_holds_newcomers() {
    let s = start(
        echo(),
        Limits {
            max_connections: 2,
            idle_timeout: Duration::from_secs(10),
            ..limits()
        },
    )
    .await;
    let mut a = Client::connect(s.addr).await;
    let mut b = Client::connect(s.addr).await;
    for c in [&mut a, &mut b] {
        c.send(&get("/")).await;
        assert_eq!(c.response().await.status, 200);
    }
    let mut third = Client::connect(s.addr).await; // sits in the backlog
    third.send(&get("/third")).await;
    let mut peek = [0u8; 16];
    let waited =
        tokio::time::timeout(Duration::from_millis(300), third.stream.peek(&mut peek)).await;
    assert!(
        waited.is_err(),
        "third connection served beyond max_connections"
    );
    drop(a);
    let r = third.response().await;
    assert!(r.text().starts_with("GET /third"));
}

#[tokio::test]
async fn smuggling_attempts_are_400_and_closed() {
    let s = start(echo(), limits()).await;
    let cases: &[&[u8]] = &[
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3,3\r\n\r\nabc",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0x10\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET / HTTP/1.1\nHost: t\n\n",
        b"GET / HTTP/1.1\r\nHost: t\nX: y\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX: y\r\n z\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\n\tX: y\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX\x01: y\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ];
    let calls = Arc::new(AtomicUsize::new(0));
    let s2 = start(
        Echo {
            calls: calls.clone(),
        },
        limits(),
    )
    .await;
    for raw in cases {
        for addr in [s.addr, s2.addr] {
            let r = one_shot_and_close(addr, raw).await;
            assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(raw));
            assert_eq!(r.header("connection"), Some("close"));
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "a smuggling attempt reached the handler"
    );
}

/// RFC 9112 §6.1: a transfer coding the server does not understand, in front of a final `chunked` (so the
/// framing itself is sound), is 501 Not Implemented and the connection is closed; the handler never runs.
#[tokio::test]
async fn http_unknown_transfer_coding_is_501_and_closed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let s = start(
        Echo {
            calls: calls.clone(),
        },
        limits(),
    )
    .await;
    for raw in [
        &b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: x-custom;v=1, chunked\r\n\r\n0\r\n\r\n",
        b"PUT /p HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity, chunked\r\nExpect: 100-continue\r\n\r\n",
    ] {
        let r = one_shot_and_close(s.addr, raw).await;
        assert_eq!(r.status, 501, "{:?}", String::from_utf8_lossy(raw));
        assert_eq!(r.header("connection"), Some("close"));
        assert!(r.text().contains("transfer coding"), "{}", r.text());
    }
    // a request pipelined behind it is not served either: the connection ends with the 501
    let mut c = Client::connect(s.addr).await;
    let mut raw =
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n".to_vec();
    raw.extend(get("/next"));
    c.send(&raw).await;
    assert_eq!(c.response().await.status, 501);
    assert!(c.closed().await, "connection kept open after 501");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "a 501 request reached the handler"
    );
    // the same server still serves a plain chunked body
    let mut c = Client::connect(s.addr).await;
    c.send(
        b"POST /ok HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    )
    .await;
    let r = c.response().await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("body=hi"), "{}", r.text());
}

#[tokio::test]
async fn bad_request_lines() {
    let s = start(echo(), limits()).await;
    for (raw, status) in [
        (&b"GET / HTTP/2.0\r\nHost: t\r\n\r\n"[..], 505),
        (b"GET / HTTP/3.0\r\nHost: t\r\n\r\n", 505), // HTTP/1.x with x > 1 is read as 1.1: http_proxy_hostile
        (b"GET / HTTX/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET /\r\n\r\n", 400),
        (b"GET\r\n\r\n", 400),
        (b"G@T / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET  / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET nopath HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        (b"GET /../x HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET /%2e%2e/x HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET /a%00 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"GET /%G1 HTTP/1.1\r\nHost: t\r\n\r\n", 400),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n\r\n", 417),
    ] {
        let r = one_shot_and_close(s.addr, raw).await;
        assert_eq!(r.status, status, "{:?}", String::from_utf8_lossy(raw));
    }
}

#[tokio::test]
async fn garbage_never_kills_the_server() {
    let s = start(echo(), limits()).await;
    // deterministic pseudo-random inputs, some shaped like requests
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet: &[u8] = b"GET POST / HTTP/1.1\r\n:Host:Content-Length:Transfer-Encoding:chunked0123456789abcdef \t\x00\xff%";
    for _ in 0..150 {
        let len = (next() % 200) as usize;
        let mut raw = if next() % 2 == 0 {
            b"GET / HTTP/1.1\r\nHost: t\r\n".to_vec()
        } else {
            Vec::new()
        };
        for _ in 0..len {
            raw.push(alphabet[(next() % alphabet.len() as u64) as usize]);
        }
        raw.extend_from_slice(b"\r\n\r\n");
        let mut c = Client::connect(s.addr).await;
        c.send(&raw).await;
        let _ = tokio::time::timeout(Duration::from_millis(1500), c.try_response(false)).await;
    }
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/alive")).await;
    assert_eq!(c.response().await.status, 200);
}

#[tokio::test]
async fn graceful_shutdown_finishes_in_flight_and_closes_idle() {
    let s = start(
        echo(),
        Limits {
            idle_timeout: Duration::from_secs(30),
            ..limits()
        },
    )
    .await;
    let mut idle = Client::connect(s.addr).await;
    idle.send(&get("/")).await;
    assert_eq!(idle.response().await.status, 200);
    let mut busy = Client::connect(s.addr).await;
    busy.send(&get("/slow?sleep=600")).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let t0 = Instant::now();
    s.shutdown.send(true).unwrap();
    assert!(
        idle.closed().await,
        "idle connection not closed on shutdown"
    );
    let r = busy.response().await;
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("GET /slow"));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(busy.closed().await);
    tokio::time::timeout(WAIT, s.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert!(
        tokio::net::TcpStream::connect(s.addr).await.is_err(),
        "still accepting after shutdown"
    );
}
