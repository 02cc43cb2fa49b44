//! `ordo bench https://` (issue 11): against `ordo serve` with TLS and a certificate generated in the test,
//! every request answered 2xx with keep-alive (one handshake per connection) and without it (one per
//! request, its time in the connect times); an untrusted certificate stops the run at once with what to do;
//! `--insecure` accepts it; `--cacert` with a file that is not PEM is refused.

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
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("ca.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), ck.key_pair.serialize_pem()).unwrap();
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
