//! Fuzz targets of the front end's own parsers (docs/design.md, "Fuzzing"): request heads (against
//! httparse, with the intended differences listed in [`REQUEST_DIVERGENCES`]), request-target
//! normalisation, the PROXY protocol header and the TOML configuration. HTTP/2 framing and HPACK on the
//! server side are the `h2` crate's (fuzzed upstream); what ordo adds on top of them, the `:path` rules, is
//! the normalisation target here. Lua patterns are fuzzed against Lua's own matcher beside the sandbox's
//! tests (`lua::sandbox`).

use ordo_testkit::fuzz::{bytes, config, mutated, split, tokens};
use proptest::prelude::*;

use crate::config::ServeConfig;
use crate::edge::compress::{Coding, negotiate};
use crate::http::Version;
use crate::http::parse::{Head, HeadError, origin_form, parse_head, path_and_query};
use crate::proxy_protocol::{self, Parsed, Source};

/// The pieces request heads are made of.
const REQUEST: &[&str] = &[
    "GET ",
    "POST ",
    "OPTIONS ",
    "CONNECT ",
    "G\u{e9}T ",
    "/",
    "/a",
    "/..",
    "/.",
    "//",
    "%2e",
    "%2F",
    "%00",
    "%",
    "?q=1",
    "#f",
    "*",
    "http://h",
    "HTTPS://h:443",
    "[::1]",
    " ",
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/1.5",
    "HTTP/2.0",
    "\r\n",
    "\n",
    "\r",
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Expect",
    "Connection",
    ": ",
    ":",
    "h",
    "h:80",
    "5",
    "0",
    "chunked",
    "gzip",
    ",",
    "100-continue",
    "close",
    "\t",
    "\u{e9}",
    "\x7f",
];

/// Requests httparse tokenises that ordo refuses on purpose: the message ordo answers with, and the rule.
/// (ordo never accepts what httparse refuses, except `HTTP/1.2`…`HTTP/1.9`, read as 1.1 per RFC 9110 §6.2.)
const REQUEST_DIVERGENCES: &[(&str, &str)] = &[
    (
        "bare LF in request head",
        "RFC 9112 §2.2: CRLF line ends only (smuggling)",
    ),
    ("missing Host header", "RFC 9112 §3.2: HTTP/1.1 needs Host"),
    ("more than one Host", "RFC 9112 §3.2"),
    ("invalid Host", "RFC 9112 §3.2, RFC 3986 §3.2.2 host syntax"),
    ("more than one Content-Length", "RFC 9112 §6.3 (smuggling)"),
    ("invalid Content-Length", "RFC 9110 §8.6: digits only"),
    (
        "more than one Transfer-Encoding",
        "one field, so parsers cannot join them differently",
    ),
    (
        "Content-Length together with Transfer-Encoding",
        "RFC 9112 §6.3 (smuggling)",
    ),
    ("Transfer-Encoding in HTTP/1.0", "RFC 9112 §6.1"),
    ("malformed Transfer-Encoding", "RFC 9112 §6.1 list syntax"),
    (
        "Transfer-Encoding does not end in chunked",
        "RFC 9112 §6.3: length undeterminable",
    ),
    ("chunked with parameters", "RFC 9112 §7"),
    ("chunked applied more than once", "RFC 9112 §6.1"),
    ("unsupported transfer coding", "RFC 9112 §6.1: 501"),
    ("unsupported Expect", "RFC 9110 §10.1.1: 417"),
    (
        "fragment in request target",
        "RFC 9112 §3.2 (CVE-2023-45539)",
    ),
    (
        "bad request target",
        "RFC 9112 §3.2: origin, absolute or asterisk form",
    ),
    ("bad authority in request target", "RFC 9110 §4.2.1"),
    (
        "bad percent-encoding in path",
        "RFC 3986 §2.1; control bytes and non-UTF-8 refused",
    ),
    ("path escapes the root", "RFC 3986 §5.2.4: `..` above `/`"),
    ("request target too long", "[limits] max_uri_bytes: 414"),
    ("request head too large", "[limits] max_head_bytes: 431"),
    (
        "HTTP version not supported",
        "505 for HTTP/2.0 and other majors on an HTTP/1 connection",
    ),
];

/// The bytes of a span of a parsed head: in the head, or past it in `own`.
fn span_bytes<'a>(h: &'a Head, buf: &'a [u8], s: crate::http::headers::Span) -> &'a [u8] {
    let (at, len) = (s.at as usize, s.len as usize);
    if at < h.len {
        &buf[at..at + len]
    } else {
        &h.own[at - h.len..at - h.len + len]
    }
}

/// The request line's version with `HTTP/1.2`…`1.9` read as 1.1, as `parse_head` does.
fn with_minor_rewritten(buf: &[u8]) -> Vec<u8> {
    let mut copy = buf.to_vec();
    let end = buf
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(buf.len());
    if end >= 9 && buf[end - 9..end - 1] == *b" HTTP/1." {
        let d = buf[end - 1];
        if (b'2'..=b'9').contains(&d) {
            copy[end - 1] = b'1';
        }
    }
    copy
}

fn request_input() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        tokens(REQUEST, 40),
        bytes(200),
        mutated(
            Just(
                b"GET /a/./b/../c?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc".to_vec()
            ),
            3
        ),
        mutated(
            Just(
                b"POST http://h:80/p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .to_vec()
            ),
            3
        ),
    ]
}

/// The pieces of request-targets.
const TARGET: &[&str] = &[
    "/", "a", "b", ".", "..", "%2e", "%2E", "%2f", "%2F", "%25", "%", "%0", "%00", "%7f", "%c3%a9",
    "%ff", "?", "&", "=", "+", "#", " ", "*", "\u{e9}", ";", ":", "@",
];

proptest! {
    #![proptest_config(config(1.0))]

    /// A request head: no panic; where ordo accepts it, httparse reads the same method, target, version,
    /// head length and fields; where ordo refuses what httparse accepts, the reason is one of
    /// [`REQUEST_DIVERGENCES`]; an origin-form target's path and query are the ones HTTP/2 would route on; and
    /// the head arriving in any two reads gives `Partial` until it is whole.
    #[test]
    fn request_head_agrees_with_httparse(
        input in request_input(),
        small_limits in any::<bool>(),
        cut in any::<usize>(),
    ) {
        let (max_head, max_uri) = if small_limits { (48, 12) } else { (16 * 1024, 8 * 1024) };
        let ours = parse_head(&input, max_head, max_uri);
        let theirs_buf = with_minor_rewritten(&input);
        let mut headers = [httparse::EMPTY_HEADER; crate::http::parse::MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let theirs = req.parse(&theirs_buf);
        match (&ours, &theirs) {
            (Ok(h), Ok(httparse::Status::Complete(n))) => {
                prop_assert_eq!(h.len, *n);
                prop_assert_eq!(Some(&*h.method), req.method);
                prop_assert_eq!(Some(span_bytes(h, &input, h.target)), req.path.map(str::as_bytes));
                let minor = match h.version {
                    Version::Http10 => 0,
                    Version::Http11 => 1,
                    Version::Http2 => 2,
                };
                prop_assert_eq!(Some(minor), req.version);
                let absolute = !req.path.unwrap_or("").starts_with('/');
                prop_assert!(h.fields.len() >= req.headers.len());
                for (f, t) in h.fields.iter().zip(req.headers.iter()) {
                    prop_assert_eq!(span_bytes(h, &input, f.name), t.name.as_bytes());
                    if !(absolute && t.name.eq_ignore_ascii_case("host")) {
                        prop_assert_eq!(span_bytes(h, &input, f.raw), ordo_http1::trim_ows(t.value));
                    }
                }
                // an origin-form target gets the path and query an HTTP/2 `:path` of the same text gets
                if let Some(t) = req.path.filter(|t| t.starts_with('/')) {
                    prop_assert_eq!(path_and_query(&h.method, t), Ok((h.path.clone(), h.query.clone())));
                }
                // the same head in two reads: nothing is decided before it is whole
                let k = cut % h.len;
                prop_assert_eq!(parse_head(&input[..k], max_head, max_uri).err(), Some(HeadError::Partial));
            }
            (Err(HeadError::Partial), Ok(httparse::Status::Partial)) => {}
            (Err(HeadError::Status(_, _)), Err(_)) => {}
            (Err(HeadError::Status(_, why)), Ok(_)) => {
                prop_assert!(
                    REQUEST_DIVERGENCES.iter().any(|(w, _)| w == why),
                    "unlisted refusal {:?} of {:?}", why, String::from_utf8_lossy(&input)
                );
            }
            _ => prop_assert!(
                false,
                "ordo {:?} but httparse {:?} for {:?}",
                ours.as_ref().map(|h| h.len),
                theirs,
                String::from_utf8_lossy(&input)
            ),
        }
    }

    /// Request-target normalisation (HTTP/1 targets and HTTP/2 `:path`): no panic; an accepted path is
    /// absolute, has no `.`/`..`/empty segments, and is a fixed point — the origin-form ordo forwards
    /// (`origin_form`) parses back to the same path and query, so ordo and its upstream route on one path.
    #[test]
    fn request_target_normalises_to_a_fixed_point(
        target in prop_oneof![tokens(TARGET, 24), bytes(40)],
        options in any::<bool>(),
    ) {
        let target = format!("/{}", String::from_utf8_lossy(&target));
        let method = if options { "OPTIONS" } else { "GET" };
        if let Ok((path, query)) = path_and_query(method, &target) {
            if path != "*" {
                prop_assert!(path.starts_with('/'), "{:?}", path);
                let inner = &path[1..path.len() - usize::from(path.len() > 1 && path.ends_with('/'))];
                if !inner.is_empty() {
                    for seg in inner.split('/') {
                        prop_assert!(!seg.is_empty() && seg != "." && seg != "..", "{:?} -> {:?}", target, path);
                    }
                }
                prop_assert!(!path.bytes().any(|b| b < 0x20 || b == 0x7f), "{:?}", path);
            }
            let mut again = bytes::BytesMut::new();
            origin_form(&path, query.as_deref(), &mut again);
            let again = String::from_utf8(again.to_vec()).expect("origin-form is ASCII");
            prop_assert_eq!(path_and_query(method, &again), Ok((path, query)), "{:?} -> {:?}", target, again);
        }
    }

    /// PROXY protocol headers: no panic; any header ordo writes the way a balancer does parses to its
    /// source address and exact length in any reads (every shorter prefix is `Partial`); random and mutated
    /// input never reports more bytes than it has.
    #[test]
    fn proxy_protocol_header(
        (ip, port) in (any::<std::net::IpAddr>(), any::<u16>()),
        dst_port in any::<u16>(),
        v2 in any::<bool>(),
        tlv in bytes(20),
        noise in prop_oneof![bytes(120), mutated(Just(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n".to_vec()), 3),
            mutated(Just([&proxy_protocol::V2_SIG[..], &[0x21, 0x11, 0, 12], &[0; 12]].concat()), 3)],
        cut in any::<usize>(),
    ) {
        // (a header carries no IPv6 scope or flow label)
        let src = std::net::SocketAddr::new(ip, port);
        let header = if v2 {
            let mut h = proxy_protocol::V2_SIG.to_vec();
            let (fam, mut addr) = match src.ip() {
                std::net::IpAddr::V4(ip) => (0x11, [ip.octets().to_vec(), vec![127, 0, 0, 1]].concat()),
                std::net::IpAddr::V6(ip) => (0x21, [ip.octets().to_vec(), vec![0; 16]].concat()),
            };
            addr.extend_from_slice(&src.port().to_be_bytes());
            addr.extend_from_slice(&dst_port.to_be_bytes());
            addr.extend_from_slice(&tlv);
            h.extend_from_slice(&[0x21, fam]);
            h.extend_from_slice(&(addr.len() as u16).to_be_bytes());
            h.extend_from_slice(&addr);
            h
        } else {
            let (fam, dst) = if src.is_ipv4() { ("TCP4", "127.0.0.1") } else { ("TCP6", "::1") };
            format!("PROXY {fam} {} {dst} {} {dst_port}\r\n", src.ip(), src.port()).into_bytes()
        };
        let mut wire = header.clone();
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        prop_assert_eq!(proxy_protocol::parse(&wire), Ok(Parsed::Done(Source::Client(src), header.len())));
        prop_assert_eq!(proxy_protocol::parse(&wire[..cut % header.len()]), Ok(Parsed::Partial));
        if let Ok(Parsed::Done(_, n)) = proxy_protocol::parse(&noise) {
            prop_assert!(n <= noise.len());
        }
    }

    /// `Accept-Encoding`: no panic, the coding chosen is one offered, and a coding refused with `q=0` (with
    /// no `*` in the header) is never chosen.
    #[test]
    fn accept_encoding_picks_an_offered_coding(
        values in proptest::collection::vec(tokens(&["gzip", "br", "zstd", "*", "identity", ";q=", ";Q=", "0",
            "1", ".5", "0.000", "1.0001", ",", " ", "\t", ";", "x"], 10), 0..3),
        offered in proptest::sample::subsequence(Coding::ALL.to_vec(), 0..=3),
    ) {
        let values: Vec<String> = values.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
        let chosen = negotiate(values.iter().map(String::as_str), &offered);
        if let Some(c) = chosen {
            prop_assert!(offered.contains(&c));
            let refused = format!("{};q=0", c.token());
            let all = values.join(",");
            prop_assert!(
                all.contains('*') || !all.split(',').any(|e| e.trim() == refused),
                "{:?} chose {:?}", all, c
            );
        }
    }

    /// The configuration file: no panic on any text, and a refused file's error names the file. Inputs:
    /// the shipped examples with bytes changed, inserted or removed, and TOML made of config words.
    #[test]
    fn serve_config_never_panics(
        text in prop_oneof![
            mutated(proptest::sample::select(EXAMPLES).prop_map(|s| s.as_bytes().to_vec()), 4),
            tokens(CONFIG_WORDS, 40),
        ],
        cuts in proptest::collection::vec(any::<usize>(), 0..2),
    ) {
        let text = String::from_utf8_lossy(split(&text, &cuts)[0]).into_owned();
        if let Err(e) = ServeConfig::from_toml_str(&text, "fuzz.toml") {
            let msg = e.to_string();
            prop_assert!(msg.contains("fuzz.toml"), "{:?}", msg);
        }
    }
}

/// The shipped example configurations (the ones that name no other file).
const EXAMPLES: &[&str] = &[
    include_str!("../../../examples/serve/default.toml"),
    include_str!("../../../examples/serve/adaptive.toml"),
    include_str!("../../../examples/serve/edf.toml"),
    include_str!("../../../examples/serve/priority.toml"),
    include_str!("../../../examples/serve/proxy.toml"),
    include_str!("../../../examples/serve/seed003.toml"),
    include_str!("../../../examples/serve/upstreams.toml"),
    include_str!("../../../examples/serve/vhosts.toml"),
];

/// Words of serve's configuration language.
const CONFIG_WORDS: &[&str] = &[
    "listen",
    "workers",
    "policy",
    "default_class",
    "[[classes]]",
    "[[rules]]",
    "[[routes]]",
    "[limits]",
    "[http2]",
    "name",
    "weight",
    "class",
    "prefix",
    "path_prefix",
    "proxy",
    "upstreams",
    " = ",
    "\"x\"",
    "\"127.0.0.1:1\"",
    "\"1s\"",
    "\"stride\"",
    "1",
    "-1",
    "0",
    "1e400",
    "true",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\"",
    "'",
    "#",
    ".",
    "\u{e9}",
    "max_head_bytes",
    "queue_cap",
    "synthetic",
    "static",
];
