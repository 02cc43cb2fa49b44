//! WebSocket over HTTP/2 (RFC 8441): an extended CONNECT stream (`:method CONNECT`, `:protocol websocket`)
//! that a proxy route opened upstream as an HTTP/1.1 WebSocket is answered `:status 200` when the upstream
//! switched protocols (`101`), and the stream then carries the tunnel: its DATA frames are the client's
//! bytes, the upstream's go back as DATA, END_STREAM either way is a half-close, RST_STREAM a close. The same
//! relay as HTTP/1.1's runs it (`Tunnel`, with its idle limit), through [`H2Io`], which gives the client
//! window back only as its bytes are taken and writes only what the client's window lets out, so neither
//! direction holds more than the windows (and the relay's 16 KiB each way).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::{field, send};
use super::{ConnCtx, Outcome};
use crate::http::{Body, Response};

/// Largest piece handed to h2 per write (one DATA frame at the default frame size).
const PIECE: usize = 16 * 1024;

/// Answers an extended CONNECT stream with what its handler returned: a protocol switch opens the tunnel
/// (200, then the relay until it ends); a 2xx that is not one (an upstream that answered `200` to the
/// handshake) is a `502`, since any 2xx would tell the client its tunnel is open; any other answer (a
/// `404`, a `503` of the scheduler, an upstream's `403`) is sent as it is and the stream ends.
pub(super) async fn answer<H>(
    mut respond: SendResponse<Bytes>,
    resp: Response,
    recv: RecvStream,
    ctx: &ConnCtx<H>,
) -> Outcome {
    let Response {
        status,
        headers,
        body,
    } = resp;
    let (head, tunnel) = match body {
        Body::Upgrade { head, tunnel } if status == 101 => (head, tunnel),
        body => {
            drop(recv);
            let resp = if (200..300).contains(&status) {
                tracing::debug!(
                    status,
                    "HTTP/2 WebSocket: the handler answered without switching protocols; 502"
                );
                Response::text(502, "bad gateway: the upstream did not switch to WebSocket")
            } else {
                Response {
                    status,
                    headers,
                    body,
                }
            };
            return match send(&mut respond, resp, false, ctx).await {
                Ok(()) => Outcome::Answered,
                Err(s) => s.into(),
            };
        }
    };
    // 200 with the upstream's fields, less the handshake's own (connection-specific ones are dropped by
    // `field`; the accept was checked by the proxy) and any length (RFC 9110 §8.6: none on a 2xx to CONNECT)
    let mut out = http::Response::new(());
    let map = out.headers_mut();
    map.insert(header::SERVER, http::HeaderValue::from_static("ordo"));
    let lines = head.split(|&b| b == b'\n').filter_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let i = line.iter().position(|&b| b == b':')?;
        Some((&line[..i], ordo_http1::trim_ows(&line[i + 1..])))
    });
    let given = headers.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes()));
    for (k, v) in given.chain(lines) {
        if k.eq_ignore_ascii_case(b"sec-websocket-accept")
            || k.eq_ignore_ascii_case(b"content-length")
        {
            continue;
        }
        if let Some((n, v)) = field(k, v) {
            map.append(n, v);
        }
    }
    let send = match respond.send_response(out, false) {
        Ok(s) => s,
        Err(e) => return super::stream::stop_of(&e).into(),
    };
    let mut io = H2Io {
        send,
        recv,
        pending: Bytes::new(),
        recv_done: false,
        send_done: false,
    };
    tunnel.run(&mut io, Bytes::new()).await;
    // ended by the idle limit or an error with the client's side still open: the stream is closed
    if !io.recv_done {
        io.send.send_reset(Reason::CANCEL);
    }
    // the tunnel was answered: however it ends, it is no premature reset
    Outcome::Answered
}

/// An HTTP/2 stream as a byte stream for the relay: reads are the client's DATA (its window given back as
/// they are read), writes become DATA as the client's window allows, shutdown is END_STREAM.
pub(super) struct H2Io {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// Received, not yet read.
    pending: Bytes,
    /// The client ended its side (END_STREAM).
    recv_done: bool,
    /// END_STREAM sent.
    send_done: bool,
}

fn io_error(e: h2::Error) -> io::Error {
    if e.is_reset() {
        io::Error::new(io::ErrorKind::ConnectionReset, e)
    } else {
        io::Error::other(e)
    }
}

impl AsyncRead for H2Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        while me.pending.is_empty() {
            if me.recv_done {
                return Poll::Ready(Ok(()));
            }
            match ready!(me.recv.poll_data(cx)) {
                None => me.recv_done = true,
                Some(Ok(b)) => me.pending = b,
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
            }
        }
        let n = me.pending.len().min(buf.remaining());
        buf.put_slice(&me.pending[..n]);
        me.pending.advance(n);
        let _ = me.recv.flow_control().release_capacity(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if me.send_done {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        me.send.reserve_capacity(buf.len().min(PIECE));
        let n = loop {
            let c = me.send.capacity();
            if c > 0 {
                break c.min(buf.len());
            }
            // Ready only when the capacity grew (or the stream failed): no busy loop
            match ready!(me.send.poll_capacity(cx)) {
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Some(Ok(_)) => {}
            }
        };
        me.send
            .send_data(Bytes::copy_from_slice(&buf[..n]), false)
            .map_err(io_error)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // h2's connection task writes what it was handed
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.send_done {
            me.send_done = true;
            me.send.send_data(Bytes::new(), true).map_err(io_error)?;
        }
        Poll::Ready(Ok(()))
    }
}
