//! Fuzz targets of the HTTP/2 client (docs/design.md, "Fuzzing"): its HPACK decoder (any input; a round
//! trip through the request encoder; and, differentially, every block the `h2` crate's encoder writes for a
//! random response decodes to that response), its request encoder against h2's decoder (the one
//! `ordo serve` uses), and its connection (any frames in any reads; differentially, what an `h2` server
//! sends reaches the events as sent).

use bytes::Bytes;
use ordo_testkit::fuzz::{bytes, config, mutated, split};
use proptest::prelude::*;

use crate::conn::{Conn, Event};
use crate::frame::{Head, PREFACE, head};
use crate::hpack::{self, Decoder, Encoder, Field, Template};

/// A header list: (name, value) pairs.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;
/// A response for the `h2` server to send: status, then (name, value, sensitive) fields.
type Response = (u16, Vec<(String, Vec<u8>, bool)>);

/// A block's fields, decoded with `d`, or the error.
fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, hpack::HpackError> {
    let mut out = Vec::new();
    d.decode(block, |n, v| out.push((n.to_vec(), v.to_vec())))?;
    Ok(out)
}

/// Header blocks as servers write them (RFC 7541 Appendix C.6, Huffman-coded, with evictions), to mutate.
const BLOCKS: &[&[u8]] = &[
    &[
        0x48, 0x82, 0x64, 0x02, 0x58, 0x85, 0xae, 0xc3, 0x77, 0x1a, 0x4b, 0x61, 0x96, 0xd0, 0x7a,
        0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04, 0x0b, 0x81, 0x66, 0xe0,
        0x82, 0xa6, 0x2d, 0x1b, 0xff, 0x6e, 0x91, 0x9d, 0x29, 0xad, 0x17, 0x18, 0x63, 0xc7, 0x8f,
        0x0b, 0x97, 0xc8, 0xe9, 0xae, 0x82, 0xae, 0x43, 0xd3,
    ],
    &[0x48, 0x83, 0x64, 0x0e, 0xff, 0xc1, 0xc0, 0xbf],
    &[0x3f, 0xe1, 0x1f, 0x88, 0x0f, 0x0d, 0x01, b'5'],
];

/// Names for differential responses: common ones (the static table has them) and made-up ones.
const NAMES: &[&str] = &[
    "server",
    "date",
    "content-type",
    "cache-control",
    "set-cookie",
    "etag",
    "vary",
    "x-request-id",
    "location",
    "age",
    "x-a",
    "www-authenticate",
    "link",
];

fn value() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![8 => 0x20u8..0x7f, 1 => Just(b'\t'), 1 => 0x80u8..=0xff],
        0..40,
    )
}

/// A current-thread runtime for one differential check against the `h2` crate.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The header blocks an `h2` server writes for `responses` (status, fields, whether marked sensitive) on
/// one connection whose client announced `table_size` (None: the default 4096). A client that speaks raw
/// frames sends one GET per response; what comes back is cut into header blocks.
fn h2_blocks(responses: &[Response], table_size: Option<u32>) -> Vec<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    runtime().block_on(async {
        let (client, server) = tokio::io::duplex(1 << 20);
        let resps = responses.to_vec();
        let server = tokio::spawn(async move {
            let mut conn = h2::server::handshake(server).await.expect("h2 handshake");
            for (status, fields) in resps {
                let (_req, mut respond) = conn.accept().await.expect("a stream").expect("no error");
                let mut r = http::Response::builder().status(status);
                for (n, v, sensitive) in fields {
                    let mut v = http::HeaderValue::from_bytes(&v).expect("valid value");
                    v.set_sensitive(sensitive);
                    r = r.header(n, v);
                }
                respond
                    .send_response(r.body(()).expect("a response"), true)
                    .expect("sent");
            }
            // drive the connection (its frames go out while it is polled) until the client leaves
            while let Some(Ok(_)) = conn.accept().await {}
        });
        let (mut rd, mut wr) = tokio::io::split(client);
        let mut out = PREFACE.to_vec();
        let settings: Vec<u8> =
            table_size.map_or(Vec::new(), |n| [&[0, 1][..], &n.to_be_bytes()].concat());
        frame(&mut out, 4, 0, 0, &settings);
        let get = hpack::encode(&[
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", b"/"),
            (b":authority", b"h"),
        ]);
        for i in 0..responses.len() as u32 {
            frame(&mut out, 1, 0x5, 2 * i + 1, &get);
        }
        wr.write_all(&out).await.expect("write");
        let mut input = Vec::new();
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut open: Option<Vec<u8>> = None;
        let mut at = 0;
        while blocks.len() < responses.len() {
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout(std::time::Duration::from_secs(10), rd.read(&mut buf))
                .await
                .expect("the server answers")
                .expect("read");
            assert!(n > 0, "the server closed");
            input.extend_from_slice(&buf[..n]);
            while let Some(Head {
                len, kind, flags, ..
            }) = Head::parse(&input[at..])
            {
                if input.len() < at + 9 + len {
                    break;
                }
                let payload = &input[at + 9..at + 9 + len];
                match kind {
                    1 => open = Some(payload.to_vec()),
                    9 => open
                        .as_mut()
                        .expect("CONTINUATION after HEADERS")
                        .extend_from_slice(payload),
                    _ => {}
                }
                if (kind == 1 || kind == 9) && flags & 0x4 != 0 {
                    blocks.push(open.take().expect("a block"));
                }
                at += 9 + len;
            }
        }
        drop((rd, wr));
        let _ = server.await;
        blocks
    })
}

/// What an `h2` server (announcing `table_size` as its SETTINGS_HEADER_TABLE_SIZE) decodes from the request
/// header `blocks`, sent one per stream by a raw client after it acknowledged the server's SETTINGS:
/// per request its method, path and regular fields in header-map order, or the server's error.
fn h2_decoded(blocks: &[Vec<u8>], table_size: Option<u32>) -> Vec<Result<Fields, String>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    runtime().block_on(async {
        let (client, server) = tokio::io::duplex(1 << 20);
        let n = blocks.len();
        let (done, decoded) = tokio::sync::oneshot::channel();
        let server =
            tokio::spawn(async move {
                let mut b = h2::server::Builder::new();
                if let Some(size) = table_size {
                    b.header_table_size(size);
                }
                let mut conn = b.handshake::<_, Bytes>(server).await.expect("h2 handshake");
                let mut got = Vec::new();
                while got.len() < n {
                    match conn.accept().await {
                        Some(Ok((req, mut respond))) => {
                            let mut fields = vec![
                                (
                                    b":method".to_vec(),
                                    req.method().as_str().as_bytes().to_vec(),
                                ),
                                (b":path".to_vec(), req.uri().path().as_bytes().to_vec()),
                            ];
                            fields.extend(req.headers().iter().map(|(k, v)| {
                                (k.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())
                            }));
                            got.push(Ok(fields));
                            let _ = respond.send_response(http::Response::new(()), true);
                        }
                        Some(Err(e)) => {
                            got.push(Err(e.to_string()));
                            break;
                        }
                        None => break,
                    }
                }
                let _ = done.send(got);
                // keep the connection polled (its answers go out) until the client leaves
                while let Some(Ok(_)) = conn.accept().await {}
            });
        let (mut rd, mut wr) = tokio::io::split(client);
        let mut out = PREFACE.to_vec();
        frame(&mut out, 4, 0, 0, &[]);
        wr.write_all(&out).await.expect("write");
        // the server's SETTINGS first: a block may only use its table size once acknowledged
        let mut input = Vec::new();
        loop {
            let mut buf = [0u8; 4096];
            let got = tokio::time::timeout(std::time::Duration::from_secs(10), rd.read(&mut buf))
                .await
                .expect("the server's SETTINGS")
                .expect("read");
            assert!(got > 0, "the server closed");
            input.extend_from_slice(&buf[..got]);
            if input.len() >= 9 && input[3] == 4 {
                break;
            }
        }
        out.clear();
        frame(&mut out, 4, 1, 0, &[]);
        for (i, b) in blocks.iter().enumerate() {
            frame(&mut out, 1, 0x5, 2 * i as u32 + 1, b);
        }
        wr.write_all(&out).await.expect("write");
        // read (and drop) the answers until the server has seen every request
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while matches!(rd.read(&mut buf).await, Ok(n) if n > 0) {}
        });
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), decoded)
            .await
            .expect("the server decodes every block")
            .expect("the server's answer");
        drop(wr);
        reader.abort();
        server.abort();
        got
    })
}

/// Request templates for `fields`, numbered as a run numbers them ([`hpack::number`]).
fn numbered(fields: &[Fields]) -> (Vec<Template>, hpack::Numbering) {
    let mut templates: Vec<Template> = fields
        .iter()
        .map(|f| {
            let pairs: Vec<(&[u8], &[u8])> = f.iter().map(|(n, v)| (&n[..], &v[..])).collect();
            Template::new(&pairs)
        })
        .collect();
    let n = hpack::number(&mut templates);
    (templates, n)
}

/// A response for the `h2` server to send to the bench client.
#[derive(Clone, Debug)]
struct Answer {
    /// Informational (103) responses before it.
    early: u8,
    status: u16,
    fields: Vec<(String, Vec<u8>, bool)>,
    len: usize,
    content_length: bool,
    trailers: bool,
}

/// What the bench client reads (its events per stream, in order) when an `h2` server sends `answers`, one per
/// request, the client driving the connection as the load generator does (its queued bytes written, what
/// arrives handed to it, streams opened while it may). `Err`: the client failed the connection.
fn h2_client_events(answers: &[Answer]) -> Result<Vec<Vec<Event>>, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    runtime().block_on(async {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let todo = answers.to_vec();
        let server = tokio::spawn(async move {
            let mut conn = h2::server::handshake(server).await.expect("h2 handshake");
            for a in todo {
                let Some(Ok((_req, mut respond))) = conn.accept().await else {
                    return;
                };
                for _ in 0..a.early {
                    let hint = http::Response::builder()
                        .status(103)
                        .header("link", "</s.css>; rel=preload");
                    respond
                        .send_informational(hint.body(()).expect("a hint"))
                        .expect("sent");
                }
                let (len, trailers) = (a.len, a.trailers);
                let mut r = http::Response::builder().status(a.status);
                for (n, v, sensitive) in a.fields {
                    let mut v = http::HeaderValue::from_bytes(&v).expect("valid value");
                    v.set_sensitive(sensitive);
                    r = r.header(n, v);
                }
                if a.content_length {
                    r = r.header("content-length", len);
                }
                let ends = len == 0 && !trailers;
                let mut body = respond
                    .send_response(r.body(()).expect("a response"), ends)
                    .expect("sent");
                if len > 0 {
                    // buffered by h2 and sent as the client's windows open
                    let data = Bytes::from(vec![b'x'; len]);
                    body.send_data(data, !trailers).expect("data");
                }
                if trailers {
                    let mut t = http::HeaderMap::new();
                    t.insert("x-trailer", http::HeaderValue::from_static("t"));
                    body.send_trailers(t).expect("trailers");
                }
            }
            while let Some(Ok(_)) = conn.accept().await {}
        });
        let (mut rd, mut wr) = tokio::io::split(client);
        let mut c = Conn::new(65_535, 1 << 20);
        let get = hpack::encode(&[
            (b":method", b"GET"),
            (b":scheme", b"http"),
            (b":path", b"/"),
            (b":authority", b"h"),
        ]);
        let mut events: Vec<Vec<Event>> = vec![Vec::new(); answers.len()];
        let mut opened = 0;
        let mut ev = Vec::new();
        let done = |events: &Vec<Vec<Event>>| {
            events.iter().all(|e| {
                e.iter().any(|e| {
                    matches!(
                        e,
                        Event::End { .. } | Event::Failed { .. } | Event::Head { end: true, .. }
                    )
                })
            })
        };
        let run = async {
            while !done(&events) {
                while opened < answers.len() && c.can_open() {
                    c.open(opened, &get, None, false);
                    opened += 1;
                }
                if !c.output().is_empty() {
                    wr.write_all(c.output()).await.map_err(|e| e.to_string())?;
                    let n = c.output().len();
                    c.written(n);
                }
                let n = rd.read(c.input()).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("the server closed".to_string());
                }
                c.received(n, &mut ev).map_err(|e| e.reason.clone())?;
                for e in ev.drain(..) {
                    let client = match &e {
                        Event::Head { client, .. }
                        | Event::Data { client, .. }
                        | Event::End { client }
                        | Event::Failed { client, .. } => *client,
                    };
                    events[client].push(e);
                }
            }
            Ok(())
        };
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| Err("no answer within 10 s".to_string()));
        server.abort();
        r.map(|()| events)
    })
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, id: u32, payload: &[u8]) {
    head(out, payload.len(), kind, flags, id);
    out.extend_from_slice(payload);
}

/// A frame a server might send: any type, flags and payload, on the connection or one of the first streams.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![0u8..10, any::<u8>()],
        any::<u8>(),
        prop_oneof![Just(0u32), Just(1), Just(3), Just(5), any::<u32>()],
        prop_oneof![
            bytes(40),
            proptest::sample::select(BLOCKS).prop_map(<[u8]>::to_vec),
            Just(vec![0, 0, 0, 1]),
            Just(vec![0x7f, 0xff, 0xff, 0xff]),
        ],
    )
        .prop_map(|(kind, flags, id, payload)| {
            let mut f = Vec::new();
            frame(&mut f, kind, flags, id, &payload);
            f
        })
}

proptest! {
    #![proptest_config(config(1.0))]

    /// Any header blocks, one after another on a connection: no panic, and the dynamic table never holds
    /// more than the size the blocks set (nor more than our limit).
    #[test]
    fn hpack_decoder_any_blocks(
        blocks in proptest::collection::vec(prop_oneof![
            bytes(64),
            mutated(proptest::sample::select(BLOCKS).prop_map(<[u8]>::to_vec), 3),
        ], 1..4),
        limit in prop_oneof![Just(4096usize), 0usize..200],
    ) {
        let mut d = Decoder::new(limit);
        for b in &blocks {
            let ok = decode(&mut d, b).is_ok();
            let (size, max) = d.table_size();
            prop_assert!(size <= max && max <= limit, "size {} max {} limit {}", size, max, limit);
            if !ok {
                break; // a connection error: the connection ends
            }
        }
    }

    /// The request encoder's blocks (dynamic table, cached index blocks, size updates when the server
    /// lowers its table size) decode to the fields of their template, request after request.
    #[test]
    fn hpack_round_trips_through_the_request_encoder(
        templates in proptest::collection::vec(
            proptest::collection::vec(
                (prop_oneof![proptest::sample::select(NAMES).prop_map(String::from), "[a-z]{1,8}"],
                 prop_oneof![Just(String::new()), "[ -~]{0,30}"]),
                0..6),
            1..4),
        ops in proptest::collection::vec((any::<prop::sample::Index>(), proptest::option::weighted(0.1, 0usize..5000)), 1..12),
    ) {
        let fields: Vec<Fields> = templates
            .iter()
            .map(|t| t.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())).collect())
            .collect();
        let (templates, n) = numbered(&fields);
        let mut e = Encoder::new(n);
        let mut d = Decoder::new(4096);
        for (which, limit) in ops {
            if let Some(n) = limit {
                e.limit(n);
            }
            let t = which.get(&templates);
            let got = decode(&mut d, e.encode(t));
            let want: Fields = t.fields.iter().map(|f| (f.pair().0.to_vec(), f.pair().1.to_vec())).collect();
            prop_assert_eq!(got, Ok(want));
        }
    }

    /// Frames from a server, in any reads, after the handshake and with streams open: no panic, and what
    /// the client queues to write stays bounded.
    #[test]
    fn h2_client_any_frames(
        frames in proptest::collection::vec(any_frame(), 0..12),
        garbage in bytes(30),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut c = Conn::new(65_535, 1 << 20);
        let mut wire = Vec::new();
        frame(&mut wire, 4, 0, 0, &[]);
        for f in &frames {
            wire.extend_from_slice(f);
        }
        wire.extend_from_slice(&garbage);
        let get = hpack::encode(&[(b":method", b"GET"), (b":path", b"/")]);
        let mut ev: Vec<Event> = Vec::new();
        let mut opened = false;
        'reads: for piece in split(&wire, &cuts) {
            let mut piece = piece;
            while !piece.is_empty() {
                let room = c.input();
                let n = room.len().min(piece.len());
                room[..n].copy_from_slice(&piece[..n]);
                piece = &piece[n..];
                if c.received(n, &mut ev).is_err() {
                    break 'reads;
                }
                if !opened && c.can_open() {
                    c.open(0, &get, None, false);
                    c.open(1, &get, Some(&Bytes::from_static(b"body")), false);
                    c.open(2, &get, None, true);
                    opened = true;
                }
            }
        }
        prop_assert!(c.output().len() < 1 << 20, "{} bytes queued", c.output().len());
        prop_assert!(ev.len() <= 4 * (frames.len() + 1));
    }
}

proptest! {
    // each input runs an h2 connection: a quarter of the cases
    #![proptest_config(config(0.25))]

    /// Differential against the `h2` crate, the other way: the request blocks ordo's encoder writes (its
    /// dynamic-table model, cached index blocks, the size update after a server's smaller table) are
    /// decoded by h2's decoder, the one `ordo serve` uses, into the fields of their template.
    #[test]
    fn h2_decodes_what_the_request_encoder_writes(
        templates in proptest::collection::vec(
            (proptest::sample::select(&["GET", "POST", "HEAD"][..]), "/[a-z0-9._~-]{0,12}",
             proptest::collection::vec(
                (proptest::sample::select(NAMES).prop_map(String::from), "[ -~]{0,30}"
                    .prop_map(|v: String| v.trim_matches(' ').to_string())),
                0..6)),
            1..4),
        order in proptest::collection::vec(any::<prop::sample::Index>(), 1..8),
        table_size in proptest::option::of(prop_oneof![Just(0u32), 0u32..400, Just(4096)]),
    ) {
        let fields: Vec<Vec<(Vec<u8>, Vec<u8>)>> = templates
            .iter()
            .map(|(m, p, f)| {
                let mut v = vec![
                    (b":method".to_vec(), m.as_bytes().to_vec()),
                    (b":scheme".to_vec(), b"http".to_vec()),
                    (b":path".to_vec(), p.as_bytes().to_vec()),
                    (b":authority".to_vec(), b"h".to_vec()),
                ];
                v.extend(f.iter().map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec())));
                v
            })
            .collect();
        let (templates, n) = numbered(&fields);
        let mut e = Encoder::new(n);
        if let Some(n) = table_size {
            e.limit(n as usize);
        }
        let picked: Vec<&Template> = order.iter().map(|i| i.get(&templates)).collect();
        let blocks: Vec<Vec<u8>> = picked.iter().map(|t| e.encode(t).to_vec()).collect();
        let got = h2_decoded(&blocks, table_size);
        prop_assert_eq!(got.len(), picked.len());
        for (t, got) in picked.iter().zip(got) {
            let pairs: Vec<(&[u8], &[u8])> = t.fields.iter().map(Field::pair).collect();
            let mut map = http::HeaderMap::new();
            for (n, v) in &pairs[4..] {
                map.append(http::HeaderName::from_bytes(n).expect("name"), http::HeaderValue::from_bytes(v).expect("value"));
            }
            let path = pairs[2].1;
            let mut want = vec![(b":method".to_vec(), pairs[0].1.to_vec()), (b":path".to_vec(), path.to_vec())];
            want.extend(map.iter().map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())));
            prop_assert_eq!(got, Ok(want));
        }
    }

    /// Differential against the `h2` crate's server: responses of any size (flow control: bodies past the
    /// stream and connection windows), with fields, Content-Length, 103 Early Hints before them and
    /// trailers after, reach the bench client as its events say: the final status once, every body byte,
    /// the end of each stream.
    #[test]
    fn h2_client_reads_what_h2_sends(
        answers in proptest::collection::vec(
            (proptest::sample::select(&[200u16, 201, 206, 301, 404, 500, 503][..]),
             proptest::collection::vec((proptest::sample::select(NAMES).prop_map(String::from), value(), any::<bool>()), 0..6),
             prop_oneof![Just(0usize), 1usize..100, 60_000usize..200_000],
             any::<bool>(),
             any::<bool>(),
             prop_oneof![3 => Just(0u8), 1 => 1u8..4])
                .prop_map(|(status, fields, len, content_length, trailers, early)| Answer {
                    early, status, fields, len, content_length, trailers,
                }),
            1..5),
    ) {
        let events = h2_client_events(&answers);
        let events = match events {
            Ok(e) => e,
            Err(e) => return Err(TestCaseError::fail(format!("the client failed: {e}"))),
        };
        for (a, ev) in answers.iter().zip(&events) {
            let (status, len, trailers) = (&a.status, &a.len, &a.trailers);
            let head: Vec<(u16, bool)> = ev.iter().filter_map(|e| match e {
                Event::Head { status, end, .. } => Some((*status, *end)),
                _ => None,
            }).collect();
            prop_assert_eq!(head, vec![(*status, *len == 0 && !trailers)], "{:?}", ev);
            let body: usize = ev.iter().map(|e| match e { Event::Data { len, .. } => *len, _ => 0 }).sum();
            prop_assert_eq!(body, *len);
            prop_assert!(!ev.iter().any(|e| matches!(e, Event::Failed { .. })), "{:?}", ev);
        }
    }

    /// Differential against the `h2` crate: every header block its encoder writes (static and dynamic
    /// indices, Huffman strings, never-indexed fields, evictions, the size update after a smaller
    /// SETTINGS_HEADER_TABLE_SIZE) decodes to the response it encoded, response after response.
    #[test]
    fn hpack_decodes_what_h2_encodes(
        responses in proptest::collection::vec(
            (prop_oneof![Just(200u16), 100u16..600],
             proptest::collection::vec((proptest::sample::select(NAMES).prop_map(String::from), value(), any::<bool>()), 0..8)),
            1..5),
        table_size in proptest::option::of(prop_oneof![Just(0u32), 0u32..300, Just(4096)]),
    ) {
        let responses: Vec<_> = responses.into_iter().map(|(s, f)| (if s < 200 { 200 } else { s }, f)).collect();
        let blocks = h2_blocks(&responses, table_size);
        let mut d = Decoder::new(table_size.map_or(4096, |n| n as usize));
        for ((status, fields), block) in responses.iter().zip(&blocks) {
            // h2 writes the fields in its header map's order: grouped by name, in the order names came
            let mut map = http::HeaderMap::new();
            for (n, v, _) in fields {
                map.append(http::HeaderName::from_bytes(n.as_bytes()).expect("name"), http::HeaderValue::from_bytes(v).expect("value"));
            }
            let mut want = vec![(b":status".to_vec(), status.to_string().into_bytes())];
            want.extend(map.iter().map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())));
            prop_assert_eq!(decode(&mut d, block), Ok(want));
        }
    }
}
