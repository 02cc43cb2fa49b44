//! End-to-end tests of `ordo bench` (owned by the bench work; see docs/bench.md): the binary against an
//! in-test HTTP server, its JSON and CSV output, and its exit codes for bad input and unreachable targets.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::util::{ordo, run_with_timeout};

/// A minimal keep-alive HTTP/1.1 server on 127.0.0.1:0 (a thread per connection); returns its base URL.
fn server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve(s));
        }
    });
    format!("http://{addr}")
}

fn serve(mut s: TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let close = String::from_utf8_lossy(&buf[..end])
                .to_ascii_lowercase()
                .contains("connection: close");
            buf.drain(..end + 4);
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                .is_err()
                || close
            {
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
