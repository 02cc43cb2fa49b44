//! TLS termination (issue 11): handshake and HTTP/1.1 over TLS with a certificate generated in the test,
//! ALPN, SNI among several certificates, TLS 1.2 and the 1.3-only setting, certificates swapped by a reload
//! while an established connection keeps working, bad certificate/key files refused with file, line and key
//! (at start and at reload, where the old certificates stay), `tls.listen` beside the plain listener, curl
//! over https, and the access log written end to end.

use crate::ctl_util;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::ctl_util::{parse, start_cfg};
use ordo_serve::ServeConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A self-signed certificate for `names`: (certificate PEM, key PEM, certificate DER).
fn cert(names: &[&str]) -> (String, String, CertificateDer<'static>) {
    let ck =
        rcgen::generate_simple_self_signed(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    (
        ck.cert.pem(),
        ck.key_pair.serialize_pem(),
        ck.cert.der().clone(),
    )
}

fn write_pair(dir: &Path, stem: &str, c: &(String, String, CertificateDer<'static>)) {
    std::fs::write(dir.join(format!("{stem}.crt")), &c.0).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), &c.1).unwrap();
}

/// A client trusting `roots`, offering `alpn`, speaking `versions`.
fn client(
    roots: &[&CertificateDer<'static>],
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> tokio_rustls::TlsConnector {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add((*r).clone()).unwrap();
    }
    let mut cc = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    cc.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(cc))
}

async fn connect(
    c: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    name: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_string()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), c.connect(name, tcp))
        .await
        .expect("handshake within 10 s")
}

/// The leaf certificate the server presented.
fn presented(s: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    s.get_ref().1.peer_certificates().unwrap()[0].clone()
}

/// One keep-alive GET on an open connection; returns (status, body).
async fn get_on(s: &mut TlsStream<TcpStream>, path: &str) -> (u16, String) {
    get_host_on(s, "t", path).await
}

/// [`get_on`] with the Host header `host`.
async fn get_host_on(s: &mut TlsStream<TcpStream>, host: &str, path: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.flush().await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("response within 10 s")
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len {
                let r = parse(&buf);
                return (r.status, r.body);
            }
        }
    }
}

const TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
const TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
const BOTH: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn config_file(dir: &Path, extra: &str) -> std::path::PathBuf {
    let path = dir.join("serve.toml");
    std::fs::write(&path, format!("workers = 4\n{extra}")).unwrap();
    path
}

#[tokio::test]
async fn handshake_alpn_versions_and_sni() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["a.test"]);
    let b = cert(&["*.b.test"]);
    write_pair(dir.path(), "a", &a);
    write_pair(dir.path(), "b", &b);
    let path = config_file(
        dir.path(),
        "[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"b.crt\"\nkey = \"b.key\"\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let addr = h.local_addr();
    assert_eq!(
        h.tls_addr(),
        Some(addr),
        "without tls.listen the main listener speaks TLS"
    );
    let trust = [&a.2, &b.2];

    // ALPN: a browser-like offer gets HTTP/2 (tests/http2.rs speaks it); HTTP/1.1 when only it is offered.
    // The request is answered over TLS 1.3.
    let c = client(&trust, &[b"h2", b"http/1.1"], BOTH);
    let s = connect(&c, addr, "a.test").await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let c = client(&trust, &[b"http/1.1"], BOTH);
    let mut s = connect(&c, addr, "a.test").await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    assert_eq!(presented(&s), a.2);
    let (status, body) = get_on(&mut s, "/").await;
    assert_eq!(status, 200, "{body}");
    // kept alive: a second request on the same TLS connection
    assert_eq!(get_on(&mut s, "/").await.0, 200);

    // no ALPN offered at all: HTTP/1.1
    let c = client(&trust, &[], BOTH);
    let mut s = connect(&c, addr, "a.test").await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), None);
    assert_eq!(get_on(&mut s, "/").await.0, 200);

    // only a protocol the server does not speak: refused in the handshake (no_application_protocol)
    let c = client(&trust, &[b"h3"], BOTH);
    assert!(connect(&c, addr, "a.test").await.is_err());

    // SNI picks the certificate valid for the name (wildcards included); others get the first
    let c = client(&trust, &[b"http/1.1"], BOTH);
    let s = connect(&c, addr, "x.b.test").await.unwrap();
    assert_eq!(presented(&s), b.2);
    let s = connect(&c, addr, "a.test").await.unwrap();
    assert_eq!(presented(&s), a.2);
    let c_any = client(&[&a.2], &[], BOTH);
    let s = connect(&c_any, addr, "a.test").await.unwrap();
    assert_eq!(presented(&s), a.2);

    // TLS 1.2 is accepted by default
    let c = client(&trust, &[b"http/1.1"], TLS12);
    let mut s = connect(&c, addr, "a.test").await.unwrap();
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    assert_eq!(get_on(&mut s, "/").await.0, 200);

    // plain HTTP on a TLS listener gets no HTTP answer
    let mut p = TcpStream::connect(addr).await.unwrap();
    p.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), p.read_to_end(&mut buf)).await;
    assert!(!buf.starts_with(b"HTTP/"), "{buf:?}");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn min_version_13_refuses_tls12() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["a.test"]);
    write_pair(dir.path(), "a", &a);
    let path = config_file(
        dir.path(),
        "[tls]\nmin_version = \"1.3\"\ncertificates = [{ cert = \"a.crt\", key = \"a.key\" }]\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let c = client(&[&a.2], &[], TLS12);
    assert!(connect(&c, h.local_addr(), "a.test").await.is_err());
    let c = client(&[&a.2], &[], TLS13);
    let mut s = connect(&c, h.local_addr(), "a.test").await.unwrap();
    assert_eq!(get_on(&mut s, "/").await.0, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn reload_swaps_the_certificate_and_keeps_established_connections() {
    let dir = tempfile::tempdir().unwrap();
    let old = cert(&["site.test"]);
    let new = cert(&["site.test"]);
    write_pair(dir.path(), "site", &old);
    let path = config_file(
        dir.path(),
        "[[tls.certificates]]\ncert = \"site.crt\"\nkey = \"site.key\"\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let addr = h.local_addr();
    let c = client(&[&old.2, &new.2], &[], BOTH);
    let mut established = connect(&c, addr, "site.test").await.unwrap();
    assert_eq!(presented(&established), old.2);
    assert_eq!(get_on(&mut established, "/").await.0, 200);

    // the files are replaced (certbot renewal), then SIGHUP / POST /reload
    write_pair(dir.path(), "site", &new);
    h.reload_from_file().unwrap();
    let s = connect(&c, addr, "site.test").await.unwrap();
    assert_eq!(
        presented(&s),
        new.2,
        "new connections get the new certificate"
    );
    assert_eq!(
        get_on(&mut established, "/").await.0,
        200,
        "the connection made before the reload goes on"
    );

    // a bad reload (key of another certificate) is refused with file:line:key; the loaded ones stay
    let other = cert(&["site.test"]);
    std::fs::write(dir.path().join("site.key"), &other.1).unwrap();
    let e = h.reload_from_file().unwrap_err().to_string();
    let want = format!("{}:4: tls.certificates[0].key:", path.display());
    assert!(e.starts_with(&want), "{e}");
    assert!(e.contains("is not the key of the certificate"), "{e}");
    let mut s = connect(&c, addr, "site.test").await.unwrap();
    assert_eq!(presented(&s), new.2);
    assert_eq!(get_on(&mut s, "/").await.0, 200);
    assert_eq!(get_on(&mut established, "/").await.0, 200);
    h.shutdown().await.unwrap();
}

#[test]
fn bad_certificate_files_are_refused_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["a.test"]);
    let b = cert(&["b.test"]);
    write_pair(dir.path(), "a", &a);
    std::fs::write(dir.path().join("b.key"), &b.1).unwrap();
    std::fs::write(dir.path().join("junk.crt"), "not a certificate\n").unwrap();
    let check = |tls: &str| {
        let path = config_file(dir.path(), tls);
        ServeConfig::from_file(&path)
            .map(|_| ())
            .map_err(|e| (path.display().to_string(), e.to_string()))
    };
    let (f, e) =
        check("[tls]\n[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"b.key\"\n").unwrap_err();
    assert!(
        e.starts_with(&format!("{f}:5: tls.certificates[0].key: ")),
        "{e}"
    );
    assert!(
        e.contains("b.key is not the key of the certificate in"),
        "{e}"
    );

    let (f, e) = check("[[tls.certificates]]\ncert = \"junk.crt\"\nkey = \"a.key\"\n").unwrap_err();
    assert!(
        e.starts_with(&format!("{f}:3: tls.certificates[0].cert: ")),
        "{e}"
    );
    assert!(e.contains("junk.crt: no certificate in it"), "{e}");

    let (f, e) = check("[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"nope.key\"\n").unwrap_err();
    assert!(
        e.starts_with(&format!("{f}:4: tls.certificates[0].key: ")),
        "{e}"
    );
    assert!(e.contains("nope.key: cannot read"), "{e}");

    let (f, e) = check("[[tls.certificates]]\ncert = \"a.crt\"\n").unwrap_err();
    assert!(e.starts_with(&format!("{f}:2: tls.certificates[0]")), "{e}");
    assert!(e.contains("missing"), "{e}");

    let (f, e) = check("[tls]\nmin_version = \"1.1\"\n").unwrap_err();
    assert!(e.starts_with(&format!("{f}:3: tls.min_version")), "{e}");

    let (f, e) = check("[tls]\nlisten = \"127.0.0.1:8080\"\ncertificates = [{ cert = \"a.crt\", key = \"a.key\" }]\n")
        .unwrap_err();
    assert!(
        e.starts_with(&format!("{f}:3: tls.listen: same address as `listen`")),
        "{e}"
    );

    assert!(check("[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listen_beside_the_plain_listener_and_curl() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["localhost"]);
    write_pair(dir.path(), "a", &a);
    let path = config_file(
        dir.path(),
        "[tls]\nlisten = \"127.0.0.1:0\"\n[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let tls_addr = h.tls_addr().unwrap();
    assert_ne!(tls_addr, h.local_addr());
    // the plain listener stays plain
    assert_eq!(ctl_util::get(h.local_addr(), "/").await.status, 200);
    let c = client(&[&a.2], &[b"http/1.1"], BOTH);
    let mut s = connect(&c, tls_addr, "localhost").await.unwrap();
    assert_eq!(get_on(&mut s, "/").await.0, 200);

    // curl --http1.1 over https, verifying against the test certificate
    let url = format!("https://localhost:{}/", tls_addr.port());
    let ca = dir.path().join("a.crt");
    let resolve = format!("localhost:{}:127.0.0.1", tls_addr.port());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args(["-sS", "--http1.1", "--max-time", "10", "-o", "/dev/null"])
            .args(["-w", "%{http_code} %{http_version} %{ssl_verify_result}"])
            .arg("--cacert")
            .arg(ca)
            .args(["--resolve", &resolve])
            .arg(&url)
            .output()
    })
    .await
    .unwrap()
    .expect("curl runs (it is part of the development image)");
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{got} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(got, "200 1.1 0");
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn access_log_records_class_wait_and_service() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let path = config_file(
        dir.path(),
        "default_class = \"free\"\n\
         [access_log]\npath = \"access.log\"\nformat = \"json\"\nflush_interval = \"50ms\"\n\
         [[classes]]\nname = \"gold\"\n[[classes]]\nname = \"free\"\n\
         [[rules]]\nclass = \"gold\"\npath_prefix = \"/g\"\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let r = ctl_util::request(h.local_addr(), "GET", "/g/x", &[("User-Agent", "t/1")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(ctl_util::get(h.local_addr(), "/other").await.status, 200);
    h.shutdown().await.unwrap();
    // shut down: the writer made its last flush
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["target"], "/g/x");
    assert_eq!(lines[0]["class"], "gold");
    assert_eq!(lines[0]["user_agent"], "t/1");
    assert_eq!(lines[0]["status"], 200);
    assert!(lines[0]["queue_wait_us"].is_u64() && lines[0]["service_us"].is_u64());
    assert_eq!(lines[1]["class"], "free");
}

#[tokio::test]
async fn https_upstreams_are_verified() {
    let dir = tempfile::tempdir().unwrap();
    let up_cert = cert(&["localhost"]);
    write_pair(dir.path(), "up", &up_cert);
    let up_path = dir.path().join("upstream.toml");
    std::fs::write(
        &up_path,
        "[[tls.certificates]]\ncert = \"up.crt\"\nkey = \"up.key\"\n",
    )
    .unwrap();
    let upstream = start_cfg(ServeConfig::from_file(&up_path).unwrap()).await;
    let port = upstream.local_addr().port();
    let proxy_with = |extra: &str| {
        let p = dir.path().join("proxy.toml");
        std::fs::write(
            &p,
            format!(
                "[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"https://localhost:{port}\"]\n{extra}"
            ),
        )
        .unwrap();
        ServeConfig::from_file(&p)
    };

    // verified against the CA file: proxied over TLS
    let h = start_cfg(proxy_with("ca_file = \"up.crt\"\n").unwrap()).await;
    for _ in 0..3 {
        let r = ctl_util::get(h.local_addr(), "/hello").await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    h.shutdown().await.unwrap();

    // the system's CA certificates do not know the test certificate: 502, and why
    let h = start_cfg(proxy_with("").unwrap()).await;
    let r = ctl_util::get(h.local_addr(), "/hello").await;
    assert_eq!(r.status, 502, "{}", r.body);
    assert!(r.body.contains("TLS handshake"), "{}", r.body);
    h.shutdown().await.unwrap();

    // tests only: no verification
    let h = start_cfg(proxy_with("danger_accept_invalid_certs = true\n").unwrap()).await;
    assert_eq!(ctl_util::get(h.local_addr(), "/hello").await.status, 200);
    h.shutdown().await.unwrap();

    // a CA file that holds no certificate is refused when the config is checked
    let e = proxy_with("ca_file = \"up.key\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("routes[0].proxy") && e.contains("up.key: no certificate"),
        "{e}"
    );
    upstream.shutdown().await.unwrap();
}

/// A static file above `sendfile_min_bytes` through TLS: no sendfile there (the bytes must be encrypted), the
/// file is read in chunks and written through the TLS stream, whole and as a range, keep-alive after it.
#[tokio::test]
async fn a_large_static_file_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["a.test"]);
    write_pair(dir.path(), "a", &a);
    std::fs::create_dir_all(dir.path().join("www")).unwrap();
    let data: String = (0..300_007)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    std::fs::write(dir.path().join("www/big.txt"), &data).unwrap();
    let path = config_file(
        dir.path(),
        "[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n\
         [[routes]]\nprefix = \"/\"\nstatic = { root = \"www\" }\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let c = client(&[&a.2], &[b"http/1.1"], BOTH);
    let mut s = connect(&c, h.local_addr(), "a.test").await.unwrap();
    for _ in 0..2 {
        let (status, body) = get_on(&mut s, "/big.txt").await;
        assert_eq!(status, 200);
        assert!(body == data, "body differs ({} bytes)", body.len());
    }
    s.write_all(b"GET /big.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=100000-100009\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(&data.as_bytes()[100_000..100_010]) {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("response within 10 s")
            .unwrap();
        assert!(n > 0, "closed early");
        buf.extend_from_slice(&chunk[..n]);
    }
    assert!(
        buf.starts_with(b"HTTP/1.1 206 "),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    assert_eq!(get_on(&mut s, "/big.txt").await.0, 200);
}

/// `tls.listen` with two serving threads: each thread has its own TLS listener, and both take handshakes.
#[tokio::test]
async fn tls_listen_on_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["localhost"]);
    write_pair(dir.path(), "a", &a);
    let path = config_file(
        dir.path(),
        "[tls]\nlisten = \"127.0.0.1:0\"\n[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n",
    );
    let h = ctl_util::start_cfg_threads(ServeConfig::from_file(&path).unwrap(), 2).await;
    let tls_addr = h.tls_addr().unwrap();
    let c = client(&[&a.2], &[b"http/1.1"], BOTH);
    let mut conns = Vec::new();
    // only TLS connections are opened: what each thread accepted came through its TLS listener
    while conns.len() < 200 && !ctl_util::accepted_per_thread(&h).iter().all(|&n| n > 0) {
        let mut s = connect(&c, tls_addr, "localhost").await.unwrap();
        assert_eq!(get_on(&mut s, "/").await.0, 200);
        conns.push(s);
    }
    let per = ctl_util::accepted_per_thread(&h);
    assert!(per.iter().all(|&n| n > 0), "{per:?}");
    assert_eq!(per.iter().sum::<u64>(), conns.len() as u64);
    for s in &mut conns {
        assert_eq!(get_on(s, "/").await.0, 200);
    }
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_proxied_request_over_tls_says_https() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["app.test"]);
    write_pair(dir.path(), "a", &a);
    let up = crate::http_forwarded::echo_upstream().await;
    let path = config_file(
        dir.path(),
        &format!(
            "[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n\
             [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
        ),
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let c = client(&[&a.2], &[b"http/1.1"], BOTH);
    let mut s = connect(&c, h.local_addr(), "app.test").await.unwrap();
    let (status, head) = get_host_on(&mut s, "app.test", "/x").await;
    assert_eq!(status, 200);
    use crate::http_forwarded::echoed;
    assert_eq!(echoed(&head, "x-forwarded-proto"), ["https"], "{head}");
    assert_eq!(echoed(&head, "x-forwarded-host"), ["app.test"], "{head}");
    assert_eq!(
        echoed(&head, "forwarded"),
        ["for=127.0.0.1;proto=https;host=app.test"],
        "{head}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn virtual_hosts_follow_sni_and_a_host_of_another_one_is_misdirected() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["a.test"]);
    let b = cert(&["b.test"]);
    write_pair(dir.path(), "a", &a);
    write_pair(dir.path(), "b", &b);
    let path = config_file(
        dir.path(),
        "[[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"b.crt\"\nkey = \"b.key\"\n\
         [[routes]]\nhost = \"a.test\"\nredirect = { to = \"/from-a\" }\n\
         [[routes]]\nhost = \"b.test\"\nredirect = { to = \"/from-b\" }\n",
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let c = client(&[&a.2, &b.2], &[b"http/1.1"], BOTH);
    let mut s = connect(&c, h.local_addr(), "a.test").await.unwrap();
    assert_eq!(presented(&s), a.2);
    let (status, body) = get_host_on(&mut s, "a.test:443", "/").await;
    assert_eq!((status, body.trim()), (301, "redirecting to /from-a"));
    // a Host of the other virtual host on a.test's connection: 421, as nginx and Go answer
    let (status, _) = get_host_on(&mut s, "b.test", "/").await;
    assert_eq!(status, 421);
    let mut s = connect(&c, h.local_addr(), "b.test").await.unwrap();
    assert_eq!(presented(&s), b.2);
    let (status, body) = get_host_on(&mut s, "B.test", "/").await;
    assert_eq!((status, body.trim()), (301, "redirecting to /from-b"));
    h.shutdown().await.unwrap();
}

/// Issue 20: the PROXY header comes before the TLS handshake.
#[tokio::test]
async fn the_proxy_protocol_header_precedes_the_tls_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let a = cert(&["app.test"]);
    write_pair(dir.path(), "a", &a);
    let up = crate::http_forwarded::echo_upstream().await;
    let path = config_file(
        dir.path(),
        &format!(
            "[limits]\nproxy_protocol = true\n\
             [[tls.certificates]]\ncert = \"a.crt\"\nkey = \"a.key\"\n\
             [[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [\"{up}\"]\n"
        ),
    );
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let mut tcp = TcpStream::connect(h.local_addr()).await.unwrap();
    tcp.write_all(b"PROXY TCP4 198.51.100.4 10.0.0.1 40000 443\r\n")
        .await
        .unwrap();
    let c = client(&[&a.2], &[b"http/1.1"], BOTH);
    let name = ServerName::try_from("app.test".to_string()).unwrap();
    let mut s = tokio::time::timeout(Duration::from_secs(10), c.connect(name, tcp))
        .await
        .expect("handshake within 10 s")
        .unwrap();
    let (status, head) = get_host_on(&mut s, "app.test", "/").await;
    assert_eq!(status, 200);
    use crate::http_forwarded::echoed;
    assert_eq!(echoed(&head, "x-forwarded-for"), ["198.51.100.4"], "{head}");
    assert_eq!(echoed(&head, "x-forwarded-proto"), ["https"], "{head}");
    // a TLS ClientHello without the header first: closed, no handshake
    assert!(connect(&c, h.local_addr(), "app.test").await.is_err());
    h.shutdown().await.unwrap();
}
