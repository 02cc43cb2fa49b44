//! HTTP/2 for `ordo bench --h2` (over TLS, ALPN `h2`) and `--h2c` (cleartext with prior knowledge), with
//! the `h2` crate's client. A connection carries `streams` clients at once (h2load's `-m`), all driven by
//! one task: it takes each client's slots with the engine's pieces (`ClientState`, `begin`, `record` —
//! classes, open or closed pacing, recording), keeps up to `streams` requests in flight as streams of the
//! connection, and polls only the streams whose waker fired. No task, timer or clock read per request: one
//! clock read per pass over the connection, one timer for the request timeouts and one for think times and
//! open-loop dues. A connection that fails is opened again for the first request that needs it; the others
//! wait for it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::Pacing;
use crate::engine::{ClientState, Ctx, Exchanged, Plan, Protocol, Slot, begin, record};
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
            let s = tls.handshake(ReadAhead::new(tcp)).await.ok()?;
            let (send, conn) = b.handshake(s).await.ok()?;
            Some((send, tokio::task::spawn_local(conn).abort_handle()))
        }
        None => {
            let (send, conn) = b.handshake(tcp).await.ok()?;
            Some((send, tokio::task::spawn_local(conn).abort_handle()))
        }
    }
}

/// The socket under a TLS connection, read in large pieces: rustls asks for about 4 KiB per read, which
/// with many small responses on one connection is a `read` syscall every other response. This reads up to
/// `READ_AHEAD` bytes at once and hands them out from memory. Writes go straight through.
struct ReadAhead {
    io: TcpStream,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

const READ_AHEAD: usize = 64 * 1024;

impl ReadAhead {
    fn new(io: TcpStream) -> ReadAhead {
        ReadAhead {
            io,
            buf: vec![0u8; READ_AHEAD].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if me.start == me.end {
            let mut rb = ReadBuf::new(&mut me.buf);
            std::task::ready!(Pin::new(&mut me.io).poll_read(cx, &mut rb))?;
            me.start = 0;
            me.end = rb.filled().len();
        }
        let n = (me.end - me.start).min(out.remaining());
        out.put_slice(&me.buf[me.start..me.start + n]);
        me.start += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ReadAhead {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
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

/// Received body bytes a stream hands back to the flow-control windows in one go; the rest is handed back
/// by h2 when the finished stream is dropped.
const RELEASE_AT: usize = 1 << 20;

impl Protocol for H2Plan {
    fn connection(self: Arc<Self>, ctx: Ctx, j: usize) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(connection(self, ctx, j))
    }
}

/// One HTTP/2 connection (connection `j`) and its `streams` clients, all driven by this one task (the h2
/// connection's I/O runs in a task of its own); aborting this task aborts them and the connection.
async fn connection(h2: Arc<H2Plan>, ctx: Ctx, j: usize) {
    let mut c = Driver::new(h2, ctx, j);
    loop {
        match std::future::poll_fn(|cx| c.poll_pass(cx)).await {
            Need::Done => break,
            Need::Connect => c.connect_front().await,
        }
    }
}

/// The open connection: the sender of new streams and its generation (a stream that saw an older one fail
/// does not drop a newer one).
struct Open {
    send: SendRequest<Bytes>,
    generation: u64,
    driver: tokio::task::AbortHandle,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Which streams were woken since the connection task last looked: a stream's waker puts it on the list
/// (once: its flag says it is there) and wakes the task, which takes the whole list in one go.
struct Woken {
    flags: Box<[AtomicBool]>,
    inner: Mutex<WokenList>,
}

struct WokenList {
    task: Option<Waker>,
    ready: Vec<usize>,
}

/// The waker h2 keeps for stream `s` (one per stream, reused by all its requests).
struct StreamWaker {
    woken: Arc<Woken>,
    s: usize,
}

impl Wake for StreamWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.woken.flags[self.s].swap(true, Ordering::AcqRel) {
            return;
        }
        let mut list = self.woken.inner.lock().unwrap_or_else(|e| e.into_inner());
        list.ready.push(self.s);
        if let Some(w) = list.task.as_ref() {
            w.wake_by_ref();
        }
    }
}

/// Where a stream-client is.
enum Phase {
    /// Takes its next slot.
    Free,
    /// In `waits`: thinking (closed loop, no request), or its open-loop request is not due yet.
    Waiting,
    /// In `queue`: its request waits for the connection or for h2 to accept a new stream.
    Queued,
    /// Sent; the response head has not come.
    Head(h2::client::ResponseFuture),
    /// Reading the response body.
    Body {
        body: h2::RecvStream,
        status: u16,
        head_bytes: u64,
        first_byte: Instant,
        bytes: u64,
        unreleased: usize,
    },
    /// Done for the run.
    Stopped,
}

/// The request a stream-client is making.
struct Req {
    slot: Slot,
    /// When it started (latency counts from here; the timeout too).
    t_start: Instant,
    /// Connections it opened, and when (connect started, connected) for the attempt that opened one.
    opened: u64,
    connected: Option<(Instant, Instant)>,
    /// A reused connection failed under it and it was sent again (once at most).
    retried: bool,
    /// The connection it was sent on, when, and its body's sender.
    generation: u64,
    sent: Instant,
    body_tx: Option<h2::SendStream<Bytes>>,
}

struct Client {
    state: ClientState,
    phase: Phase,
    req: Option<Req>,
}

/// What the connection task must await outside a pass.
enum Need {
    /// A request is queued and there is no connection.
    Connect,
    /// Every stream-client is done.
    Done,
}

/// The state of one connection's task: its stream-clients, the connection, and the timers (one for the
/// earliest think or open-loop due, one for the request timeouts; neither per request).
struct Driver {
    h2: Arc<H2Plan>,
    ctx: Ctx,
    clients: Vec<Client>,
    wakers: Vec<Waker>,
    woken: Arc<Woken>,
    /// The woken list's other buffer (swapped with it each round), and the streams sent this round.
    ready: Vec<usize>,
    sent: Vec<usize>,
    open: Option<Open>,
    generation: u64,
    /// Clients to take a slot.
    free: Vec<usize>,
    /// Clients whose request waits to be sent, in order.
    queue: VecDeque<usize>,
    /// (until, client) of the Waiting ones.
    waits: BinaryHeap<Reverse<(Instant, usize)>>,
    wait_timer: Pin<Box<tokio::time::Sleep>>,
    wait_armed: Option<Instant>,
    /// Armed at or before the earliest timeout of a request in progress (`None`: none in progress).
    deadline_timer: Pin<Box<tokio::time::Sleep>>,
    deadline_armed: Option<Instant>,
    /// The `server` header seen first.
    server: Option<String>,
    stopped: usize,
}

impl Driver {
    fn new(h2: Arc<H2Plan>, ctx: Ctx, j: usize) -> Driver {
        let n = h2.streams;
        let woken = Arc::new(Woken {
            flags: (0..n).map(|_| AtomicBool::new(false)).collect(),
            inner: Mutex::new(WokenList {
                task: None,
                ready: Vec::with_capacity(n),
            }),
        });
        let wakers = (0..n)
            .map(|s| {
                Waker::from(Arc::new(StreamWaker {
                    woken: woken.clone(),
                    s,
                }))
            })
            .collect();
        let clients = (0..n)
            .map(|s| Client {
                state: ClientState::new(&ctx.plan, j * n + s),
                phase: Phase::Free,
                req: None,
            })
            .collect();
        let far = tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
        Driver {
            h2,
            ctx,
            clients,
            wakers,
            woken,
            ready: Vec::with_capacity(n),
            sent: Vec::with_capacity(n),
            open: None,
            generation: 0,
            free: (0..n).rev().collect(),
            queue: VecDeque::with_capacity(n),
            waits: BinaryHeap::with_capacity(n),
            wait_timer: Box::pin(tokio::time::sleep_until(far)),
            wait_armed: None,
            deadline_timer: Box::pin(tokio::time::sleep_until(far)),
            deadline_armed: None,
            server: None,
            stopped: 0,
        }
    }

    /// One pass over the connection's clients: responses that came, timeouts, due requests, new slots,
    /// sends. One clock read per round serves every request it starts or ends.
    fn poll_pass(&mut self, cx: &mut Context<'_>) -> Poll<Need> {
        let plan = self.ctx.plan.clone();
        let mut ready = std::mem::take(&mut self.ready);
        loop {
            {
                let mut list = self.woken.inner.lock().unwrap_or_else(|e| e.into_inner());
                if !list.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    list.task = Some(cx.waker().clone());
                }
                std::mem::swap(&mut list.ready, &mut ready);
            }
            let now = Instant::now();
            // 1. Streams whose response (or its end) came, and those just sent (polled once to leave
            // their waker with h2).
            ready.append(&mut self.sent);
            for &s in &ready {
                self.woken.flags[s].store(false, Ordering::Release);
            }
            for s in ready.drain(..) {
                self.poll_stream(s, now);
            }
            // 2. Requests past their timeout.
            if self.deadline_armed.is_some_and(|d| d <= now) {
                self.expire(now);
            }
            // 3. Think times over, open-loop requests due.
            while let Some(&Reverse((until, s))) = self.waits.peek() {
                if until > now {
                    break;
                }
                self.waits.pop();
                match self.clients[s].req.as_mut() {
                    Some(req) => {
                        req.t_start = now;
                        begin(&plan, &req.slot);
                        self.enqueue(s, now);
                    }
                    None => {
                        self.clients[s].phase = Phase::Free;
                        self.free.push(s);
                    }
                }
            }
            // 4. New slots.
            while let Some(s) = self.free.pop() {
                let c = &mut self.clients[s];
                let Some(taken) = c.state.take(&plan, now) else {
                    c.phase = Phase::Stopped;
                    self.stopped += 1;
                    continue;
                };
                c.req = Some(Req {
                    slot: taken.slot,
                    t_start: now,
                    opened: 0,
                    connected: None,
                    retried: false,
                    generation: 0,
                    sent: now,
                    body_tx: None,
                });
                match taken.wait_until {
                    Some(until) => {
                        c.phase = Phase::Waiting;
                        self.waits.push(Reverse((until, s)));
                    }
                    None => {
                        begin(&plan, &taken.slot);
                        self.enqueue(s, now);
                    }
                }
            }
            // 5. Sends.
            while let Some(&s) = self.queue.front() {
                let Some(open) = self.open.as_mut() else {
                    self.ready = ready;
                    return Poll::Ready(Need::Connect);
                };
                let generation = open.generation;
                match open.send.poll_ready(cx) {
                    Poll::Pending => break,
                    Poll::Ready(Err(_)) => {
                        self.queue.pop_front();
                        self.fail(s, FailKind::Exception, generation, now);
                    }
                    Poll::Ready(Ok(())) => {
                        self.queue.pop_front();
                        let req = self.clients[s]
                            .req
                            .as_mut()
                            .expect("a queued client has a request");
                        let template = &self.h2.requests[req.slot.class][req.slot.url];
                        match open
                            .send
                            .send_request(template.build(), template.body.is_none())
                        {
                            Ok((response, mut body_tx)) => {
                                if let Some(b) = &template.body {
                                    // h2 sends it as the server's windows allow
                                    let _ = body_tx.send_data(b.clone(), true);
                                }
                                req.generation = generation;
                                req.sent = now;
                                req.body_tx = Some(body_tx);
                                self.clients[s].phase = Phase::Head(response);
                                self.sent.push(s);
                            }
                            Err(_) => self.fail(s, FailKind::Exception, generation, now),
                        }
                    }
                }
            }
            if self.stopped == self.clients.len() {
                self.ready = ready;
                return Poll::Ready(Need::Done);
            }
            if !self.sent.is_empty() || !self.free.is_empty() {
                continue;
            }
            // 6. Nothing more to do now: the timers.
            if let Some(&Reverse((until, _))) = self.waits.peek() {
                if self.wait_armed != Some(until) {
                    self.wait_timer.as_mut().reset(until.into());
                    self.wait_armed = Some(until);
                }
                if self.wait_timer.as_mut().poll(cx).is_ready() {
                    // (re-armed next round unless what it was set for is done)
                    self.wait_armed = None;
                    continue;
                }
            }
            if self.deadline_armed.is_some() && self.deadline_timer.as_mut().poll(cx).is_ready() {
                // expire re-arms it (or leaves it unarmed), so a fired timer is never polled again
                self.expire(Instant::now());
                continue;
            }
            self.ready = ready;
            return Poll::Pending;
        }
    }

    /// Queues client `s`'s request for sending; its timeout is covered by the deadline timer.
    fn enqueue(&mut self, s: usize, now: Instant) {
        self.clients[s].phase = Phase::Queued;
        self.queue.push_back(s);
        if self.deadline_armed.is_none() {
            let t_start = self.clients[s].req.as_ref().map_or(now, |r| r.t_start);
            self.arm_deadline(t_start + self.ctx.plan.timeout);
        }
    }

    fn arm_deadline(&mut self, at: Instant) {
        self.deadline_timer.as_mut().reset(at.into());
        self.deadline_armed = Some(at);
    }

    /// The timeout timer fired: requests past their timeout fail (their streams are reset as they are
    /// dropped; the connection stays), and the timer moves to the earliest remaining one.
    fn expire(&mut self, now: Instant) {
        let timeout = self.ctx.plan.timeout;
        let mut next: Option<Instant> = None;
        for s in 0..self.clients.len() {
            let c = &self.clients[s];
            if !matches!(c.phase, Phase::Queued | Phase::Head(_) | Phase::Body { .. }) {
                continue;
            }
            let Some(req) = &c.req else { continue };
            let d = req.t_start + timeout;
            if d > now {
                next = Some(next.map_or(d, |n| n.min(d)));
                continue;
            }
            if matches!(c.phase, Phase::Queued) {
                self.queue.retain(|&q| q != s);
            }
            self.finish(s, Err(FailKind::Timeout), now);
        }
        match next {
            Some(d) => self.arm_deadline(d),
            None => self.deadline_armed = None,
        }
    }

    /// Polls stream `s` (its waker fired): the response head, then the body to its end.
    fn poll_stream(&mut self, s: usize, now: Instant) {
        let waker = &self.wakers[s];
        let mut cx = Context::from_waker(waker);
        loop {
            let c = &mut self.clients[s];
            let generation = c.req.as_ref().map_or(0, |r| r.generation);
            match &mut c.phase {
                Phase::Head(response) => match Pin::new(response).poll(&mut cx) {
                    Poll::Pending => return,
                    Poll::Ready(Ok(resp)) => {
                        let (parts, body) = resp.into_parts();
                        if self.server.is_none() {
                            self.server = (parts.headers.get(http::header::SERVER))
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned);
                        }
                        let status = parts.status.as_u16();
                        let head_bytes = head_size(&parts);
                        if body.is_end_stream() {
                            self.complete(s, status, head_bytes, 0, now, now);
                            return;
                        }
                        c.phase = Phase::Body {
                            body,
                            status,
                            head_bytes,
                            first_byte: now,
                            bytes: 0,
                            unreleased: 0,
                        };
                    }
                    Poll::Ready(Err(e)) => {
                        // refused before the server looked at it: safe to send again
                        if e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM) {
                            self.fail(s, FailKind::Receive, generation, now);
                        } else {
                            if e.is_io() {
                                self.failed(generation);
                            }
                            self.finish(s, Err(FailKind::Receive), now);
                        }
                        return;
                    }
                },
                Phase::Body {
                    body,
                    status,
                    head_bytes,
                    first_byte,
                    bytes,
                    unreleased,
                } => match body.poll_data(&mut cx) {
                    Poll::Pending => return,
                    Poll::Ready(Some(Ok(chunk))) => {
                        *bytes += chunk.len() as u64;
                        *unreleased += chunk.len();
                        if *unreleased >= RELEASE_AT {
                            let _ = body.flow_control().release_capacity(*unreleased);
                            *unreleased = 0;
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        if e.is_io() || e.is_go_away() {
                            self.failed(generation);
                        }
                        self.finish(s, Err(FailKind::Length), now);
                        return;
                    }
                    Poll::Ready(None) => {
                        // dropping the finished stream hands its unreleased bytes back to the connection
                        let (status, head_bytes, bytes, first_byte) =
                            (*status, *head_bytes, *bytes, *first_byte);
                        self.complete(s, status, head_bytes, bytes, first_byte, now);
                        return;
                    }
                },
                _ => return,
            }
        }
    }

    /// Stream `s` got its whole response.
    fn complete(
        &mut self,
        s: usize,
        status: u16,
        head_bytes: u64,
        body_bytes: u64,
        first_byte: Instant,
        now: Instant,
    ) {
        let Some(req) = self.clients[s].req.as_ref() else {
            return;
        };
        let x = Exchanged {
            info: ResponseInfo {
                status,
                head_bytes,
                body_bytes,
                content_bytes: body_bytes,
                close: false,
            },
            connected: req.connected,
            sent: req.sent,
            first_byte: Some(first_byte),
        };
        self.finish(s, Ok(x), now);
    }

    /// Client `s`'s request ended at `now`: recorded; the client thinks (closed loop) or takes its next slot.
    fn finish(&mut self, s: usize, res: Result<Exchanged, FailKind>, now: Instant) {
        let c = &mut self.clients[s];
        let Some(req) = c.req.take() else { return };
        c.phase = Phase::Free;
        record(
            &self.ctx,
            &req.slot,
            res,
            req.opened,
            (req.t_start, now),
            self.server.as_deref(),
        );
        let plan = &*self.ctx.plan;
        let think = plan.classes[req.slot.class].think;
        if !think.is_zero() && plan.pacing == Pacing::Closed {
            c.phase = Phase::Waiting;
            self.waits.push(Reverse((now + think, s)));
        } else {
            self.free.push(s);
        }
    }

    /// Client `s`'s request failed with `kind` in a way that says connection `generation` is broken: the
    /// connection is dropped, and a request that did not open it is sent once more on a new one (the
    /// server may close a connection at any time, or refuse a stream it did not look at).
    fn fail(&mut self, s: usize, kind: FailKind, generation: u64, now: Instant) {
        self.failed(generation);
        let c = &mut self.clients[s];
        let Some(req) = c.req.as_mut() else { return };
        if req.connected.is_none() && !req.retried {
            req.retried = true;
            req.body_tx = None;
            c.phase = Phase::Queued;
            self.queue.push_front(s);
        } else {
            self.finish(s, Err(kind), now);
        }
    }

    /// Drops connection `generation` (it failed), unless a newer one replaced it already.
    fn failed(&mut self, generation: u64) {
        if self
            .open
            .as_ref()
            .is_some_and(|o| o.generation == generation)
        {
            self.open = None;
        }
    }

    /// Opens the connection for the first queued request (which counts it), or fails that request.
    async fn connect_front(&mut self) {
        let Some(&s) = self.queue.front() else { return };
        let plan = self.ctx.plan.clone();
        let t0 = Instant::now();
        match tokio::time::timeout(plan.connect_timeout, connect(&plan)).await {
            Ok(Some((send, driver))) => {
                let t1 = Instant::now();
                self.generation += 1;
                self.open = Some(Open {
                    send,
                    generation: self.generation,
                    driver,
                });
                if let Some(req) = self.clients[s].req.as_mut() {
                    req.opened += 1;
                    req.connected = Some((t0, t1));
                }
            }
            _ => {
                self.queue.pop_front();
                self.finish(s, Err(FailKind::Connect), Instant::now());
            }
        }
    }
}
