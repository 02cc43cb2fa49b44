//! HTTP/2 (issue 11 phase 2): ALPN picks h2 and h2c is sniffed; streams map to the Request the handler sees
//! (pseudo-headers, `:authority` → Host, cookies joined, connection-specific fields refused); request bodies
//! within their limits; every response body kind sent within flow control; the per-connection cap on
//! streams in progress; streams of one connection dispatched by stride shares; per-stream 503 on overload;
//! GOAWAY on shutdown and when idle; the rapid-reset defence (the connection cut, nothing left queued);
//! CONTINUATION, PING and SETTINGS floods bounded; curl over h2 and h2c.

use crate::ctl_util;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::ctl_util::{queued, wait_until};
use bytes::{Bytes, BytesMut};
use ordo_serve::ServerHandle;
use ordo_serve::http::{Body, Handler, Limits, Request, Response};
use ordo_serve::http2::Http2Config;
use ordo_serve::listen::run_listener_with;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Upper bound for any single wait in these tests.
const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------------------
// An h2 client (the `h2` crate's client side)

struct Client {
    send: h2::client::SendRequest<Bytes>,
    conn: tokio::task::JoinHandle<Result<(), h2::Error>>,
}

async fn handshake<T>(io: T) -> Client
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = tokio::time::timeout(WAIT, h2::client::handshake(io))
        .await
        .expect("HTTP/2 handshake in time")
        .expect("HTTP/2 handshake");
    Client {
        send,
        conn: tokio::spawn(conn),
    }
}

async fn h2c(addr: SocketAddr) -> Client {
    handshake(TcpStream::connect(addr).await.unwrap()).await
}

/// A client whose streams open with a zero window (a slow reader that reads nothing), and the switch that
/// gives every stream a 1 MiB window when sent.
async fn zero_window_client(addr: SocketAddr) -> (Client, tokio::sync::oneshot::Sender<()>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, mut conn) = tokio::time::timeout(
        WAIT,
        h2::client::Builder::new()
            .initial_window_size(0)
            .handshake::<_, Bytes>(tcp),
    )
    .await
    .unwrap()
    .unwrap();
    let (open, opened) = tokio::sync::oneshot::channel::<()>();
    let driver = tokio::spawn(async move {
        tokio::select! {
            r = &mut conn => return r,
            _ = opened => {}
        }
        conn.set_initial_window_size(1 << 20)?;
        conn.await
    });
    (Client { send, conn: driver }, open)
}

fn get(path: &str) -> http::Request<()> {
    http::Request::builder()
        .uri(format!("http://t.test{path}"))
        .body(())
        .unwrap()
}

#[derive(Debug)]
struct Got {
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Client {
    /// Starts a request without a body; returns its response future and its stream (to reset it).
    async fn start(
        &mut self,
        req: http::Request<()>,
    ) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
        let mut ready = tokio::time::timeout(WAIT, self.send.clone().ready())
            .await
            .expect("stream slot in time")
            .expect("connection usable");
        ready.send_request(req, true).expect("request sent")
    }

    async fn fetch(&mut self, req: http::Request<()>) -> Got {
        let (f, _) = self.start(req).await;
        collect(f).await.expect("response")
    }
}

async fn collect(f: h2::client::ResponseFuture) -> Result<Got, h2::Error> {
    let r = tokio::time::timeout(WAIT, async {
        let resp = f.await?;
        let (parts, mut body) = resp.into_parts();
        let mut out = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
            out.extend_from_slice(&chunk);
        }
        Ok(Got {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: out.freeze(),
        })
    })
    .await;
    r.expect("response within the wait")
}

// ---------------------------------------------------------------------------------------------------------
// A listener with a test handler (run_listener_with, h2c)

struct Echo {
    /// Handler calls.
    calls: AtomicUsize,
    active: AtomicUsize,
    peak: AtomicUsize,
    file: PathBuf,
}

/// Decrements the active count when the handler's future ends, whether it finished or was dropped.
struct Active(Arc<Echo>);
impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

struct EchoHandler(Arc<Echo>);

impl Handler for EchoHandler {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
        let echo = self.0.clone();
        async move {
            echo.calls.fetch_add(1, Ordering::SeqCst);
            let n = echo.active.fetch_add(1, Ordering::SeqCst) + 1;
            echo.peak.fetch_max(n, Ordering::SeqCst);
            let _active = Active(echo.clone());
            match req.path.as_str() {
                "/panic" => panic!("test handler panics on /panic"),
                "/panic-later" => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    panic!("test handler panics on /panic-later, after waiting")
                }
                // a body in memory of its own (as a proxied response read whole), not a shared one
                "/big" => {
                    Response::bytes(200, "application/octet-stream", Bytes::from(vec![7u8; BIG]))
                }
                "/slow" => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Response::text(200, "slow")
                }
                "/file" => {
                    let file = std::fs::File::open(&echo.file).unwrap();
                    let len = file.metadata().unwrap().len();
                    Response {
                        status: 200,
                        headers: vec![],
                        body: Body::File {
                            file,
                            offset: 0,
                            len,
                        },
                    }
                }
                "/stream" | "/stream-unknown" => {
                    let (tx, rx) = tokio::sync::mpsc::channel(4);
                    tokio::spawn(async move {
                        for i in 0..16u8 {
                            if tx.send(Ok(Bytes::from(vec![i; 64 * 1024]))).await.is_err() {
                                return;
                            }
                        }
                    });
                    let len = (req.path == "/stream").then_some(16 * 64 * 1024);
                    Response {
                        status: 200,
                        headers: vec![("X-Kind".into(), "stream".into())],
                        body: Body::Stream { rx, len },
                    }
                }
                _ => {
                    let headers: Vec<String> = req
                        .headers
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    let text = format!(
                        "{} {} {:?} {} body={}\n{}",
                        req.method,
                        req.path,
                        req.query,
                        req.version.as_str(),
                        req.body.len(),
                        headers.join("\n")
                    );
                    Response::text(200, &text)
                        .with_header("Connection", "keep-alive")
                        .with_header("X-Target", req.target().to_string())
                }
            }
        }
    }
}

struct Listener {
    addr: SocketAddr,
    echo: Arc<Echo>,
    _stop: watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn listen(limits: Limits, cfg: Http2Config) -> Listener {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.bin");
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let echo = Arc::new(Echo {
        calls: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
        file,
    });
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = watch::channel(false);
    tokio::spawn(run_listener_with(
        l,
        Arc::new(EchoHandler(echo.clone())),
        Arc::new(limits),
        rx,
        None,
        Arc::new(cfg),
    ));
    Listener {
        addr,
        echo,
        _stop: tx,
        _dir: dir,
    }
}

#[tokio::test]
async fn h2c_streams_map_to_the_request_the_handler_sees() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    let req = http::Request::builder()
        .method("GET")
        .uri("http://Example.test:8443/a/./b/../c%20d?x=1&y")
        .header("X-Thing", "v")
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .header("cookie", http::HeaderValue::from_bytes(b"c=\xff").unwrap())
        .body(())
        .unwrap();
    let r = c.fetch(req).await;
    assert_eq!(r.status, 200);
    let text = r.text();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("GET /a/c d Some(\"x=1&y\") HTTP/2.0 body=0"),
        "{text}"
    );
    let headers: Vec<&str> = lines.collect();
    // :authority becomes Host (first), names are lower-case, cookie crumbs are one header again
    assert_eq!(headers[0], "host=Example.test:8443", "{text}");
    assert!(headers.contains(&"x-thing=v"), "{text}");
    // (a crumb that is not UTF-8 reads with U+FFFD; a proxy would forward its bytes)
    assert!(headers.contains(&"cookie=a=1; b=2; c=\u{fffd}"), "{text}");
    assert_eq!(r.header("x-target"), Some("/a/./b/../c%20d?x=1&y"));
    // connection-specific fields from the handler are not sent (RFC 9113 §8.2.2); server and date are
    assert!(r.header("connection").is_none());
    assert_eq!(r.header("server"), Some("ordo"));
    assert!(r.header("date").is_some());
    assert_eq!(r.header("content-length"), Some(&*r.body.len().to_string()));

    // a path that climbs above the root is refused with 400 on its stream; the connection goes on
    let r = c.fetch(get("/../etc/passwd")).await;
    assert_eq!(r.status, 400, "{}", r.text());
    // HEAD: the headers only
    let head = http::Request::builder()
        .method("HEAD")
        .uri("http://t.test/x")
        .body(())
        .unwrap();
    let r = c.fetch(head).await;
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert!(r.header("content-length").is_some());
    assert_eq!(c.fetch(get("/again")).await.status, 200);
}

#[tokio::test]
async fn request_bodies_are_read_within_the_limit() {
    let limits = Limits {
        max_body_bytes: 100_000,
        ..Limits::default()
    };
    let l = listen(limits, Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    let post = |len: Option<usize>| {
        let mut b = http::Request::builder()
            .method("POST")
            .uri("http://t.test/echo");
        if let Some(n) = len {
            b = b.header("content-length", n);
        }
        b.body(()).unwrap()
    };
    // a body larger than the first window (64 KiB) comes in whole
    let mut ready = c.send.clone().ready().await.unwrap();
    let (f, mut s) = ready.send_request(post(Some(90_000)), false).unwrap();
    send_body(&mut s, 90_000).await;
    let r = collect(f).await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.text().contains("body=90000"), "{}", r.text());

    // announced too large: 413 before anything is read
    let mut ready = c.send.clone().ready().await.unwrap();
    let (f, _s) = ready.send_request(post(Some(200_000)), false).unwrap();
    let r = collect(f).await.unwrap();
    assert_eq!(r.status, 413);

    // too large without a length: 413 once it passes the limit (the rest is refused with RST_STREAM)
    let mut ready = c.send.clone().ready().await.unwrap();
    let (f, mut s) = ready.send_request(post(None), false).unwrap();
    let sender = tokio::spawn(async move { send_body(&mut s, 150_000).await });
    let r = collect(f).await.unwrap();
    assert_eq!(r.status, 413);
    sender.abort();
    // the connection serves on
    assert_eq!(c.fetch(get("/after")).await.status, 200);
}

/// Sends `n` bytes of body on `s` as its window allows, then ends it (stops quietly if reset).
async fn send_body(s: &mut h2::SendStream<Bytes>, n: usize) {
    let mut left = n;
    while left > 0 {
        s.reserve_capacity(left.min(16 * 1024));
        let cap = match std::future::poll_fn(|cx| s.poll_capacity(cx)).await {
            Some(Ok(c)) => c.min(left),
            _ => return,
        };
        if cap == 0 {
            continue;
        }
        left -= cap;
        if s.send_data(Bytes::from(vec![b'x'; cap]), left == 0)
            .is_err()
        {
            return;
        }
    }
}

#[tokio::test]
async fn every_body_kind_is_sent_within_flow_control() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    let want: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    // files and streams much larger than the client's 64 KiB windows, several at once on one connection
    let (f1, _) = c.start(get("/file")).await;
    let (f2, _) = c.start(get("/stream")).await;
    let (f3, _) = c.start(get("/stream-unknown")).await;
    let (r1, r2, r3) = tokio::join!(collect(f1), collect(f2), collect(f3));
    let r1 = r1.unwrap();
    assert_eq!(r1.status, 200);
    assert_eq!(r1.header("content-length"), Some("1000003"));
    assert!(r1.body == want, "file body differs");
    for r in [r2.unwrap(), r3.unwrap()] {
        assert_eq!(r.body.len(), 16 * 64 * 1024);
        assert_eq!(r.header("x-kind"), Some("stream"));
        assert!(r.body[64 * 1024..].starts_with(&[1u8; 100]));
    }
}

/// `/big`'s body length.
const BIG: usize = 100_000;

/// Issue 20: a client that opens 128 streams with a zero window and reads nothing used to have every
/// stream's response body held for it (all 128 handlers ran, 26 MB per connection through the proxy). Now
/// a connection holds at most `max_buffered_bytes` (1 MiB) of bodies its windows have not let out, plus the
/// one that crossed it: later streams wait before their handler. Once the client opens its windows, every
/// stream is answered whole.
#[tokio::test]
async fn a_zero_window_client_pins_at_most_max_buffered_bytes() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let (mut c, open) = zero_window_client(l.addr).await;
    let mut pending = Vec::new();
    for _ in 0..128 {
        pending.push(c.start(get("/big")).await.0);
    }
    // the server takes what it will take at once; give it time to take more, were it to
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = l.echo.calls.load(Ordering::SeqCst);
    let cap = Http2Config::default().max_buffered_bytes as usize;
    assert!(
        (1..=cap / BIG + 1).contains(&calls),
        "{calls} handlers ran for a client that reads nothing (at most {} bodies of {BIG} fit {cap} bytes)",
        cap / BIG + 1
    );
    open.send(()).unwrap();
    // read every stream at once (the connection window is shared: reading one at a time would stall)
    let reading: Vec<_> = pending
        .into_iter()
        .map(|f| tokio::spawn(collect(f)))
        .collect();
    for r in reading {
        let r = r.await.unwrap().unwrap();
        assert_eq!((r.status, r.body.len()), (200, BIG));
    }
    assert_eq!(l.echo.calls.load(Ordering::SeqCst), 128);
}

/// The bytes one TCP socket of this host holds in the kernel, `(tx_queue, rx_queue)` from /proc/net/tcp:
/// sent and not yet acknowledged, and received but not yet read by its program. The socket is named by
/// its local and remote ports (both ends on 127.0.0.1).
fn kernel_queues(local: u16, remote: u16) -> Option<(u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let (l, r) = (format!(":{local:04X}"), format!(":{remote:04X}"));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || !f[1].ends_with(&l) || !f[2].ends_with(&r) {
            return None;
        }
        let (tx, rx) = f[4].split_once(':')?;
        Some((
            u64::from_str_radix(tx, 16).ok()?,
            u64::from_str_radix(rx, 16).ok()?,
        ))
    })
}

/// A proxied body is read from the upstream only as fast as the client's window lets it out (issue 20
/// item 8): for a zero-window stream ordo takes at most two 16 KiB chunks (and what came with the head)
/// of an 8 MiB upstream body, and the rest stays in the kernel's socket buffers, the upstream's writes
/// stalled. Before, the proxy read bodies up to 256 KiB whole and kept 8 chunks of up to 64 KiB of longer
/// ones per stream. Measured at ordo's upstream socket: what the upstream wrote less what is still queued in
/// the kernel (its send queue, ordo's receive queue) is what ordo read. Once the window opens the body
/// arrives whole.
#[tokio::test]
async fn a_proxied_body_is_not_read_ahead_of_a_zero_window() {
    const BODY: usize = 8 << 20;
    let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    let written = Arc::new(AtomicUsize::new(0));
    let (ports_tx, ports) = tokio::sync::oneshot::channel::<(u16, u16)>();
    let w = written.clone();
    tokio::spawn(async move {
        let (mut s, peer) = upstream.accept().await.unwrap();
        let _ = ports_tx.send((s.local_addr().unwrap().port(), peer.port()));
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                _ => return,
            }
        }
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
        s.write_all(answer.as_bytes()).await.unwrap();
        let piece = vec![b'x'; 4096];
        let mut left = BODY;
        while left > 0 {
            match s.write(&piece[..left.min(piece.len())]).await {
                Ok(n) if n > 0 => {
                    left -= n;
                    w.fetch_add(n, Ordering::SeqCst);
                }
                _ => return,
            }
        }
        // keep the connection open until the test ends
        tokio::time::sleep(WAIT).await;
    });
    let h = ctl_util::start(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{up_addr}\"] }}\n"
    ))
    .await;
    let (mut c, open) = zero_window_client(h.local_addr()).await;
    let (f, _stream) = c.start(get("/big")).await;
    let (up_port, ordo_port) = tokio::time::timeout(WAIT, ports).await.unwrap().unwrap();
    // what ordo has read of the body, once it settles (the same figures twice, 200 ms apart)
    let read_by_ordo = || {
        let sent = written.load(Ordering::SeqCst) as u64;
        let (up_unacked, _) = kernel_queues(up_port, ordo_port)?;
        let (_, ordo_unread) = kernel_queues(ordo_port, up_port)?;
        Some((sent, sent.saturating_sub(up_unacked + ordo_unread)))
    };
    let started = Instant::now();
    let mut last = None;
    let read = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = read_by_ordo().expect("both ends of the upstream connection in /proc/net/tcp");
        if now.0 > 0 && last == Some(now) {
            break now.1;
        }
        assert!(
            started.elapsed() < WAIT,
            "the upstream connection did not settle: {now:?}"
        );
        last = Some(now);
    };
    // (the head's read takes up to 8 KiB, part of it body; then a chunk waiting for window, one in the channel)
    let cap = (8 + 2 * 16) * 1024;
    assert!(
        (1..=cap as u64).contains(&read),
        "ordo read {read} bytes of the body for a stream whose window is 0 (at most {cap})"
    );
    assert!(
        written.load(Ordering::SeqCst) < BODY,
        "the upstream wrote the whole body: nothing pushed back"
    );
    open.send(()).unwrap();
    let r = collect(f).await.unwrap();
    assert_eq!((r.status, r.body.len()), (200, BODY));
    assert_eq!(written.load(Ordering::SeqCst), BODY);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connection_has_at_most_max_streams_in_progress_in_the_handler() {
    let cfg = Http2Config {
        max_streams_in_progress: 2,
        ..Http2Config::default()
    };
    let l = listen(Limits::default(), cfg).await;
    let mut c = h2c(l.addr).await;
    let mut pending = Vec::new();
    for _ in 0..8 {
        pending.push(c.start(get("/slow")).await.0);
    }
    for f in pending {
        assert_eq!(collect(f).await.unwrap().status, 200);
    }
    // eight streams open at once, never more than two in the handler
    assert_eq!(l.echo.peak.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_idle_connection_gets_goaway_and_is_closed() {
    let limits = Limits {
        idle_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let l = listen(limits, Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    assert_eq!(c.fetch(get("/x")).await.status, 200);
    let started = Instant::now();
    // the client's connection ends (GOAWAY NO_ERROR, then the close)
    let r = tokio::time::timeout(WAIT, &mut c.conn)
        .await
        .expect("closed");
    assert!(r.unwrap().is_ok(), "graceful close");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_connection_busy_with_quick_answers_is_not_idle() {
    // answers ready at once are sent without a task of their own: they must still count as activity
    let limits = Limits {
        idle_timeout: Duration::from_millis(1000),
        ..Limits::default()
    };
    let l = listen(limits, Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    let started = Instant::now();
    for _ in 0..30 {
        assert_eq!(c.fetch(get("/x")).await.status, 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 30 requests over more than twice the idle timeout, on the one connection
    assert!(started.elapsed() > Duration::from_millis(2000));
    assert!(
        !c.conn.is_finished(),
        "the busy connection was closed as idle"
    );
}

#[tokio::test]
async fn a_handler_panic_resets_its_stream_and_the_connection_goes_on() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let mut c = h2c(l.addr).await;
    let (f, _) = c.start(get("/panic")).await;
    let e = collect(f).await.expect_err("the panicking stream is reset");
    assert_eq!(e.reason(), Some(h2::Reason::INTERNAL_ERROR), "{e}");
    assert_eq!(c.fetch(get("/x")).await.status, 200);
    // again, then a stream whose handler waits (polled later, in the connection's set of streams in
    // progress) on the same connection
    let (f, _) = c.start(get("/panic")).await;
    assert!(collect(f).await.is_err());
    assert_eq!(c.fetch(get("/slow")).await.status, 200);
    // a handler that panics in a later poll, beside one that waits: only its own stream is reset
    let (slow, _) = c.start(get("/slow")).await;
    let (f, _) = c.start(get("/panic-later")).await;
    let e = collect(f)
        .await
        .expect_err("the stream panicking later is reset");
    assert_eq!(e.reason(), Some(h2::Reason::INTERNAL_ERROR), "{e}");
    let slow = collect(slow).await.expect("the other stream is answered");
    assert_eq!((slow.status, slow.text().trim()), (200, "slow"));
    assert_eq!(c.fetch(get("/x")).await.status, 200);
}

#[tokio::test]
async fn h2c_off_leaves_the_preface_to_http1() {
    let cfg = Http2Config {
        h2c: false,
        ..Http2Config::default()
    };
    let l = listen(Limits::default(), cfg).await;
    let mut s = TcpStream::connect(l.addr).await.unwrap();
    s.write_all(PREFACE).await.unwrap();
    let mut buf = vec![0u8; 256];
    let n = tokio::time::timeout(WAIT, s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 505"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    // and HTTP/1 still works with h2c on
    let l = listen(Limits::default(), Http2Config::default()).await;
    let mut s = TcpStream::connect(l.addr).await.unwrap();
    s.write_all(b"GET /h1 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let n = tokio::time::timeout(WAIT, s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
}

// ---------------------------------------------------------------------------------------------------------
// Raw frames, for what a well-behaved client cannot send

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK for `GET path` at `t.test` (indexed :method GET and :scheme http, literal :path and :authority)
/// with extra literal fields (never indexed, names as given).
fn hpack_get(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 6]);
    b.extend_from_slice(b"t.test");
    for (k, v) in extra {
        b.extend_from_slice(&[0x10, k.len() as u8]);
        b.extend_from_slice(k.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

/// A cleartext connection that has sent the preface and an empty SETTINGS frame.
async fn raw(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&hello).await.unwrap();
    s
}

struct Frame {
    kind: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// Reads frames until `stop` holds for one (returned) or the connection ends (None).
async fn read_until(s: &mut TcpStream, mut stop: impl FnMut(&Frame) -> bool) -> Option<Frame> {
    tokio::time::timeout(WAIT, async {
        loop {
            let mut head = [0u8; 9];
            s.read_exact(&mut head).await.ok()?;
            let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
            let mut payload = vec![0u8; len];
            s.read_exact(&mut payload).await.ok()?;
            let f = Frame {
                kind: head[3],
                stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
                payload,
            };
            if stop(&f) {
                return Some(f);
            }
        }
    })
    .await
    .expect("frames within the wait")
}

fn code(f: &Frame) -> u32 {
    let at = if f.kind == GOAWAY { 4 } else { 0 };
    u32::from_be_bytes(f.payload[at..at + 4].try_into().unwrap())
}

const PROTOCOL_ERROR: u32 = 0x1;
const ENHANCE_YOUR_CALM: u32 = 0xb;

#[tokio::test]
async fn connection_specific_fields_are_refused_per_stream() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let mut s = raw(l.addr).await;
    let bad = [
        ("connection", "close"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("keep-alive", "5"),
        ("te", "gzip"),
    ];
    let mut out = Vec::new();
    for (i, (k, v)) in bad.iter().enumerate() {
        let payload = hpack_get("/x", &[(k, v)]);
        out.extend(frame(
            HEADERS,
            END_STREAM | END_HEADERS,
            1 + 2 * i as u32,
            &payload,
        ));
    }
    // `te: trailers` is the one TE allowed
    let ok = hpack_get("/x", &[("te", "trailers")]);
    out.extend(frame(HEADERS, END_STREAM | END_HEADERS, 11, &ok));
    s.write_all(&out).await.unwrap();
    let mut reset = Vec::new();
    let answered = read_until(&mut s, |f| {
        if f.kind == RST_STREAM {
            reset.push((f.stream, code(f)));
        }
        f.kind == HEADERS && f.stream == 11
    })
    .await;
    assert!(answered.is_some(), "stream 11 answered");
    reset.sort();
    assert_eq!(
        reset,
        vec![
            (1, PROTOCOL_ERROR),
            (3, PROTOCOL_ERROR),
            (5, PROTOCOL_ERROR),
            (7, PROTOCOL_ERROR),
            (9, PROTOCOL_ERROR)
        ]
    );
    assert_eq!(
        l.echo.peak.load(Ordering::SeqCst),
        1,
        "only stream 11 reached the handler"
    );
}

#[tokio::test]
async fn a_continuation_flood_is_cut_with_enhance_your_calm() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let s = raw(l.addr).await;
    let mut flood = frame(HEADERS, END_STREAM, 1, &hpack_get("/x", &[]));
    for _ in 0..10_000 {
        flood.extend(frame(CONTINUATION, 0, 1, &[]));
    }
    // written from another task: the server may stop reading once it has cut the connection
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&flood).await;
        wr
    });
    let mut goaway = None;
    let r = tokio::time::timeout(WAIT, async {
        loop {
            let mut head = [0u8; 9];
            if rd.read_exact(&mut head).await.is_err() {
                return;
            }
            let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
            let mut p = vec![0u8; len];
            if rd.read_exact(&mut p).await.is_err() {
                return;
            }
            if head[3] == GOAWAY {
                goaway = Some(u32::from_be_bytes(p[4..8].try_into().unwrap()));
            }
        }
    })
    .await;
    assert!(r.is_ok(), "the connection was closed");
    assert_eq!(goaway, Some(ENHANCE_YOUR_CALM));
    assert_eq!(l.echo.peak.load(Ordering::SeqCst), 0);
    writer.abort();
}

/// Writes `unit` over and over without reading anything back; true when the server stopped taking more
/// (no progress for a whole second) before `cap` bytes — it answers what it reads, and does not queue
/// answers for a client that does not read them.
async fn floods_stall(addr: SocketAddr, unit: Vec<u8>, cap: usize) -> bool {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    sock.set_send_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&hello).await.unwrap();
    let chunk: Vec<u8> = unit
        .iter()
        .copied()
        .cycle()
        .take(unit.len() * 1000)
        .collect();
    let mut written = 0;
    while written < cap {
        match tokio::time::timeout(Duration::from_secs(1), s.write_all(&chunk)).await {
            Ok(Ok(())) => written += chunk.len(),
            Ok(Err(_)) => return false, // closed: not a stall
            Err(_) => return true,
        }
    }
    false
}

#[tokio::test]
async fn ping_and_settings_floods_are_held_back_by_the_unread_answers() {
    let l = listen(Limits::default(), Http2Config::default()).await;
    let ping = frame(PING, 0, 0, &[7u8; 8]);
    assert!(floods_stall(l.addr, ping, 256 << 20).await, "PING flood");
    let settings = frame(SETTINGS, 0, 0, &[]);
    assert!(
        floods_stall(l.addr, settings, 256 << 20).await,
        "SETTINGS flood"
    );
    // the server is fine
    let mut c = h2c(l.addr).await;
    assert_eq!(c.fetch(get("/x")).await.status, 200);
}

// ---------------------------------------------------------------------------------------------------------
// The whole server: classes, the scheduler, TLS

/// Starts `ordo serve` from `toml` (a synthetic backend, X-Ordo-Class on).
async fn serve(toml: &str) -> ServerHandle {
    ctl_util::start(&format!(
        "{toml}\n[headers]\nclass = true\n\n[[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n"
    ))
    .await
}

const TWO_CLASSES: &str = r#"
workers = 1
policy = "stride"
[[classes]]
name = "a"
weight = 3
[[classes]]
name = "b"
weight = 1
[[classes]]
name = "block"
weight = 1
[[rules]]
path_prefix = "/a"
class = "a"
[[rules]]
path_prefix = "/b"
class = "b"
[[rules]]
path_prefix = "/block"
class = "block"
"#;

/// Holds the only worker with a long request on a connection of its own; resetting the returned stream
/// frees it.
async fn blocker(h: &ServerHandle) -> (Client, h2::SendStream<Bytes>) {
    let mut c = h2c(h.local_addr()).await;
    let (_f, s) = c.start(get("/block?ms=60000")).await;
    wait_until(WAIT, || ctl_util::busy(h) == 1).await;
    (c, s)
}

#[tokio::test]
async fn streams_of_one_connection_are_dispatched_by_stride_shares() {
    let h = serve(TWO_CLASSES).await;
    let (_b, mut block) = blocker(&h).await;
    let mut c = h2c(h.local_addr()).await;
    // 12 streams of each class on ONE connection, b's first
    let mut pending = Vec::new();
    for i in 0..12 {
        pending.push(c.start(get(&format!("/b?i={i}"))).await.0);
    }
    for i in 0..12 {
        pending.push(c.start(get(&format!("/a?i={i}"))).await.0);
    }
    wait_until(WAIT, || queued(&h) == 24).await;
    // record the order the responses arrive in: with one worker, the dispatch order
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for f in pending {
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let r = f.await.expect("response");
            let class = r.headers()["x-ordo-class"].to_str().unwrap().to_string();
            order.lock().unwrap().push(class);
            r.status().as_u16()
        }));
    }
    block.send_reset(h2::Reason::CANCEL);
    for t in tasks {
        assert_eq!(tokio::time::timeout(WAIT, t).await.unwrap().unwrap(), 200);
    }
    let order = order.lock().unwrap().clone();
    // while both classes are queued (the first 16 dispatches: 12 a, 4 b) each prefix is within one dispatch
    // of the 3:1 shares
    let mut a = 0;
    for (k, class) in order.iter().take(16).enumerate() {
        if class == "a" {
            a += 1;
        }
        let ideal = 0.75 * (k + 1) as f64;
        assert!(
            (a as f64 - ideal).abs() <= 1.0,
            "after {} dispatches {a} of class a (ideal {ideal}): {order:?}",
            k + 1
        );
    }
    assert_eq!(order.iter().filter(|c| *c == "a").count(), 12);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn overload_is_a_503_on_the_stream_and_the_connection_goes_on() {
    let h = serve("workers = 1\nqueue_cap = 2\nretry_after = \"3s\"").await;
    let (_b, mut block) = blocker(&h).await;
    let mut c = h2c(h.local_addr()).await;
    let mut pending = Vec::new();
    for i in 0..5 {
        pending.push(c.start(get(&format!("/x?i={i}"))).await.0);
    }
    wait_until(WAIT, || queued(&h) == 2).await;
    let mut got = Vec::new();
    let queued_two: Vec<_> = pending.drain(..2).collect();
    for f in pending {
        let r = collect(f).await.unwrap();
        got.push((r.status, r.header("retry-after").map(str::to_string)));
    }
    assert_eq!(got, vec![(503, Some("3".to_string())); 3]);
    block.send_reset(h2::Reason::CANCEL);
    for f in queued_two {
        assert_eq!(collect(f).await.unwrap().status, 200);
    }
    assert_eq!(c.fetch(get("/after")).await.status, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn rapid_reset_of_queued_streams_closes_the_connection_and_leaves_nothing_queued() {
    // (the blocker is still in flight at the end: a short grace)
    let h =
        serve("workers = 1\nshutdown_grace = \"200ms\"\n[http2]\nmax_premature_resets = 20").await;
    let (_b, _block) = blocker(&h).await;
    let mut c = h2c(h.local_addr()).await;
    let mut cut = false;
    // rounds of ten streams, each reset once it is queued in the scheduler
    for _round in 0..10 {
        let mut streams = Vec::new();
        for _ in 0..10 {
            let mut ready = match tokio::time::timeout(WAIT, c.send.clone().ready()).await {
                Ok(Ok(r)) => r,
                _ => {
                    cut = true;
                    break;
                }
            };
            match ready.send_request(get("/x"), true) {
                Ok((_f, s)) => streams.push(s),
                Err(_) => {
                    cut = true;
                    break;
                }
            }
        }
        if cut {
            break;
        }
        let ten = tokio::time::timeout(WAIT, async {
            while queued(&h) < 10 && !c.conn.is_finished() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await;
        assert!(ten.is_ok(), "ten queued or the connection ended");
        for s in &mut streams {
            s.send_reset(h2::Reason::CANCEL);
        }
        // each reset stream leaves the queue at once
        wait_until(WAIT, || queued(&h) == 0).await;
        if c.conn.is_finished() {
            cut = true;
            break;
        }
    }
    let end = tokio::time::timeout(WAIT, &mut c.conn)
        .await
        .expect("the connection was closed");
    assert!(cut || end.is_ok());
    let e = end.unwrap().expect_err("closed with an error");
    assert_eq!(e.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM), "{e}");
    assert_eq!(queued(&h), 0, "nothing left queued");
    assert_eq!(ctl_util::busy(&h), 1, "the blocker still holds the worker");
    // other clients are served as before
    let mut other = h2c(h.local_addr()).await;
    let (f, _) = other.start(get("/y")).await;
    wait_until(WAIT, || queued(&h) == 1).await;
    drop(f);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_fast_open_and_reset_loop_is_cut_too() {
    let h = serve("workers = 1\nshutdown_grace = \"200ms\"").await;
    let (_b, _block) = blocker(&h).await;
    let mut c = h2c(h.local_addr()).await;
    let started = Instant::now();
    for _ in 0..100_000 {
        let Ok(Ok(mut ready)) = tokio::time::timeout(WAIT, c.send.clone().ready()).await else {
            break;
        };
        match ready.send_request(get("/x"), true) {
            Ok((_f, mut s)) => s.send_reset(h2::Reason::CANCEL),
            Err(_) => break,
        }
        if c.conn.is_finished() || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::task::yield_now().await;
    }
    let e = tokio::time::timeout(WAIT, &mut c.conn)
        .await
        .expect("the connection was closed")
        .unwrap()
        .expect_err("closed with an error");
    assert_eq!(e.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM), "{e}");
    wait_until(WAIT, || queued(&h) == 0).await;
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_sends_goaway_and_lets_the_streams_in_flight_finish() {
    let h = serve("workers = 4\nshutdown_grace = \"10s\"").await;
    let mut c = h2c(h.local_addr()).await;
    let (f, _) = c.start(get("/x?ms=400")).await;
    wait_until(WAIT, || ctl_util::busy(&h) == 1).await;
    let stopped = tokio::spawn(h.shutdown());
    let r = collect(f).await.unwrap();
    assert_eq!(r.status, 200, "the stream in flight finished");
    // GOAWAY, then the close: the client's connection ends without an error
    let end = tokio::time::timeout(WAIT, &mut c.conn)
        .await
        .expect("closed");
    assert!(end.unwrap().is_ok());
    tokio::time::timeout(WAIT, stopped)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

fn cert() -> (String, String, rustls::pki_types::CertificateDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["t.test".to_string()]).unwrap();
    (
        ck.cert.pem(),
        ck.key_pair.serialize_pem(),
        ck.cert.der().clone(),
    )
}

async fn tls_connect(
    addr: SocketAddr,
    trust: &rustls::pki_types::CertificateDer<'static>,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut store = rustls::RootCertStore::empty();
    store.add(trust.clone()).unwrap();
    let mut cc = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    cc.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("t.test").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cc))
        .connect(name, tcp)
        .await
        .unwrap()
}

fn tls_toml(dir: &std::path::Path, extra: &str) -> String {
    let (c, k, _) = CERT.with(|c| c.clone());
    std::fs::write(dir.join("c.crt"), c).unwrap();
    std::fs::write(dir.join("c.key"), k).unwrap();
    format!(
        "{extra}\n[tls]\n[[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n",
        dir.join("c.crt").display(),
        dir.join("c.key").display()
    )
}

thread_local! {
    static CERT: (String, String, rustls::pki_types::CertificateDer<'static>) = cert();
}

#[tokio::test]
async fn alpn_picks_h2_and_its_streams_are_classified() {
    let dir = tempfile::tempdir().unwrap();
    let h = serve(&tls_toml(dir.path(), TWO_CLASSES)).await;
    let trust = CERT.with(|c| c.2.clone());
    let tls = tls_connect(h.local_addr(), &trust, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut c = handshake(tls).await;
    let (ra, rb) = {
        let a = c.fetch(get("/a")).await;
        let b = c.fetch(get("/b?n=3000")).await;
        (a, b)
    };
    assert_eq!((ra.status, ra.header("x-ordo-class")), (200, Some("a")));
    assert_eq!((rb.status, rb.header("x-ordo-class")), (200, Some("b")));
    assert_eq!(rb.body.len(), 3000);
    h.shutdown().await.unwrap();

    // `[http2] enabled = false`: ALPN offers HTTP/1.1 only
    let h = serve(&tls_toml(dir.path(), "[http2]\nenabled = false")).await;
    let tls = tls_connect(h.local_addr(), &trust, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    h.shutdown().await.unwrap();
}

/// curl, when installed with HTTP/2: h2 over TLS (ALPN) and h2c with prior knowledge.
#[tokio::test]
async fn curl_speaks_http2_to_ordo() {
    let has_h2 = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("HTTP2"))
        .unwrap_or(false);
    if !has_h2 {
        eprintln!("skipped: curl with HTTP/2 support is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h = serve(&tls_toml(dir.path(), "")).await;
    let ca = dir.path().join("c.crt");
    let port = h.local_addr().port();
    let curl = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let o = std::process::Command::new("curl")
                .args(["-sS", "--max-time", "10", "-o", "/dev/null"])
                .args(["-w", "%{http_code} %{http_version}"])
                .args(&args)
                .output()
                .unwrap();
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
    };
    let tls = curl(vec![
        "--http2".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "--resolve".into(),
        format!("t.test:{port}:127.0.0.1"),
        format!("https://t.test:{port}/x?n=5000"),
    ])
    .await
    .unwrap();
    assert_eq!(tls, "200 2");
    h.shutdown().await.unwrap();
    let h = serve("").await;
    let clear = curl(vec![
        "--http2-prior-knowledge".into(),
        format!("http://{}/x?n=5000", h.local_addr()),
    ])
    .await
    .unwrap();
    assert_eq!(clear, "200 2");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn access_log_metrics_and_headers_see_h2_requests() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let h = serve(&format!(
        "{TWO_CLASSES}\n[access_log]\npath = \"{}\"\nformat = \"json\"\nflush_interval = \"50ms\"\n",
        log.display()
    ))
    .await;
    let mut c = h2c(h.local_addr()).await;
    let r = c.fetch(get("/b/x")).await;
    assert_eq!((r.status, r.header("x-ordo-class")), (200, Some("b")));
    let metrics = h.metrics_text();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("ordo_serve_arrivals_total{class=\"b\"} 1")),
        "{metrics}"
    );
    h.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["target"], "/b/x", "{text}");
    assert_eq!(line["class"], "b");
    assert!(text.contains("HTTP/2.0"), "{text}");
}

/// Issue 20: over HTTP/2 the virtual host is the `:authority`'s.
#[tokio::test]
async fn virtual_hosts_follow_the_authority() {
    let h = crate::http_forwarded::ordo(
        "[forwarded]\nrequest_id = true\n\
         [[routes]]\nhost = \"a.test\"\nredirect = { to = \"/from-a{uri}\" }\n\
         [[routes]]\nhost = \"*.b.test\"\nredirect = { to = \"/from-b{uri}\" }\n",
    )
    .await;
    let mut c = h2c(h.local_addr()).await;
    for (uri, want) in [
        ("http://A.test:8080/x?q", Some("/from-a/x?q")),
        ("http://www.b.test/y", Some("/from-b/y")),
        ("http://c.test/", None),
    ] {
        let req = http::Request::builder().uri(uri).body(()).unwrap();
        let r = c.fetch(req).await;
        match want {
            Some(loc) => {
                assert_eq!(r.status, 301, "{uri}");
                assert_eq!(r.header("location"), Some(loc), "{uri}");
            }
            None => assert_eq!(r.status, 404, "{uri}"),
        }
        assert!(r.header("x-request-id").is_some(), "{uri}");
    }
    h.shutdown().await.unwrap();
}
