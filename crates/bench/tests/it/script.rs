//! wrk's own example scripts (examples/bench/wrk, copied unchanged from wrk 4.1.0) through `ordo bench -s`
//! against a recording server: the requests it saw (methods, paths, headers, bodies, counts) are what each
//! script asks for; where wrk is installed, wrk runs the same scripts against the same server and its
//! requests have the same shape.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo_bench::{BenchConfig, BenchReport, CancelToken, Script, Stop};

/// One request as the server read it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct Recorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections still being served.
    open: Arc<AtomicUsize>,
}

impl Recorder {
    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// What was seen once every connection is closed (at most 5 s): a client that exits with requests
    /// in flight (wrk at the end of its duration) has them recorded here, not in the next test's take.
    fn take_when_closed(&self) -> Vec<Seen> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.take()
    }
}

/// A keep-alive HTTP/1.1 server answering pipelined requests in order; `/authenticate` answers with an
/// `X-Token` header (auth.lua).
fn recorder() -> Recorder {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let open = Arc::new(AtomicUsize::new(0));
    let (s, o) = (seen.clone(), open.clone());
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { continue };
            let (s, o) = (s.clone(), o.clone());
            o.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                serve(c, s);
                o.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    Recorder { addr, seen, open }
}

fn serve(mut c: TcpStream, seen: Arc<Mutex<Vec<Seen>>>) {
    let _ = c.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        loop {
            let mut h = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut h);
            let Ok(httparse::Status::Complete(len)) = req.parse(&buf) else {
                break;
            };
            let headers: Vec<(String, String)> = req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_string(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            let body_len: usize = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() < len + body_len {
                break;
            }
            let r = Seen {
                method: req.method.unwrap_or("").to_string(),
                path: req.path.unwrap_or("").to_string(),
                headers,
                body: buf[len..len + body_len].to_vec(),
            };
            let token = if r.path == "/authenticate" {
                "X-Token: secret\r\n"
            } else {
                ""
            };
            out.extend_from_slice(
                format!("HTTP/1.1 200 OK\r\n{token}Content-Length: 2\r\n\r\nok").as_bytes(),
            );
            seen.lock().unwrap().push(r);
            buf.drain(..len + body_len);
        }
        if !out.is_empty() && c.write_all(&out).is_err() {
            return;
        }
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/bench/wrk")
        .join(name)
}

/// `ordo bench -t threads -c conns -n n -s name URL -- args`, `done` called after the report.
fn ordo(s: &Recorder, name: &str, threads: usize, conns: usize, n: u64) -> BenchReport {
    let mut c = BenchConfig::new(&s.url()).unwrap();
    c.threads = threads;
    c.connections = conns;
    c.stop = Stop::Requests(n);
    c.timeout = Duration::from_secs(5);
    c.script = Some(Script::load(&example(name), vec![]).unwrap());
    let (report, done) = ordo_bench::run_scripted(c, CancelToken::new(), |_| {}).unwrap();
    done.unwrap().call(&report).unwrap();
    report
}

/// wrk with one thread and connection for a second, when it is installed.
fn wrk(s: &Recorder, name: &str) -> Option<Vec<Seen>> {
    wrk_for(s, name, "1s")
}

fn wrk_for(s: &Recorder, name: &str, duration: &str) -> Option<Vec<Seen>> {
    let out = std::process::Command::new("wrk")
        .args(["-t1", "-c1", "-d", duration, "-s"])
        .arg(example(name))
        .arg(s.url())
        .output()
        .ok()?;
    assert!(out.status.success(), "wrk {name}: {out:?}");
    Some(s.take_when_closed())
}

#[test]
fn the_examples_are_wrks_unchanged() {
    let dir = Path::new("/usr/share/doc/wrk/examples/scripts");
    let names = [
        "addr.lua",
        "auth.lua",
        "counter.lua",
        "delay.lua",
        "pipeline.lua",
        "post.lua",
        "report.lua",
        "setup.lua",
        "stop.lua",
    ];
    for n in names {
        let ours = std::fs::read(example(n)).unwrap();
        if let Ok(theirs) = std::fs::read(dir.join(n)) {
            assert_eq!(ours, theirs, "{n} differs from wrk's");
        }
    }
}

/// post.lua: every request a POST with the script's body and Content-Type.
fn check_post(seen: &[Seen]) {
    assert!(!seen.is_empty());
    for r in seen {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/");
        assert_eq!(r.body, b"foo=bar&baz=quux");
        assert_eq!(
            r.header("Content-Type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(r.header("Content-Length"), Some("16"));
    }
}

#[test]
fn post() {
    let s = recorder();
    let r = ordo(&s, "post.lua", 2, 4, 40);
    assert_eq!(r.summary.complete, 40);
    let seen = s.take();
    assert_eq!(seen.len(), 40);
    check_post(&seen);
    if let Some(w) = wrk(&s, "post.lua") {
        check_post(&w);
    }
}

/// counter.lua, one thread: /1, /2, … with `X-Counter` equal to the number (the first thread's first
/// request() call is wrk's check of the request, so its first request sent is /1, in wrk as here).
fn check_counter(seen: &[Seen]) {
    assert!(!seen.is_empty());
    for (i, r) in seen.iter().enumerate() {
        assert_eq!(r.path, format!("/{}", i + 1));
        assert_eq!(r.header("X-Counter"), Some(format!("{}", i + 1).as_str()));
        assert_eq!(r.method, "GET");
    }
}

#[test]
fn counter() {
    let s = recorder();
    let r = ordo(&s, "counter.lua", 1, 1, 25);
    assert_eq!(r.summary.complete, 25);
    check_counter(&s.take());
    if let Some(w) = wrk(&s, "counter.lua") {
        check_counter(&w);
    }
    // two threads: one counter each (wrk's note), the second thread's starting at /0. An open loop gives
    // each connection exactly half of the slots however the threads are scheduled.
    let mut c = BenchConfig::new(&s.url()).unwrap();
    c.threads = 2;
    c.connections = 2;
    c.stop = Stop::Requests(40);
    c.pacing = ordo_bench::Pacing::Open { rate: 2000.0 };
    c.script = Some(Script::load(&example("counter.lua"), vec![]).unwrap());
    let r = ordo_bench::run(c, CancelToken::new()).unwrap();
    assert_eq!(r.summary.complete, 40);
    let mut paths: Vec<String> = s.take().into_iter().map(|r| r.path).collect();
    paths.sort();
    let mut want: Vec<String> = (1..=20).chain(0..20).map(|i| format!("/{i}")).collect();
    want.sort();
    assert_eq!(paths, want);
}

/// auth.lua: the first request fetches the token, every later one carries it to /resource.
fn check_auth(seen: &[Seen]) {
    assert!(seen.len() >= 2);
    assert_eq!(seen[0].path, "/authenticate");
    assert_eq!(seen[0].header("X-Token"), None);
    for r in &seen[1..] {
        assert_eq!(r.path, "/resource");
        assert_eq!(r.header("X-Token"), Some("secret"));
    }
}

#[test]
fn auth() {
    let s = recorder();
    let r = ordo(&s, "auth.lua", 1, 1, 10);
    assert_eq!(r.summary.complete, 10);
    check_auth(&s.take());
    if let Some(w) = wrk(&s, "auth.lua") {
        check_auth(&w);
    }
}

/// pipeline.lua: three requests per request string, in order, each answered and counted.
fn check_pipeline(seen: &[Seen], whole: bool) {
    let paths = ["/?foo", "/?bar", "/?baz"];
    assert!(seen.len() >= 3);
    if whole {
        assert_eq!(seen.len() % 3, 0);
    }
    for (i, r) in seen.iter().enumerate() {
        assert_eq!(r.path, paths[i % 3]);
    }
}

#[test]
fn pipeline() {
    let s = recorder();
    // -n counts request strings (one slot each), every request of them is counted
    let r = ordo(&s, "pipeline.lua", 1, 1, 10);
    assert_eq!(r.summary.complete, 30);
    assert_eq!(r.summary.failed.total, 0);
    let seen = s.take();
    assert_eq!(seen.len(), 30);
    check_pipeline(&seen, true);
    if let Some(w) = wrk(&s, "pipeline.lua") {
        // wrk's last string may be cut off at the end of its run
        check_pipeline(&w, false);
    }
}

#[test]
fn stop() {
    let s = recorder();
    // each thread stops itself after its 100th response: one connection per thread sends exactly 100
    let mut c = BenchConfig::new(&s.url()).unwrap();
    c.threads = 2;
    c.connections = 2;
    c.stop = Stop::Duration(Duration::from_secs(20));
    c.script = Some(Script::load(&example("stop.lua"), vec![]).unwrap());
    let t0 = std::time::Instant::now();
    let r = ordo_bench::run(c, CancelToken::new()).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "the threads stopped"
    );
    assert_eq!(r.summary.complete, 200);
    assert_eq!(s.take().len(), 200);
    // wrk's thread stops at its 100th response too (3 s: room for 100 on a loaded machine)
    if let Some(w) = wrk_for(&s, "stop.lua", "3s") {
        assert_eq!(w.len(), 100);
    }
}

#[test]
fn delay_setup_report_and_addr() {
    let s = recorder();
    // delay.lua: 10–50 ms before each request
    let r = ordo(&s, "delay.lua", 1, 1, 5);
    assert_eq!(r.summary.complete, 5);
    assert!(r.elapsed_s >= 0.045, "{}", r.elapsed_s);
    assert_eq!(s.take().len(), 5);
    // setup.lua: thread:set before init, thread:get in done (it prints per-thread counts)
    let r = ordo(&s, "setup.lua", 2, 2, 20);
    assert_eq!(r.summary.complete, 20);
    assert_eq!(s.take().len(), 20);
    // report.lua: done() reads latency percentiles (`%d` of them works in Lua 5.4)
    let r = ordo(&s, "report.lua", 1, 2, 20);
    assert_eq!(r.summary.complete, 20);
    assert_eq!(s.take().len(), 20);
    // addr.lua: wrk.lookup + wrk.connect in setup, thread.addr set to a reachable address
    let r = ordo(&s, "addr.lua", 2, 2, 10);
    assert_eq!(r.summary.complete, 10);
    assert_eq!(s.take().len(), 10);
}

#[test]
fn a_hook_error_fails_the_run_with_the_script_line() {
    let s = recorder();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.lua");
    std::fs::write(
        &p,
        "local n = 0\nfunction response()\n  n = n + 1\n  if n == 3 then error('third') end\nend\n",
    )
    .unwrap();
    let mut c = BenchConfig::new(&s.url()).unwrap();
    c.stop = Stop::Requests(50);
    c.connections = 1;
    c.script = Some(Script::load(&p, vec![]).unwrap());
    let e = ordo_bench::run(c, CancelToken::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.lua:4:") && e.contains("third"), "{e}");
    assert!(s.take().len() < 50);
}
