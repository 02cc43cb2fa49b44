//! Response heads as a client reads them (the proxy's upstream connections, the bench client): httparse
//! tokenises; this adds what httparse leaves to its caller — no bare LF, a status of three digits from 100,
//! HTTP/1.2…1.9 read as 1.1, the body's framing (RFC 9112 §6.3) and whether the connection stays open.

use std::fmt;
use std::mem::MaybeUninit;

use crate::framing::{FramingError, ResponseFraming, parse_content_length, response_framing};
use crate::token::{ConnectionOptions, has_bare_lf, trim_ows};

/// A complete response head; `headers` borrow the buffer it was parsed from.
#[derive(Debug)]
pub struct ResponseHead<'h, 'b> {
    pub status: u16,
    /// The minor version: 0 or 1 (1.2 … 1.9 are read as 1).
    pub minor: u8,
    /// Bytes of the head, including the final CRLF CRLF.
    pub len: usize,
    pub framing: ResponseFraming,
    /// The Content-Length the response declared (also when it has no body: a HEAD answer).
    pub content_length: Option<u64>,
    /// Transfer-Encoding named codings besides `chunked`: the body is still in them.
    pub other_codings: bool,
    /// The connection may carry another exchange after this response, as far as the head says: HTTP/1.1
    /// without `Connection: close`, or HTTP/1.0 with `keep-alive` (RFC 9112 §9.3). A body delimited by the
    /// end of the connection ends it whatever this says.
    pub keep_alive: bool,
    pub headers: &'h [httparse::Header<'b>],
}

/// Why a response head was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// httparse could not tokenise it.
    Malformed(httparse::Error),
    /// Valid tokens, refused framing or syntax; the text says what.
    Invalid(&'static str),
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseError::Malformed(e) => write!(f, "malformed response head: {e}"),
            ResponseError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResponseError {}

impl From<FramingError> for ResponseError {
    fn from(e: FramingError) -> Self {
        match e {
            FramingError::Invalid(m) => ResponseError::Invalid(m),
            FramingError::UnsupportedCoding => {
                ResponseError::Invalid("unsupported transfer coding")
            }
        }
    }
}

/// Parses a response head from the start of `buf` into `headers` (more headers than it holds →
/// `Malformed(TooManyHeaders)`). `Ok(None)`: not complete yet. `head_request`: the response answers a
/// HEAD request, so it has no body whatever it declares. An `HTTP/1.<2-9>` status line has its minor
/// digit rewritten to 1 in `buf` (a minor version above ours is read as the highest we implement,
/// RFC 9110 §6.2). Interim (1xx) heads come back like final ones, with no body: the caller skips them.
///
/// `headers` is uninitialised storage (`[const { MaybeUninit::uninit() }; N]`): a head of ten headers does
/// not pay for zeroing a hundred slots.
pub fn parse_response<'h, 'b>(
    buf: &'b mut [u8],
    headers: &'h mut [MaybeUninit<httparse::Header<'b>>],
    head_request: bool,
) -> Result<Option<ResponseHead<'h, 'b>>, ResponseError> {
    if buf.len() > 8
        && buf.starts_with(b"HTTP/1.")
        && (b'2'..=b'9').contains(&buf[7])
        && buf[8] == b' '
    {
        buf[7] = b'1';
    }
    let buf: &'b [u8] = buf;
    let mut resp = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut resp, buf, headers)
    {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(ResponseError::Malformed(e)),
    };
    if has_bare_lf(&buf[..len]) {
        return Err(ResponseError::Invalid("bare LF in response head"));
    }
    let status = resp.code.unwrap_or(0);
    if !(100..=999).contains(&status) {
        return Err(ResponseError::Invalid("bad status code"));
    }
    let minor = resp.version.unwrap_or(0);
    let headers: &'h [httparse::Header<'b>] = resp.headers;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<&[u8]> = None;
    let mut connection = ConnectionOptions::default();
    for h in headers {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_content_length(trim_ows(h.value))
                .ok_or(ResponseError::Invalid("invalid Content-Length"))?;
            // the same length twice is harmless; two lengths leave the end of the message undefined
            if content_length.is_some_and(|c| c != n) {
                return Err(ResponseError::Invalid("conflicting Content-Length"));
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if transfer_encoding.is_some() {
                return Err(ResponseError::Invalid("more than one Transfer-Encoding"));
            }
            transfer_encoding = Some(trim_ows(h.value));
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection.add(h.value);
        }
    }
    let (framing, other_codings) =
        response_framing(status, head_request, content_length, transfer_encoding)?;
    let keep_alive = !connection.close && (minor == 1 || connection.keep_alive);
    Ok(Some(ResponseHead {
        status,
        minor,
        len,
        framing,
        content_length,
        other_codings,
        keep_alive,
        headers,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Summary = (u16, u8, usize, ResponseFraming, Option<u64>, bool, bool);

    fn parse(wire: &[u8], head_request: bool) -> Result<Option<Summary>, ResponseError> {
        let mut buf = wire.to_vec();
        let mut h = [const { MaybeUninit::uninit() }; 16];
        Ok(parse_response(&mut buf, &mut h, head_request)?.map(|r| {
            (
                r.status,
                r.minor,
                r.len,
                r.framing,
                r.content_length,
                r.other_codings,
                r.keep_alive,
            )
        }))
    }

    #[test]
    fn heads() {
        use ResponseFraming as F;
        let w = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            parse(w, false),
            Ok(Some((
                200,
                1,
                w.len() - 5,
                F::Length(5),
                Some(5),
                false,
                true
            )))
        );
        assert_eq!(parse(&w[..20], false), Ok(None));
        let r = parse(w, true).unwrap().unwrap();
        assert_eq!((r.3, r.4), (F::None, Some(5)));
        let r = parse(b"HTTP/1.0 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!((r.3, r.6), (F::UntilClose, false));
        let r = parse(
            b"HTTP/1.0 204 OK\r\nConnection: x, Keep-Alive\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.3, r.6), (F::None, true));
        let r = parse(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nTransfer-Encoding: chunked\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!((r.3, r.6), (F::Chunked, false));
        let r = parse(b"HTTP/1.7 100 Continue\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!((r.0, r.1, r.3), (100, 1, F::None));
        let r = parse(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.3, F::Length(3));
    }

    #[test]
    fn refusals() {
        for bad in [
            &b"HTTZ/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        ] {
            assert!(
                parse(bad, false).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            parse(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
                false
            )
            .unwrap_err()
            .to_string(),
            "conflicting Content-Length"
        );
    }
}
