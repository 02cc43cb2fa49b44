//! Issue 10 defect 8 through the server: Lua scripts run in a sandbox with time and memory limits; a script
//! that misbehaves is answered by the fallback (the rules), counted, and holds up nothing else.

use crate::ctl_util;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::ctl_util::start;

/// A blocking GET on its own OS thread's socket (so it does not depend on the test runtime's threads, one
/// of which a slow script may hold): status, X-Ordo-Class, and how long it took.
fn blocking_get(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, Duration) {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let r = ctl_util::parse(out.as_bytes());
    let class = r.header("x-ordo-class").unwrap_or("").to_string();
    (r.status, class, t.elapsed())
}

fn config(dir: &std::path::Path, script: &str, extra: &str) -> String {
    let p = dir.join("classify.lua");
    std::fs::write(&p, script).unwrap();
    format!(
        r#"
{extra}
[headers]
class = true
[classify]
script = "{}"
[[classes]]
name = "ruled"
[[classes]]
name = "gold"
"#,
        p.display()
    )
}

/// `os.exit()` in a script killed the whole server (this test process, before the fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_os_exit_in_a_script_does_not_stop_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        "function classify(r)\n  if r.path == '/exit' then os.exit(3) end\n  if r.path == '/io' then io.open('/etc/passwd') end\n  return 'gold'\nend\n",
        "",
    ))
    .await;
    let a = h.local_addr();
    let r = tokio::task::spawn_blocking(move || {
        [
            blocking_get(a, "/exit", &[]),
            blocking_get(a, "/io", &[]),
            blocking_get(a, "/x", &[]),
        ]
    })
    .await
    .unwrap();
    assert_eq!(
        (r[0].0, r[0].1.as_str()),
        (200, "ruled"),
        "the rules decided"
    );
    assert_eq!((r[1].0, r[1].1.as_str()), (200, "ruled"));
    assert_eq!((r[2].0, r[2].1.as_str()), (200, "gold"));
    assert_eq!(h.status()["lua_errors"], 2);
    h.shutdown().await.unwrap();
}

/// One `string.find` with a backtracking pattern on a long header held a thread for 10 s, and every other
/// request waited on the single Lua lock meanwhile. Now the call stops at `classify_time_limit` (1 s here),
/// the request is classified by the rules, and requests arriving meanwhile are served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_a_pathological_pattern_is_bounded_and_others_are_served_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        r#"
function classify(r)
  local v = r.headers["x-evil"]
  if v then string.find(v, string.rep("a*", 30) .. "b") end
  return "gold"
end
"#,
        "[lua]\nclassify_time_limit = \"1s\"",
    ))
    .await;
    let a = h.local_addr();
    let evil = std::thread::spawn(move || {
        let header = "a".repeat(200);
        blocking_get(a, "/x", &[("x-evil", header.as_str())])
    });
    // the evil request is being classified (its connection is open and nothing has answered it yet)
    std::thread::sleep(Duration::from_millis(200));
    let quick = tokio::task::spawn_blocking(move || {
        (0..5)
            .map(|_| blocking_get(a, "/x", &[]))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    eprintln!("quick: {quick:?} evil finished: {}", evil.is_finished());
    assert!(!evil.is_finished(), "the slow call was still running");
    for (status, class, took) in quick {
        // served meanwhile, not after it: the evil call was still running when all five had their answer
        // (checked above); no wall-clock bound, which a loaded machine can break
        assert_eq!((status, class.as_str()), (200, "gold"), "{took:?}");
    }
    let (status, class, took) = tokio::task::spawn_blocking(move || evil.join().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (status, class.as_str()),
        (200, "ruled"),
        "stopped, then the rules decided"
    );
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(
        took < Duration::from_secs(4),
        "bounded by the limit: {took:?}"
    );
    let m = h.metrics_text();
    for want in [
        r#"ordo_serve_lua_limit_total{hook="classify",limit="time"} 1"#,
        r#"ordo_serve_lua_limit_total{hook="classify",limit="memory"} 0"#,
        r#"ordo_serve_lua_limit_total{hook="pick",limit="time"} 0"#,
        r#"ordo_serve_lua_skipped_total{hook="classify"} 0"#,
        r#"ordo_serve_lua_disabled_total{hook="classify"} 0"#,
        r#"ordo_serve_lua_clients_benched_total{hook="classify"} 0"#,
        "ordo_serve_lua_errors_total 1",
    ] {
        assert!(m.contains(want), "missing {want} in\n{m}");
    }
    h.shutdown().await.unwrap();
}

/// `string.rep` added 300 MB to the server; now the state's memory limit stops it, the rules decide, and
/// the state serves the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_a_memory_bomb_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        "function classify(r)\n  if r.path == '/bomb' then local s = string.rep('x', 3e8) end\n  if r.path == '/grow' then local t = {} for i = 1, 1e9 do t[i] = {} end end\n  return 'gold'\nend\n",
        "[lua]\nmemory_limit = 4194304\nclassify_time_limit = \"5s\"",
    ))
    .await;
    let a = h.local_addr();
    let r = tokio::task::spawn_blocking(move || {
        [
            blocking_get(a, "/bomb", &[]),
            blocking_get(a, "/grow", &[]),
            blocking_get(a, "/x", &[]),
        ]
    })
    .await
    .unwrap();
    assert_eq!((r[0].0, r[0].1.as_str()), (200, "ruled"));
    assert_eq!((r[1].0, r[1].1.as_str()), (200, "ruled"));
    assert_eq!((r[2].0, r[2].1.as_str()), (200, "gold"));
    let m = h.metrics_text();
    assert!(
        m.contains(r#"ordo_serve_lua_limit_total{hook="classify",limit="memory"} 2"#),
        "{m}"
    );
    h.shutdown().await.unwrap();
}

/// NaN, infinite, negative and huge hints are script errors: the request is classified by the rules (a
/// `deadline_ms` of 1e300 panicked the request's task before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_out_of_range_hints_fall_back_to_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        r#"
local hints = {
  ["/huge"] = { deadline_ms = 1e300 }, ["/nan"] = { deadline_ms = 0/0 }, ["/neg"] = { size = -1 },
  ["/inf"] = { size = math.huge }, ["/ok"] = { size = 5, deadline_ms = 1000 },
}
function classify(r) return "gold", hints[r.path] end
"#,
        "",
    ))
    .await;
    let a = h.local_addr();
    let r = tokio::task::spawn_blocking(move || {
        ["/huge", "/nan", "/neg", "/inf", "/ok"].map(|p| blocking_get(a, p, &[]))
    })
    .await
    .unwrap();
    for (i, (status, class, _)) in r.iter().enumerate() {
        let want = if i < 4 { "ruled" } else { "gold" };
        assert_eq!((*status, class.as_str()), (200, want), "request {i}");
    }
    assert_eq!(h.status()["lua_errors"], 4);
    h.shutdown().await.unwrap();
}

/// A GET from the local address `from` (any of 127.0.0.0/8 reaches a 127.0.0.1 listener): status and
/// X-Ordo-Class.
async fn get_from(
    from: &str,
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let r = ctl_util::parse(&out);
    (r.status, r.header("x-ordo-class").unwrap_or("").to_string())
}

/// Issue 20: one client whose requests keep making the script overrun its limit is benched alone (the
/// rules decide its requests); the script is not disabled, so another client is still classified by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue20_one_client_cannot_turn_the_script_off_for_everyone() {
    let dir = tempfile::tempdir().unwrap();
    let h = start(&config(
        dir.path(),
        "function classify(r)\n  if r.headers['x-spin'] then while true do end end\n  return 'gold'\nend\n",
        "[lua]\nclassify_time_limit = \"20ms\"\nbreaker_overruns = 3\nbreaker_cooldown = \"60s\"",
    ))
    .await;
    let a = h.local_addr();
    for i in 0..8 {
        let (status, class) = get_from("127.0.0.2", a, "/x", &[("x-spin", "1")]).await;
        assert_eq!(
            (status, class.as_str()),
            (200, "ruled"),
            "hostile request {i}"
        );
    }
    // benched: even its harmless requests skip the script
    assert_eq!(
        get_from("127.0.0.2", a, "/x", &[]).await,
        (200, "ruled".into())
    );
    // everyone else: the script decides
    for _ in 0..3 {
        assert_eq!(
            get_from("127.0.0.1", a, "/x", &[]).await,
            (200, "gold".into())
        );
    }
    let m = h.metrics_text();
    for want in [
        r#"ordo_serve_lua_limit_total{hook="classify",limit="time"} 3"#,
        r#"ordo_serve_lua_clients_benched_total{hook="classify"} 1"#,
        r#"ordo_serve_lua_disabled_total{hook="classify"} 0"#,
        r#"ordo_serve_lua_skipped_total{hook="classify"} 6"#,
    ] {
        assert!(m.contains(want), "missing {want} in\n{m}");
    }
    h.shutdown().await.unwrap();
}
