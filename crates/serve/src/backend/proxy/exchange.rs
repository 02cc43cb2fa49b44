//! One request and its response over one upstream connection: writing the request and body, reading the
//! response head (skipping 1xx) within its timeouts, buffering or streaming the body by its framing, giving
//! the connection back to the pool only when it ended cleanly, and the gateway status of each failure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use ordo_http1::{
    BodyEvent, BodyReader, HeadEvent, ReaderLimits, ResponseFraming, ResponseReadError,
    ResponseReader, trim_ows,
};

use super::*;
use crate::http::{Body, Request, Response};
use crate::tls::UpstreamStream;

pub(super) enum ExchangeError {
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

impl ExchangeError {
    /// What the retry rule needs to know of it.
    pub(super) fn failure(&self) -> retry::Failure {
        match self {
            ExchangeError::Stale { sent_any, .. } => retry::Failure::Stale {
                sent_any: *sent_any,
            },
            ExchangeError::Connect(_) | ExchangeError::ConnectTimeout | ExchangeError::Tls(_) => {
                retry::Failure::NotSent
            }
            ExchangeError::Timeout(_) => retry::Failure::Timeout,
            ExchangeError::Bad(_) => retry::Failure::Bad,
        }
    }
}

/// The detail for the log (never for the client: it can name the upstream's address or a system error).
impl std::fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExchangeError::ConnectTimeout => f.write_str("connect timed out"),
            ExchangeError::Connect(d)
            | ExchangeError::Tls(d)
            | ExchangeError::Stale { msg: d, .. }
            | ExchangeError::Timeout(d)
            | ExchangeError::Bad(d) => f.write_str(d),
        }
    }
}

/// What the upstream's next head was.
pub(super) enum HeadStep {
    /// An interim (1xx) head of this many bytes, skipped.
    Informational(usize),
    /// The final head and the reader of its body.
    Final(ParsedHead, BodyReader),
}

pub(super) struct ParsedHead {
    pub(super) status: u16,
    pub(super) framing: ResponseFraming,
    /// As declared (forwarded on a response without a body: the answer to HEAD, 304).
    pub(super) content_length: Option<u64>,
    pub(super) reusable: bool,
    pub(super) head_len: usize,
}

/// Buffers of buffered responses that are at most this large are kept for reuse when their response has been
/// written, up to [`SPARE_COUNT`] per thread.
pub(super) const SPARE_MAX: usize = 32 * 1024;

pub(super) const SPARE_COUNT: usize = 16;

thread_local! {
    static SPARE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An empty buffer with room for `cap` bytes: a recycled one when this thread has one.
pub(super) fn spare_buffer(cap: usize) -> Vec<u8> {
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
pub(super) struct Recycled(Vec<u8>);

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

/// The answer to a failed exchange: 502 or 504 with a body that says what kind of failure it was and
/// nothing about the upstream (no address, no system error); those go to the log.
pub(super) fn gateway_error(up: &Upstream, e: ExchangeError) -> Response {
    let (status, public, detail) = gateway_parts(e);
    tracing::warn!(upstream = %up.addr, status, "proxy: {detail}");
    gateway_text(status, public)
}

/// A failed exchange's status, what the client is told, and what the log is told.
pub(super) fn gateway_parts(e: ExchangeError) -> (u16, &'static str, String) {
    match e {
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
    }
}

/// The client's answer to a failed exchange ([`gateway_parts`]).
pub(super) fn gateway_text(status: u16, public: &str) -> Response {
    let what = if status == 504 {
        "gateway timeout"
    } else {
        "bad gateway"
    };
    Response::text(status, &format!("{what}: {public}\n"))
}

/// The largest response body read whole: `configured` (a route's `buffer_max_bytes`), else the default for
/// the client's protocol ([`DEFAULT_BUFFER_MAX_BYTES`]).
pub(super) fn whole_body_limit(configured: Option<u64>, version: crate::http::Version) -> u64 {
    let (http1, http2) = DEFAULT_BUFFER_MAX_BYTES;
    configured.unwrap_or(match version {
        crate::http::Version::Http2 => http2,
        _ => http1,
    })
}

/// The most of a streamed body read from the upstream at once, for a route that reads bodies up to
/// `whole_limit` whole: a quarter of that, between 16 KiB and 256 KiB. A stream holds at most two such
/// chunks ahead of its client: one the client's connection task waits to send (HTTP/2 counts it in the
/// connection's held bytes) and one in the channel; the next is read only when the channel has taken it
/// out, so a client that reads nothing stalls the upstream socket instead of growing memory — half of what
/// reading a body whole may take. At the defaults: 16 KiB for HTTP/2 clients (many streams per
/// connection; HAProxy's buffers are 16 KiB too), 64 KiB for HTTP/1.x ones (one response at a time: a
/// read and a send per 64 KiB cost 0.6× the CPU of four of 16 KiB, measured in docs/serve-http.md).
pub(super) fn stream_chunk(whole_limit: u64) -> usize {
    (whole_limit / 4).clamp(16 * 1024, 256 * 1024) as usize
}

/// Streams the rest of a response body to the client's connection task; returns the upstream connection
/// to the pool when the body ended cleanly on a reusable connection. `tx` is the sending side of a channel
/// of one: each chunk is read from the upstream only once the one before it has been taken.
pub(super) async fn stream_body(
    mut conn: UpConn,
    up: Arc<Upstream>,
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    mut body: BodyReader,
    reusable: bool,
    t: Duration,
    chunk: usize,
) {
    'chunks: loop {
        // the channel's place first, the read after: nothing is read ahead of what the client takes
        let Ok(mut permit) = tx.reserve().await else {
            return; // the client is gone
        };
        loop {
            // a Content-Length or close-delimited body's bytes are split off the read buffer, not copied
            match body.decode_bytes(&mut conn.buf) {
                Ok((data, done)) => {
                    if done {
                        if !data.is_empty() {
                            permit.send(Ok(data));
                        }
                        break 'chunks;
                    }
                    if !data.is_empty() {
                        permit.send(Ok(data));
                        continue 'chunks;
                    }
                }
                Err(e) => {
                    let detail = format!("bad upstream chunking: {}", chunk_detail(e));
                    cut(&up, &detail);
                    permit.send(Err(std::io::Error::other(detail)));
                    return;
                }
            }
            conn.buf.reserve(chunk);
            let read = match conn.read_now(chunk).await {
                Some(r) => Some(r),
                None => {
                    // the upstream has nothing yet: the client's side sends what it holds back (an empty
                    // chunk, see `Body::Stream`) while this waits
                    permit.send(Ok(Bytes::new()));
                    let deadline = tokio::time::Instant::now() + t;
                    let read = conn.read_at_most_by(deadline, chunk).await;
                    permit = match tx.reserve().await {
                        Ok(p) => p,
                        Err(_) => return,
                    };
                    read
                }
            };
            match read {
                None => {
                    cut(&up, "upstream body timed out");
                    permit.send(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "upstream body timed out",
                    )));
                    return;
                }
                Some(Ok(0)) | Some(Err(_)) => {
                    if body.end_of_input().is_err() {
                        cut(&up, "upstream closed mid-body");
                        permit.send(Err(std::io::Error::other("upstream closed mid-body")));
                    }
                    // close-delimited: the end of the connection is the end of the body
                    return;
                }
                Some(Ok(_)) => {}
            }
        }
    }
    if reusable {
        up.checkin(conn, Instant::now());
    }
}

/// A streamed body the upstream failed after the response head went out: the client's connection is cut
/// (its response ends short, which the client sees), and the operator gets the reason, as for a 502.
fn cut(up: &Upstream, detail: &str) {
    tracing::warn!(upstream = %up.addr, "proxy: {detail}; the response, already under way, was cut");
}

/// What was wrong with a body the reader refused (only a chunked body can be refused).
fn chunk_detail(e: ResponseReadError) -> String {
    match e {
        ResponseReadError::Chunked(c) => c.to_string(),
        other => other.to_string(),
    }
}

impl ProxyBackend {
    /// The largest body read whole for `req`: the route's `buffer_max_bytes`, else the default for the
    /// client's protocol ([`super::DEFAULT_BUFFER_MAX_BYTES`]).
    fn buffer_max_bytes(&self, req: &Request) -> u64 {
        whole_body_limit(self.cfg.buffer_max_bytes, req.version)
    }

    pub(super) async fn exchange(
        &self,
        mut conn: UpConn,
        req: &Request,
        up: &Arc<Upstream>,
    ) -> Result<Response, ExchangeError> {
        let t = self.cfg.read_timeout;
        let mut head = std::mem::take(&mut conn.wbuf);
        let ws_key = tunnel::websocket_key(req);
        self.render_request(req, up, ws_key.as_deref(), &mut head);
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
        let upgrade = tunnel::upgrade_of(req);
        // Interim heads are bounded by response_head_timeout, not by a count.
        let mut reader = ResponseReader::new(
            head_request,
            ReaderLimits {
                max_head_bytes: self.cfg.max_response_head_bytes,
                max_informational: u32::MAX,
                max_chunked_bytes: u64::MAX,
            },
        );
        let (parsed, mut body) = loop {
            // (nothing to parse before the first read)
            let step = if conn.buf.is_empty() {
                None
            } else {
                self.parse_response_head(&mut reader, &mut conn.buf, &mut out)?
            };
            match step {
                Some(HeadStep::Informational(len)) => {
                    conn.buf.advance(len);
                    continue;
                }
                Some(HeadStep::Final(p, _)) if p.status == 101 && upgrade.is_none() => {
                    return Err(ExchangeError::Bad(
                        "upstream switched protocols unasked".into(),
                    ));
                }
                Some(HeadStep::Final(p, body)) => break (p, body),
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
        if let (101, Some(proto)) = (parsed.status, upgrade) {
            if ws_key.as_deref().is_some_and(|k| !tunnel::accepts(&out, k)) {
                return Err(ExchangeError::Bad(
                    "upstream's Sec-WebSocket-Accept does not match the key sent".into(),
                ));
            }
            let early = conn.buf.split().freeze();
            return Ok(Response {
                status: 101,
                headers: vec![
                    ("Connection".into(), "Upgrade".into()),
                    ("Upgrade".into(), proto.into()),
                ],
                body: Body::Upgrade {
                    head: Bytes::from(out),
                    tunnel: Box::new(tunnel::ProxyTunnel {
                        conn,
                        early,
                        idle: t,
                    }),
                },
            });
        }
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
            ResponseFraming::Length(n) if n <= self.buffer_max_bytes(req) => {
                // The body is copied out behind the header lines, into their recycled buffer (a fresh
                // one of this size would cost a large allocation per request); the connection keeps and
                // reuses its own read buffer.
                out.reserve(n as usize);
                loop {
                    let done = body
                        .decode(&mut conn.buf, |e| {
                            if let BodyEvent::Data(d) = e {
                                out.extend_from_slice(d)
                            }
                        })
                        .map_err(|e| ExchangeError::Bad(format!("upstream response: {e}")))?;
                    if done {
                        break;
                    }
                    conn.buf.reserve(body.remaining().unwrap_or(0) as usize);
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
                let len = match framing {
                    ResponseFraming::Length(n) => Some(n),
                    _ => None,
                };
                let (tx, rx) = mpsc::channel(1);
                let up = up.clone();
                let reusable = parsed.reusable && !body.until_close();
                let chunk = stream_chunk(self.buffer_max_bytes(req));
                tokio::spawn(stream_body(conn, up, tx, body, reusable, t, chunk));
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

    /// The upstream's next response head (`None`: not complete yet), read by the shared reader (ordo-http1:
    /// framing, Content-Length, status, version, head size and the 1xx rules); the header lines of a
    /// final head to forward are rendered into `out` (appended; nothing is added unless it is complete).
    /// This adds the proxy's rules: no transfer coding but `chunked` (the body is forwarded decoded), and
    /// which headers are forwarded.
    pub(super) fn parse_response_head(
        &self,
        reader: &mut ResponseReader,
        buf: &mut [u8],
        out: &mut Vec<u8>,
    ) -> Result<Option<HeadStep>, ExchangeError> {
        let mut storage = [const { std::mem::MaybeUninit::uninit() }; 100];
        let (head, body) = match reader.read_head(buf, &mut storage) {
            Ok(HeadEvent::Final(head, body)) => (head, Some(body)),
            Ok(HeadEvent::Informational(head)) => (head, None),
            Ok(HeadEvent::Partial) => return Ok(None),
            Err(ResponseReadError::HeadTooLarge { .. }) => {
                return Err(ExchangeError::Bad(
                    "upstream response head too large".into(),
                ));
            }
            Err(ResponseReadError::Head(e)) => {
                return Err(ExchangeError::Bad(format!("upstream response: {e}")));
            }
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
        let Some(body) = body else {
            return Ok(Some(HeadStep::Informational(head.len)));
        };
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
        Ok(Some(HeadStep::Final(
            ParsedHead {
                status: head.status,
                framing: head.framing,
                content_length: head.content_length,
                reusable,
                head_len: head.len,
            },
            body,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::{stream_chunk, whole_body_limit};
    use crate::http::Version;

    /// Left out, the limit follows the client's protocol: an HTTP/1.x connection holds one response at a
    /// time (read whole up to 256 KiB, the fast path), an HTTP/2 one many (streamed over 64 KiB, for slow
    /// readers); written, it holds for both.
    #[test]
    fn the_whole_body_limit_follows_the_protocol_unless_written() {
        assert_eq!(whole_body_limit(None, Version::Http11), 256 * 1024);
        assert_eq!(whole_body_limit(None, Version::Http10), 256 * 1024);
        assert_eq!(whole_body_limit(None, Version::Http2), 64 * 1024);
        for v in [Version::Http10, Version::Http11, Version::Http2] {
            assert_eq!(whole_body_limit(Some(1000), v), 1000);
        }
    }

    /// A streamed body is read a quarter of the whole-body limit at a time, within 16–256 KiB: 16 KiB for
    /// HTTP/2 clients at the defaults (what the slow readers' bound was measured with), 64 KiB for
    /// HTTP/1.x ones.
    #[test]
    fn the_stream_chunk_is_a_quarter_of_the_whole_body_limit_within_bounds() {
        let at = |v| stream_chunk(whole_body_limit(None, v));
        assert_eq!(at(Version::Http2), 16 * 1024);
        assert_eq!(at(Version::Http11), 64 * 1024);
        assert_eq!(stream_chunk(0), 16 * 1024);
        assert_eq!(stream_chunk(100 * 1024), 25 * 1024);
        assert_eq!(stream_chunk(u64::MAX), 256 * 1024);
    }
}
