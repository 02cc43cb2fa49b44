//! Overload control through a running server (issue 12, and issue 10's class isolation): `workers =
//! "auto"` with a limit per route shown in /status and /metrics; a class's standing queue shed with 503
//! `standing_queue` and Retry-After, counted by reason; a worker reserved to a class serving it at once
//! while another class floods the server.

use std::time::{Duration, Instant};

use crate::ctl_util::{busy, get, queued, start, wait_until};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_workers_show_a_limit_per_route_in_status_and_metrics() {
    let h = start(
        r#"
workers = "auto"
[limiter]
min = 2
initial = 6
min_samples = 4
window = "20ms"
[[routes]]
prefix = "/api"
synthetic = { capacity = [{ at = "0s", servers = 4 }] }
[[routes]]
prefix = "/static"
synthetic = {}
limiter = { limit = 3 }
"#,
    )
    .await;
    let a = h.local_addr();
    let s = h.status();
    assert_eq!(s["workers_setting"], "auto");
    let lanes = s["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 2);
    assert_eq!(lanes[0]["route"], "/api");
    assert_eq!(lanes[0]["algorithm"], "gradient");
    assert_eq!(lanes[0]["probing"], true, "starts with a baseline probe");
    assert_eq!(lanes[0]["limit"], 2);
    assert_eq!(lanes[1]["route"], "/static");
    assert_eq!(
        (lanes[1]["algorithm"].as_str(), lanes[1]["limit"].as_u64()),
        (Some("fixed"), Some(3))
    );
    assert_eq!(s["workers"], 5, "the sum of the lanes' limits");
    // 12 clients for a while: the probe completes and the limit leaves it.
    let clients: Vec<_> = (0..12)
        .map(|_| {
            tokio::spawn(async move {
                let t = Instant::now();
                let mut n = 0;
                while t.elapsed() < Duration::from_millis(800) {
                    assert_eq!(get(a, "/api/sleep?ms=10").await.status, 200);
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut done = 0;
    for c in clients {
        done += c.await.unwrap();
    }
    assert!(done > 50, "{done} requests");
    let s = h.status();
    let api = &s["lanes"][0];
    assert_eq!(api["probing"], false, "{s}");
    let base = api["baseline_ms"].as_f64().unwrap();
    assert!((10.0..40.0).contains(&base), "baseline {base} ms");
    let limit = api["limit"].as_u64().unwrap();
    assert!((2..=1000).contains(&limit), "{limit}");
    let m = h.metrics_text();
    for want in [
        format!("ordo_serve_concurrency_limit{{route=\"/api\"}} {limit}\n"),
        "ordo_serve_concurrency_limit{route=\"/static\"} 3\n".to_string(),
        "ordo_serve_concurrency_inflight{route=\"/api\"} 0\n".to_string(),
    ] {
        assert!(m.contains(&want), "{want}\n{m}");
    }
    let baseline: f64 = m
        .lines()
        .find_map(|l| {
            l.strip_prefix("ordo_serve_concurrency_baseline_rtt_seconds{route=\"/api\"} ")
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no baseline gauge\n{m}"));
    assert!(
        (base / 1e3 - baseline).abs() < 1e-3,
        "{baseline} vs {base} ms"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_class_queue_is_shed_with_503_standing_queue() {
    let h = start(
        r#"
workers = 1
retry_after = "2s"
[[classes]]
name = "low"
codel = { target = "5ms", interval = "50ms" }
"#,
    )
    .await;
    let a = h.local_addr();
    // Eight requests of 60 ms each through one worker: the queue stands for far longer than 50 ms.
    let reqs: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(5 * i)).await;
                get(a, "/sleep?ms=60").await
            })
        })
        .collect();
    let mut shed = 0;
    let mut ok = 0;
    for r in reqs {
        let r = r.await.unwrap();
        match r.status {
            200 => ok += 1,
            503 => {
                assert!(r.body.contains("standing_queue"), "{}", r.body);
                assert_eq!(r.header("retry-after"), Some("2"));
                shed += 1;
            }
            s => panic!("status {s}: {r:?}"),
        }
    }
    assert!(shed >= 1 && ok >= 2, "ok {ok}, shed {shed}");
    let m = h.metrics_text();
    let want =
        format!("ordo_serve_rejected_total{{class=\"low\",reason=\"standing_queue\"}} {shed}");
    assert!(m.contains(&want), "{want}\n{m}");
    h.shutdown().await.unwrap();
}

/// fcfs, 3 workers, one reserved to "top": "low" floods with long requests, yet a "top" request is
/// dispatched at once — it does not wait behind the queued "low" requests nor for a "low" to finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_worker_serves_its_class_through_a_flood() {
    let h = start(
        r#"
workers = 3
policy = "fcfs"
[headers]
queue_wait = true
[[classes]]
name = "low"
[[classes]]
name = "top"
reserved_workers = 1
[[rules]]
class = "top"
path_prefix = "/top"
"#,
    )
    .await;
    let a = h.local_addr();
    let flood: Vec<_> = (0..10)
        .map(|_| tokio::spawn(async move { get(a, "/sleep?ms=400").await.status }))
        .collect();
    wait_until(WAIT, || busy(&h) == 2 && queued(&h) == 8).await;
    let t = Instant::now();
    let r = get(a, "/top/sleep?ms=1").await;
    assert_eq!(r.status, 200);
    // dispatched at once: it never queued (a wall-clock bound would only add flakiness on a loaded machine)
    assert_eq!(
        r.header("x-ordo-queue-wait-us"),
        Some("0"),
        "{r:?} {:?}",
        t.elapsed()
    );
    assert_eq!(h.status()["classes"][1]["reserved_workers"], 1);
    for f in flood {
        assert_eq!(f.await.unwrap(), 200);
    }
    h.shutdown().await.unwrap();
}
