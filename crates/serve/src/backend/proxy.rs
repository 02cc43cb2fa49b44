//! The proxy backend: forwards requests to HTTP/1.1 upstreams (round-robin over the list) over a keep-alive
//! connection pool, and maps upstream failures to gateway statuses:
//! - connect refused or unreachable → 502; connect not done within `connect_timeout` → 504;
//! - a read or write stalled for `read_timeout`, or the whole response head (1xx included) not received
//!   within `response_head_timeout` of sending the request → 504;
//! - a malformed response (bad head, bare LF, conflicting lengths, bad chunking, early close) → 502;
//! - a pooled connection that fails before the first response byte → the request is sent again on a new
//!   connection only when that cannot make the upstream act on it twice: an idempotent method, or none of
//!   the request written.
//!
//! The error bodies say what kind of failure it was, never the upstream's address (that goes to the log).
//!
//! Pool hygiene: a connection goes back to the pool only when its response ended exactly at the end of what
//! was read, and is checked again when taken out (anything readable, or closed → discarded), so bytes an
//! upstream sends unasked are never read as another request's response.
//!
//! What is forwarded: the normalised path ordo routed on (after `strip_prefix`) re-encoded, the query as
//! sent; the client's headers with names as spelled and values byte for byte, minus hop-by-hop headers
//! (Connection and those it names — never Host —, Keep-Alive, Proxy-Connection, TE, Trailer,
//! Transfer-Encoding, Upgrade) and names with `_` unless `forward_underscore_headers`; the client's
//! address is appended to X-Forwarded-For. Responses come back the same way (names and bytes as sent).
//!
//! Loops: every proxied request carries `Via: <version> ordo-<random hex>` (RFC 9110 §7.6.3), a pseudonym
//! drawn when the backend is built; a request that arrives already naming it has been here before (a chain
//! of proxies that leads back) and is answered 508 Loop Detected without being forwarded again. An upstream
//! that is the server's own listen address is refused when the config is checked (`points_at_listener`).
//! Responses with a Content-Length up to `buffer_max_bytes` are read whole; longer, chunked or
//! close-delimited ones are streamed to the client as they arrive.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::BackendError;
use crate::http::duration;
use ordo_http1::{ChunkedDecoder, ResponseFraming, contains_byte, parse_response, trim_ows};

use crate::http::headers::Known;
use crate::http::parse::origin_form;
use crate::http::{Body, Request, Response, Version};
use crate::http::{put_ip, put_u64};
use crate::serving_thread::PerThread;
use crate::tls::{UpstreamStream, UpstreamTls};

/// Status of a request that came back to the proxy it already passed through (RFC 5842 §7.2): a status
/// of its own, so a loop is told apart from an upstream that is down (502) in logs and metrics, and it
/// travels back unchanged through every hop of the loop to the client.
pub const LOOP_STATUS: u16 = 508;

/// `[routes.proxy]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// `host:port` or `http://host:port` (port 80 when omitted); used round-robin.
    pub upstreams: Vec<String>,
    /// Time to establish an upstream connection; exceeded → 504.
    #[serde(deserialize_with = "duration::deserialize")]
    pub connect_timeout: Duration,
    /// Time allowed for each read from the upstream (and each write to it); exceeded → 504.
    #[serde(deserialize_with = "duration::deserialize")]
    pub read_timeout: Duration,
    /// Idle connections kept per upstream by each serving thread: a cap, not a target. A pool keeps what
    /// was in use within `pool_idle_timeout`; this only bounds it (see [`DEFAULT_POOL_MAX_IDLE`]).
    pub pool_max_idle: usize,
    /// An idle pooled connection older than this is closed instead of reused.
    #[serde(deserialize_with = "duration::deserialize")]
    pub pool_idle_timeout: Duration,
    /// Responses with a Content-Length up to this are buffered; others are streamed.
    pub buffer_max_bytes: u64,
    /// Largest upstream response head.
    pub max_response_head_bytes: usize,
    /// `https://` upstreams: trust the CA certificates in this PEM file instead of the system's.
    pub ca_file: Option<std::path::PathBuf>,
    /// `https://` upstreams: accept any certificate. For tests against self-signed servers only: anyone
    /// between the proxy and the upstream can read and change the traffic.
    pub danger_accept_invalid_certs: bool,
    /// Time allowed for the whole response head (interim `1xx` heads included), counted from the moment
    /// the request has been sent; exceeded → 504. `read_timeout` still bounds each read.
    #[serde(deserialize_with = "duration::deserialize")]
    pub response_head_timeout: Duration,
    /// Forward request headers whose names contain `_` (nginx's `underscores_in_headers`). Off by default:
    /// `X-Forwarded_For` or `Content_Length` would reach an application that maps `-` and `_` to the same
    /// variable (CGI, WSGI, Rack, PHP) as the header ordo itself controls.
    pub forward_underscore_headers: bool,
}

/// The default cap on each serving thread's idle connections to one upstream: generous, so that a pool
/// at its defaults never closes connections it will need again at once. Under steady load a pool holds as
/// many connections as the thread has requests in flight to the upstream, and a cap below that made every
/// request past it connect anew (with the earlier default of 32 and 64 clients on one thread: 0.75× HAProxy's
/// req/s at 1.3× its CPU per request). What a burst leaves behind ages out after `pool_idle_timeout`.
/// HAProxy keeps idle server connections without a cap by default; nginx keeps the `keepalive` it is given.
pub const DEFAULT_POOL_MAX_IDLE: usize = 1024;

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            upstreams: Vec::new(),
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(30),
            pool_max_idle: DEFAULT_POOL_MAX_IDLE,
            pool_idle_timeout: Duration::from_secs(60),
            buffer_max_bytes: 256 * 1024,
            max_response_head_bytes: 16 * 1024,
            ca_file: None,
            danger_accept_invalid_certs: false,
            response_head_timeout: Duration::from_secs(30),
            forward_underscore_headers: false,
        }
    }
}

impl ProxyConfig {
    /// Values that would make every proxied request fail are refused: `Err((key, why))`.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        for (key, d) in [
            ("connect_timeout", self.connect_timeout),
            ("read_timeout", self.read_timeout),
            ("response_head_timeout", self.response_head_timeout),
        ] {
            if d.is_zero() {
                return Err((key, "must be > 0".into()));
            }
        }
        if self.max_response_head_bytes == 0 {
            return Err(("max_response_head_bytes", "must be ≥ 1, got 0".into()));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct UpConn {
    stream: UpstreamStream,
    /// What was read from the upstream and not yet used (empty between exchanges).
    buf: BytesMut,
    /// The request head being sent, rendered into this buffer reused by each exchange on the connection.
    wbuf: BytesMut,
    /// The deadline of the read under way (see [`UpConn::read_by`]): one timer for the connection's life,
    /// moved for each read, instead of one registered and cancelled per read.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl UpConn {
    /// One read into `buf`, given up at `deadline` (`None`). Moving the connection's timer later, as each
    /// request does, only records the new deadline (the runtime finds it when the old one comes due); a
    /// timer is registered only when the deadline moves earlier or after it fired.
    async fn read_by(&mut self, deadline: tokio::time::Instant) -> Option<std::io::Result<usize>> {
        self.timer.as_mut().reset(deadline);
        tokio::select! {
            biased;
            r = self.stream.read_buf(&mut self.buf) => Some(r),
            () = self.timer.as_mut() => None,
        }
    }
}

#[derive(Debug)]
struct Upstream {
    addr: String,
    /// Set for an `https://` upstream.
    tls: Option<UpstreamTls>,
    /// Idle connections, one pool per serving thread (see [`crate::serving_thread::serving_thread`]): a connection
    /// is registered with the runtime of the thread that opened it, whose reactor alone reports its
    /// readiness (and which closes it when it stops), so it is reused only on that thread — and no thread
    /// takes a lock another thread takes. Oldest first. `max_idle` is per thread.
    idle: PerThread<Mutex<VecDeque<(UpConn, Instant)>>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Upstream {
    fn new(
        addr: String,
        tls: Option<UpstreamTls>,
        max_idle: usize,
        idle_timeout: Duration,
    ) -> Self {
        Upstream {
            addr,
            tls,
            idle: PerThread::new(),
            max_idle,
            idle_timeout,
        }
    }

    /// Back to the pool, idle since `since` (an exchange passes when its request was sent: a little early,
    /// which only shortens the idle time allowed, and saves a clock read). Connections idle longer than
    /// `idle_timeout` at the pool's old end are closed first, so a pool holds what was in use recently:
    /// after a burst it shrinks back as the burst's connections age out.
    fn checkin(&self, conn: UpConn, since: Instant) {
        if !conn.buf.is_empty() {
            return;
        }
        let Some(pool) = self.idle.get_or_init(|| Mutex::new(VecDeque::new())) else {
            return;
        };
        let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
        while idle
            .front()
            .is_some_and(|(_, t)| since.saturating_duration_since(*t) >= self.idle_timeout)
        {
            idle.pop_front();
        }
        if idle.len() < self.max_idle {
            idle.push_back((conn, since));
        }
    }

    /// The most recently returned idle connection that is still usable: younger than `idle_timeout`, and
    /// with nothing to read and not closed (see [`idle_and_open`]). Others are closed.
    fn checkout_idle(&self) -> Option<UpConn> {
        let pool = self.idle.get()?;
        loop {
            let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
            let (c, since) = idle.pop_back()?;
            if since.elapsed() >= self.idle_timeout {
                // the newest is too old: so is every one before it
                idle.clear();
                return None;
            }
            drop(idle);
            if !idle_and_open(&c.stream) {
                tracing::debug!(upstream = %self.addr, "idle upstream connection was closed or sent unrequested bytes; discarded");
                continue;
            }
            return Some(c);
        }
    }
}

/// Whether an idle upstream connection may carry a new request: nothing to read and not closed. Bytes that
/// arrived while it sat in the pool (a body after a HEAD answer, a second response nobody asked for) would
/// otherwise be taken for the next request's response — another client's — and an end of input (the
/// upstream closed it) would cost that request a failed attempt. One non-blocking read attempt, which the
/// runtime answers without a system call when the socket has not become readable since it last drained it.
fn idle_and_open(stream: &UpstreamStream) -> bool {
    // (TLS: the socket under it — any byte there, even a TLS record, means the connection is not idle)
    let stream = stream.tcp();
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// See the module documentation.
#[derive(Debug)]
pub struct ProxyBackend {
    upstreams: Vec<Arc<Upstream>>,
    /// Each serving thread's next upstream.
    next: PerThread<AtomicUsize>,
    cfg: ProxyConfig,
    /// This backend's Via pseudonym (`ordo-<16 hex digits>`).
    via_token: String,
}

/// A fresh Via pseudonym: 64 random bits from the standard library's per-process random hash keys (a new
/// key per call), mixed with the process id, the time and a counter so two backends never share one.
fn new_via_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    format!("ordo-{:016x}", h.finish())
}

/// Whether a Via field value names `token` as a received-by (`1.1 ordo-ab12, HTTP/1.0 other:80 (c)`).
fn via_names(value: &str, token: &str) -> bool {
    value.split(',').any(|entry| {
        let mut words = entry.split_ascii_whitespace();
        let _protocol = words.next();
        words
            .next()
            .is_some_and(|by| by.eq_ignore_ascii_case(token))
    })
}

/// Whether connecting to `upstream` (as written in the config) would reach a server listening on `listen`:
/// the same port and (after `0.0.0.0`/`[::]` in the upstream is read as the loopback address Linux connects
/// to) the same address, or a loopback upstream (`127.x`, `[::1]`, `localhost`) while `listen` is
/// unspecified (`0.0.0.0` takes IPv4 only, `[::]` both families). Other host names are not resolved: the
/// Via check catches a loop through them at run time. An ephemeral listen port (0) never matches.
pub(crate) fn points_at_listener(upstream: &str, listen: std::net::SocketAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let Ok(hostport) = parse_upstream(upstream) else {
        return false;
    };
    let Some((host, port)) = hostport.rsplit_once(':') else {
        return false;
    };
    if listen.port() == 0 || port.parse::<u16>().ok() != Some(listen.port()) {
        return false;
    }
    let l = listen.ip();
    let reaches = |u: IpAddr| {
        let u = match u {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            u => u,
        };
        u == l || (l.is_unspecified() && u.is_loopback() && (l.is_ipv6() || u.is_ipv4()))
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(u) => reaches(u),
        Err(_) => {
            let h = host.trim_end_matches('.').to_ascii_lowercase();
            (h == "localhost" || h.ends_with(".localhost"))
                && (reaches(IpAddr::V4(Ipv4Addr::LOCALHOST))
                    || reaches(IpAddr::V6(Ipv6Addr::LOCALHOST)))
        }
    }
}

enum ExchangeError {
    /// Connecting failed (refused, unreachable); the detail is for the log.
    Connect(String),
    ConnectTimeout,
    /// The TLS handshake with an `https://` upstream failed (untrusted certificate, wrong name, ...).
    Tls(String),
    /// The connection failed before any response byte (a pooled connection the upstream had closed):
    /// `sent_any` says whether any of the request had been accepted by the socket.
    Stale {
        sent_any: bool,
        msg: String,
    },
    Timeout(String),
    Bad(String),
}

/// Hop-by-hop headers never forwarded, for a name in any case.
fn hop_by_hop_bytes(name: &[u8]) -> bool {
    const HOP: [&[u8]; 7] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    ];
    HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

pub(crate) fn parse_upstream(s: &str) -> Result<String, String> {
    parse_upstream_url(s).map(|(hostport, _tls)| hostport)
}

/// `host:port` of an upstream and whether it is `https://` (port 443 then when omitted, else 80).
pub(crate) fn parse_upstream_url(s: &str) -> Result<(String, bool), String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (hostport, tls) = if lower.starts_with("https://") {
        (&t[8..], true)
    } else if lower.starts_with("http://") {
        (&t[7..], false)
    } else {
        (t, false)
    };
    let hostport = hostport.trim_end_matches('/');
    if hostport.is_empty() || hostport.contains(['/', '?', '#', ' ', '@']) {
        return Err(format!(
            "{s:?}: expected host:port, http://host:port or https://host:port"
        ));
    }
    let has_port = if let Some(rest) = hostport.strip_prefix('[') {
        rest.contains("]:")
    } else {
        hostport.contains(':')
    };
    if has_port {
        let port = hostport.rsplit(':').next().unwrap_or("");
        if port.parse::<u16>().is_err() {
            return Err(format!("{s:?}: bad port {port:?}"));
        }
        Ok((hostport.to_string(), tls))
    } else if tls {
        Ok((format!("{hostport}:443"), tls))
    } else {
        Ok((format!("{hostport}:80"), tls))
    }
}

impl ProxyBackend {
    pub fn new(cfg: &ProxyConfig) -> Result<Self, BackendError> {
        if cfg.upstreams.is_empty() {
            return Err(BackendError::Invalid {
                field: "upstreams",
                msg: "at least one upstream is needed".into(),
            });
        }
        cfg.check()
            .map_err(|(field, msg)| BackendError::Invalid { field, msg })?;
        let mut upstreams = Vec::new();
        let mut client_tls = None;
        for u in &cfg.upstreams {
            let (addr, tls) = parse_upstream_url(u).map_err(|msg| BackendError::Invalid {
                field: "upstreams",
                msg,
            })?;
            let tls = if tls {
                let config = match &client_tls {
                    Some(c) => Arc::clone(c),
                    None => client_tls.insert(upstream_client_config(cfg)?).clone(),
                };
                let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
                Some(
                    UpstreamTls::new(config, host).map_err(|msg| BackendError::Invalid {
                        field: "upstreams",
                        msg: format!("{u:?}: {msg}"),
                    })?,
                )
            } else {
                None
            };
            upstreams.push(Arc::new(Upstream::new(
                addr,
                tls,
                cfg.pool_max_idle,
                cfg.pool_idle_timeout,
            )));
        }
        Ok(ProxyBackend {
            upstreams,
            next: PerThread::new(),
            cfg: cfg.clone(),
            via_token: new_via_token(),
        })
    }

    /// The pseudonym this backend adds to `Via` (`ordo-<hex>`).
    pub fn via_token(&self) -> &str {
        &self.via_token
    }

    /// The answer to a request that already passed through this backend (its `Via` names our pseudonym):
    /// 508, without forwarding it again. `call` checks this first; the server may also call it before
    /// queueing the request, so a loop does not wait for a worker.
    pub fn loop_response(&self, req: &Request) -> Option<Response> {
        let looped = req
            .headers
            .known(Known::Via)
            .any(|v| via_names(v, &self.via_token));
        if !looped {
            return None;
        }
        tracing::warn!(
            path = %req.path,
            via = %self.via_token,
            "proxy loop: the request came back to the proxy it already passed through; answering 508"
        );
        Some(Response::text(
            LOOP_STATUS,
            &format!(
                "loop detected: this request already passed through this proxy (Via {})\n",
                self.via_token
            ),
        ))
    }

    pub async fn call(&self, req: &Request) -> Response {
        if let Some(resp) = self.loop_response(req) {
            return resp;
        }
        // each thread its own round robin, started at its own place (a shared counter is a cache line
        // every thread writes)
        let i = match self
            .next
            .get_or_init(|| AtomicUsize::new(crate::serving_thread::serving_thread()))
        {
            // (only this thread writes it: a load and a store, no locked instruction)
            Some(n) => {
                let i = n.load(Ordering::Relaxed);
                n.store(i.wrapping_add(1), Ordering::Relaxed);
                i
            }
            None => 0,
        } % self.upstreams.len();
        let up = &self.upstreams[i];
        let mut retried = false;
        loop {
            let (conn, reused) = match up.checkout_idle() {
                Some(c) => (c, true),
                // boxed: the connect future (a TLS handshake's) is twice the size of everything else a
                // proxied request awaits, and connecting is the rare path (the pool is)
                None => match Box::pin(self.connect(up)).await {
                    Ok(c) => (c, false),
                    Err(e) => return gateway_error(up, e),
                },
            };
            match self.exchange(conn, req, up).await {
                Ok(resp) => return resp,
                Err(ExchangeError::Stale { sent_any, msg })
                    if reused && !retried && (!sent_any || idempotent(&req.method)) =>
                {
                    tracing::debug!(upstream = %up.addr, method = %req.method, "{msg}; retrying on a new connection");
                    retried = true;
                }
                Err(e) => return gateway_error(up, e),
            }
        }
    }

    async fn connect(&self, up: &Upstream) -> Result<UpConn, ExchangeError> {
        match tokio::time::timeout(
            self.cfg.connect_timeout,
            TcpStream::connect(up.addr.as_str()),
        )
        .await
        {
            Err(_) => Err(ExchangeError::ConnectTimeout),
            Ok(Err(e)) => Err(ExchangeError::Connect(e.to_string())),
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                let stream = match &up.tls {
                    None => UpstreamStream::Plain(stream),
                    Some(tls) => self.handshake(tls, stream).await?,
                };
                Ok(UpConn {
                    stream,
                    buf: BytesMut::with_capacity(8 * 1024),
                    wbuf: BytesMut::with_capacity(1024),
                    timer: Box::pin(tokio::time::sleep(self.cfg.read_timeout)),
                })
            }
        }
    }

    /// The TLS handshake with an `https://` upstream (within `connect_timeout`): a failure (an untrusted
    /// or wrong-name certificate, say) is 502, a timeout 504.
    async fn handshake(
        &self,
        tls: &UpstreamTls,
        tcp: TcpStream,
    ) -> Result<UpstreamStream, ExchangeError> {
        match tokio::time::timeout(self.cfg.connect_timeout, tls.connect(tcp)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(ExchangeError::Tls(format!("TLS handshake failed: {e}"))),
            Err(_) => Err(ExchangeError::ConnectTimeout),
        }
    }

    /// The request head as forwarded: the method; the path ordo routed on (normalised, after a route's
    /// `strip_prefix`) with the query as sent; HTTP/1.1; the client's headers with their names as the client
    /// spelled them and their values byte for byte, minus hop-by-hop ones, `Expect`, `Content-Length` (ours
    /// replaces it) and, unless `forward_underscore_headers`, names containing `_`; then the headers ordo
    /// writes itself, in canonical case: `Host` (when the client sent none), `X-Forwarded-For`, `Via`,
    /// `Content-Length`.
    fn render_request(&self, req: &Request, up: &Upstream, out: &mut BytesMut) {
        out.clear();
        out.put_slice(req.method.as_bytes());
        out.put_u8(b' ');
        origin_form(&req.path, req.query.as_deref(), out);
        out.put_slice(b" HTTP/1.1\r\n");
        // Connection may name hop-by-hop headers to drop, but not Host: the request's target host is not
        // the sender's to take away (it would be replaced by the upstream's address).
        let connection = req.headers.has(Known::Connection);
        let named = |k: &[u8]| {
            req.headers
                .known(Known::Connection)
                .flat_map(|v| v.split(','))
                .any(|t| t.trim().as_bytes().eq_ignore_ascii_case(k))
        };
        let mut xff: Option<Vec<u8>> = None;
        let mut via: Option<Vec<u8>> = None;
        let mut host = false;
        for (name, v, known) in req.headers.iter_raw() {
            let joined = match known {
                Known::Other => {
                    if (!self.cfg.forward_underscore_headers && contains_byte(name, b'_'))
                        || (connection && named(name))
                    {
                        continue;
                    }
                    put_header(out, name, v);
                    continue;
                }
                Known::Host => {
                    host = true;
                    put_header(out, name, v);
                    continue;
                }
                Known::Cookie => {
                    if !(connection && named(name)) {
                        put_header(out, name, v);
                    }
                    continue;
                }
                Known::XForwardedFor if !(connection && named(name)) => &mut xff,
                Known::Via if !(connection && named(name)) => &mut via,
                // hop-by-hop, Content-Length (ours replaces it), Expect; or named by Connection
                _ => continue,
            };
            match joined {
                Some(x) => {
                    x.extend_from_slice(b", ");
                    x.extend_from_slice(v);
                }
                None => *joined = Some(v.to_vec()),
            }
        }
        if !host {
            put_header(out, b"Host", up.addr.as_bytes());
        }
        out.put_slice(b"X-Forwarded-For: ");
        if let Some(x) = xff.filter(|x| !x.is_empty()) {
            out.put_slice(&x);
            out.put_slice(b", ");
        }
        put_ip(out, req.peer.ip());
        out.put_slice(b"\r\n");
        // RFC 9110 §7.6.3: append our entry (the protocol version we received, our pseudonym) to the list.
        out.put_slice(b"Via: ");
        if let Some(v) = via.filter(|v| !v.is_empty()) {
            out.put_slice(&v);
            out.put_slice(b", ");
        }
        out.put_slice(match req.version {
            Version::Http10 => b"1.0 ",
            Version::Http11 => b"1.1 ",
            Version::Http2 => b"2 ",
        });
        out.put_slice(self.via_token.as_bytes());
        out.put_slice(b"\r\n");
        if !req.body.is_empty() || matches!(&*req.method, "POST" | "PUT" | "PATCH") {
            out.put_slice(b"Content-Length: ");
            put_u64(out, req.body.len() as u64);
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"\r\n");
    }

    async fn exchange(
        &self,
        mut conn: UpConn,
        req: &Request,
        up: &Arc<Upstream>,
    ) -> Result<Response, ExchangeError> {
        let t = self.cfg.read_timeout;
        let mut head = std::mem::take(&mut conn.wbuf);
        self.render_request(req, up, &mut head);
        // what the socket accepted of the request: none of it means the upstream cannot have acted on it
        let mut sent: usize = 0;
        // A plain TCP socket usually takes the whole request at once: tried first without a future or a
        // timer; what it does not take is written below, under read_timeout.
        if let UpstreamStream::Plain(tcp) = &conn.stream {
            let total = head.len() + req.body.len();
            while sent < total {
                let part = if sent < head.len() {
                    &head[sent..]
                } else {
                    &req.body[sent - head.len()..]
                };
                match tcp.try_write(part) {
                    Ok(0) => break,
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(ExchangeError::Stale {
                            sent_any: sent > 0,
                            msg: format!("writing to upstream failed: {e}"),
                        });
                    }
                }
            }
        }
        let done =
            matches!(conn.stream, UpstreamStream::Plain(_)) && sent == head.len() + req.body.len();
        let written = if done {
            Ok(Ok(()))
        } else {
            let write = async {
                let mut skip = sent;
                for part in [&head[..], &req.body[..]] {
                    let k = skip.min(part.len());
                    skip -= k;
                    let mut part = &part[k..];
                    while !part.is_empty() {
                        let n = conn.stream.write(part).await?;
                        if n == 0 {
                            return Err(std::io::ErrorKind::WriteZero.into());
                        }
                        sent += n;
                        part = &part[n..];
                    }
                }
                // a TLS stream sends its records when flushed (nothing to do on TCP)
                conn.stream.flush().await?;
                Ok::<(), std::io::Error>(())
            };
            tokio::time::timeout(t, write).await
        };
        conn.wbuf = head;
        match written {
            Err(_) => {
                return Err(ExchangeError::Timeout(
                    "writing to upstream timed out".into(),
                ));
            }
            Ok(Err(e)) => {
                return Err(ExchangeError::Stale {
                    sent_any: sent > 0,
                    msg: format!("writing to upstream failed: {e}"),
                });
            }
            Ok(Ok(())) => {}
        }
        // The whole head (interim 1xx heads included) must arrive by this deadline, whatever the pace of
        // the single reads (each bounded by read_timeout).
        let sent_at = tokio::time::Instant::now();
        let head_request = req.method == "HEAD";
        let head_deadline = sent_at + self.cfg.response_head_timeout;
        // the clock is read once for the first read (the usual whole head), again only for later ones
        let mut clock = Some(sent_at);
        let mut got_any = false;
        conn.buf.clear();
        // The forwarded header lines are rendered into this buffer, the body of a buffered response follows
        // them: a recycled one, taken when the head is there (not while waiting for it, which would need
        // as many spares as requests in flight), so no allocation per response in the usual case.
        let mut out = Vec::new();
        let parsed = loop {
            // (nothing to parse before the first read)
            let parsed = if conn.buf.is_empty() {
                None
            } else {
                self.parse_response_head(&mut conn.buf, head_request, &mut out)?
            };
            match parsed {
                Some(p) if (100..200).contains(&p.status) => {
                    if p.status == 101 {
                        return Err(ExchangeError::Bad("upstream switched protocols".into()));
                    }
                    conn.buf.advance(p.head_len);
                    out.clear();
                    continue;
                }
                Some(p) => break p,
                None => {}
            }
            conn.buf.reserve(8 * 1024);
            let now = clock.take().unwrap_or_else(tokio::time::Instant::now);
            let until = head_deadline.min(now + t);
            match conn.read_by(until).await {
                None if until == head_deadline => {
                    return Err(ExchangeError::Timeout(format!(
                        "upstream response head not complete within response_head_timeout ({:?})",
                        self.cfg.response_head_timeout
                    )));
                }
                None => {
                    return Err(ExchangeError::Timeout(
                        "upstream did not answer in time".into(),
                    ));
                }
                Some(Ok(0)) | Some(Err(_)) if !got_any => {
                    return Err(ExchangeError::Stale {
                        sent_any: true,
                        msg: "upstream closed the connection before answering".into(),
                    });
                }
                Some(Ok(0)) => return Err(ExchangeError::Bad("upstream closed mid-head".into())),
                Some(Err(e)) => {
                    return Err(ExchangeError::Bad(format!("reading from upstream: {e}")));
                }
                Some(Ok(_)) => got_any = true,
            }
        };
        conn.buf.advance(parsed.head_len);
        let lines_len = out.len();
        if parsed.framing == ResponseFraming::None {
            let mut headers = Vec::new();
            if let Some(n) = parsed.content_length {
                headers.push(("Content-Length".into(), n.to_string()));
            }
            if parsed.reusable {
                up.checkin(conn, sent_at.into_std());
            }
            return Ok(Response {
                status: parsed.status,
                headers,
                body: Body::Prerendered {
                    head: Bytes::from_owner(Recycled(out)),
                    body: Bytes::new(),
                },
            });
        }
        let status = parsed.status;
        match parsed.framing {
            ResponseFraming::Length(n) if n <= self.cfg.buffer_max_bytes => {
                let n = n as usize;
                while conn.buf.len() < n {
                    conn.buf.reserve(n - conn.buf.len());
                    match conn.read_by(tokio::time::Instant::now() + t).await {
                        None => {
                            return Err(ExchangeError::Timeout("upstream body timed out".into()));
                        }
                        Some(Ok(0)) | Some(Err(_)) => {
                            return Err(ExchangeError::Bad("upstream closed mid-body".into()));
                        }
                        Some(Ok(_)) => {}
                    }
                }
                // The body is copied out behind the header lines, into their recycled buffer (a fresh
                // one of this size would cost a large allocation per request); the connection keeps and
                // reuses its own read buffer.
                out.reserve(n);
                out.extend_from_slice(&conn.buf[..n]);
                conn.buf.advance(n);
                if parsed.reusable {
                    up.checkin(conn, sent_at.into_std());
                }
                let out = Bytes::from_owner(Recycled(out));
                let head = out.slice(..lines_len);
                let out = out.slice(lines_len..);
                Ok(Response {
                    status,
                    headers: Vec::new(),
                    body: Body::Prerendered { head, body: out },
                })
            }
            framing => {
                let (len, chunked) = match framing {
                    ResponseFraming::Length(n) => (Some(n), false),
                    ResponseFraming::Chunked => (None, true),
                    ResponseFraming::None | ResponseFraming::UntilClose => (None, false),
                };
                let (tx, rx) = mpsc::channel(8);
                let up = up.clone();
                let reusable = parsed.reusable && (len.is_some() || chunked);
                tokio::spawn(stream_body(conn, up, tx, len, chunked, reusable, t));
                Ok(Response {
                    status,
                    headers: Vec::new(),
                    body: Body::PrerenderedStream {
                        head: Bytes::from_owner(Recycled(out)),
                        rx,
                        len,
                    },
                })
            }
        }
    }

    /// The upstream's response head (`None`: not complete yet); the header lines to forward are rendered
    /// into `out` (appended; nothing is added unless the head is complete).
    /// The framing, Content-Length, status and version rules are the shared codec's (ordo-http1); this
    /// adds the proxy's: a head size limit, no transfer coding but `chunked` (the body is forwarded
    /// decoded), and which headers are forwarded.
    fn parse_response_head(
        &self,
        buf: &mut [u8],
        head_request: bool,
        out: &mut Vec<u8>,
    ) -> Result<Option<ParsedHead>, ExchangeError> {
        let too_large = buf.len() > self.cfg.max_response_head_bytes;
        let mut storage = [const { std::mem::MaybeUninit::uninit() }; 100];
        let head = match parse_response(buf, &mut storage, head_request) {
            Ok(Some(head)) => head,
            Ok(None) if too_large => {
                return Err(ExchangeError::Bad(
                    "upstream response head too large".into(),
                ));
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(ExchangeError::Bad(format!("upstream response: {e}"))),
        };
        if head.other_codings {
            let te = head
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("transfer-encoding"))
                .map_or(String::new(), |h| {
                    String::from_utf8_lossy(h.value).into_owned()
                });
            return Err(ExchangeError::Bad(format!(
                "unsupported upstream Transfer-Encoding {te:?}"
            )));
        }
        // HTTP/1.0 upstreams are not reused, even with keep-alive; nor a close-delimited body's connection
        let reusable =
            head.minor == 1 && head.keep_alive && head.framing != ResponseFraming::UntilClose;
        // whether a header name is listed by the upstream's Connection field (hop-by-hop, not forwarded);
        // looked up in the parsed head itself, and only when a Connection field lists something besides
        // `keep-alive` (itself hop-by-hop): the usual upstream sends `Connection: keep-alive` or nothing, and
        // a lookup per header would cost more than the rest of the header's handling
        let headers = head.headers;
        let connection_tokens = || {
            headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case("connection"))
                .flat_map(|h| h.value.split(|&b| b == b','))
                .map(trim_ows)
        };
        let lists_names =
            connection_tokens().any(|t| !t.is_empty() && !t.eq_ignore_ascii_case(b"keep-alive"));
        let named =
            |name: &[u8]| lists_names && connection_tokens().any(|t| t.eq_ignore_ascii_case(name));
        // The forwarded header lines, rendered once here as the upstream spelled them and written by the
        // HTTP layer behind ordo's own (Server, Date, Content-Length or chunked framing): no per-header
        // allocation. Date and Server are ordo's, as on every response it sends.
        if out.capacity() == 0 {
            *out = spare_buffer(head.len);
        }
        out.reserve(head.len);
        for h in headers.iter() {
            let name = h.name.as_bytes();
            let raw = trim_ows(h.value);
            if name.eq_ignore_ascii_case(b"content-length")
                || hop_by_hop_bytes(name)
                || named(name)
                || name.eq_ignore_ascii_case(b"date")
                || name.eq_ignore_ascii_case(b"server")
            {
                continue;
            }
            // forwarded as the upstream spelled it, the value byte for byte (UTF-8 or not): httparse has
            // refused every control byte but tab and DEL in values (the whole response is then a 502), so
            // nothing here can end a line early
            put_header(out, name, raw);
        }
        Ok(Some(ParsedHead {
            status: head.status,
            framing: head.framing,
            content_length: head.content_length,
            reusable,
            head_len: head.len,
        }))
    }
}

struct ParsedHead {
    status: u16,
    framing: ResponseFraming,
    /// As declared (forwarded on a response without a body: the answer to HEAD, 304).
    content_length: Option<u64>,
    reusable: bool,
    head_len: usize,
}

/// Buffers of buffered responses that are at most this large are kept for reuse when their response has been
/// written, up to [`SPARE_COUNT`] per thread.
const SPARE_MAX: usize = 32 * 1024;
const SPARE_COUNT: usize = 16;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer with room for `cap` bytes: a recycled one when this thread has one.
fn spare_buffer(cap: usize) -> Vec<u8> {
    let spare = SPARE
        .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
        .ok()
        .flatten();
    match spare {
        Some(mut v) => {
            v.clear();
            v.reserve(cap);
            v
        }
        None => Vec::with_capacity(cap),
    }
}

/// A buffered response's bytes; the buffer goes back to its thread's spares when the last `Bytes` viewing
/// it is dropped (on whatever thread that is).
struct Recycled(Vec<u8>);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        if v.capacity() > SPARE_MAX {
            return;
        }
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < SPARE_COUNT {
                    s.push(v);
                }
            }
        });
    }
}

fn put_header(out: &mut impl BufMut, k: &[u8], v: &[u8]) {
    out.put_slice(k);
    out.put_slice(b": ");
    out.put_slice(v);
    out.put_slice(b"\r\n");
}

/// Methods whose effect does not change when a request is repeated (RFC 9110 §9.2.2): a proxy may resend
/// them after a connection failed before the response; others it must not (RFC 9112 §9.3.1).
fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

/// The answer to a failed exchange: 502 or 504 with a body that says what kind of failure it was and
/// nothing about the upstream (no address, no system error); those go to the log.
fn gateway_error(up: &Upstream, e: ExchangeError) -> Response {
    let (status, public, detail) = match e {
        ExchangeError::Connect(d) => (502, "the upstream could not be reached", d),
        ExchangeError::ConnectTimeout => (
            504,
            "connecting to the upstream timed out",
            "connect timed out".to_string(),
        ),
        ExchangeError::Tls(d) => (502, "the TLS handshake with the upstream failed", d),
        ExchangeError::Stale { msg, .. } => (502, "the upstream closed the connection", msg),
        ExchangeError::Bad(d) => (502, "the upstream sent an invalid response", d),
        ExchangeError::Timeout(d) => (504, "the upstream did not answer in time", d),
    };
    tracing::warn!(upstream = %up.addr, status, "proxy: {detail}");
    let what = if status == 504 {
        "gateway timeout"
    } else {
        "bad gateway"
    };
    Response::text(status, &format!("{what}: {public}\n"))
}

/// Streams the rest of a response body to the client's connection task; returns the upstream connection
/// to the pool when the body ended cleanly on a reusable connection.
async fn stream_body(
    mut conn: UpConn,
    up: Arc<Upstream>,
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    len: Option<u64>,
    chunked: bool,
    reusable: bool,
    t: Duration,
) {
    let mut left = len.unwrap_or(u64::MAX);
    let mut dec = ChunkedDecoder::new(u64::MAX);
    loop {
        if chunked {
            let mut out = BytesMut::new();
            match dec.decode(&mut conn.buf, |c| out.extend_from_slice(c)) {
                Ok(done) => {
                    if !out.is_empty() && tx.send(Ok(out.freeze())).await.is_err() {
                        return;
                    }
                    if done {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx
                        .send(Err(std::io::Error::other(format!(
                            "bad upstream chunking: {e}"
                        ))))
                        .await;
                    return;
                }
            }
        } else if !conn.buf.is_empty() {
            let k = (conn.buf.len() as u64).min(left) as usize;
            let chunk = conn.buf.split_to(k).freeze();
            left -= k as u64;
            if tx.send(Ok(chunk)).await.is_err() {
                return;
            }
            if left == 0 {
                break;
            }
        }
        if left == 0 {
            break;
        }
        conn.buf.reserve(64 * 1024);
        match conn.read_by(tokio::time::Instant::now() + t).await {
            None => {
                let _ = tx
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "upstream body timed out",
                    )))
                    .await;
                return;
            }
            Some(Ok(0)) | Some(Err(_)) => {
                if len.is_none() && !chunked {
                    return; // close-delimited: the end of the connection is the end of the body
                }
                let _ = tx
                    .send(Err(std::io::Error::other("upstream closed mid-body")))
                    .await;
                return;
            }
            Some(Ok(_)) => {}
        }
    }
    if reusable {
        up.checkin(conn, Instant::now());
    }
}

/// The TLS client configuration of a backend's `https://` upstreams: the system's CA certificates, or
/// `ca_file`'s, or none checked at all (`danger_accept_invalid_certs`).
fn upstream_client_config(cfg: &ProxyConfig) -> Result<Arc<rustls::ClientConfig>, BackendError> {
    if cfg.danger_accept_invalid_certs {
        tracing::warn!(
            "proxy: danger_accept_invalid_certs is set: https upstream certificates are NOT verified"
        );
        return Ok(crate::tls::client_config(None, &[crate::tls::ALPN_HTTP1]));
    }
    let roots =
        crate::tls::root_store(cfg.ca_file.as_deref()).map_err(|msg| BackendError::Invalid {
            field: if cfg.ca_file.is_some() {
                "ca_file"
            } else {
                "upstreams"
            },
            msg,
        })?;
    Ok(crate::tls::client_config(
        Some(roots),
        &[crate::tls::ALPN_HTTP1],
    ))
}

impl ProxyBackend {
    /// The upstream addresses in use (`host:port`).
    pub fn upstreams(&self) -> Vec<String> {
        self.upstreams.iter().map(|u| u.addr.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle connection is reused only by the serving thread that pooled it (the runtime it is
    /// registered with), and each thread keeps up to `max_idle` of its own.
    #[tokio::test]
    async fn the_pool_keeps_each_serving_threads_connections_apart() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream::new(addr.to_string(), None, 1, Duration::from_secs(60));
        let mut peers = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..3 {
            let s = TcpStream::connect(addr).await.unwrap();
            peers.push(l.accept().await.unwrap().0);
            conns.push(UpConn {
                stream: UpstreamStream::Plain(s),
                buf: BytesMut::new(),
                wbuf: BytesMut::new(),
                timer: Box::pin(tokio::time::sleep(Duration::from_secs(60))),
            });
        }
        let (c0, c1b, c1) = (
            conns.pop().unwrap(),
            conns.pop().unwrap(),
            conns.pop().unwrap(),
        );
        let local = |c: &UpConn| c.stream.tcp().local_addr().unwrap();
        let (a1, a0) = (local(&c1), local(&c0));
        crate::serving_thread::set_serving_thread(1);
        up.checkin(c1, Instant::now());
        // thread 1's pool is full (max_idle 1 per thread): dropped
        up.checkin(c1b, Instant::now());
        crate::serving_thread::set_serving_thread(0);
        assert!(
            up.checkout_idle().is_none(),
            "thread 0 took thread 1's connection"
        );
        up.checkin(c0, Instant::now());
        assert_eq!(local(&up.checkout_idle().unwrap()), a0);
        assert!(up.checkout_idle().is_none());
        crate::serving_thread::set_serving_thread(1);
        assert_eq!(local(&up.checkout_idle().unwrap()), a1);
        assert!(up.checkout_idle().is_none());
        crate::serving_thread::set_serving_thread(0);
    }

    /// A pool holds what was in use recently: connections idle longer than the timeout are closed from the
    /// pool's old end when a connection comes back, and a newest connection too old means all are.
    #[tokio::test]
    async fn the_pool_closes_what_aged_out_from_its_old_end() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream::new(addr.to_string(), None, 8, Duration::from_secs(60));
        let mut peers = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..4 {
            let s = TcpStream::connect(addr).await.unwrap();
            peers.push(l.accept().await.unwrap().0);
            conns.push(UpConn {
                stream: UpstreamStream::Plain(s),
                buf: BytesMut::new(),
                wbuf: BytesMut::new(),
                timer: Box::pin(tokio::time::sleep(Duration::from_secs(60))),
            });
        }
        let local = |c: &UpConn| c.stream.tcp().local_addr().unwrap();
        let now = Instant::now();
        let long_ago = now - Duration::from_secs(120);
        let newest = conns.pop().unwrap();
        let fresh = conns.pop().unwrap();
        let (a_newest, a_fresh) = (local(&newest), local(&fresh));
        crate::serving_thread::set_serving_thread(3);
        for c in conns {
            up.checkin(c, long_ago);
        }
        up.checkin(fresh, now - Duration::from_secs(1));
        // the two returned long ago are closed as this one comes back
        up.checkin(newest, now);
        let count = |up: &Upstream| up.idle.get().unwrap().lock().unwrap().len();
        assert_eq!(count(&up), 2);
        assert_eq!(local(&up.checkout_idle().unwrap()), a_newest);
        assert_eq!(local(&up.checkout_idle().unwrap()), a_fresh);
        assert!(up.checkout_idle().is_none());
        // a newest connection past the timeout: every one before it is older still
        let s = TcpStream::connect(addr).await.unwrap();
        peers.push(l.accept().await.unwrap().0);
        up.idle.get().unwrap().lock().unwrap().push_back((
            UpConn {
                stream: UpstreamStream::Plain(s),
                buf: BytesMut::new(),
                wbuf: BytesMut::new(),
                timer: Box::pin(tokio::time::sleep(Duration::from_secs(60))),
            },
            long_ago,
        ));
        assert!(up.checkout_idle().is_none());
        assert_eq!(count(&up), 0);
        crate::serving_thread::set_serving_thread(0);
    }

    #[test]
    fn upstream_addresses() {
        assert_eq!(
            parse_upstream("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".into())
        );
        assert_eq!(
            parse_upstream("http://backend:81/"),
            Ok("backend:81".into())
        );
        assert_eq!(parse_upstream("backend"), Ok("backend:80".into()));
        assert_eq!(parse_upstream("[::1]:9000"), Ok("[::1]:9000".into()));
        assert_eq!(parse_upstream_url("https://x:1"), Ok(("x:1".into(), true)));
        assert_eq!(parse_upstream_url("HTTPS://x/"), Ok(("x:443".into(), true)));
        assert_eq!(parse_upstream_url("http://x"), Ok(("x:80".into(), false)));
        assert!(parse_upstream("x:notaport").is_err());
        assert!(parse_upstream("x:1/path").is_err());
        assert!(parse_upstream("").is_err());
    }

    #[test]
    fn via_tokens_are_unique_and_recognised() {
        let a = new_via_token();
        let b = new_via_token();
        assert_ne!(a, b);
        assert!(a.starts_with("ordo-") && a.len() == 21, "{a}");
        assert!(via_names(&format!("1.1 {a}"), &a));
        assert!(via_names(&format!("1.0 fred, 1.1 {a} (ordo)"), &a));
        assert!(via_names(&format!("HTTP/1.1 x:80,1.1  {a}"), &a));
        assert!(!via_names(&format!("1.1 {b}"), &a));
        assert!(!via_names(&format!("1.1 x ({a})"), &a));
        assert!(
            !via_names(&a, &a),
            "a bare token is the protocol, not the received-by"
        );
        assert!(!via_names("", &a));
    }

    #[test]
    fn upstream_pointing_at_the_listener() {
        let at = |u: &str, l: &str| points_at_listener(u, l.parse().unwrap());
        assert!(at("127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(at("http://127.0.0.1:8080/", "127.0.0.1:8080"));
        assert!(at("localhost:8080", "127.0.0.1:8080"));
        assert!(at("LOCALHOST.:8080", "[::1]:8080"));
        assert!(at("0.0.0.0:8080", "127.0.0.1:8080"));
        assert!(at("[::]:8080", "[::1]:8080"));
        assert!(!at("[::]:8080", "10.1.2.3:8080"));
        assert!(!at("localhost:8080", "127.0.0.2:8080"));
        assert!(at("127.0.0.1:8080", "0.0.0.0:8080"));
        assert!(at("[::1]:8080", "[::]:8080"));
        assert!(at("127.0.0.1:8080", "[::]:8080"));
        assert!(at("10.1.2.3:8080", "10.1.2.3:8080"));
        assert!(at("[::1]:8080", "[::1]:8080"));
        assert!(at("localhost:80", "0.0.0.0:80"));
        assert!(at("localhost", "0.0.0.0:80"));
        // a different port, address or family, a remote name, an ephemeral listen port: not refused
        assert!(!at("127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!at("127.0.0.2:8080", "127.0.0.1:8080"));
        assert!(!at("[::1]:8080", "127.0.0.1:8080"));
        assert!(!at("[::1]:8080", "0.0.0.0:8080"));
        assert!(!at("10.1.2.3:8080", "0.0.0.0:8080"));
        assert!(!at("backend:8080", "0.0.0.0:8080"));
        assert!(!at("localhost:8080", "10.1.2.3:8080"));
        assert!(!at("127.0.0.1:0", "127.0.0.1:0"));
        assert!(at("https://127.0.0.1:8080", "127.0.0.1:8080"));
    }
}
