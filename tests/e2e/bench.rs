//! End-to-end tests of `ordo bench` (owned by the bench work; see docs/bench.md): the binary against an
//! in-test HTTP server, its JSON and CSV output, and its exit codes for bad input and unreachable targets.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::util::{ordo, run_with_timeout};

/// A minimal keep-alive HTTP/1.1 server on 127.0.0.1:0 (a thread per connection); returns its base URL.
fn server() -> String {
    server_with(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
}

/// [`server`] answering every request with `response` (empty: close the connection without answering).
fn server_with(response: &'static [u8]) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve(s, response));
        }
    });
    format!("http://{addr}")
}

fn serve(mut s: TcpStream, response: &[u8]) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let close = String::from_utf8_lossy(&buf[..end])
                .to_ascii_lowercase()
                .contains("connection: close");
            buf.drain(..end + 4);
            if response.is_empty() || s.write_all(response).is_err() || close {
                return;
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn bench_json_output_parses() {
    let url = server();
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-c",
        "4",
        "-n",
        "200",
        "--json",
        &format!("{url}/x"),
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["kind"], "bench");
    assert_eq!(v["version"], 1);
    assert_eq!(v["summary"]["complete"], 200);
    assert_eq!(v["summary"]["failed"]["total"], 0);
    // No progress bar on a pipe.
    assert!(!out.stderr.contains("req/s"), "{}", out.stderr);
}

#[test]
fn bench_text_and_csv() {
    let url = server();
    // By name: the reachability check picks whichever resolved address answers.
    let by_name = url.replace("127.0.0.1", "localhost");
    let mut cmd = ordo();
    cmd.args(["bench", "-c", "2", "-n", "20", "--no-keepalive", &by_name]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("Complete requests:      20"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Connection Times (ms)"));

    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("run.json");
    let mut cmd = ordo();
    cmd.args([
        "bench", "-c", "2", "-n", "20", "--rate", "500", "--csv", "--save",
    ])
    .arg(&saved)
    .arg(&url);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.starts_with("class,latency,complete,failed,"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("default,corrected,20,"),
        "{}",
        out.stdout
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(v["config"]["mode"], "open");
    assert_eq!(v["summary"]["complete"], 20);
}

#[test]
fn bench_bad_url_exits_2_naming_it() {
    // (https:// is spoken since issue 11: tests/e2e/operator.rs, crates/bench/tests/tls.rs)
    for url in ["ftp://127.0.0.1/", "127.0.0.1:80"] {
        let mut cmd = ordo();
        cmd.args(["bench", "-n", "1", url]);
        let out = run_with_timeout(cmd, Duration::from_secs(10));
        assert_eq!(out.code(), Some(2), "{url}: {}", out.stderr);
        assert!(out.stderr.contains("URL"), "{url}: {}", out.stderr);
    }
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-n",
        "1",
        "-H",
        "Bad Header: x",
        "http://127.0.0.1:1/",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("header"), "{}", out.stderr);
}

#[test]
fn bench_http2_flags_that_do_not_fit_exit_2_naming_them() {
    let cases: [(&[&str], &str); 4] = [
        (&["--h2", "http://127.0.0.1:1/"], "--h2c for cleartext"),
        (&["--h2c", "https://127.0.0.1:1/"], "--h2 for https://"),
        (
            &["--streams", "8", "http://127.0.0.1:1/"],
            "--streams needs HTTP/2",
        ),
        (
            &["--h2c", "--no-keepalive", "http://127.0.0.1:1/"],
            "--no-keepalive",
        ),
    ];
    for (args, want) in cases {
        let mut cmd = ordo();
        cmd.args(["bench", "-n", "1"]).args(args);
        let out = run_with_timeout(cmd, Duration::from_secs(10));
        assert_eq!(out.code(), Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn bench_unwritable_save_exits_2_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir").join("run.json");
    let mut cmd = ordo();
    // port 1: nothing listens; the --save check comes first, so the exit is 2, not the unreachable 1
    cmd.args(["bench", "-n", "1", "--save"])
        .arg(&bad)
        .arg("http://127.0.0.1:1/");
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("--save {}: cannot write", bad.display())),
        "{}",
        out.stderr
    );
    // a good path still gets the JSON report
    let good = dir.path().join("run.json");
    let mut cmd = ordo();
    cmd.args(["bench", "-n", "3", "-c", "1", "--no-progress", "--save"])
        .arg(&good)
        .arg(server() + "/");
    let out = run_with_timeout(cmd, Duration::from_secs(20));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    assert_eq!(doc["summary"]["complete"], 3);
}

#[test]
fn bench_bad_mix_exits_2_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mix.toml");
    std::fs::write(
        &path,
        "[[class]]\nname = \"light\"\nshare = 0\nurl = \"/\"\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["bench", "-n", "1", "--mix"])
        .arg(&path)
        .arg("http://127.0.0.1:1/");
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("mix.toml:3"), "{}", out.stderr);
    assert!(out.stderr.contains("share"), "{}", out.stderr);
}

#[test]
fn bench_unreachable_target_fails_quickly() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t0 = Instant::now();
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-n",
        "10",
        "--connect-timeout",
        "1s",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("cannot reach"), "{}", out.stderr);
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn bench_ctrl_c_prints_the_report_so_far() {
    interrupted_run_reports("-INT");
}

#[test]
fn bench_sigterm_prints_the_report_so_far() {
    interrupted_run_reports("-TERM");
}

/// A 60 s run stopped after 1.5 s by `signal`: the JSON report of what completed, marked interrupted,
/// within 5 s; exit 130.
fn interrupted_run_reports(signal: &str) {
    let url = server();
    let mut cmd = ordo();
    cmd.args(["bench", "-c", "2", "-d", "60s", "--json", &url])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    let killed = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = crate::util::wait_with_timeout(&mut child, Duration::from_secs(10))
        .expect("exits after the signal");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{signal}: partial report, 128 + SIGINT; {stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report after Ctrl-C");
    assert_eq!(v["interrupted"], true);
    assert!(v["summary"]["complete"].as_u64().unwrap() > 0);
    assert!(v["elapsed_s"].as_f64().unwrap() < 10.0);
}

/// `ordo bench --fail-if` against a real server: one line per threshold, exit 3 when one fails, 0 when all
/// hold (issue 24).
#[test]
fn bench_fail_if_thresholds_set_the_exit_code() {
    let url = server();
    let run = |extra: &[&str]| {
        let mut cmd = ordo();
        cmd.args(["bench", "-c", "2", "-n", "200", "--no-progress"])
            .args(extra)
            .arg(format!("{url}/x"));
        run_with_timeout(cmd, Duration::from_secs(30))
    };
    // every threshold holds: exit 0, a line each after the text report
    let out = run(&[
        "--fail-if",
        "p99>10s",
        "--fail-if",
        "errors>0",
        "--fail-if",
        "rps<0.001",
    ]);
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("threshold p99>10s: ok (p99 = "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("threshold errors>0: ok (errors = 0 (0 of 200 requests))"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("threshold rps<0.001: ok (rps = "),
        "{}",
        out.stdout
    );
    // one fails: exit 3, and the line says which and what was measured
    let out = run(&["--fail-if", "p99>10s", "--fail-if", "rps<1000000000"]);
    assert_eq!(out.code(), Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("threshold p99>10s: ok"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("threshold rps<1000000000: FAILED (rps = "),
        "{}",
        out.stdout
    );
    // with --json the lines go to stderr and stdout stays JSON
    let out = run(&["--json", "--fail-if", "p50<1us"]);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    serde_json::from_str::<serde_json::Value>(&out.stdout).expect("JSON on stdout");
    assert!(
        out.stderr.contains("threshold p50<1us: ok"),
        "{}",
        out.stderr
    );
}

/// Failed requests without a threshold exit 0 (as ab, wrk, k6); `--fail-if errors>…` makes them fail the
/// run; a run in which nothing completed exits 3 anyway.
#[test]
fn bench_errors_and_the_run_that_measured_nothing() {
    let url = server_with(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
    let run = |extra: &[&str], url: &str| {
        let mut cmd = ordo();
        cmd.args(["bench", "-c", "2", "-n", "50", "--no-progress"])
            .args(extra)
            .arg(url);
        run_with_timeout(cmd, Duration::from_secs(30))
    };
    let out = run(&[], &url);
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("Non-2xx responses:      50"),
        "{}",
        out.stdout
    );
    let out = run(&["--fail-if", "errors>0.1%", "--fail-if", "failed>0"], &url);
    assert_eq!(out.code(), Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("threshold errors>0.1%: FAILED (errors = 100.000% (50 of 50 requests))"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("threshold failed>0: ok"),
        "{}",
        out.stdout
    );

    // a server that closes every connection unanswered: no request completes
    let url = server_with(b"");
    let out = run(&["--timeout", "2s"], &url);
    assert_eq!(out.code(), Some(3), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("check: FAILED (no request completed: 50 failed; nothing was measured)"),
        "{}",
        out.stdout
    );
}

#[test]
fn bench_malformed_threshold_exits_2_before_the_run() {
    // port 1: nothing listens, so exit 2 (not the unreachable 1) shows the expression was refused first
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-n",
        "1",
        "--fail-if",
        "p99>>5ms",
        "http://127.0.0.1:1/",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("invalid threshold `p99>>5ms`"),
        "{}",
        out.stderr
    );
    // in a mix file: file, line and key
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mix.toml");
    std::fs::write(
        &path,
        "fail-if = [\"p99>50ms\", \"rps<fast\"]\n[[class]]\nname = \"a\"\nurl = \"/\"\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["bench", "-n", "1", "--mix"])
        .arg(&path)
        .arg("http://127.0.0.1:1/");
    let out = run_with_timeout(cmd, Duration::from_secs(10));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("mix.toml:1")
            && out
                .stderr
                .contains("fail-if[1]: invalid threshold `rps<fast`"),
        "{}",
        out.stderr
    );
}

/// A mix file's `fail-if` thresholds are judged with the command line's.
#[test]
fn bench_mix_file_thresholds_are_judged() {
    let url = server();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mix.toml");
    std::fs::write(
        &path,
        "fail-if = [\"rps<1000000000\"]\n[[class]]\nname = \"a\"\nurl = \"/a\"\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-c",
        "1",
        "-n",
        "20",
        "--no-progress",
        "--fail-if",
        "errors>0",
        "--mix",
    ])
    .arg(&path)
    .arg(&url);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(3), "{}\n{}", out.stdout, out.stderr);
    let errors = out
        .stdout
        .find("threshold errors>0: ok")
        .expect("errors line");
    let rps = out
        .stdout
        .find("threshold rps<1000000000: FAILED")
        .expect("rps line");
    assert!(errors < rps, "command line first: {}", out.stdout);
}

/// `--brief`: wrk's few lines instead of the report, threshold lines right after them.
#[test]
fn bench_brief_prints_a_short_summary() {
    let url = server();
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-c",
        "2",
        "-n",
        "100",
        "--no-progress",
        "--brief",
        "--fail-if",
        "errors>0",
    ])
    .arg(format!("{url}/x"));
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", out.stdout);
    assert!(
        lines[0].starts_with(&format!("{url}/x: 2 connections, closed loop, ")),
        "{}",
        out.stdout
    );
    assert!(
        lines[1].starts_with("  Requests:    100 complete, "),
        "{}",
        out.stdout
    );
    assert!(
        lines[2].starts_with("  Latency:     avg "),
        "{}",
        out.stdout
    );
    assert_eq!(lines[3], "  Errors:      none");
    // 100 × (head + "hello"): 38 + 5 bytes each
    assert!(
        lines[4].starts_with("  Transfer:    4.20 KiB received, "),
        "{}",
        out.stdout
    );
    assert!(
        lines[5].starts_with("threshold errors>0: ok"),
        "{}",
        out.stdout
    );
}

/// Issue 24: a wrk script's `done()` prints after the report (report.lua's CSV lines follow the text), and
/// `init(args)` gets the arguments after `--`.
#[test]
fn bench_lua_script_runs_wrks_report_lua_after_the_report() {
    let url = server();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/bench/wrk/report.lua");
    let mut cmd = ordo();
    cmd.args([
        "bench",
        "-c",
        "2",
        "-n",
        "50",
        "--no-progress",
        "-s",
        script,
        &format!("{url}/x"),
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let stdout = &out.stdout;
    let report = stdout.find("Complete requests").expect("the report");
    let done = stdout
        .find("------------------------------")
        .expect("done()'s lines");
    assert!(report < done, "{stdout}");
    assert!(stdout.contains("\n99.999%,"), "{stdout}");
    // a script error is bad input, named with its file and line
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.lua");
    std::fs::write(
        &bad,
        "function init(args)\n  error('want ' .. args[1])\nend\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["bench", "-n", "5", "-s"])
        .arg(&bad)
        .args([&format!("{url}/x"), "--", "two"]);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("bad.lua:2:") && stderr.contains("want two"),
        "{stderr}"
    );
}

/// Issue 24: two `--save`d runs merge (`ordo report merge`) into one result that `ordo report` reads; a
/// different workload exits 2 naming the difference.
#[test]
fn report_merge_joins_two_saved_runs() {
    let url = server();
    let dir = tempfile::tempdir().unwrap();
    let save = |name: &str, path: &str| {
        let f = dir.path().join(name);
        let mut cmd = ordo();
        cmd.args(["bench", "-c", "2", "-n", "40", "--no-progress", "--save"])
            .arg(&f)
            .arg(format!("{url}{path}"));
        let out = run_with_timeout(cmd, Duration::from_secs(60));
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        f
    };
    let (a, b, c) = (
        save("a.json", "/x"),
        save("b.json", "/x"),
        save("c.json", "/y"),
    );
    let all = dir.path().join("all.json");
    let mut cmd = ordo();
    cmd.args(["report", "merge"])
        .arg(&a)
        .arg(&b)
        .arg("--save")
        .arg(&all);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let stdout = &out.stdout;
    assert!(stdout.contains("Merged from 2 runs"), "{stdout}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&all).unwrap()).unwrap();
    assert_eq!(v["summary"]["complete"], 80);
    assert_eq!(v["merged"].as_array().unwrap().len(), 2);
    let mut cmd = ordo();
    cmd.args(["report", "--text"]).arg(&all);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let mut cmd = ordo();
    cmd.args(["report", "merge"]).arg(&a).arg(&c);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("target: ") && stderr.contains("--force"),
        "{stderr}"
    );
}
