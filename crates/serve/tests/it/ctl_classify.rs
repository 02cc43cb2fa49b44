//! Routing and classification: every rule kind, rule order, the default class, the Lua hook, size hints.

use crate::ctl_util;

use crate::ctl_util::{get, request, start};

const RULES: &str = r#"
workers = 8
[headers]
class = true
queue_wait = true

[[classes]]
name = "other"
[[classes]]
name = "bid"
[[classes]]
name = "img"
[[classes]]
name = "num"
[[classes]]
name = "post"
[[classes]]
name = "paid"
[[classes]]
name = "vip"
[[classes]]
name = "heavy"
[[classes]]
name = "local"
[[classes]]
name = "remote"

[[rules]]
class = "bid"
path_prefix = "/bid"
[[rules]]
class = "img"
path_glob = "/img/*.png"
[[rules]]
class = "num"
path_regex = "^/n/[0-9]+$"
[[rules]]
class = "post"
method = "post"
[[rules]]
class = "paid"
header = { name = "X-Tier", value = "paid" }
[[rules]]
class = "vip"
cookie = { name = "tier", regex = "^vip" }
[[rules]]
class = "heavy"
query = { name = "user", value = "heavy" }
[[rules]]
class = "remote"
client = "10.0.0.0/8"
path_prefix = "/where"
[[rules]]
class = "local"
client = "127.0.0.0/8"
path_prefix = "/where"

[[routes]]
prefix = "/"
synthetic = {}
"#;

async fn class_of(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> String {
    let r = request(addr, method, path, headers).await;
    assert_eq!(r.status, 200, "{method} {path}: {r:?}");
    r.header("x-ordo-class").expect("class header").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_kind_classifies() {
    let h = start(RULES).await;
    let a = h.local_addr();
    assert_eq!(class_of(a, "GET", "/bid/123", &[]).await, "bid");
    assert_eq!(class_of(a, "GET", "/bid", &[]).await, "bid");
    assert_eq!(
        class_of(a, "GET", "/bidder", &[]).await,
        "other",
        "prefixes are segment-aware"
    );
    assert_eq!(class_of(a, "GET", "/img/cat.png", &[]).await, "img");
    assert_eq!(
        class_of(a, "GET", "/img/a/cat.png", &[]).await,
        "other",
        "`*` does not cross `/`"
    );
    assert_eq!(class_of(a, "GET", "/n/42", &[]).await, "num");
    assert_eq!(class_of(a, "GET", "/n/42x", &[]).await, "other");
    assert_eq!(class_of(a, "POST", "/x", &[]).await, "post");
    assert_eq!(
        class_of(a, "GET", "/x", &[("X-Tier", "paid")]).await,
        "paid"
    );
    assert_eq!(
        class_of(a, "GET", "/x", &[("X-Tier", "free")]).await,
        "other"
    );
    assert_eq!(
        class_of(a, "GET", "/x", &[("Cookie", "a=1; tier=vip-gold")]).await,
        "vip"
    );
    assert_eq!(
        class_of(a, "GET", "/x", &[("Cookie", "tier=plain")]).await,
        "other"
    );
    assert_eq!(class_of(a, "GET", "/x?user=heavy", &[]).await, "heavy");
    assert_eq!(class_of(a, "GET", "/x?user=light", &[]).await, "other");
    assert_eq!(
        class_of(a, "GET", "/where", &[]).await,
        "local",
        "loopback peer is not in 10/8"
    );
    // Rule order: the first match wins (path /bid before the method rule).
    assert_eq!(class_of(a, "POST", "/bid/1", &[]).await, "bid");
    // Every response reports its queue wait.
    let r = get(a, "/x").await;
    assert!(
        r.header("x-ordo-queue-wait-us")
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_longest_prefix_and_strips() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello from static\n").unwrap();
    let cfg = format!(
        r#"
[[routes]]
prefix = "/"
synthetic = {{}}
[[routes]]
prefix = "/files"
strip_prefix = true
static = {{ root = "{}" }}
"#,
        dir.path().display()
    );
    let h = start(&cfg).await;
    let a = h.local_addr();
    let r = get(a, "/files/hello.txt").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "hello from static\n");
    let r = get(a, "/bytes?n=5").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 5);
    // "/filesystem" is not under "/files": it goes to the synthetic route.
    let r = get(a, "/filesystem?n=3").await;
    assert_eq!(r.body.len(), 3);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_is_404() {
    let h = start(
        r#"
[[routes]]
prefix = "/api"
synthetic = {}
"#,
    )
    .await;
    assert_eq!(get(h.local_addr(), "/other").await.status, 404);
    assert_eq!(get(h.local_addr(), "/api/x").await.status, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_classify_overrides_rules_and_falls_back_on_errors() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("c.lua");
    std::fs::write(
        &script,
        r#"
function classify(req)
  if req.headers["x-user"] == "gold" then return "gold", { size = 10, deadline_ms = 500 } end
  if req.cookies["team"] == "red" and req.method == "GET" then return "red" end
  if req.query == "boom=1" then error("exploded on purpose") end
  if req.path == "/nope" then return "no-such-class" end
  return nil
end
"#,
    )
    .unwrap();
    let cfg = format!(
        r#"
[headers]
class = true
[classify]
script = "{}"
[[classes]]
name = "base"
[[classes]]
name = "gold"
[[classes]]
name = "red"
[[classes]]
name = "ruled"
[[rules]]
class = "ruled"
path_prefix = "/ruled"
"#,
        script.display()
    );
    let h = start(&cfg).await;
    let a = h.local_addr();
    assert_eq!(
        class_of(a, "GET", "/x", &[("X-User", "gold")]).await,
        "gold"
    );
    assert_eq!(
        class_of(a, "GET", "/ruled", &[("X-User", "gold")]).await,
        "gold",
        "lua wins over rules"
    );
    assert_eq!(
        class_of(a, "GET", "/x", &[("Cookie", "team=red")]).await,
        "red"
    );
    assert_eq!(
        class_of(a, "GET", "/ruled", &[]).await,
        "ruled",
        "nil falls through to the rules"
    );
    assert_eq!(
        class_of(a, "GET", "/ruled?boom=1", &[]).await,
        "ruled",
        "an error falls back to the rules"
    );
    assert_eq!(
        class_of(a, "GET", "/nope", &[]).await,
        "base",
        "unknown class falls back"
    );
    assert_eq!(h.status()["lua_errors"].as_u64(), Some(2));
    assert!(h.metrics_text().contains("ordo_serve_lua_errors_total 2"));
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn srpt_serves_the_smaller_static_file_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.bin"), vec![b'b'; 200_000]).unwrap();
    std::fs::write(dir.path().join("small.txt"), "small\n").unwrap();
    let cfg = format!(
        r#"
workers = 1
policy = "srpt"
[[routes]]
prefix = "/"
synthetic = {{}}
[[routes]]
prefix = "/files"
strip_prefix = true
static = {{ root = "{}" }}
"#,
        dir.path().display()
    );
    let h = start(&cfg).await;
    let a = h.local_addr();
    let blocker = tokio::spawn(async move { get(a, "/sleep?ms=300").await });
    ctl_util::wait_until(std::time::Duration::from_secs(10), || {
        ctl_util::busy(&h) == 1
    })
    .await;
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, path) in ["/files/big.bin", "/files/small.txt"]
        .into_iter()
        .enumerate()
    {
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let r = get(a, path).await;
            assert_eq!(r.status, 200);
            order.lock().unwrap().push(path);
        }));
        ctl_util::wait_until(std::time::Duration::from_secs(10), || {
            ctl_util::queued(&h) == i as u64 + 1
        })
        .await;
    }
    assert_eq!(blocker.await.unwrap().status, 200);
    for t in tasks {
        t.await.unwrap();
    }
    // The small file's size hint (its length) is smaller: it is dispatched first although it came second.
    assert_eq!(
        *order.lock().unwrap(),
        ["/files/small.txt", "/files/big.bin"]
    );
    h.shutdown().await.unwrap();
}
