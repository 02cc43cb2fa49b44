//! A tiny in-process HTTP/1.1 responder on 127.0.0.1:0 for the engine tests: counts connections and
//! requests (per path), and injects faults on chosen requests (partial head, short body, stall).

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What to do with request number `k` (1-based, counted over the whole server).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Send half a response head, then close.
    PartialHead,
    /// Declare 100 bytes, send 10, close.
    ShortBody,
    /// Sleep this long before answering this request only.
    Sleep(Duration),
    /// Every connection stops answering for this long from now on (a server-wide stall).
    GlobalStall(Duration),
}

pub type FaultFn = Arc<dyn Fn(u64) -> Fault + Send + Sync>;

#[derive(Default)]
pub struct Counters {
    pub accepted: AtomicU64,
    /// Connections that carried at least one request.
    pub used_connections: AtomicU64,
    pub requests: AtomicU64,
    pub per_path: Mutex<HashMap<String, u64>>,
    pub cookies: Mutex<HashMap<String, u64>>,
    pub headers: Mutex<HashMap<String, u64>>,
    stall_until: Mutex<Option<Instant>>,
}

impl Counters {
    pub fn path(&self, p: &str) -> u64 {
        self.per_path.lock().unwrap().get(p).copied().unwrap_or(0)
    }
}

pub struct Server {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// A server answering every request; the body is `n` bytes for `?n=N` paths, else "ok".
pub fn start() -> Server {
    start_with(Arc::new(|_| Fault::None), None)
}

/// A server with faults; after `max_accepts` accepted connections the listener is closed (later connects
/// are refused).
pub fn start_with(fault: FaultFn, max_accepts: Option<u64>) -> Server {
    let counters = Arc::new(Counters::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let c = counters.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            loop {
                let (s, _) = l.accept().await.unwrap();
                let n = c.accepted.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(handle(s, c.clone(), fault.clone()));
                if max_accepts.is_some_and(|m| n >= m) {
                    drop(l);
                    std::future::pending::<()>().await;
                    return;
                }
            }
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    Server { addr, counters }
}

async fn handle(mut s: TcpStream, c: Arc<Counters>, fault: FaultFn) {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let mut first = true;
    let used = AtomicUsize::new(0);
    loop {
        // Read one request head.
        let (len, path, close, body_len) = loop {
            let mut h = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut h);
            if filled > 0 {
                if let Ok(httparse::Status::Complete(len)) = req.parse(&buf[..filled]) {
                    let path = req.path.unwrap_or("/").to_string();
                    let mut close = false;
                    let mut body_len = 0usize;
                    for h in req.headers.iter() {
                        let v = String::from_utf8_lossy(h.value).to_string();
                        if h.name.eq_ignore_ascii_case("connection")
                            && v.eq_ignore_ascii_case("close")
                        {
                            close = true;
                        }
                        if h.name.eq_ignore_ascii_case("content-length") {
                            body_len = v.trim().parse().unwrap_or(0);
                        }
                        if h.name.eq_ignore_ascii_case("cookie") {
                            *c.cookies.lock().unwrap().entry(v.clone()).or_default() += 1;
                        }
                        if h.name.to_ascii_lowercase().starts_with("x-") {
                            *c.headers
                                .lock()
                                .unwrap()
                                .entry(format!("{}: {v}", h.name))
                                .or_default() += 1;
                        }
                    }
                    break (len, path, close, body_len);
                }
            }
            if filled == buf.len() {
                return;
            }
            match s.read(&mut buf[filled..]).await {
                Ok(0) | Err(_) => return,
                Ok(n) => filled += n,
            }
        };
        // Skip a request body.
        let mut need = len + body_len;
        while filled < need {
            if need > buf.len() {
                buf.resize(need, 0);
            }
            match s.read(&mut buf[filled..]).await {
                Ok(0) | Err(_) => return,
                Ok(n) => filled += n,
            }
        }
        buf.copy_within(need..filled, 0);
        filled -= need;
        need = 0;
        let _ = need;
        if first {
            c.used_connections.fetch_add(1, Ordering::SeqCst);
            first = false;
        }
        used.fetch_add(1, Ordering::Relaxed);
        let k = c.requests.fetch_add(1, Ordering::SeqCst) + 1;
        *c.per_path.lock().unwrap().entry(path.clone()).or_default() += 1;
        match fault(k) {
            Fault::None => {}
            Fault::PartialHead => {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Le").await;
                return;
            }
            Fault::ShortBody => {
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                    .await;
                return;
            }
            Fault::Sleep(d) => tokio::time::sleep(d).await,
            Fault::GlobalStall(d) => {
                *c.stall_until.lock().unwrap() = Some(Instant::now() + d);
            }
        }
        let stall = *c.stall_until.lock().unwrap();
        if let Some(until) = stall {
            if until > Instant::now() {
                tokio::time::sleep_until(until.into()).await;
            }
        }
        let n: usize = path
            .split_once("n=")
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(2);
        let body = if path.contains("n=") {
            vec![b'x'; n]
        } else {
            b"ok".to_vec()
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        let mut out = head.into_bytes();
        out.extend_from_slice(&body);
        if s.write_all(&out).await.is_err() {
            return;
        }
        if close {
            return;
        }
    }
}
