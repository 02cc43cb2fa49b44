//! Response writing: the head rendered into a reused buffer, small bodies appended so a response is one
//! write, files and streams sent in chunks with Content-Length or chunked framing.

use std::io;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWrite, AsyncWriteExt};

use ordo_http1::is_tchar;

use super::parse::reason_phrase;
use super::{Body, Response, Version, date};

/// Bodies up to this size are copied behind the head so the response leaves in one write.
const COALESCE_MAX: usize = 32 * 1024;
/// Chunk size for streaming files.
const FILE_CHUNK: usize = 128 * 1024;

/// What the connection loop needs to know to frame the response.
pub(crate) struct WriteCtx {
    pub version: Version,
    pub head_request: bool,
    /// In: whether the connection may stay open. Out: whether it still may after this response.
    pub keep_alive: bool,
    pub write_timeout: Duration,
}

fn header_ok(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(is_tchar)
        && value.bytes().all(|b| b >= 0x20 && b != 0x7f || b == b'\t')
}

/// Appends `ip` as text: an IPv4 address digit by digit (the formatter costs ~1k instructions, paid on every
/// proxied request's X-Forwarded-For), IPv6 through `Display`.
pub(crate) fn put_ip(out: &mut BytesMut, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.put_u8(b'.');
                }
                put_u64(out, u64::from(o));
            }
        }
        std::net::IpAddr::V6(_) => {
            use std::fmt::Write as _;
            let _ = write!(out, "{ip}");
        }
    }
}

/// Appends the decimal digits of `n`.
pub(crate) fn put_u64(out: &mut BytesMut, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&buf[i..]);
}

/// Renders the status line and headers of `resp` into `out` (which is cleared first).
pub(crate) fn render_head(out: &mut BytesMut, resp: &Response, ctx: &mut WriteCtx) {
    let pre = match &resp.body {
        Body::Prerendered { head, .. } | Body::PrerenderedStream { head, .. } => Some(&head[..]),
        _ => None,
    };
    render_head_parts(out, resp.status, &resp.headers, pre, resp.body.len(), ctx);
}

/// [`render_head`] from a response's parts: `pre` is a body's pre-rendered header lines, `body_len` its length
/// when known.
fn render_head_parts(
    out: &mut BytesMut,
    status: u16,
    headers: &[(String, String)],
    pre: Option<&[u8]>,
    body_len: Option<u64>,
    ctx: &mut WriteCtx,
) {
    out.clear();
    out.put_slice(b"HTTP/1.1 ");
    put_u64(out, u64::from(status));
    out.put_u8(b' ');
    out.put_slice(reason_phrase(status).as_bytes());
    out.put_slice(b"\r\nServer: ordo\r\nDate: ");
    date::with_date(|d| out.put_slice(d));
    out.put_slice(b"\r\n");

    let no_body_status = (100..200).contains(&status) || status == 204 || status == 304;
    let keep_handler_length = ctx.head_request || status == 304;
    let mut handler_length = false;
    for (k, v) in headers {
        let lk = k.as_bytes();
        if lk.eq_ignore_ascii_case(b"content-length") {
            if !keep_handler_length || handler_length {
                continue;
            }
            handler_length = true;
        } else if lk.eq_ignore_ascii_case(b"connection") {
            if v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                ctx.keep_alive = false;
            }
            continue;
        } else if lk.eq_ignore_ascii_case(b"transfer-encoding")
            || lk.eq_ignore_ascii_case(b"keep-alive")
            || lk.eq_ignore_ascii_case(b"date")
            || lk.eq_ignore_ascii_case(b"server")
        {
            continue;
        }
        if !header_ok(k, v) {
            continue;
        }
        out.put_slice(lk);
        out.put_slice(b": ");
        out.put_slice(v.as_bytes());
        out.put_slice(b"\r\n");
    }
    if let Some(head) = pre {
        out.put_slice(head);
    }
    if !no_body_status && !handler_length {
        match body_len {
            Some(n) => {
                out.put_slice(b"Content-Length: ");
                put_u64(out, n);
                out.put_slice(b"\r\n");
            }
            None if ctx.version == Version::Http11 => {
                out.put_slice(b"Transfer-Encoding: chunked\r\n")
            }
            // HTTP/1.0 and unknown length: the end of the body is the end of the connection.
            None => ctx.keep_alive = false,
        }
    }
    if !ctx.keep_alive {
        out.put_slice(b"Connection: close\r\n");
    } else if ctx.version == Version::Http10 {
        out.put_slice(b"Connection: keep-alive\r\n");
    }
    out.put_slice(b"\r\n");
}

pub(crate) async fn write_all_timeout<W: AsyncWrite + Unpin>(
    w: &mut W,
    buf: &[u8],
    t: Duration,
) -> io::Result<()> {
    // flush: a TLS stream holds what it encrypted until flushed (a no-op on a TCP socket)
    let write = async {
        w.write_all(buf).await?;
        w.flush().await
    };
    let mut write = std::pin::pin!(write);
    // Tried once before the timer is set: a socket with room takes the whole response at once (the usual
    // case), and then no deadline is computed (a clock read) for a write that never waited.
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(r) = first {
        return r;
    }
    match tokio::time::timeout(t, write).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "client did not read the response",
        )),
    }
}

/// Whether `resp` is sent without a body (HEAD, 1xx, 204, 304).
fn bodyless(resp: &Response, ctx: &WriteCtx) -> bool {
    ctx.head_request
        || (100..200).contains(&resp.status)
        || resp.status == 204
        || resp.status == 304
}

/// Renders the whole of `resp` — head and body — into `out` when it is one buffer's worth (no body, or an
/// in-memory body up to `COALESCE_MAX`), so it leaves in a single write; otherwise hands `resp` back.
pub(crate) fn encode_whole(
    out: &mut BytesMut,
    resp: Response,
    ctx: &mut WriteCtx,
) -> Result<(), Response> {
    let body = if bodyless(&resp, ctx) {
        None
    } else {
        match &resp.body {
            Body::Empty => None,
            Body::Bytes(b) | Body::Prerendered { body: b, .. } if b.len() <= COALESCE_MAX => {
                Some(b)
            }
            _ => return Err(resp),
        }
    };
    render_head(out, &resp, ctx);
    if let Some(b) = body {
        out.put_slice(b);
    }
    Ok(())
}

/// A file body to send: its head is rendered into `out` and the file, offset and length are handed back, for
/// a transport that sends files its own way (sendfile(2) on plain TCP); any other response is handed back.
pub(crate) fn split_file(
    out: &mut BytesMut,
    resp: Response,
    ctx: &mut WriteCtx,
) -> Result<(std::fs::File, u64, u64), Response> {
    if bodyless(&resp, ctx) {
        return Err(resp);
    }
    match resp.body {
        Body::File { file, offset, len } => {
            render_head_parts(out, resp.status, &resp.headers, None, Some(len), ctx);
            Ok((file, offset, len))
        }
        body => Err(Response { body, ..resp }),
    }
}

/// Writes `resp`; `Err` means the connection must be closed (write failed, or the body could not be
/// completed as framed).
pub(crate) async fn write_response<W: super::conn::Transport>(
    w: &mut W,
    out: &mut BytesMut,
    resp: Response,
    ctx: &mut WriteCtx,
) -> io::Result<()> {
    let t = ctx.write_timeout;
    let resp = match encode_whole(out, resp, ctx) {
        Ok(()) => return write_all_timeout(w, out, t).await,
        Err(resp) => resp,
    };
    render_head(out, &resp, ctx);
    match resp.body {
        // (encode_whole took the bodyless, empty and small cases)
        Body::Empty => write_all_timeout(w, out, t).await,
        // the connection's loop switches protocols itself (http/conn.rs); here nothing can carry one
        Body::Upgrade { .. } => Err(io::Error::other("a protocol switch outside HTTP/1.1")),
        Body::Bytes(b) | Body::Prerendered { body: b, .. } => {
            write_all_timeout(w, out, t).await?;
            write_all_timeout(w, &b, t).await
        }
        Body::File { file, offset, len } => {
            write_all_timeout(w, out, t).await?;
            write_file(w, out, file, offset, len, t).await
        }
        Body::Stream { mut rx, len } | Body::PrerenderedStream { mut rx, len, .. } => {
            // Every piece but the last goes with MSG_MORE, the head too (it shares a segment with the
            // body's first bytes); an empty piece says nothing more is at hand for now, and what the
            // socket holds back is sent then (see [`Body::Stream`]).
            let chunked = len.is_none() && ctx.version == Version::Http11;
            let mut held = len != Some(0);
            w.write_parts(&[out], held, t).await?;
            let mut sent: u64 = 0;
            while let Some(chunk) = rx.recv().await {
                let chunk = chunk?;
                if chunk.is_empty() {
                    if held {
                        w.push()?;
                        held = false;
                    }
                    continue;
                }
                sent += chunk.len() as u64;
                if len.is_some_and(|l| sent > l) {
                    return Err(io::Error::other("stream longer than its Content-Length"));
                }
                if chunked {
                    let mut size = [0u8; 18];
                    let n = chunk_size_line(&mut size, chunk.len());
                    w.write_parts(&[&size[..n], &chunk, b"\r\n"], true, t)
                        .await?;
                    held = true;
                } else {
                    held = len != Some(sent);
                    w.write_parts(&[&chunk], held, t).await?;
                }
            }
            if let Some(l) = len {
                if sent != l {
                    return Err(io::Error::other("stream shorter than its Content-Length"));
                }
            }
            if chunked {
                w.write_parts(&[b"0\r\n\r\n"], false, t).await?;
            } else if held {
                w.push()?; // (a close-delimited body: the close would send it too)
            }
            Ok(())
        }
    }
}

/// Writes `n` as a chunk-size line (hex digits, CRLF) into `buf`; returns its length.
fn chunk_size_line(buf: &mut [u8; 18], n: usize) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (usize::BITS as usize / 4 - n.leading_zeros() as usize / 4).max(1);
    for (i, b) in buf[..digits].iter_mut().enumerate() {
        *b = HEX[(n >> (4 * (digits - 1 - i))) & 0xf];
    }
    buf[digits..digits + 2].copy_from_slice(b"\r\n");
    digits + 2
}

pub(crate) async fn write_file<W: AsyncWrite + Unpin>(
    w: &mut W,
    out: &mut BytesMut,
    file: std::fs::File,
    offset: u64,
    len: u64,
    t: Duration,
) -> io::Result<()> {
    let mut f = tokio::fs::File::from_std(file);
    if offset > 0 {
        f.seek(io::SeekFrom::Start(offset)).await?;
    }
    let mut left = len;
    out.clear();
    while left > 0 {
        let want = (left.min(FILE_CHUNK as u64)) as usize;
        out.clear();
        out.reserve(want);
        let mut limited = (&mut f).take(want as u64);
        while out.len() < want {
            let n = limited.read_buf(out).await?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than announced",
                ));
            }
        }
        write_all_timeout(w, out, t).await?;
        left -= want as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_size_lines_are_lowercase_hex() {
        for n in [
            0usize,
            1,
            9,
            10,
            15,
            16,
            255,
            16384,
            65535,
            1 << 40,
            usize::MAX,
        ] {
            let mut buf = [0u8; 18];
            let len = chunk_size_line(&mut buf, n);
            assert_eq!(&buf[..len], format!("{n:x}\r\n").as_bytes(), "{n}");
        }
    }

    #[test]
    fn ip_addresses_are_written_as_display_writes_them() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.255.9",
            "255.255.255.255",
            "::1",
            "2001:db8::7",
            "::ffff:1.2.3.4",
        ] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            let mut out = BytesMut::new();
            put_ip(&mut out, ip);
            assert_eq!(&out[..], ip.to_string().as_bytes());
        }
    }

    fn ctx(version: Version, head: bool, keep: bool) -> WriteCtx {
        WriteCtx {
            version,
            head_request: head,
            keep_alive: keep,
            write_timeout: Duration::from_secs(1),
        }
    }

    fn head_str(resp: &Response, c: &mut WriteCtx) -> String {
        let mut out = BytesMut::new();
        render_head(&mut out, resp, c);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn renders_length_and_connection() {
        let r = Response::text(200, "hi");
        let s = head_str(&r, &mut ctx(Version::Http11, false, true));
        assert!(
            s.starts_with("HTTP/1.1 200 OK\r\nServer: ordo\r\nDate: "),
            "{s}"
        );
        assert!(s.contains("Content-Type: text/plain; charset=utf-8\r\n"));
        assert!(s.contains("Content-Length: 3\r\n"));
        assert!(!s.contains("Connection"));
        assert!(s.ends_with("\r\n\r\n"));
        let s = head_str(&r, &mut ctx(Version::Http10, false, true));
        assert!(s.contains("Connection: keep-alive\r\n"));
        let s = head_str(&r, &mut ctx(Version::Http11, false, false));
        assert!(s.contains("Connection: close\r\n"));
    }

    #[test]
    fn drops_framing_headers_and_bad_values() {
        let r = Response::new(200)
            .with_header("Content-Length", "99")
            .with_header("Transfer-Encoding", "chunked")
            .with_header("X-Evil", "a\r\nSet-Cookie: x")
            .with_header("Connection", "close");
        let mut c = ctx(Version::Http11, false, true);
        let s = head_str(&r, &mut c);
        assert!(!c.keep_alive);
        assert!(s.contains("Content-Length: 0\r\n"));
        assert!(
            !s.contains("99") && !s.contains("chunked") && !s.contains("Evil"),
            "{s}"
        );
        // HEAD keeps the handler's length (a proxied HEAD answer).
        let s = head_str(&r, &mut ctx(Version::Http11, true, true));
        assert!(
            s.contains("Content-Length: 99\r\n") && !s.contains("Content-Length: 0"),
            "{s}"
        );
    }

    #[test]
    fn unknown_length_framing() {
        let (_tx, rx) = tokio::sync::mpsc::channel(1);
        let r = Response {
            status: 200,
            headers: vec![],
            body: Body::Stream { rx, len: None },
        };
        let s = head_str(&r, &mut ctx(Version::Http11, false, true));
        assert!(s.contains("Transfer-Encoding: chunked\r\n"));
        let mut c = ctx(Version::Http10, false, true);
        let s = head_str(&r, &mut c);
        assert!(!c.keep_alive && s.contains("Connection: close\r\n"));
        let s = head_str(&Response::new(304), &mut ctx(Version::Http11, false, true));
        assert!(!s.contains("Content-Length"));
    }
}
