//! The admin listener: Prometheus metrics per class, /status JSON, method and path errors.

mod ctl_util;

use ctl_util::{get, request, start};

const CFG: &str = r#"
workers = 3
policy = "stride"
default_class = "free"
[[classes]]
name = "gold"
weight = 3
[[classes]]
name = "free"
[[rules]]
class = "gold"
header = { name = "x-tier", value = "gold" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_have_per_class_series() {
    let h = start(CFG).await;
    let a = h.local_addr();
    for _ in 0..3 {
        assert_eq!(
            request(a, "GET", "/x", &[("x-tier", "gold")]).await.status,
            200
        );
    }
    assert_eq!(get(a, "/x").await.status, 200);
    let admin = h.admin_addr().expect("admin enabled");
    let r = get(admin, "/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().contains("openmetrics"));
    let m = &r.body;
    for want in [
        r#"ordo_serve_arrivals_total{class="gold"} 3"#,
        r#"ordo_serve_arrivals_total{class="free"} 1"#,
        r#"ordo_serve_dispatched_total{class="gold"} 3"#,
        r#"ordo_serve_completed_total{class="free"} 1"#,
        r#"ordo_serve_rejected_total{class="gold",reason="queue_timeout"} 0"#,
        r#"ordo_serve_queue_depth{class="gold"} 0"#,
        r#"ordo_serve_queue_wait_seconds_count{class="gold"} 3"#,
        r#"ordo_serve_service_seconds_bucket{le="0.00005",class="free"}"#,
        "ordo_serve_workers_busy 0",
        "ordo_serve_workers_capacity 3",
        "ordo_serve_lua_errors_total 0",
        "ordo_serve_abandoned_total 0",
        "ordo_serve_not_found_total 0",
    ] {
        assert!(m.contains(want), "missing {want} in\n{m}");
    }
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_json_with_classes_and_config() {
    let h = start(CFG).await;
    let a = h.local_addr();
    assert_eq!(
        request(a, "GET", "/x", &[("x-tier", "gold")]).await.status,
        200
    );
    let admin = h.admin_addr().unwrap();
    let r = get(admin, "/status").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    assert_eq!(v["policy"], "stride");
    assert_eq!(v["workers"], 3);
    assert_eq!(v["config"], "test.toml");
    assert_eq!(v["listen"], a.to_string());
    assert_eq!(v["classes"][0]["name"], "gold");
    assert_eq!(v["classes"][0]["weight"], 3);
    assert_eq!(v["classes"][0]["arrivals"], 1);
    assert_eq!(v["classes"][0]["completed"], 1);
    assert_eq!(v["classes"][1]["queued"], 0);
    assert!(v["uptime_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(v["routes"][0]["backend"], "synthetic");
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_refuses_wrong_methods_and_paths() {
    let h = start(CFG).await;
    let admin = h.admin_addr().unwrap();
    assert_eq!(request(admin, "POST", "/metrics", &[]).await.status, 405);
    assert_eq!(get(admin, "/reload").await.status, 405);
    assert_eq!(get(admin, "/nothing").await.status, 404);
    // This config came from a string: there is no file to re-read.
    let r = request(admin, "POST", "/reload", &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("did not come from a file"), "{}", r.body);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_can_be_disabled() {
    let mut cfg =
        ordo_serve::ServeConfig::from_toml_str("[admin]\nenabled = false\n", "t.toml").unwrap();
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    let h = ordo_serve::Server::start(cfg).await.unwrap();
    assert!(h.admin_addr().is_none());
    assert_eq!(get(h.local_addr(), "/x").await.status, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_address_names_the_listener_and_the_reason_once() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let mut cfg = ordo_serve::ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    cfg.admin.listen = addr;
    let e = match ordo_serve::Server::start(cfg.clone()).await {
        Ok(_) => panic!("started on a busy admin address"),
        Err(e) => e,
    };
    let chain = format!("{:#}", anyhow::Error::new(e));
    assert!(
        chain.starts_with(&format!("cannot listen on {addr} (`admin.listen`): ")),
        "{chain}"
    );
    assert_eq!(chain.matches("os error").count(), 1, "{chain}");
    cfg.listen = addr;
    cfg.admin.listen = "127.0.0.1:0".parse().unwrap();
    let e = match ordo_serve::Server::start(cfg).await {
        Ok(_) => panic!("started on a busy address"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with(&format!("cannot listen on {addr} (`listen`): ")),
        "{e}"
    );
}
