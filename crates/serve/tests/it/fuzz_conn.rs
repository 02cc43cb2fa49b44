//! Fuzz target of whole connections (docs/design.md, "Fuzzing"): random HTTP/2 frame sequences after the
//! h2c preface (HEADERS with valid and mangled header blocks, CONTINUATION, DATA, RST_STREAM, SETTINGS,
//! WINDOW_UPDATE, PING, PRIORITY, GOAWAY, unknown types, any flags and stream ids) and random HTTP/1 bytes
//! (pipelined requests, bodies, chunked framing) sent to one listener. The unit targets fuzz each parser;
//! this one fuzzes what ordo builds on them — the HTTP/1 connection loop, the HTTP/2 stream handling
//! around the `h2` crate — and checks that no input panics ordo or h2 code and that the server goes on
//! answering.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ordo_serve::http::{Handler, Limits, Request, Response};
use ordo_serve::http2::Http2Config;
use ordo_serve::listen::run_listener_with;
use ordo_testkit::fuzz::{bytes, config, mutated, tokens};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Panics raised in ordo's serve code or in h2 while the fuzz target runs (other tests' own panics, in
/// their test files, are not counted).
static PANICS: AtomicUsize = AtomicUsize::new(0);

struct Answer;
impl Handler for Answer {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
        let text = format!("{} {} {}", req.method, req.path, req.body.len());
        async move { Response::text(200, &text) }
    }
}

/// One server for every case: its runtime (kept alive here) and address.
fn server() -> &'static (tokio::runtime::Runtime, SocketAddr) {
    static SERVER: OnceLock<(tokio::runtime::Runtime, SocketAddr)> = OnceLock::new();
    SERVER.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map_or("", |l| l.file());
            if file.contains("serve/src") || file.contains("/h2-") || file.contains("http1/src") {
                PANICS.fetch_add(1, Ordering::Relaxed);
            }
            previous(info);
        }));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let addr = rt.block_on(async {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = l.local_addr().expect("address");
            let (tx, rx) = tokio::sync::watch::channel(false);
            std::mem::forget(tx); // the server runs until the test process ends
            let limits = Limits {
                head_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(2),
                max_body_bytes: 64 * 1024,
                ..Limits::default()
            };
            tokio::spawn(run_listener_with(
                l,
                Arc::new(Answer),
                Arc::new(limits),
                rx,
                None,
                Arc::new(Http2Config::default()),
            ));
            addr
        });
        (rt, addr)
    })
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A GET's header block: static :method GET and :scheme http, :path and :authority literals.
fn get_block(path: &[u8]) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, path.len().min(127) as u8];
    b.extend_from_slice(&path[..path.len().min(127)]);
    b.extend_from_slice(&[0x01, 1, b'h']);
    b
}

/// A frame a client might send: a type from the first ten or any, any flags, a stream from the first few
/// (client-initiated odd, server even, 0) or any, a payload that is a header block, a mangled one, a
/// 4-byte value or random.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![4 => 0u8..10, 1 => any::<u8>()],
        prop_oneof![Just(0x5u8), Just(0x4), Just(0x1), Just(0), any::<u8>()],
        prop_oneof![Just(1u32), Just(3), Just(5), Just(0), Just(2), any::<u32>()],
        prop_oneof![
            "/[a-z./%]{0,12}".prop_map(|p| get_block(p.as_bytes())),
            mutated(Just(get_block(b"/x")), 3),
            any::<u32>().prop_map(|v| v.to_be_bytes().to_vec()),
            bytes(24),
        ],
    )
        .prop_map(|(kind, flags, id, payload)| frame(kind, flags, id, &payload))
}

/// The pieces of HTTP/1 request streams.
const HTTP1: &[&str] = &[
    "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
    "POST /p HTTP/1.1\r\nHost: h\r\n",
    "Content-Length: 3\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Expect: 100-continue\r\n",
    "Connection: close\r\n",
    "\r\n",
    "abc",
    "3\r\nabc\r\n",
    "0\r\n\r\n",
    "ffffffff\r\n",
    "\n",
    "GET /../x HTTP/1.0\r\n\r\n",
    " ",
    "HTTP/1.1",
    "\0",
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
];

/// Sends `input` on a new connection, half-closes, and reads until the server closes (bounded).
async fn exchange(addr: SocketAddr, input: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return;
    };
    let _ = s.write_all(input).await;
    let _ = s.shutdown().await;
    let mut buf = vec![0u8; 64 * 1024];
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// A well-formed HTTP/1 request on a fresh connection is answered: the server is still serving.
async fn still_serving(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return false;
    };
    if s.write_all(b"GET /alive HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    out.starts_with(b"HTTP/1.1 200")
}

proptest! {
    // a connection per case: a quarter of the cases
    #![proptest_config(config(0.25))]

    #[test]
    fn fuzz_connections_any_bytes(
        h2 in any::<bool>(),
        frames in proptest::collection::vec(any_frame(), 0..10),
        http1 in prop_oneof![tokens(HTTP1, 12), mutated(tokens(HTTP1, 6), 3), bytes(100)],
    ) {
        let (rt, addr) = server();
        let input = if h2 {
            let mut v = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            v.extend(frame(4, 0, 0, &[]));
            v.extend(frames.concat());
            v
        } else {
            http1
        };
        let before = PANICS.load(Ordering::Relaxed);
        rt.block_on(exchange(*addr, &input));
        prop_assert!(rt.block_on(still_serving(*addr)), "the server stopped answering");
        prop_assert_eq!(PANICS.load(Ordering::Relaxed), before, "a panic in ordo or h2 code");
    }
}
