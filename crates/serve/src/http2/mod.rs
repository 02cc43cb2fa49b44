//! HTTP/2 server side (RFC 9113), over TLS by ALPN (`h2`) and in cleartext with prior knowledge (h2c), with
//! the `h2` crate doing the framing, HPACK, flow control and stream states. Every stream is served like a
//! kept-alive HTTP/1 request: mapped to the same [`Request`](crate::http::Request), handed to the same
//! [`Handler`] (so it is classified and queued on its own, and one connection's
//! streams share the workers by the class policy), and its [`Response`](crate::http::Response) is sent as
//! HEADERS and DATA frames within the client's flow-control windows.
//!
//! Why `h2` and not hyper's server: ordo needs its hands on each stream — when it is accepted, when the client
//! resets it (a stream reset while queued leaves the scheduler at once and counts against the client's reset
//! budget), how many of a connection's streams are in the scheduler, and when to send GOAWAY — and it already
//! has its own request and response types and HTTP/1 server; hyper's service layer would hide all of that
//! behind its own types and connection driver.
//!
//! Per connection (the details are in docs/serve-http.md, "HTTP/2"):
//! - the protocol limits of `[http2]` are announced in SETTINGS and enforced by `h2` (concurrent streams,
//!   header list size → 431, frame size, windows); `[limits]` applies as for HTTP/1 (body size → 413,
//!   URI length → 414, a body stalled `head_timeout` → 408, no stream open for `idle_timeout` → GOAWAY);
//! - at most `max_streams_in_progress` of a connection's streams are in ordo's hands at once (receiving their
//!   body, queued for a worker, being served); later ones wait, unread, in arrival order;
//! - slow readers: h2 is handed only what the client's windows take; what a stream holds beyond them (the
//!   rest of a body in memory, a backend stream's chunk) is counted per connection (`Buffered`), and while
//!   it is `max_buffered_bytes` no further stream starts its handler — a zero-window client pins at most
//!   that plus one response, and a backend stream's channel fills and stops its reader (back-pressure);
//! - the rapid-reset defence (CVE-2023-44487): `h2` cuts a client that resets streams before they are
//!   accepted; ordo counts the streams a client resets after that (queued, being served or being answered)
//!   and sends GOAWAY(ENHANCE_YOUR_CALM) and closes once `max_premature_resets` is spent (each answered stream
//!   earns one back). CONTINUATION, SETTINGS and PING floods are bounded by `h2` (see the tests);
//! - on shutdown: GOAWAY, the streams in flight finish (within the server's shutdown grace), then close;
//! - WebSocket (RFC 8441): SETTINGS_ENABLE_CONNECT_PROTOCOL is announced; an extended CONNECT with
//!   `:protocol websocket` is the HTTP/1.1 handshake to the handler, and its stream carries the tunnel a proxy
//!   route opens (`tunnel`). A plain CONNECT is 405, another `:protocol` 501.
//!
//! For speed (docs/serve.md, "HTTP/2 against nginx"): every stream is served by its connection's task —
//! one answered at once within the poll that accepted it (`stream::start`), the others (waiting for a
//! worker, an upstream, a body, a window) in the connection's set of streams in progress
//! (`stream::InProgress`), polled when woken, never as a runtime task of their own — and the frames of one
//! poll of the connection leave in one write (`Batch`).

mod stream;
mod tunnel;

use crate::log_limit::LogLimit;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use crate::http::Transport;
use crate::http::{Handler, Limits, shutdown_signalled};
use crate::invalid::Invalid;
use crate::keypath;

/// `[http2]`: HTTP/2 on the listeners and its limits.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Http2Config {
    /// Offer HTTP/2 by ALPN on TLS listeners (`h2` before `http/1.1`).
    pub enabled: bool,
    /// Accept HTTP/2 with prior knowledge (h2c) on the plain listener: a connection that opens with the
    /// HTTP/2 preface speaks HTTP/2, any other HTTP/1.
    pub h2c: bool,
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Streams of one connection in ordo's hands at once: receiving their body, queued for a worker or being
    /// served. Later streams wait, unread and unclassified, in arrival order (their bodies held back by flow
    /// control), so one connection cannot fill the scheduler's queue.
    pub max_streams_in_progress: usize,
    /// Largest decoded header list of a request (SETTINGS_MAX_HEADER_LIST_SIZE; names, values and 32 bytes
    /// per field, RFC 9113 §6.5.2); larger → 431.
    pub max_header_list_size: u32,
    /// Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE): request body bytes a client may send
    /// ahead of ordo reading them.
    pub initial_window_size: u32,
    /// The connection's receive window: at least `max_concurrent_streams × initial_window_size`, so the
    /// streams waiting their turn cannot take the window the ones in progress need.
    pub connection_window_size: u32,
    /// Largest frame payload ordo accepts (SETTINGS_MAX_FRAME_SIZE, 16 KiB – 16 MiB).
    pub max_frame_size: u32,
    /// The rapid-reset budget: streams a client may reset before their response is complete; each answered
    /// stream earns one back (up to this). Spent: GOAWAY(ENHANCE_YOUR_CALM) and the connection is closed.
    pub max_premature_resets: u32,
    /// Response body bytes one connection may hold beyond what its client's flow-control windows let out
    /// (bodies in memory, a backend stream's chunk): while it holds this much, no further stream of the
    /// connection starts its handler, so a client that opens its streams with a zero window and never
    /// reads pins at most this (plus one response) instead of every response of every stream.
    pub max_buffered_bytes: u64,
    /// Announce SETTINGS_ENABLE_CONNECT_PROTOCOL and take WebSockets over HTTP/2 (RFC 8441 extended
    /// CONNECT), which proxy routes open upstream as HTTP/1.1 WebSockets. Off: browsers use HTTP/1.1 for
    /// their WebSockets.
    pub extended_connect: bool,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            enabled: true,
            h2c: true,
            max_concurrent_streams: 128,
            max_streams_in_progress: 32,
            max_header_list_size: 16 * 1024,
            initial_window_size: 65_535,
            connection_window_size: 8 * 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_premature_resets: 100,
            max_buffered_bytes: 1024 * 1024,
            extended_connect: true,
        }
    }
}

/// The largest window RFC 9113 §6.9.1 allows.
const MAX_WINDOW: u32 = (1 << 31) - 1;

impl Http2Config {
    /// HTTP/2 off: neither ALPN nor h2c (the admin listener).
    pub(crate) fn off() -> Self {
        Http2Config {
            enabled: false,
            h2c: false,
            ..Http2Config::default()
        }
    }

    /// Checks the values; the error names the key.
    pub(crate) fn check(&self) -> Result<(), Invalid> {
        let at = |k: &str| keypath!["http2", k];
        if self.max_concurrent_streams == 0 {
            return Err(Invalid::new(
                at("max_concurrent_streams"),
                "must be ≥ 1, got 0",
            ));
        }
        if self.max_streams_in_progress == 0 {
            return Err(Invalid::new(
                at("max_streams_in_progress"),
                "must be ≥ 1, got 0",
            ));
        }
        if self.max_header_list_size == 0 {
            return Err(Invalid::new(
                at("max_header_list_size"),
                "must be ≥ 1, got 0",
            ));
        }
        if !(1..=MAX_WINDOW).contains(&self.initial_window_size) {
            return Err(Invalid::new(
                at("initial_window_size"),
                format!("must be 1 – {MAX_WINDOW}, got {}", self.initial_window_size),
            ));
        }
        if !(16_384..=16_777_215).contains(&self.max_frame_size) {
            return Err(Invalid::new(
                at("max_frame_size"),
                format!(
                    "must be 16384 – 16777215 (RFC 9113 §6.5.2), got {}",
                    self.max_frame_size
                ),
            ));
        }
        let need = u64::from(self.max_concurrent_streams) * u64::from(self.initial_window_size);
        if self.connection_window_size > MAX_WINDOW || u64::from(self.connection_window_size) < need
        {
            let hint = if need > u64::from(MAX_WINDOW) {
                format!(
                    "; max_concurrent_streams × initial_window_size = {need} is over {MAX_WINDOW}: lower one of them"
                )
            } else {
                String::new()
            };
            return Err(Invalid::new(
                at("connection_window_size"),
                format!(
                    "must be at least max_concurrent_streams × initial_window_size = {need} (so waiting streams \
                     cannot take the window of the ones in progress) and at most {MAX_WINDOW}, got {}{hint}",
                    self.connection_window_size
                ),
            ));
        }
        if self.max_premature_resets == 0 {
            return Err(Invalid::new(
                at("max_premature_resets"),
                "must be ≥ 1, got 0",
            ));
        }
        if self.max_buffered_bytes < 16_384 {
            return Err(Invalid::new(
                at("max_buffered_bytes"),
                format!(
                    "must be ≥ 16384 (one frame), got {}",
                    self.max_buffered_bytes
                ),
            ));
        }
        Ok(())
    }

    fn builder(&self) -> h2::server::Builder {
        let mut b = h2::server::Builder::new();
        b.max_concurrent_streams(self.max_concurrent_streams)
            .max_header_list_size(self.max_header_list_size)
            .initial_window_size(self.initial_window_size)
            .initial_connection_window_size(self.connection_window_size)
            .max_frame_size(self.max_frame_size);
        if self.extended_connect {
            b.enable_connect_protocol();
        }
        b
    }
}

/// The client connection preface (RFC 9113 §3.4) that starts an h2c connection with prior knowledge.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a plain connection's first bytes say it speaks.
pub(crate) enum Sniffed {
    /// The HTTP/2 preface (still in the buffer: HTTP/2 reads it again).
    Http2,
    /// Anything else (the buffer holds what was read).
    Http1,
    /// Closed, silent for `limit`, or the server is stopping: nothing to answer.
    Gone,
}

/// Reads a fresh plain connection's first bytes into `rbuf` (which may already hold some) until they either
/// are the HTTP/2 preface or cannot be: usually one read, the one HTTP/1 would make anyway.
pub(crate) async fn sniff(
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
    limit: Duration,
    shutdown: &watch::Receiver<bool>,
) -> Sniffed {
    let deadline = Instant::now() + limit;
    let mut stop_rx = shutdown.clone();
    let mut stop = std::pin::pin!(shutdown_signalled(&mut stop_rx));
    loop {
        let n = rbuf.len().min(PREFACE.len());
        if rbuf[..n] != PREFACE[..n] {
            return Sniffed::Http1;
        }
        if n == PREFACE.len() {
            return Sniffed::Http2;
        }
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(8 * 1024);
        }
        tokio::select! {
            biased;
            r = tokio::time::timeout_at(deadline, stream.read_buf(rbuf)) => match r {
                Ok(Ok(n)) if n > 0 => {}
                // a partial preface that stops: HTTP/1 answers what it makes of it (408 or 400)
                Err(_) if !rbuf.is_empty() => return Sniffed::Http1,
                _ => return Sniffed::Gone,
            },
            _ = &mut stop => return Sniffed::Gone,
        }
    }
}

/// Reading what a closing client still sends, after ordo's last bytes and its FIN: at most this long and
/// this much. Without it, unread input turns the close into a TCP reset that can destroy the GOAWAY (and
/// the last responses) before the client reads them.
const LINGER_TIME: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 256 * 1024;

/// Frames batched before they are written whatever the connection is doing (a few TLS records' worth).
const BATCH_BYTES: usize = 64 * 1024;

/// Write batching, shared by a connection's loop and its I/O. `h2` flushes its frame buffer whenever it is
/// full or holds a DATA frame, which with small responses is once per response: with 100 streams of 2 KB
/// answers that was one `writev` (and one TLS record) per response. Instead, the I/O keeps what `h2` writes
/// during one poll of the connection task and passes it on in one write at the next poll (the task wakes
/// itself for it), by which time the other streams' responses have joined it.
#[derive(Default)]
struct Batch {
    /// Polls of the connection task since the handshake (0: not serving streams yet, nothing is held).
    polls: AtomicU64,
}

/// The connection's I/O: bytes already read from it (the sniffed h2c preface) are read again first, writes
/// are batched (see [`Batch`]), and its shutdown (h2 shuts the write side down when the connection closes)
/// writes what is held, then drains the client's input for a while, as the HTTP/1 side's `linger_close`
/// does.
struct Linger<T> {
    pre: Bytes,
    inner: T,
    drain: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
    /// Written by h2, not yet passed to `inner`: `out[sent..]`.
    out: Vec<u8>,
    sent: usize,
    batch: Arc<Batch>,
    /// The poll of the connection task whose flush was put off to the next poll.
    deferred: Option<u64>,
}

impl<T> Linger<T> {
    fn new(inner: T, pre: Bytes, batch: Arc<Batch>) -> Self {
        Linger {
            pre,
            inner,
            drain: None,
            out: Vec::new(),
            sent: 0,
            batch,
            deferred: None,
        }
    }
}

impl<T: AsyncWrite + Unpin> Linger<T> {
    /// Passes everything held on to `inner` (not flushing it).
    fn poll_write_out(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.sent < self.out.len() {
            let n = std::task::ready!(
                Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..])
            )?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.sent = 0;
        self.out.clear();
        self.deferred = None;
        // a burst's buffer is not kept by a connection that has gone quiet
        if self.out.capacity() > 2 * BATCH_BYTES {
            self.out = Vec::new();
        }
        Poll::Ready(Ok(()))
    }

    /// Makes room before taking more: what is held is written once it reaches [`BATCH_BYTES`].
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.out.len() - self.sent >= BATCH_BYTES {
            std::task::ready!(self.poll_write_out(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Linger<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.pre.is_empty() {
            let n = self.pre.len().min(buf.remaining());
            buf.put_slice(&self.pre[..n]);
            self.pre.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Linger<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        std::task::ready!(self.poll_room(cx))?;
        self.out.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        std::task::ready!(self.poll_room(cx))?;
        let mut n = 0;
        for b in bufs {
            self.out.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        // h2 then hands DATA payloads over as they are (copied once, here) instead of copying them first
        true
    }

    /// Puts the write off to the connection task's next poll (waking it for that), unless it is already that
    /// poll, the task is not serving streams yet (the handshake) or [`BATCH_BYTES`] are held.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.sent < this.out.len() {
            let poll = this.batch.polls.load(Ordering::Relaxed);
            if poll > 0 && this.out.len() - this.sent < BATCH_BYTES {
                match this.deferred {
                    None => {
                        this.deferred = Some(poll);
                        cx.waker().wake_by_ref();
                        return Poll::Ready(Ok(()));
                    }
                    Some(p) if p == poll => return Poll::Ready(Ok(())),
                    Some(_) => {}
                }
            }
            std::task::ready!(this.poll_write_out(cx))?;
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.drain.is_none() {
            std::task::ready!(this.poll_write_out(cx))?;
            std::task::ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
            this.drain = Some((Box::pin(tokio::time::sleep(LINGER_TIME)), 0));
        }
        let Some((timer, drained)) = this.drain.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let mut sink = [0u8; 4096];
        loop {
            if timer.as_mut().poll(cx).is_ready() || *drained >= LINGER_BYTES {
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut sink);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => *drained += rb.filled().len(),
                Poll::Ready(_) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// What every stream of a connection shares.
pub(crate) struct ConnCtx<H> {
    pub(crate) handler: Arc<H>,
    pub(crate) limits: Arc<Limits>,
    pub(crate) peer: SocketAddr,
    /// The TLS session's facts, for every request of the connection.
    pub(crate) tls: Option<crate::http::TlsInfo>,
    /// `max_streams_in_progress` permits.
    pub(crate) slots: Arc<Semaphore>,
    /// Response header fields parsed once per connection.
    pub(crate) heads: std::sync::Mutex<stream::HeadCache>,
    /// Response bytes held beyond the client's windows (`max_buffered_bytes`).
    pub(crate) buffered: Arc<Buffered>,
}

/// A connection's response bytes held beyond its client's flow-control windows: counted up when a body (or
/// a backend stream's chunk) that does not fit the window is kept, down as the windows let it out or the
/// stream ends. Per connection (its streams share it), never shared between connections.
#[derive(Debug)]
pub(crate) struct Buffered {
    held: std::sync::atomic::AtomicUsize,
    max: usize,
    /// Woken when `held` drops below `max`.
    room: tokio::sync::Notify,
}

impl Buffered {
    pub(crate) fn new(max: u64) -> Self {
        Buffered {
            held: std::sync::atomic::AtomicUsize::new(0),
            max: usize::try_from(max).unwrap_or(usize::MAX),
            room: tokio::sync::Notify::new(),
        }
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Whether a new stream must wait before its handler starts.
    pub(crate) fn full(&self) -> bool {
        self.held() >= self.max
    }

    /// Waits until the connection holds less than `max_buffered_bytes`.
    pub(crate) async fn room(&self) {
        loop {
            let woken = self.room.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            if !self.full() {
                return;
            }
            woken.await;
        }
    }

    /// Counts `n` bytes held until the returned guard lets them go.
    pub(crate) fn hold(self: &Arc<Self>, n: usize) -> Hold {
        self.held.fetch_add(n, Ordering::Relaxed);
        Hold {
            of: self.clone(),
            n,
        }
    }
}

/// Bytes counted in a connection's [`Buffered`]; what is left is let go on drop.
pub(crate) struct Hold {
    of: Arc<Buffered>,
    n: usize,
}

impl Hold {
    /// `k` of the bytes are out (handed to h2 within the client's window).
    pub(crate) fn release(&mut self, k: usize) {
        let k = k.min(self.n);
        if k == 0 {
            return;
        }
        self.n -= k;
        let before = self.of.held.fetch_sub(k, Ordering::Relaxed);
        if before >= self.of.max && before - k < self.of.max {
            self.of.room.notify_waiters();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release(self.n);
    }
}

/// How a stream ended, as the connection's reset accounting sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Its response was sent whole (an error status counts too).
    Answered,
    /// The client reset it before its response was complete.
    ResetByClient,
    /// It failed on ordo's side (a backend stream that broke off, a client that stopped reading).
    Failed,
}

/// How long a closing connection may take to deliver its GOAWAY (and, gracefully, its last responses'
/// frames) once nothing is left to serve (more than [`LINGER_TIME`]).
const CLOSE_LINGER: Duration = Duration::from_secs(1);

/// Serves one HTTP/2 connection (after ALPN chose `h2`, or after the h2c preface was sniffed: `pre` holds
/// what was read of it already) until the client closes it, a limit or a defence closes it, or the server
/// shuts down.
pub(crate) async fn serve<H: Handler, T: Transport>(
    io: T,
    pre: Bytes,
    peer: SocketAddr,
    handler: Arc<H>,
    limits: Arc<Limits>,
    cfg: Arc<Http2Config>,
    shutdown: watch::Receiver<bool>,
) {
    let mut stop_rx = shutdown.clone();
    let mut stop = std::pin::pin!(shutdown_signalled(&mut stop_rx));
    let _ = io.nodelay(); // batched writes: Nagle would only hold back the end of a batch
    let tls = io.tls_info();
    let batch = Arc::new(Batch::default());
    let io = Linger::new(io, pre, batch.clone());
    let handshake = tokio::time::timeout(limits.head_timeout, cfg.builder().handshake(io));
    let mut conn: h2::server::Connection<Linger<T>, Bytes> = tokio::select! {
        biased;
        r = handshake => match r {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "HTTP/2 handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "HTTP/2 preface not received in time; closed");
                return;
            }
        },
        _ = &mut stop => return,
    };
    let ctx = Arc::new(ConnCtx {
        handler,
        limits: limits.clone(),
        peer,
        tls,
        slots: Arc::new(Semaphore::new(cfg.max_streams_in_progress)),
        heads: std::sync::Mutex::default(),
        buffered: Arc::new(Buffered::new(cfg.max_buffered_bytes)),
    });
    let mut streams: FuturesUnordered<stream::InProgress<H>> = FuturesUnordered::new();
    let mut budget = cfg.max_premature_resets;
    let mut premature: u64 = 0;
    // Armed once the connection is closing (GOAWAY sent): it ends by then at the latest.
    let mut closing = false;
    let close_by = tokio::time::sleep(Duration::ZERO);
    let mut close_by = std::pin::pin!(close_by);
    // Armed from the last time nothing was in flight (`quiet_since`; re-armed from there when it fires, as
    // the timer is not reset for each stream that ends).
    let idle = tokio::time::sleep(limits.idle_timeout);
    let mut idle = std::pin::pin!(idle);
    let mut quiet_since = Instant::now();
    let mut stopping = false;
    // closed by the rapid-reset defence
    let mut cut = false;
    let main = async {
        loop {
            // a stream that ended in this round (None: none did, or it panicked)
            let mut ended: Option<Outcome> = None;
            let mut any_ended = false;
            tokio::select! {
                biased;
                Some(done) = streams.next(), if !streams.is_empty() => {
                    any_ended = true;
                    match done {
                        Some(o) => ended = Some(o),
                        None => {
                            tracing::error!(%peer, "request handler panicked; HTTP/2 stream reset");
                        }
                    }
                }
                r = conn.accept() => match r {
                    Some(Ok(_)) if cut => {} // dropped: reset by h2
                    Some(Ok((req, respond))) => {
                        // a stream that was on its way when GOAWAY left: give it its time
                        closing &= cut;
                        match stream::start(req, respond, &ctx) {
                            stream::Started::Done(o) => {
                                any_ended = true;
                                ended = Some(o);
                            }
                            // (polled by `streams` at once: most answer in that first poll)
                            stream::Started::Poll(s) => streams.push(stream::InProgress::Handler(s)),
                            stream::Started::Later(t) => streams.push(stream::InProgress::Later(t)),
                        }
                    }
                    Some(Err(e)) => {
                        log_connection_error(peer, &e);
                        break;
                    }
                    None => break,
                },
                _ = &mut stop, if !stopping => {
                    // GOAWAY: no new streams; the ones open finish (the server's shutdown grace bounds them)
                    stopping = true;
                    conn.graceful_shutdown();
                }
                _ = &mut idle, if streams.is_empty() && !stopping => {
                    let until = quiet_since + limits.idle_timeout;
                    if Instant::now() < until {
                        idle.as_mut().reset(until);
                    } else {
                        tracing::debug!(%peer, "HTTP/2 connection idle; GOAWAY");
                        stopping = true;
                        conn.graceful_shutdown();
                    }
                }
                _ = &mut close_by, if closing => break,
            }
            match ended {
                Some(Outcome::Answered) => budget = (budget + 1).min(cfg.max_premature_resets),
                Some(Outcome::ResetByClient) => {
                    premature += 1;
                    budget = budget.saturating_sub(1);
                    if budget == 0 && !cut {
                        static LIMIT: LogLimit = LogLimit::per_site();
                        if let Some(more) = LIMIT.line() {
                            tracing::warn!(
                                %peer,
                                resets = premature,
                                "HTTP/2 client reset too many streams before their response \
                                 (rapid reset): GOAWAY ENHANCE_YOUR_CALM, connection closed{more}"
                            );
                        }
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        // every stream still queued or served is dropped now (its queue place freed)
                        streams.clear();
                        cut = true;
                        closing = true;
                        close_by.as_mut().reset(Instant::now() + CLOSE_LINGER);
                    }
                }
                Some(Outcome::Failed) | None => {}
            }
            if any_ended && streams.is_empty() {
                quiet_since = Instant::now();
            }
            if stopping && !closing && streams.is_empty() {
                // nothing left in flight: the client has this long to take the GOAWAY and the last frames
                closing = true;
                close_by.as_mut().reset(Instant::now() + CLOSE_LINGER);
            }
        }
    };
    // each poll of the loop is one batch of writes (see `Batch`)
    let mut main = std::pin::pin!(main);
    std::future::poll_fn(|cx| {
        batch.polls.fetch_add(1, Ordering::Relaxed);
        main.as_mut().poll(cx)
    })
    .await;
    // dropping `streams` drops what is left: queue places and permits are released
}

fn log_connection_error(peer: SocketAddr, e: &h2::Error) {
    if e.is_io() {
        tracing::debug!(%peer, error = %e, "HTTP/2 connection I/O error");
    } else if e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) {
        static LIMIT: LogLimit = LogLimit::per_site();
        if let Some(more) = LIMIT.line() {
            tracing::warn!(%peer, error = %e, "HTTP/2 connection closed by a defence (ENHANCE_YOUR_CALM){more}");
        }
    } else if e.is_go_away() && e.is_remote() {
        tracing::debug!(%peer, error = %e, "HTTP/2 client sent GOAWAY");
    } else {
        tracing::info!(%peer, error = %e, "HTTP/2 connection error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_are_valid_and_bad_values_name_their_key() {
        Http2Config::default().check().unwrap();
        let path =
            |c: Http2Config| ordo_util::located::path_to_string(&c.check().unwrap_err().path);
        let c = Http2Config {
            max_concurrent_streams: 0,
            ..Http2Config::default()
        };
        assert_eq!(path(c), "http2.max_concurrent_streams");
        let c = Http2Config {
            max_frame_size: 1000,
            ..Http2Config::default()
        };
        assert_eq!(path(c), "http2.max_frame_size");
        let c = Http2Config {
            initial_window_size: 1 << 20,
            ..Http2Config::default()
        };
        let e = c.check().unwrap_err();
        assert_eq!(
            ordo_util::located::path_to_string(&e.path),
            "http2.connection_window_size"
        );
        assert!(e.message.contains("134217728"), "{}", e.message);
        let c: Http2Config = toml::from_str("h2c = false\nmax_premature_resets = 5").unwrap();
        assert!(!c.h2c && c.enabled && c.max_premature_resets == 5);
        assert!(toml::from_str::<Http2Config>("max_streams = 1").is_err());
        let c = Http2Config {
            max_buffered_bytes: 1000,
            ..Http2Config::default()
        };
        let e = c.check().unwrap_err();
        assert_eq!(
            ordo_util::located::path_to_string(&e.path),
            "http2.max_buffered_bytes"
        );
        assert_eq!(e.message, "must be ≥ 16384 (one frame), got 1000");
    }

    #[tokio::test]
    async fn the_sniffed_bytes_are_read_first() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut r = Linger::new(a, Bytes::from_static(b"PRI"), Arc::default());
        tokio::io::AsyncWriteExt::write_all(&mut b, b" *")
            .await
            .unwrap();
        drop(b);
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"PRI *");
    }

    struct Wakes(AtomicU64);
    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What the other end of a duplex pipe can read now (without waiting).
    fn readable(b: &mut tokio::io::DuplexStream) -> Vec<u8> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut buf = vec![0u8; 2 * BATCH_BYTES];
        let mut rb = ReadBuf::new(&mut buf);
        match Pin::new(b).poll_read(&mut cx, &mut rb) {
            Poll::Ready(Ok(())) => rb.filled().to_vec(),
            _ => Vec::new(),
        }
    }

    #[tokio::test]
    async fn writes_of_one_poll_leave_together_at_the_next() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let batch = Arc::new(Batch::default());
        let mut io = Linger::new(a, Bytes::new(), batch.clone());
        let wakes = Arc::new(Wakes(AtomicU64::new(0)));
        let waker = std::task::Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut io = Pin::new(&mut io);
        // the handshake (no poll of the loop yet): written at once
        assert!(matches!(
            io.as_mut().poll_write(&mut cx, b"settings"),
            Poll::Ready(Ok(8))
        ));
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(readable(&mut b), b"settings");
        // one poll of the loop: both flushes are put off and the task is woken once
        batch.polls.store(1, Ordering::Relaxed);
        let parts = [
            std::io::IoSlice::new(b"head"),
            std::io::IoSlice::new(b"data"),
        ];
        assert!(matches!(
            io.as_mut().poll_write_vectored(&mut cx, &parts),
            Poll::Ready(Ok(8))
        ));
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert!(matches!(
            io.as_mut().poll_write(&mut cx, b"-two"),
            Poll::Ready(Ok(4))
        ));
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(readable(&mut b), b"");
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
        // the next poll writes the batch in one go
        batch.polls.store(2, Ordering::Relaxed);
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(readable(&mut b), b"headdata-two");
        // a full batch is written without waiting for the next poll
        let big = vec![7u8; BATCH_BYTES];
        assert!(matches!(
            io.as_mut().poll_write(&mut cx, &big),
            Poll::Ready(Ok(_))
        ));
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let mut got = 0;
        while got < BATCH_BYTES {
            let n = readable(&mut b).len();
            assert!(n > 0, "the full batch was held back");
            got += n;
        }
        // what is held when the connection closes is written before the close
        batch.polls.store(3, Ordering::Relaxed);
        assert!(matches!(
            io.as_mut().poll_write(&mut cx, b"goaway"),
            Poll::Ready(Ok(6))
        ));
        assert!(matches!(
            io.as_mut().poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        assert_eq!(readable(&mut b), b"");
        let _ = io.as_mut().poll_shutdown(&mut cx);
        assert_eq!(readable(&mut b), b"goaway");
    }
}
