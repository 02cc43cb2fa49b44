//! What operators expect of the daemon (issue 11): systemd readiness over $NOTIFY_SOCKET (READY=1, then
//! RELOADING=1 … READY=1 around a SIGHUP, STOPPING=1 on SIGTERM), the access log reopened on SIGUSR1 after
//! logrotate moved it, https on `tls.listen`, and the completion scripts and man pages.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::serve::{http_get, signal};
use crate::util::{ordo, run_with_timeout, wait_with_timeout};

/// The next sd_notify datagram (within 20 s).
fn next_state(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("a notification within 20 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn sd_notify_access_log_reopen_and_https() {
    let dir = tempfile::tempdir().unwrap();
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/serve/tls");
    let p = dir.path().join("serve.toml");
    std::fs::write(
        &p,
        format!(
            "listen = \"127.0.0.1:0\"\n[admin]\nenabled = false\n\
             [tls]\nlisten = \"127.0.0.1:0\"\n\
             certificates = [{{ cert = \"{0}/localhost.crt\", key = \"{0}/localhost.key\" }}]\n\
             [access_log]\npath = \"access.log\"\nflush_interval = \"20ms\"\n",
            examples.display()
        ),
    )
    .unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut child = ordo()
        .args(["serve", "--threads", "1", "--config"])
        .arg(&p)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ordo serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    assert_eq!(next_state(&sock), "READY=1");
    let deadline = Instant::now() + Duration::from_secs(20);
    let line = loop {
        let l = rx
            .recv_timeout(Duration::from_millis(100))
            .unwrap_or_default();
        if l.contains("listening on") {
            break l;
        }
        assert!(Instant::now() < deadline, "no `listening on` line");
    };
    // listening on http://127.0.0.1:P and https://127.0.0.1:Q (admin off)
    let plain = line
        .split("http://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let https = line
        .split("https://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(http_get(plain, "/").starts_with("HTTP/1.1 200"));
    let port = https.rsplit(':').next().unwrap();
    let curl = std::process::Command::new("curl")
        .args([
            "-sS",
            "--http1.1",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .arg("--cacert")
        .arg(examples.join("ca.crt"))
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "200", "{curl:?}");

    // logrotate: move the log away, SIGUSR1; later requests land in a new file at the configured path
    let log = dir.path().join("access.log");
    let wait_for = |path: &std::path::Path, lines: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let n = std::fs::read_to_string(path)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if n >= lines {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "{} has {n} lines, want {lines}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    assert_eq!(wait_for(&log, 2), 2);
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    signal(&child, "-USR1");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log.exists() {
        assert!(Instant::now() < deadline, "access log not reopened");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(http_get(plain, "/after").starts_with("HTTP/1.1 200"));
    assert_eq!(wait_for(&log, 1), 1);
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("\"GET /after HTTP/1.1\" 200")
    );
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap().lines().count(),
        2
    );

    signal(&child, "-HUP");
    let s = next_state(&sock);
    assert!(s.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{s}");
    assert_eq!(next_state(&sock), "READY=1");
    signal(&child, "-TERM");
    assert_eq!(next_state(&sock), "STOPPING=1");
    let st = wait_with_timeout(&mut child, Duration::from_secs(20)).expect("exits after SIGTERM");
    assert_eq!(st.code(), Some(0));
}

#[test]
fn completions_and_man_pages() {
    let mut cmd = ordo();
    cmd.args(["completions", "bash"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0));
    assert!(out.stdout.contains("_ordo()") && out.stdout.contains("--cacert"));
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = ordo();
    cmd.args(["man", "--dir"]).arg(dir.path());
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for page in [
        "man1/ordo.1",
        "man1/ordo-serve.1",
        "man1/ordo-bench.1",
        "man5/ordo-serve.toml.5",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(
            text.starts_with(".ie") && text.contains(".TH"),
            "{page}: {text}"
        );
        assert!(out.stdout.contains(page), "{}", out.stdout);
    }
    // one page on stdout, by its name
    let mut cmd = ordo();
    cmd.args(["man", "ordo-serve.toml"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains(".TH ordo\\-serve.toml 5"),
        "{}",
        out.stdout
    );
    let mut cmd = ordo();
    cmd.args(["man", "serve"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert!(out.stdout.contains(".SH \"SIGNALS\""), "{}", out.stdout);
    let mut cmd = ordo();
    cmd.args(["man", "nginx"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr
            .contains("no man page `nginx` (there are ordo, ordo-serve"),
        "{}",
        out.stderr
    );
    let mut cmd = ordo();
    cmd.args(["completions", "tcsh"]);
    assert_eq!(
        run_with_timeout(cmd, Duration::from_secs(30)).code(),
        Some(2)
    );
}
