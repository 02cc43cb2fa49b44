//! HTTP/2 for `ordo bench --h2` (over TLS, ALPN `h2`) and `--h2c` (cleartext with prior knowledge). A
//! connection carries `streams` clients at once (h2load's `-m`), all driven by one task that also does the
//! connection's I/O: it reads what came, hands it to the connection's state machine (ordo-h2client's
//! sans-IO [`Conn`], which parses frames and decodes header blocks with its HPACK decoder), acts on the
//! events it returns, takes each client's slots
//! with the engine's pieces (`ClientState`, `begin`, `record` — classes, open or closed pacing, recording),
//! opens streams with the header block its class encoded once, and writes what the state machine queued.
//! No task, timer or clock read per request: one clock read per pass, one timer for the request timeouts
//! and one for think times and open-loop dues. A connection that fails is opened again for the first
//! request that needs it; the others wait for it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::Pacing;
use crate::engine::{ClientState, Ctx, Exchanged, Plan, Protocol, Slot, begin, record};
use ordo_h2client::hpack::{self, Encoder, Numbering, Template};
use ordo_h2client::{Conn, Event, StreamFail};

use crate::http::ResponseInfo;
use crate::stats::FailKind;
use crate::target::{Header, Target};

/// One request of a class, ready to be sent as a stream: its fields for the HPACK encoder (which sends them
/// as literals the first time on a connection, then as dynamic-table indices: the same bytes every time).
#[derive(Debug)]
pub(crate) struct H2Request {
    template: Template,
    body: Option<Bytes>,
    /// The method is HEAD (the response's content-length describes no body).
    head: bool,
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
        let path: http::uri::PathAndQuery = target
            .path
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        let authority: http::uri::Authority = target
            .host_header()
            .parse()
            .map_err(|e: http::uri::InvalidUri| e.to_string())?;
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b":method".to_vec(), method.as_str().as_bytes().to_vec()),
            (b":scheme".to_vec(), target.scheme().as_bytes().to_vec()),
            (b":path".to_vec(), path.as_str().as_bytes().to_vec()),
            (
                b":authority".to_vec(),
                authority.as_str().as_bytes().to_vec(),
            ),
        ];
        let has = |n: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(n));
        if !has("user-agent") {
            fields.push((
                b"user-agent".to_vec(),
                concat!("ordo-bench/", env!("CARGO_PKG_VERSION"))
                    .as_bytes()
                    .to_vec(),
            ));
        }
        if !has("accept") {
            fields.push((b"accept".to_vec(), b"*/*".to_vec()));
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
            let name = http::HeaderName::from_bytes(lower.as_bytes()).map_err(|e| e.to_string())?;
            let value = http::HeaderValue::from_str(&h.value).map_err(|e| e.to_string())?;
            fields.push((name.as_str().as_bytes().to_vec(), value.as_bytes().to_vec()));
        }
        if !cookies.is_empty() {
            let line: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let value = http::HeaderValue::from_str(&line.join("; ")).map_err(|e| e.to_string())?;
            fields.push((b"cookie".to_vec(), value.as_bytes().to_vec()));
        }
        let refs: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
            .collect();
        Ok(H2Request {
            template: Template::new(&refs),
            body: body.cloned(),
            head: method == http::Method::HEAD,
        })
    }
}

/// What an HTTP/2 run adds to the plan.
#[derive(Debug)]
pub(crate) struct H2Plan {
    /// Per class, per URL.
    requests: Vec<Vec<H2Request>>,
    /// Concurrent streams (clients) per connection.
    streams: usize,
    /// The templates numbered for every connection's HPACK encoder.
    numbering: Numbering,
}

impl H2Plan {
    /// The plan for `requests` (per class, per URL) with `streams` streams per connection, their
    /// templates numbered for the encoders.
    pub(crate) fn new(mut requests: Vec<Vec<H2Request>>, streams: usize) -> H2Plan {
        let numbering = hpack::number(requests.iter_mut().flatten().map(|r| &mut r.template));
        H2Plan {
            requests,
            streams,
            numbering,
        }
    }
}

/// Receive windows, as h2load's defaults: the client never holds the server back (2^30 - 1 per stream and
/// for the connection; credit is handed back when half of it is used).
const WINDOW: u32 = (1 << 30) - 1;

/// The connection's socket: TCP, or TLS over it (ALPN `h2`).
enum Io {
    Plain(TcpStream),
    Tls(Box<dyn Socket>),
}

/// A TLS stream over [`ReadAhead`] (its type is the TLS crate's; a trait object keeps it out of this one).
trait Socket: AsyncRead + AsyncWrite + Unpin {}

impl<T: AsyncRead + AsyncWrite + Unpin> Socket for T {}

impl Io {
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }

    fn poll_write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
}

/// Opens a connection (TCP, TLS with ALPN `h2` for `https://`); the HTTP/2 preface goes out with the
/// first write.
async fn connect(plan: &Plan) -> Option<Io> {
    let tcp = TcpStream::connect(plan.addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    match &plan.tls {
        Some(tls) => Some(Io::Tls(Box::new(
            tls.handshake(ReadAhead::new(tcp)).await.ok()?,
        ))),
        None => Some(Io::Plain(tcp)),
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

impl Protocol for H2Plan {
    fn connection(self: Arc<Self>, ctx: Ctx, j: usize) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(connection(self, ctx, j))
    }
}

/// One HTTP/2 connection (connection `j`) and its `streams` clients, all driven by this one task; aborting
/// it aborts them and drops the connection.
async fn connection(h2: Arc<H2Plan>, ctx: Ctx, j: usize) {
    let mut c = Driver::new(h2, ctx, j);
    loop {
        match std::future::poll_fn(|cx| c.poll_pass(cx)).await {
            Need::Done => break,
            Need::Connect => c.connect_front().await,
        }
    }
}

/// The open connection: its socket, its state, and its generation (a request sent on an older one that
/// failed does not touch a newer one).
struct Open {
    io: Io,
    conn: Conn,
    encoder: Encoder,
    generation: u64,
    /// `conn.output()[..written]` is written; a TLS stream has bytes to flush.
    written: usize,
    flush: bool,
}

/// Reads taken in one pass before the task yields to others (a server that sends without pause does not
/// keep the thread).
const READS_PER_PASS: usize = 32;

/// Where a stream-client is.
enum Phase {
    /// Takes its next slot.
    Free,
    /// In `waits`: thinking (closed loop, no request), or its open-loop request is not due yet.
    Waiting,
    /// In `queue`: its request waits for the connection or for a stream the server allows.
    Queued,
    /// Sent; the response head has not come.
    Head,
    /// Reading the response body.
    Body {
        status: u16,
        head_bytes: u64,
        first_byte: Instant,
        bytes: u64,
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
    /// It was refused by the server (REFUSED_STREAM, GOAWAY) and sent again (once at most).
    retried: bool,
    /// The connection and stream it was sent on, and when.
    generation: u64,
    stream: u32,
    sent: Instant,
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
    open: Option<Open>,
    generation: u64,
    /// The state machine's events, reused.
    events: Vec<Event>,
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
            open: None,
            generation: 0,
            events: Vec::with_capacity(2 * n),
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

    /// One pass over the connection: what the server sent, timeouts, due requests, new slots, new streams,
    /// writes. One clock read per round serves every request it starts or ends.
    fn poll_pass(&mut self, cx: &mut Context<'_>) -> Poll<Need> {
        let plan = self.ctx.plan.clone();
        loop {
            let now = Instant::now();
            // 1. What the server sent.
            let more = self.read(cx, now);
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
                    stream: 0,
                    sent: now,
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
            // 5. New streams, as the server's limits allow.
            while let Some(&s) = self.queue.front() {
                if self.open.as_ref().is_some_and(|o| o.conn.finished()) {
                    // after GOAWAY, once its last streams are done
                    self.open = None;
                }
                let Some(open) = self.open.as_mut() else {
                    self.flush(cx, now);
                    return Poll::Ready(Need::Connect);
                };
                if !open.conn.can_open() {
                    break;
                }
                self.queue.pop_front();
                let c = &mut self.clients[s];
                let req = c.req.as_mut().expect("a queued client has a request");
                let t = &self.h2.requests[req.slot.class][req.slot.url];
                open.encoder.limit(open.conn.header_table_size());
                let block = open.encoder.encode(&t.template);
                req.stream = open.conn.open(s, block, t.body.as_ref(), t.head);
                req.generation = open.generation;
                req.sent = now;
                c.phase = Phase::Head;
            }
            // 6. What the state machine queued.
            self.flush(cx, now);
            if self.stopped == self.clients.len() {
                return Poll::Ready(Need::Done);
            }
            if !self.free.is_empty() {
                continue;
            }
            if more {
                // more to read: after the other tasks had a turn
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // 7. Nothing more to do now: the timers.
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
            return Poll::Pending;
        }
    }

    /// Reads what the connection has (until the socket would block, or `READS_PER_PASS` reads: then it
    /// returns true) and acts on it. A connection that ends or breaks the protocol is dropped.
    fn read(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Some(open) = self.open.as_mut() else {
            return false;
        };
        let mut events = std::mem::take(&mut self.events);
        let mut more = false;
        let mut dead = false;
        for i in 0.. {
            if i == READS_PER_PASS {
                more = true;
                break;
            }
            let mut rb = ReadBuf::new(open.conn.input());
            match open.io.poll_read(cx, &mut rb) {
                Poll::Pending => break,
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        dead = true;
                        break;
                    }
                    if let Err(e) = open.conn.received(n, &mut events) {
                        // best effort: tell the server why, then drop the connection
                        self.ctx.connection_error(&format!("HTTP/2: {}", e.reason));
                        open.conn.goaway(e.code);
                        let _ = open.io.poll_write(cx, &open.conn.output()[open.written..]);
                        dead = true;
                        break;
                    }
                }
                Poll::Ready(Err(_)) => {
                    dead = true;
                    break;
                }
            }
        }
        if self.server.is_none() {
            self.server = open.conn.server().map(str::to_string);
        }
        let generation = open.generation;
        for e in events.drain(..) {
            self.event(e, generation, now);
        }
        self.events = events;
        if dead {
            self.drop_conn(now);
        }
        more && !dead
    }

    /// Writes what the connection queued (until the socket would block); a write error drops it.
    fn flush(&mut self, cx: &mut Context<'_>, now: Instant) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let mut dead = false;
        while open.written < open.conn.output().len() {
            match open.io.poll_write(cx, &open.conn.output()[open.written..]) {
                Poll::Pending => break,
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                    dead = true;
                    break;
                }
                Poll::Ready(Ok(n)) => {
                    open.written += n;
                    open.flush = matches!(open.io, Io::Tls(_));
                }
            }
        }
        // (the answers among what was written stop counting against the flood bound)
        if open.conn.written(open.written) {
            open.written = 0;
        }
        if !dead && open.flush {
            match open.io.poll_flush(cx) {
                Poll::Pending => {}
                Poll::Ready(Ok(())) => open.flush = false,
                Poll::Ready(Err(_)) => dead = true,
            }
        }
        if dead {
            self.drop_conn(now);
        }
    }

    /// What the server said about client `s`'s stream.
    fn event(&mut self, e: Event, generation: u64, now: Instant) {
        let s = match e {
            Event::Head { client, .. }
            | Event::Data { client, .. }
            | Event::End { client }
            | Event::Failed { client, .. } => client,
        };
        let c = &mut self.clients[s];
        if c.req.as_ref().is_none_or(|r| r.generation != generation) {
            return;
        }
        match (e, &mut c.phase) {
            (
                Event::Head {
                    status,
                    head_bytes,
                    end,
                    ..
                },
                Phase::Head,
            ) => {
                if end {
                    self.complete(s, status, head_bytes, 0, now, now);
                } else {
                    c.phase = Phase::Body {
                        status,
                        head_bytes,
                        first_byte: now,
                        bytes: 0,
                    };
                }
            }
            (Event::Data { len, .. }, Phase::Body { bytes, .. }) => *bytes += len as u64,
            (
                Event::End { .. },
                Phase::Body {
                    status,
                    head_bytes,
                    first_byte,
                    bytes,
                },
            ) => {
                let (status, head_bytes, bytes, first_byte) =
                    (*status, *head_bytes, *bytes, *first_byte);
                self.complete(s, status, head_bytes, bytes, first_byte, now);
            }
            (Event::Failed { why, .. }, Phase::Head) => match why {
                // refused before the server looked at it: safe to send again
                StreamFail::Refused => self.retry(s, FailKind::Receive, now),
                StreamFail::Reset => self.finish(s, Err(FailKind::Receive), now),
            },
            (Event::Failed { .. }, Phase::Body { .. }) => {
                self.finish(s, Err(FailKind::Length), now)
            }
            _ => {}
        }
    }

    /// Drops the open connection (it ended, broke the protocol or failed to write): its requests in
    /// progress fail (a response not begun as a receive failure, one cut short as a length failure).
    fn drop_conn(&mut self, now: Instant) {
        let Some(open) = self.open.take() else { return };
        for s in 0..self.clients.len() {
            let c = &self.clients[s];
            if c.req
                .as_ref()
                .is_none_or(|r| r.generation != open.generation)
            {
                continue;
            }
            match c.phase {
                Phase::Head => self.finish(s, Err(FailKind::Receive), now),
                Phase::Body { .. } => self.finish(s, Err(FailKind::Length), now),
                _ => {}
            }
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

    /// The timeout timer fired: requests past their timeout fail (their streams are reset; the connection
    /// stays), and the timer moves to the earliest remaining one.
    fn expire(&mut self, now: Instant) {
        let timeout = self.ctx.plan.timeout;
        let mut next: Option<Instant> = None;
        for s in 0..self.clients.len() {
            let c = &self.clients[s];
            if !matches!(c.phase, Phase::Queued | Phase::Head | Phase::Body { .. }) {
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
            } else if let Some(open) = self.open.as_mut()
                && open.generation == req.generation
            {
                open.conn.cancel(req.stream);
            }
            self.finish(s, Err(FailKind::Timeout), now);
        }
        match next {
            Some(d) => self.arm_deadline(d),
            None => self.deadline_armed = None,
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

    /// Client `s`'s request was refused by the server without being processed: sent once more (on this
    /// connection if it still takes streams, else on a new one), unless it opened the connection or was
    /// sent again already.
    fn retry(&mut self, s: usize, kind: FailKind, now: Instant) {
        let c = &mut self.clients[s];
        let Some(req) = c.req.as_mut() else { return };
        if req.connected.is_none() && !req.retried {
            req.retried = true;
            c.phase = Phase::Queued;
            self.queue.push_front(s);
        } else {
            self.finish(s, Err(kind), now);
        }
    }

    /// Opens the connection for the first queued request (which counts it), or fails that request.
    async fn connect_front(&mut self) {
        let Some(&s) = self.queue.front() else { return };
        let plan = self.ctx.plan.clone();
        let t0 = Instant::now();
        match tokio::time::timeout(plan.connect_timeout, connect(&plan)).await {
            Ok(Some(io)) => {
                let t1 = Instant::now();
                self.generation += 1;
                self.open = Some(Open {
                    io,
                    conn: Conn::new(WINDOW, WINDOW),
                    encoder: Encoder::new(self.h2.numbering),
                    generation: self.generation,
                    written: 0,
                    flush: false,
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
