//! `ordo bench --h2` and `--h2c` (issue 11 phase 2) against `ordo serve`: many streams per connection, every
//! request answered 2xx over one connection each; a class mix is split by request shares with per-class
//! statistics (and classified by the server: X-Ordo-Class matches); the open loop; a server that does not
//! offer h2 by ALPN stops the run at once; --streams without HTTP/2 is refused.

use std::time::Duration;

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
