//! HTTP/1.x server side: the request/response types the rest of ordo-serve sees, the limits, and the
//! per-connection loop (no hyper: httparse for heads, hand-written framing); the accept loop that hands
//! connections to it (or to HTTP/2, or to TLS first) is `crate::listen`.
//!
//! Behaviour worth knowing (the details live in docs/serve.md and the module docs below):
//! - keep-alive is the default for HTTP/1.1 and opt-in (`Connection: keep-alive`) for HTTP/1.0; pipelined
//!   requests wait in the read buffer and are answered one after the other, in order;
//! - limits answer with their status and then close: head > `max_head_bytes` → 431, head not complete within
//!   `head_timeout` → 408, body > `max_body_bytes` → 413; an idle keep-alive connection is closed silently;
//!   beyond `max_connections` the accept loop stops accepting (the kernel backlog holds the newcomers);
//! - anything that could let a request be smuggled (duplicate or conflicting Content-Length, Content-Length
//!   with Transfer-Encoding, a Transfer-Encoding other than a single `chunked`, bad chunk sizes, bare LF,
//!   obs-fold, invalid header bytes) is answered 400 and the connection is closed.

pub(crate) mod conn;
pub mod headers;
pub(crate) use conn::Transport;
pub mod date;
pub mod duration;
pub(crate) mod inline;
pub(crate) mod parse;
mod tls_conn;
mod write;
pub(crate) use write::{put_ip, put_u64};

use std::borrow::Cow;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

pub use headers::Headers;
pub use parse::{percent_decode_component, reason_phrase};

/// Where a request's target is: in its head's bytes, or its own (HTTP/2, rebuilt by `strip_prefix`, tests).
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Head(headers::Span),
    Owned(String),
}

/// The protocol version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// HTTP/2 (RFC 9113), over TLS by ALPN or cleartext with prior knowledge: see `crate::http2`.
    Http2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
        }
    }
}

/// One parsed request with its whole body (bounded by [`Limits::max_body_bytes`], chunked framing decoded).
#[derive(Debug, Clone)]
pub struct Request {
    /// The method as sent (a validated token, case preserved); the standard methods borrow a static string.
    pub method: Cow<'static, str>,
    /// The request-target (see [`Request::target`]).
    pub(crate) target: Target,
    /// Percent-decoded, normalised path without the query (`.` and `..` segments resolved; a `..` that would
    /// climb above `/` is refused with 400 before a handler sees it).
    pub path: String,
    /// The raw query string (without `?`), if any.
    pub query: Option<String>,
    pub version: Version,
    /// The header fields in the order received: names as the client spelled them (looked up
    /// case-insensitively), values trimmed; a value that is not UTF-8 reads with `�` in place of its bad
    /// bytes and is forwarded byte for byte by a proxy. With an absolute-form target, `Host` is the target's
    /// authority (RFC 9112 §3.2.2).
    pub headers: Headers,
    pub body: Bytes,
    pub peer: SocketAddr,
    /// Whether the client asked to keep the connection open after this request.
    pub keep_alive: bool,
    /// Set when the request came over TLS (what `X-Forwarded-Proto` says and virtual hosts check).
    pub tls: Option<TlsInfo>,
    /// Whether the peer is one of `[forwarded] trusted_proxies`: then the forwarding headers it sent are
    /// kept (and appended to) by a proxy route, else replaced. Set by the serving path.
    pub trusted_peer: bool,
    /// The request id (`X-Request-Id`): the client's when sane, else generated; set by the serving path
    /// when `[forwarded] request_id` is on.
    pub request_id: Option<Box<str>>,
}

/// What a TLS connection tells about the requests it carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// The server name the client asked for in its ClientHello (SNI), lower case; None if it sent none.
    pub sni: Option<Arc<str>>,
}

impl Request {
    /// A request for tests and tools: GET, HTTP/1.1, no headers, peer 127.0.0.1:0.
    pub fn get(target: &str) -> Request {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (target.to_string(), None),
        };
        Request {
            method: Cow::Borrowed("GET"),
            target: Target::Owned(target.into()),
            path,
            query,
            version: Version::Http11,
            headers: Headers::new(),
            body: Bytes::new(),
            peer: SocketAddr::from(([127, 0, 0, 1], 0)),
            keep_alive: true,
            tls: None,
            trusted_peer: false,
            request_id: None,
        }
    }

    /// The request-target as sent; after a route's `strip_prefix`, rebuilt from the stripped path and the
    /// query (what a proxy route forwards, see `parse::origin_form`).
    pub fn target(&self) -> &str {
        match &self.target {
            Target::Head(span) => self.headers.head_str(*span),
            Target::Owned(t) => t,
        }
    }

    /// Replaces the request-target.
    pub fn set_target(&mut self, target: String) {
        self.target = Target::Owned(target);
    }

    /// Adds a header (tests and tools; the name is kept as given).
    pub fn with_header(mut self, name: &str, value: &str) -> Request {
        self.headers.push(name, value);
        self
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The value of a cookie from the `Cookie` header(s), as sent.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .known(headers::Known::Cookie)
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.trim_matches('"'))
    }

    /// The first value of a query parameter, percent-decoded (`+` is a space). A parameter present without
    /// `=` yields an empty string.
    pub fn query_param(&self, name: &str) -> Option<String> {
        let q = self.query.as_deref()?;
        for pair in q.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if k == name || percent_decode_component(k).as_deref() == Some(name) {
                return Some(percent_decode_component(v).unwrap_or_else(|| v.to_string()));
            }
        }
        None
    }
}

/// A response body. The HTTP layer derives the framing from it: `Content-Length` for every variant whose
/// length is known, chunked (HTTP/1.1) or close-delimited (HTTP/1.0) for a stream of unknown length.
#[derive(Debug)]
pub enum Body {
    Empty,
    Bytes(Bytes),
    /// `len` bytes of `file` from `offset`, streamed in chunks (never loaded whole).
    File {
        file: std::fs::File,
        offset: u64,
        len: u64,
    },
    /// A body with header lines rendered ahead of time (each line ends in CRLF, e.g. the static backend's
    /// Content-Type, ETag and Last-Modified of a cached file); written after the response's `headers`.
    /// Content-Length is still written by the HTTP layer from `body`.
    Prerendered {
        head: Bytes,
        body: Bytes,
    },
    /// Chunks produced by another task (a proxied response). `len`, when known, becomes Content-Length and
    /// must be the exact total. An `Err` chunk aborts the response: the connection is closed. An empty
    /// chunk says nothing more is at hand for now: the HTTP/1 writer sends each piece but the last with
    /// MSG_MORE (TCP may keep a partial segment back for what follows) and sends what is held when it gets
    /// one, so a producer that waits for its source sends one before it waits.
    Stream {
        rx: mpsc::Receiver<std::io::Result<Bytes>>,
        len: Option<u64>,
    },
    /// A `Stream` with header lines rendered ahead of time, as for `Prerendered`: a proxied response whose
    /// upstream sent header values that are not UTF-8, forwarded byte for byte.
    PrerenderedStream {
        head: Bytes,
        rx: mpsc::Receiver<std::io::Result<Bytes>>,
        len: Option<u64>,
    },
    /// The answer to an HTTP/1.1 `Upgrade` (a proxied WebSocket) with status `101`: `head` holds header
    /// lines rendered ahead of time; after the head the HTTP layer hands the client's connection to
    /// `tunnel`, which relays both ways, and closes it when the tunnel ends. Anything but HTTP/1.1 answers
    /// it as a `502` (an upgrade is never asked for there).
    Upgrade {
        head: Bytes,
        tunnel: Box<dyn Tunnel>,
    },
}

/// The client's side of a connection that switched protocols.
pub trait ClientIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ClientIo for T {}

/// What relays a connection that switched protocols (see [`Body::Upgrade`]).
pub trait Tunnel: Send + std::fmt::Debug + 'static {
    /// Relay between `client` and the other side until either ends or the tunnel's idle limit passes;
    /// `early` is what the client sent after its request, before the switch.
    fn run<'a>(
        self: Box<Self>,
        client: &'a mut dyn ClientIo,
        early: Bytes,
    ) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

impl Body {
    /// The body's length when known in advance.
    pub fn len(&self) -> Option<u64> {
        match self {
            Body::Empty => Some(0),
            Body::Bytes(b) => Some(b.len() as u64),
            Body::File { len, .. } => Some(*len),
            Body::Prerendered { body, .. } => Some(body.len() as u64),
            Body::Stream { len, .. } | Body::PrerenderedStream { len, .. } => *len,
            Body::Upgrade { .. } => None,
        }
    }

    /// True for a body known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

/// A response. `Content-Length`, `Transfer-Encoding`, `Connection`, `Date` and `Server` are written by the
/// HTTP layer and dropped from `headers` — except that a handler's `Content-Length` is kept on answers to HEAD
/// and on 304 (a proxy passes the upstream's), and `Connection: close` from a handler closes the connection.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    /// An empty response with this status.
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Body::Empty,
        }
    }

    /// A `text/plain` response; a newline is appended to `msg` when it lacks one.
    pub fn text(status: u16, msg: &str) -> Self {
        let mut s = String::with_capacity(msg.len() + 1);
        s.push_str(msg);
        if !s.ends_with('\n') {
            s.push('\n');
        }
        Response {
            status,
            headers: vec![(
                "Content-Type".to_string(),
                "text/plain; charset=utf-8".to_string(),
            )],
            body: Body::Bytes(Bytes::from(s)),
        }
    }

    /// A response with this body and Content-Type.
    pub fn bytes(status: u16, content_type: &str, body: Bytes) -> Self {
        Response {
            status,
            headers: vec![("Content-Type".to_string(), content_type.to_string())],
            body: Body::Bytes(body),
        }
    }

    /// Adds a header (names are written as given).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What answers requests. Runs once per request; responses on one connection are written in request order.
/// The future owns what it needs (clone an `Arc` into it rather than borrowing `self`), so a request that
/// has to wait can move from the accept loop into a connection task.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static;
}

/// Connection and request limits (TOML: the `[limits]` table; durations as strings such as "10s").
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request head (request line + headers); larger → 431 and close.
    pub max_head_bytes: usize,
    /// Longest request-target (the URI in the request line); longer → 414 and close.
    pub max_uri_bytes: usize,
    /// Time allowed to receive a whole head (from accept for the first request, from its first byte for
    /// later ones), and between two reads of a body; exceeded → 408 and close.
    #[serde(deserialize_with = "duration::deserialize")]
    pub head_timeout: Duration,
    /// Largest request body (after chunked decoding); larger → 413 and close.
    pub max_body_bytes: u64,
    /// How long a kept-alive connection may sit idle between requests; then it is closed silently. Also
    /// bounds each write of a response to a client that does not read.
    #[serde(deserialize_with = "duration::deserialize")]
    pub idle_timeout: Duration,
    /// Open client connections at most; beyond it the listener stops accepting until one closes.
    pub max_connections: usize,
    /// Requests served on one connection before it is closed (`Connection: close` on the last one).
    pub max_requests_per_connection: Option<u64>,
    /// Accept a connection only once its first bytes have arrived (Linux TCP_DEFER_ACCEPT, like nginx's
    /// `listen ... deferred` and HAProxy's `defer-accept`): the request is then usually answered straight from
    /// the accept loop, which for one-request connections saves a wake-up and the epoll registration. A
    /// client that connects and stays silent is held by the kernel instead (its handshake is completed
    /// about a second later) and meets `head_timeout` only from then on.
    pub defer_accept: bool,
    /// Every connection starts with a PROXY protocol header (v1 or v2, from an L4 balancer): its source
    /// address is the client's; a connection without a valid one is closed unanswered (see
    /// `crate::proxy_protocol`).
    pub proxy_protocol: bool,
    /// With `proxy_protocol`: the peers a header is accepted from (`[forwarded] trusted_proxies`; empty:
    /// any). Not a TOML key.
    #[serde(skip)]
    pub proxy_protocol_from: Vec<crate::cidr::Cidr>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 16 * 1024,
            max_uri_bytes: 8 * 1024,
            head_timeout: Duration::from_secs(10),
            max_body_bytes: 1024 * 1024,
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_requests_per_connection: None,
            defer_accept: false,
            proxy_protocol: false,
            proxy_protocol_from: Vec::new(),
        }
    }
}

/// Resolves once `shutdown` carries `true`; never resolves if every sender is gone without signalling.
pub(crate) async fn shutdown_signalled(shutdown: &mut watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        if shutdown.changed().await.is_err() {
            if *shutdown.borrow() {
                return;
            }
            std::future::pending::<()>().await;
        }
    }
}

/// Serves one client connection until it closes, a limit closes it, or shutdown closes it between requests.
pub async fn serve_connection<H: Handler>(
    stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<H>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
) {
    conn::serve(
        stream,
        peer,
        handler,
        limits,
        shutdown,
        conn::Start::fresh(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_from_toml() {
        let l: Limits = toml::from_str("head_timeout = \"250ms\"\nmax_body_bytes = 10").unwrap();
        assert_eq!(l.head_timeout, Duration::from_millis(250));
        assert_eq!(l.max_body_bytes, 10);
        assert_eq!(l.idle_timeout, Limits::default().idle_timeout);
        let e = toml::from_str::<Limits>("max_bodybytes = 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field"), "{e}");
        let e = toml::from_str::<Limits>("idle_timeout = 60")
            .unwrap_err()
            .to_string();
        assert!(e.contains("idle_timeout") || e.contains("string"), "{e}");
    }

    fn parsed(s: &[u8]) -> Request {
        let head = parse::parse_head(s, 1024, 1024).unwrap();
        let bytes = Bytes::copy_from_slice(&s[..head.len]);
        let peer = SocketAddr::from(([127, 0, 0, 1], 9));
        conn::request_from(head, bytes, Bytes::new(), peer).0
    }

    #[test]
    fn a_parsed_request_borrows_its_method_and_target() {
        let mut r = parsed(b"GET /a%20b/./c?q=1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n");
        assert!(matches!(r.method, Cow::Borrowed("GET")));
        assert_eq!(r.target(), "/a%20b/./c?q=1");
        assert_eq!(
            (r.path.as_str(), r.query.as_deref()),
            ("/a b/c", Some("q=1"))
        );
        assert_eq!(r.header("x-a"), Some("1"));
        r.set_target("/c".to_string());
        assert_eq!(r.target(), "/c");
        let r = parsed(b"PROPFIND http://h:1/x HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(matches!(&r.method, Cow::Owned(m) if m == "PROPFIND"));
        assert_eq!(r.target(), "http://h:1/x");
        assert_eq!(r.header("host"), Some("h:1"));
    }

    #[test]
    fn request_helpers() {
        let r = Request::get("/p?a=1&b=x%20y&c=a+b&flag&a=2")
            .with_header("Cookie", "sid=abc; theme=\"dark\"")
            .with_header("x-thing", "v");
        assert_eq!(r.query_param("a").as_deref(), Some("1"));
        assert_eq!(r.query_param("b").as_deref(), Some("x y"));
        assert_eq!(r.query_param("c").as_deref(), Some("a b"));
        assert_eq!(r.query_param("flag").as_deref(), Some(""));
        assert_eq!(r.query_param("zzz"), None);
        assert_eq!(r.cookie("sid"), Some("abc"));
        assert_eq!(r.cookie("theme"), Some("dark"));
        assert_eq!(r.cookie("nope"), None);
        assert_eq!(r.header("X-Thing"), Some("v"));
        let resp = Response::text(404, "gone").with_header("X-A", "b");
        assert_eq!(resp.header("x-a"), Some("b"));
        assert_eq!(resp.body.len(), Some(5));
    }
}
