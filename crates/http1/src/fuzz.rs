//! Fuzz targets of the codec (docs/design.md, "Fuzzing"): every parser here takes bytes a peer chose, so
//! each gets inputs from its grammar, random bytes and near-valid mutations, run under proptest on the stable
//! toolchain — a short deterministic run in `cargo test`, a long one from `scripts/fuzz.sh`. Properties: no
//! panic, output bounded by input, the same answer however the input is split into reads, round trips
//! through a reference encoder, and the same tokens as httparse wherever both accept (the table below lists
//! where the codec is stricter on purpose).

use bytes::BytesMut;
use ordo_testkit::fuzz::{bytes, config, mutated, split, tokens};
use proptest::prelude::*;
use std::mem::MaybeUninit;

use crate::{ChunkError, ChunkedDecoder, ResponseFraming, parse_content_length, parse_response};
use crate::{Framing, FramingError, request_framing};

/// The pieces chunked bodies are made of.
const CHUNKED: &[&str] = &[
    "0",
    "1",
    "5",
    "a",
    "F",
    "10",
    "ffffffffffffffff",
    "00000000000000001",
    "\r\n",
    "\r",
    "\n",
    ";",
    "ext",
    "=",
    "\"q\"",
    " ",
    "\t",
    "hello",
    "x",
    "Trailer",
    ":",
    "v",
    "\0",
    "-",
    "0x",
];

/// The pieces response heads are made of.
const RESPONSE: &[&str] = &[
    "HTTP/1.1 ",
    "HTTP/1.0 ",
    "HTTP/1.7 ",
    "HTTP/2 ",
    "200",
    "204",
    "304",
    "100",
    "099",
    "1000",
    " OK",
    " ",
    "\r\n",
    "\n",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    ":",
    " ",
    "5",
    "0",
    "-1",
    "chunked",
    "gzip",
    ",",
    "close",
    "keep-alive",
    "\t",
    "X-A",
    "v\x01",
    "\u{e9}",
];

/// The decoder fed `pieces` one read at a time, keeping unused bytes as a connection does: the decoded
/// body, then `Ok(bytes used of the whole input)` once the body ended, `Err` when refused, or `Ok(None)`
/// when it wants more.
fn decode_in_reads(pieces: &[&[u8]], max: u64) -> (Vec<u8>, Result<Option<usize>, ChunkError>) {
    let mut d = ChunkedDecoder::new(max);
    let mut body = Vec::new();
    let mut buf = BytesMut::new();
    let mut consumed = 0;
    for p in pieces {
        buf.extend_from_slice(p);
        let before = buf.len();
        match d.decode(&mut buf, |b| body.extend_from_slice(b)) {
            Ok(true) => return (body, Ok(Some(consumed + before - buf.len()))),
            Ok(false) => consumed += before - buf.len(),
            Err(e) => return (body, Err(e)),
        }
    }
    (body, Ok(None))
}

/// `body` as chunks of the given sizes (the rest in one last chunk) with extensions and trailers: what a
/// conforming sender may write.
fn encode_chunked(
    body: &[u8],
    sizes: &[usize],
    ext: bool,
    trailers: &[(String, String)],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut sizes = sizes.iter();
    while !rest.is_empty() {
        let n = sizes.next().map_or(rest.len(), |&s| s.clamp(1, rest.len()));
        out.extend_from_slice(format!("{n:x}").as_bytes());
        if ext {
            out.extend_from_slice(b" ;name=\"v\";flag");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    for (k, v) in trailers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn chunked_input() -> impl Strategy<Value = Vec<u8>> + Clone {
    prop_oneof![
        tokens(CHUNKED, 40),
        bytes(256),
        mutated(
            (bytes(64), proptest::collection::vec(1usize..20, 0..5))
                .prop_map(|(b, s)| encode_chunked(&b, &s, false, &[("T".into(), "x".into())])),
            3
        ),
    ]
}

proptest! {
    #![proptest_config(config(1.0))]

    /// Any input, in any reads: no panic, never more body than input or than the limit, and the same body
    /// and outcome as in one read (so a body ends at the same byte however the packets fell).
    #[test]
    fn chunked_any_input_same_in_any_reads(
        input in chunked_input(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        max in prop_oneof![Just(u64::MAX), 0u64..64],
    ) {
        let (whole_body, whole) = decode_in_reads(&[&input], max);
        let pieces = split(&input, &cuts);
        let (body, outcome) = decode_in_reads(&pieces, max);
        prop_assert!(whole_body.len() <= input.len());
        prop_assert!(whole_body.len() as u64 <= max);
        prop_assert_eq!(&outcome, &whole);
        if whole.is_ok() {
            // a refused body may stop at a different byte; one that ends or waits hands out the same data
            prop_assert_eq!(body, whole_body);
        }
    }

    /// What a conforming sender writes decodes to the body it sent, ending exactly after the trailers
    /// (bytes of the next message after it untouched), in any reads.
    #[test]
    fn chunked_round_trips(
        body in bytes(300),
        sizes in proptest::collection::vec(1usize..100, 0..6),
        ext in any::<bool>(),
        trailers in proptest::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,8}", "[ -~]{0,12}"), 0..3),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let trailers: Vec<(String, String)> = trailers
            .into_iter()
            .map(|(k, v)| (k, v.trim_matches([' ', '\t']).to_string()))
            .collect();
        let mut wire = encode_chunked(&body, &sizes, ext, &trailers);
        let end = wire.len();
        wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let (decoded, outcome) = decode_in_reads(&split(&wire, &cuts), u64::MAX);
        prop_assert_eq!(outcome, Ok(Some(end)));
        prop_assert_eq!(decoded, body);
    }

    /// Content-Length: exactly the values of 1 to 19 ASCII digits, with their value.
    #[test]
    fn content_length_is_digits_only(v in prop_oneof![bytes(24), "[0-9]{0,21}".prop_map(String::into_bytes),
                                                      tokens(&["0", "9", "+", "-", " ", ",", "1"], 22)]) {
        let expected = (!v.is_empty() && v.len() <= 19 && v.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(&v).ok()?.parse::<u64>().ok())
            .flatten();
        prop_assert_eq!(parse_content_length(&v), expected);
    }

    /// Transfer-Encoding: no panic; a request is read as chunked only when `chunked` is the one, last,
    /// parameterless coding and no Content-Length came with it.
    #[test]
    fn request_framing_is_chunked_only_for_a_final_chunked(
        te in tokens(&["chunked", "gzip", "identity", ",", " ", "\t", ";", "q=1", "=", "\"x\"", "", "CHUNKED", "\0"], 8),
        cl in proptest::option::of(0u64..3),
        http10 in any::<bool>(),
    ) {
        let te = String::from_utf8_lossy(&te);
        let framing = request_framing(cl, Some(&te), http10);
        if framing == Ok(Framing::Chunked) {
            let codings: Vec<&str> = te.split(',').map(|c| c.trim_matches([' ', '\t'])).collect();
            prop_assert!(cl.is_none() && !http10);
            prop_assert_eq!(codings.len(), 1, "{:?}", te);
            prop_assert!(codings[0].eq_ignore_ascii_case("chunked"), "{:?}", te);
        }
        if let Err(FramingError::UnsupportedCoding) = framing {
            prop_assert!(te.to_ascii_lowercase().trim_end_matches([' ', '\t']).ends_with("chunked"));
        }
    }

    /// A response head: no panic, and wherever the codec accepts one, httparse reads the same status,
    /// version, head length and fields. Where the codec refuses what httparse accepts, it is one of the
    /// intended divergences ([`RESPONSE_DIVERGENCES`]).
    #[test]
    fn response_head_agrees_with_httparse(
        input in prop_oneof![tokens(RESPONSE, 30), bytes(200), mutated(Just(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n".to_vec()), 3)],
        head_request in any::<bool>(),
    ) {
        let mut ours_buf = input.clone();
        let mut storage = [const { MaybeUninit::uninit() }; 16];
        let ours = parse_response(&mut ours_buf, &mut storage, head_request);
        // the same minor-version rewrite the codec documents, so both read the same bytes
        let mut theirs_buf = input.clone();
        if theirs_buf.len() > 8 && theirs_buf.starts_with(b"HTTP/1.") && (b'2'..=b'9').contains(&theirs_buf[7])
            && theirs_buf[8] == b' ' {
            theirs_buf[7] = b'1';
        }
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut theirs = httparse::Response::new(&mut headers);
        let parsed = theirs.parse(&theirs_buf);
        match (&ours, &parsed) {
            (Ok(Some(h)), Ok(httparse::Status::Complete(n))) => {
                prop_assert_eq!(h.len, *n);
                prop_assert_eq!(Some(h.status), theirs.code);
                prop_assert_eq!(Some(h.minor), theirs.version);
                prop_assert_eq!(h.headers.len(), theirs.headers.len());
                for (a, b) in h.headers.iter().zip(theirs.headers.iter()) {
                    prop_assert_eq!(a.name, b.name);
                    prop_assert_eq!(a.value, b.value);
                }
                if h.framing == ResponseFraming::Chunked {
                    prop_assert!(!head_request && h.status >= 200);
                }
            }
            (Ok(None), Ok(httparse::Status::Partial)) => {}
            (Err(_), Err(_)) => {}
            (Err(crate::ResponseError::Invalid(why)), Ok(httparse::Status::Complete(_))) => {
                prop_assert!(RESPONSE_DIVERGENCES.iter().any(|(w, _)| w == why), "unlisted refusal {:?}", why);
            }
            _ => prop_assert!(
                false,
                "codec {:?} but httparse {:?}",
                ours.as_ref().map(|h| h.as_ref().map(|h| h.status)),
                parsed
            ),
        }
    }
}

/// Where the codec refuses a response head httparse tokenises, and why (the codec's message, the rule).
const RESPONSE_DIVERGENCES: &[(&str, &str)] = &[
    (
        "bare LF in response head",
        "RFC 9112 §2.2: a line end is CRLF (smuggling)",
    ),
    ("bad status code", "RFC 9110 §15: three digits from 100"),
    (
        "invalid Content-Length",
        "RFC 9110 §8.6: digits only, no list",
    ),
    (
        "conflicting Content-Length",
        "RFC 9112 §6.3: two lengths leave the end undefined",
    ),
    (
        "more than one Transfer-Encoding",
        "one field, so parsers cannot join them differently",
    ),
    (
        "Content-Length together with Transfer-Encoding",
        "RFC 9112 §6.3 (response splitting)",
    ),
    ("malformed Transfer-Encoding", "RFC 9112 §6.1 list syntax"),
    (
        "chunked with parameters",
        "RFC 9112 §7: chunked defines none",
    ),
    ("chunked applied more than once", "RFC 9112 §6.1"),
];
