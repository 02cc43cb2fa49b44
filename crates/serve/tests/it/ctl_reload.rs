//! Reload at run time: policy and weight changes apply to queued requests without failing any request; a
//! bad new config is refused (400 on /reload) and the running one stays.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::ctl_util::{get, queued, request, start_cfg, wait_until};
use ordo_serve::ServeConfig;

fn cfg_text(policy: &str, gold_weight: u32, workers: usize) -> String {
    // The Lua policy's script path is relative: it resolves against the config file's directory.
    let script = if policy == "lua" {
        "policy_script = \"pick.lua\""
    } else {
        ""
    };
    format!(
        r#"
workers = {workers}
policy = "{policy}"
{script}
[[classes]]
name = "gold"
weight = {gold_weight}
priority = 2
[[classes]]
name = "free"
[[rules]]
class = "gold"
query = {{ name = "t", value = "gold" }}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_under_load_fails_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, cfg_text("fcfs", 1, 2)).unwrap();
    std::fs::write(
        dir.path().join("pick.lua"),
        "function pick(heads) return heads[#heads].class end\n",
    )
    .unwrap();
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let a = h.local_addr();
    let admin = h.admin_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for i in 0..24 {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            let path = if i % 2 == 0 {
                "/sleep?ms=15&t=gold"
            } else {
                "/sleep?ms=15&t=free"
            };
            while !stop.load(Ordering::Relaxed) {
                let r = get(a, path).await;
                if r.status == 200 {
                    ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let steps = [
        ("stride", 4, 2),
        ("priority", 1, 3),
        ("lottery", 8, 1),
        ("wfq", 2, 2),
        ("srpt", 1, 4),
        ("lua", 1, 2),
        ("stride", 2, 2),
        ("lua", 1, 3),
        ("fcfs", 1, 2),
    ];
    for (policy, w, workers) in steps {
        wait_until(Duration::from_secs(10), || queued(&h) >= 4).await;
        std::fs::write(&path, cfg_text(policy, w, workers)).unwrap();
        let r = request(admin, "POST", "/reload", &[]).await;
        assert_eq!(r.status, 200, "{r:?}");
        let s = h.status();
        assert_eq!(s["policy"], policy);
        assert_eq!(s["workers"], workers);
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // A class disappears while its requests are queued: they move to the first class and are served.
    wait_until(Duration::from_secs(10), || queued(&h) >= 4).await;
    std::fs::write(&path, "workers = 2\n[[classes]]\nname = \"only\"\n").unwrap();
    h.reload_from_file().expect("reload");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no request failed");
    assert!(
        ok.load(Ordering::Relaxed) > 50,
        "load ran: {}",
        ok.load(Ordering::Relaxed)
    );
    assert_eq!(h.status()["reloads"]["ok"], 10);
    assert_eq!(h.status()["lua_errors"], 0);
    // The removed classes keep their counters, and their queue depth reads 0.
    let m = h.metrics_text();
    assert!(
        m.contains(r#"ordo_serve_queue_depth{class="gold"} 0"#),
        "{m}"
    );
    assert!(
        m.contains(r#"ordo_serve_completed_total{class="only"}"#),
        "{m}"
    );
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reload_keeps_the_running_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, cfg_text("stride", 3, 2)).unwrap();
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let admin = h.admin_addr().unwrap();
    std::fs::write(
        &path,
        "workers = 2\npolicy = \"stride\"\n[[classes]]\nname = \"a\"\nweight = 0\n",
    )
    .unwrap();
    let r = request(admin, "POST", "/reload", &[]).await;
    assert_eq!(r.status, 400);
    assert!(
        r.body
            .contains("serve.toml:5: classes[0].weight: must be ≥ 1, got 0"),
        "{}",
        r.body
    );
    std::fs::write(&path, "workers = [\n").unwrap();
    let r = request(admin, "POST", "/reload", &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("serve.toml:"), "{}", r.body);
    let s = h.status();
    assert_eq!(s["policy"], "stride");
    assert_eq!(s["classes"][0]["name"], "gold");
    assert_eq!(s["reloads"]["error"], 2);
    assert_eq!(s["reloads"]["ok"], 0);
    // Still serving with the old rules.
    let mut cfg = h.config();
    assert_eq!(cfg.classes[0].weight, 3);
    let r = get(h.local_addr(), "/x?t=gold").await;
    assert_eq!(r.status, 200);
    // Restart-only settings are kept (and logged) while the rest applies.
    cfg.workers = 5.into();
    cfg.listen = "127.0.0.1:1".parse().unwrap();
    h.reload(cfg).unwrap();
    let s = h.status();
    assert_eq!(s["workers"], 5);
    assert_eq!(s["listen"], h.local_addr().to_string());
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_new_rules_and_routes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    let text = |class: &str, prefix: &str| {
        format!(
            "[headers]\nclass = true\n[[classes]]\nname = \"gold\"\n[[classes]]\nname = \"free\"\n\
             [[rules]]\nclass = \"{class}\"\npath_prefix = \"/a\"\n[[routes]]\nprefix = \"{prefix}\"\nsynthetic = {{}}\n"
        )
    };
    std::fs::write(&path, text("free", "/")).unwrap();
    let h = start_cfg(ServeConfig::from_file(&path).unwrap()).await;
    let a = h.local_addr();
    assert_eq!(get(a, "/a").await.header("x-ordo-class"), Some("free"));
    assert_eq!(get(a, "/b").await.header("x-ordo-class"), Some("gold"));
    std::fs::write(&path, text("gold", "/a")).unwrap();
    h.reload_from_file().unwrap();
    assert_eq!(get(a, "/a").await.header("x-ordo-class"), Some("gold"));
    assert_eq!(get(a, "/b").await.status, 404, "the new routes apply");
    h.shutdown().await.unwrap();
}
