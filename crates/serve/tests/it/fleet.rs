//! Fleet mode against a real `redis-server` (skipped, with the reason printed, where it is not installed):
//! three instances in front of one backend of fixed capacity hold the class weights at the backend when
//! the balancer sends each class to a different instance (and do not without fleet mode), hold one global
//! rate limit together, and keep serving — with one line logged each way — while Redis is killed and
//! restarted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo_serve::ServerHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::ctl_util::{Captured, start, wait_until};
use crate::http_util::{Client, get};

/// A `redis-server` of this test's own on a free loopback port, killed when dropped.
struct Redis {
    port: u16,
    child: Option<tokio::process::Child>,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

async fn pong(port: u16) -> bool {
    let Ok(Ok(mut s)) = tokio::time::timeout(
        Duration::from_millis(200),
        TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    else {
        return false;
    };
    if s.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(
        tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await,
        Ok(Ok(n)) if buf[..n].starts_with(b"+PONG")
    )
}

impl Redis {
    /// Starts one on a free port; None (with the reason printed) when redis-server is not installed.
    async fn start() -> Option<Redis> {
        let mut r = Redis {
            port: free_port(),
            child: None,
        };
        match r.spawn().await {
            Ok(()) => Some(r),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("SKIPPED: redis-server is not installed (scripts/setup.sh installs it)");
                None
            }
            Err(e) => panic!("redis-server did not start: {e}"),
        }
    }

    /// (Re)starts the server on its port and waits until it answers PING.
    async fn spawn(&mut self) -> std::io::Result<()> {
        let port = self.port.to_string();
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--loglevel", "warning"])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        let start = Instant::now();
        while !pong(self.port).await {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server on port {port} does not answer"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// The application: at most `capacity` requests served at once (a FIFO semaphore; the rest wait inside
/// it), each taking `service`; answers `/<class>/...` and counts completions per class while `measure`
/// is set.
struct Backend {
    addr: SocketAddr,
    measure: Arc<AtomicBool>,
    done: Arc<Mutex<HashMap<String, u64>>>,
}

async fn backend(capacity: usize, service: Duration) -> Backend {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let sem = Arc::new(tokio::sync::Semaphore::new(capacity));
    let measure = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(HashMap::new()));
    let (m, d) = (measure.clone(), done.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let (sem, m, d) = (sem.clone(), m.clone(), d.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                loop {
                    let end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match s.read(&mut tmp).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&tmp[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let class = head
                        .split_whitespace()
                        .nth(1)
                        .and_then(|p| p.split('/').nth(1))
                        .unwrap_or("")
                        .to_string();
                    {
                        let _permit = sem.acquire().await.unwrap();
                        tokio::time::sleep(service).await;
                    }
                    if m.load(Ordering::SeqCst) {
                        *d.lock().unwrap().entry(class).or_insert(0) += 1;
                    }
                    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if s.write_all(resp).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Backend {
        addr,
        measure,
        done,
    }
}

const CLASSES: [(&str, u32); 3] = [("gold", 4), ("silver", 2), ("bronze", 1)];

/// An instance in front of `upstream` with the classes 4:2:1 (by path) and `extra` (a `[fleet]` table).
async fn instance(upstream: SocketAddr, workers: usize, extra: &str) -> ServerHandle {
    let mut toml = format!("workers = {workers}\npolicy = \"wfq\"\n");
    for (c, w) in CLASSES {
        toml.push_str(&format!(
            "[[classes]]\nname = \"{c}\"\nweight = {w}\n\
             [[rules]]\nclass = \"{c}\"\npath_prefix = \"/{c}\"\n"
        ));
    }
    toml.push_str(&format!(
        "[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{upstream}\"] }}\n{extra}"
    ));
    start(&toml).await
}

/// Every answer the clients got: when its request was sent, and its status.
#[derive(Clone, Default)]
struct Answers(Arc<Mutex<Vec<(Instant, u16)>>>);

impl Answers {
    fn counts(&self) -> HashMap<u16, u64> {
        let mut out = HashMap::new();
        for (_, s) in self.0.lock().unwrap().iter() {
            *out.entry(*s).or_insert(0) += 1;
        }
        out
    }

    fn total(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// What one GCRA (`interval`, `burst`) would admit of these requests, at the times they were sent.
    fn ideal(&self, interval: Duration, burst: u32) -> u64 {
        let mut sent: Vec<Instant> = self.0.lock().unwrap().iter().map(|(t, _)| *t).collect();
        sent.sort();
        let Some(&start) = sent.first() else {
            return 0;
        };
        let (interval, tolerance) = (interval, interval * (burst - 1));
        let mut tat = Duration::ZERO;
        let mut admitted = 0;
        for t in sent {
            let now = t - start;
            let at = tat.max(now);
            if now + tolerance >= at {
                tat = at + interval;
                admitted += 1;
            }
        }
        admitted
    }
}

/// `conns` keep-alive clients each asking `addr` for `path` in a loop until `stop`; records the answers
/// (and fails on a broken connection).
fn clients(
    addr: SocketAddr,
    path: &'static str,
    conns: usize,
    pause: Duration,
    stop: Arc<AtomicBool>,
    answers: Answers,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..conns)
        .map(|_| {
            let (stop, answers) = (stop.clone(), answers.clone());
            tokio::spawn(async move {
                let mut c = Client::connect(addr).await;
                while !stop.load(Ordering::SeqCst) {
                    let sent = Instant::now();
                    c.send(&get(path)).await;
                    let r = c.response().await;
                    answers.0.lock().unwrap().push((sent, r.status));
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                }
            })
        })
        .collect()
}

/// Each class's share of what the backend completed while measuring, with three instances — instance i
/// receiving only class i — in fleet mode over `fleet` (with `prefix` for its keys), or without it.
async fn shares(fleet: Option<&Redis>, prefix: &str) -> Vec<f64> {
    const CAPACITY: usize = 14;
    let b = backend(CAPACITY, Duration::from_millis(25)).await;
    let extra = fleet.map_or(String::new(), |r| {
        format!(
            "[fleet]\nredis = \"{}\"\nfleet_workers = {CAPACITY}\nkey_prefix = \"{prefix}\"\n\
             sync_interval = \"100ms\"\ntimeout = \"1s\"\n",
            r.url()
        )
    });
    let mut servers = Vec::new();
    for _ in CLASSES {
        servers.push(instance(b.addr, CAPACITY, &extra).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Answers::default();
    let mut tasks = Vec::new();
    for ((class, _), s) in CLASSES.iter().zip(&servers) {
        let path: &'static str = match *class {
            "gold" => "/gold/x",
            "silver" => "/silver/x",
            _ => "/bronze/x",
        };
        tasks.extend(clients(
            s.local_addr(),
            path,
            20,
            Duration::ZERO,
            stop.clone(),
            answers.clone(),
        ));
    }
    if fleet.is_some() {
        // every instance holds its lease: 8, 4 and 2 workers of the 14
        wait_until(Duration::from_secs(10), || {
            servers.iter().zip([8, 4, 2]).all(|(s, w)| {
                s.metrics_text()
                    .lines()
                    .filter(|l| l.starts_with("ordo_serve_fleet_lease{"))
                    .any(|l| l.ends_with(&format!(" {w}")))
                    && s.status()["workers"] == w
            })
        })
        .await;
    }
    // settled (the first leases' overshoot served), then measured
    tokio::time::sleep(Duration::from_millis(500)).await;
    // at least 2 s and 600 completions (a loaded machine serves fewer per second), at most 8 s
    b.measure.store(true, Ordering::SeqCst);
    let t = Instant::now();
    let measured = || b.done.lock().unwrap().values().sum::<u64>();
    while t.elapsed() < Duration::from_secs(2)
        || (measured() < 600 && t.elapsed() < Duration::from_secs(8))
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.measure.store(false, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("clients end")
            .expect("no client failed");
    }
    let st = answers.counts();
    assert_eq!(st.keys().copied().collect::<Vec<_>>(), vec![200], "{st:?}");
    for s in servers {
        s.shutdown().await.unwrap();
    }
    let done = b.done.lock().unwrap().clone();
    let total: u64 = done.values().sum();
    assert!(total >= 300, "too few completions to measure: {done:?}");
    let shares: Vec<f64> = CLASSES
        .iter()
        .map(|(c, _)| done.get(*c).copied().unwrap_or(0) as f64 / total as f64)
        .collect();
    eprintln!("completed per class: {done:?}, shares {shares:?}");
    shares
}

#[tokio::test]
async fn class_weights_hold_at_the_backend_across_instances() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let with = shares(Some(&redis), "shares:").await;
    for ((c, w), got) in CLASSES.iter().zip(&with) {
        let want = f64::from(*w) / 7.0;
        assert!(
            (got - want).abs() <= 0.05 * want,
            "{c}: share {got:.4} with fleet mode, want {want:.4} ± 5%: {with:?}"
        );
    }
    // without fleet mode each instance fills the backend with its own 14 workers: about a third each
    let without = shares(None, "").await;
    assert!(
        without[0] < 0.45 && without[2] > 0.25,
        "without fleet mode the weights should not hold: {without:?}"
    );
}

#[tokio::test]
async fn one_rate_limit_holds_over_three_instances() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    // 100/s for everyone (one key: the class) with a burst of 20 (so the gaps between arrivals are not
    // lost), each instance offered about 2× the rate
    let toml = format!(
        "[[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n\
         [rate_limit]\nrate = \"100/s\"\nburst = 20\nkey = \"class\"\n\
         [fleet]\nredis = \"{}\"\nkey_prefix = \"rl:\"\ntimeout = \"1s\"\n",
        redis.url()
    );
    // (one of them on two serving threads: the Redis connection is shared across their runtimes)
    let mut servers = vec![crate::ctl_util::start_threads(&toml, 2).await];
    for _ in 0..2 {
        servers.push(start(&toml).await);
    }
    wait_until(Duration::from_secs(10), || {
        servers
            .iter()
            .all(|s| s.status()["fleet"]["connected"] == true)
    })
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Answers::default();
    let mut tasks = Vec::new();
    let t0 = Instant::now();
    for s in &servers {
        tasks.extend(clients(
            s.local_addr(),
            "/x",
            3,
            Duration::from_millis(10),
            stop.clone(),
            answers.clone(),
        ));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("clients end")
            .expect("no client failed");
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let st = answers.counts();
    let ok = st.get(&200).copied().unwrap_or(0) as f64;
    let limited = st.get(&429).copied().unwrap_or(0);
    // never more than the limit allows in the time; as much as one GCRA would have admitted of the same
    // requests at the times they were sent (on a loaded machine the clients pause, and a pause longer
    // than the burst's 200 ms is credit lost for any limiter)
    let most = 20.0 + 100.0 * elapsed;
    let ideal = answers.ideal(Duration::from_millis(10), 20) as f64;
    eprintln!("{elapsed:.2} s: {st:?}, at most {most:.0}, one GCRA would admit {ideal}");
    assert!(
        ok <= most * 1.05,
        "admitted {ok} in {elapsed:.2} s: over the limit ({most:.0}): {st:?}"
    );
    assert!(
        (ok - ideal).abs() <= 0.05 * ideal,
        "admitted {ok}, one GCRA would have admitted {ideal} ± 5%: {st:?}"
    );
    assert!(
        limited as f64 > ok,
        "the load was not over the limit: {st:?}"
    );
    assert_eq!(st.len(), 2, "only 200 and 429: {st:?}");
    for s in &servers {
        let m = s.metrics_text();
        assert!(m.contains("ordo_serve_fleet_connected 1"), "{m}");
        assert!(
            m.contains("ordo_serve_fleet_local_decisions_total 0"),
            "{m}"
        );
    }
    for s in servers {
        s.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn requests_keep_flowing_while_redis_is_down_and_it_comes_back() {
    let Some(mut redis) = Redis::start().await else {
        return;
    };
    let (log, _guard) = Captured::start();
    let toml = format!(
        "workers = 8\n\
         [[routes]]\nprefix = \"/\"\nsynthetic = {{}}\n\
         [rate_limit]\nrate = \"100000/s\"\nburst = 1000\n\
         [fleet]\nredis = \"{}\"\nkey_prefix = \"down:\"\nfleet_workers = 8\nsync_interval = \"50ms\"\n\
         timeout = \"1s\"\n",
        redis.url()
    );
    let a = start(&toml).await;
    let b = start(&toml).await;
    let leased = |s: &ServerHandle| !s.status()["fleet"]["lease"].is_null();
    wait_until(Duration::from_secs(10), || leased(&a) && leased(&b)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Answers::default();
    let mut tasks = Vec::new();
    for s in [&a, &b] {
        tasks.extend(clients(
            s.local_addr(),
            "/sleep?ms=2",
            4,
            Duration::ZERO,
            stop.clone(),
            answers.clone(),
        ));
    }
    let served = || answers.total();
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.kill().await;
    let down_at = served();
    // both fall back: the configured workers, local rate-limit decisions, one line each
    wait_until(Duration::from_secs(10), || {
        [&a, &b].iter().all(|s| {
            s.status()["fleet"]["connected"] == false && s.status()["fleet"]["lease"].is_null()
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        served() > down_at + 50,
        "requests stopped while Redis was down"
    );
    let m = a.metrics_text();
    assert!(m.contains("ordo_serve_fleet_connected 0"), "{m}");
    assert!(
        !m.contains("ordo_serve_fleet_local_decisions_total 0"),
        "{m}"
    );
    assert_eq!(a.status()["workers"], 8);
    assert_eq!(
        log.lines("fleet: Redis unreachable"),
        2,
        "one line per instance, however many requests and syncs failed"
    );
    // back on the same port: both reconnect, say so once, and lease again
    redis.spawn().await.unwrap();
    wait_until(Duration::from_secs(10), || {
        [&a, &b].iter().all(|s| {
            let m = s.metrics_text();
            m.contains("ordo_serve_fleet_connected 1")
                && m.contains("ordo_serve_fleet_reconnects_total 1")
                && leased(s)
        })
    })
    .await;
    let back = served();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        served() > back + 50,
        "requests stopped after Redis came back"
    );
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("clients end")
            .expect("no client failed");
    }
    let st = answers.counts();
    assert_eq!(
        st.keys().copied().collect::<Vec<_>>(),
        vec![200],
        "no failed request: {st:?}"
    );
    assert_eq!(log.lines("fleet: Redis answers again"), 2);
    assert_eq!(log.lines("fleet: Redis unreachable"), 2);
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

#[test]
fn a_bad_fleet_table_names_file_line_and_key() {
    let err = |text: &str| match ordo_serve::ServeConfig::from_toml_str(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    let e = err("[fleet]\nredis = \"redis://127.0.0.1/\"\nfleet_workers = 0\n");
    assert!(
        e.contains("bad.toml:3: fleet.fleet_workers: must be ≥ 1, got 0"),
        "{e}"
    );
    let e = err("workers = \"auto\"\n[fleet]\nredis = \"redis://127.0.0.1/\"\nfleet_workers = 8\n");
    assert!(
        e.contains("bad.toml:4: fleet.fleet_workers: needs a fixed number of `workers`"),
        "{e}"
    );
    let e = err("[fleet]\nredis = \"http://user:pw@h/\"\n");
    assert!(
        e.contains("bad.toml:2: fleet.redis: `http://user:***@h/` is not a Redis URL"),
        "{e}"
    );
    let e = err("[fleet]\nfleet_workers = 4\n");
    assert!(e.contains("fleet.redis: is required"), "{e}");
    let e = err("[fleet]\nredis = \"redis://h/\"\nsync_interval = \"2m\"\n");
    assert!(
        e.contains("bad.toml:3: fleet.sync_interval: must be between 10ms and 1m, got 2m"),
        "{e}"
    );
    let e = err("[fleet]\nredis = \"redis://h/\"\nshards = 3\n");
    assert!(e.contains("shards"), "{e}");
}
