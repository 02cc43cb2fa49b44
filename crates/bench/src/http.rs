//! The lean HTTP/1.1 client path: requests are serialised once into `Bytes`; responses are parsed with
//! the shared codec (ordo-http1: the framing rules and chunked decoder serve applies) from one reused buffer
//! per connection, bodies (Content-Length, chunked, or until close) are skipped without copying, and
//! nothing is allocated per request.

use std::io;
use std::time::Instant;

use bytes::Bytes;
use ordo_http1::{HeadEvent, ReaderLimits, ResponseReadError, ResponseReader};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::target::{Header, Target};

/// Serialise one request.
pub(crate) fn build_request(
    method: &str,
    target: &Target,
    headers: &[Header],
    cookies: &[(String, String)],
    body: Option<&Bytes>,
    keepalive: bool,
) -> Bytes {
    let mut s = String::with_capacity(256);
    s.push_str(method);
    s.push(' ');
    s.push_str(&target.path);
    s.push_str(" HTTP/1.1\r\n");
    let has = |n: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(n));
    if !has("host") {
        s.push_str("Host: ");
        s.push_str(&target.host_header());
        s.push_str("\r\n");
    }
    if !has("user-agent") {
        s.push_str(concat!(
            "User-Agent: ordo-bench/",
            env!("CARGO_PKG_VERSION"),
            "\r\n"
        ));
    }
    if !has("accept") {
        s.push_str("Accept: */*\r\n");
    }
    if !keepalive && !has("connection") {
        s.push_str("Connection: close\r\n");
    }
    for h in headers {
        s.push_str(&h.name);
        s.push_str(": ");
        s.push_str(&h.value);
        s.push_str("\r\n");
    }
    if !cookies.is_empty() {
        s.push_str("Cookie: ");
        for (i, (k, v)) in cookies.iter().enumerate() {
            if i > 0 {
                s.push_str("; ");
            }
            s.push_str(k);
            s.push('=');
            s.push_str(v);
        }
        s.push_str("\r\n");
    }
    if let Some(b) = body {
        if !has("content-length") {
            s.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
    }
    s.push_str("\r\n");
    let mut v = s.into_bytes();
    if let Some(b) = body {
        v.extend_from_slice(b);
    }
    Bytes::from(v)
}

/// What a complete response looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResponseInfo {
    pub status: u16,
    /// Bytes of the status line and headers.
    pub head_bytes: u64,
    /// Bytes of the body as framed on the wire (chunk framing included for chunked bodies).
    pub body_bytes: u64,
    /// Decoded body length.
    pub content_bytes: u64,
    /// The connection cannot be reused (server said close, HTTP/1.0, body ran to EOF, or extra bytes).
    pub close: bool,
}

/// Why reading a response failed, in ab's terms. The engine only counts the variant; the payloads are for
/// `Debug` output when a test fails.
#[derive(Debug)]
#[allow(dead_code)]
pub(crate) enum ReadError {
    /// The connection ended or failed before the response head was complete. `received` bytes had arrived.
    Receive { received: usize, error: io::Error },
    /// The connection ended inside the body (shorter than declared).
    Length { expected: Option<u64>, got: u64 },
    /// The response could not be parsed.
    Malformed(String),
}

const MAX_HEAD: usize = 1 << 20;
const MAX_HEADERS: usize = 64;
const BIG_BUF: usize = 256 * 1024;

/// What the shared reader holds a response to: 1 MiB heads, at most 8 informational (1xx) responses
/// before the final one (endless ones would keep the request until its timeout, as HTTP/2's
/// MAX_INFORMATIONAL prevents there), chunked bodies of any size.
const LIMITS: ReaderLimits = ReaderLimits {
    max_head_bytes: MAX_HEAD,
    max_informational: 8,
    max_chunked_bytes: u64::MAX,
};

/// Read one response from `stream` into the reused `buf`, recording the time of the first byte in
/// `first_byte`. `head_request` means the response has no body whatever it declares. `carry` is the
/// number of bytes at the start of `buf` already received for this response (bytes that followed the
/// previous response); on return it holds the bytes received beyond this one. Reset it to 0 for a new
/// connection.
/// `server` receives the `Server` header of the first response that has one (left alone once set), for
/// ab's "Server Software".
/// The reading itself (heads, 1xx, framing, the body's end) is ordo-http1's [`ResponseReader`]; this is
/// its I/O loop, which counts bytes and never copies the body.
pub(crate) async fn read_response<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    carry: &mut usize,
    head_request: bool,
    first_byte: &mut Option<Instant>,
    server: &mut Option<String>,
) -> Result<ResponseInfo, ReadError> {
    let mut filled = std::mem::take(carry).min(buf.len());
    let mut parse_first = filled > 0;
    if parse_first {
        *first_byte = Some(Instant::now());
    }
    let malformed = |e: ResponseReadError| ReadError::Malformed(e.to_string());
    // Response head (interim ones dropped).
    let mut reader = ResponseReader::new(head_request, LIMITS);
    let (status, head_len, close, mut body) = loop {
        if parse_first {
            parse_first = false;
        } else {
            if filled == buf.len() {
                // (the reader refuses a head of MAX_HEAD bytes not complete: no growth beyond)
                let n = (buf.len() * 2).clamp(4096, MAX_HEAD);
                buf.resize(n, 0);
            }
            let n = match stream.read(&mut buf[filled..]).await {
                Ok(0) => {
                    return Err(ReadError::Receive {
                        received: filled,
                        error: io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed before the response head was complete",
                        ),
                    });
                }
                Ok(n) => n,
                Err(error) => {
                    return Err(ReadError::Receive {
                        received: filled,
                        error,
                    });
                }
            };
            if filled == 0 {
                *first_byte = Some(Instant::now());
            }
            filled += n;
        }
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        match reader
            .read_head(&mut buf[..filled], &mut headers)
            .map_err(malformed)?
        {
            HeadEvent::Partial => {}
            HeadEvent::Informational(head) => {
                let len = head.len;
                buf.copy_within(len..filled, 0);
                filled -= len;
                parse_first = filled > 0;
            }
            HeadEvent::Final(head, body) => {
                if server.is_none() {
                    if let Some(h) = head
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("server"))
                    {
                        *server = Some(String::from_utf8_lossy(h.value).trim().to_string());
                    }
                }
                break (head.status, head.len, !head.keep_alive, body);
            }
        }
    };
    // Body: counted, never copied; what follows it is kept for the next response.
    let until_close = body.until_close();
    let (mut start, mut have) = (head_len, filled - head_len);
    loop {
        let (used, done) = body
            .feed(&buf[start..start + have], |_| {})
            .map_err(malformed)?;
        // what the reader did not use: bytes after the body, or a chunked line not complete yet
        let left = have - used;
        if left > 0 {
            buf.copy_within(start + used..start + have, 0);
        }
        if done {
            *carry = left;
            break;
        }
        if left == buf.len() {
            // a long chunked line (the decoder bounds them: no growth without end)
            let n = (buf.len() * 2).max(4096);
            buf.resize(n, 0);
        }
        if body.remaining().is_some_and(|r| r > buf.len() as u64) && buf.len() < BIG_BUF {
            // A large body: read it in bigger pieces (once per connection).
            buf.resize(BIG_BUF, 0);
        }
        let n = match stream.read(&mut buf[left..]).await {
            // the end of a close-delimited body
            Ok(0) if body.end_of_input().is_ok() => break,
            Ok(0) | Err(_) => {
                let got = body.data_bytes();
                return Err(ReadError::Length {
                    expected: body.remaining().map(|r| got + r),
                    got,
                });
            }
            Ok(n) => n,
        };
        start = 0;
        have = left + n;
    }
    Ok(ResponseInfo {
        status,
        head_bytes: head_len as u64,
        body_bytes: body.wire_bytes(),
        content_bytes: body.data_bytes(),
        close: close || until_close,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    fn read_all(wire: &[u8], head: bool) -> Vec<Result<ResponseInfo, String>> {
        rt().block_on(async {
            // Feed in small pieces to exercise the incremental paths.
            let mut r = tokio_test_reader(wire);
            let mut buf = vec![0u8; 16];
            let mut carry = 0;
            let mut out = Vec::new();
            loop {
                let mut fb = None;
                match read_response(&mut r, &mut buf, &mut carry, head, &mut fb, &mut None).await {
                    Ok(info) => {
                        let close = info.close;
                        out.push(Ok(info));
                        if close {
                            break;
                        }
                    }
                    Err(ReadError::Receive { received: 0, .. }) => break,
                    Err(e) => {
                        out.push(Err(format!("{e:?}")));
                        break;
                    }
                }
            }
            out
        })
    }

    /// A reader that returns at most 7 bytes per read.
    fn tokio_test_reader(wire: &[u8]) -> impl AsyncRead + Unpin {
        struct Slow(Vec<u8>, usize);
        impl AsyncRead for Slow {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<io::Result<()>> {
                let start = self.1;
                let n = (self.0.len() - start).min(7).min(buf.remaining());
                buf.put_slice(&self.0[start..start + n]);
                self.1 += n;
                std::task::Poll::Ready(Ok(()))
            }
        }
        Slow(wire.to_vec(), 0)
    }

    #[test]
    fn builds_requests() {
        let t = Target::parse("http://127.0.0.1:8080/x?y=1").unwrap();
        let h = vec![Header::new("X-A", "1").unwrap()];
        let c = vec![("u".to_string(), "l".to_string()), ("v".into(), "2".into())];
        let body = Bytes::from_static(b"hello");
        let r = build_request("POST", &t, &h, &c, Some(&body), false);
        let s = std::str::from_utf8(&r).unwrap();
        assert!(s.starts_with("POST /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.contains("X-A: 1\r\nCookie: u=l; v=2\r\nContent-Length: 5\r\n\r\nhello"));
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(&r).unwrap().is_complete());
    }

    #[test]
    fn content_length_keepalive() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let r = read_all(wire, false);
        assert_eq!(r.len(), 2);
        let a = r[0].as_ref().unwrap();
        assert_eq!((a.status, a.body_bytes, a.close), (200, 5, false));
        assert_eq!(r[1].as_ref().unwrap().status, 404);
    }

    /// ab's "Server Software": the first response's `Server` header, kept once seen.
    #[test]
    fn the_first_server_header_is_kept() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nserver:  nginx/1.24.0 \r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nServer: other\r\nContent-Length: 0\r\n\r\n";
        let got = rt().block_on(async {
            let mut r = tokio_test_reader(wire);
            let (mut buf, mut carry, mut server) = (vec![0u8; 16], 0, None);
            let mut seen = Vec::new();
            for _ in 0..3 {
                let mut fb = None;
                read_response(&mut r, &mut buf, &mut carry, false, &mut fb, &mut server)
                    .await
                    .unwrap();
                seen.push(server.clone());
            }
            seen
        });
        assert_eq!(
            got,
            vec![
                None,
                Some("nginx/1.24.0".into()),
                Some("nginx/1.24.0".into())
            ]
        );
    }

    #[test]
    fn chunked_bodies() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nz";
        let r = read_all(wire, false);
        assert_eq!(r.len(), 2, "{r:?}");
        let a = r[0].as_ref().unwrap();
        assert_eq!(a.content_bytes, 15);
        assert!(!a.close);
        assert!(r[1].as_ref().unwrap().close);
    }

    #[test]
    fn until_close_and_http10() {
        let r = read_all(b"HTTP/1.0 200 OK\r\n\r\nabcdef", false);
        let a = r[0].as_ref().unwrap();
        assert_eq!((a.content_bytes, a.close), (6, true));
    }

    #[test]
    fn conflicting_content_lengths_are_malformed() {
        let r = read_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
            false,
        );
        let e = r[0].as_ref().unwrap_err();
        assert!(e.contains("conflicting Content-Length"), "{r:?}");
        // the same length twice is harmless
        let r = read_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            false,
        );
        assert_eq!(r[0].as_ref().unwrap().content_bytes, 3, "{r:?}");
    }

    #[test]
    fn truncated_body_is_a_length_error() {
        let r = read_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", false);
        assert!(r[0].as_ref().unwrap_err().contains("Length"), "{r:?}");
        let r = read_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            false,
        );
        assert!(r[0].as_ref().unwrap_err().contains("Length"), "{r:?}");
    }

    #[test]
    fn head_and_interim() {
        let r = read_all(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
            true,
        );
        let a = r[0].as_ref().unwrap();
        assert_eq!((a.status, a.body_bytes), (200, 0));
        // up to 8 interim responses, then the final one; a 9th is malformed, not waited out
        let mut many = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(8);
        many.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(read_all(&many, false)[0].as_ref().unwrap().status, 200);
        let endless = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(9);
        let r = read_all(&endless, false);
        let e = r[0].as_ref().unwrap_err();
        assert!(
            e.contains("Malformed") && e.contains("more than 8 informational"),
            "{e}"
        );
    }

    #[test]
    fn malformed() {
        let r = read_all(b"HTTZ/1.1 200 OK\r\n\r\n", false);
        assert!(r[0].as_ref().unwrap_err().contains("Malformed"));
        let r = read_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            false,
        );
        assert!(r[0].as_ref().unwrap_err().contains("Malformed"), "{r:?}");
    }
    /// The client refuses the chunked framing serve refuses, as a malformed response (a protocol error,
    /// not a short body): a bare LF ending a chunk-size line, a chunk's data or the last chunk, which it
    /// used to accept.
    #[test]
    fn bare_lf_in_chunked_framing_is_malformed() {
        for (wire, why) in [
            (
                &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n"[..],
                "bare LF in chunk-size line",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
                "chunk data not followed by CRLF",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\n\r\n",
                "bare LF in chunk-size line",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: v\n\r\n",
                "bare LF in trailer",
            ),
        ] {
            let r = read_all(wire, false);
            let e = r[0].as_ref().map(|_| ()).unwrap_err();
            assert!(
                e.contains("Malformed") && e.contains(why),
                "{:?}: {r:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}
