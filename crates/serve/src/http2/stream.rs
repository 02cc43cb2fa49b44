//! One HTTP/2 stream, from its HEADERS to the end of its response: the request head mapped to a
//! [`Request`] (pseudo-headers, `:authority` → `host`, cookies joined, the same path rules as HTTP/1), a turn
//! among the connection's streams in progress, the body read within the limits, the handler run while the
//! stream is watched for a reset (a reset drops the handler's future, and with it the queue place or the
//! worker), and the [`Response`] sent as HEADERS and DATA within the flow-control windows.
//!
//! Every stream is served by its connection's task, in its set of streams in progress ([`InProgress`]),
//! never by a runtime task of its own. A stream without a request body whose turn is free has its handler
//! started at once ([`start`]), and an answer ready in its first poll (a cached file, a 503 — most of them)
//! is handed to h2 without a further future, a timer or a reset watch; anything else continues as a
//! [`Later`] future, as a stream with a body does from the start ([`serve`]). Response header blocks
//! prerendered by the static cache and the Date are parsed once per connection ([`HeadCache`]), not per
//! response.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::OwnedSemaphorePermit;

use super::{ConnCtx, Outcome};
use crate::http::parse::{path_and_query, valid_host};
use crate::http::{Body, Handler, Headers, Request, Response, Version, date};

/// Largest piece of a file read and sent at once.
const FILE_CHUNK: usize = 64 * 1024;

/// Why a stream stopped before its response was complete.
pub(super) enum Stop {
    /// The client reset the stream.
    Reset,
    /// Anything else: the connection failed, the client stopped reading, a backend body broke off.
    Failed,
}

pub(super) fn stop_of(e: &h2::Error) -> Stop {
    if e.is_reset() && e.is_remote() {
        Stop::Reset
    } else {
        Stop::Failed
    }
}

impl From<Stop> for Outcome {
    fn from(s: Stop) -> Outcome {
        match s {
            Stop::Reset => Outcome::ResetByClient,
            Stop::Failed => Outcome::Failed,
        }
    }
}

/// What becomes of a stream the connection just accepted (see [`start`]).
pub(super) enum Started<H> {
    /// Answered already (refused, say).
    Done(Outcome),
    /// Its handler is started: most responses (a cached file, a 503) are ready in its first poll and are
    /// then sent without a future of their own.
    Poll(Inline<H>),
    /// It goes on later: a request body to read, its turn among the streams in progress to wait for, a
    /// handler that did not answer in its first poll, or a body to send as the client's windows open.
    Later(Later),
}

/// A stream that goes on after the poll that started it: kept in its connection's set of streams in progress,
/// which the connection task polls when the stream is woken (see `super::serve`).
pub(super) type Later = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// A stream whose handler has been started and holds its turn ([`InProgress::Handler`]).
pub(super) struct Inline<H> {
    fut: Pin<Box<dyn Future<Output = Response> + Send>>,
    respond: SendResponse<Bytes>,
    slot: OwnedSemaphorePermit,
    head_request: bool,
    ctx: Arc<ConnCtx<H>>,
}

/// Starts serving a stream the connection just accepted: a request without a body whose turn among the
/// streams in progress is free at once (the usual case) gets its handler started here; the others go on
/// [`Later`] ([`serve`]).
pub(super) fn start<H: Handler>(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    ctx: &Arc<ConnCtx<H>>,
) -> Started<H> {
    // (an extended CONNECT's stream stays open for its tunnel, whatever its HEADERS said)
    if !req.body().is_end_stream() || req.method() == http::Method::CONNECT {
        return Started::Later(Box::pin(serve(req, respond, ctx.clone())));
    }
    // later streams keep their arrival order behind those waiting for a turn (or for the connection's
    // held response bytes to go out)
    if ctx.buffered.full() {
        return Started::Later(Box::pin(serve(req, respond, ctx.clone())));
    }
    let Ok(slot) = ctx.slots.clone().try_acquire_owned() else {
        return Started::Later(Box::pin(serve(req, respond, ctx.clone())));
    };
    let (parts, _body) = req.into_parts();
    let head_request = parts.method == http::Method::HEAD;
    let request = match admit(&parts, ctx) {
        Ok(r) => r,
        Err((status, msg)) => {
            drop(slot);
            return Started::Done(refuse_now(&mut respond, status, msg, &ctx.heads));
        }
    };
    Started::Poll(Inline {
        fut: Box::pin(ctx.handler.handle(request)),
        respond,
        slot,
        head_request,
        ctx: ctx.clone(),
    })
}

impl<H: Handler> Inline<H> {
    /// Polls the handler once; a panic in it ends this stream only (reported as `None`).
    fn poll_handler(&mut self, cx: &mut Context<'_>) -> Poll<Option<Response>> {
        let fut = &mut self.fut;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(resp)) => Poll::Ready(Some(resp)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => {
                tracing::error!(peer = %self.ctx.peer, "request handler panicked; HTTP/2 stream reset");
                Poll::Ready(None)
            }
        }
    }

    /// The handler answered: a body in memory is handed to h2 now (`Done`); a file or a stream is sent
    /// [`Later`]. `None`: the handler panicked and the stream is reset.
    fn answer(self, resp: Option<Response>) -> Answer {
        let Inline {
            fut,
            mut respond,
            slot,
            head_request,
            ctx,
        } = self;
        drop(slot);
        drop(fut);
        let Some(resp) = resp else {
            respond.send_reset(Reason::INTERNAL_ERROR);
            return Answer::Done(Outcome::Failed);
        };
        if in_memory(&resp.body) {
            return match send_now(&mut respond, resp, head_request, &ctx) {
                Ok(None) => Answer::Done(Outcome::Answered),
                Ok(Some(rest)) => {
                    let limit = ctx.limits.idle_timeout;
                    Answer::Later(Box::pin(async move {
                        match send_rest(rest, limit).await {
                            Ok(()) => Outcome::Answered,
                            Err(s) => s.into(),
                        }
                    }))
                }
                Err(s) => Answer::Done(s.into()),
            };
        }
        Answer::Later(Box::pin(async move {
            match send(&mut respond, resp, head_request, &ctx).await {
                Ok(()) => Outcome::Answered,
                Err(s) => s.into(),
            }
        }))
    }
}

/// What a stream whose handler answered does next.
enum Answer {
    Done(Outcome),
    Later(Later),
}

/// One of a connection's streams in progress, polled by the connection task: the connection keeps them in a
/// `FuturesUnordered`, which gives each stream a waker of its own and polls only those woken, so a stream
/// waiting for a worker or its upstream costs no runtime task (no spawn, no scheduling) and its response
/// reaches h2 in the same poll of the connection task that writes it out, not after a second wake-up.
/// (Measured in docs/serve.md, "HTTP/2 clients through the proxy"; the streams ran on the connection's
/// thread before too, each serving thread having a runtime of its own.) A stream's handler is first polled
/// here, with that waker: a handler polled first by the connection task would have registered the
/// connection's waker, and had to be polled again, at the cost of its whole chain of futures, to learn its
/// own. The output is how the stream ended; `None`: it panicked after its handler (which ends that stream
/// only: its handles are dropped, so h2 resets it), as a runtime task's panic was reported.
pub(super) enum InProgress<H> {
    /// Its handler has not answered yet; watched for a reset as in [`serve`] (a reset drops the handler's
    /// future, and with it the queue place or the worker).
    Handler(Inline<H>),
    /// The rest: a body to read, a turn to wait for, a response to send.
    Later(Later),
    /// Ended (never polled again by the set).
    Ended,
}

impl<H: Handler> Future for InProgress<H> {
    type Output = Option<Outcome>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Outcome>> {
        let this = self.get_mut();
        loop {
            match this {
                InProgress::Handler(s) => {
                    let Poll::Ready(resp) = s.poll_handler(cx) else {
                        let Poll::Ready(r) = s.respond.poll_reset(cx) else {
                            return Poll::Pending;
                        };
                        *this = InProgress::Ended;
                        return Poll::Ready(Some(reset_outcome(r)));
                    };
                    let InProgress::Handler(s) = std::mem::replace(this, InProgress::Ended) else {
                        return Poll::Ready(Some(Outcome::Failed));
                    };
                    match s.answer(resp) {
                        Answer::Done(o) => return Poll::Ready(Some(o)),
                        Answer::Later(t) => *this = InProgress::Later(t),
                    }
                }
                InProgress::Later(t) => {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        t.as_mut().poll(cx)
                    }));
                    return match r {
                        Ok(Poll::Pending) => Poll::Pending,
                        Ok(Poll::Ready(o)) => {
                            *this = InProgress::Ended;
                            Poll::Ready(Some(o))
                        }
                        Err(_) => {
                            *this = InProgress::Ended;
                            Poll::Ready(None)
                        }
                    };
                }
                InProgress::Ended => return Poll::Ready(Some(Outcome::Failed)),
            }
        }
    }
}

/// The checks of a stream's head before its handler: its request, or the status refusing it.
fn admit<H>(
    parts: &http::request::Parts,
    ctx: &ConnCtx<H>,
) -> Result<Request, (u16, &'static str)> {
    let request = request_of(parts, ctx)?;
    let announced = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > ctx.limits.max_body_bytes) {
        return Err((413, "request body too large"));
    }
    Ok(request)
}

/// Serves one stream to its end, from its HEADERS (a stream with a body, or one that waits for its turn).
async fn serve<H: Handler>(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    ctx: Arc<ConnCtx<H>>,
) -> Outcome {
    let limits = &ctx.limits;
    let (parts, mut body) = req.into_parts();
    let head_request = parts.method == http::Method::HEAD;
    let mut request = match admit(&parts, &ctx) {
        Ok(r) => r,
        Err((status, msg)) => return refuse(respond, &body, status, msg, &ctx).await,
    };
    // A turn among the connection's streams in progress; a reset meanwhile ends the stream here.
    let slot = tokio::select! {
        biased;
        s = ctx.slots.clone().acquire_owned() => match s {
            Ok(s) => s,
            Err(_) => return Outcome::Failed,
        },
        r = poll_fn(|cx| respond.poll_reset(cx)) => return reset_outcome(r),
    };
    // The connection holds `max_buffered_bytes` of responses its client has not let out: no new handler
    // (and so no new response in memory) until some of it has gone.
    if ctx.buffered.full() {
        tokio::select! {
            biased;
            () = ctx.buffered.room() => {}
            r = poll_fn(|cx| respond.poll_reset(cx)) => return reset_outcome(r),
        }
    }
    // admitted, a CONNECT is an extended CONNECT for a WebSocket (RFC 8441): its stream is the tunnel's
    let tunnel = parts.method == http::Method::CONNECT;
    if !tunnel && !body.is_end_stream() {
        match read_body(&mut body, limits.max_body_bytes, limits.head_timeout).await {
            Ok(b) => request.body = b,
            Err(BodyError::TooLarge) => {
                return refuse(respond, &body, 413, "request body too large", &ctx).await;
            }
            Err(BodyError::TimedOut) => {
                let msg = "request body not received in time";
                return refuse(respond, &body, 408, msg, &ctx).await;
            }
            Err(BodyError::Stream(s)) => return s.into(),
        }
    }
    let recv = if tunnel { Some(body) } else { None };
    // The handler (classify, queue, serve), watched for a reset: dropping its future leaves the queue or
    // frees the worker at once.
    let fut = ctx.handler.handle(request);
    let resp = tokio::select! {
        biased;
        resp = fut => resp,
        r = poll_fn(|cx| respond.poll_reset(cx)) => return reset_outcome(r),
    };
    drop(slot);
    if let Some(recv) = recv {
        return super::tunnel::answer(respond, resp, recv, &ctx).await;
    }
    match send(&mut respond, resp, head_request, &ctx).await {
        Ok(()) => Outcome::Answered,
        Err(s) => s.into(),
    }
}

fn reset_outcome(r: Result<Reason, h2::Error>) -> Outcome {
    match r {
        Ok(_) => Outcome::ResetByClient,
        Err(e) => stop_of(&e).into(),
    }
}

/// Answers a request that is refused before its handler (400, 408, 413, 414). When the client may still
/// be sending a body, dropping the stream's handles makes h2 follow the response with RST_STREAM(NO_ERROR)
/// so it stops (RFC 9113 §8.1) — once the response's frames are out, not instead of them.
async fn refuse<H>(
    mut respond: SendResponse<Bytes>,
    _body: &RecvStream,
    status: u16,
    msg: &str,
    ctx: &ConnCtx<H>,
) -> Outcome {
    refuse_now(&mut respond, status, msg, &ctx.heads)
}

/// [`refuse`] without a body to hold on to: the text answer is in memory, so sending it does not wait.
fn refuse_now(
    respond: &mut SendResponse<Bytes>,
    status: u16,
    msg: &str,
    heads: &Mutex<HeadCache>,
) -> Outcome {
    tracing::debug!(status, msg, "HTTP/2 request refused");
    let resp = Response::text(status, msg);
    let head = head_of(&resp, false, heads);
    let body = match resp.body {
        Body::Bytes(b) | Body::Prerendered { body: b, .. } => b,
        _ => Bytes::new(),
    };
    // a line of text: h2 holds it whole until the window lets it out
    let r = respond
        .send_response(head, body.is_empty())
        .and_then(|mut stream| {
            if body.is_empty() {
                Ok(())
            } else {
                stream.send_data(body, true)
            }
        });
    match r {
        Ok(()) => Outcome::Answered,
        Err(e) => stop_of(&e).into(),
    }
}

/// The request the rest of ordo sees, from the stream's head; the error is a status and its reason.
fn request_of<H>(
    parts: &http::request::Parts,
    ctx: &ConnCtx<H>,
) -> Result<Request, (u16, &'static str)> {
    // RFC 8441: an extended CONNECT for a WebSocket is, to the rest of ordo, the HTTP/1.1 handshake — a GET
    // with `Connection: upgrade` and `Upgrade: websocket` (classified, routed and logged as one); a plain
    // CONNECT asks for a forward proxy, which ordo is not
    let websocket = parts.method == http::Method::CONNECT;
    if websocket {
        match parts.extensions.get::<h2::ext::Protocol>() {
            None => {
                return Err((
                    405,
                    "CONNECT is not supported (ordo is not a forward proxy)",
                ));
            }
            Some(p) if p.as_str().eq_ignore_ascii_case("websocket") => {}
            Some(_) => {
                return Err((
                    501,
                    "extended CONNECT: only the websocket protocol is supported",
                ));
            }
        }
    }
    let method = if websocket {
        "GET"
    } else {
        parts.method.as_str()
    };
    let target = parts.uri.path_and_query().map_or("", |p| p.as_str());
    if target.len() > ctx.limits.max_uri_bytes {
        return Err((414, "request target too long"));
    }
    let (path, query) = path_and_query(method, target).map_err(|m| (400, m))?;
    let bytes: usize = parts
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len())
        .sum();
    let mut headers = Headers::with_capacity(parts.headers.len() + 1, bytes + 64);
    let authority = parts.uri.authority().map(|a| a.as_str());
    if let Some(a) = authority {
        if !valid_host(a.as_bytes(), true) {
            return Err((400, "invalid :authority"));
        }
        headers.push("host", a);
    }
    // RFC 9113 §8.2.3: cookie crumbs are joined again before going to HTTP/1.1 (one Cookie header, where the
    // first crumb was)
    // (where the first crumb is, and the rest, each after "; ")
    let mut cookie: Option<(usize, Vec<u8>)> = None;
    let mut host = authority.is_some();
    for (name, value) in &parts.headers {
        let raw = value.as_bytes();
        // RFC 9113 §8.2.1: a value with NUL, CR or LF is malformed (and could split a header forwarded over
        // HTTP/1); h2 leaves the check to the application.
        if raw.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n') {
            return Err((400, "invalid header value"));
        }
        let raw = ordo_http1::trim_ows(raw);
        if name == header::HOST {
            match authority {
                Some(a) if !a.as_bytes().eq_ignore_ascii_case(raw) => {
                    return Err((400, "Host differs from :authority"));
                }
                Some(_) => continue,
                None if !valid_host(raw, true) => {
                    return Err((400, "invalid Host"));
                }
                None => host = true,
            }
        }
        if name == header::COOKIE {
            match &mut cookie {
                Some((_, more)) => {
                    more.extend_from_slice(b"; ");
                    more.extend_from_slice(raw);
                    continue;
                }
                None => cookie = Some((headers.len(), Vec::new())),
            }
        }
        headers.push_bytes(name.as_str().as_bytes(), raw);
    }
    if !host {
        return Err((400, "missing :authority"));
    }
    if websocket {
        // (h2 refuses a stream that sends either field itself: these can only be ordo's)
        headers.push("connection", "upgrade");
        headers.push("upgrade", "websocket");
    }
    if let Some((i, more)) = cookie.filter(|(_, more)| !more.is_empty()) {
        let mut joined: Vec<u8> = headers
            .iter_raw()
            .nth(i)
            .map(|(_, v, _)| v.to_vec())
            .unwrap_or_default();
        joined.extend_from_slice(&more);
        headers.set_value_bytes(i, &joined);
    }
    Ok(Request {
        method: crate::http::parse::method_name(method),
        target: crate::http::Target::Owned(target.to_string()),
        path,
        query,
        version: Version::Http2,
        headers,
        body: Bytes::new(),
        peer: ctx.peer,
        keep_alive: true,
        tls: ctx.tls.clone(),
        trusted_peer: false,
        request_id: None,
    })
}

enum BodyError {
    TooLarge,
    TimedOut,
    Stream(Stop),
}

/// Reads a request body whole (at most `max` bytes), giving each piece's window back as it is read.
async fn read_body(body: &mut RecvStream, max: u64, gap: Duration) -> Result<Bytes, BodyError> {
    let mut out = BytesMut::new();
    loop {
        let next = match tokio::time::timeout(gap, body.data()).await {
            Err(_) => return Err(BodyError::TimedOut),
            Ok(None) => return Ok(out.freeze()),
            Ok(Some(Err(e))) => return Err(BodyError::Stream(stop_of(&e))),
            Ok(Some(Ok(b))) => b,
        };
        let _ = body.flow_control().release_capacity(next.len());
        if out.len() as u64 + next.len() as u64 > max {
            return Err(BodyError::TooLarge);
        }
        if out.is_empty() && body.is_end_stream() {
            return Ok(next);
        }
        out.extend_from_slice(&next);
    }
}

/// Header fields HTTP/2 forbids (RFC 9113 §8.2.2) or ordo writes itself.
fn dropped(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
        b"te",
        b"date",
        b"server",
    ]
    .iter()
    .any(|d| name.eq_ignore_ascii_case(d))
}

fn add(map: &mut HeaderMap, name: &[u8], value: &[u8]) {
    if let Some((n, v)) = field(name, value) {
        map.append(n, v);
    }
}

/// A response header field as HTTP/2 sends it: names lower-cased by `from_bytes`; invalid names and values,
/// and the fields of [`dropped`], are left out (as HTTP/1 does).
pub(super) fn field(name: &[u8], value: &[u8]) -> Option<(HeaderName, HeaderValue)> {
    if dropped(name) {
        return None;
    }
    Some((
        HeaderName::from_bytes(name).ok()?,
        HeaderValue::from_bytes(value).ok()?,
    ))
}

/// Header blocks a connection has parsed lately (`Body::Prerendered` heads: the static cache renders each
/// file's Content-Type, ETag, Last-Modified once, and a page's responses repeat a few of them).
const HEADS_KEPT: usize = 8;

/// What `head_of` keeps per connection so that a response's fields are not parsed and copied again each
/// time: the prerendered header blocks it has seen lately, and the Date of the current second.
#[derive(Default)]
pub(crate) struct HeadCache {
    date: Option<([u8; 29], HeaderValue)>,
    /// Most recently used last.
    heads: Vec<(Bytes, Vec<(HeaderName, HeaderValue)>)>,
}

impl HeadCache {
    fn date(&mut self) -> Option<HeaderValue> {
        date::with_date(|d| {
            if let Some((b, v)) = &self.date {
                if b[..] == *d {
                    return Some(v.clone());
                }
            }
            let v = HeaderValue::from_bytes(d).ok()?;
            if let Ok(b) = <[u8; 29]>::try_from(d) {
                self.date = Some((b, v.clone()));
            }
            Some(v)
        })
    }

    /// The fields of a prerendered header block (lines `name: value` ending in CRLF).
    fn fields(&mut self, head: &Bytes) -> &[(HeaderName, HeaderValue)] {
        let i = match self.heads.iter().position(|(h, _)| h == head) {
            Some(i) => i,
            None => {
                let mut fields = Vec::new();
                for line in head.split(|&b| b == b'\n') {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if let Some(i) = line.iter().position(|&b| b == b':') {
                        let value = ordo_http1::trim_ows(&line[i + 1..]);
                        fields.extend(field(&line[..i], value));
                    }
                }
                if self.heads.len() == HEADS_KEPT {
                    self.heads.remove(0);
                }
                self.heads.push((head.clone(), fields));
                self.heads.len() - 1
            }
        };
        let last = self.heads.len() - 1;
        if i != last {
            let e = self.heads.remove(i);
            self.heads.push(e);
        }
        &self.heads[last].1
    }
}

/// The HEADERS of `resp`: its status, `server`, `date`, the handler's fields and `content-length` when the
/// body's length is known.
fn head_of(resp: &Response, head_request: bool, cache: &Mutex<HeadCache>) -> http::Response<()> {
    let status = http::StatusCode::from_u16(resp.status)
        .ok()
        .filter(|s| !s.is_informational())
        .unwrap_or(http::StatusCode::BAD_GATEWAY);
    let mut out = http::Response::new(());
    *out.status_mut() = status;
    let map = out.headers_mut();
    map.reserve(resp.headers.len() + 8);
    map.insert(header::SERVER, HeaderValue::from_static("ordo"));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(v) = cache.date() {
        map.insert(header::DATE, v);
    }
    let no_body_status = status == http::StatusCode::NO_CONTENT || status.as_u16() == 304;
    let keep_handler_length = head_request || status.as_u16() == 304;
    let mut handler_length = false;
    for (k, v) in &resp.headers {
        if k.eq_ignore_ascii_case("content-length") {
            if !keep_handler_length || handler_length {
                continue;
            }
            handler_length = true;
        }
        add(map, k.as_bytes(), v.as_bytes());
    }
    if let Body::Prerendered { head, .. } | Body::PrerenderedStream { head, .. } = &resp.body {
        for (n, v) in cache.fields(head) {
            map.append(n.clone(), v.clone());
        }
    }
    drop(cache);
    if !no_body_status && !handler_length {
        if let Some(n) = resp.body.len() {
            map.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    out
}

/// Whether a response's body is all in memory, so sending it never waits (h2 holds it and sends it as the
/// client's windows open).
fn in_memory(body: &Body) -> bool {
    matches!(
        body,
        Body::Empty | Body::Bytes(_) | Body::Prerendered { .. }
    )
}

/// What is left of a body in memory that the client's window did not take at once: sent by
/// [`send_rest`] as the window opens, counted meanwhile in the connection's held bytes.
pub(super) struct Rest {
    stream: SendStream<Bytes>,
    data: Bytes,
    hold: super::Hold,
}

/// Sends a response whose body is [`in_memory`]: HEADERS and as much of the body as the client's window
/// takes now are queued in h2 (all of it, usually); the rest (a zero-window client, a body larger than the
/// window) is returned, held, for [`send_rest`] — so h2 never buffers more than the windows allow.
fn send_now<H>(
    respond: &mut SendResponse<Bytes>,
    resp: Response,
    head_request: bool,
    ctx: &ConnCtx<H>,
) -> Result<Option<Rest>, Stop> {
    debug_assert!(in_memory(&resp.body));
    let head = head_of(&resp, head_request, &ctx.heads);
    let status = head.status().as_u16();
    let bodyless = head_request || status == 204 || status == 304 || resp.body.is_empty();
    if bodyless {
        respond.send_response(head, true).map_err(|e| stop_of(&e))?;
        return Ok(None);
    }
    let mut stream = respond
        .send_response(head, false)
        .map_err(|e| stop_of(&e))?;
    let mut data = match resp.body {
        Body::Bytes(b) | Body::Prerendered { body: b, .. } => b,
        _ => Bytes::new(),
    };
    // what the window takes now goes to h2 at once (no copy); h2 assigns capacity synchronously
    stream.reserve_capacity(data.len());
    let now = stream.capacity().min(data.len());
    let r = if now == data.len() {
        stream.send_data(data, true).map_err(|e| stop_of(&e))
    } else {
        let first = data.split_to(now);
        let r = if first.is_empty() {
            Ok(())
        } else {
            stream.send_data(first, false).map_err(|e| stop_of(&e))
        };
        if r.is_ok() {
            let hold = ctx.buffered.hold(data.len());
            return Ok(Some(Rest { stream, data, hold }));
        }
        r
    };
    if let Err(Stop::Failed) = r {
        stream.send_reset(Reason::INTERNAL_ERROR);
    }
    r.map(|()| None)
}

/// Sends the [`Rest`] of a body as the client's window opens (each wait bounded by `limit`), letting the
/// held bytes go as they are handed to h2.
async fn send_rest(rest: Rest, limit: Duration) -> Result<(), Stop> {
    let Rest {
        mut stream,
        mut data,
        mut hold,
    } = rest;
    let r = async {
        while !data.is_empty() {
            let n = capacity(&mut stream, data.len(), limit).await?;
            let piece = data.split_to(n.min(data.len()));
            hold.release(piece.len());
            stream
                .send_data(piece, data.is_empty())
                .map_err(|e| stop_of(&e))?;
        }
        Ok(())
    }
    .await;
    if let Err(Stop::Failed) = r {
        stream.send_reset(Reason::INTERNAL_ERROR);
    }
    r
}

/// Sends `resp` on the stream: HEADERS, then the body in DATA frames as the client's windows allow. Each
/// wait for window is bounded by `idle_timeout` (then the stream is reset).
pub(super) async fn send<H>(
    respond: &mut SendResponse<Bytes>,
    resp: Response,
    head_request: bool,
    ctx: &ConnCtx<H>,
) -> Result<(), Stop> {
    if in_memory(&resp.body) {
        return match send_now(respond, resp, head_request, ctx)? {
            None => Ok(()),
            Some(rest) => send_rest(rest, ctx.limits.idle_timeout).await,
        };
    }
    let write_timeout = ctx.limits.idle_timeout;
    let head = head_of(&resp, head_request, &ctx.heads);
    let status = head.status().as_u16();
    let bodyless = head_request || status == 204 || status == 304 || resp.body.is_empty();
    if bodyless {
        respond.send_response(head, true).map_err(|e| stop_of(&e))?;
        return Ok(());
    }
    let mut stream = respond
        .send_response(head, false)
        .map_err(|e| stop_of(&e))?;
    let r = match resp.body {
        Body::File { file, offset, len } => {
            send_file(&mut stream, file, offset, len, write_timeout).await
        }
        Body::Stream { rx, len } | Body::PrerenderedStream { rx, len, .. } => {
            send_stream(&mut stream, rx, len, write_timeout, &ctx.buffered).await
        }
        // in memory: sent above
        Body::Empty | Body::Bytes(_) | Body::Prerendered { .. } => Ok(()),
        // an HTTP/1.1 protocol switch cannot happen on a stream (RFC 9113 §8.6)
        Body::Upgrade { .. } => Err(Stop::Failed),
    };
    if let Err(Stop::Failed) = r {
        stream.send_reset(Reason::INTERNAL_ERROR);
    }
    r
}

/// Waits until the stream may send at least one byte (at most `want` are reserved).
async fn capacity(
    stream: &mut SendStream<Bytes>,
    want: usize,
    limit: Duration,
) -> Result<usize, Stop> {
    stream.reserve_capacity(want);
    loop {
        match tokio::time::timeout(limit, poll_fn(|cx| stream.poll_capacity(cx))).await {
            Err(_) => {
                tracing::debug!("HTTP/2 client gave no window in time; stream reset");
                return Err(Stop::Failed);
            }
            Ok(None) => return Err(Stop::Failed),
            Ok(Some(Err(e))) => return Err(stop_of(&e)),
            Ok(Some(Ok(0))) => {}
            Ok(Some(Ok(n))) => return Ok(n),
        }
    }
}

/// Sends `data` (not the end of the body) as the windows open.
async fn send_piece(
    stream: &mut SendStream<Bytes>,
    mut data: Bytes,
    limit: Duration,
) -> Result<(), Stop> {
    while !data.is_empty() {
        let n = capacity(stream, data.len(), limit).await?;
        let piece = data.split_to(n.min(data.len()));
        stream.send_data(piece, false).map_err(|e| stop_of(&e))?;
    }
    Ok(())
}

async fn send_file(
    stream: &mut SendStream<Bytes>,
    file: std::fs::File,
    offset: u64,
    len: u64,
    limit: Duration,
) -> Result<(), Stop> {
    let mut f = tokio::fs::File::from_std(file);
    if offset > 0 && f.seek(io::SeekFrom::Start(offset)).await.is_err() {
        return Err(Stop::Failed);
    }
    let mut left = len;
    while left > 0 {
        let want = left.min(FILE_CHUNK as u64) as usize;
        let n = capacity(stream, want, limit).await?.min(want);
        let mut buf = BytesMut::with_capacity(n);
        while buf.len() < n {
            match (&mut f)
                .take((n - buf.len()) as u64)
                .read_buf(&mut buf)
                .await
            {
                Ok(0) | Err(_) => return Err(Stop::Failed), // shorter than announced
                Ok(_) => {}
            }
        }
        left -= n as u64;
        stream
            .send_data(buf.freeze(), left == 0)
            .map_err(|e| stop_of(&e))?;
    }
    Ok(())
}

async fn send_stream(
    stream: &mut SendStream<Bytes>,
    mut rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
    len: Option<u64>,
    limit: Duration,
    buffered: &Arc<super::Buffered>,
) -> Result<(), Stop> {
    let mut sent: u64 = 0;
    while let Some(chunk) = rx.recv().await {
        let chunk = chunk.map_err(|_| Stop::Failed)?;
        sent += chunk.len() as u64;
        if len.is_some_and(|l| sent > l) {
            tracing::debug!("response stream longer than its Content-Length; stream reset");
            return Err(Stop::Failed);
        }
        // held until the window has taken it; meanwhile the backend's channel fills and it stops reading
        let _held = buffered.hold(chunk.len());
        send_piece(stream, chunk, limit).await?;
    }
    if len.is_some_and(|l| sent != l) {
        tracing::debug!("response stream shorter than its Content-Length; stream reset");
        return Err(Stop::Failed);
    }
    stream
        .send_data(Bytes::new(), true)
        .map_err(|e| stop_of(&e))
}
