//! HTTP/2 for `ordo bench --h2` (over TLS, ALPN `h2`) and `--h2c` (cleartext with prior knowledge), with
//! the `h2` crate's client. A connection carries `streams` clients at once (h2load's `-m`): each runs the
//! engine's one loop (`engine::client`) — slots, classes, open or closed pacing, recording — and makes its
//! requests as streams of the shared connection. A connection that fails is opened again by the first
//! stream that needs it; the others wait for it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::net::TcpStream;

use crate::engine::{Ctx, Exchange, Exchanged, Plan, Protocol, client};
use crate::http::ResponseInfo;
use crate::stats::FailKind;
use crate::target::{Header, Target};

/// One request of a class, ready to be sent as a stream (the header block is encoded per request by h2).
#[derive(Debug)]
pub(crate) struct H2Request {
    method: http::Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Option<Bytes>,
}

impl H2Request {
    /// The stream's request for `method` on `target` with `headers` and `cookies` (as the HTTP/1.1 request
    /// would carry them: `host` becomes `:authority`, connection-specific fields are left out).
    pub(crate) fn new(
        method: &str,
        target: &Target,
        headers: &[Header],
        cookies: &[(String, String)],
        body: Option<&Bytes>,
    ) -> Result<H2Request, String> {
        let method = http::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let uri: http::Uri = format!(
            "{}://{}{}",
            target.scheme(),
            target.host_header(),
            target.path
        )
        .parse()
        .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        let mut map = HeaderMap::new();
        let has = |n: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(n));
        if !has("user-agent") {
            map.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("ordo-bench/", env!("CARGO_PKG_VERSION"))),
            );
        }
        if !has("accept") {
            map.insert(http::header::ACCEPT, HeaderValue::from_static("*/*"));
        }
        for h in headers {
            let lower = h.name.to_ascii_lowercase();
            if matches!(
                lower.as_str(),
                "host"
                    | "connection"
                    | "keep-alive"
                    | "proxy-connection"
                    | "transfer-encoding"
                    | "upgrade"
            ) {
                continue;
            }
            let name = HeaderName::from_bytes(lower.as_bytes()).map_err(|e| e.to_string())?;
            let value = HeaderValue::from_str(&h.value).map_err(|e| e.to_string())?;
            map.append(name, value);
        }
        if !cookies.is_empty() {
            let line: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let value = HeaderValue::from_str(&line.join("; ")).map_err(|e| e.to_string())?;
            map.append(http::header::COOKIE, value);
        }
        Ok(H2Request {
            method,
            uri,
            headers: map,
            body: body.cloned(),
        })
    }

    fn build(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

/// What an HTTP/2 run adds to the plan.
#[derive(Debug)]
pub(crate) struct H2Plan {
    /// Per class, per URL.
    pub(crate) requests: Vec<Vec<H2Request>>,
    /// Concurrent streams (clients) per connection.
    pub(crate) streams: usize,
}

/// The connection a group of streams shares.
struct Shared {
    /// The open connection's sender and its generation (so a stream that saw an old one fail does not drop
    /// a new one).
    sender: RefCell<Option<(u64, SendRequest<Bytes>)>>,
    generation: Cell<u64>,
    /// Held while (re)connecting: one stream connects, the others wait for its result.
    connecting: tokio::sync::Mutex<()>,
    /// The task driving the connection's I/O.
    driver: RefCell<Option<tokio::task::AbortHandle>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(d) = self.driver.borrow_mut().take() {
            d.abort();
        }
    }
}

/// Opens a connection (TCP, TLS with ALPN `h2` for `https://`, the HTTP/2 handshake) and starts its
/// driver task.
async fn connect(plan: &Plan) -> Option<(SendRequest<Bytes>, tokio::task::AbortHandle)> {
    let tcp = TcpStream::connect(plan.addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    let mut b = h2::client::Builder::new();
    // large windows, as h2load's defaults: the client never holds the server back
    b.initial_window_size((1 << 30) - 1)
        .initial_connection_window_size((1 << 30) - 1);
    match &plan.tls {
        Some(tls) => {
            let s = tls.handshake(tcp).await.ok()?;
            let (send, conn) = b.handshake(s).await.ok()?;
            Some((send, tokio::task::spawn_local(conn).abort_handle()))
        }
        None => {
            let (send, conn) = b.handshake(tcp).await.ok()?;
            Some((send, tokio::task::spawn_local(conn).abort_handle()))
        }
    }
}

impl Shared {
    /// The open connection, opening it first when there is none (`connected` is then set).
    async fn get(
        &self,
        plan: &Plan,
        opened: &mut u64,
        connected: &mut Option<(Instant, Instant)>,
    ) -> Result<(u64, SendRequest<Bytes>), FailKind> {
        if let Some(s) = self.sender.borrow().clone() {
            return Ok(s);
        }
        let _turn = self.connecting.lock().await;
        if let Some(s) = self.sender.borrow().clone() {
            return Ok(s);
        }
        let t0 = Instant::now();
        let Ok(Some((send, driver))) =
            tokio::time::timeout(plan.connect_timeout, connect(plan)).await
        else {
            return Err(FailKind::Connect);
        };
        *opened += 1;
        *connected = Some((t0, Instant::now()));
        let g = self.generation.get() + 1;
        self.generation.set(g);
        if let Some(old) = self.driver.borrow_mut().replace(driver) {
            old.abort();
        }
        *self.sender.borrow_mut() = Some((g, send.clone()));
        Ok((g, send))
    }

    /// Drops connection `generation` (it failed), unless a newer one replaced it already.
    fn failed(&self, generation: u64) {
        let mut s = self.sender.borrow_mut();
        if s.as_ref().is_some_and(|(g, _)| *g == generation) {
            *s = None;
            if let Some(d) = self.driver.borrow_mut().take() {
                d.abort();
            }
        }
    }
}

/// One stream-client of a shared connection.
struct Stream {
    shared: Rc<Shared>,
    /// The requests it sends.
    h2: Arc<H2Plan>,
    /// The `server` header this stream saw first (ab's "Server Software").
    server: Option<String>,
}

/// The size the response's status line and header fields would have in HTTP/1.1 (HPACK hides the wire
/// size): what the report's head bytes mean for HTTP/2.
fn head_size(parts: &http::response::Parts) -> u64 {
    let fields: usize = parts
        .headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    ("HTTP/1.1 200 OK\r\n".len() + fields + 2) as u64
}

impl Exchange for Stream {
    async fn exchange(
        &mut self,
        plan: &Plan,
        class: usize,
        url: usize,
        opened: &mut u64,
    ) -> Result<Exchanged, FailKind> {
        let template = &self.h2.requests[class][url];
        let mut retried = false;
        loop {
            let mut connected = None;
            let (generation, send) = self.shared.get(plan, opened, &mut connected).await?;
            let reused = connected.is_none();
            // a reused connection the server closed (GOAWAY, idle close) is retried once on a new one
            let fail = |kind: FailKind, retried: &mut bool| {
                self.shared.failed(generation);
                if reused && !*retried {
                    *retried = true;
                    None
                } else {
                    Some(Err(kind))
                }
            };
            let mut ready = match send.ready().await {
                Ok(r) => r,
                Err(_) => match fail(FailKind::Exception, &mut retried) {
                    Some(e) => return e,
                    None => continue,
                },
            };
            let end = template.body.is_none();
            let (response, mut body_tx) = match ready.send_request(template.build(), end) {
                Ok(x) => x,
                Err(_) => match fail(FailKind::Exception, &mut retried) {
                    Some(e) => return e,
                    None => continue,
                },
            };
            if let Some(b) = &template.body {
                // h2 sends it as the server's windows allow
                let _ = body_tx.send_data(b.clone(), true);
            }
            let sent = Instant::now();
            let resp = match response.await {
                Ok(r) => r,
                Err(e) => {
                    // refused before the server looked at it: safe to send again
                    let unprocessed =
                        e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM);
                    if unprocessed {
                        match fail(FailKind::Receive, &mut retried) {
                            Some(e) => return e,
                            None => continue,
                        }
                    }
                    if e.is_io() || e.is_go_away() {
                        self.shared.failed(generation);
                    }
                    return Err(FailKind::Receive);
                }
            };
            let first_byte = Some(Instant::now());
            let (parts, mut body) = resp.into_parts();
            if self.server.is_none() {
                self.server = (parts.headers.get(http::header::SERVER))
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
            }
            let mut body_bytes: u64 = 0;
            while let Some(chunk) = body.data().await {
                match chunk {
                    Ok(c) => {
                        body_bytes += c.len() as u64;
                        let _ = body.flow_control().release_capacity(c.len());
                    }
                    Err(e) => {
                        if e.is_io() || e.is_go_away() {
                            self.shared.failed(generation);
                        }
                        return Err(FailKind::Length);
                    }
                }
            }
            return Ok(Exchanged {
                info: ResponseInfo {
                    status: parts.status.as_u16(),
                    head_bytes: head_size(&parts),
                    body_bytes,
                    content_bytes: body_bytes,
                    close: false,
                },
                connected,
                sent,
                first_byte,
            });
        }
    }

    fn timed_out(&mut self) {
        // the stream was reset when its future was dropped; the connection stays
    }

    fn server_software(&self) -> Option<&str> {
        self.server.as_deref()
    }
}

impl Protocol for H2Plan {
    fn connection(self: Arc<Self>, ctx: Ctx, j: usize) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(connection(self, ctx, j))
    }
}

/// One HTTP/2 connection (connection `j`) and its `streams` clients, each a task of its own on this
/// thread; aborting this task aborts them and the connection.
async fn connection(h2: Arc<H2Plan>, ctx: Ctx, j: usize) {
    let streams = h2.streams;
    let shared = Rc::new(Shared {
        sender: RefCell::new(None),
        generation: Cell::new(0),
        connecting: tokio::sync::Mutex::new(()),
        driver: RefCell::new(None),
    });
    let ctx = Rc::new(ctx);
    let mut set = tokio::task::JoinSet::new();
    for s in 0..streams {
        let ctx = ctx.clone();
        let mut x = Stream {
            shared: shared.clone(),
            h2: h2.clone(),
            server: None,
        };
        set.spawn_local(async move { client(&ctx, j * streams + s, &mut x).await });
    }
    drop(shared);
    while set.join_next().await.is_some() {}
}
