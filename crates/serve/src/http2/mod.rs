//! HTTP/2 server side (RFC 9113), over TLS by ALPN (`h2`) and in cleartext with prior knowledge (h2c), with
//! the `h2` crate doing the framing, HPACK, flow control and stream states. Every stream is served like a
//! kept-alive HTTP/1 request: mapped to the same [`Request`](crate::http::Request), handed to the same
//! [`Handler`](crate::http::Handler) (so it is classified and queued on its own, and one connection's
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
//! - the rapid-reset defence (CVE-2023-44487): `h2` cuts a client that resets streams before they are
//!   accepted; ordo counts the streams a client resets after that (queued, being served or being answered)
//!   and sends GOAWAY(ENHANCE_YOUR_CALM) and closes once `max_premature_resets` is spent (each answered stream
//!   earns one back). CONTINUATION, SETTINGS and PING floods are bounded by `h2` (see the tests);
//! - on shutdown: GOAWAY, the streams in flight finish (within the server's shutdown grace), then close.

mod stream;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::Invalid;
use crate::http::{Handler, Limits, shutdown_signalled};
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
        Ok(())
    }

    fn builder(&self) -> h2::server::Builder {
        let mut b = h2::server::Builder::new();
        b.max_concurrent_streams(self.max_concurrent_streams)
            .max_header_list_size(self.max_header_list_size)
            .initial_window_size(self.initial_window_size)
            .initial_connection_window_size(self.connection_window_size)
            .max_frame_size(self.max_frame_size);
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

/// The connection's I/O: bytes already read from it (the sniffed h2c preface) are read again first, and
/// its shutdown (h2 shuts the write side down when the connection closes) drains the client's input for a
/// while, as the HTTP/1 side's `linger_close` does.
struct Linger<T> {
    pre: Bytes,
    inner: T,
    drain: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
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
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.drain.is_none() {
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

/// What every stream task of a connection shares.
pub(crate) struct ConnCtx<H> {
    pub(crate) handler: Arc<H>,
    pub(crate) limits: Arc<Limits>,
    pub(crate) peer: SocketAddr,
    /// `max_streams_in_progress` permits.
    pub(crate) slots: Arc<Semaphore>,
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
pub(crate) async fn serve<H: Handler, T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
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
    let io = Linger {
        pre,
        inner: io,
        drain: None,
    };
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
        slots: Arc::new(Semaphore::new(cfg.max_streams_in_progress)),
    });
    let mut tasks: JoinSet<Outcome> = JoinSet::new();
    let mut budget = cfg.max_premature_resets;
    let mut premature: u64 = 0;
    // Armed once the connection is closing (GOAWAY sent): it ends by then at the latest.
    let mut closing = false;
    let close_by = tokio::time::sleep(Duration::ZERO);
    let mut close_by = std::pin::pin!(close_by);
    let idle = tokio::time::sleep(limits.idle_timeout);
    let mut idle = std::pin::pin!(idle);
    let mut stopping = false;
    // closed by the rapid-reset defence
    let mut cut = false;
    loop {
        tokio::select! {
            biased;
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                match done {
                    Ok(Outcome::Answered) => budget = (budget + 1).min(cfg.max_premature_resets),
                    Ok(Outcome::ResetByClient) => {
                        premature += 1;
                        budget = budget.saturating_sub(1);
                        if budget == 0 && !cut {
                            tracing::warn!(
                                %peer,
                                resets = premature,
                                "HTTP/2 client reset too many streams before their response \
                                 (rapid reset): GOAWAY ENHANCE_YOUR_CALM, connection closed"
                            );
                            conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                            // every stream still queued or served is dropped now (its queue place freed)
                            tasks.abort_all();
                            cut = true;
                            closing = true;
                            close_by.as_mut().reset(Instant::now() + CLOSE_LINGER);
                        }
                    }
                    Ok(Outcome::Failed) => {}
                    Err(e) if e.is_panic() => {
                        tracing::error!(%peer, "request handler panicked; HTTP/2 stream reset");
                    }
                    Err(_) => {}
                }
                if tasks.is_empty() {
                    idle.as_mut().reset(Instant::now() + limits.idle_timeout);
                }
            }
            r = conn.accept() => match r {
                Some(Ok(_)) if cut => {} // dropped: reset by h2
                Some(Ok((req, respond))) => {
                    tasks.spawn(stream::serve(req, respond, ctx.clone()));
                    // a stream that was on its way when GOAWAY left: give it its time
                    closing &= cut;
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
            _ = &mut idle, if tasks.is_empty() && !stopping => {
                tracing::debug!(%peer, "HTTP/2 connection idle; GOAWAY");
                stopping = true;
                conn.graceful_shutdown();
            }
            _ = &mut close_by, if closing => break,
        }
        if stopping && !closing && tasks.is_empty() {
            // nothing left in flight: the client has this long to take the GOAWAY and the last frames
            closing = true;
            close_by.as_mut().reset(Instant::now() + CLOSE_LINGER);
        }
    }
    // dropping `tasks` aborts what is left: queue places and permits are released
}

fn log_connection_error(peer: SocketAddr, e: &h2::Error) {
    if e.is_io() {
        tracing::debug!(%peer, error = %e, "HTTP/2 connection I/O error");
    } else if e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) {
        tracing::warn!(%peer, error = %e, "HTTP/2 connection closed by a defence (ENHANCE_YOUR_CALM)");
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
        let path = |c: Http2Config| crate::config::path_to_string(&c.check().unwrap_err().path);
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
            crate::config::path_to_string(&e.path),
            "http2.connection_window_size"
        );
        assert!(e.message.contains("134217728"), "{}", e.message);
        let c: Http2Config = toml::from_str("h2c = false\nmax_premature_resets = 5").unwrap();
        assert!(!c.h2c && c.enabled && c.max_premature_resets == 5);
        assert!(toml::from_str::<Http2Config>("max_streams = 1").is_err());
    }

    #[tokio::test]
    async fn the_sniffed_bytes_are_read_first() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut r = Linger {
            pre: Bytes::from_static(b"PRI"),
            inner: a,
            drain: None,
        };
        tokio::io::AsyncWriteExt::write_all(&mut b, b" *")
            .await
            .unwrap();
        drop(b);
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"PRI *");
    }
}
