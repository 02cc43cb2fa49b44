//! Issue 20's forwarded information, through a whole `ordo serve` to an upstream that echoes the request head
//! it received: X-Forwarded-For/-Proto/-Host and RFC 7239 Forwarded written, an untrusted client's replaced
//! and a trusted proxy's kept and appended to (`[forwarded] trusted_proxies`), X-Request-Id kept when sane or
//! generated (forwarded, returned, logged), traceparent/tracestate passed unchanged; and the PROXY protocol
//! on the listener (v1 and v2 headers give the client's address; none, a bad one or an untrusted peer: the
//! connection is closed unanswered).

use std::net::SocketAddr;
use std::time::Duration;

use crate::http_util::*;
use ordo_serve::{Overrides, ServeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An upstream that answers every request with its head (as received) as the body.
pub(crate) async fn echo_upstream() -> SocketAddr {
    head_upstream(|head| head.to_vec()).await
}

/// A whole `ordo serve` from a config; the listener moved to 127.0.0.1:0, no admin listener.
pub(crate) async fn ordo(toml: &str) -> ordo_serve::ServerHandle {
    let mut cfg = ServeConfig::from_toml_str(toml, "test.toml").expect("valid test config");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    cfg.apply_overrides(Overrides {
        listen: Some(any),
        admin: Some(None),
        ..Overrides::default()
    });
    ordo_serve::Server::start(cfg).await.expect("server starts")
}

/// The values of header `name` in an echoed head (case-insensitive), in order.
pub(crate) fn echoed(head: &str, name: &str) -> Vec<String> {
    head.split("\r\n")
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

async fn exchange(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut c = Client::connect(addr).await;
    c.send(raw).await;
    c.response().await
}

const SPOOFED: &str = "GET /x HTTP/1.1\r\nHost: app.example.com:8080\r\nX-Forwarded-For: 6.6.6.6\r\n\
    X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.test\r\nForwarded: for=6.6.6.6;proto=https\r\n\
    traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\ntracestate: congo=t61rcWkgMzE\r\n\
    X-Request-Id: req-42\r\n\r\n";

#[tokio::test]
async fn an_untrusted_client_cannot_spoof_forwarding_headers() {
    let up = echo_upstream().await;
    let h = ordo(&format!(
        "[forwarded]\nrequest_id = true\n[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
    ))
    .await;
    let r = exchange(h.local_addr(), SPOOFED.as_bytes()).await;
    assert_eq!(r.status, 200);
    let head = r.text();
    assert_eq!(echoed(&head, "x-forwarded-for"), ["127.0.0.1"], "{head}");
    assert_eq!(echoed(&head, "x-forwarded-proto"), ["http"], "{head}");
    assert_eq!(
        echoed(&head, "x-forwarded-host"),
        ["app.example.com:8080"],
        "{head}"
    );
    assert_eq!(
        echoed(&head, "forwarded"),
        ["for=127.0.0.1;proto=http;host=\"app.example.com:8080\""],
        "{head}"
    );
    // W3C trace context passes unchanged; a sane request id is kept and returned
    assert_eq!(
        echoed(&head, "traceparent"),
        ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]
    );
    assert_eq!(echoed(&head, "tracestate"), ["congo=t61rcWkgMzE"]);
    assert_eq!(echoed(&head, "x-request-id"), ["req-42"], "{head}");
    assert_eq!(r.header("x-request-id"), Some("req-42"));
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_trusted_proxy_s_headers_are_kept_and_appended_to() {
    let up = echo_upstream().await;
    let h = ordo(&format!(
        "[forwarded]\ntrusted_proxies = [\"10.0.0.0/8\", \"127.0.0.1\"]\n\
         [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
    ))
    .await;
    let r = exchange(h.local_addr(), SPOOFED.as_bytes()).await;
    let head = r.text();
    assert_eq!(
        echoed(&head, "x-forwarded-for"),
        ["6.6.6.6, 127.0.0.1"],
        "{head}"
    );
    assert_eq!(echoed(&head, "x-forwarded-proto"), ["https"], "{head}");
    assert_eq!(echoed(&head, "x-forwarded-host"), ["evil.test"], "{head}");
    assert_eq!(
        echoed(&head, "forwarded"),
        ["for=6.6.6.6;proto=https, for=127.0.0.1;proto=http;host=\"app.example.com:8080\""],
        "{head}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn request_ids_are_generated_logged_and_can_be_turned_off() {
    let up = echo_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let h = ordo(&format!(
        "[forwarded]\nrequest_id = true\n[access_log]\npath = \"{}\"\nflush_interval = \"10ms\"\n\
         [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n",
        log.display()
    ))
    .await;
    // an id too long (or with a space) is replaced by a generated one
    let long = "x".repeat(200);
    let r = exchange(
        h.local_addr(),
        format!("GET /a HTTP/1.1\r\nHost: h\r\nX-Request-Id: {long}\r\n\r\n").as_bytes(),
    )
    .await;
    let id = r
        .header("x-request-id")
        .expect("an id returned")
        .to_string();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    assert_eq!(echoed(&r.text(), "x-request-id"), [id.as_str()]);
    let r2 = exchange(h.local_addr(), &get("/b")).await;
    let id2 = r2.header("x-request-id").unwrap();
    assert_ne!(id, id2, "each request gets its own id");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(&format!("request_id={id}")) && text.contains(id2) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ids not logged: {text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.shutdown().await.unwrap();

    let h = ordo(&format!(
        "[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
    ))
    .await;
    let r = exchange(
        h.local_addr(),
        b"GET /a HTTP/1.1\r\nHost: h\r\nX-Request-Id: has space\r\n\r\n",
    )
    .await;
    assert_eq!(r.header("x-request-id"), None);
    assert_eq!(
        echoed(&r.text(), "x-request-id"),
        ["has space"],
        "without ids (the default) the client's passes as sent"
    );
    h.shutdown().await.unwrap();
}

#[test]
fn a_bad_trusted_proxy_range_is_refused_with_its_key() {
    let msg = ServeConfig::from_toml_str(
        "[forwarded]\ntrusted_proxies = [\"10.0.0.0/8\", \"fe80::/200\"]\n",
        "t.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("t.toml:2")
            && msg.contains("forwarded.trusted_proxies[1]")
            && msg.contains("fe80::/200"),
        "{msg}"
    );
}

/// Sends `raw` on a new connection and reads until the server closes (or answers: one response).
async fn raw_exchange(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(raw).await.unwrap();
    let mut got = Vec::new();
    let mut tmp = [0u8; 8192];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut tmp)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&tmp[..n]),
            Ok(_) => return got,
            Err(_) => panic!(
                "neither answered nor closed: {}",
                String::from_utf8_lossy(&got)
            ),
        }
        if let Some(i) = find(&got, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..i]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= i + 4 + len {
                return got;
            }
        }
    }
}

#[tokio::test]
async fn the_proxy_protocol_gives_the_client_address() {
    let up = echo_upstream().await;
    let h = ordo(&format!(
        "[limits]\nproxy_protocol = true\n\
         [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
    ))
    .await;
    let a = h.local_addr();
    let req = "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    let got = raw_exchange(
        a,
        format!("PROXY TCP4 203.0.113.9 10.0.0.1 5555 80\r\n{req}").as_bytes(),
    )
    .await;
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(echoed(&text, "x-forwarded-for"), ["203.0.113.9"], "{text}");
    assert_eq!(
        echoed(&text, "forwarded"),
        ["for=203.0.113.9;proto=http;host=h"]
    );
    // v2, IPv6 source
    let mut v2 = b"\r\n\r\n\0\r\nQUIT\n\x21\x21\x00\x24".to_vec();
    v2.extend_from_slice(
        &"2001:db8::7"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets(),
    );
    v2.extend_from_slice(&[0; 16]);
    v2.extend_from_slice(&[0x15, 0xb3, 0, 80]);
    v2.extend_from_slice(req.as_bytes());
    let text = String::from_utf8_lossy(&raw_exchange(a, &v2).await).into_owned();
    assert_eq!(echoed(&text, "x-forwarded-for"), ["2001:db8::7"], "{text}");
    assert_eq!(
        echoed(&text, "forwarded"),
        ["for=\"[2001:db8::7]\";proto=http;host=h"]
    );
    // v1 UNKNOWN (a health check): the connection's own address
    let text = String::from_utf8_lossy(
        &raw_exchange(a, format!("PROXY UNKNOWN\r\n{req}").as_bytes()).await,
    )
    .into_owned();
    assert_eq!(echoed(&text, "x-forwarded-for"), ["127.0.0.1"], "{text}");
    // no header, or a bad one: closed without a byte
    assert_eq!(raw_exchange(a, req.as_bytes()).await, b"");
    assert_eq!(
        raw_exchange(a, b"PROXY TCP4 1.2.3.4 nope 1 2\r\n").await,
        b""
    );
    h.shutdown().await.unwrap();

    // only from trusted proxies when they are listed
    let h = ordo(&format!(
        "[limits]\nproxy_protocol = true\n[forwarded]\ntrusted_proxies = [\"10.0.0.0/8\"]\n\
         [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
    ))
    .await;
    let got = raw_exchange(
        h.local_addr(),
        format!("PROXY TCP4 203.0.113.9 10.0.0.1 5555 80\r\n{req}").as_bytes(),
    )
    .await;
    assert_eq!(
        got, b"",
        "a PROXY header from 127.0.0.1, not a trusted proxy"
    );
    h.shutdown().await.unwrap();
}
