//! The Lua policy: `pick(heads)` decides which class's head is served next; a failing script falls back to
//! the oldest head and is counted, never stalling the queue.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::ctl_util::{busy, get, queued, start, wait_until};

fn config(dir: &std::path::Path, script: &str) -> String {
    let p = dir.join("pick.lua");
    std::fs::write(&p, script).unwrap();
    format!(
        r#"
workers = 1
policy = "lua"
policy_script = "{}"
[[classes]]
name = "regular"
[[classes]]
name = "bid"
[[rules]]
class = "bid"
path_prefix = "/bid"
"#,
        p.display()
    )
}

/// Occupy the single worker, queue `paths` in order, and return the order in which they completed.
async fn completion_order(
    h: &ordo_serve::ServerHandle,
    paths: &[&'static str],
) -> Vec<&'static str> {
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=300").await });
    wait_until(Duration::from_secs(10), || busy(h) == 1).await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let order = order.clone();
        let p = *p;
        tasks.push(tokio::spawn(async move {
            let r = get(a, p).await;
            assert_eq!(r.status, 200, "{r:?}");
            order.lock().unwrap().push(p);
        }));
        wait_until(Duration::from_secs(10), || queued(h) == i as u64 + 1).await;
    }
    assert_eq!(blocker.await.unwrap().status, 200);
    for t in tasks {
        t.await.unwrap();
    }
    order.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_pick_serves_bids_first() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        r#"
function pick(heads)
  for _, h in ipairs(heads) do
    if h.class == "bid" then return "bid" end
  end
  return heads[1].class
end
"#,
    ))
    .await;
    let order = completion_order(
        &h,
        &["/r1?ms=20", "/r2?ms=20", "/bid/1?ms=20", "/bid/2?ms=20"],
    )
    .await;
    assert_eq!(
        order,
        ["/bid/1?ms=20", "/bid/2?ms=20", "/r1?ms=20", "/r2?ms=20"]
    );
    assert_eq!(h.status()["lua_errors"], 0);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_pick_falls_back_to_oldest_head() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        "function pick(heads) error('broken policy') end\n",
    ))
    .await;
    let order = completion_order(&h, &["/r1?ms=10", "/bid/1?ms=10", "/r2?ms=10"]).await;
    assert_eq!(order, ["/r1?ms=10", "/bid/1?ms=10", "/r2?ms=10"]);
    assert!(h.status()["lua_errors"].as_u64().unwrap() >= 3);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runaway_script_is_stopped_by_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        "function pick(heads) while true do end end\n",
    ))
    .await;
    let order = completion_order(&h, &["/r1?ms=1", "/bid/1?ms=1"]).await;
    assert_eq!(order, ["/r1?ms=1", "/bid/1?ms=1"]);
    assert!(h.status()["lua_errors"].as_u64().unwrap() >= 2);
    h.shutdown().await.unwrap();
}
