//! A request's header fields without a heap string per field: the head's bytes are kept in one buffer (the
//! bytes split off the connection's read buffer, for HTTP/1) and each field is a pair of ranges into it, the
//! name as the client spelled it and the value with its surrounding whitespace trimmed. Names are compared
//! case-insensitively at lookup instead of being lower-cased up front, and a value that is not UTF-8 keeps
//! its bytes (a proxy forwards them) beside a lossy UTF-8 copy the rest of ordo reads. Headers added after
//! parsing (HTTP/2's fields, an absolute-form target's authority, tests) go to a second, owned buffer.

use std::fmt;

use bytes::Bytes;

/// Header names ordo itself acts on, recognised once while parsing (case-insensitively).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Known {
    Other,
    Host,
    ContentLength,
    TransferEncoding,
    Connection,
    Expect,
    Via,
    XForwardedFor,
    Cookie,
    /// X-Forwarded-Proto, X-Forwarded-Host, Forwarded (RFC 7239): what a proxy keeps only from a trusted peer.
    XForwardedProto,
    XForwardedHost,
    Forwarded,
    /// X-Request-Id: kept when sane, else replaced by a generated one.
    XRequestId,
    /// Another hop-by-hop header a proxy never forwards: Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade.
    HopByHop,
}

impl Known {
    /// The kind of a header name, in any case.
    pub(crate) fn of(name: &[u8]) -> Known {
        let is = |k: &[u8]| name.eq_ignore_ascii_case(k);
        match name.len() {
            2 if is(b"te") => Known::HopByHop,
            3 if is(b"via") => Known::Via,
            4 if is(b"host") => Known::Host,
            6 if is(b"expect") => Known::Expect,
            6 if is(b"cookie") => Known::Cookie,
            7 if is(b"upgrade") || is(b"trailer") => Known::HopByHop,
            9 if is(b"forwarded") => Known::Forwarded,
            10 if is(b"connection") => Known::Connection,
            10 if is(b"keep-alive") => Known::HopByHop,
            12 if is(b"x-request-id") => Known::XRequestId,
            14 if is(b"content-length") => Known::ContentLength,
            15 if is(b"x-forwarded-for") => Known::XForwardedFor,
            16 if is(b"proxy-connection") => Known::HopByHop,
            16 if is(b"x-forwarded-host") => Known::XForwardedHost,
            17 if is(b"x-forwarded-proto") => Known::XForwardedProto,
            17 if is(b"transfer-encoding") => Known::TransferEncoding,
            _ => Known::Other,
        }
    }
}

/// Where some bytes sit: an offset into the head buffer, or past its end into the owned buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) at: u32,
    pub(crate) len: u32,
}

/// One header field.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    /// The name as sent.
    pub(crate) name: Span,
    /// The value as the rest of ordo reads it: UTF-8 (lossy when the bytes were not), OWS trimmed.
    pub(crate) value: Span,
    /// The value's bytes as sent, OWS trimmed: `value` itself unless they are not UTF-8.
    pub(crate) raw: Span,
    pub(crate) known: Known,
}

/// The header fields of a request, in the order received.
#[derive(Clone, Default)]
pub struct Headers {
    /// The head as received (empty for a request not parsed from HTTP/1 bytes).
    buf: Bytes,
    /// Bytes the fields point into past `buf`: values and names added or changed after parsing.
    own: Vec<u8>,
    fields: Vec<Field>,
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Headers {
    /// No headers.
    pub fn new() -> Headers {
        Headers::default()
    }

    /// Fields parsed from `buf` (their spans point into it or, past its end, into `own`).
    pub(crate) fn from_parts(buf: Bytes, own: Vec<u8>, fields: Vec<Field>) -> Headers {
        Headers { buf, own, fields }
    }

    /// Room for `n` fields and `bytes` bytes of names and values added with [`Headers::push`].
    pub fn with_capacity(n: usize, bytes: usize) -> Headers {
        Headers {
            buf: Bytes::new(),
            own: Vec::with_capacity(bytes),
            fields: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    fn bytes(&self, s: Span) -> &[u8] {
        let (at, len) = (s.at as usize, s.len as usize);
        let found = if at < self.buf.len() {
            self.buf.get(at..at + len)
        } else {
            let o = at - self.buf.len();
            self.own.get(o..o + len)
        };
        found.unwrap_or_default()
    }

    /// The UTF-8 text at a span (the request-target, say); empty if it is not UTF-8.
    pub(crate) fn head_str(&self, s: Span) -> &str {
        self.str(s)
    }

    fn str(&self, s: Span) -> &str {
        // every name and `value` span holds UTF-8: checked (or made lossy) when the field was added
        std::str::from_utf8(self.bytes(s)).unwrap_or_default()
    }

    /// The first value of the header with this name (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| self.named(f, name))
            .map(|f| self.str(f.value))
    }

    fn named(&self, f: &Field, name: &str) -> bool {
        f.name.len as usize == name.len()
            && self.bytes(f.name).eq_ignore_ascii_case(name.as_bytes())
    }

    /// Every value of the header with this name (case-insensitive), in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |f| self.named(f, name))
            .map(|f| self.str(f.value))
    }

    /// `(name as sent, value)` of every field in order; a value that is not UTF-8 has `�` in place of its
    /// bad bytes (a proxy forwards the bytes themselves).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.fields
            .iter()
            .map(|f| (self.str(f.name), self.str(f.value)))
    }

    /// `(name as sent, value bytes as sent, kind)` of every field in order: what a proxy forwards.
    pub(crate) fn iter_raw(&self) -> impl Iterator<Item = (&[u8], &[u8], Known)> + '_ {
        self.fields
            .iter()
            .map(|f| (self.bytes(f.name), self.bytes(f.raw), f.known))
    }

    /// The fields of one kind (their UTF-8 values).
    pub(crate) fn known(&self, k: Known) -> impl Iterator<Item = &str> + '_ {
        self.fields
            .iter()
            .filter(move |f| f.known == k)
            .map(|f| self.str(f.value))
    }

    /// Whether a field of this kind is present.
    pub(crate) fn has(&self, k: Known) -> bool {
        self.fields.iter().any(|f| f.known == k)
    }

    fn own_span(&mut self, b: &[u8]) -> Span {
        let at = self.buf.len() + self.own.len();
        self.own.extend_from_slice(b);
        Span {
            at: u32::try_from(at).unwrap_or(u32::MAX),
            len: u32::try_from(b.len()).unwrap_or(0),
        }
    }

    /// Adds a header at the end (the name is kept as given).
    pub fn push(&mut self, name: &str, value: &str) {
        self.push_bytes(name.as_bytes(), value.as_bytes());
    }

    /// Adds a header whose value may not be UTF-8: forwarded byte for byte, read by the rest of ordo in its
    /// lossy UTF-8 form. A name that is not UTF-8 is replaced by its lossy form.
    pub(crate) fn push_bytes(&mut self, name: &[u8], value: &[u8]) {
        let name_span = match std::str::from_utf8(name) {
            Ok(_) => self.own_span(name),
            Err(_) => {
                let lossy = String::from_utf8_lossy(name).into_owned();
                self.own_span(lossy.as_bytes())
            }
        };
        let f = Field {
            name: name_span,
            value: Span { at: 0, len: 0 },
            raw: Span { at: 0, len: 0 },
            known: Known::of(name),
        };
        self.fields.push(f);
        self.set_value_bytes(self.fields.len() - 1, value);
    }

    /// Replaces the value of field `i` (bytes that may not be UTF-8, as for [`Headers::push_bytes`]).
    pub(crate) fn set_value_bytes(&mut self, i: usize, value: &[u8]) {
        let raw = self.own_span(value);
        let shown = match std::str::from_utf8(value) {
            Ok(_) => raw,
            Err(_) => {
                let lossy = String::from_utf8_lossy(value).into_owned();
                self.own_span(lossy.as_bytes())
            }
        };
        if let Some(f) = self.fields.get_mut(i) {
            f.raw = raw;
            f.value = shown;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_case_and_keeps_names_as_sent() {
        let mut h = Headers::new();
        h.push("X-Thing", "a");
        h.push("x-thing", "b");
        h.push("Host", "h");
        assert_eq!(h.get("x-THING"), Some("a"));
        assert_eq!(h.get_all("X-THING").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(h.get("host"), Some("h"));
        assert_eq!(h.get("hos"), None);
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [("X-Thing", "a"), ("x-thing", "b"), ("Host", "h")]
        );
        assert!(h.has(Known::Host));
        assert_eq!(h.known(Known::Host).collect::<Vec<_>>(), ["h"]);
    }

    #[test]
    fn non_utf8_values_keep_their_bytes() {
        let mut h = Headers::new();
        h.push_bytes(b"X-Bin", b"a\xffb");
        h.push("Next", "n");
        assert_eq!(h.get("x-bin"), Some("a\u{fffd}b"));
        let raw: Vec<_> = h
            .iter_raw()
            .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(raw[0], (b"X-Bin".to_vec(), b"a\xffb".to_vec()));
        assert_eq!(raw[1], (b"Next".to_vec(), b"n".to_vec()));
        h.set_value_bytes(0, b"plain");
        assert_eq!(h.get("x-bin"), Some("plain"));
        assert_eq!(h.iter_raw().next().map(|(_, v, _)| v), Some(&b"plain"[..]));
    }

    #[test]
    fn spans_reach_both_buffers() {
        let buf = Bytes::from_static(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        let fields = vec![Field {
            name: Span { at: 16, len: 4 },
            value: Span { at: 22, len: 1 },
            raw: Span { at: 22, len: 1 },
            known: Known::Host,
        }];
        let mut h = Headers::from_parts(buf, Vec::new(), fields);
        h.push("Via", "1.1 x");
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [("Host", "h"), ("Via", "1.1 x")]
        );
        h.set_value_bytes(0, b"other");
        assert_eq!(h.get("HOST"), Some("other"));
        assert_eq!(h.known(Known::Via).collect::<Vec<_>>(), ["1.1 x"]);
    }

    #[test]
    fn kinds() {
        for (n, k) in [
            ("HOST", Known::Host),
            ("Content-Length", Known::ContentLength),
            ("transfer-encoding", Known::TransferEncoding),
            ("Connection", Known::Connection),
            ("Keep-Alive", Known::HopByHop),
            ("TE", Known::HopByHop),
            ("Upgrade", Known::HopByHop),
            ("Trailer", Known::HopByHop),
            ("Proxy-Connection", Known::HopByHop),
            ("Expect", Known::Expect),
            ("VIA", Known::Via),
            ("X-Forwarded-For", Known::XForwardedFor),
            ("Cookie", Known::Cookie),
            ("Cookies", Known::Other),
            ("X-Forwarded_For", Known::Other),
            ("", Known::Other),
        ] {
            assert_eq!(Known::of(n.as_bytes()), k, "{n}");
        }
    }
}
