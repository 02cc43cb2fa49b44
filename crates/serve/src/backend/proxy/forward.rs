//! What the upstream is sent: the request head as forwarded (hop-by-hop headers dropped; X-Forwarded-For,
//! -Proto, -Host, Forwarded, X-Request-Id and Via added, a trusted proxy's own kept) and the Via pseudonym
//! that detects loops.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, BytesMut};

use ordo_http1::contains_byte;

use super::*;
use crate::http::headers::Known;
use crate::http::parse::origin_form;
use crate::http::{Request, Version};
use crate::http::{put_ip, put_u64};

/// A fresh Via pseudonym: 64 random bits from the standard library's per-process random hash keys (a new
/// key per call), mixed with the process id, the time and a counter so two backends never share one.
pub(super) fn new_via_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_usize(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    format!("ordo-{:016x}", h.finish())
}

/// Whether a Via field value names `token` as a received-by (`1.1 ordo-ab12, HTTP/1.0 other:80 (c)`).
pub(super) fn via_names(value: &str, token: &str) -> bool {
    value.split(',').any(|entry| {
        let mut words = entry.split_ascii_whitespace();
        let _protocol = words.next();
        words
            .next()
            .is_some_and(|by| by.eq_ignore_ascii_case(token))
    })
}

/// Hop-by-hop headers never forwarded, for a name in any case.
pub(super) fn hop_by_hop_bytes(name: &[u8]) -> bool {
    const HOP: [&[u8]; 7] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    ];
    HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

pub(super) fn put_header(out: &mut impl BufMut, k: &[u8], v: &[u8]) {
    out.put_slice(k);
    out.put_slice(b": ");
    out.put_slice(v);
    out.put_slice(b"\r\n");
}

/// Whether `b` is a tchar (RFC 9110 §5.6.2).
fn tchar(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'!' | b'#'..=b'\'' | b'*' | b'+' | b'-' | b'.'
        | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// Appends a Forwarded (RFC 7239) parameter value: as a token when it is one, else as a quoted-string.
fn put_forwarded_value(out: &mut BytesMut, v: &[u8]) {
    if !v.is_empty() && v.iter().all(|&b| tchar(b)) {
        out.put_slice(v);
        return;
    }
    out.put_u8(b'"');
    // a valid Host has neither `"` nor `\\`: one slice; the escaping is for anything else
    if !v.iter().any(|&b| b == b'"' || b == b'\\') {
        out.put_slice(v);
    } else {
        for &b in v {
            if b == b'"' || b == b'\\' {
                out.put_u8(b'\\');
            }
            out.put_u8(b);
        }
    }
    out.put_u8(b'"');
}

/// Appends `name: [kept, ]` — the start of a list header whose own entry follows.
fn put_list_start(out: &mut BytesMut, name: &[u8], kept: Option<Vec<u8>>) {
    out.put_slice(name);
    out.put_slice(b": ");
    if let Some(x) = kept.filter(|x| !x.is_empty()) {
        out.put_slice(&x);
        out.put_slice(b", ");
    }
}

impl ProxyBackend {
    /// The request head as forwarded: the method; the path ordo routed on (normalised, after a route's
    /// `strip_prefix`) with the query as sent; HTTP/1.1; the client's headers with their names as the client
    /// spelled them and their values byte for byte, minus hop-by-hop ones, `Expect`, `Content-Length` (ours
    /// replaces it), unless `forward_underscore_headers` names containing `_`, and, unless the peer is a
    /// trusted proxy (`[forwarded] trusted_proxies`), `X-Forwarded-For`/`-Proto`/`-Host` and `Forwarded`;
    /// then the headers ordo writes itself, in canonical case: `Host` (when the client sent none),
    /// `X-Forwarded-For` (a trusted peer's list with the peer appended), `X-Forwarded-Proto` (a trusted peer's,
    /// else `https` over TLS, `http` otherwise), `X-Forwarded-Host` (a trusted peer's, else the client's
    /// Host), `Forwarded` (a trusted peer's list with `for=…;proto=…;host=…` appended), `X-Request-Id` (when
    /// request ids are on), `Via`, `Content-Length`. A protocol switch asked of ordo (`Connection: Upgrade`,
    /// `Upgrade`) is asked of the upstream; `ws_key`, for an HTTP/2 client's WebSocket, is the
    /// `Sec-WebSocket-Key` sent in place of any the client sent.
    pub(super) fn render_request(
        &self,
        req: &Request,
        up: &Upstream,
        ws_key: Option<&str>,
        out: &mut BytesMut,
    ) {
        out.clear();
        out.put_slice(req.method.as_bytes());
        out.put_u8(b' ');
        origin_form(&req.path, req.query.as_deref(), out);
        out.put_slice(b" HTTP/1.1\r\n");
        // Connection may name hop-by-hop headers to drop, but not Host: the request's target host is not
        // the sender's to take away (it would be replaced by the upstream's address).
        let connection = req.headers.has(Known::Connection);
        let named = |k: &[u8]| {
            req.headers
                .known(Known::Connection)
                .flat_map(|v| v.split(','))
                .any(|t| t.trim().as_bytes().eq_ignore_ascii_case(k))
        };
        let trusted = req.trusted_peer;
        let mut xff: Option<Vec<u8>> = None;
        let mut forwarded: Option<Vec<u8>> = None;
        let mut via: Option<Vec<u8>> = None;
        let mut proto: Option<&[u8]> = None;
        let mut fwd_host: Option<&[u8]> = None;
        let mut host: Option<&[u8]> = None;
        for (name, v, known) in req.headers.iter_raw() {
            let joined = match known {
                Known::Other => {
                    if (!self.cfg.forward_underscore_headers && contains_byte(name, b'_'))
                        || (connection && named(name))
                        || (ws_key.is_some() && name.eq_ignore_ascii_case(b"sec-websocket-key"))
                    {
                        continue;
                    }
                    put_header(out, name, v);
                    continue;
                }
                Known::Host => {
                    host = Some(v);
                    put_header(out, name, v);
                    continue;
                }
                Known::Cookie => {
                    if !(connection && named(name)) {
                        put_header(out, name, v);
                    }
                    continue;
                }
                // without request ids the client's passes as sent; with them, ours (the same when sane)
                Known::XRequestId => {
                    if req.request_id.is_none() && !(connection && named(name)) {
                        put_header(out, name, v);
                    }
                    continue;
                }
                Known::XForwardedProto if trusted && !(connection && named(name)) => {
                    proto.get_or_insert(v);
                    continue;
                }
                Known::XForwardedHost if trusted && !(connection && named(name)) => {
                    fwd_host.get_or_insert(v);
                    continue;
                }
                Known::XForwardedFor if trusted && !(connection && named(name)) => &mut xff,
                Known::Forwarded if trusted && !(connection && named(name)) => &mut forwarded,
                Known::Via if !(connection && named(name)) => &mut via,
                // hop-by-hop, Content-Length (ours replaces it), Expect, an untrusted peer's forwarding
                // headers; or named by Connection
                _ => continue,
            };
            match joined {
                Some(x) => {
                    x.extend_from_slice(b", ");
                    x.extend_from_slice(v);
                }
                None => *joined = Some(v.to_vec()),
            }
        }
        if host.is_none() {
            put_header(out, b"Host", up.addr.as_bytes());
        }
        let scheme: &[u8] = if req.tls.is_some() { b"https" } else { b"http" };
        put_list_start(out, b"X-Forwarded-For", xff);
        let ip_at = out.len();
        put_ip(out, req.peer.ip());
        let ip_end = out.len();
        out.put_slice(b"\r\n");
        put_header(out, b"X-Forwarded-Proto", proto.unwrap_or(scheme));
        if let Some(h) = fwd_host.or(host) {
            put_header(out, b"X-Forwarded-Host", h);
        }
        // RFC 7239 §4: an IPv6 node is quoted with brackets, `for="[2001:db8::1]"`
        put_list_start(out, b"Forwarded", forwarded);
        out.put_slice(b"for=");
        let v6 = req.peer.is_ipv6();
        if v6 {
            out.put_slice(b"\"[");
        }
        // the address as written for X-Forwarded-For above
        out.extend_from_within(ip_at..ip_end);
        if v6 {
            out.put_slice(b"]\"");
        }
        out.put_slice(b";proto=");
        out.put_slice(scheme);
        if let Some(h) = host {
            out.put_slice(b";host=");
            put_forwarded_value(out, h);
        }
        out.put_slice(b"\r\n");
        if let Some(id) = &req.request_id {
            put_header(out, b"X-Request-Id", id.as_bytes());
        }
        // RFC 9110 §7.6.3: append our entry (the protocol version we received, our pseudonym) to the list.
        put_list_start(out, b"Via", via);
        out.put_slice(match req.version {
            Version::Http10 => b"1.0 ",
            Version::Http11 => b"1.1 ",
            Version::Http2 => b"2 ",
        });
        out.put_slice(self.via_token.as_bytes());
        out.put_slice(b"\r\n");
        // a protocol switch (WebSocket) asked of us is asked of the upstream: the one pair of hop-by-hop
        // headers passed on
        if let Some(proto) = super::tunnel::upgrade_of(req) {
            out.put_slice(b"Connection: Upgrade\r\nUpgrade: ");
            out.put_slice(proto.as_bytes());
            out.put_slice(b"\r\n");
            if let Some(key) = ws_key {
                put_header(out, b"Sec-WebSocket-Key", key.as_bytes());
            }
        }
        if !req.body.is_empty() || matches!(&*req.method, "POST" | "PUT" | "PATCH") {
            out.put_slice(b"Content-Length: ");
            put_u64(out, req.body.len() as u64);
            out.put_slice(b"\r\n");
        }
        out.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn via_tokens_are_unique_and_recognised() {
        let a = new_via_token();
        let b = new_via_token();
        assert_ne!(a, b);
        assert!(a.starts_with("ordo-") && a.len() == 21, "{a}");
        assert!(via_names(&format!("1.1 {a}"), &a));
        assert!(via_names(&format!("1.0 fred, 1.1 {a} (ordo)"), &a));
        assert!(via_names(&format!("HTTP/1.1 x:80,1.1  {a}"), &a));
        assert!(!via_names(&format!("1.1 {b}"), &a));
        assert!(!via_names(&format!("1.1 x ({a})"), &a));
        assert!(
            !via_names(&a, &a),
            "a bare token is the protocol, not the received-by"
        );
        assert!(!via_names("", &a));
    }

    #[test]
    fn forwarded_values_are_tokens_or_quoted() {
        let mut out = BytesMut::new();
        put_forwarded_value(&mut out, b"example.com");
        out.put_u8(b' ');
        put_forwarded_value(&mut out, b"example.com:8443");
        out.put_u8(b' ');
        put_forwarded_value(&mut out, b"a\"b\\c");
        assert_eq!(
            &out[..],
            &b"example.com \"example.com:8443\" \"a\\\"b\\\\c\""[..]
        );
    }
}
