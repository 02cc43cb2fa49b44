//! The accept loop's inline path against raw clients: a request complete on arrival is answered from the
//! accept loop itself (seen through the handler's task id, which is then the listener's), and every way of
//! leaving that path — keep-alive, pipelining, a handler that waits, a partial head, a body, a large
//! response, a client that gives up — carries on in a connection task with the same behaviour. Also
//! `defer_accept`, and the multi-threaded runtime, which never serves inline.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http_util::*;
use ordo_serve::http::{Handler, Limits, Request, Response};
use tokio::io::AsyncReadExt;
use tokio::task::Id;

/// A request's path, and the task its handler started and finished in.
type Seen = (String, Option<Id>, Option<Id>);

/// Records the task each request started and finished in; `?sleep=MS` waits, `?big=N` answers N bytes.
#[derive(Clone, Default)]
struct Probe {
    seen: Arc<Mutex<Vec<Seen>>>,
    dropped: Arc<AtomicUsize>,
}

/// Counts futures dropped before they finished.
struct DropGuard(Arc<AtomicUsize>, bool);
impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Handler for Probe {
    fn handle(&self, req: Request) -> impl Future<Output = Response> + Send + 'static {
        let probe = self.clone();
        async move {
            assert!(req.path != "/panic", "a handler bug");
            let mut guard = DropGuard(probe.dropped.clone(), false);
            let started = tokio::task::try_id();
            if let Some(ms) = req.query_param("sleep").and_then(|v| v.parse().ok()) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            guard.1 = true;
            let finished = tokio::task::try_id();
            probe
                .seen
                .lock()
                .unwrap()
                .push((req.path.clone(), started, finished));
            match req.query_param("big").and_then(|v| v.parse::<usize>().ok()) {
                Some(n) => Response::bytes(200, "application/octet-stream", vec![b'x'; n].into()),
                None => Response::text(
                    200,
                    &format!(
                        "{} {} body={}",
                        req.method,
                        req.path,
                        String::from_utf8_lossy(&req.body)
                    ),
                ),
            }
        }
    }
}

impl Probe {
    /// (path, started in the listener's task, finished in the listener's task) for each request.
    fn inline_flags(&self, listener: Id) -> Vec<(String, bool, bool)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(p, s, f)| (p.clone(), *s == Some(listener), *f == Some(listener)))
            .collect()
    }
}

fn deferred() -> Limits {
    Limits {
        defer_accept: true,
        ..Limits::default()
    }
}

/// Starts the listener with `defer_accept` and lets it set the option before any client connects (a
/// connection completed before that is accepted at once, possibly before its request arrives).
async fn start_deferred(p: &Probe) -> Server {
    let s = start(p.clone(), deferred()).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    s
}

fn req(path: &str, extra: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

#[tokio::test]
async fn complete_request_is_answered_by_the_accept_loop() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    let r = one_shot_and_close(s.addr, &req("/one", "Connection: close\r\n")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "GET /one body=\n");
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.header("content-length"), Some("15"));
    assert_eq!(
        p.inline_flags(s.task.id()),
        vec![("/one".to_string(), true, true)]
    );
    // HEAD: the length, no body
    let mut c = Client::connect(s.addr).await;
    c.send(b"HEAD /h HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await;
    let r = c.try_response(true).await.unwrap();
    assert_eq!(r.header("content-length"), Some("14"));
    assert!(r.body.is_empty());
    assert!(c.closed().await);
}

#[tokio::test]
async fn keep_alive_and_pipelining_continue_in_a_task() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    let mut c = Client::connect(s.addr).await;
    // two pipelined requests in one write: the first answered inline, the second from the task's buffer
    let mut batch = req("/a", "");
    batch.extend(req("/b", ""));
    c.send(&batch).await;
    assert_eq!(c.response().await.text(), "GET /a body=\n");
    assert_eq!(c.response().await.text(), "GET /b body=\n");
    c.send(&req("/c", "")).await;
    let r = c.response().await;
    assert_eq!(r.text(), "GET /c body=\n");
    assert_eq!(r.header("connection"), None);
    let flags = p.inline_flags(s.task.id());
    assert_eq!(
        flags,
        vec![
            ("/a".to_string(), true, true),
            ("/b".to_string(), false, false),
            ("/c".to_string(), false, false),
        ]
    );
}

#[tokio::test]
async fn input_after_a_close_request_is_drained_not_reset() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    let mut c = Client::connect(s.addr).await;
    let mut batch = req("/last", "Connection: close\r\n");
    batch.extend(req("/ignored", ""));
    c.send(&batch).await;
    let r = c.response().await;
    assert_eq!(r.text(), "GET /last body=\n");
    assert!(
        c.closed().await,
        "closed after the response, without a reset"
    );
    assert_eq!(p.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_handler_that_waits_finishes_in_a_task() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    let r = one_shot_and_close(s.addr, &req("/slow?sleep=30", "Connection: close\r\n")).await;
    assert_eq!(r.text(), "GET /slow body=\n");
    // polled first in the accept loop, resumed (and finished) in the connection's task
    assert_eq!(
        p.inline_flags(s.task.id()),
        vec![("/slow".to_string(), true, false)]
    );
}

#[tokio::test]
async fn a_client_that_leaves_while_its_handler_waits_drops_the_request() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&req("/gone?sleep=20000", "")).await;
    // the handler starts (inline) and waits in the connection's task; then the client leaves
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(c);
    let t0 = std::time::Instant::now();
    while p.dropped.load(Ordering::SeqCst) == 0 && t0.elapsed() < WAIT {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        p.dropped.load(Ordering::SeqCst),
        1,
        "the waiting handler was dropped"
    );
    assert!(p.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn partial_heads_bodies_and_large_responses_leave_the_inline_path() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    // a head in two pieces
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET /split HTTP/1.1\r\nHo").await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    c.send(b"st: t\r\n\r\n").await;
    assert_eq!(c.response().await.text(), "GET /split body=\n");
    // a body
    c.send(b"POST /post HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        .await;
    assert_eq!(c.response().await.text(), "POST /post body=hello\n");
    // a response larger than one coalesced write
    let r = one_shot_and_close(s.addr, &req("/big?big=200000", "Connection: close\r\n")).await;
    assert_eq!(r.body.len(), 200_000);
    assert!(r.body.iter().all(|&b| b == b'x'));
    let flags = p.inline_flags(s.task.id());
    assert_eq!(flags.len(), 3);
    assert!(
        !flags[0].1,
        "a partial head is finished by the task: {flags:?}"
    );
    assert!(
        !flags[1].1,
        "a request with a body goes to the task: {flags:?}"
    );
    assert!(
        flags[2].1,
        "the large response's handler ran inline: {flags:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_runtime_threads_never_serve_inline() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    for i in 0..5 {
        let r = one_shot_and_close(s.addr, &req(&format!("/m{i}"), "Connection: close\r\n")).await;
        assert_eq!(r.status, 200);
    }
    let flags = p.inline_flags(s.task.id());
    assert_eq!(flags.len(), 5);
    assert!(flags.iter().all(|(_, s, f)| !s && !f), "{flags:?}");
}

#[tokio::test]
async fn defer_accept_holds_a_silent_client_in_the_kernel() {
    let quick = Limits {
        head_timeout: Duration::from_millis(100),
        ..Limits::default()
    };
    // without it: accepted at once, closed after head_timeout
    let s = start(Probe::default(), quick.clone()).await;
    let mut c = Client::connect(s.addr).await;
    let t0 = std::time::Instant::now();
    assert!(c.closed().await);
    // (a loose bound: the contrast is the deferred listener below, silent for 4× head_timeout)
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    // with it: the kernel has not passed the connection on after 4× head_timeout (it waits ~1 s for data)
    let s = start(
        Probe::default(),
        Limits {
            defer_accept: true,
            ..quick
        },
    )
    .await;
    // (the option is set when the accept loop starts: let it)
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut c = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(400), c.read(&mut buf)).await;
    assert!(read.is_err(), "nothing from the server yet: {read:?}");
}

#[tokio::test]
async fn a_panicking_handler_costs_its_connection_not_the_accept_loop() {
    let p = Probe::default();
    let s = start_deferred(&p).await;
    for _ in 0..2 {
        let mut c = Client::connect(s.addr).await;
        c.send(&req("/panic", "Connection: close\r\n")).await;
        assert!(
            c.try_response(false).await.is_none(),
            "no answer from a panicked handler"
        );
        let r = one_shot_and_close(s.addr, &req("/after", "Connection: close\r\n")).await;
        assert_eq!(r.text(), "GET /after body=\n");
    }
    assert!(!s.task.is_finished(), "the accept loop is still running");
}
