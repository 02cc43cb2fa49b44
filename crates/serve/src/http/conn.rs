//! The per-connection loop: read a head (within the head timeout), read its body (within the body limit),
//! call the handler (watching the socket, so a client that leaves drops its request), write the response,
//! and either go round again (keep-alive, pipelining) or close.
//! One request at a time, so responses leave in request order; pipelined requests wait in the read buffer.
//! A task may also start part-way through its first request, where the accept loop's inline path
//! (`super::inline`) had to stop: see [`Resume`].

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, timeout, timeout_at};

use ordo_http1::{ChunkError, ChunkedDecoder};

use super::parse::{Framing, Head, HeadError, parse_head};
use super::write::{WriteCtx, encode_whole, split_file, write_all_timeout, write_response};
use super::{Body, Handler, Limits, Request, Response, Version, shutdown_signalled};

/// Initial read-buffer size; also the least free space kept before each read.
pub(crate) const READ_CHUNK: usize = 8 * 1024;
/// Buffers that grew beyond this (a large body) are given back between requests.
const KEEP_CAPACITY: usize = 64 * 1024;
/// After an error answer: how long and how much unread input to drain so the close does not turn into a
/// reset that could destroy the answer before the client reads it.
const LINGER_TIME: Duration = Duration::from_millis(500);
const LINGER_BYTES: usize = 256 * 1024;

/// Buffers given up by connections going idle, kept per thread for the next connection that has input to read
/// or a response to write. An idle keep-alive connection holds no buffer; taking them back from malloc for
/// each request cost a large-chunk allocation and free, and when a freed chunk met the top of the heap, a trim
/// (brk) and page faults to grow it again. At most `SPARE_BUFS` of each kind per thread, of at most
/// `SPARE_BUF_MAX` bytes: a bounded amount, not a per-connection one.
const SPARE_BUFS: usize = 8;
const SPARE_BUF_MAX: usize = 16 * 1024;

type SparePool = std::cell::RefCell<Vec<BytesMut>>;

thread_local! {
    static SPARE_READ: SparePool = const { std::cell::RefCell::new(Vec::new()) };
    static SPARE_WRITE: SparePool = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer from this thread's spares (or a new, unallocated one).
fn spare_take(pool: &'static std::thread::LocalKey<SparePool>) -> BytesMut {
    pool.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Leaves `buf` empty and unallocated; its allocation goes to this thread's spares when there is room and it
/// is neither tiny nor large.
fn spare_give(pool: &'static std::thread::LocalKey<SparePool>, buf: &mut BytesMut) {
    let mut b = std::mem::take(buf);
    if !(1024..=SPARE_BUF_MAX).contains(&b.capacity()) {
        return;
    }
    b.clear();
    let _ = pool.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() < SPARE_BUFS {
                p.push(b);
            }
        }
    });
}

/// Frees this thread's spare connection buffers (before giving free heap memory back to the kernel).
pub(crate) fn drop_spare_buffers() {
    for pool in [&SPARE_READ, &SPARE_WRITE] {
        let _ = pool.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                *p = Vec::new();
            }
        });
    }
}

/// The byte stream a connection is served over: a plain TCP socket or a TLS stream. Besides reading and
/// writing, the loop needs two things whose best form depends on the transport.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Sets TCP_NODELAY on the underlying socket.
    fn nodelay(&self) -> std::io::Result<()>;
    /// Writes the last bytes of a connection that is closed right after (within `limit`).
    fn write_last(
        &mut self,
        buf: &[u8],
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Resolves when a read may find input (or the end of it), without reading: an idle connection waits here
    /// holding no buffer. A transport that cannot tell without reading (TLS may hold decrypted bytes already)
    /// resolves at once.
    fn input_ready(&self) -> impl Future<Output = std::io::Result<()>> + Send;
    /// What the TLS session tells (None for plain TCP).
    fn tls_info(&self) -> Option<super::TlsInfo> {
        None
    }
    /// Writes a response's rendered `head`, then `len` bytes of `file` from `offset`; `limit` bounds each wait
    /// for the client to take more. A file that turns out shorter (it shrank while being sent) is an error:
    /// the connection must close, as the promised length cannot be kept.
    fn send_file(
        &mut self,
        head: &[u8],
        file: std::fs::File,
        offset: u64,
        len: u64,
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Writes `parts` in order (a streamed body's piece and its framing), whole, waiting at most `limit`
    /// each time the client takes nothing. `more`: more of the response follows, so a TCP socket may keep
    /// a partial segment back for it (MSG_MORE, as HAProxy sends body data): on loopback one segment, and
    /// one wakeup of the client, per 64 KiB instead of per piece. A write with `more` must be followed by
    /// one without it or by [`Transport::push`]. TLS writes (and flushes) each part as it comes.
    fn write_parts(
        &mut self,
        parts: &[&[u8]],
        more: bool,
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Sends at once what writes with `more` held back (nothing to do for TLS, which flushes each write).
    fn push(&self) -> std::io::Result<()>;
}

impl Transport for TcpStream {
    fn nodelay(&self) -> std::io::Result<()> {
        self.set_nodelay(true)
    }

    fn input_ready(&self) -> impl Future<Output = std::io::Result<()>> + Send {
        self.readable()
    }

    fn write_last(
        &mut self,
        buf: &[u8],
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send {
        write_all_then_close(self, buf, limit)
    }

    fn send_file(
        &mut self,
        head: &[u8],
        file: std::fs::File,
        offset: u64,
        len: u64,
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send {
        sendfile_tcp(self, head, file, offset, len, limit)
    }

    fn write_parts(
        &mut self,
        parts: &[&[u8]],
        more: bool,
        limit: Duration,
    ) -> impl Future<Output = std::io::Result<()>> + Send {
        send_parts_tcp(self, parts, more, limit)
    }

    /// Setting TCP_NODELAY (again) sends the socket's pending partial segment at once.
    fn push(&self) -> std::io::Result<()> {
        self.set_nodelay(true)
    }
}

/// [`Transport::write_parts`] on TCP: sendmsg(2) of all the parts at once, going on after a partial send
/// from where it stopped.
async fn send_parts_tcp(
    stream: &TcpStream,
    parts: &[&[u8]],
    more: bool,
    limit: Duration,
) -> std::io::Result<()> {
    let (mut i, mut off) = (0, 0); // the first byte not sent: parts[i][off]
    while i < parts.len() {
        // up to four parts a call (a piece and its framing are three), without an allocation
        let mut slices = [std::io::IoSlice::new(&[]); 4];
        let mut k = 0;
        for part in std::iter::once(&parts[i][off..]).chain(parts[i + 1..].iter().copied()) {
            if k == slices.len() {
                break;
            }
            slices[k] = std::io::IoSlice::new(part);
            k += 1;
        }
        // (with parts left out of this call, more follows whatever `more` says)
        let more = more || i + k < parts.len();
        match stream.try_io(Interest::WRITABLE, || {
            ordo_sys::net::send_vectored(stream, &slices[..k], more)
        }) {
            Ok(mut n) => {
                while i < parts.len() && n >= parts[i].len() - off {
                    n -= parts[i].len() - off;
                    (i, off) = (i + 1, 0);
                }
                off += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                writable_within(stream, limit).await?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Most bytes one sendfile(2) call is asked for, so one large response does not hold the thread for long
/// (the kernel stops earlier anyway when the socket's send buffer is full).
const SENDFILE_CHUNK: u64 = 1 << 20;

/// Waits until `stream` can take more, for at most `limit`.
async fn writable_within(stream: &TcpStream, limit: Duration) -> std::io::Result<()> {
    match timeout(limit, stream.writable()).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client did not read the response",
        )),
    }
}

/// The head with MSG_MORE (so it shares a segment with the file's first bytes), then the file by
/// sendfile(2): the kernel sends it from the page cache without copying it through user space. Partial sends
/// go on from where they stopped; a full send buffer waits for writability through the reactor.
async fn sendfile_tcp(
    stream: &TcpStream,
    head: &[u8],
    file: std::fs::File,
    mut offset: u64,
    len: u64,
    limit: Duration,
) -> std::io::Result<()> {
    let end = offset.saturating_add(len);
    if !head.is_empty() {
        send_parts_tcp(stream, &[head], len > 0, limit).await?;
    }
    while offset < end {
        let want = (end - offset).min(SENDFILE_CHUNK) as usize;
        match stream.try_io(Interest::WRITABLE, || {
            ordo_sys::net::sendfile(stream, &file, &mut offset, want)
        }) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "file shrank while it was sent",
                ));
            }
            // a fast client on loopback could keep the loop going: let other tasks run between chunks
            Ok(_) => tokio::task::consume_budget().await,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                writable_within(stream, limit).await?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A handler's response still to come, boxed so it can move from the accept loop into a task.
pub(crate) type PendingResponse = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What the connection loop needs from a request head once its handler has it.
#[derive(Clone, Copy)]
pub(crate) struct ReqInfo {
    pub version: Version,
    pub head_request: bool,
    /// Whether the client asked to keep the connection open.
    pub keep_alive: bool,
}

impl ReqInfo {
    /// How to write the response to this request, the connection's `served`-th: kept open if the client
    /// asked, the server is not shutting down and `max_requests_per_connection` allows another.
    pub(crate) fn write_ctx(&self, served: u64, shutting_down: bool, limits: &Limits) -> WriteCtx {
        WriteCtx {
            version: self.version,
            head_request: self.head_request,
            keep_alive: self.keep_alive
                && !shutting_down
                && limits
                    .max_requests_per_connection
                    .is_none_or(|m| served < m),
            write_timeout: limits.idle_timeout,
        }
    }
}

/// Where a connection task starts.
pub(crate) enum Resume {
    /// At the top of the loop: read the next request (the read buffer may already hold part of it).
    Read,
    /// The first request's handler was started and has not answered yet (queued for a worker, say).
    Handle { fut: PendingResponse, info: ReqInfo },
    /// The first response is ready but needs more than one plain write (a file, a stream, a large body).
    Write { resp: Response, info: ReqInfo },
    /// The first response was partly written: send the rest, then go on (`keep`) or close.
    Rest { rest: Bytes, keep: bool },
}

/// A connection task's starting state.
pub(crate) struct Start {
    /// Bytes received and not yet consumed (a partial head, or requests pipelined after the first).
    pub rbuf: BytesMut,
    /// Responses already written.
    pub served: u64,
    /// Whether TCP_NODELAY is already set.
    pub nodelay: bool,
    pub resume: Resume,
}

impl Start {
    /// A connection nothing has been read from.
    pub(crate) fn fresh() -> Start {
        Start {
            rbuf: BytesMut::new(),
            served: 0,
            nodelay: false,
            resume: Resume::Read,
        }
    }
}

enum ReadOutcome {
    Data,
    Closed,
    TimedOut,
}

fn reserve(buf: &mut BytesMut) {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_CHUNK);
    }
}

async fn read_until<S: Transport>(
    stream: &mut S,
    buf: &mut BytesMut,
    deadline: Instant,
) -> ReadOutcome {
    reserve(buf);
    match timeout_at(deadline, stream.read_buf(buf)).await {
        Err(_) => ReadOutcome::TimedOut,
        Ok(Ok(0)) | Ok(Err(_)) => ReadOutcome::Closed,
        Ok(Ok(_)) => ReadOutcome::Data,
    }
}

/// Why a request could not be read whole: the connection closes, after an answer or without one.
enum Stop {
    /// The client closed the connection or it failed: nobody to answer.
    Close,
    /// Answer with this status and message, then close.
    Fail(u16, &'static str),
}

/// Reads more of a body into `rbuf`, allowing `head_timeout` between reads.
async fn read_more<S: Transport>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    limits: &Limits,
) -> Result<(), Stop> {
    match read_until(stream, rbuf, Instant::now() + limits.head_timeout).await {
        ReadOutcome::Data => Ok(()),
        ReadOutcome::Closed => Err(Stop::Close),
        ReadOutcome::TimedOut => Err(Stop::Fail(408, "request body not received in time")),
    }
}

/// Reads the body a head announced (`Content-Length` bytes, or chunks decoded within the body limit).
async fn read_body<S: Transport>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    framing: Framing,
    limits: &Limits,
) -> Result<Bytes, Stop> {
    match framing {
        Framing::None => Ok(Bytes::new()),
        Framing::Length(n) => {
            let n = n as usize;
            while rbuf.len() < n {
                rbuf.reserve((n - rbuf.len()).min(1 << 20));
                read_more(stream, rbuf, limits).await?;
            }
            Ok(rbuf.split_to(n).freeze())
        }
        Framing::Chunked => {
            let mut dec = ChunkedDecoder::new(limits.max_body_bytes);
            let mut body = BytesMut::new();
            loop {
                match dec.decode(rbuf, |c| body.extend_from_slice(c)) {
                    Ok(true) => return Ok(body.freeze()),
                    Ok(false) => read_more(stream, rbuf, limits).await?,
                    Err(ChunkError::TooLarge) => {
                        return Err(Stop::Fail(413, "request body too large"));
                    }
                    Err(ChunkError::Invalid(msg)) => return Err(Stop::Fail(400, msg)),
                }
            }
        }
    }
}

/// The request a parsed head (whose bytes are `bytes`) and its body make, and what the connection loop keeps
/// of the head.
pub(crate) fn request_from(
    mut head: Head,
    bytes: Bytes,
    body: Bytes,
    peer: SocketAddr,
) -> (Request, ReqInfo) {
    let info = ReqInfo {
        version: head.version,
        head_request: head.method == "HEAD",
        keep_alive: head.keep_alive,
    };
    let headers = head.take_headers(bytes);
    let req = Request {
        method: head.method,
        target: super::Target::Head(head.target),
        path: head.path,
        query: head.query,
        version: info.version,
        headers,
        body,
        peer,
        keep_alive: info.keep_alive,
        tls: None,
        trusted_peer: false,
        request_id: None,
    };
    (req, info)
}

/// A connection's state between exchanges.
struct State {
    /// Bytes received and not yet consumed; no allocation while the connection is idle.
    rbuf: BytesMut,
    /// The response being written; no allocation while the connection is idle.
    wbuf: BytesMut,
    served: u64,
    nodelay: bool,
}

/// What follows an exchange.
enum After {
    KeepOn,
    Close,
}

pub(crate) fn serve<H: Handler, S: Transport>(
    mut stream: S,
    peer: SocketAddr,
    handler: Arc<H>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
    start: Start,
) -> impl Future<Output = ()> + Send {
    // TCP_NODELAY is set before the first write that Nagle could hold back (see `needs_nodelay`), so a
    // one-response connection (`Connection: close`, HTTP/1.0) saves the setsockopt.
    let Start {
        rbuf,
        served,
        nodelay,
        resume,
    } = start;
    let mut st = State {
        rbuf,
        wbuf: BytesMut::new(),
        served,
        nodelay,
    };
    // (boxed: a connection holds its rarely used starting point only as a pointer)
    let mut resume = match resume {
        Resume::Read => None,
        other => Some(Box::new(other)),
    };
    // Built here rather than as an `async fn`, whose future would keep the arguments beside the values made
    // from them: everything below is what an idle connection holds.
    async move {
        // one shutdown future for the connection's life, polled while it waits between requests
        let mut stop_rx = shutdown.clone();
        let mut stop = std::pin::pin!(shutdown_signalled(&mut stop_rx));
        let accepted = Instant::now();
        loop {
            let mut deadline = None;
            if resume.is_none() && st.rbuf.is_empty() {
                // Wait for the first byte of the next request: the head timeout on a fresh connection, the idle
                // timeout between requests; shutdown closes a connection that is between requests.
                let wait_until = if st.served == 0 {
                    accepted + limits.head_timeout
                } else {
                    Instant::now() + limits.idle_timeout
                };
                // Idle: no buffers held while waiting (an idle keep-alive connection is its task and its
                // socket's registration); the read buffer is taken once input is there.
                spare_give(&SPARE_READ, &mut st.rbuf);
                spare_give(&SPARE_WRITE, &mut st.wbuf);
                let read = async {
                    stream.input_ready().await?;
                    st.rbuf = spare_take(&SPARE_READ);
                    reserve(&mut st.rbuf);
                    stream.read_buf(&mut st.rbuf).await
                };
                let r = tokio::select! {
                    biased;
                    r = timeout_at(wait_until, read) => r,
                    _ = &mut stop => return,
                };
                match r {
                    Ok(Ok(n)) if n > 0 => {}
                    _ => return,
                }
                deadline = Some(if st.served == 0 {
                    accepted + limits.head_timeout
                } else {
                    Instant::now() + limits.head_timeout
                });
            }
            let resume = resume.take().map_or(Resume::Read, |r| *r);
            // One request and its response, in a future of its own, allocated only while it runs: what an
            // exchange needs (the handler's future, the writes, the error paths) is not part of the connection's
            // future, which is what an idle keep-alive connection holds.
            let exchange = exchange(
                &mut stream,
                &mut st,
                resume,
                deadline,
                peer,
                &*handler,
                &limits,
                &shutdown,
            );
            match Box::pin(exchange).await {
                After::KeepOn => {}
                After::Close => return,
            }
        }
    }
}

/// Serves one request from `resume` (reading it unless a `Resume` says otherwise; `deadline` for its head
/// when input has already been waited for) and writes its response.
#[allow(clippy::too_many_arguments)]
async fn exchange<H: Handler, S: Transport>(
    stream: &mut S,
    st: &mut State,
    resume: Resume,
    deadline: Option<Instant>,
    peer: SocketAddr,
    handler: &H,
    limits: &Limits,
    shutdown: &watch::Receiver<bool>,
) -> After {
    let (resp, info) = match resume {
        Resume::Handle { mut fut, info } => {
            match handle_watching(stream, &mut st.rbuf, fut.as_mut(), limits).await {
                Some(resp) => (resp, info),
                None => return After::Close,
            }
        }
        Resume::Write { resp, info } => (resp, info),
        Resume::Rest { rest, keep } => {
            if write_all_timeout(stream, &rest, limits.idle_timeout)
                .await
                .is_err()
            {
                return After::Close;
            }
            if !keep {
                if !st.rbuf.is_empty() {
                    linger_close(stream).await;
                }
                return After::Close;
            }
            return After::KeepOn;
        }
        Resume::Read => {
            let deadline = deadline.unwrap_or_else(|| Instant::now() + limits.head_timeout);
            let head = loop {
                match parse_head(&st.rbuf, limits.max_head_bytes, limits.max_uri_bytes) {
                    Ok(h) => break h,
                    Err(HeadError::Status(status, msg)) => {
                        fail(stream, &mut st.wbuf, status, msg, limits).await;
                        return After::Close;
                    }
                    Err(HeadError::Partial) => {
                        match read_until(stream, &mut st.rbuf, deadline).await {
                            ReadOutcome::Data => {}
                            ReadOutcome::Closed => return After::Close,
                            ReadOutcome::TimedOut => {
                                let msg = "request head not received in time";
                                fail(stream, &mut st.wbuf, 408, msg, limits).await;
                                return After::Close;
                            }
                        }
                    }
                }
            };
            // The head's bytes go with the request (its header fields point into them): split off the read
            // buffer, which shares its allocation with them until the request is done.
            let head_bytes = st.rbuf.split_to(head.len).freeze();

            if let Framing::Length(n) = head.framing {
                if n > limits.max_body_bytes {
                    fail(stream, &mut st.wbuf, 413, "request body too large", limits).await;
                    return After::Close;
                }
            }
            // The client waits for a go-ahead before sending a body it announced (and not yet sent).
            if head.expect_continue
                && !matches!(head.framing, Framing::None)
                && st.rbuf.is_empty()
                && write_all_timeout(
                    stream,
                    b"HTTP/1.1 100 Continue\r\n\r\n",
                    limits.idle_timeout,
                )
                .await
                .is_err()
            {
                return After::Close;
            }
            let body = match read_body(stream, &mut st.rbuf, head.framing, limits).await {
                Ok(body) => body,
                Err(Stop::Close) => return After::Close,
                Err(Stop::Fail(status, msg)) => {
                    fail(stream, &mut st.wbuf, status, msg, limits).await;
                    return After::Close;
                }
            };
            let (mut req, info) = request_from(head, head_bytes, body, peer);
            req.tls = stream.tls_info();
            let fut = std::pin::pin!(handler.handle(req));
            match handle_watching(stream, &mut st.rbuf, fut, limits).await {
                Some(resp) => (resp, info),
                // The client closed (or reset) the connection while its request waited or was served: the
                // request was dropped with it (its queue place or permit released); nobody is left to answer.
                None => return After::Close,
            }
        }
    };
    st.served += 1;
    if let Body::Upgrade { .. } = resp.body {
        return switch_protocols(stream, st, resp, limits).await;
    }
    let mut ctx = info.write_ctx(st.served, *shutdown.borrow(), limits);
    if !st.nodelay && needs_nodelay(st.served, ctx.keep_alive, &resp.body) {
        let _ = stream.nodelay();
        st.nodelay = true;
    }
    let wbuf = &mut st.wbuf;
    if wbuf.capacity() == 0 {
        *wbuf = spare_take(&SPARE_WRITE);
        wbuf.reserve(4 * 1024);
    }
    let written = match encode_whole(wbuf, resp, &mut ctx) {
        // the last bytes before a close (and no input left to drain): the FIN shares their segment
        Ok(()) if !ctx.keep_alive && st.rbuf.is_empty() => {
            stream.write_last(wbuf, ctx.write_timeout).await
        }
        Ok(()) => write_all_timeout(stream, wbuf, ctx.write_timeout).await,
        Err(resp) => match split_file(wbuf, resp, &mut ctx) {
            Ok((file, offset, len)) => {
                stream
                    .send_file(wbuf, file, offset, len, ctx.write_timeout)
                    .await
            }
            Err(resp) => write_response(stream, wbuf, resp, &mut ctx).await,
        },
    };
    if written.is_err() {
        return After::Close;
    }
    if !ctx.keep_alive {
        // Input the client sent after this request (pipelined beyond a `Connection: close`) would turn a
        // plain close into a reset that can destroy the response: drain it first. Otherwise close at once.
        if !st.rbuf.is_empty() {
            linger_close(stream).await;
        }
        return After::Close;
    }
    // (an idle wait gives both back; pipelined requests skip it)
    if st.rbuf.is_empty() && st.rbuf.capacity() > KEEP_CAPACITY {
        st.rbuf = BytesMut::new();
    }
    if st.wbuf.capacity() > KEEP_CAPACITY {
        st.wbuf = BytesMut::new();
    }
    After::KeepOn
}

/// A `101 Switching Protocols` (a proxied WebSocket): the head as the handler gave it, then the connection
/// belongs to the tunnel, with what the client sent after its request; it is closed when the tunnel ends.
async fn switch_protocols<S: Transport>(
    stream: &mut S,
    st: &mut State,
    resp: Response,
    limits: &Limits,
) -> After {
    let Body::Upgrade { head, tunnel } = resp.body else {
        return After::Close;
    };
    let mut out = BytesMut::with_capacity(256 + head.len());
    out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n");
    for (k, v) in &resp.headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(&head);
    out.extend_from_slice(b"\r\n");
    let _ = stream.nodelay();
    if write_all_timeout(stream, &out, limits.idle_timeout)
        .await
        .is_err()
    {
        return After::Close;
    }
    let early = st.rbuf.split().freeze();
    tunnel.run(stream, early).await;
    After::Close
}

/// Writes the last bytes of a connection that is closed right after, with MSG_MORE: the kernel holds the
/// final partial segment back, so the close's FIN leaves in it instead of in a segment of its own (one
/// packet and one ACK fewer for both ends, as nginx gets from TCP_CORK).
async fn write_all_then_close(
    stream: &TcpStream,
    mut buf: &[u8],
    limit: Duration,
) -> std::io::Result<()> {
    let send = async {
        while !buf.is_empty() {
            stream.writable().await?;
            match stream.try_io(Interest::WRITABLE, || {
                ordo_sys::net::send(stream, buf, true)
            }) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    match timeout(limit, send).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "client did not read the response",
        )),
    }
}

/// Largest body written without TCP_NODELAY: one write of head and body that fits a segment on loopback and
/// the initial congestion window elsewhere.
const NAGLE_FREE_BODY: u64 = 8 * 1024;

/// Whether a response needs TCP_NODELAY. Nagle's algorithm holds back a small segment only while earlier
/// data is unacknowledged, so the first response of a connection that closes after it, written in one
/// small write, cannot be delayed. Anything else — a second response (pipelined responses go out
/// back-to-back), a kept-alive connection, a streamed or large body written in several pieces — gets it.
pub(crate) fn needs_nodelay(served: u64, keep_alive: bool, body: &Body) -> bool {
    let one_small_write = match body {
        Body::Empty | Body::Bytes(_) | Body::Prerendered { .. } => {
            body.len().is_some_and(|n| n <= NAGLE_FREE_BODY)
        }
        Body::File { .. }
        | Body::Stream { .. }
        | Body::PrerenderedStream { .. }
        | Body::Upgrade { .. } => false,
    };
    served > 1 || keep_alive || !one_small_write
}

/// Runs the handler while watching the socket, so a client that gives up is noticed before its request is
/// served. The handler is polled first: when it answers at once (the common keep-alive case) the socket is
/// not touched. Otherwise bytes that arrive meanwhile (pipelined requests) are appended to `rbuf`, at most
/// `max_head_bytes` of them, after which only the handler is awaited; end of input or a connection error
/// returns `None`, and the caller's dropping the handler future releases whatever it holds (a queued
/// waiter, a permit, a backend call).
async fn handle_watching<S: Transport, F: Future<Output = Response> + ?Sized>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    mut fut: Pin<&mut F>,
    limits: &Limits,
) -> Option<Response> {
    let base = rbuf.len();
    loop {
        let room = limits
            .max_head_bytes
            .saturating_sub(rbuf.len().saturating_sub(base));
        if room == 0 {
            return Some(fut.await);
        }
        reserve(rbuf);
        let mut limited = (&mut *rbuf).limit(room);
        tokio::select! {
            biased;
            resp = &mut fut => return Some(resp),
            r = stream.read_buf(&mut limited) => match r {
                Ok(0) | Err(_) => {
                    tracing::debug!("client closed the connection before its response: request dropped");
                    return None;
                }
                Ok(_) => {}
            },
        }
    }
}

/// Answers a request the connection cannot go on from, then closes.
async fn fail<S: Transport>(
    stream: &mut S,
    wbuf: &mut BytesMut,
    status: u16,
    msg: &str,
    limits: &Limits,
) {
    tracing::debug!(status, msg, "closing connection after a bad request");
    let mut ctx = WriteCtx {
        version: super::Version::Http11,
        head_request: false,
        keep_alive: false,
        write_timeout: limits.idle_timeout.min(Duration::from_secs(5)),
    };
    if write_response(stream, wbuf, Response::text(status, msg), &mut ctx)
        .await
        .is_ok()
    {
        linger_close(stream).await;
    }
}

/// Half-closes, then drains (bounded) what the client still sends, so the kernel does not answer unread
/// input with a reset that would discard our last response.
async fn linger_close<S: Transport>(stream: &mut S) {
    if stream.shutdown().await.is_err() {
        return;
    }
    // on the heap: an array here would make every connection's future (moved on spawn) 8 KiB larger
    let mut sink = vec![0u8; 4096];
    let mut drained = 0usize;
    let _ = timeout(LINGER_TIME, async {
        while drained < LINGER_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Next;
    impl Handler for Next {
        fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
            let text = format!("next {}", req.path);
            async move { Response::text(200, &text) }
        }
    }

    #[tokio::test]
    async fn a_task_finishes_a_partly_written_response_then_reads_on() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, peer) = l.accept().await.unwrap();
        let (_tx, rx) = watch::channel(false);
        let start = Start {
            rbuf: BytesMut::from(&b"GET /p HTTP/1.1\r\nHost: t\r\n\r\n"[..]),
            served: 1,
            nodelay: false,
            resume: Resume::Rest {
                rest: Bytes::from_static(b"...rest of the first|"),
                keep: true,
            },
        };
        let limits = Arc::new(Limits::default());
        let task = tokio::spawn(serve(server, peer, Arc::new(Next), limits, rx, start));
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(b"next /p\n") {
            let n = timeout(Duration::from_secs(5), client.read(&mut buf))
                .await
                .expect("response within 5 s")
                .unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        // the rest first, then the pipelined request's response on the same connection
        assert!(
            text.starts_with("...rest of the first|HTTP/1.1 200 OK\r\n"),
            "{text}"
        );
        drop(client);
        timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn a_task_closes_after_the_rest_of_a_last_response() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (server, peer) = l.accept().await.unwrap();
        let (_tx, rx) = watch::channel(false);
        let start = Start {
            rbuf: BytesMut::new(),
            served: 1,
            nodelay: false,
            resume: Resume::Rest {
                rest: Bytes::from_static(b"end"),
                keep: false,
            },
        };
        let limits = Arc::new(Limits::default());
        tokio::spawn(serve(server, peer, Arc::new(Next), limits, rx, start));
        let mut got = Vec::new();
        timeout(Duration::from_secs(5), client.read_to_end(&mut got))
            .await
            .expect("closed within 5 s")
            .unwrap();
        assert_eq!(got, b"end");
    }

    #[test]
    fn nodelay_only_where_nagle_could_delay() {
        let small = || Body::Bytes(Bytes::from_static(b"hello"));
        // the first and last response of a connection, one small write: no setsockopt needed
        assert!(!needs_nodelay(1, false, &small()));
        assert!(!needs_nodelay(1, false, &Body::Empty));
        // kept alive, a later response, or a body written in pieces: Nagle could hold a segment back
        assert!(needs_nodelay(1, true, &small()));
        assert!(needs_nodelay(2, false, &small()));
        let big = Body::Bytes(Bytes::from(vec![0u8; NAGLE_FREE_BODY as usize + 1]));
        assert!(needs_nodelay(1, false, &big));
        let (_tx, rx) = tokio::sync::mpsc::channel(1);
        assert!(needs_nodelay(1, false, &Body::Stream { rx, len: Some(1) }));
    }
}
