//! The admin listener: Prometheus metrics per class, /status JSON, method and path errors.

use crate::ctl_util;

use crate::ctl_util::{get, request, start};

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

/// Issue 20: responses by route and status class (a 502 is a 5xx, not only "completed"), the process
/// families and the build's version, on a real server's /metrics in both formats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_responses_by_status_class_and_the_process() {
    // a port nothing listens on: the proxy answers 502
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let h = start(&format!(
        r#"
workers = 2
[[routes]]
prefix = "/ok"
synthetic = {{}}
[[routes]]
prefix = "/down"
proxy = {{ upstreams = ["{dead}"], connect_timeout = "1s" }}
"#
    ))
    .await;
    let a = h.local_addr();
    for _ in 0..3 {
        assert_eq!(get(a, "/ok").await.status, 200);
    }
    for _ in 0..2 {
        assert_eq!(get(a, "/down").await.status, 502);
    }
    assert_eq!(get(a, "/elsewhere").await.status, 404);
    let admin = h.admin_addr().unwrap();
    let prometheus = get(admin, "/metrics").await.body;
    let openmetrics = request(
        admin,
        "GET",
        "/metrics",
        &[("accept", "application/openmetrics-text; version=1.0.0")],
    )
    .await
    .body;
    for m in [&prometheus, &openmetrics] {
        for want in [
            r#"ordo_serve_responses_total{route="/ok",status="2xx"} 3"#,
            r#"ordo_serve_responses_total{route="/ok",status="5xx"} 0"#,
            r#"ordo_serve_responses_total{route="/down",status="5xx"} 2"#,
            r#"ordo_serve_responses_total{route="/down",status="2xx"} 0"#,
            r#"ordo_serve_responses_total{route="(none)",status="4xx"} 1"#,
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
            &format!(
                r#"ordo_build_info{{version="{}"}} 1"#,
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(m.contains(want), "missing {want} in\n{m}");
        }
    }
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    assert_eq!(openmetrics.matches("# EOF").count(), 1, "{openmetrics}");
    let rss: f64 = prometheus
        .lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(rss > 1e6, "{rss}");
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

/// Checks a text exposition line by line: comments are `# HELP`/`# TYPE` (and a final `# EOF` in
/// OpenMetrics), every sample belongs to the family the last `# TYPE` named, label values are quoted with
/// only `\\`, `\"` and `\n` escapes, and values are numbers. Panics with the line on the first fault.
fn check_exposition(text: &str, openmetrics: bool) {
    let mut family: Option<(String, String)> = None;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let fail = |why: &str| panic!("line {}: {why}: {line:?}\n{text}", i + 1);
        if let Some(rest) = line.strip_prefix("# ") {
            if *line == "# EOF" {
                if !openmetrics || i + 1 != lines.len() {
                    fail("misplaced # EOF");
                }
                continue;
            }
            let mut w = rest.splitn(3, ' ');
            match (w.next(), w.next(), w.next()) {
                (Some("HELP"), Some(_), _) => {}
                (Some("TYPE"), Some(name), Some(kind)) => {
                    family = Some((name.to_string(), kind.to_string()));
                }
                _ => fail("unknown comment"),
            }
            continue;
        }
        let b = line.as_bytes();
        let mut p = 0;
        while p < b.len() && (b[p].is_ascii_alphanumeric() || b[p] == b'_' || b[p] == b':') {
            p += 1;
        }
        let name = &line[..p];
        if name.is_empty() {
            fail("no metric name");
        }
        if b.get(p) == Some(&b'{') {
            p += 1;
            loop {
                let start = p;
                while p < b.len() && (b[p].is_ascii_alphanumeric() || b[p] == b'_') {
                    p += 1;
                }
                if p == start || b.get(p) != Some(&b'=') || b.get(p + 1) != Some(&b'"') {
                    fail("bad label");
                }
                p += 2;
                loop {
                    match b.get(p) {
                        None => fail("unterminated label value"),
                        Some(b'"') => break,
                        Some(b'\\') => {
                            if !matches!(b.get(p + 1), Some(b'\\' | b'"' | b'n')) {
                                fail("bad escape");
                            }
                            p += 2;
                        }
                        Some(_) => p += 1,
                    }
                }
                p += 1;
                match b.get(p) {
                    Some(b',') => p += 1,
                    Some(b'}') => {
                        p += 1;
                        break;
                    }
                    _ => fail("bad label list"),
                }
            }
        }
        if b.get(p) != Some(&b' ') {
            fail("no space before the value");
        }
        let value = line[p + 1..].split(' ').next().unwrap_or("");
        if value.parse::<f64>().is_err() && !["+Inf", "-Inf", "NaN"].contains(&value) {
            fail("value is not a number");
        }
        let Some((fam, kind)) = &family else {
            fail("sample before any # TYPE");
            unreachable!()
        };
        let ok = match kind.as_str() {
            "counter" if openmetrics => name == format!("{fam}_total"),
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{fam}{s}")),
            _ => name == fam,
        };
        if !ok {
            fail(&format!("sample outside its family {fam} ({kind})"));
        }
    }
    assert_eq!(
        openmetrics,
        text.ends_with("# EOF\n"),
        "OpenMetrics ends with # EOF, the classic format does not"
    );
    check_histograms(text);
}

/// Every histogram series is one: its buckets (`le`, cumulative) never decrease, and the `+Inf` bucket
/// holds every observation, as `_count` does.
fn check_histograms(text: &str) {
    use std::collections::HashMap;
    let value = |l: &str| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    let mut buckets: HashMap<String, Vec<(String, f64)>> = HashMap::new();
    let mut counts: HashMap<String, f64> = HashMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (name_labels, _) = l.rsplit_once(' ').unwrap();
        if let Some((name, labels)) = name_labels.split_once("_bucket{") {
            let (le, rest) = labels
                .split_once(',')
                .unwrap_or((labels.trim_end_matches('}'), "}"));
            let le = le
                .strip_prefix("le=")
                .unwrap_or_else(|| panic!("le first: {l}"));
            buckets
                .entry(format!("{name}{{{rest}"))
                .or_default()
                .push((le.trim_matches('"').to_string(), value(l)));
        } else if let Some((name, labels)) = name_labels.split_once("_count{") {
            counts.insert(format!("{name}{{{labels}"), value(l));
        }
    }
    assert!(!buckets.is_empty(), "no histogram in\n{text}");
    for (series, bs) in &buckets {
        for w in bs.windows(2) {
            assert!(
                w[0].1 <= w[1].1,
                "{series}: bucket le={} > le={}",
                w[0].0,
                w[1].0
            );
        }
        let (le, inf) = bs.last().unwrap();
        assert_eq!(le, "+Inf", "{series}: the last bucket");
        assert_eq!(
            Some(inf),
            counts.get(series),
            "{series}: +Inf bucket vs _count"
        );
    }
}

/// Issue 10 (smaller items): class names with `"` or `\` broke every metrics line they appeared on (label
/// values were written unescaped); a name a Lua script returns that is no class must not reach the labels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_metrics_escape_class_names() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("c.lua");
    std::fs::write(
        &script,
        "function classify(r)\n  if r.path == \"/odd\" then return \"bad\\\"\\nname\" end\n  return nil\nend\n",
    )
    .unwrap();
    let h = start(&format!(
        r#"
[classify]
script = "{}"
[[classes]]
name = 'we"ird'
[[classes]]
name = 'back\slash'
[[rules]]
class = 'back\slash'
path_prefix = "/b"
"#,
        script.display()
    ))
    .await;
    let a = h.local_addr();
    assert_eq!(get(a, "/x").await.status, 200);
    assert_eq!(get(a, "/b").await.status, 200);
    assert_eq!(get(a, "/odd").await.status, 200);
    let admin = h.admin_addr().unwrap();
    for (accept, om) in [("", false), ("application/openmetrics-text", true)] {
        let r = request(admin, "GET", "/metrics", &[("accept", accept)]).await;
        assert_eq!(r.status, 200);
        check_exposition(&r.body, om);
        assert!(
            r.body
                .contains(r#"ordo_serve_arrivals_total{class="we\"ird"} 2"#),
            "{}",
            r.body
        );
        assert!(
            r.body
                .contains(r#"ordo_serve_arrivals_total{class="back\\slash"} 1"#),
            "{}",
            r.body
        );
        assert!(
            r.body.contains("ordo_serve_lua_errors_total 1"),
            "{}",
            r.body
        );
        assert!(!r.body.contains("bad"), "{}", r.body);
    }
    h.shutdown().await.unwrap();
}

/// Issue 10 (smaller items): `/metrics` answered OpenMetrics whatever the client asked; scrapers that read
/// only the classic text format got `# EOF` and counter families without `_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_metrics_follow_accept() {
    let h = start(CFG).await;
    assert_eq!(get(h.local_addr(), "/x").await.status, 200);
    let admin = h.admin_addr().unwrap();
    let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    for (accept, om) in [
        (None, false),
        (Some("text/plain"), false),
        (Some("text/plain;version=0.0.4"), false),
        (Some("*/*"), false),
        (Some("application/json"), false),
        (Some("application/openmetrics-text"), true),
        (Some("application/openmetrics-text; version=1.0.0"), true),
        (Some(prometheus), true),
        (
            Some("application/openmetrics-text;q=0.1, text/plain"),
            false,
        ),
        (Some("application/openmetrics-text;q=0"), false),
    ] {
        let headers: Vec<(&str, &str)> = accept.iter().map(|a| ("accept", *a)).collect();
        let r = request(admin, "GET", "/metrics", &headers).await;
        assert_eq!(r.status, 200, "{accept:?}");
        let ct = r.header("content-type").unwrap();
        if om {
            assert_eq!(
                ct, "application/openmetrics-text; version=1.0.0; charset=utf-8",
                "{accept:?}"
            );
            assert!(
                r.body.contains("# TYPE ordo_serve_arrivals counter\n"),
                "{accept:?}"
            );
        } else {
            assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
            assert!(
                r.body
                    .contains("# TYPE ordo_serve_arrivals_total counter\n"),
                "{accept:?}: {}",
                r.body
            );
            assert!(
                r.body
                    .contains("# HELP ordo_serve_arrivals_total Requests classified"),
                "{}",
                r.body
            );
        }
        assert_eq!(r.header("vary"), Some("Accept"));
        check_exposition(&r.body, om);
        assert!(
            r.body
                .contains(r#"ordo_serve_arrivals_total{class="free"} 1"#),
            "{}",
            r.body
        );
    }
    h.shutdown().await.unwrap();
}

/// Issue 10 defect 9: the admin answered any Host, so a page whose DNS name was rebound to 127.0.0.1 could
/// read `/status` (and `/metrics`) from a victim's browser. Only the listener's own address, `localhost`
/// (it listens on loopback) and configured names are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_admin_refuses_hosts_other_than_its_own() {
    let h = start("[admin]\nallowed_hosts = [\"ordo-admin.internal\"]\n").await;
    let admin = h.admin_addr().unwrap();
    let port = admin.port();
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.2:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1:notaport".to_string(),
        String::new(),
    ] {
        // a malformed Host is refused by the HTTP layer already (400), a foreign one by the admin (403)
        let want = if host.contains("notaport") || host.is_empty() {
            [400, 403]
        } else {
            [403, 403]
        };
        for path in ["/status", "/metrics"] {
            let r = request(admin, "GET", path, &[("host", &host)]).await;
            assert!(want.contains(&r.status), "Host {host:?} {path}: {r:?}");
            assert!(!r.body.contains("uptime"), "{}", r.body);
        }
        let r = request(admin, "POST", "/reload", &[("host", &host)]).await;
        assert!(want.contains(&r.status), "Host {host:?} /reload: {r:?}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        "127.0.0.1".to_string(),
        format!("localhost:{port}"),
        "LocalHost.:1234".to_string(), // a tunnel's port: only the name counts
        format!("ordo-admin.internal:{port}"),
        "ORDO-ADMIN.internal".to_string(),
    ] {
        let r = request(admin, "GET", "/status", &[("host", &host)]).await;
        assert_eq!(r.status, 200, "Host {host:?}: {r:?}");
    }
    h.shutdown().await.unwrap();
}

/// Issue 10 defect 9: a web page anywhere could make a browser POST to `http://127.0.0.1:9090/reload` (a
/// CORS "simple" request needs no permission) or fetch the admin with its own Origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_admin_refuses_cross_origin_requests() {
    let h = start(CFG).await;
    let admin = h.admin_addr().unwrap();
    let own = format!("http://{admin}");
    for origin in [
        "http://evil.example",
        "null",
        "https://127.0.0.1:1",
        "http://localhost:1",
    ] {
        for (method, path) in [("GET", "/status"), ("GET", "/metrics"), ("POST", "/reload")] {
            let r = request(admin, method, path, &[("origin", origin)]).await;
            assert_eq!(r.status, 403, "{origin} {method} {path}: {r:?}");
        }
    }
    // what browsers send with a cross-site form that somehow carries no Origin
    let r = request(
        admin,
        "POST",
        "/reload",
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(r.status, 403, "{r:?}");
    // the bodies an HTML form or a no-cors fetch can send
    for ct in [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/plain;charset=UTF-8",
    ] {
        let r = request(admin, "POST", "/reload", &[("content-type", ct)]).await;
        assert_eq!(r.status, 415, "{ct}: {r:?}");
    }
    // the admin's own origin and plain clients (curl, Prometheus) still work; this config came from a
    // string, so a reload is refused for that reason (400), not by the guard
    let r = request(admin, "GET", "/status", &[("origin", &own)]).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = request(
        admin,
        "POST",
        "/reload",
        &[("origin", &own), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    let r = request(admin, "POST", "/reload", &[]).await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.body.contains("did not come from a file"), "{}", r.body);
    // reload stays POST only
    assert_eq!(get(admin, "/reload").await.status, 405);
    h.shutdown().await.unwrap();
}

/// Issue 10 defect 9: an optional bearer token (`[admin] token` or `token_file`) guards every admin
/// endpoint; a reload can change it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_admin_token_guards_every_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, "[admin]\ntoken = \"s3cret-1\"\n").unwrap();
    let h = ctl_util::start_cfg(ordo_serve::ServeConfig::from_file(&file).unwrap()).await;
    let admin = h.admin_addr().unwrap();
    for (method, path) in [
        ("GET", "/status"),
        ("GET", "/metrics"),
        ("POST", "/reload"),
        ("GET", "/nothing"),
    ] {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some("Bearer s3cret-"),
            Some("Bearer s3cret-12"),
            Some("Basic czNjcmV0LTE="),
        ] {
            let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
            let r = request(admin, method, path, &headers).await;
            assert_eq!(r.status, 401, "{method} {path} {auth:?}: {r:?}");
            assert_eq!(
                r.header("www-authenticate"),
                Some("Bearer realm=\"ordo admin\"")
            );
        }
    }
    let ok = [("authorization", "Bearer s3cret-1")];
    assert_eq!(request(admin, "GET", "/status", &ok).await.status, 200);
    assert_eq!(
        request(
            admin,
            "GET",
            "/metrics",
            &[("authorization", "bearer s3cret-1")]
        )
        .await
        .status,
        200
    );
    // the token moves to a file; the reload is authorised by the old token, then only the new one works
    let token_file = dir.path().join("admin.token");
    std::fs::write(&token_file, "from-file-2\n").unwrap();
    std::fs::write(&file, "[admin]\ntoken_file = \"admin.token\"\n").unwrap();
    let r = request(admin, "POST", "/reload", &ok).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(request(admin, "GET", "/status", &ok).await.status, 401);
    let new = [("authorization", "Bearer from-file-2")];
    assert_eq!(request(admin, "GET", "/status", &new).await.status, 200);
    // the main listener does not ask for it
    assert_eq!(get(h.local_addr(), "/x").await.status, 200);
    h.shutdown().await.unwrap();
}
