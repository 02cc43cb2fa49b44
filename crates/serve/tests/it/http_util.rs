//! Shared harness of the http_* integration tests: start `run_listener` on 127.0.0.1:0 with a handler, and a
//! raw HTTP/1.1 client that reads responses byte-exactly (so framing bugs show up), every read bounded in time.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ordo_serve::http::{Handler, Limits};
use ordo_serve::listen::run_listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Upper bound for any single wait in these tests.
pub const WAIT: Duration = Duration::from_secs(5);

pub struct Server {
    pub addr: SocketAddr,
    pub shutdown: watch::Sender<bool>,
    pub task: JoinHandle<std::io::Result<()>>,
}

pub async fn start<H: Handler>(handler: H, limits: Limits) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(run_listener(
        listener,
        Arc::new(handler),
        Arc::new(limits),
        rx,
    ));
    Server {
        addr,
        shutdown: tx,
        task,
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub async fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).await.unwrap();
    }

    /// Reads more bytes; false on EOF or error.
    async fn fill(&mut self, wait: Duration) -> bool {
        let mut tmp = [0u8; 65536];
        match tokio::time::timeout(wait, self.stream.read(&mut tmp)).await {
            Ok(Ok(n)) if n > 0 => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Ok(_) => false,
            Err(_) => panic!("timed out waiting for the server"),
        }
    }

    /// Reads one response; `head_only` for answers to HEAD. Panics on timeout, `None` on EOF before a head.
    pub async fn try_response(&mut self, head_only: bool) -> Option<Resp> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            if !self.fill(WAIT).await {
                return None;
            }
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).unwrap();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
        let status: u16 = status_line[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once(':').unwrap();
                (k.to_string(), v.trim().to_string())
            })
            .collect();
        let mut r = Resp {
            status,
            headers,
            body: Vec::new(),
        };
        if head_only || status == 304 || status == 204 || status < 200 {
            return Some(r);
        }
        if let Some(cl) = r.header("content-length") {
            let n: usize = cl.parse().unwrap();
            while self.buf.len() < n {
                assert!(self.fill(WAIT).await, "EOF inside a Content-Length body");
            }
            r.body = self.buf.drain(..n).collect();
        } else if r
            .header("transfer-encoding")
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
        {
            loop {
                let line_end = loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        break i;
                    }
                    assert!(self.fill(WAIT).await, "EOF inside a chunked body");
                };
                let size =
                    usize::from_str_radix(std::str::from_utf8(&self.buf[..line_end]).unwrap(), 16)
                        .unwrap();
                self.buf.drain(..line_end + 2);
                while self.buf.len() < size + 2 {
                    assert!(self.fill(WAIT).await, "EOF inside a chunk");
                }
                r.body.extend(self.buf.drain(..size));
                assert_eq!(&self.buf[..2], b"\r\n");
                self.buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
        } else {
            // close-delimited
            while self.fill(WAIT).await {}
            r.body = std::mem::take(&mut self.buf);
        }
        Some(r)
    }

    pub async fn response(&mut self) -> Resp {
        self.try_response(false)
            .await
            .expect("connection closed before a response")
    }

    /// True when the server closes the connection (EOF) within `WAIT`, with no further bytes.
    pub async fn closed(&mut self) -> bool {
        let mut tmp = [0u8; 1024];
        match tokio::time::timeout(WAIT, self.stream.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) => self.buf.is_empty(),
            Ok(Ok(_)) => false,
            Err(_) => panic!("connection still open after {WAIT:?}"),
        }
    }
}

/// An upstream that reads each request head on a keep-alive connection (bodies are not expected) and
/// answers 200 with `answer(head)` as the body.
pub async fn head_upstream(
    answer: impl Fn(&[u8]) -> Vec<u8> + Send + Sync + 'static,
) -> SocketAddr {
    let answer = Arc::new(answer);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 8192];
                loop {
                    while find(&buf, b"\r\n\r\n").is_none() {
                        match tokio::time::timeout(WAIT, s.read(&mut tmp)).await {
                            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&tmp[..n]),
                            _ => return,
                        }
                    }
                    let end = find(&buf, b"\r\n\r\n").unwrap() + 4;
                    let head: Vec<u8> = buf.drain(..end).collect();
                    let body = answer(&head);
                    let mut out =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                            .into_bytes();
                    out.extend_from_slice(&body);
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// What an in-test upstream reads before it answers: bytes up to and including the end of a request head
/// (None when the connection ends or fails first).
pub async fn read_request_head(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    while find(&buf, b"\r\n\r\n").is_none() {
        match s.read(&mut tmp).await {
            Ok(n) if n > 0 => buf.extend_from_slice(&tmp[..n]),
            _ => return None,
        }
    }
    Some(buf)
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Sends `raw` on a new connection and reads one response, then asserts the server closed the connection.
pub async fn one_shot_and_close(addr: SocketAddr, raw: &[u8]) -> Resp {
    let mut c = Client::connect(addr).await;
    c.send(raw).await;
    let r = c.response().await;
    assert!(c.closed().await, "connection not closed after {}", r.status);
    r
}

pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}
