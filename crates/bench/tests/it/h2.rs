//! `ordo bench --h2` and `--h2c` (issue 11 phase 2) against `ordo serve`: many streams per connection, every
//! request answered 2xx over one connection each; a class mix is split by request shares with per-class
//! statistics (and classified by the server: X-Ordo-Class matches); the open loop; a server that does not
//! offer h2 by ALPN stops the run at once; --streams without HTTP/2 is refused. Against a bare h2c server:
//! every stream of a connection is counted, and RST_STREAM and timeouts fail only their own request; a
//! request body larger than the server's window and a response larger than a frame go through; a GOAWAY
//! sends the refused requests again on a new connection. Against hostile raw servers (issue 24): a PING or
//! SETTINGS flood, endless CONTINUATION frames, endless 1xx responses and an HPACK bomb each fail the
//! connection within a second, with the reason in the report, and memory stays bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;

use ordo_bench::{
    Assign, BenchConfig, BenchError, CancelToken, Mix, MixClass, Pacing, Stop, TlsOptions, run,
};
use ordo_serve::{ServeConfig, Server};

use crate::tls::Served;

/// `ordo serve` on 127.0.0.1:0 with classes `a` and `b` (by path) and a synthetic backend; TLS with a
/// certificate for `localhost` (`ca.pem`) when `tls`, else plain (h2c).
fn serve(tls: bool, extra: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("ca.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), ck.key_pair.serialize_pem()).unwrap();
    let tls_table = if tls {
        "[[tls.certificates]]\ncert = \"ca.pem\"\nkey = \"key.pem\"\n"
    } else {
        ""
    };
    let path = dir.path().join("serve.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:0\"\nthreads = 1\n{extra}\n[admin]\nenabled = false\n\
             [headers]\nclass = true\n\
             [[classes]]\nname = \"a\"\n[[classes]]\nname = \"b\"\n\
             [[rules]]\npath_prefix = \"/b\"\nclass = \"b\"\n\
             [[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n{tls_table}"
        ),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(Server::start(ServeConfig::from_file(&path).unwrap()))
        .unwrap();
    let port = handle.local_addr().port();
    Served {
        rt,
        handle: Some(handle),
        port,
        dir,
    }
}

fn cfg(s: &Served, tls: bool, path: &str) -> BenchConfig {
    let scheme = if tls { "https" } else { "http" };
    let mut c = BenchConfig::new(&format!("{scheme}://localhost:{}{path}", s.port)).unwrap();
    c.connections = 2;
    c.streams = 20;
    c.h2 = true;
    c.stop = Stop::Requests(2000);
    c.timeout = Duration::from_secs(10);
    c.tls = TlsOptions {
        insecure: false,
        cacert: Some(s.dir.path().join("ca.pem")),
        resume: false,
    };
    c
}

#[test]
fn h2_over_tls_many_streams_per_connection_all_2xx() {
    let s = serve(true, "");
    let r = run(cfg(&s, true, "/x?n=2048"), CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 2000);
    assert_eq!(r.summary.failed.total, 0);
    assert_eq!(r.summary.non_2xx, 0);
    assert_eq!(r.summary.body_bytes, 2000 * 2048);
    // 40 clients over two connections: one handshake each
    assert_eq!(r.summary.connections_opened, 2);
    assert_eq!(r.config.protocol.as_deref(), Some("h2"));
    assert_eq!(r.config.streams, Some(20));
    // the client's wakeup coalescing is recorded with the run (the default, 20 µs)
    assert_eq!(r.config.coalesce_us, Some(20.0));
    let text = ordo_bench::print::text(&r);
    assert!(
        text.contains("HTTP/2 (h2), 20 streams per connection"),
        "{text}"
    );
}

#[test]
fn h2c_with_a_class_mix_keeps_per_class_statistics() {
    let s = serve(false, "");
    let mut c = cfg(&s, false, "/");
    c.mix = Some(Mix::new(
        Assign::Requests,
        vec![MixClass::new("a", 3.0, "/a"), MixClass::new("b", 1.0, "/b")],
    ));
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 2000);
    assert_eq!(r.summary.failed.total, 0);
    assert_eq!(r.summary.non_2xx, 0);
    assert_eq!(r.config.protocol.as_deref(), Some("h2c"));
    let a = &r.classes[0];
    let b = &r.classes[1];
    assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
    // request shares by a smooth weighted round robin: exactly 3:1 over whole periods
    assert_eq!((a.complete, b.complete), (1500, 500));
    assert!(a.latency.mean_ms > 0.0 && b.latency.mean_ms > 0.0);
}

#[test]
fn h2c_open_loop_at_a_rate() {
    let s = serve(false, "");
    let mut c = cfg(&s, false, "/x");
    c.pacing = Pacing::Open { rate: 2000.0 };
    c.stop = Stop::Requests(1000);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 1000);
    assert_eq!(r.summary.failed.total, 0);
    assert!(r.summary.corrected.is_some());
}

#[test]
fn a_server_without_h2_is_reported_at_once() {
    let s = serve(true, "[http2]\nenabled = false");
    match run(cfg(&s, true, "/x"), CancelToken::new()) {
        Err(BenchError::Unreachable { reason, .. }) => {
            assert!(reason.contains("does not offer HTTP/2 by ALPN"), "{reason}")
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let mut c = cfg(&s, true, "/x");
    c.h2 = false;
    c.streams = 4;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("streams") && e.contains("HTTP/2"), "{e}");
}

/// A bare h2c server (the h2 crate's) on 127.0.0.1:0 that answers by path: `/ok` with 200 and 100 bytes,
/// `/reset` with RST_STREAM (INTERNAL_ERROR), `/hang` never. It counts the HTTP/2 connections and streams it
/// accepted and the most streams one connection had open at once; it stops with the returned runtime.
struct Raw {
    _rt: tokio::runtime::Runtime,
    port: u16,
    conns: Arc<AtomicU64>,
    streams: Arc<AtomicU64>,
    max_open: Arc<AtomicU64>,
}

fn raw_h2c() -> Raw {
    raw_h2c_with(None)
}

/// [`raw_h2c`] whose connections send GOAWAY (graceful) after `goaway_after` streams. Its stream windows
/// are 1000 bytes (request bodies wait for WINDOW_UPDATE); `/post` reads the body and answers with as many
/// bytes, times 10.
fn raw_h2c_with(goaway_after: Option<u64>) -> Raw {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let (conns, streams, max_open) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let (c, st, mo) = (conns.clone(), streams.clone(), max_open.clone());
    rt.spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (c, st, mo) = (c.clone(), st.clone(), mo.clone());
            tokio::spawn(async move {
                // (the bench's reachability check connects without a handshake: not counted)
                let Ok(mut conn) = h2::server::Builder::new()
                    .initial_window_size(1000)
                    .handshake::<_, Bytes>(sock)
                    .await
                else {
                    return;
                };
                c.fetch_add(1, Ordering::Relaxed);
                let mut hung = Vec::new();
                let open = Arc::new(AtomicU64::new(0));
                let mut here = 0u64;
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    st.fetch_add(1, Ordering::Relaxed);
                    here += 1;
                    if goaway_after == Some(here) {
                        conn.graceful_shutdown();
                    }
                    let now_open = open.fetch_add(1, Ordering::Relaxed) + 1;
                    mo.fetch_max(now_open, Ordering::Relaxed);
                    match req.uri().path() {
                        "/reset" => {
                            respond.send_reset(h2::Reason::INTERNAL_ERROR);
                            open.fetch_sub(1, Ordering::Relaxed);
                        }
                        "/hang" => hung.push(respond),
                        "/post" => {
                            let open = open.clone();
                            tokio::spawn(async move {
                                let mut body = req.into_body();
                                let mut n = 0usize;
                                while let Some(Ok(chunk)) = body.data().await {
                                    n += chunk.len();
                                    let _ = body.flow_control().release_capacity(chunk.len());
                                }
                                let resp = http::Response::new(());
                                if let Ok(mut tx) = respond.send_response(resp, false) {
                                    let _ = tx.send_data(Bytes::from(vec![b'y'; n * 10]), true);
                                }
                                open.fetch_sub(1, Ordering::Relaxed);
                            });
                        }
                        _ => {
                            let open = open.clone();
                            tokio::spawn(async move {
                                // answered a little later, so the client's streams pile up
                                tokio::time::sleep(Duration::from_millis(2)).await;
                                let resp = http::Response::new(());
                                if let Ok(mut body) = respond.send_response(resp, false) {
                                    let _ = body.send_data(Bytes::from(vec![b'x'; 100]), true);
                                }
                                open.fetch_sub(1, Ordering::Relaxed);
                            });
                        }
                    }
                }
            });
        }
    });
    Raw {
        _rt: rt,
        port,
        conns,
        streams,
        max_open,
    }
}

fn raw_cfg(r: &Raw, path: &str) -> BenchConfig {
    let mut c = BenchConfig::new(&format!("http://127.0.0.1:{}{path}", r.port)).unwrap();
    c.connections = 1;
    c.streams = 16;
    c.h2 = true;
    c.timeout = Duration::from_secs(10);
    c
}

#[test]
fn every_stream_of_a_connection_is_counted_and_kept_busy() {
    let raw = raw_h2c();
    let mut c = raw_cfg(&raw, "/ok");
    c.connections = 2;
    c.stop = Stop::Requests(3000);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 3000);
    assert_eq!(r.summary.failed.total, 0);
    assert_eq!(r.summary.body_bytes, 3000 * 100);
    assert_eq!(r.summary.latency.count, 3000);
    assert_eq!(r.summary.connections_opened, 2);
    assert_eq!(raw.conns.load(Ordering::Relaxed), 2);
    // warm-up requests (none here) aside, the server saw each measured request once, and no more than
    // the clients' requests in flight at a time (16 per connection); with 2 ms answers they overlap
    let seen = raw.streams.load(Ordering::Relaxed);
    assert!((3000..=3000 + 32).contains(&seen), "{seen}");
    let most = raw.max_open.load(Ordering::Relaxed);
    assert!((2..=16).contains(&most), "{most}");
}

#[test]
fn reset_streams_and_timeouts_are_counted_per_class_and_keep_the_connection() {
    let raw = raw_h2c();
    let mut c = raw_cfg(&raw, "/");
    c.mix = Some(Mix::new(
        Assign::Requests,
        vec![
            MixClass::new("ok", 2.0, "/ok"),
            MixClass::new("reset", 1.0, "/reset"),
            MixClass::new("hang", 1.0, "/hang"),
        ],
    ));
    c.stop = Stop::Requests(200);
    c.timeout = Duration::from_millis(200);
    let r = run(c, CancelToken::new()).unwrap();
    let (ok, reset, hang) = (&r.classes[0], &r.classes[1], &r.classes[2]);
    assert_eq!((ok.complete, ok.failed.total), (100, 0));
    // RST_STREAM: a receive failure of that request alone
    assert_eq!((reset.complete, reset.failed.receive), (0, 50));
    assert_eq!(reset.failed.total, 50);
    // no answer within --timeout: an exception counted as a timeout; the stream is reset, the
    // connection stays
    assert_eq!((hang.complete, hang.failed.timeouts), (0, 50));
    assert_eq!(hang.failed.total, 50);
    assert_eq!(r.summary.connections_opened, 1);
    assert_eq!(raw.conns.load(Ordering::Relaxed), 1);
}

#[test]
fn think_time_paces_each_stream() {
    let raw = raw_h2c();
    let mut c = raw_cfg(&raw, "/");
    c.streams = 4;
    c.stop = Stop::Duration(Duration::from_millis(500));
    let mut class = MixClass::new("slow", 1.0, "/ok");
    class.think = Duration::from_millis(50);
    c.mix = Some(Mix::new(Assign::Clients, vec![class]));
    let r = run(c, CancelToken::new()).unwrap();
    // 4 streams × at most one request per 50 ms for 0.5 s (the bound holds however slow the machine is)
    let n = r.summary.complete;
    assert!((1..=4 * 11).contains(&n), "{n}");
    assert_eq!(r.summary.failed.total, 0);
}

#[test]
fn request_bodies_past_the_servers_window_and_large_responses_complete() {
    let raw = raw_h2c();
    let mut c = raw_cfg(&raw, "/post");
    c.streams = 4;
    c.method = "POST".into();
    // 25 server windows' worth per request; the response is 250 KB (many DATA frames)
    c.body = Some(Bytes::from(vec![b'b'; 25_000]));
    c.stop = Stop::Requests(40);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 40);
    assert_eq!(r.summary.failed.total, 0);
    assert_eq!(r.summary.body_bytes, 40 * 250_000);
    assert_eq!(r.summary.connections_opened, 1);
}

#[test]
fn goaway_sends_the_refused_requests_again_on_a_new_connection() {
    let raw = raw_h2c_with(Some(50));
    let mut c = raw_cfg(&raw, "/ok");
    c.stop = Stop::Requests(500);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 500);
    assert_eq!(r.summary.failed.total, 0);
    // a connection takes 50 streams or more (h2's graceful GOAWAY first announces the highest id, then
    // after a PING round trip the last it took); streams above it are refused and sent again
    let opened = r.summary.connections_opened;
    assert!((2..=11).contains(&opened), "{opened}");
    assert_eq!(raw.conns.load(Ordering::Relaxed), opened);
}

/// How a hostile h2c server misbehaves once the client's first request (HEADERS on stream 1) is in.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// PING after PING, never reading the acknowledgements.
    PingFlood,
    /// Empty SETTINGS after SETTINGS, never reading the acknowledgements.
    SettingsFlood,
    /// HEADERS without END_HEADERS, then empty CONTINUATION frames for ever.
    Continuations,
    /// 103 Early Hints on stream 1 for ever.
    Informational,
    /// A 4000-byte field in the dynamic table, then a block of 4000 references to it (16 MB decoded).
    HpackBomb,
}

fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A raw TCP server on 127.0.0.1:0 speaking just enough HTTP/2 (h2c, prior knowledge) to misbehave as
/// `how` says: it reads the preface, sends an empty SETTINGS, reads until the client's first HEADERS, then
/// floods (for at most 10 s, or until the client closes). Returns its port.
fn hostile_h2c(how: Hostile) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for sock in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut sock = sock;
                let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = sock.set_write_timeout(Some(Duration::from_secs(10)));
                // the preface, then frames until a HEADERS (the reachability check closes at once)
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut sent_settings = false;
                loop {
                    match sock.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                    if buf.len() >= 24 && !sent_settings {
                        if sock.write_all(&h2_frame(4, 0, 0, &[])).is_err() {
                            return;
                        }
                        sent_settings = true;
                    }
                    let mut at = 24;
                    let mut headers = false;
                    while buf.len() >= at + 9 {
                        let len = (buf[at] as usize) << 16
                            | (buf[at + 1] as usize) << 8
                            | buf[at + 2] as usize;
                        headers |= buf[at + 3] == 1;
                        at += 9 + len;
                    }
                    if headers {
                        break;
                    }
                }
                let batch: Vec<u8> = match how {
                    Hostile::PingFlood => (0..1000)
                        .flat_map(|_| h2_frame(6, 0, 0, b"floodfld"))
                        .collect(),
                    Hostile::SettingsFlood => {
                        (0..1000).flat_map(|_| h2_frame(4, 0, 0, &[])).collect()
                    }
                    Hostile::Continuations => {
                        if sock.write_all(&h2_frame(1, 0, 1, &[0x88])).is_err() {
                            return;
                        }
                        (0..1000).flat_map(|_| h2_frame(9, 0, 1, &[])).collect()
                    }
                    Hostile::Informational => (0..1000)
                        .flat_map(|_| h2_frame(1, 4, 1, &[0x08, 0x03, b'1', b'0', b'3']))
                        .collect(),
                    Hostile::HpackBomb => {
                        let mut b = vec![0x88, 0x40, 6];
                        b.extend_from_slice(b"x-bomb");
                        b.extend_from_slice(&[0x7f, 0x80 | (3873 & 0x7f) as u8, (3873 >> 7) as u8]);
                        b.extend(std::iter::repeat_n(b'a', 4000));
                        b.extend(std::iter::repeat_n(0xbe, 4000));
                        h2_frame(1, 4 | 1, 1, &b)
                    }
                };
                let until = std::time::Instant::now() + Duration::from_secs(10);
                while std::time::Instant::now() < until {
                    if sock.write_all(&batch).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Each hostile server fails the client's connection within a second (not at --timeout, 10 s), with the
/// reason in the report's connection errors, and the client's memory stays bounded.
#[test]
fn hostile_servers_fail_the_connection_within_a_second() {
    for (how, reason) in [
        (Hostile::PingFlood, "the server floods the connection"),
        (Hostile::SettingsFlood, "the server floods the connection"),
        (Hostile::Continuations, "more than 16 CONTINUATION frames"),
        (
            Hostile::Informational,
            "more than 8 informational (1xx) responses",
        ),
        (Hostile::HpackBomb, "an HPACK bomb"),
    ] {
        let port = hostile_h2c(how);
        let mut c = BenchConfig::new(&format!("http://127.0.0.1:{port}/")).unwrap();
        c.h2 = true;
        c.connections = 1;
        c.stop = Stop::Requests(1);
        c.timeout = Duration::from_secs(10);
        let rss = rss_kib();
        let t0 = std::time::Instant::now();
        let r = run(c, CancelToken::new()).unwrap();
        let took = t0.elapsed();
        let grew = rss_kib().saturating_sub(rss);
        assert!(took < Duration::from_secs(1), "{how:?}: {took:?}");
        assert_eq!(
            (r.summary.complete, r.summary.failed.total),
            (0, 1),
            "{how:?}"
        );
        let errors = &r.summary.connection_errors;
        assert_eq!(errors.len(), 1, "{how:?}: {errors:?}");
        assert!(
            errors[0].reason.starts_with("HTTP/2: ") && errors[0].reason.contains(reason),
            "{how:?}: {errors:?}"
        );
        assert_eq!(errors[0].count, 1);
        assert!(grew < 64 * 1024, "{how:?}: RSS grew by {grew} KiB");
        eprintln!("{how:?}: failed in {took:?}, RSS +{grew} KiB");
    }
}
