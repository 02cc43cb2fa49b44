//! Shared harness of the ctl_* integration tests: start `ordo serve` in-process on 127.0.0.1:0 and talk to
//! it with a tiny HTTP/1.1 client over a plain TCP stream.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ordo_serve::{Overrides, ServeConfig, Server, ServerHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Parse `toml`, move both listeners to 127.0.0.1:0 and start the server.
pub async fn start(toml: &str) -> ServerHandle {
    let cfg = ServeConfig::from_toml_str(toml, "test.toml").expect("valid test config");
    start_cfg(cfg).await
}

/// Start `cfg` with both listeners moved to 127.0.0.1:0.
pub async fn start_cfg(mut cfg: ServeConfig) -> ServerHandle {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut o = cfg.overrides.clone();
    o.listen = Some(any);
    o.admin = Some(Some(any));
    cfg.apply_overrides(Overrides { ..o });
    Server::start(cfg).await.expect("server starts")
}

/// [`start`] on `threads` serving threads (`Server::start_threads`).
pub async fn start_threads(toml: &str, threads: usize) -> ServerHandle {
    let cfg = ServeConfig::from_toml_str(toml, "test.toml").expect("valid test config");
    start_cfg_threads(cfg, threads).await
}

/// [`start_cfg`] on `threads` serving threads.
pub async fn start_cfg_threads(mut cfg: ServeConfig, threads: usize) -> ServerHandle {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut o = cfg.overrides.clone();
    o.listen = Some(any);
    o.admin = Some(Some(any));
    cfg.apply_overrides(Overrides { ..o });
    Server::start_threads(cfg, threads)
        .await
        .expect("server starts")
}

/// Connections each serving thread accepted, from /status.
pub fn accepted_per_thread(h: &ServerHandle) -> Vec<u64> {
    h.status()["accepted_per_thread"]
        .as_array()
        .expect("accepted_per_thread in /status")
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Send one request with `Connection: close` and read the whole answer (bounded by 30 s).
pub async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    tokio::time::timeout(
        Duration::from_secs(30),
        request_inner(addr, method, path, headers, ""),
    )
    .await
    .expect("response within 30 s")
}

async fn request_inner(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Resp {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // Host is the address connected to (as curl sends it) unless the test gives its own
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    parse(&buf)
}

/// Parse a whole `Connection: close` response.
pub fn parse(buf: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {text:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    request(addr, "GET", path, &[]).await
}

/// Poll `f` every 5 ms until it holds (panics after `limit`).
pub async fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "condition not reached within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Total queued requests according to /status.
pub fn queued(h: &ServerHandle) -> u64 {
    h.status()["queued"].as_u64().unwrap_or(0)
}

/// Busy workers according to /status.
pub fn busy(h: &ServerHandle) -> u64 {
    h.status()["busy"].as_u64().unwrap_or(0)
}

/// Log lines written on this thread while the guard [`Captured::start`] returns lives (the tests run on a
/// current-thread runtime: every task of a server started on one serving thread runs here).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Capture this thread's log lines (every level up to INFO, as `ordo serve` writes them by default)
    /// until the guard is dropped.
    pub fn start() -> (Captured, tracing::subscriber::DefaultGuard) {
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        (log, tracing::subscriber::set_default(subscriber))
    }

    /// The captured lines that contain `needle`.
    pub fn lines(&self, needle: &str) -> usize {
        self.matching(needle).len()
    }

    /// The captured lines that contain `needle`, themselves.
    pub fn matching(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}
