//! The backends behind the real HTTP layer: static files (headers, 304, ranges, traversal and symlink escape,
//! streaming of a large file, revalidation), the proxy against in-test upstreams (success, X-Forwarded-For,
//! refused → 502, stalled → 504, bad response → 502, keep-alive reuse, chunked and streamed bodies, Via and
//! loop detection: two servers proxying to each other get 508 at once, an upstream equal to the listen
//! address is refused) and the synthetic backend (bytes, sleep, bad parameters).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::http_util::*;
use ordo_serve::backend::Backend;
use ordo_serve::backend::proxy::{ProxyBackend, ProxyConfig};
use ordo_serve::backend::static_files::{StaticBackend, StaticConfig};
use ordo_serve::backend::synthetic::{SyntheticBackend, SyntheticConfig};
use ordo_serve::http::{Handler, Limits, Request, Response, serve_connection};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

struct Route(Arc<Backend>);

impl Route {
    fn new(b: Backend) -> Self {
        Route(Arc::new(b))
    }
}

impl Handler for Route {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let backend = self.0.clone();
        async move { backend.call(&req).await }
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

struct Site {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    small: Vec<u8>,
    big: Vec<u8>,
}

fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    let small = pattern(2048);
    let big = pattern(3 * 1024 * 1024 + 17);
    std::fs::write(root.join("small.txt"), &small).unwrap();
    std::fs::write(root.join("big.bin"), &big).unwrap();
    std::fs::write(root.join("docs/index.html"), b"<h1>docs</h1>").unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(dir.path().join("secret.txt"), b"top secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(dir.path(), root.join("updir")).unwrap();
    std::os::unix::fs::symlink(root.join("small.txt"), root.join("inside.txt")).unwrap();
    Site {
        _dir: dir,
        root,
        small,
        big,
    }
}

async fn static_server(root: &Path) -> Server {
    let b = StaticBackend::new(&StaticConfig::new(root), "").unwrap();
    start(Route::new(Backend::Static(b)), Limits::default()).await
}

#[tokio::test]
async fn static_200_with_headers_and_head() {
    let site = site();
    let s = static_server(&site.root).await;
    let mut c = Client::connect(s.addr).await;
    for _ in 0..2 {
        // second time from the cache: same answer
        c.send(&get("/small.txt")).await;
        let r = c.response().await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, site.small);
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
        assert_eq!(r.header("content-length"), Some("2048"));
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        let etag = r.header("etag").unwrap();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
            "{etag}"
        );
        assert!(httpdate::parse_http_date(r.header("last-modified").unwrap()).is_ok());
    }
    c.send(b"HEAD /small.txt HTTP/1.1\r\nHost: t\r\n\r\n").await;
    let r = c.try_response(true).await.unwrap();
    assert_eq!((r.status, r.header("content-length")), (200, Some("2048")));
    c.send(&get("/docs/")).await;
    let r = c.response().await;
    assert_eq!((r.status, r.text().as_str()), (200, "<h1>docs</h1>"));
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    c.send(&get("/docs?x=1")).await;
    let r = c.response().await;
    assert_eq!((r.status, r.header("location")), (301, Some("docs/")));
    for p in ["/missing.txt", "/empty/"] {
        c.send(&get(p)).await;
        assert_eq!(c.response().await.status, 404, "{p}");
    }
    c.send(b"POST /small.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!((r.status, r.header("allow")), (405, Some("GET, HEAD")));
}

#[tokio::test]
async fn static_conditional_304() {
    let site = site();
    let s = static_server(&site.root).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/small.txt")).await;
    let r = c.response().await;
    let etag = r.header("etag").unwrap().to_string();
    let lm = r.header("last-modified").unwrap().to_string();
    for (h, v, want) in [
        ("If-None-Match", etag.clone(), 304),
        ("If-None-Match", format!("\"nope\", {etag}"), 304),
        ("If-None-Match", "*".to_string(), 304),
        ("If-None-Match", "\"other\"".to_string(), 200),
        ("If-Modified-Since", lm.clone(), 304),
        (
            "If-Modified-Since",
            "Thu, 01 Jan 1970 00:00:00 GMT".to_string(),
            200,
        ),
        ("If-Modified-Since", "not a date".to_string(), 200),
    ] {
        c.send(format!("GET /small.txt HTTP/1.1\r\nHost: t\r\n{h}: {v}\r\n\r\n").as_bytes())
            .await;
        let r = c.response().await;
        assert_eq!(r.status, want, "{h}: {v}");
        if want == 304 {
            assert!(r.body.is_empty());
            assert_eq!(r.header("etag"), Some(etag.as_str()));
        }
    }
}

#[tokio::test]
async fn static_ranges() {
    let site = site();
    let s = static_server(&site.root).await;
    let mut c = Client::connect(s.addr).await;
    for (path, data) in [("/small.txt", &site.small), ("/big.bin", &site.big)] {
        let len = data.len();
        for (spec, a, b) in [
            ("0-9", 0, 9),
            ("100-", 100, len - 1),
            ("-5", len - 5, len - 1),
            ("1000-1999", 1000, 1999),
        ] {
            c.send(
                format!("GET {path} HTTP/1.1\r\nHost: t\r\nRange: bytes={spec}\r\n\r\n").as_bytes(),
            )
            .await;
            let r = c.response().await;
            assert_eq!(r.status, 206, "{path} {spec}");
            assert_eq!(
                r.header("content-range"),
                Some(format!("bytes {a}-{b}/{len}").as_str())
            );
            assert_eq!(r.body, data[a..=b], "{path} {spec}");
        }
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\nRange: bytes={len}-\r\n\r\n").as_bytes())
            .await;
        let r = c.response().await;
        assert_eq!(r.status, 416);
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes */{len}").as_str())
        );
        c.send(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1,5-6\r\n\r\n").as_bytes(),
        )
        .await;
        let r = c.response().await;
        assert_eq!((r.status, r.body.len()), (200, len));
        c.send(
            format!(
                "GET {path} HTTP/1.1\r\nHost: t\r\nRange: bytes=0-1\r\nIf-Range: \"stale\"\r\n\r\n"
            )
            .as_bytes(),
        )
        .await;
        assert_eq!(c.response().await.status, 200);
    }
}

#[tokio::test]
async fn static_traversal_and_symlink_escape_refused() {
    let site = site();
    let s = static_server(&site.root).await;
    for (p, want) in [
        ("/../secret.txt", 400),
        ("/%2e%2e/secret.txt", 400),
        ("/docs/%2E%2E/%2e%2e/secret.txt", 400),
        ("/small.txt%00.html", 400),
        ("/escape.txt", 403),
        ("/updir/secret.txt", 403),
        ("/updir/root/small.txt", 200), // a symlink out and back in resolves inside the root
        ("/inside.txt", 200),
        ("/docs/../small.txt", 200),
    ] {
        let mut c = Client::connect(s.addr).await;
        c.send(&get(p)).await;
        let r = c.response().await;
        assert_eq!(r.status, want, "{p}");
        assert!(!r.text().contains("top secret"));
    }
    // the backend refuses `..` even when called without the HTTP layer's normalisation
    let b = StaticBackend::new(&StaticConfig::new(&site.root), "").unwrap();
    let mut req = Request::get("/docs/../../secret.txt");
    req.path = "/docs/../../secret.txt".into();
    assert_eq!(b.call(&req).await.status, 403);
}

#[tokio::test]
async fn static_large_file_streamed_and_prefix() {
    let site = site();
    let b = StaticBackend::new(&StaticConfig::new(&site.root), "/files").unwrap();
    assert_eq!(
        b.size_hint(&Request::get("/files/big.bin")),
        Some(site.big.len() as u64)
    );
    let s = start(Route::new(Backend::Static(b)), Limits::default()).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/files/big.bin")).await;
    let r = c.response().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert!(r.body == site.big, "large file bytes differ");
    c.send(&get("/big.bin")).await;
    assert_eq!(c.response().await.status, 404);
    c.send(&get("/filesbig.bin")).await;
    assert_eq!(c.response().await.status, 404);
}

#[tokio::test]
async fn static_cache_revalidates_changed_files() {
    let site = site();
    let s = static_server(&site.root).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/small.txt")).await;
    let first = c.response().await;
    std::fs::write(site.root.join("small.txt"), b"changed!").unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    c.send(&get("/small.txt")).await;
    let r = c.response().await;
    assert_eq!(r.text(), "changed!");
    assert_ne!(r.header("etag"), first.header("etag"));
    std::fs::remove_file(site.root.join("small.txt")).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    c.send(&get("/small.txt")).await;
    assert_eq!(c.response().await.status, 404);
}

/// An upstream made of the ordo HTTP layer itself, counting its connections.
struct Upstream {
    addr: SocketAddr,
    conns: Arc<AtomicUsize>,
}

struct UpHandler;

impl Handler for UpHandler {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let body = format!(
            "{} {} xff={} host={} conn={} body={}",
            req.method,
            req.target(),
            req.header("x-forwarded-for").unwrap_or("-"),
            req.header("host").unwrap_or("-"),
            req.header("connection").unwrap_or("-"),
            String::from_utf8_lossy(&req.body)
        );
        std::future::ready(
            Response::text(201, &body)
                .with_header("x-up", "1")
                .with_header("keep-alive", "timeout=5"),
        )
    }
}

async fn upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let counted = conns.clone();
    tokio::spawn(async move {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let h = Arc::new(UpHandler);
        let limits = Arc::new(Limits::default());
        loop {
            let Ok((s, peer)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_connection(
                s,
                peer,
                h.clone(),
                limits.clone(),
                rx.clone(),
            ));
        }
    });
    Upstream { addr, conns }
}

/// An upstream that answers every connection with fixed bytes (after reading a request head), or never.
async fn raw_upstream(answer: Option<&'static [u8]>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if read_request_head(&mut s).await.is_none() {
                    return;
                }
                match answer {
                    Some(a) => {
                        let _ = s.write_all(a).await;
                        let _ = s.shutdown().await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    addr
}

fn proxy_cfg(addrs: &[SocketAddr]) -> ProxyConfig {
    ProxyConfig {
        upstreams: addrs
            .iter()
            .map(|a| a.to_string().as_str().into())
            .collect(),
        connect_timeout: Duration::from_millis(500),
        read_timeout: Duration::from_millis(400),
        ..ProxyConfig::default()
    }
}

async fn proxy_server(cfg: ProxyConfig) -> Server {
    start(
        Route::new(Backend::Proxy(ProxyBackend::new(&cfg).unwrap())),
        Limits::default(),
    )
    .await
}

#[tokio::test]
async fn proxy_forwards_with_xff_and_reuses_connections() {
    let up = upstream().await;
    let s = proxy_server(proxy_cfg(&[up.addr])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET /a/b?q=1 HTTP/1.1\r\nHost: site\r\nX-Forwarded-For: 10.1.2.3\r\nConnection: keep-alive, x-drop\r\nX-Drop: 1\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("x-up"), Some("1"));
    assert_eq!(
        r.header("keep-alive"),
        None,
        "hop-by-hop header passed through"
    );
    assert_eq!(
        r.text(),
        "GET /a/b?q=1 xff=127.0.0.1 host=site conn=- body=\n",
        "an untrusted client's X-Forwarded-For is replaced"
    );
    c.send(b"POST /p HTTP/1.1\r\nHost: site\r\nContent-Length: 4\r\n\r\nbody")
        .await;
    let r = c.response().await;
    assert_eq!(
        r.text(),
        "POST /p xff=127.0.0.1 host=site conn=- body=body\n"
    );
    for i in 0..5 {
        c.send(&get(&format!("/n{i}"))).await;
        assert_eq!(c.response().await.status, 201);
    }
    c.send(b"HEAD /h HTTP/1.1\r\nHost: site\r\n\r\n").await;
    let r = c.try_response(true).await.unwrap();
    assert_eq!(r.header("content-length"), Some("45"));
    c.send(&get("/after-head")).await;
    assert_eq!(c.response().await.status, 201);
    assert_eq!(
        up.conns.load(Ordering::SeqCst),
        1,
        "upstream connection not reused"
    );
}

#[tokio::test]
async fn proxy_round_robin() {
    let (u1, u2) = (upstream().await, upstream().await);
    let s = proxy_server(proxy_cfg(&[u1.addr, u2.addr])).await;
    let mut c = Client::connect(s.addr).await;
    for _ in 0..4 {
        c.send(&get("/")).await;
        assert_eq!(c.response().await.status, 201);
    }
    assert_eq!(
        (
            u1.conns.load(Ordering::SeqCst),
            u2.conns.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
}

#[tokio::test]
async fn proxy_failures_map_to_502_and_504() {
    // refused: a port that is bound but not listening, and stays reserved for the whole test (a port freed
    // by a dropped listener could be handed to the proxy itself, which would then proxy to itself)
    let reserved = tokio::net::TcpSocket::new_v4().unwrap();
    reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = reserved.local_addr().unwrap();
    let s = proxy_server(proxy_cfg(&[dead])).await;
    let r = one_shot_or_keep(s.addr).await;
    assert_eq!(r.status, 502, "{}", r.text());

    // accepts, never answers: read timeout → 504
    let stall = raw_upstream(None).await;
    let s = proxy_server(proxy_cfg(&[stall])).await;
    let t0 = Instant::now();
    let r = one_shot_or_keep(s.addr).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(t0.elapsed() >= Duration::from_millis(350) && t0.elapsed() < Duration::from_secs(3));

    // not HTTP → 502
    let junk = raw_upstream(Some(b"SSH-2.0-OpenSSH\r\n\r\n")).await;
    let s = proxy_server(proxy_cfg(&[junk])).await;
    assert_eq!(one_shot_or_keep(s.addr).await.status, 502);

    // conflicting lengths → 502
    let bad = raw_upstream(Some(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    ))
    .await;
    let s = proxy_server(proxy_cfg(&[bad])).await;
    assert_eq!(one_shot_or_keep(s.addr).await.status, 502);

    // closes mid-body → 502
    let short = raw_upstream(Some(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")).await;
    let s = proxy_server(proxy_cfg(&[short])).await;
    assert_eq!(one_shot_or_keep(s.addr).await.status, 502);
}

async fn one_shot_or_keep(addr: SocketAddr) -> Resp {
    let mut c = Client::connect(addr).await;
    c.send(&get("/x")).await;
    c.response().await
}

#[tokio::test]
async fn proxy_streams_chunked_and_close_delimited() {
    let chunked = raw_upstream(Some(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: b\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    ))
    .await;
    let s = proxy_server(proxy_cfg(&[chunked])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/")).await;
    let r = c.response().await;
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(
        (r.status, r.text().as_str(), r.header("x-a")),
        (200, "hello world", Some("b"))
    );

    let closed = raw_upstream(Some(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")).await;
    let s = proxy_server(proxy_cfg(&[closed])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/")).await;
    assert_eq!(c.response().await.text(), "until the end");

    // a large upstream body (over buffer_max_bytes) arrives whole
    let up = start(
        Route::new(Backend::Synthetic(
            SyntheticBackend::new(&SyntheticConfig::default()).unwrap(),
        )),
        Limits::default(),
    )
    .await;
    let s = proxy_server(proxy_cfg(&[up.addr])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/bytes?n=3000000")).await;
    let r = c.response().await;
    assert_eq!((r.status, r.body.len()), (200, 3_000_000));
    c.send(&get("/bytes?n=10")).await;
    assert_eq!(c.response().await.body.len(), 10);
}

/// A streamed body's pieces go to the client with MSG_MORE (the kernel may hold a partial segment back for
/// what follows, about 200 ms at most); when the upstream has nothing more for now, what is held must go at
/// once. The upstream sends a chunked head and one piece, then waits: the piece must reach the client well
/// before the kernel's own ceiling (the best of three connections, so one stalled moment of a loaded
/// machine does not decide).
#[tokio::test]
async fn a_streamed_piece_reaches_the_client_while_the_upstream_waits() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let release = Arc::new(tokio::sync::Notify::new());
    let released = release.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let (sent_tx, released) = (sent_tx.clone(), released.clone());
            tokio::spawn(async move {
                if read_request_head(&mut s).await.is_none() {
                    return;
                }
                let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
                if s.write_all(head).await.is_err() {
                    return;
                }
                let _ = sent_tx.send(Instant::now());
                released.notified().await;
                let _ = s.write_all(b"6\r\n world\r\n0\r\n\r\n").await;
            });
        }
    });
    let mut cfg = proxy_cfg(&[addr]);
    cfg.read_timeout = Duration::from_secs(10);
    let s = proxy_server(cfg).await;
    let mut best = Duration::MAX;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
        c.write_all(&get("/")).await.unwrap();
        let sent = tokio::time::timeout(Duration::from_secs(5), sent_rx.recv())
            .await
            .expect("the upstream got the request")
            .unwrap();
        let mut got = Vec::new();
        let mut tmp = [0u8; 4096];
        while find(&got, b"hello").is_none() {
            let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut tmp))
                .await
                .expect("the first piece arrives")
                .unwrap();
            assert!(n > 0, "proxy closed: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&tmp[..n]);
        }
        best = best.min(sent.elapsed());
        clients.push((c, got));
    }
    assert!(
        best < Duration::from_millis(100),
        "the first piece took {best:?} at best to reach the client while the upstream waited"
    );
    release.notify_waiters();
    for (mut c, mut got) in clients {
        let mut tmp = [0u8; 4096];
        while find(&got, b"0\r\n\r\n").is_none() {
            let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut tmp))
                .await
                .expect("the rest arrives")
                .unwrap();
            assert!(n > 0);
            got.extend_from_slice(&tmp[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(
            text.ends_with("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn synthetic_backend() {
    let s = start(
        Route::new(Backend::Synthetic(
            SyntheticBackend::new(&SyntheticConfig::default()).unwrap(),
        )),
        Limits::default(),
    )
    .await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/bytes?n=5000")).await;
    let r = c.response().await;
    assert_eq!((r.status, r.body.len()), (200, 5000));
    c.send(&get("/bytes?n=2500000")).await;
    assert_eq!(c.response().await.body.len(), 2_500_000);
    let t0 = Instant::now();
    c.send(&get("/sleep?ms=200")).await;
    assert_eq!(c.response().await.status, 200);
    assert!(t0.elapsed() >= Duration::from_millis(200));
    let t0 = Instant::now();
    c.send(&get("/work?us=3000&ms=10&n=7")).await;
    assert_eq!(c.response().await.body.len(), 7);
    assert!(t0.elapsed() >= Duration::from_millis(13));
    for (q, param) in [
        ("/cpu?us=x", "us"),
        ("/sleep?ms=-4", "ms"),
        ("/bytes?n=99999999999999", "n"),
        ("/cpu?us=20000000", "us"),
    ] {
        c.send(&get(q)).await;
        let r = c.response().await;
        assert_eq!(r.status, 400, "{q}");
        assert!(
            r.text().contains(&format!("parameter {param}")),
            "{}",
            r.text()
        );
    }
}

#[tokio::test]
async fn proxy_connect_timeout_is_504() {
    // A listener with a zero backlog that never accepts: once one handshake fills it, the kernel drops
    // further SYNs (unless tcp_abort_on_overflow is set), so a connect hangs until our timeout.
    if std::fs::read_to_string("/proc/sys/net/ipv4/tcp_abort_on_overflow")
        .is_ok_and(|v| v.trim() == "1")
    {
        eprintln!(
            "tcp_abort_on_overflow=1: full backlogs reset instead of hanging; nothing to test"
        );
        return;
    }
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = sock.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let _filler = std::net::TcpStream::connect(addr).unwrap();
    let s = proxy_server(ProxyConfig {
        connect_timeout: Duration::from_millis(300),
        ..proxy_cfg(&[addr])
    })
    .await;
    let t0 = Instant::now();
    let r = one_shot_or_keep(s.addr).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(r.text().contains("connecting"), "{}", r.text());
    assert!(t0.elapsed() >= Duration::from_millis(250) && t0.elapsed() < Duration::from_secs(3));
    drop(listener);
}

#[tokio::test]
async fn proxy_retries_a_pooled_connection_the_upstream_closed() {
    // answers keep-alive, then silently closes each connection 100 ms later
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let counted = conns.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if read_request_head(&mut s).await.is_none() {
                    return;
                }
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    .await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            });
        }
    });
    let s = proxy_server(proxy_cfg(&[addr])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/1")).await;
    assert_eq!(c.response().await.text(), "ok");
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(&get("/2")).await;
    let r = c.response().await;
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    assert_eq!(conns.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn http10_client_gets_a_close_delimited_stream() {
    let chunked = raw_upstream(Some(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    ))
    .await;
    let s = proxy_server(proxy_cfg(&[chunked])).await;
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("transfer-encoding"), None);
    assert_eq!(r.text(), "abc");
}

/// Answers with the Via field value it received.
struct ViaEcho(Arc<AtomicUsize>);

impl Handler for ViaEcho {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Response::text(200, req.header("via").unwrap_or("-")))
    }
}

#[tokio::test]
async fn proxy_adds_via_and_answers_508_to_its_own_token() {
    let calls = Arc::new(AtomicUsize::new(0));
    let up = start(ViaEcho(calls.clone()), Limits::default()).await;
    let backend = ProxyBackend::new(&proxy_cfg(&[up.addr])).unwrap();
    let token = backend.via_token().to_string();
    assert!(token.starts_with("ordo-"), "{token}");
    let s = start(Route::new(Backend::Proxy(backend)), Limits::default()).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/a")).await;
    assert_eq!(c.response().await.text().trim_end(), format!("1.1 {token}"));
    // earlier hops kept, in order, ours last with the version we received
    c.send(b"GET /b HTTP/1.1\r\nHost: t\r\nVia: 1.0 fred, 1.1 p.example (x)\r\nVia: 2 cdn\r\n\r\n")
        .await;
    assert_eq!(
        c.response().await.text().trim_end(),
        format!("1.0 fred, 1.1 p.example (x), 2 cdn, 1.1 {token}")
    );
    let r = one_shot_and_close(s.addr, b"GET /c HTTP/1.0\r\nVia: 1.1 other\r\n\r\n").await;
    assert_eq!(r.text().trim_end(), format!("1.1 other, 1.0 {token}"));
    // a Via the client names in Connection is hop-by-hop: dropped, ours still added
    c.send(b"GET /d HTTP/1.1\r\nHost: t\r\nConnection: via\r\nVia: 1.1 secret\r\n\r\n")
        .await;
    assert_eq!(c.response().await.text().trim_end(), format!("1.1 {token}"));
    let before = calls.load(Ordering::SeqCst);
    // our own token back: 508 at once, not forwarded
    for via in [
        format!("1.1 {token}"),
        format!("1.1 a, 1.1 {token}, 1.1 b"),
        format!("HTTP/1.1 {}", token.to_uppercase()),
    ] {
        c.send(format!("GET /e HTTP/1.1\r\nHost: t\r\nVia: {via}\r\n\r\n").as_bytes())
            .await;
        let r = c.response().await;
        assert_eq!(r.status, 508, "{via}: {}", r.text());
        assert!(r.text().contains("loop detected"), "{}", r.text());
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        before,
        "a looping request was forwarded"
    );
    // a token that merely contains ours, or sits in a comment, is someone else's
    c.send(
        format!("GET /f HTTP/1.1\r\nHost: t\r\nVia: 1.1 {token}x, 1.1 y ({token})\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert_eq!(c.response().await.status, 200);
}

/// Two ordo servers whose proxy routes point at each other: the request comes back to the first one with
/// its own Via token and is answered 508, in well under the queue timeout (10 s) and the read timeout (5 s)
/// — also with one worker each, where the returning request must not wait for the worker its first pass
/// holds (the check runs before scheduling).
#[tokio::test]
async fn proxy_loop_between_two_servers_is_508_at_once() {
    use ordo_serve::{ServeConfig, Server as OrdoServer};
    for workers in [4, 1] {
        let conf = |upstream: SocketAddr| {
            let text = format!(
                "listen = \"127.0.0.1:0\"\nworkers = {workers}\nqueue_timeout = \"10s\"\n[admin]\nenabled = false\n\
                 [[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{upstream}\"], read_timeout = \"5s\" }}\n"
            );
            ServeConfig::from_toml_str(&text, "loop.toml").unwrap()
        };
        // A starts towards a placeholder, B towards A, then A is reloaded towards B
        let placeholder = raw_upstream(Some(b"HTTP/1.1 204 No Content\r\n\r\n")).await;
        let a = OrdoServer::start(conf(placeholder)).await.unwrap();
        let b = OrdoServer::start(conf(a.local_addr())).await.unwrap();
        a.reload(conf(b.local_addr())).unwrap();
        for (name, addr) in [("a", a.local_addr()), ("b", b.local_addr())] {
            let t0 = Instant::now();
            let r = one_shot_or_keep(addr).await;
            let took = t0.elapsed();
            assert_eq!(r.status, 508, "via {name}, {workers} workers: {}", r.text());
            assert!(r.text().contains("loop detected"), "{}", r.text());
            assert!(
                took < Duration::from_secs(2),
                "via {name}, {workers} workers: took {took:?}"
            );
        }
        a.shutdown().await.unwrap();
        b.shutdown().await.unwrap();
    }
}

#[test]
fn proxy_upstream_equal_to_listen_is_refused() {
    use ordo_serve::ServeConfig;
    for (listen, upstream) in [
        ("127.0.0.1:18080", "127.0.0.1:18080"),
        ("127.0.0.1:18080", "http://localhost:18080"),
        ("0.0.0.0:18080", "127.0.0.1:18080"),
        ("127.0.0.1:18080", "0.0.0.0:18080"),
    ] {
        let text = format!(
            "listen = \"{listen}\"\n\n[[routes]]\nprefix = \"/ok\"\nsynthetic = {{}}\n\n\
             [[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"127.0.0.1:1\",\n  \"{upstream}\"] }}\n"
        );
        let e = ServeConfig::from_toml_str(&text, "loop.toml").unwrap_err();
        assert_eq!(
            (e.file.as_str(), e.line, e.key.as_deref()),
            ("loop.toml", Some(10), Some("routes[1].proxy.upstreams[1]")),
            "{listen} → {upstream}: {e}"
        );
        assert!(e.message.contains("own `listen` address"), "{e}");
    }
    // another port, or port 0 (chosen at start), is fine
    for (listen, upstream) in [
        ("127.0.0.1:18080", "127.0.0.1:18081"),
        ("127.0.0.1:0", "127.0.0.1:18080"),
    ] {
        let text = format!(
            "listen = \"{listen}\"\n[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{upstream}\"] }}\n"
        );
        assert!(
            ServeConfig::from_toml_str(&text, "ok.toml").is_ok(),
            "{listen} → {upstream}"
        );
    }
}

/// The check the server can run before scheduling: the same verdict as the backend's own, without a call.
#[test]
fn proxy_loop_is_answered_before_scheduling() {
    let b =
        Backend::Proxy(ProxyBackend::new(&proxy_cfg(&["127.0.0.1:1".parse().unwrap()])).unwrap());
    let Backend::Proxy(p) = &b else {
        unreachable!()
    };
    let token = p.via_token().to_string();
    let mut req = Request::get("/x");
    assert!(b.answer_before_scheduling(&req).is_none());
    req.headers.push("via", "1.1 someone-else");
    assert!(b.answer_before_scheduling(&req).is_none());
    req.headers.push("via", &format!("1.1 {token}"));
    assert_eq!(
        b.answer_before_scheduling(&req).map(|r| r.status),
        Some(508)
    );
    let s = Backend::Synthetic(SyntheticBackend::new(&SyntheticConfig::default()).unwrap());
    assert!(s.answer_before_scheduling(&req).is_none());
}
