//! Request-head parsing and message framing, strict where leniency would let a request be smuggled: httparse
//! does the tokenising, this module adds the HTTP/1.1 rules httparse leaves to its caller (bare LF, one
//! Content-Length, Transfer-Encoding ending in exactly one `chunked` — both decided by the shared codec,
//! ordo-http1 —, Host) and the request-target's normalisation. The Transfer-Encoding decision table is in
//! docs/serve-http.md.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
pub(crate) use ordo_http1::Framing;
use ordo_http1::{
    ConnectionOptions, FramingError, has_bare_lf, hex_digit as hex, parse_content_length,
    request_framing, trim_ows,
};

use super::Version;
use super::headers::{Field, Headers, Known, Span};

/// Most headers a request may carry; more → 431.
pub(crate) const MAX_HEADERS: usize = 100;
/// A request head turned into owned parts.
#[derive(Debug)]
pub(crate) struct Head {
    pub method: Cow<'static, str>,
    /// The request-target as sent, in the head's bytes.
    pub target: Span,
    pub path: String,
    pub query: Option<String>,
    pub version: Version,
    /// The header fields, as spans into the head's bytes (`len` of them) and, past them, into `own`.
    pub fields: Vec<Field>,
    /// The lossy UTF-8 copies of values that are not UTF-8, and an absolute-form target's `Host` name.
    pub own: Vec<u8>,
    pub framing: Framing,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// Bytes of the head in the buffer, including the final CRLF CRLF.
    pub len: usize,
}

impl Head {
    /// The header fields, given the head's bytes (`len` of them, as parsed): moved out of the head.
    pub(crate) fn take_headers(&mut self, buf: Bytes) -> Headers {
        debug_assert_eq!(buf.len(), self.len);
        Headers::from_parts(
            buf,
            std::mem::take(&mut self.own),
            std::mem::take(&mut self.fields),
        )
    }
}

/// A method as a string: the standard ones (RFC 9110 §9, PATCH) without an allocation.
pub(crate) fn method_name(m: &str) -> Cow<'static, str> {
    Cow::Borrowed(match m {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        "PATCH" => "PATCH",
        "TRACE" => "TRACE",
        "CONNECT" => "CONNECT",
        _ => return Cow::Owned(m.to_string()),
    })
}

/// Why a head could not be parsed: the status to answer with (and then close).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Not complete yet.
    Partial,
    Status(u16, &'static str),
}

fn bad(msg: &'static str) -> HeadError {
    HeadError::Status(400, msg)
}

/// Parses a request head from the start of `buf`: a head over `max_head` bytes is 431, a request-target
/// over `max_uri` bytes 414 (also while the request line is still arriving).
pub(crate) fn parse_head(buf: &[u8], max_head: usize, max_uri: usize) -> Result<Head, HeadError> {
    match parse_head_as_sent(buf, max_head, max_uri) {
        // HTTP/1.2 … HTTP/1.9: a minor version above ours is processed as the highest we implement
        // (RFC 9112 §2.5, RFC 9110 §6.2), on a copy with the minor digit replaced (same length).
        Err(HeadError::Status(505, _)) if http1_minor_at(buf).is_some() => {
            let at = http1_minor_at(buf).unwrap_or(0);
            let mut copy = buf.to_vec();
            copy[at] = b'1';
            parse_head_as_sent(&copy, max_head, max_uri)
        }
        r => r,
    }
}

/// The offset of the minor digit when the request line ends in `HTTP/1.<digit>` with a digit above 1.
fn http1_minor_at(buf: &[u8]) -> Option<usize> {
    let line_end = buf
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(buf.len());
    let line = &buf[..line_end];
    let v = line.get(line.len().checked_sub(9)?..)?;
    (v.starts_with(b" HTTP/1.") && (b'2'..=b'9').contains(&v[8])).then_some(line_end - 1)
}

/// The length of the request-target in a request line that may not have ended yet (`None`: no target begun).
fn target_len_so_far(buf: &[u8]) -> Option<usize> {
    let start = buf.iter().position(|&b| b == b' ')? + 1;
    let rest = &buf[start..];
    Some(
        rest.iter()
            .position(|&b| b == b' ' || b == b'\r' || b == b'\n')
            .unwrap_or(rest.len()),
    )
}

fn parse_head_as_sent(buf: &[u8], max_head: usize, max_uri: usize) -> Result<Head, HeadError> {
    // uninitialised: a head of a few headers does not pay for zeroing MAX_HEADERS slots (3.2 KB)
    let mut storage = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut req,
        buf,
        &mut storage,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > max_uri && target_len_so_far(buf).is_some_and(|n| n > max_uri) {
                return Err(HeadError::Status(414, "request target too long"));
            }
            return Err(if buf.len() > max_head {
                HeadError::Status(431, "request head too large")
            } else {
                HeadError::Partial
            });
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::Status(431, "too many headers"));
        }
        Err(httparse::Error::Version) => {
            return Err(if looks_like_other_version(buf) {
                HeadError::Status(505, "HTTP version not supported")
            } else {
                bad("bad request line")
            });
        }
        Err(httparse::Error::Token) | Err(httparse::Error::Status) => {
            return Err(bad("bad request line"));
        }
        Err(_) => return Err(bad("malformed header")),
    };
    let method = req.method.unwrap_or("");
    let target = req.path.unwrap_or("");
    if target.len() > max_uri {
        return Err(HeadError::Status(414, "request target too long"));
    }
    if len > max_head {
        return Err(HeadError::Status(431, "request head too large"));
    }
    // httparse accepts a bare LF as a line end; HTTP/1.1 servers must not (a front end and a back end that
    // disagree on line ends is a classic smuggling vector).
    if has_bare_lf(&buf[..len]) {
        return Err(bad("bare LF in request head"));
    }
    let version = match req.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => return Err(HeadError::Status(505, "HTTP version not supported")),
    };
    let Target {
        path,
        query,
        authority,
    } = split_target(method, target)?;

    // Heads are far below 4 GiB (`max_head_bytes`), so spans fit in u32; refuse rather than wrap.
    let Ok(len32) = u32::try_from(len) else {
        return Err(HeadError::Status(431, "request head too large"));
    };
    let base = buf.as_ptr() as usize;
    let span = |b: &[u8]| Span {
        at: (b.as_ptr() as usize - base) as u32,
        len: b.len() as u32,
    };
    let mut fields: Vec<Field> = Vec::with_capacity(req.headers.len() + 1);
    let mut own: Vec<u8> = Vec::new();
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding: Option<std::borrow::Cow<'_, str>> = None;
    let mut host_at: Option<usize> = None;
    let mut connection = ConnectionOptions::default();
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let raw = trim_ows(h.value);
        let raw_span = span(raw);
        let value = if raw.is_ascii() || std::str::from_utf8(raw).is_ok() {
            raw_span
        } else {
            // kept byte for byte for forwarding; the rest of ordo sees the lossy UTF-8 form
            let at = len32 + own.len() as u32;
            own.extend_from_slice(String::from_utf8_lossy(raw).as_bytes());
            Span {
                at,
                len: len32 + own.len() as u32 - at,
            }
        };
        let known = Known::of(h.name.as_bytes());
        match known {
            Known::ContentLength => {
                if content_length.is_some() {
                    return Err(bad("more than one Content-Length"));
                }
                content_length =
                    Some(parse_content_length(raw).ok_or(bad("invalid Content-Length"))?);
            }
            Known::TransferEncoding => {
                if transfer_encoding.is_some() {
                    return Err(bad("more than one Transfer-Encoding"));
                }
                transfer_encoding = Some(String::from_utf8_lossy(raw));
            }
            Known::Host => {
                if host_at.is_some() {
                    return Err(bad("more than one Host"));
                }
                if !valid_host(raw, false) {
                    return Err(bad("invalid Host"));
                }
                host_at = Some(fields.len());
            }
            Known::Connection => connection.add(raw),
            Known::Expect => {
                if raw.eq_ignore_ascii_case(b"100-continue") {
                    expect_continue = version == Version::Http11;
                } else {
                    return Err(HeadError::Status(417, "unsupported Expect"));
                }
            }
            _ => {}
        }
        fields.push(Field {
            name: span(h.name.as_bytes()),
            value,
            raw: raw_span,
            known,
        });
    }
    if version == Version::Http11 && host_at.is_none() {
        return Err(bad("missing Host header"));
    }
    // absolute-form: the target's authority is the request's host, whatever Host says (RFC 9112 §3.2.2)
    if let Some(authority) = authority {
        let a = span(authority.as_bytes());
        match host_at {
            Some(i) => {
                fields[i].value = a;
                fields[i].raw = a;
            }
            None => {
                let at = len32 + own.len() as u32;
                own.extend_from_slice(b"Host");
                fields.push(Field {
                    name: Span { at, len: 4 },
                    value: a,
                    raw: a,
                    known: Known::Host,
                });
            }
        }
    }
    // The framing checks come before the coding check, so a smuggling shape is always 400 (never 501).
    let framing = request_framing(
        content_length,
        transfer_encoding.as_deref(),
        version == Version::Http10,
    )
    .map_err(|e| match e {
        FramingError::Invalid(msg) => bad(msg),
        FramingError::UnsupportedCoding => HeadError::Status(501, "unsupported transfer coding"),
    })?;
    let keep_alive = match version {
        Version::Http11 => !connection.close,
        Version::Http10 => connection.keep_alive && !connection.close,
        Version::Http2 => true, // never parsed from an HTTP/1 head
    };
    Ok(Head {
        method: method_name(method),
        target: span(target.as_bytes()),
        path,
        query,
        version,
        fields,
        own,
        framing,
        keep_alive,
        expect_continue: expect_continue && framing != Framing::None,
        len,
    })
}

/// `host [ ":" port ]` as RFC 3986 §3.2.2–3.2.3 defines them: a bracketed IPv6 address or IPvFuture, or a
/// reg-name (unreserved characters, sub-delims, percent escapes: an IPv4 address is one), then optional
/// digits after a colon. The empty value is allowed in a Host header (a target without an authority,
/// RFC 9112 §3.2) unless `nonempty` (an absolute-form authority: an http URI must have a host, RFC 9110
/// §4.2.1); an empty host with a port never is. No userinfo, slash, space or anything else.
pub(crate) fn valid_host(v: &[u8], nonempty: bool) -> bool {
    if v.is_empty() {
        return !nonempty;
    }
    let (host, port) = if v[0] == b'[' {
        let Some(close) = v.iter().position(|&b| b == b']') else {
            return false;
        };
        let (lit, rest) = v.split_at(close + 1);
        if !valid_ip_literal(&lit[1..lit.len() - 1]) {
            return false;
        }
        match rest.split_first() {
            None => return true,
            Some((b':', port)) => (lit, port),
            Some(_) => return false,
        }
    } else {
        match v.iter().position(|&b| b == b':') {
            Some(i) => (&v[..i], &v[i + 1..]),
            None => (v, &[][..]),
        }
    };
    if host.is_empty() || !port.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if host[0] == b'[' {
        return true; // checked above
    }
    let mut i = 0;
    while i < host.len() {
        let b = host[i];
        if b == b'%' {
            if !(host.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && host.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
            {
                return false;
            }
            i += 3;
            continue;
        }
        if !(is_unreserved(b) || is_sub_delim(b)) {
            return false;
        }
        i += 1;
    }
    true
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// Inside `[...]`: an IPv6 address, or `v<hex>.<unreserved / sub-delims / ":">` (IPvFuture).
fn valid_ip_literal(lit: &[u8]) -> bool {
    if let Some(rest) = lit.strip_prefix(b"v").or_else(|| lit.strip_prefix(b"V")) {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        return dot > 0
            && rest[..dot].iter().all(u8::is_ascii_hexdigit)
            && rest.len() > dot + 1
            && rest[dot + 1..]
                .iter()
                .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':');
    }
    std::str::from_utf8(lit).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

/// A request line that names some other HTTP version (`HTTP/2.0`, `HTTP/1.2`) earns 505, garbage 400.
fn looks_like_other_version(buf: &[u8]) -> bool {
    let line_end = buf
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(buf.len());
    let line = &buf[..line_end];
    if line.iter().filter(|&&b| b == b' ').count() != 2 {
        return false;
    }
    let Some(sp) = line.iter().rposition(|&b| b == b' ') else {
        return false;
    };
    let v = &line[sp + 1..];
    v.len() >= 6
        && v.starts_with(b"HTTP/")
        && v[5..].iter().all(|b| b.is_ascii_digit() || *b == b'.')
        && v[5].is_ascii_digit()
}

/// A request-target taken apart.
struct Target<'a> {
    /// Percent-decoded and normalised.
    path: String,
    /// As sent, without the `?`.
    query: Option<String>,
    /// The authority of an absolute-form target (`http://host:port/...`), validated.
    authority: Option<&'a str>,
}

/// Splits a request-target into the normalised, decoded path, the raw query and (absolute-form) the
/// authority.
fn split_target<'a>(method: &str, target: &'a str) -> Result<Target<'a>, HeadError> {
    // A fragment is never part of a request-target (RFC 9112 §3.2); parsers that cut the path at `#` and
    // ones that keep it would route the same request differently (HAProxy's CVE-2023-45539).
    if target.contains('#') {
        return Err(bad("fragment in request target"));
    }
    let (authority, origin) = if target.starts_with('/') {
        (None, target)
    } else if target == "*" {
        if method == "OPTIONS" {
            return Ok(Target {
                path: "*".to_string(),
                query: None,
                authority: None,
            });
        }
        return Err(bad("bad request target"));
    } else if let Some(rest) = strip_scheme(target) {
        // absolute-form: the authority, then a path (none means `/`) and maybe a query.
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if !valid_host(authority.as_bytes(), true) {
            return Err(bad("bad authority in request target"));
        }
        (Some(authority), &rest[end..])
    } else {
        return Err(bad("bad request target"));
    };
    let (raw_path, query) = match origin.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (origin, None),
    };
    let raw_path = if raw_path.is_empty() { "/" } else { raw_path };
    let decoded = decode_path(raw_path).ok_or(bad("bad percent-encoding in path"))?;
    let path = if decoded.contains("/.") || decoded.contains("//") {
        normalise(&decoded).ok_or(bad("path escapes the root"))?
    } else {
        decoded
    };
    Ok(Target {
        path,
        query,
        authority,
    })
}

/// The normalised, decoded path and the raw query of an HTTP/2 `:path` (origin-form, or `*` for OPTIONS),
/// by the same rules as an HTTP/1 request-target; the error is the reason for a 400.
pub(crate) fn path_and_query(
    method: &str,
    target: &str,
) -> Result<(String, Option<String>), &'static str> {
    if !target.starts_with('/') && target != "*" {
        return Err("bad :path (expected an origin-form path)");
    }
    match split_target(method, target) {
        Ok(t) => Ok((t.path, t.query)),
        Err(HeadError::Status(_, msg)) => Err(msg),
        Err(HeadError::Partial) => Err("bad :path"),
    }
}

/// The origin-form a normalised, decoded `path` and a raw `query` make again: the bytes that would change
/// the path's meaning if sent as they are (`%`, `?`, `#`, space, controls, non-ASCII) percent-encoded, the
/// rest as is; `*` stays `*`. An upstream decoding it gets back exactly the path ordo routed on.
pub(crate) fn origin_form(path: &str, query: Option<&str>, out: &mut BytesMut) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path.as_bytes() {
        if b <= b' ' || b >= 0x7f || matches!(b, b'%' | b'?' | b'#') {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.extend_from_slice(&[b]);
        }
    }
    if let Some(q) = query {
        out.extend_from_slice(b"?");
        out.extend_from_slice(q.as_bytes());
    }
}

fn strip_scheme(t: &str) -> Option<&str> {
    let lower = t.get(..8).unwrap_or(t).to_ascii_lowercase();
    if lower.starts_with("http://") {
        Some(&t[7..])
    } else if lower.starts_with("https://") {
        Some(&t[8..])
    } else {
        None
    }
}

/// Percent-decodes a path; refuses bad escapes, control bytes (NUL included) and non-UTF-8 results.
fn decode_path(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return None;
        }
        return Some(raw.to_string());
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = if b[i] == b'%' {
            let hi = hex(*b.get(i + 1)?)?;
            let lo = hex(*b.get(i + 2)?)?;
            i += 3;
            hi << 4 | lo
        } else {
            i += 1;
            b[i - 1]
        };
        if c < 0x20 || c == 0x7f {
            return None;
        }
        out.push(c);
    }
    String::from_utf8(out).ok()
}

/// Percent-decodes a query component (`+` is a space); `None` on a bad escape or non-UTF-8 result.
pub fn percent_decode_component(raw: &str) -> Option<String> {
    if !raw.contains(['%', '+']) {
        return Some(raw.to_string());
    }
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = hex(*b.get(i + 1)?)?;
                let lo = hex(*b.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Resolves `.` and `..` segments and collapses empty ones, keeping a trailing slash. `None` when `..`
/// would climb above the root.
fn normalise(path: &str) -> Option<String> {
    if !path.contains("/.") && !path.contains("//") {
        return Some(path.to_string());
    }
    let mut segs: Vec<&str> = Vec::new();
    let mut trailing = path.ends_with('/');
    for seg in path.split('/') {
        match seg {
            "" => {}
            "." => trailing = true,
            ".." => {
                segs.pop()?;
                trailing = true;
            }
            s => {
                segs.push(s);
                trailing = false;
            }
        }
    }
    if path.ends_with('/') {
        trailing = true;
    }
    let mut out = String::with_capacity(path.len());
    for s in &segs {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    Some(out)
}

/// The reason phrase of a status code ("" for unknown ones).
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        508 => "Loop Detected",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<Head, HeadError> {
        parse_head(s.as_bytes(), 16 * 1024, 8 * 1024)
    }

    /// The header fields of a parsed head: (name as sent, value).
    fn fields(h: &mut Head, s: &[u8]) -> Vec<(String, String)> {
        let hs = h.take_headers(Bytes::copy_from_slice(&s[..h.len]));
        hs.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn status(s: &str) -> u16 {
        match head(s) {
            Err(HeadError::Status(st, _)) => st,
            other => panic!("expected an error status for {s:?}, got {other:?}"),
        }
    }

    #[test]
    fn parses_a_simple_get() {
        let s = "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Y:  z \r\n\r\nrest";
        let mut h = head(s).unwrap();
        assert_eq!(h.method, "GET");
        assert_eq!(h.path, "/a/b");
        assert_eq!(h.query.as_deref(), Some("x=1"));
        assert_eq!(
            fields(&mut h, s.as_bytes()),
            vec![("Host".into(), "h".into()), ("X-Y".into(), "z".into())]
        );
        assert_eq!(h.framing, Framing::None);
        assert!(h.keep_alive);
        assert_eq!(
            h.len,
            "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Y:  z \r\n\r\n".len()
        );
    }

    #[test]
    fn keep_alive_rules() {
        assert!(!head("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive);
        assert!(
            head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                .unwrap()
                .keep_alive
        );
        assert!(
            !head("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                .unwrap()
                .keep_alive
        );
    }

    #[test]
    fn partial_and_too_large() {
        assert_eq!(
            head("GET / HTTP/1.1\r\nHost: h\r\n").unwrap_err(),
            HeadError::Partial
        );
        let big = format!("GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n", "a".repeat(100));
        assert!(matches!(
            parse_head(big.as_bytes(), 64, 64),
            Err(HeadError::Status(431, _))
        ));
        let big = format!(
            "GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n\r\n",
            "a".repeat(100)
        );
        assert!(matches!(
            parse_head(big.as_bytes(), 64, 64),
            Err(HeadError::Status(431, _))
        ));
        let many: String = (0..150).map(|i| format!("X{i}: y\r\n")).collect();
        assert_eq!(
            status(&format!("GET / HTTP/1.1\r\nHost: h\r\n{many}\r\n")),
            431
        );
    }

    #[test]
    fn smuggling_shapes_are_400() {
        for s in [
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\nHost: h\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: y\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX : y\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nX\x7f: y\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(status(s), 400, "{s:?}");
        }
    }

    #[test]
    fn transfer_encoding_decision_table() {
        let te = |v: &str| {
            let req = format!("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: {v}\r\n\r\n");
            match head(&req) {
                Ok(h) => {
                    assert_eq!(h.framing, Framing::Chunked, "{v:?}");
                    200
                }
                Err(HeadError::Status(st, _)) => st,
                Err(HeadError::Partial) => panic!("partial for {v:?}"),
            }
        };
        for ok in ["chunked", "Chunked", "CHUNKED"] {
            assert_eq!(te(ok), 200, "{ok:?}");
        }
        // well-framed (chunked last, once, no parameters) but another coding first: 501
        for v in [
            "gzip, chunked",
            "GZIP,chunked",
            "deflate, gzip, chunked",
            "identity, chunked",
            "x-custom, chunked",
            "gzip;level=9, chunked",
            "foo ; a=\"b c\" , chunked",
        ] {
            assert_eq!(te(v), 501, "{v:?}");
        }
        // the final coding is not chunked, chunked twice or with parameters, or a malformed list: 400
        for v in [
            "gzip",
            "identity",
            "xchunked",
            "chunkedx",
            "chunked, gzip",
            "chunked, identity",
            "chunked, chunked",
            "chunked, gzip, chunked",
            "chunked;x=1",
            "gzip, chunked;x=1",
            ", chunked",
            "chunked,",
            "gzip,, chunked",
            "g(zip, chunked",
            "gzip;level, chunked",
            "gzip;=1, chunked",
            "gzip;a=\"b, chunked",
            "\"chunked\"",
            "chunked chunked",
        ] {
            assert_eq!(te(v), 400, "{v:?}");
        }
        // framing errors win over an unknown coding: 400, never 501
        for s in [
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 5\r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert_eq!(status(s), 400, "{s:?}");
        }
    }

    #[test]
    fn bad_request_lines() {
        assert_eq!(status("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/3.0\r\nHost: h\r\n\r\n"), 505);
        assert_eq!(status("GET / HTTP/1.1x\r\nHost: h\r\n\r\n"), 400);
        for s in [
            "GET\r\n\r\n",
            "GET / FOO/1.1\r\n\r\n",
            "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET relative HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /a b HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /a%00b HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /../etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET /a/%2E%2E/%2e%2e/x HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            assert_eq!(status(s), 400, "{s:?}");
        }
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: h\r\nExpect: magic\r\n\r\n"),
            417
        );
    }

    #[test]
    fn http_1_minor_versions_are_read_as_1_1() {
        for v in ["1.2", "1.9"] {
            let h = head(&format!("GET /x HTTP/{v}\r\nHost: h\r\n\r\n")).unwrap();
            assert_eq!((h.version, h.keep_alive), (Version::Http11, true), "{v}");
        }
        // still HTTP/1.1's rules: Host required; partial heads stay partial
        assert_eq!(status("GET / HTTP/1.2\r\n\r\n"), 400);
        assert_eq!(head("GET / HTTP/1.2").unwrap_err(), HeadError::Partial);
        assert_eq!(
            head("GET / HTTP/1.2\r\nHost: h\r\n").unwrap_err(),
            HeadError::Partial
        );
    }

    #[test]
    fn long_targets_are_414_even_before_the_line_ends() {
        let uri = format!("/{}", "a".repeat(100));
        let req = format!("GET {uri} HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(parse_head(req.as_bytes(), 1024, 101).is_ok());
        let status_of = |b: &[u8], max_head, max_uri| match parse_head(b, max_head, max_uri) {
            Err(HeadError::Status(s, _)) => s,
            other => panic!("{other:?}"),
        };
        assert_eq!(status_of(req.as_bytes(), 1024, 100), 414);
        // head over both limits: the URI is what is too long
        assert_eq!(status_of(req.as_bytes(), 64, 64), 414);
        // the request line has not ended yet, the target so far is already too long
        assert_eq!(status_of(&req.as_bytes()[..90], 1024, 50), 414);
        assert_eq!(
            parse_head(&req.as_bytes()[..90], 1024, 100).unwrap_err(),
            HeadError::Partial
        );
        // a short target with long headers: 431
        let fat = format!("GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n", "a".repeat(100));
        assert_eq!(status_of(fat.as_bytes(), 64, 64), 431);
    }

    #[test]
    fn hosts() {
        for ok in [
            "h",
            "example.com",
            "EXAMPLE.com:8080",
            "127.0.0.1",
            "[::1]",
            "[::1]:80",
            "[2001:db8::1]:443",
            "[v7.a:b]",
            "a_b~c-d",
            "%41b",
            "h:",
            "!$&'()*+,;=",
        ] {
            assert!(valid_host(ok.as_bytes(), true), "{ok}");
        }
        assert!(valid_host(b"", false));
        for bad in [
            "", ":80", "a b", "a/b", "a/../b", "u@h", "h:x", "h:80:80", "[::1", "[::1]x", "[zz]",
            "[v.x]", "[vz.x]", "[v1.]", "%4", "%zz", "a\\b", "a?b", "a#b", "a\"b", "\u{e9}",
        ] {
            assert!(!valid_host(bad.as_bytes(), true), "{bad:?}");
        }
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a/../b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: :80\r\n\r\n"), 400);
        assert!(head("GET / HTTP/1.1\r\nHost:\r\n\r\n").is_ok());
    }

    #[test]
    fn absolute_form_authority_replaces_host() {
        let s = "GET http://A.example:81?q=1 HTTP/1.1\r\nX: 1\r\nHost: other\r\n\r\n";
        let mut h = head(s).unwrap();
        assert_eq!((h.path.as_str(), h.query.as_deref()), ("/", Some("q=1")));
        assert_eq!(
            fields(&mut h, s.as_bytes()),
            vec![
                ("X".to_string(), "1".to_string()),
                ("Host".to_string(), "A.example:81".to_string())
            ]
        );
        // no Host (HTTP/1.0): the authority becomes one
        let s = "GET HTTP://b.example/x HTTP/1.0\r\nX: 1\r\n\r\n";
        let mut h = head(s).unwrap();
        assert_eq!(
            fields(&mut h, s.as_bytes()),
            vec![
                ("X".to_string(), "1".to_string()),
                ("Host".to_string(), "b.example".to_string())
            ]
        );
        for bad in [
            "http:///x",
            "http://u@h/",
            "http://h:x/",
            "http://[::1/",
            "http://h/#f",
        ] {
            assert_eq!(
                status(&format!("GET {bad} HTTP/1.1\r\nHost: h\r\n\r\n")),
                400,
                "{bad}"
            );
        }
        assert_eq!(status("GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    }

    #[test]
    fn origin_form_round_trips_the_normalised_path() {
        let of = |p: &str, q: Option<&str>| {
            let mut out = BytesMut::new();
            origin_form(p, q, &mut out);
            String::from_utf8(out.to_vec()).unwrap()
        };
        assert_eq!(of("/a/b", None), "/a/b");
        assert_eq!(of("/", Some("q=1&r=%2F")), "/?q=1&r=%2F");
        assert_eq!(of("/a?b#c%d e", None), "/a%3Fb%23c%25d%20e");
        assert_eq!(of("/caf\u{e9}", Some("")), "/caf%C3%A9?");
        assert_eq!(of("*", None), "*");
        for raw in ["/x/%41%3f%25", "/a//b/./c/../d%20e"] {
            let h = head(&format!("GET {raw} HTTP/1.1\r\nHost: h\r\n\r\n")).unwrap();
            let again = of(&h.path, None);
            let h2 = head(&format!("GET {again} HTTP/1.1\r\nHost: h\r\n\r\n")).unwrap();
            assert_eq!(h2.path, h.path, "{raw} → {again}");
        }
    }

    #[test]
    fn names_as_sent_and_opaque_values_are_kept() {
        let s = b"GET / HTTP/1.1\r\nHoSt: h\r\nX-Bin: \t a\xffb \r\nx-y: z\r\nX-Y: \r\n\r\n";
        let mut h = parse_head(s, 1024, 1024).unwrap();
        let hs = h.take_headers(Bytes::copy_from_slice(&s[..h.len]));
        assert_eq!(
            hs.iter().collect::<Vec<_>>(),
            [
                ("HoSt", "h"),
                ("X-Bin", "a\u{fffd}b"),
                ("x-y", "z"),
                ("X-Y", "")
            ]
        );
        let raw: Vec<(&[u8], &[u8])> = hs.iter_raw().map(|(n, v, _)| (n, v)).collect();
        assert_eq!(raw[1], (&b"X-Bin"[..], &b"a\xffb"[..]));
        assert_eq!(raw[3], (&b"X-Y"[..], &b""[..]));
        // repeated names: the first for `get`, all of them in order for `get_all`
        assert_eq!(hs.get("X-y"), Some("z"));
        assert_eq!(hs.get_all("x-Y").collect::<Vec<_>>(), ["z", ""]);
        assert_eq!(hs.get("host"), Some("h"));
    }

    #[test]
    fn a_minor_version_above_ours_keeps_its_fields() {
        let s = b"GET / HTTP/1.5\r\nHost: h\r\nA: b\r\n\r\n";
        let mut h = parse_head(s, 1024, 1024).unwrap();
        let hs = h.take_headers(Bytes::copy_from_slice(&s[..h.len]));
        assert_eq!(hs.iter().collect::<Vec<_>>(), [("Host", "h"), ("A", "b")]);
    }

    #[test]
    fn paths_normalise() {
        assert_eq!(normalise("/a/./b/../c"), Some("/a/c".into()));
        assert_eq!(normalise("//a//b/"), Some("/a/b/".into()));
        assert_eq!(normalise("/a/.."), Some("/".into()));
        assert_eq!(normalise("/a/b/.."), Some("/a/".into()));
        assert_eq!(normalise("/.."), None);
        assert_eq!(normalise("/.hidden"), Some("/.hidden".into()));
        let h = head("GET http://example.com/x/%41?q HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!((h.path.as_str(), h.query.as_deref()), ("/x/A", Some("q")));
        let h = head("GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        assert_eq!(h.path, "/");
    }

    #[test]
    fn framing() {
        let h = head("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n").unwrap();
        assert_eq!(h.framing, Framing::Length(12));
        let h = head("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\n\r\n").unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(h.expect_continue);
    }
}
