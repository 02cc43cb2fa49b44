//! Issue 10's proxy and parser defects, tested like an attacker would: raw-TCP clients and scripted upstreams
//! that misbehave on purpose (late bytes after a response, unsolicited responses, half-closed idle
//! connections, a POST read then dropped, a head dripped a byte at a time, endless `100 Continue`), plus the
//! request shapes that used to slip past routing (`strip_prefix` on a path spelled differently, absolute-form),
//! Host validation, `_` in header names, non-UTF-8 values, header-name case, HTTP/1.2, 414 and the chunk-size
//! line limit. Everything listens on 127.0.0.1:0 and every wait is bounded.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http_util::*;
use ordo_serve::backend::Backend;
use ordo_serve::backend::proxy::{ProxyBackend, ProxyConfig};
use ordo_serve::http::{Handler, Limits, Request, Response};
use ordo_serve::{Overrides, ServeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------------------
// harness

/// What a scripted upstream saw: connections accepted and every request read (raw bytes, body included).
#[derive(Clone, Default)]
struct Log {
    conns: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Log {
    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }
    fn requests(&self) -> Vec<Vec<u8>> {
        self.requests.lock().unwrap().clone()
    }
    fn count(&self, method: &str) -> usize {
        let m = format!("{method} ");
        self.requests()
            .iter()
            .filter(|r| r.starts_with(m.as_bytes()))
            .count()
    }
    /// The head of the last request read, as text (lossy).
    fn last_head(&self) -> String {
        let r = self.requests().pop().expect("the upstream saw a request");
        let end = find(&r, b"\r\n\r\n").map_or(r.len(), |i| i + 4);
        String::from_utf8_lossy(&r[..end]).into_owned()
    }
}

/// A scripted upstream: `script(i, stream, log)` runs for the i-th accepted connection (0-based).
async fn mock<F, Fut>(script: F) -> (SocketAddr, Log)
where
    F: Fn(usize, TcpStream, Log) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Log::default();
    let l = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let i = l.conns.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(script(i, s, l.clone()));
        }
    });
    (addr, log)
}

/// Reads one request (head and Content-Length body) from `s`, logs it and returns it; `None` on EOF, error
/// or after `WAIT`. `buf` keeps bytes read beyond it.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>, log: &Log) -> Option<Vec<u8>> {
    let read = async {
        let mut tmp = [0u8; 8192];
        loop {
            if let Some(i) = find(buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if buf.len() >= i + 4 + len {
                    let req: Vec<u8> = buf.drain(..i + 4 + len).collect();
                    log.requests.lock().unwrap().push(req.clone());
                    return Some(req);
                }
            }
            match s.read(&mut tmp).await {
                Ok(n) if n > 0 => buf.extend_from_slice(&tmp[..n]),
                _ => return None,
            }
        }
    };
    tokio::time::timeout(WAIT, read).await.ok().flatten()
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// An upstream that answers every request on every connection with `body`.
async fn answering(body: &'static str) -> (SocketAddr, Log) {
    answering_raw(ok(body)).await
}

/// An upstream that answers every request on every connection with the raw response `resp`.
async fn answering_raw(resp: impl Into<Vec<u8>>) -> (SocketAddr, Log) {
    let resp: Arc<[u8]> = resp.into().into();
    mock(move |_, mut s, log| {
        let resp = resp.clone();
        async move {
            let mut buf = Vec::new();
            while read_request(&mut s, &mut buf, &log).await.is_some() {
                if s.write_all(&resp).await.is_err() {
                    return;
                }
            }
        }
    })
    .await
}

/// An upstream that answers every request with the raw request it received as the body.
async fn echoing() -> (SocketAddr, Log) {
    mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        while let Some(req) = read_request(&mut s, &mut buf, &log).await {
            let mut out =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", req.len()).into_bytes();
            out.extend_from_slice(&req);
            if s.write_all(&out).await.is_err() {
                return;
            }
        }
    })
    .await
}

struct ProxyRoute(Arc<Backend>);

impl Handler for ProxyRoute {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
        let backend = self.0.clone();
        async move { backend.call(&req).await }
    }
}

fn cfg(upstream: SocketAddr) -> ProxyConfig {
    ProxyConfig {
        upstreams: vec![upstream.to_string().as_str().into()],
        connect_timeout: Duration::from_millis(500),
        read_timeout: Duration::from_secs(2),
        ..ProxyConfig::default()
    }
}

async fn proxy(cfg: ProxyConfig) -> Server {
    let backend = Backend::Proxy(ProxyBackend::new(&cfg).unwrap());
    start(ProxyRoute(Arc::new(backend)), Limits::default()).await
}

/// A whole `ordo serve` (routing, strip_prefix) from a config; the listener moved to 127.0.0.1:0.
async fn ordo(toml: &str) -> ordo_serve::ServerHandle {
    let mut cfg = ServeConfig::from_toml_str(toml, "test.toml").expect("valid test config");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    cfg.apply_overrides(Overrides {
        listen: Some(any),
        admin: Some(None),
        ..Overrides::default()
    });
    ordo_serve::Server::start(cfg).await.expect("server starts")
}

async fn exchange(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut c = Client::connect(addr).await;
    c.send(raw).await;
    c.response().await
}

// ---------------------------------------------------------------------------------------------------------
// 1. the keep-alive pool must not hand one client's leftovers to another

/// Connection 0 answers its first request with `first`, then after 50 ms writes `late` (bytes nobody asked
/// for) and keeps the connection open; every later connection answers each request with "fresh".
async fn leaky(first: &'static [u8], late: &'static [u8]) -> (SocketAddr, Log) {
    mock(move |i, mut s, log| async move {
        let mut buf = Vec::new();
        if i == 0 {
            if read_request(&mut s, &mut buf, &log).await.is_none() {
                return;
            }
            let _ = s.write_all(first).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = s.write_all(late).await;
            // read (and never answer) whatever else comes on this connection
            while read_request(&mut s, &mut buf, &log).await.is_some() {}
            return;
        }
        while read_request(&mut s, &mut buf, &log).await.is_some() {
            if s.write_all(&ok("fresh")).await.is_err() {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn issue10_pool_late_body_after_head_is_not_served_to_the_next_client() {
    let (up, _log) = leaky(
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSECRET",
    )
    .await;
    let s = proxy(cfg(up)).await;
    let mut a = Client::connect(s.addr).await;
    a.send(b"HEAD /a HTTP/1.1\r\nHost: t\r\n\r\n").await;
    assert_eq!(a.try_response(true).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = exchange(s.addr, &get("/b")).await;
    assert_eq!((r.status, r.text().as_str()), (200, "fresh"));
}

#[tokio::test]
async fn issue10_pool_unsolicited_response_is_not_served_to_the_next_client() {
    let (up, _log) = leaky(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSECRET",
    )
    .await;
    let s = proxy(cfg(up)).await;
    assert_eq!(exchange(s.addr, &get("/a")).await.text(), "ok");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = exchange(s.addr, &get("/b")).await;
    assert_eq!((r.status, r.text().as_str()), (200, "fresh"));
}

#[tokio::test]
async fn issue10_pool_connection_closed_while_idle_is_not_reused() {
    // Connection 0 answers one request, then half-closes (its FIN reaches the proxy while the connection
    // idles in the pool) but goes on reading: a request written to it would still be read, and could be
    // acted on, before the proxy notices the close.
    let (up, log) = mock(|i, mut s, log| async move {
        let mut buf = Vec::new();
        while read_request(&mut s, &mut buf, &log).await.is_some() {
            let _ = s
                .write_all(&ok(if i == 0 { "first" } else { "fresh" }))
                .await;
            if i == 0 {
                let _ = s.shutdown().await;
            }
        }
    })
    .await;
    let s = proxy(cfg(up)).await;
    assert_eq!(exchange(s.addr, &get("/a")).await.text(), "first");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let post = b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc";
    let r = exchange(s.addr, post).await;
    assert_eq!((r.status, r.text().as_str()), (200, "fresh"));
    assert_eq!(
        log.count("POST"),
        1,
        "the POST reached the upstream more than once"
    );
}

// ---------------------------------------------------------------------------------------------------------
// 2. retries: idempotent requests only

/// Each connection answers its first request "ok"; it reads the second one whole, then closes without
/// answering.
async fn reads_then_drops_the_second() -> (SocketAddr, Log) {
    mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        if read_request(&mut s, &mut buf, &log).await.is_none() {
            return;
        }
        let _ = s.write_all(&ok("ok")).await;
        let _ = read_request(&mut s, &mut buf, &log).await;
    })
    .await
}

#[tokio::test]
async fn issue10_a_post_the_upstream_read_is_never_replayed() {
    let (up, log) = reads_then_drops_the_second().await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/warm")).await;
    assert_eq!(c.response().await.text(), "ok");
    c.send(b"POST /pay HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n10EUR")
        .await;
    let r = c.response().await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(
        log.count("POST"),
        1,
        "the upstream ran the POST more than once"
    );
    // PATCH is not idempotent either
    let (up, log) = reads_then_drops_the_second().await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/warm")).await;
    assert_eq!(c.response().await.text(), "ok");
    c.send(b"PATCH /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
        .await;
    assert_eq!(c.response().await.status, 502);
    assert_eq!(log.count("PATCH"), 1);
}

#[tokio::test]
async fn issue10_an_idempotent_request_is_retried_once_on_a_fresh_connection() {
    let (up, log) = reads_then_drops_the_second().await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/warm")).await;
    assert_eq!(c.response().await.text(), "ok");
    c.send(b"PUT /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
        .await;
    let r = c.response().await;
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert_eq!((log.count("PUT"), log.conns()), (2, 2));
}

// ---------------------------------------------------------------------------------------------------------
// 3. gateway errors say what failed, not where

#[tokio::test]
async fn issue10_gateway_errors_do_not_reveal_the_upstream_address() {
    // refused (a port bound but not listening, reserved for the whole test)
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = reserved.local_addr().unwrap();
    let s = proxy(cfg(dead)).await;
    let r = exchange(s.addr, &get("/")).await;
    assert_eq!(r.status, 502);
    assert!(!r.text().contains(&dead.port().to_string()), "{}", r.text());
    assert!(!r.text().contains("127.0.0.1"), "{}", r.text());
    assert!(!r.text().contains("os error"), "{}", r.text());
    // malformed answer and a timeout
    let (junk, _) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        if read_request(&mut s, &mut buf, &log).await.is_some() {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")
                .await;
        }
    })
    .await;
    let (stall, _) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        let _ = read_request(&mut s, &mut buf, &log).await;
        tokio::time::sleep(WAIT).await;
    })
    .await;
    for (up, status) in [(junk, 502), (stall, 504)] {
        let s = proxy(ProxyConfig {
            read_timeout: Duration::from_millis(300),
            ..cfg(up)
        })
        .await;
        let r = exchange(s.addr, &get("/")).await;
        assert_eq!(r.status, status, "{}", r.text());
        assert!(!r.text().contains(&up.port().to_string()), "{}", r.text());
    }
}

// ---------------------------------------------------------------------------------------------------------
// 4. a deadline on the whole response head

#[tokio::test]
async fn issue10_an_upstream_dripping_its_head_gets_504_at_the_head_deadline() {
    // one byte every 50 ms, each read well within read_timeout, the head never complete
    let (up, _log) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        if read_request(&mut s, &mut buf, &log).await.is_none() {
            return;
        }
        let drip = b"HTTP/1.1 200 OK\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for b in drip.iter().cycle().take(400) {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let s = proxy(ProxyConfig {
        read_timeout: Duration::from_secs(1),
        response_head_timeout: Duration::from_millis(600),
        ..cfg(up)
    })
    .await;
    let t0 = Instant::now();
    let r = exchange(s.addr, &get("/")).await;
    assert_eq!(r.status, 504, "{}", r.text());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

#[tokio::test]
async fn issue10_endless_100_continue_gets_504_at_the_head_deadline() {
    let (up, _log) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        if read_request(&mut s, &mut buf, &log).await.is_none() {
            return;
        }
        for _ in 0..200 {
            if s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let s = proxy(ProxyConfig {
        read_timeout: Duration::from_secs(1),
        response_head_timeout: Duration::from_millis(500),
        ..cfg(up)
    })
    .await;
    let t0 = Instant::now();
    let r = exchange(s.addr, &get("/")).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------------------------
// 5. headers forwarded as sent: bytes, name case, no `_` names

#[tokio::test]
async fn issue10_non_utf8_header_values_are_forwarded_byte_exact() {
    let (up, log) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        while read_request(&mut s, &mut buf, &log).await.is_some() {
            let _ = s
                .write_all(
                    b"HTTP/1.1 200 OK\r\nX-Latin: caf\xe9 \xff\xfe\r\nContent-Length: 2\r\n\r\nok",
                )
                .await;
        }
    })
    .await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET / HTTP/1.1\r\nHost: h\r\nX-Bin: caf\xe9\x80 end\r\nX-Utf8: caf\xc3\xa9\r\n\r\n")
        .await;
    let mut raw = Vec::new();
    let mut tmp = [0u8; 4096];
    while !raw.ends_with(b"\r\n\r\nok") {
        let n = tokio::time::timeout(WAIT, c.stream.read(&mut tmp))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early");
        raw.extend_from_slice(&tmp[..n]);
    }
    assert!(
        find(&raw, b"\r\nX-Latin: caf\xe9 \xff\xfe\r\n").is_some(),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    let req = log.requests().pop().unwrap();
    assert!(
        find(&req, b"\r\nX-Bin: caf\xe9\x80 end\r\n").is_some(),
        "{}",
        String::from_utf8_lossy(&req)
    );
    assert!(find(&req, b"\r\nX-Utf8: caf\xc3\xa9\r\n").is_some());
}

#[tokio::test]
async fn upstream_response_headers_its_connection_field_names_are_not_forwarded() {
    // the usual `Connection: keep-alive` names nothing: every end-to-end header is forwarded
    let (up, _) = answering_raw(
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
    )
    .await;
    let s = proxy(cfg(up)).await;
    let r = exchange(s.addr, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
    assert_eq!((r.status, r.header("x-kept")), (200, Some("1")));
    // a header the upstream lists in Connection (any case, in either of two fields) is hop-by-hop
    let (up, _) = answering_raw(
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, x-secret\r\nX-Secret: 1\r\nX-Kept: 1\r\n\
          connection: X-Other\r\nx-other: 2\r\nContent-Length: 2\r\n\r\nok",
    )
    .await;
    let s = proxy(cfg(up)).await;
    let r = exchange(s.addr, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"ok");
    assert_eq!(r.header("x-kept"), Some("1"));
    assert_eq!((r.header("x-secret"), r.header("x-other")), (None, None));
}

#[tokio::test]
async fn upstream_header_values_with_control_bytes_are_a_502_not_forwarded() {
    for resp in [
        &b"HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\nContent-Length: 2\r\n\r\nok"[..],
        b"HTTP/1.1 200 OK\r\nX-Del: a\x7fb\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\nContent-Length: 2\r\n\r\nok",
    ] {
        let (up, _) = answering_raw(resp).await;
        let s = proxy(cfg(up)).await;
        let r = exchange(s.addr, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(resp));
        assert_ne!(r.body, b"ok");
    }
    // a tab inside a value is allowed and forwarded as sent
    let (up, _) =
        answering_raw(b"HTTP/1.1 200 OK\r\nX-Tab: a\tb\r\nContent-Length: 2\r\n\r\nok").await;
    let s = proxy(cfg(up)).await;
    let r = exchange(s.addr, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").await;
    assert_eq!((r.status, r.header("x-tab")), (200, Some("a\tb")));
}

#[tokio::test]
async fn issue10_header_names_keep_the_senders_case_and_ordos_own_are_canonical() {
    let (up, log) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        while read_request(&mut s, &mut buf, &log).await.is_some() {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nx-lower: 1\r\nX-UPPER: 2\r\nSet-Cookie: a=b\r\ncontent-length: 2\r\n\r\nok")
                .await;
        }
    })
    .await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET / HTTP/1.1\r\nhOsT: h\r\nX-MiXed: 1\r\nx-forwarded-for: 10.0.0.1\r\nuser-agent: t\r\n\r\n")
        .await;
    let r = c.response().await;
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    for n in [
        "Server",
        "Date",
        "Content-Length",
        "x-lower",
        "X-UPPER",
        "Set-Cookie",
    ] {
        assert!(names.contains(&n), "{n} not in {names:?}");
    }
    let head = log.last_head();
    for line in [
        "hOsT: h",
        "X-MiXed: 1",
        "user-agent: t",
        // (an untrusted client's list is replaced, in ordo's own spelling)
        "X-Forwarded-For: 127.0.0.1",
        "Via: 1.1 ordo-",
    ] {
        assert!(
            head.contains(&format!("\r\n{line}")),
            "{line:?} not in {head}"
        );
    }
    // ordo's own answers: canonical names too
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let s = proxy(cfg(reserved.local_addr().unwrap())).await;
    let r = exchange(s.addr, &get("/")).await;
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
    assert!(names.contains(&"Content-Type"), "{names:?}");
}

#[tokio::test]
async fn issue10_underscore_header_names_are_dropped_unless_allowed() {
    let (up, log) = echoing().await;
    let req = b"GET / HTTP/1.1\r\nHost: h\r\nContent_Length: 5\r\nX-Forwarded_For: 6.6.6.6\r\nX_Ok: 1\r\nX-Fine: 2\r\n\r\n";
    let s = proxy(cfg(up)).await;
    assert_eq!(exchange(s.addr, req).await.status, 200);
    let head = log.last_head();
    assert!(!head.contains('_'), "{head}");
    assert!(!head.contains("6.6.6.6"), "{head}");
    assert!(head.contains("\r\nX-Fine: 2\r\n"), "{head}");
    let s = proxy(ProxyConfig {
        forward_underscore_headers: true,
        ..cfg(up)
    })
    .await;
    assert_eq!(exchange(s.addr, req).await.status, 200);
    let head = log.last_head();
    assert!(head.contains("\r\nContent_Length: 5\r\n"), "{head}");
    assert!(head.contains("\r\nX_Ok: 1\r\n"), "{head}");
}

// ---------------------------------------------------------------------------------------------------------
// 6. strip_prefix, absolute-form and Host: the upstream sees the path and host ordo routed on

#[tokio::test]
async fn issue10_strip_prefix_applies_to_every_spelling_of_the_prefix() {
    let (up, log) = echoing().await;
    let h = ordo(&format!(
        "[[routes]]\nprefix = \"/prefix\"\nstrip_prefix = true\nproxy = {{ upstreams = [\"{up}\"] }}\n\
         [[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{up}\"] }}\n"
    ))
    .await;
    let addr = h.local_addr();
    for (target, want) in [
        ("/prefix/y", "/y"),
        ("/prefix", "/"),
        ("/prefix/", "/"),
        ("/prefix?a=b", "/?a=b"),
        ("//prefix/y", "/y"),
        ("/%70refix/y", "/y"),
        ("/%70%72%65%66%69%78/y?q=%70", "/y?q=%70"),
        ("/prefix/../prefix/y", "/y"),
        ("/x/../prefix/./y", "/y"),
        ("/prefix//y", "/y"),
        ("http://h/prefix/y?q=1", "/y?q=1"),
        ("HTTP://h:80//prefix/%79", "/y"),
        // characters that must stay escaped to mean the same thing upstream
        ("/prefix/a%3Fb%23c", "/a%3Fb%23c"),
        ("/prefix/100%25", "/100%25"),
        ("/prefix/caf%C3%A9%20x", "/caf%C3%A9%20x"),
        // the route without strip_prefix: the normalised path, the query as sent
        ("/other/./a//b?x=%2F", "/other/a/b?x=%2F"),
        ("http://h?q=1", "/?q=1"),
        ("http://h", "/"),
    ] {
        let r = exchange(
            addr,
            format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        let line = log.last_head();
        let line = line.lines().next().unwrap();
        assert_eq!(line, format!("GET {want} HTTP/1.1"), "{target}");
    }
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn issue10_absolute_form_authority_becomes_host() {
    let (up, log) = echoing().await;
    let s = proxy(cfg(up)).await;
    let r = exchange(
        s.addr,
        b"GET http://Real.Example:8080/x?q=1 HTTP/1.1\r\nHost: other\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    let head = log.last_head();
    assert!(head.starts_with("GET /x?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nHost: Real.Example:8080\r\n"), "{head}");
    assert!(!head.contains("other"), "{head}");
    // an authority that is not a valid host, or carries userinfo: 400
    for t in [
        "http:///x",
        "http://a b/",
        "http://user@h/x",
        "http://h:8x/",
    ] {
        let r = exchange(
            s.addr,
            format!("GET {t} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes(),
        )
        .await;
        assert_eq!(r.status, 400, "{t}");
    }
}

#[tokio::test]
async fn issue10_invalid_host_is_400() {
    let (up, log) = echoing().await;
    let s = proxy(cfg(up)).await;
    for host in [
        "a b", "a/../b", "a/b", "user@h", "h:port", "h:80:80", "[::1", "[zz::1]", "a%zz", "a\\b",
        "a?b", "a#b",
    ] {
        let r = one_shot_and_close(
            s.addr,
            format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        )
        .await;
        assert_eq!(r.status, 400, "Host: {host}");
    }
    for bad in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
    ] {
        assert_eq!(one_shot_and_close(s.addr, bad).await.status, 400);
    }
    assert_eq!(log.requests().len(), 0, "a bad request was forwarded");
    for host in [
        "example.com",
        "Example.COM:8080",
        "127.0.0.1:1",
        "[::1]:80",
        "[v1.x]",
        "xn--bcher-kva.example",
        "a_b.example",
        "%41.example",
        "h:",
        "",
    ] {
        let r = exchange(
            s.addr,
            format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        )
        .await;
        assert_eq!(r.status, 200, "Host: {host}");
    }
}

#[tokio::test]
async fn issue10_connection_host_does_not_remove_host() {
    let (up, log) = echoing().await;
    let s = proxy(cfg(up)).await;
    let r = exchange(
        s.addr,
        b"GET / HTTP/1.1\r\nHost: site.example\r\nConnection: Host, X-Drop\r\nX-Drop: 1\r\n\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    let head = log.last_head();
    assert!(head.contains("\r\nHost: site.example\r\n"), "{head}");
    assert!(!head.contains(&up.to_string()), "{head}");
    assert!(!head.to_ascii_lowercase().contains("x-drop"), "{head}");
}

// ---------------------------------------------------------------------------------------------------------
// 7. the parser: HTTP/1.x, 414, the chunk-size line

#[tokio::test]
async fn issue10_http_1_minor_versions_are_http_1_1() {
    let (up, log) = mock(|_, mut s, log| async move {
        let mut buf = Vec::new();
        while read_request(&mut s, &mut buf, &log).await.is_some() {
            let _ = s
                .write_all(b"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await;
        }
    })
    .await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    for v in ["1.2", "1.9"] {
        c.send(format!("GET /{v} HTTP/{v}\r\nHost: h\r\n\r\n").as_bytes())
            .await;
        let r = c.response().await;
        assert_eq!((r.status, r.text().as_str()), (200, "ok"), "HTTP/{v}");
    }
    // kept alive like HTTP/1.1, and forwarded as HTTP/1.1
    assert!(log.last_head().starts_with("GET /1.9 HTTP/1.1\r\n"));
    // HTTP/1.1 rules apply: Host is required
    assert_eq!(
        one_shot_and_close(s.addr, b"GET / HTTP/1.2\r\n\r\n")
            .await
            .status,
        400
    );
    for v in ["2.0", "3.0", "0.9", "2.1"] {
        let r = one_shot_and_close(
            s.addr,
            format!("GET / HTTP/{v}\r\nHost: h\r\n\r\n").as_bytes(),
        )
        .await;
        assert_eq!(r.status, 505, "HTTP/{v}");
    }
}

#[tokio::test]
async fn issue10_long_uri_is_414_and_long_headers_431() {
    let (up, _log) = answering("ok").await;
    let s = proxy(cfg(up)).await;
    // 64 KiB URI, sent whole
    let long = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "a".repeat(64 * 1024));
    assert_eq!(
        one_shot_and_close(s.addr, long.as_bytes()).await.status,
        414
    );
    // a URI over the limit that has not ended yet (no request line end seen)
    let partial = format!("GET /{}", "a".repeat(20 * 1024));
    assert_eq!(
        one_shot_and_close(s.addr, partial.as_bytes()).await.status,
        414
    );
    // a URI just under the limit is fine; headers over the head limit are 431
    let fits = format!(
        "GET /{} HTTP/1.1\r\nHost: h\r\n\r\n",
        "a".repeat(8 * 1024 - 2)
    );
    assert_eq!(exchange(s.addr, fits.as_bytes()).await.status, 200);
    let fat = format!(
        "GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n\r\n",
        "a".repeat(17 * 1024)
    );
    assert_eq!(one_shot_and_close(s.addr, fat.as_bytes()).await.status, 431);
}

#[tokio::test]
async fn issue10_chunk_size_line_limit_holds_when_the_body_arrives_in_one_read() {
    let (up, log) = answering("ok").await;
    let s = proxy(cfg(up)).await;
    let ext = "x".repeat(5000);
    let req = format!(
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;ext={ext}\r\nabc\r\n0\r\n\r\n"
    );
    let r = one_shot_and_close(s.addr, req.as_bytes()).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(log.requests().len(), 0);
}

// ---------------------------------------------------------------------------------------------------------
// 8. the response reader (ordo-http1's ResponseReader): interim heads, trailers, the head size limit

#[tokio::test]
async fn interim_heads_are_skipped_and_a_chunked_body_with_trailers_arrives_decoded() {
    let (up, _log) = answering_raw(
        &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Up: 1\r\n\r\n5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"[..],
    )
    .await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    // twice on one connection: the pooled upstream connection is left at the next response
    for _ in 0..2 {
        c.send(&get("/")).await;
        let r = c.response().await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body, b"hello world");
        assert_eq!(r.header("x-up"), Some("1"));
        assert_eq!(
            r.header("link"),
            None,
            "an interim head's fields are not the response's"
        );
    }
}

#[tokio::test]
async fn an_upstream_head_over_max_response_head_bytes_is_a_502_even_in_one_read() {
    let head = |pad: usize| {
        format!(
            "HTTP/1.1 200 OK\r\nX-Pad: {}\r\nContent-Length: 2\r\n\r\nok",
            "a".repeat(pad)
        )
    };
    // 17 + 9 + 19 + 2 bytes around the padding: a head of exactly 1024 bytes is read, 1025 is not
    for (pad, status) in [(1024 - 47, 200), (1024 - 46, 502)] {
        let (up, _log) = answering_raw(head(pad)).await;
        let s = proxy(ProxyConfig {
            max_response_head_bytes: 1024,
            ..cfg(up)
        })
        .await;
        let r = exchange(s.addr, &get("/")).await;
        assert_eq!(r.status, status, "padding {pad}: {}", r.text());
    }
}

/// An upstream whose chunked body turns bad after the response head went out (a chunk size that is no hex):
/// the client's response is cut short — its connection closed before the last chunk, which it can tell from
/// a complete answer — and the operator gets a warning with the reason (it used to be silent).
#[tokio::test]
async fn a_streamed_body_gone_bad_is_cut_and_logged() {
    let (log, _guard) = crate::ctl_util::Captured::start();
    let (up, _ulog) =
        answering_raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n")
            .await;
    let s = proxy(cfg(up)).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/")).await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(WAIT, c.stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the connection was not closed");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(!text.ends_with("0\r\n\r\n"), "no last chunk: {text}");
    let lines = log.matching("bad upstream chunking");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("WARN")
            && lines[0].contains("was cut")
            && lines[0].contains(&up.to_string()),
        "{lines:?}"
    );
}
