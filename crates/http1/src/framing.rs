//! Where a message body ends (RFC 9112 §6): Content-Length and Transfer-Encoding values checked strictly,
//! and the decision between no body, a length, chunked or (responses) the end of the connection. The
//! Transfer-Encoding decision table is in docs/serve-http.md.

use std::fmt;

use crate::token::{is_tchar, trim_ows_str};

/// How a request body is delimited (a request body is never delimited by closing the connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// How a response body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body whatever the head declares: the answer to HEAD, 1xx, 204, 304.
    None,
    Length(u64),
    Chunked,
    /// The body runs to the end of the connection.
    UntilClose,
}

/// Why a message's framing was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramingError {
    /// Framing that parsers could disagree on, or that does not parse (a server answers 400).
    Invalid(&'static str),
    /// A well-formed Transfer-Encoding with codings before the final `chunked` this codec does not
    /// decode (a server answers 501).
    UnsupportedCoding,
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FramingError::Invalid(m) => f.write_str(m),
            FramingError::UnsupportedCoding => f.write_str("unsupported transfer coding"),
        }
    }
}

impl std::error::Error for FramingError {}

/// A Content-Length value (OWS already trimmed): digits only — no sign, no list (`5, 5`), no empty value
/// — and at most 19 digits (so it always fits in a u64).
#[inline]
pub fn parse_content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// A request's framing from its (single) Content-Length and Transfer-Encoding values. `chunked` is the one
/// coding decoded (RFC 9112 §6.1, §6.3, §7):
/// - both headers, or Transfer-Encoding in HTTP/1.0 → `Invalid`;
/// - a malformed Transfer-Encoding list (empty element, a name that is not a token, a bad parameter) →
///   `Invalid`;
/// - a list whose final coding is not `chunked` (`gzip`, `chunked, gzip`, `identity`) → `Invalid`: the
///   body length cannot be determined (§6.3 says MUST 400 and close);
/// - `chunked` more than once, or with parameters (it defines none) → `Invalid`: framing parsers disagree on;
/// - a well-formed list with other codings before the final `chunked` (`gzip, chunked`) →
///   `UnsupportedCoding`: the framing is sound but the body is in a coding not implemented (§6.1 SHOULD
///   501).
///
/// The framing checks come before the coding check, so a smuggling shape is always `Invalid`.
#[inline]
pub fn request_framing(
    content_length: Option<u64>,
    transfer_encoding: Option<&str>,
    http10: bool,
) -> Result<Framing, FramingError> {
    match (content_length, transfer_encoding) {
        (Some(_), Some(_)) => Err(FramingError::Invalid(
            "Content-Length together with Transfer-Encoding",
        )),
        (None, Some(_)) if http10 => Err(FramingError::Invalid("Transfer-Encoding in HTTP/1.0")),
        (None, Some(te)) => match transfer_codings(te)? {
            Codings::Chunked => Ok(Framing::Chunked),
            Codings::OthersThenChunked => Err(FramingError::UnsupportedCoding),
            Codings::NotChunkedLast => Err(FramingError::Invalid(
                "Transfer-Encoding does not end in chunked",
            )),
        },
        (Some(0), None) | (None, None) => Ok(Framing::None),
        (Some(n), None) => Ok(Framing::Length(n)),
    }
}

/// A response's framing (RFC 9112 §6.3): no body for HEAD, 1xx, 204 and 304; otherwise chunked when
/// `chunked` is the final transfer coding, the end of the connection when another one is, else the
/// Content-Length, else the end of the connection. Both Content-Length and Transfer-Encoding is refused
/// (§6.3 says "ought to be handled as an error": the shape of response splitting). The flag says whether
/// Transfer-Encoding named codings other than `chunked` (the body is still in them).
pub fn response_framing(
    status: u16,
    head_request: bool,
    content_length: Option<u64>,
    transfer_encoding: Option<&[u8]>,
) -> Result<(ResponseFraming, bool), FramingError> {
    let coded = match transfer_encoding {
        None => None,
        Some(_) if content_length.is_some() => {
            return Err(FramingError::Invalid(
                "Content-Length together with Transfer-Encoding",
            ));
        }
        Some(te) => {
            let te = std::str::from_utf8(te)
                .map_err(|_| FramingError::Invalid("malformed Transfer-Encoding"))?;
            Some(transfer_codings(te)?)
        }
    };
    let other_codings = matches!(
        coded,
        Some(Codings::OthersThenChunked | Codings::NotChunkedLast)
    );
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        ResponseFraming::None
    } else {
        match (coded, content_length) {
            (Some(Codings::NotChunkedLast), _) => ResponseFraming::UntilClose,
            (Some(_), _) => ResponseFraming::Chunked,
            (None, Some(n)) => ResponseFraming::Length(n),
            (None, None) => ResponseFraming::UntilClose,
        }
    };
    Ok((framing, other_codings))
}

/// What a well-formed Transfer-Encoding list asks of its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Codings {
    /// Exactly `chunked`.
    Chunked,
    /// Other codings, then `chunked` (`gzip, chunked`).
    OthersThenChunked,
    /// The final coding is not `chunked` (`gzip`, `chunked, gzip`, `identity`).
    NotChunkedLast,
}

/// Checks a Transfer-Encoding value (RFC 9112 §6.1, §6.3, §7):
/// - a malformed list (empty element, a name that is not a token, a bad parameter) → invalid;
/// - `chunked` more than once, or with parameters (it defines none) → invalid: framing parsers disagree on;
/// - otherwise what the list asks for, [`Codings`].
fn transfer_codings(value: &str) -> Result<Codings, FramingError> {
    let malformed = FramingError::Invalid("malformed Transfer-Encoding");
    let mut last: Option<&str> = None;
    let mut chunked_before = false;
    let mut others_before = false;
    for c in value.split(',').map(trim_ows_str) {
        if !valid_transfer_coding(c) {
            return Err(malformed);
        }
        if let Some(prev) = last {
            if coding_name(prev).eq_ignore_ascii_case("chunked") {
                chunked_before = true;
            } else {
                others_before = true;
            }
        }
        last = Some(c);
    }
    let last = last.ok_or(malformed)?;
    if !coding_name(last).eq_ignore_ascii_case("chunked") {
        return Ok(Codings::NotChunkedLast);
    }
    if last.contains(';') {
        return Err(FramingError::Invalid("chunked with parameters"));
    }
    if chunked_before {
        return Err(FramingError::Invalid("chunked applied more than once"));
    }
    Ok(if others_before {
        Codings::OthersThenChunked
    } else {
        Codings::Chunked
    })
}

/// The name of one transfer coding (without its parameters).
fn coding_name(c: &str) -> &str {
    trim_ows_str(c.split(';').next().unwrap_or(""))
}

/// `transfer-coding = token *( OWS ";" OWS token BWS "=" BWS ( token / quoted-string ) )` (RFC 9110 §10.1.4),
/// for one element of a list already split on commas (a quoted string holding a comma is refused).
fn valid_transfer_coding(c: &str) -> bool {
    let is_token = |s: &str| !s.is_empty() && s.bytes().all(is_tchar);
    let mut parts = c.split(';');
    if !is_token(trim_ows_str(parts.next().unwrap_or(""))) {
        return false;
    }
    parts.all(|p| {
        let Some((k, v)) = p.split_once('=') else {
            return false;
        };
        let v = trim_ows_str(v);
        is_token(trim_ows_str(k)) && (is_token(v) || is_quoted_string(v))
    })
}

fn is_quoted_string(v: &str) -> bool {
    let b = v.as_bytes();
    if b.len() < 2 || b[0] != b'"' || b[b.len() - 1] != b'"' {
        return false;
    }
    let mut escaped = false;
    for &c in &b[1..b.len() - 1] {
        if (c < 0x20 && c != b'\t') || c == 0x7f {
            return false;
        }
        if escaped {
            escaped = false;
        } else if c == b'\\' {
            escaped = true;
        } else if c == b'"' {
            return false;
        }
    }
    !escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_lengths() {
        assert_eq!(parse_content_length(b"0"), Some(0));
        assert_eq!(parse_content_length(b"0012"), Some(12));
        assert_eq!(
            parse_content_length(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
        for bad in [
            &b""[..],
            b"+5",
            b"-5",
            b"5, 5",
            b"5 ",
            b"0x5",
            b"18446744073709551615",
            b"00000000000000000001",
        ] {
            assert_eq!(parse_content_length(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn request_framing_decisions() {
        let f = |cl, te, h10| request_framing(cl, te, h10);
        assert_eq!(f(None, None, false), Ok(Framing::None));
        assert_eq!(f(Some(0), None, false), Ok(Framing::None));
        assert_eq!(f(Some(3), None, true), Ok(Framing::Length(3)));
        assert_eq!(f(None, Some("Chunked"), false), Ok(Framing::Chunked));
        assert_eq!(
            f(None, Some("gzip, chunked"), false),
            Err(FramingError::UnsupportedCoding)
        );
        for (cl, te, h10) in [
            (Some(1), Some("chunked"), false),
            (Some(1), Some("gzip, chunked"), false),
            (None, Some("gzip, chunked"), true),
            (None, Some("chunked, gzip"), false),
            (None, Some("chunked;x=1"), false),
            (None, Some("chunked, chunked"), false),
            (None, Some(", chunked"), false),
        ] {
            assert!(
                matches!(f(cl, te, h10), Err(FramingError::Invalid(_))),
                "{cl:?} {te:?} {h10}"
            );
        }
    }

    #[test]
    fn response_framing_decisions() {
        let f =
            |st, head, cl, te: Option<&str>| response_framing(st, head, cl, te.map(str::as_bytes));
        use ResponseFraming as R;
        assert_eq!(f(200, false, Some(5), None), Ok((R::Length(5), false)));
        assert_eq!(f(200, false, None, None), Ok((R::UntilClose, false)));
        assert_eq!(
            f(200, false, None, Some("chunked")),
            Ok((R::Chunked, false))
        );
        assert_eq!(
            f(200, false, None, Some("gzip, chunked")),
            Ok((R::Chunked, true))
        );
        assert_eq!(f(200, false, None, Some("gzip")), Ok((R::UntilClose, true)));
        for (st, head) in [(200, true), (100, false), (204, false), (304, false)] {
            assert_eq!(
                f(st, head, Some(5), None),
                Ok((R::None, false)),
                "{st} {head}"
            );
        }
        for te in ["chunked, chunked", "chunked;x=1", "g(zip", ""] {
            assert!(f(200, false, None, Some(te)).is_err(), "{te:?}");
        }
        assert!(f(200, false, Some(5), Some("chunked")).is_err());
        assert!(f(304, false, Some(5), Some("chunked")).is_err());
    }
}
