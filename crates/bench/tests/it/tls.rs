//! `ordo bench https://` (issue 11): against `ordo serve` with TLS and a certificate generated in the test,
//! every request answered 2xx with keep-alive (one handshake per connection) and without it (one per
//! request, its time in the connect times); an untrusted certificate stops the run at once with what to do;
//! `--insecure` accepts it; `--cacert` with a file that is not PEM is refused; a self-signed leaf made the
//! way `openssl req -x509` makes one (basicConstraints CA:TRUE) given with `--cacert` is trusted as itself,
//! as curl does, its name and validity still checked (issue 24).

use std::path::Path;
use std::time::Duration;

use ordo_bench::{BenchConfig, BenchError, CancelToken, Stop, TlsOptions, run};
use ordo_serve::{ServeConfig, Server, ServerHandle};

/// An in-process `ordo serve` (its own runtime), shut down on drop; `dir` holds its files (also tests/it/h2.rs).
pub(crate) struct Served {
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) handle: Option<ServerHandle>,
    pub(crate) port: u16,
    pub(crate) dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = self.rt.block_on(h.shutdown());
        }
    }
}

/// `ordo serve` speaking TLS on 127.0.0.1:0 with a self-signed certificate for `localhost`, written to
/// `ca.pem` in the returned directory.
fn serve_tls() -> (Served, std::path::PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    serve_tls_with(&ck.cert.pem(), &ck.key_pair.serialize_pem())
}

/// `ordo serve` speaking TLS on 127.0.0.1:0 with the certificate `cert_pem` (written to `ca.pem`) and its
/// key.
fn serve_tls_with(cert_pem: &str, key_pem: &str) -> (Served, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), cert_pem).unwrap();
    std::fs::write(dir.path().join("key.pem"), key_pem).unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:0\"\nthreads = 1\n[admin]\nenabled = false\n\
         [[tls.certificates]]\ncert = \"ca.pem\"\nkey = \"key.pem\"\n",
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cfg = ServeConfig::from_file(&path).unwrap();
    let handle = rt.block_on(Server::start(cfg)).unwrap();
    let port = handle.local_addr().port();
    let ca = dir.path().join("ca.pem");
    (
        Served {
            rt,
            handle: Some(handle),
            port,
            dir,
        },
        ca,
    )
}

fn cfg(port: u16, ca: Option<&Path>) -> BenchConfig {
    let mut c = BenchConfig::new(&format!("https://localhost:{port}/")).unwrap();
    c.connections = 4;
    c.stop = Stop::Requests(200);
    c.timeout = Duration::from_secs(10);
    c.connect_timeout = Duration::from_secs(5);
    c.tls = TlsOptions {
        insecure: false,
        cacert: ca.map(Path::to_path_buf),
        resume: false,
    };
    c
}

#[test]
fn https_keep_alive_and_new_connections_all_2xx() {
    let (s, ca) = serve_tls();
    let r = run(cfg(s.port, Some(&ca)), CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 200);
    assert_eq!(r.summary.failed.total, 0);
    assert_eq!(r.summary.non_2xx, 0);
    assert_eq!(
        r.summary.connections_opened, 4,
        "one handshake per connection"
    );

    let mut c = cfg(s.port, Some(&ca));
    c.keepalive = false;
    c.stop = Stop::Requests(40);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!((r.summary.complete, r.summary.non_2xx), (40, 0));
    assert_eq!(r.summary.connections_opened, 40);
    // a TLS handshake takes a round trip and public-key work: it shows in the connect times
    assert!(
        r.connection_times.connect.mean_ms > 0.0,
        "{:?}",
        r.connection_times
    );

    // session resumption on: still every request answered
    let mut c = cfg(s.port, Some(&ca));
    c.keepalive = false;
    c.stop = Stop::Requests(40);
    c.tls.resume = true;
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!((r.summary.complete, r.summary.non_2xx), (40, 0));
}

#[test]
fn untrusted_certificates_stop_the_run_unless_insecure() {
    let (s, ca) = serve_tls();
    let mut c = cfg(s.port, None);
    c.stop = Stop::Requests(10);
    let e = run(c, CancelToken::new()).unwrap_err();
    assert!(matches!(e, BenchError::Unreachable { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("certificate") && msg.contains("--cacert"),
        "{msg}"
    );

    let mut c = cfg(s.port, None);
    c.stop = Stop::Requests(10);
    c.tls.insecure = true;
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!((r.summary.complete, r.summary.non_2xx), (10, 0));

    let mut c = cfg(
        s.port,
        Some(ca.parent().unwrap().join("serve.toml").as_path()),
    );
    c.stop = Stop::Requests(10);
    let e = run(c, CancelToken::new()).unwrap_err().to_string();
    assert!(
        e.contains("cacert") && e.contains("no PEM certificate"),
        "{e}"
    );
}

/// A self-signed ECDSA P-256 certificate as `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256
/// -subj /CN=localhost -addext subjectAltName=DNS:localhost` makes it: basicConstraints CA:TRUE, which
/// webpki refuses as a leaf (`CaUsedAsEndEntity`). `expired`: valid in 2020 only. Returns (cert, key) PEM.
fn openssl_style_leaf(expired: bool) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    if expired {
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2020, 12, 31);
    }
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[test]
fn cacert_trusts_a_self_signed_ca_true_leaf_as_itself() {
    let (cert, key) = openssl_style_leaf(false);
    let (s, ca) = serve_tls_with(&cert, &key);
    let mut c = cfg(s.port, Some(&ca));
    c.stop = Stop::Requests(20);
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!((r.summary.complete, r.summary.non_2xx), (20, 0));
    // HTTP/2 over TLS too
    let mut c = cfg(s.port, Some(&ca));
    c.stop = Stop::Requests(20);
    c.h2 = true;
    let r = run(c, CancelToken::new()).unwrap();
    assert_eq!((r.summary.complete, r.summary.non_2xx), (20, 0));
    // among other certificates in the file
    let (other, _) = openssl_style_leaf(false);
    let both = s.dir.path().join("both.pem");
    std::fs::write(&both, format!("{other}{cert}")).unwrap();
    let mut c = cfg(s.port, Some(&both));
    c.stop = Stop::Requests(5);
    assert_eq!(run(c, CancelToken::new()).unwrap().summary.complete, 5);

    // the name is still checked: the certificate is for localhost, not 127.0.0.1
    let mut c = cfg(s.port, Some(&ca));
    c.target = ordo_bench::Target::parse(&format!("https://127.0.0.1:{}/", s.port)).unwrap();
    let e = run(c, CancelToken::new()).unwrap_err().to_string();
    assert!(e.contains("NotValidForName"), "{e}");
    // another self-signed certificate is no anchor for this one
    let only_other = s.dir.path().join("other.pem");
    std::fs::write(&only_other, &other).unwrap();
    let e = run(cfg(s.port, Some(&only_other)), CancelToken::new())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("CaUsedAsEndEntity") && e.contains("give that certificate itself with --cacert"),
        "{e}"
    );
}

#[test]
fn cacert_refuses_an_expired_self_signed_leaf() {
    let (cert, key) = openssl_style_leaf(true);
    let (s, ca) = serve_tls_with(&cert, &key);
    let e = run(cfg(s.port, Some(&ca)), CancelToken::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("invalid peer certificate: Expired"), "{e}");
}
