//! Upstream groups (issue 20): a full `ordo serve` proxying to three in-process upstreams that are killed
//! (their listener and connections dropped: connections are refused) and started again on the same port.
//! Failover sends a request that could not reach one upstream to another, whatever its method; consecutive
//! failures eject an upstream until its time is up; active checks mark a hung upstream down; hashing keeps
//! a client on one upstream; the retry budget caps the extra requests a failing group gets; with every
//! upstream out the answer is 503 at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::ctl_util::{Captured, get, request, start, start_threads, wait_until};

/// How a test upstream answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// This status, with its name as the body.
    Status(u16),
    /// `/health` never answers; other paths 200.
    HangHealth,
    /// 200 after `ms` of work, at most `capacity` at once: requests beyond it wait inside the upstream, in
    /// arrival order (a thread pool with a queue, where no class policy acts).
    Busy { capacity: usize, ms: u64 },
}

/// An upstream server on a fixed port that can be killed and started again.
struct Up {
    name: String,
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    mode: Mode,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Requests inside now (served or waiting for `Busy` capacity), and the most there were at once.
    inside: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    /// `Busy` capacity.
    slots: Arc<tokio::sync::Semaphore>,
}

impl Up {
    async fn new(name: &str, mode: Mode) -> Up {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut u = Up {
            name: name.into(),
            addr: l.local_addr().unwrap(),
            hits: Arc::new(AtomicUsize::new(0)),
            mode,
            task: None,
            inside: Arc::new(AtomicUsize::new(0)),
            peak: Arc::new(AtomicUsize::new(0)),
            slots: Arc::new(tokio::sync::Semaphore::new(match mode {
                Mode::Busy { capacity, .. } => capacity,
                _ => 0,
            })),
        };
        u.run(l);
        u
    }

    fn run(&mut self, l: TcpListener) {
        let (name, hits, mode) = (self.name.clone(), self.hits.clone(), self.mode);
        let (inside, peak, slots) = (self.inside.clone(), self.peak.clone(), self.slots.clone());
        self.task = Some(tokio::spawn(async move {
            // the connections die with the server task (the set is dropped with it)
            let mut conns = JoinSet::new();
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let (name, hits) = (name.clone(), hits.clone());
                let (inside, peak, slots) = (inside.clone(), peak.clone(), slots.clone());
                conns.spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().ok())?
                            })
                            .unwrap_or(0);
                        while buf.len() < end + 4 + len {
                            match s.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..end + 4 + len);
                        let status = match mode {
                            Mode::HangHealth if head.starts_with("GET /health") => {
                                tokio::time::sleep(Duration::from_secs(60)).await;
                                return;
                            }
                            Mode::HangHealth => 200,
                            Mode::Status(st) => st,
                            Mode::Busy { ms, .. } => {
                                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                peak.fetch_max(now, Ordering::SeqCst);
                                let Ok(_slot) = slots.acquire().await else {
                                    return;
                                };
                                tokio::time::sleep(Duration::from_millis(ms)).await;
                                inside.fetch_sub(1, Ordering::SeqCst);
                                200
                            }
                        };
                        if !head.starts_with("GET /health") {
                            hits.fetch_add(1, Ordering::SeqCst);
                        }
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nX-Up: {name}\r\n\r\n{name}",
                            name.len()
                        );
                        if s.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }));
    }

    /// Stop listening and drop every connection: new connections are refused.
    async fn kill(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }

    /// Listen again on the same port.
    async fn restart(&mut self) {
        let l = TcpListener::bind(self.addr).await.unwrap();
        self.run(l);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The most requests inside at once since the last call.
    fn take_peak(&self) -> usize {
        self.peak
            .swap(self.inside.load(Ordering::SeqCst), Ordering::SeqCst)
    }
}

fn config(ups: &[&Up], extra: &str) -> String {
    let list: Vec<String> = ups.iter().map(|u| format!("\"{}\"", u.addr)).collect();
    format!(
        "[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [{}]\nconnect_timeout = \"500ms\"\nread_timeout = \"2s\"\n{extra}\n",
        list.join(", ")
    )
}

fn upstream_state(status: &serde_json::Value, i: usize) -> String {
    status["upstreams"][0]["upstreams"][i]["state"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

/// Kill one of three upstreams under load and bring it back: no client sees an error (the requests that
/// met the dead one went to another), it is ejected after `max_fails` failures, and it takes requests
/// again once its ejection is over.
#[tokio::test]
async fn one_of_three_killed_and_restored_costs_clients_nothing() {
    let mut a = Up::new("a", Mode::Status(200)).await;
    let b = Up::new("b", Mode::Status(200)).await;
    let c = Up::new("c", Mode::Status(200)).await;
    let h = start(&config(
        &[&a, &b, &c],
        "max_fails = 2\neject_for = \"400ms\"\nslow_start = \"0s\"",
    ))
    .await;
    let addr = h.local_addr();
    for _ in 0..30 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert!(a.hits() >= 9, "round robin reached a: {}", a.hits());
    a.kill().await;
    let killed_at = a.hits();
    let mut errors = 0;
    for _ in 0..60 {
        // POST too: nothing reached the dead upstream, so it may go to another
        let method = if errors % 2 == 0 { "POST" } else { "GET" };
        if request(addr, method, "/", &[]).await.status != 200 {
            errors += 1;
        }
    }
    assert_eq!(
        errors, 0,
        "client-visible errors while an upstream was down"
    );
    assert_eq!(
        upstream_state(&h.status(), 0),
        "ejected",
        "{}",
        h.status()["upstreams"]
    );
    assert!(h.status()["upstreams"][0]["upstreams"][0]["ejections"].as_u64() >= Some(1));
    a.restart().await;
    // back after its ejection (400 ms, doubled at most once more if a probe met it still dead)
    let back = Instant::now();
    let mut n = 0;
    while a.hits() == killed_at {
        assert!(back.elapsed() < Duration::from_secs(10), "never returned");
        assert_eq!(get(addr, "/").await.status, 200);
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(n > 0);
    assert_eq!(upstream_state(&h.status(), 0), "up");
    h.shutdown().await.unwrap();
}

/// One class's results under a flood: answers by status, and the slowest.
#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    shed: usize,
    other: usize,
    slowest: Duration,
}

/// `clients` clients of `class` sending requests back to back until `until`.
fn flood(
    addr: SocketAddr,
    class: &'static str,
    clients: usize,
    until: Instant,
) -> Vec<tokio::task::JoinHandle<Tally>> {
    (0..clients)
        .map(|_| {
            tokio::spawn(async move {
                let mut t = Tally::default();
                while Instant::now() < until {
                    let t0 = Instant::now();
                    let r = request(addr, "GET", "/", &[("X-Class", class)]).await;
                    t.slowest = t.slowest.max(t0.elapsed());
                    match r.status {
                        200 => t.ok += 1,
                        503 => t.shed += 1,
                        _ => t.other += 1,
                    }
                }
                t
            })
        })
        .collect()
}

async fn sum(tasks: Vec<tokio::task::JoinHandle<Tally>>) -> Tally {
    let mut all = Tally::default();
    for t in tasks {
        let t = t.await.unwrap();
        all.ok += t.ok;
        all.shed += t.shed;
        all.other += t.other;
        all.slowest = all.slowest.max(t.slowest);
    }
    all
}

fn lane_limit(h: &ordo_serve::ServerHandle) -> (u64, f64) {
    let s = h.status();
    (
        s["lanes"][0]["limit"].as_u64().unwrap_or(0),
        s["lanes"][0]["share"].as_f64().unwrap_or(-1.0),
    )
}

/// Issue 20 item 3, "the shedding follows the classes": three upstreams that serve 2 requests at once
/// each (6 workers in front of them), two killed while a top and a low class flood the route. The lane is
/// scaled to the third of its workers the survivor can take (2), so nothing queues inside the survivor:
/// the requests over its capacity wait in ordo, where the priority policy serves the top class first and
/// the queue timeout sheds the low class (503). When the two come back, the lane has its 6 workers again
/// and the low class is served.
#[tokio::test]
async fn when_capacity_drops_the_lowest_class_is_shed_and_the_top_class_keeps_its_share() {
    let busy = Mode::Busy {
        capacity: 2,
        ms: 40,
    };
    let a = Up::new("a", busy).await;
    let mut b = Up::new("b", busy).await;
    let mut c = Up::new("c", busy).await;
    let h = start(&format!(
        "workers = 6\npolicy = \"priority\"\nqueue_timeout = \"250ms\"\ndefault_class = \"low\"\n\
         [[classes]]\nname = \"top\"\npriority = 10\n[[classes]]\nname = \"low\"\n\
         [[rules]]\nclass = \"top\"\nheader = {{ name = \"X-Class\", value = \"top\" }}\n{}",
        config(
            &[&a, &b, &c],
            "max_fails = 1\neject_for = \"1500ms\"\nslow_start = \"0s\"",
        )
    ))
    .await;
    let addr = h.local_addr();
    assert_eq!(lane_limit(&h), (6, 1.0));
    b.kill().await;
    c.kill().await;
    // the requests that meet b and c fail over to a and eject them (max_fails = 1)
    for _ in 0..6 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    wait_until(Duration::from_secs(5), || {
        let s = h.status();
        upstream_state(&s, 1) == "ejected" && upstream_state(&s, 2) == "ejected"
    })
    .await;
    let ejected = Instant::now();
    wait_until(Duration::from_secs(2), || lane_limit(&h) == (2, 0.333)).await;
    a.take_peak();
    // 2 top clients and 12 low ones, back to back, for 800 ms (well within the ejection)
    let until = Instant::now() + Duration::from_millis(800);
    let top = flood(addr, "top", 2, until);
    let low = flood(addr, "low", 12, until);
    let (top, low) = (sum(top).await, sum(low).await);
    assert!(
        ejected.elapsed() < Duration::from_millis(1500),
        "the ejection outlasted the flood ({:?}): the test machine is too slow",
        ejected.elapsed()
    );
    // the survivor never had more than its capacity: nothing queued where no policy acts
    let peak = a.take_peak();
    println!("2 of 3 out: top {top:?}, low {low:?}, at most {peak} inside the survivor");
    assert!(peak <= 2, "{peak} requests inside the survivor at once");
    // the top class lost nothing; the low class was shed
    assert_eq!((top.shed, top.other), (0, 0), "top {top:?}, low {low:?}");
    assert!(top.ok >= 4, "top {top:?}");
    assert!(low.shed > 0 && low.other == 0, "low {low:?}");
    assert!(
        top.slowest < Duration::from_millis(250),
        "a top request waited {:?} (the queue timeout is 250 ms)",
        top.slowest
    );
    // recovery: back after the ejection, the lane has its 6 workers again and the low class is served
    b.restart().await;
    c.restart().await;
    wait_until(Duration::from_secs(5), || lane_limit(&h) == (6, 1.0)).await;
    let until = Instant::now() + Duration::from_millis(300);
    let low = sum(flood(addr, "low", 4, until)).await;
    assert!(low.ok > 0 && low.shed == 0 && low.other == 0, "low {low:?}");
    h.shutdown().await.unwrap();
}

/// Active checks: an upstream whose /health hangs is marked down after `fall` checks and gets no more
/// requests (without checks a hung upstream would hold requests until read_timeout).
#[tokio::test]
async fn active_checks_mark_a_hung_upstream_down() {
    let hung = Up::new("hung", Mode::HangHealth).await;
    let ok = Up::new("ok", Mode::Status(200)).await;
    let h = start(&config(
        &[&hung, &ok],
        "[routes.proxy.health_check]\npath = \"/health\"\ninterval = \"50ms\"\ntimeout = \"50ms\"\nfall = 2\nrise = 1",
    ))
    .await;
    wait_until(Duration::from_secs(5), || {
        upstream_state(&h.status(), 0) == "down"
    })
    .await;
    assert_eq!(upstream_state(&h.status(), 1), "up");
    let before = hung.hits();
    for _ in 0..20 {
        let r = get(h.local_addr(), "/").await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    }
    assert_eq!(hung.hits(), before, "a down upstream got requests");
    h.shutdown().await.unwrap();
}

/// Consistent hashing on a header: every user stays on one upstream.
#[tokio::test]
async fn hashing_keeps_a_client_on_one_upstream() {
    let (a, b, c) = (
        Up::new("a", Mode::Status(200)).await,
        Up::new("b", Mode::Status(200)).await,
        Up::new("c", Mode::Status(200)).await,
    );
    let h = start(&config(
        &[&a, &b, &c],
        "balance = \"hash\"\nhash_key = \"header:X-User\"",
    ))
    .await;
    let mut used = std::collections::HashSet::new();
    for user in 0..12 {
        let u = user.to_string();
        let first = request(h.local_addr(), "GET", "/", &[("X-User", &u)])
            .await
            .body;
        for _ in 0..4 {
            let again = request(h.local_addr(), "GET", "/", &[("X-User", &u)])
                .await
                .body;
            assert_eq!(again, first, "user {user} moved");
        }
        used.insert(first);
    }
    assert!(used.len() >= 2, "12 users all on one upstream: {used:?}");
    h.shutdown().await.unwrap();
}

/// Weighted round robin: weights 3:1 split the requests 3:1.
#[tokio::test]
async fn weights_split_the_requests() {
    let (a, b) = (
        Up::new("a", Mode::Status(200)).await,
        Up::new("b", Mode::Status(200)).await,
    );
    let toml = format!(
        "[[routes]]\nprefix = \"/\"\n[routes.proxy]\nupstreams = [{{ address = \"{}\", weight = 3 }}, \"{}\"]\n",
        a.addr, b.addr
    );
    let h = start(&toml).await;
    for _ in 0..80 {
        assert_eq!(get(h.local_addr(), "/").await.status, 200);
    }
    assert_eq!((a.hits(), b.hits()), (60, 20));
    h.shutdown().await.unwrap();
}

/// Every upstream answers 503 and `retry_on` names it: each request may go to another upstream, but the
/// retry budget (20% of requests, plus a reserve of 10) caps what the failing group is sent.
#[tokio::test]
async fn the_retry_budget_caps_extra_requests() {
    let (a, b, c) = (
        Up::new("a", Mode::Status(503)).await,
        Up::new("b", Mode::Status(503)).await,
        Up::new("c", Mode::Status(503)).await,
    );
    // max_fails = 0: no ejection, so every request reaches the group
    let h = start(&config(
        &[&a, &b, &c],
        "retry_on = [\"503\"]\ntries = 3\nmax_fails = 0",
    ))
    .await;
    let n = 200;
    for _ in 0..n {
        assert_eq!(get(h.local_addr(), "/").await.status, 503);
    }
    let sent = a.hits() + b.hits() + c.hits();
    assert!(sent > n + 10, "no retries at all: {sent}");
    assert!(
        sent <= n + n / 5 + 10,
        "{sent} upstream requests for {n}: the budget allows {}",
        n + n / 5 + 10
    );
    // a POST is never sent again after an answer
    let before = a.hits() + b.hits() + c.hits();
    assert_eq!(request(h.local_addr(), "POST", "/", &[]).await.status, 503);
    assert_eq!(a.hits() + b.hits() + c.hits(), before + 1);
    h.shutdown().await.unwrap();
}

/// The retry budget follows the classes: a low class flooding a failing group spends the budget only down
/// to half its reserve, so the top class's requests still get their retry.
#[tokio::test]
async fn the_retry_budget_keeps_retries_for_the_top_class() {
    let (a, b) = (
        Up::new("a", Mode::Status(503)).await,
        Up::new("b", Mode::Status(503)).await,
    );
    let h = start(&format!(
        "policy = \"priority\"\ndefault_class = \"low\"\n\
         [[classes]]\nname = \"top\"\npriority = 10\n[[classes]]\nname = \"low\"\n\
         [[rules]]\nclass = \"top\"\nheader = {{ name = \"X-Class\", value = \"top\" }}\n{}",
        config(&[&a, &b], "retry_on = [\"503\"]\ntries = 2\nmax_fails = 0")
    ))
    .await;
    let addr = h.local_addr();
    let hits = || a.hits() + b.hits();
    let n = 150;
    for _ in 0..n {
        let r = request(addr, "GET", "/", &[("X-Class", "low")]).await;
        assert_eq!(r.status, 503);
    }
    let low_retries = hits() - n;
    // each serving thread's reserve (10) spent only down to half, then 20% of the requests
    let threads = h.status()["accepted_per_thread"]
        .as_array()
        .map_or(1, Vec::len);
    assert!(
        low_retries > 5 && low_retries <= n / 5 + 5 * threads,
        "{low_retries} retries for {n} low requests on {threads} serving threads"
    );
    // every top request still gets its retry (each serving thread's budget holds at least 5 for it)
    let before = hits();
    for _ in 0..5 {
        let r = request(addr, "GET", "/", &[("X-Class", "top")]).await;
        assert_eq!(r.status, 503);
    }
    assert_eq!(hits() - before, 10, "5 top requests, each tried twice");
    h.shutdown().await.unwrap();
}

/// With every upstream out (ejected), the answer is 503 at once, not after connect timeouts.
#[tokio::test]
async fn every_upstream_out_is_503_at_once() {
    let mut a = Up::new("a", Mode::Status(200)).await;
    let mut b = Up::new("b", Mode::Status(200)).await;
    let h = start(&config(&[&a, &b], "max_fails = 1\neject_for = \"30s\"")).await;
    a.kill().await;
    b.kill().await;
    // the first request meets both dead (failover), which ejects both
    let r = get(h.local_addr(), "/").await;
    assert_eq!(r.status, 502, "{r:?}");
    let t = Instant::now();
    let r = get(h.local_addr(), "/").await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("no healthy upstream"), "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "took {:?}",
        t.elapsed()
    );
    let st = h.status();
    assert_eq!(
        (upstream_state(&st, 0), upstream_state(&st, 1)),
        ("ejected".into(), "ejected".into())
    );
    h.shutdown().await.unwrap();
}

/// A failure the request ends with is logged at WARN with its reason, also when it was tried on the
/// group's other upstreams first (logged at debug while another might answer): with one upstream, every
/// failure is such a one, and without this line the operator saw a 502 and no reason.
#[tokio::test]
async fn a_failure_the_request_ends_with_is_logged_with_its_reason() {
    let (log, _guard) = Captured::start();
    let mut a = Up::new("a", Mode::Status(200)).await;
    let mut b = Up::new("b", Mode::Status(200)).await;
    a.kill().await;
    b.kill().await;
    // one upstream, the default `tries` (3): nothing else to try after it
    let h = start_threads(&config(&[&a], ""), 1).await;
    let r = get(h.local_addr(), "/").await;
    assert_eq!(r.status, 502, "{r:?}");
    let lines = log.matching("no other upstream to try");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("WARN")
            && lines[0].contains(&a.addr.to_string())
            && lines[0].contains("502"),
        "{lines:?}"
    );
    assert!(lines[0].to_lowercase().contains("refused"), "{lines:?}");
    h.shutdown().await.unwrap();
    // two upstreams, both dead: one line, for the failure the request ended with
    let h = start_threads(&config(&[&a, &b], ""), 1).await;
    let r = get(h.local_addr(), "/").await;
    assert_eq!(r.status, 502, "{r:?}");
    assert_eq!(log.lines("no other upstream to try"), 2);
    assert_eq!(
        log.lines("trying another upstream"),
        0,
        "debug lines are not written at INFO"
    );
    h.shutdown().await.unwrap();
}

/// Upstream metrics: healthy and ejected gauges per route and upstream.
#[tokio::test]
async fn upstream_health_is_in_the_metrics() {
    let mut a = Up::new("a", Mode::Status(200)).await;
    let b = Up::new("b", Mode::Status(200)).await;
    let h = start(&config(&[&a, &b], "max_fails = 1\neject_for = \"30s\"")).await;
    a.kill().await;
    for _ in 0..4 {
        assert_eq!(get(h.local_addr(), "/").await.status, 200);
    }
    let m = get(h.admin_addr().unwrap(), "/metrics").await.body;
    let line =
        |name: &str, up: &Up| format!("ordo_serve_{name}{{route=\"/\",upstream=\"{}\"}}", up.addr);
    assert!(
        m.contains(&format!("{} 0", line("upstream_healthy", &a))),
        "{m}"
    );
    assert!(
        m.contains(&format!("{} 1", line("upstream_ejected", &a))),
        "{m}"
    );
    assert!(
        m.contains(&format!("{} 1", line("upstream_healthy", &b))),
        "{m}"
    );
    assert!(
        m.contains(&format!("{} 1", line("upstream_ejections", &a))),
        "{m}"
    );
    h.shutdown().await.unwrap();
}

/// An upstream that answers an upgrade with 101 and then echoes every byte back, upper-cased.
async fn upgrading_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
                assert!(head.contains("\r\nupgrade: websocket\r\n"), "{head}");
                assert!(head.contains("\r\nconnection: upgrade\r\n"), "{head}");
                assert!(head.contains("\r\nsec-websocket-key: abc\r\n"), "{head}");
                let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                // the 101, and something sent at once with it
                let _ = s
                    .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: xyz\r\n\r\nhello")
                    .await;
                let mut rest = buf[end..].to_vec();
                loop {
                    if !rest.is_empty() {
                        let up: Vec<u8> = rest.to_ascii_uppercase();
                        if s.write_all(&up).await.is_err() {
                            return;
                        }
                        rest.clear();
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => rest.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

/// An HTTP/1.1 upgrade through the proxy: the Upgrade pair and the WebSocket headers reach the upstream,
/// its 101 (with its own headers) reaches the client, and bytes then flow both ways — also the ones the
/// client sent right behind its request and the upstream right behind its 101.
#[tokio::test]
async fn an_upgrade_is_tunnelled_both_ways() {
    let up = upgrading_upstream().await;
    let h = start(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{up}\"], read_timeout = \"2s\" }}\n"
    ))
    .await;
    let mut s = tokio::net::TcpStream::connect(h.local_addr())
        .await
        .unwrap();
    s.write_all(b"GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: abc\r\nSec-WebSocket-Version: 13\r\n\r\nearly")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(got.windows(4).any(|w| w == b"\r\n\r\n") && got.ends_with(b"helloEARLY")) {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            String::from_utf8_lossy(&got)
        );
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(
        text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{text}"
    );
    let lower = text.to_ascii_lowercase();
    assert!(
        lower.contains("\r\nupgrade: websocket\r\n")
            && lower.contains("\r\nconnection: upgrade\r\n")
    );
    assert!(
        lower.contains("\r\nsec-websocket-accept: xyz\r\n"),
        "{text}"
    );
    for word in [&b"ping"[..], b"second message"] {
        s.write_all(word).await.unwrap();
        let mut back = vec![0u8; word.len()];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, word.to_ascii_uppercase());
    }
    h.shutdown().await.unwrap();
}

/// Python's `websockets` echo server (tests/data/ws_echo.py), or None (the test is skipped) when python3 or
/// the library is missing (./scripts/setup.sh installs it).
async fn ws_echo_server() -> Option<(tokio::process::Child, u16)> {
    match std::process::Command::new("python3")
        .args(["-c", "import websockets"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(_) => {
            println!("skipped: python3 has no websockets module (./scripts/setup.sh installs it)");
            return None;
        }
        Err(_) => {
            println!("skipped: python3 is not installed");
            return None;
        }
    }
    let mut server = tokio::process::Command::new("python3")
        .args([WS_ECHO, "server"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncBufReadExt::read_line(&mut out, &mut line),
    )
    .await
    .expect("the echo server starts")
    .unwrap();
    let port: u16 = line.trim().strip_prefix("ready ").unwrap().parse().unwrap();
    Some((server, port))
}

const WS_ECHO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ws_echo.py");

/// Runs tests/data/ws_echo.py with `args` (a client mode and its arguments), at most 60 s, and checks it
/// succeeded printing `want`.
async fn ws_echo_client(args: &[&str], want: &str) {
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .arg(WS_ECHO)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes")
    .unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success() && stdout.trim() == want,
        "client: {stdout} {}",
        String::from_utf8_lossy(&client.stderr)
    );
}

/// A real WebSocket client and server (Python's `websockets` library, installed by scripts/setup.sh):
/// 40 text and binary messages up to 70 KB echoed through ordo serve's proxy.
#[tokio::test]
async fn websocket_echo_through_the_proxy_with_a_real_client_library() {
    let Some((_server, port)) = ws_echo_server().await else {
        return;
    };
    let h = start(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"127.0.0.1:{port}\"] }}\n"
    ))
    .await;
    let url = format!("ws://{}/echo", h.local_addr());
    ws_echo_client(&["client", &url, "20"], "ok 40").await;
    h.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------------------
// WebSocket over HTTP/2 (RFC 8441): the `h2` crate's client, which speaks extended CONNECT, carrying
// WebSocket frames (RFC 6455, masked as a client must) written here; neither curl nor h2load can.

/// An h2c connection whose server announced SETTINGS_ENABLE_CONNECT_PROTOCOL (or not, after `wait`).
async fn h2_client(
    addr: SocketAddr,
    wait: Duration,
) -> (h2::client::SendRequest<bytes::Bytes>, bool) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = tokio::time::timeout(Duration::from_secs(5), h2::client::handshake(tcp))
        .await
        .expect("handshake in time")
        .expect("handshake");
    tokio::spawn(conn);
    let send = tokio::time::timeout(Duration::from_secs(5), send.ready())
        .await
        .unwrap()
        .unwrap();
    // the server's SETTINGS arrive with the handshake's first round trip
    let until = Instant::now() + wait;
    while !send.is_extended_connect_protocol_enabled() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let on = send.is_extended_connect_protocol_enabled();
    (send, on)
}

/// `:method CONNECT`, `:protocol` (None: a plain CONNECT to `authority`), `:scheme http`, `:path`.
fn connect(protocol: Option<&'static str>, path: &str) -> http::Request<()> {
    let b = http::Request::builder().method(http::Method::CONNECT);
    let b = match protocol {
        Some(p) => b
            .uri(format!("http://ws.test{path}"))
            .extension(h2::ext::Protocol::from_static(p))
            .header("sec-websocket-version", "13"),
        None => b.uri("ws.test:443"),
    };
    b.body(()).unwrap()
}

/// One masked client frame (RFC 6455 §5.2).
fn ws_frame(opcode: u8, payload: &[u8]) -> bytes::Bytes {
    let mut f = vec![0x80 | opcode];
    let n = payload.len();
    if n < 126 {
        f.push(0x80 | n as u8);
    } else if n <= 0xffff {
        f.push(0x80 | 126);
        f.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        f.push(0x80 | 127);
        f.extend_from_slice(&(n as u64).to_be_bytes());
    }
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f.into()
}

/// The server frames read off a stream's DATA (unmasked, RFC 6455 §5.1).
struct WsReader {
    body: h2::RecvStream,
    buf: Vec<u8>,
}

impl WsReader {
    /// The next whole frame: (opcode, payload); None when the stream ended first.
    async fn next(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if let Some((op, payload, used)) = parse_ws(&self.buf) {
                self.buf.drain(..used);
                return Some((op, payload));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.body.data())
                .await
                .expect("data in time")?
                .expect("stream not reset");
            let _ = self.body.flow_control().release_capacity(chunk.len());
            self.buf.extend_from_slice(&chunk);
        }
    }
}

fn parse_ws(b: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if b.len() < 2 {
        return None;
    }
    assert_eq!(b[1] & 0x80, 0, "a server frame is not masked");
    let (n, at) = match b[1] & 0x7f {
        126 => (
            u16::from_be_bytes(b.get(2..4)?.try_into().ok()?) as usize,
            4,
        ),
        127 => (
            u64::from_be_bytes(b.get(2..10)?.try_into().ok()?) as usize,
            10,
        ),
        n => (n as usize, 2),
    };
    let payload = b.get(at..at + n)?.to_vec();
    Some((b[0] & 0x0f, payload, at + n))
}

/// RFC 8441 through the proxy to Python's `websockets` server: the HTTP/2 client's extended CONNECT is
/// answered 200 (no Sec-WebSocket-Accept, no length), a text and a 70 KB binary message (more than a
/// stream window, so both directions wait for window) come back, and the close handshake ends the stream
/// both ways (END_STREAM).
#[tokio::test]
async fn websocket_over_http2_is_tunnelled_to_an_http1_upstream() {
    let Some((_server, port)) = ws_echo_server().await else {
        return;
    };
    let h = start(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"127.0.0.1:{port}\"], read_timeout = \"5s\" }}\n"
    ))
    .await;
    let (mut send, on) = h2_client(h.local_addr(), Duration::from_secs(5)).await;
    assert!(on, "SETTINGS_ENABLE_CONNECT_PROTOCOL announced");
    let (resp, mut up) = send
        .send_request(connect(Some("websocket"), "/echo"), false)
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), resp)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), 200, "{resp:?}");
    assert!(resp.headers().get("sec-websocket-accept").is_none());
    assert!(resp.headers().get("content-length").is_none());
    let mut down = WsReader {
        body: resp.into_body(),
        buf: Vec::new(),
    };
    up.send_data(ws_frame(1, b"hello over h2"), false).unwrap();
    assert_eq!(down.next().await, Some((1, b"hello over h2".to_vec())));
    let big: Vec<u8> = (0..70_000u32).map(|i| (i * 7 % 251) as u8).collect();
    up.send_data(ws_frame(2, &big), false).unwrap();
    let (op, back) = down.next().await.unwrap();
    assert_eq!((op, back.len()), (2, big.len()));
    assert!(back == big, "the binary message came back changed");
    // close (1000): the server answers it and closes its connection, which ends the stream's server side
    up.send_data(ws_frame(8, &1000u16.to_be_bytes()), false)
        .unwrap();
    let (op, code) = down.next().await.unwrap();
    assert_eq!((op, &code[..2]), (8, &1000u16.to_be_bytes()[..]));
    assert_eq!(down.next().await, None, "END_STREAM after the close");
    up.send_data(bytes::Bytes::new(), true).unwrap();
    h.shutdown().await.unwrap();
}

/// RFC 8441 with another implementation on the client side than the server's: Python's `h2` (hyper-h2) for
/// HTTP/2 and `websockets`' Sans-I/O protocol for the frames (tests/data/ws_echo.py `h2client`), through
/// ordo to the `websockets` echo server: 40 text and binary messages up to 70 KB (the client waits for
/// window as h2 tells it) and the close handshake, after which ordo ends the stream.
#[tokio::test]
async fn websocket_over_http2_with_python_h2_and_websockets() {
    match std::process::Command::new("python3")
        .args(["-c", "import h2"])
        .output()
    {
        Ok(o) if o.status.success() => {}
        _ => {
            println!("skipped: python3 has no h2 module (./scripts/setup.sh installs it)");
            return;
        }
    }
    let Some((_server, port)) = ws_echo_server().await else {
        return;
    };
    let h = start(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"127.0.0.1:{port}\"] }}\n"
    ))
    .await;
    let addr = h.local_addr();
    ws_echo_client(
        &[
            "h2client",
            &addr.ip().to_string(),
            &addr.port().to_string(),
            "/echo",
            "20",
        ],
        "ok 40 closed",
    )
    .await;
    h.shutdown().await.unwrap();
}

/// A browser's WebSocket over HTTP/2 (RFC 8441): headless Chromium loads a page over HTTPS (h2) from ordo,
/// whose script opens `wss://` to the same origin — Chromium sends it as an extended CONNECT on the h2
/// connection it already has, since ordo announces SETTINGS_ENABLE_CONNECT_PROTOCOL — proxied to Python's
/// `websockets` echo server; the page then reports the two echoed messages in a request the access log
/// shows. The access log also shows the WebSocket came over HTTP/2. Skipped, saying so, without Chromium
/// or the `websockets` module.
#[tokio::test]
async fn a_browser_websocket_over_http2_is_echoed_through_the_proxy() {
    if !ordo_testkit::chromium::available() {
        return;
    }
    let Some((_server, port)) = ws_echo_server().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("c.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.path().join("c.key"), ck.key_pair.serialize_pem()).unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(
        www.join("ws.html"),
        r#"<!doctype html><html><body><script>
const ws = new WebSocket("wss://" + location.host + "/echo");
const got = [];
ws.onopen = () => { ws.send("hello over h2"); ws.send("second"); };
ws.onmessage = (e) => {
  got.push(e.data);
  if (got.length == 2) { fetch("/done?" + encodeURIComponent(got.join("|"))); ws.close(); }
};
ws.onerror = () => fetch("/done?error");
</script></body></html>
"#,
    )
    .unwrap();
    let log = dir.path().join("access.log");
    let cfg_path = dir.path().join("ordo.toml");
    std::fs::write(
        &cfg_path,
        format!(
            "[access_log]\npath = {log:?}\nformat = \"json\"\nflush_interval = \"10ms\"\n\
             [[tls.certificates]]\ncert = \"c.crt\"\nkey = \"c.key\"\n\
             [[routes]]\nprefix = \"/echo\"\nproxy = {{ upstreams = [\"127.0.0.1:{port}\"] }}\n\
             [[routes]]\nprefix = \"/\"\nstatic = {{ root = {www:?} }}\n"
        ),
    )
    .unwrap();
    let h =
        crate::ctl_util::start_cfg(ordo_serve::ServeConfig::from_file(&cfg_path).unwrap()).await;
    let profile = tempfile::tempdir().unwrap();
    let mut chromium = ordo_testkit::chromium::command(profile.path());
    chromium.args([
        "--ignore-certificate-errors",
        // nothing but this server: every other name fails at once
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    ]);
    chromium.arg(format!(
        "https://localhost:{}/ws.html",
        h.local_addr().port()
    ));
    chromium
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // headless Chromium without --dump-dom keeps the page open: the test ends it (kill_on_drop)
    let _browser = tokio::process::Command::from(chromium)
        .kill_on_drop(true)
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(60);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        // the tunnel's line is written when it closes, which may come after the report
        let has = |p: &str| {
            lines
                .iter()
                .any(|v| v["target"].as_str().is_some_and(|t| t.starts_with(p)))
        };
        if has("/done?") && has("/echo") {
            break lines;
        }
        assert!(
            Instant::now() < deadline,
            "the page did not report within 60 s; access log: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let target = |prefix: &str| {
        lines
            .iter()
            .find(|v| v["target"].as_str().is_some_and(|t| t.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no {prefix} in the access log: {lines:?}"))
    };
    assert_eq!(
        target("/done?")["target"],
        "/done?hello%20over%20h2%7Csecond",
        "the page's report of what came back"
    );
    let ws = target("/echo");
    assert_eq!(ws["version"], "HTTP/2.0", "{ws}");
    assert_eq!(ws["status"], 101, "{ws}");
    assert!(
        ws["user_agent"]
            .as_str()
            .is_some_and(|u| u.contains("Chrome")),
        "{ws}"
    );
    h.shutdown().await.unwrap();
}

/// What cannot be tunnelled over HTTP/2 is refused with its status: a plain CONNECT (ordo is no forward
/// proxy) 405, another `:protocol` 501, a WebSocket on a route that is not a proxy 501, an upstream that
/// answers the handshake 200 instead of 101 → 502 (a 2xx would open the tunnel), and its 403 is passed on.
/// With `[http2] extended_connect = false` the setting is not announced.
#[tokio::test]
async fn http2_connects_that_cannot_be_tunnelled_are_refused() {
    let ok = Up::new("ok", Mode::Status(200)).await;
    let no = Up::new("no", Mode::Status(403)).await;
    let h = start(&format!(
        "[[routes]]\nprefix = \"/syn\"\nsynthetic = {{}}\n\
         [[routes]]\nprefix = \"/no\"\nproxy = {{ upstreams = [\"{}\"] }}\n\
         [[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{}\"] }}\n",
        no.addr, ok.addr
    ))
    .await;
    let (send, on) = h2_client(h.local_addr(), Duration::from_secs(5)).await;
    assert!(on);
    for (req, status) in [
        (connect(None, ""), 405),
        (connect(Some("connect-udp"), "/x"), 501),
        (connect(Some("websocket"), "/syn/x"), 501),
        (connect(Some("websocket"), "/x"), 502),
        (connect(Some("websocket"), "/no/x"), 403),
    ] {
        let mut ready = send.clone().ready().await.unwrap();
        let (resp, _up) = ready.send_request(req, false).unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(5), resp)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(resp.status(), status, "{resp:?}");
    }
    // the upstream that answered 200 to the handshake was asked once (a GET, so no failover to itself)
    assert_eq!(ok.hits(), 1);
    h.shutdown().await.unwrap();
    let h = start(&format!(
        "[http2]\nextended_connect = false\n[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{}\"] }}\n",
        ok.addr
    ))
    .await;
    let (_send, on) = h2_client(h.local_addr(), Duration::from_millis(300)).await;
    assert!(!on, "extended_connect = false announces nothing");
    h.shutdown().await.unwrap();
}

/// What a raw WebSocket upstream saw of one tunnel.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Its read side ended (the client's END_STREAM, or ordo closing the tunnel), after these bytes.
    Eof(Vec<u8>),
}

/// An upstream that answers the handshake with the right `Sec-WebSocket-Accept` (or `accept`, when given),
/// then echoes raw bytes until its read side ends, writes `bye` behind them, closes, and reports what it read.
async fn raw_ws_upstream(
    accept: Option<&'static str>,
) -> (SocketAddr, tokio::sync::mpsc::Receiver<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let key = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("sec-websocket-key")
                            .then(|| v.trim().to_string())
                    })
                    .expect("the proxy sends a key");
                let answer = match accept {
                    Some(a) => a.to_string(),
                    None => {
                        use base64::Engine;
                        let mut d =
                            ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
                        d.update(key.as_bytes());
                        d.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
                        base64::engine::general_purpose::STANDARD.encode(d.finish())
                    }
                };
                let resp = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {answer}\r\nX-App: yes\r\n\r\n"
                );
                if s.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
                let mut got = buf[end..].to_vec();
                loop {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            got.extend_from_slice(&chunk[..n]);
                            if s.write_all(&chunk[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = s.write_all(b"bye").await;
                let _ = tx.send(Seen::Eof(got)).await;
            });
        }
    });
    (addr, rx)
}

/// Starts a WebSocket over HTTP/2 to `path`: the response status, its body and the client's send side.
async fn open_h2_ws(
    send: &h2::client::SendRequest<bytes::Bytes>,
    path: &str,
) -> (
    u16,
    http::HeaderMap,
    h2::RecvStream,
    h2::SendStream<bytes::Bytes>,
) {
    let mut ready = send.clone().ready().await.unwrap();
    let (resp, up) = ready
        .send_request(connect(Some("websocket"), path), false)
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), resp)
        .await
        .unwrap()
        .unwrap();
    let status = resp.status().as_u16();
    let (parts, body) = resp.into_parts();
    (status, parts.headers, body, up)
}

/// Reads a stream's DATA until it ends: Ok(bytes) on END_STREAM, Err(bytes) on a reset.
async fn drain(body: &mut h2::RecvStream) -> Result<Vec<u8>, Vec<u8>> {
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), body.data())
            .await
            .expect("the stream ends in time")
        {
            None => return Ok(got),
            Some(Ok(b)) => {
                let _ = body.flow_control().release_capacity(b.len());
                got.extend_from_slice(&b);
            }
            Some(Err(_)) => return Err(got),
        }
    }
}

/// The ends of an HTTP/2 tunnel: the client's END_STREAM is a half-close (the upstream reads its end and
/// can still answer: `bye` arrives, then END_STREAM); RST_STREAM closes the upstream connection; a tunnel
/// idle for the route's `read_timeout` is reset and its upstream closed; an upstream whose
/// Sec-WebSocket-Accept does not match the key the proxy sent is a 502.
#[tokio::test]
async fn http2_tunnels_end_by_end_stream_reset_or_idle_limit() {
    let (good, mut seen) = raw_ws_upstream(None).await;
    let (bad, _) = raw_ws_upstream(Some("d3JvbmcgYWNjZXB0IHZhbHVlIQ==")).await;
    let h = start(&format!(
        "[[routes]]\nprefix = \"/bad\"\nproxy = {{ upstreams = [\"{bad}\"] }}\n\
         [[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{good}\"], read_timeout = \"400ms\" }}\n"
    ))
    .await;
    let (send, _) = h2_client(h.local_addr(), Duration::from_secs(5)).await;
    // half-close: END_STREAM with the last bytes
    let (status, headers, mut body, mut up) = open_h2_ws(&send, "/a").await;
    assert_eq!(status, 200);
    assert_eq!(
        headers.get("x-app").unwrap(),
        "yes",
        "the upstream's fields"
    );
    up.send_data(bytes::Bytes::from_static(b"ping"), true)
        .unwrap();
    assert_eq!(drain(&mut body).await, Ok(b"pingbye".to_vec()));
    let got = tokio::time::timeout(Duration::from_secs(5), seen.recv()).await;
    assert_eq!(got.unwrap(), Some(Seen::Eof(b"ping".to_vec())));
    // RST_STREAM: the upstream's connection is closed (well before the idle limit)
    let (status, _, mut body, mut up) = open_h2_ws(&send, "/b").await;
    assert_eq!(status, 200);
    up.send_data(bytes::Bytes::from_static(b"x"), false)
        .unwrap();
    let mut first = Vec::new();
    while first.is_empty() {
        let b = body.data().await.unwrap().unwrap();
        let _ = body.flow_control().release_capacity(b.len());
        first.extend_from_slice(&b);
    }
    assert_eq!(first, b"x");
    let t0 = Instant::now();
    up.send_reset(h2::Reason::CANCEL);
    let got = tokio::time::timeout(Duration::from_secs(5), seen.recv()).await;
    assert_eq!(got.unwrap(), Some(Seen::Eof(b"x".to_vec())));
    assert!(
        t0.elapsed() < Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    // idle: nothing moves for read_timeout → the stream is reset and the upstream closed
    let (status, _, mut body, _up) = open_h2_ws(&send, "/c").await;
    assert_eq!(status, 200);
    let t0 = Instant::now();
    assert_eq!(drain(&mut body).await, Err(Vec::new()), "reset, not ended");
    let idle = t0.elapsed();
    assert!(
        idle >= Duration::from_millis(350) && idle < Duration::from_secs(3),
        "{idle:?}"
    );
    let got = tokio::time::timeout(Duration::from_secs(5), seen.recv()).await;
    assert_eq!(got.unwrap(), Some(Seen::Eof(Vec::new())));
    // a wrong Sec-WebSocket-Accept
    let (status, _, _, _) = open_h2_ws(&send, "/bad/x").await;
    assert_eq!(status, 502);
    h.shutdown().await.unwrap();
}
