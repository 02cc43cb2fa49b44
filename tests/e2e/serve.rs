//! End-to-end tests of `ordo serve` (see docs/serve.md): `--check` exit codes and messages on good and bad
//! files (every example config included), and a real server on port 0 that answers and exits 0 on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::util::{ordo, run_with_timeout, wait_with_timeout};

#[test]
fn check_accepts_every_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/serve");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let mut cmd = ordo();
        cmd.args(["serve", "--check"]).arg(&p);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        assert_eq!(out.code(), Some(0), "{}: {}", p.display(), out.stderr);
        assert!(out.stderr.contains(": ok (policy "), "{}", out.stderr);
        n += 1;
    }
    assert!(n >= 8, "found {n} example configs");
}

/// The container image cannot be built here (no registry), so its steps are checked against the tree:
/// the build step is the release build of the `ordo` binary from the locked dependencies, every file it
/// copies exists, and its entry point — `ENTRYPOINT` + `CMD`, with the paths the image copies to mapped back
/// to the tree — is a command the real binary accepts (`serve -t` on the image's own configuration).
#[test]
fn the_dockerfile_entry_command_runs_against_the_real_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("cargo build --release --locked --bin ordo"),
        "the image builds the locked release binary"
    );
    // COPY SRC DEST from the tree: DEST inside the image -> SRC in the tree
    let mut copied: Vec<(String, String)> = Vec::new();
    for line in dockerfile
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.len(), 3, "one source and one destination: {line}");
        assert!(
            root.join(parts[1]).exists(),
            "the Dockerfile copies {}, which is missing",
            parts[1]
        );
        copied.push((parts[2].to_string(), parts[1].to_string()));
    }
    let json_array = |key: &str| -> Vec<String> {
        let line = dockerfile
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} line"));
        serde_json::from_str(line[key.len()..].trim()).unwrap_or_else(|e| panic!("{key}: {e}"))
    };
    let entry = json_array("ENTRYPOINT");
    assert_eq!(
        entry,
        ["/usr/local/bin/ordo"],
        "the entry point is the binary itself (PID 1)"
    );
    let mut args: Vec<String> = json_array("CMD")
        .into_iter()
        .map(|a| match copied.iter().find(|(dest, _)| *dest == a) {
            Some((_, src)) => root.join(src).display().to_string(),
            None => a,
        })
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    args.push("-t".to_string());
    let mut cmd = ordo();
    cmd.args(&args);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "ordo {args:?}: {}", out.stderr);
    assert!(out.stderr.contains(": ok (policy "), "{}", out.stderr);
}

#[test]
fn check_refuses_a_bad_file_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(&p, "workers = 4\n\n[[classes]]\nname = \"a\"\nweight = 0\n").unwrap();
    let mut cmd = ordo();
    cmd.args(["serve", "--check"]).arg(&p);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    let want = format!("{}:5: classes[0].weight: must be ≥ 1, got 0", p.display());
    assert!(out.stderr.contains(&want), "{}", out.stderr);

    std::fs::write(&p, "workers = 4\nwokers = 5\n").unwrap();
    let mut cmd = ordo();
    cmd.args(["serve", "--check"]).arg(&p);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr
            .contains("bad.toml:2: wokers: unknown key `wokers`; did you mean `workers`?"),
        "{}",
        out.stderr
    );

    let mut cmd = ordo();
    cmd.args(["serve", "--check"])
        .arg(dir.path().join("missing.toml"));
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr.contains("missing.toml: cannot read"),
        "{}",
        out.stderr
    );
}

/// `ordo serve -t` is `--check` (nginx's and HAProxy's habit): `-t FILE`, `-t -c FILE`; a bad file exits 2.
#[test]
fn t_checks_like_check() {
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/serve/seed003.toml");
    for flags in [&["-t"][..], &["-t", "-c"][..]] {
        let mut cmd = ordo();
        cmd.arg("serve").args(flags).arg(&good);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        assert_eq!(out.code(), Some(0), "{flags:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("seed003.toml: ok (policy lottery"),
            "{}",
            out.stderr
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "workers = 0\n").unwrap();
    let mut cmd = ordo();
    cmd.args(["serve", "-c"]).arg(&bad).arg("-t");
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("bad.toml:1: workers:"),
        "{}",
        out.stderr
    );
}

#[test]
fn bad_override_is_a_usage_error() {
    let mut cmd = ordo();
    cmd.args(["serve", "--policy", "random"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2));
    // clap refuses it with the names ordo-serve lists (and a near miss gets a suggestion)
    assert!(
        out.stderr
            .contains("invalid value 'random' for '--policy <NAME>'")
            && out.stderr.contains("fcfs")
            && out.stderr.contains("lua"),
        "{}",
        out.stderr
    );
    let mut cmd = ordo();
    cmd.args(["serve", "--policy", "strde"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.contains("'stride'"), "{}", out.stderr);
}

pub(crate) fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_on_port_0_reloads_on_sighup_and_exits_0_on_sigterm() {
    serve_reload_and_stop("0"); // a work-stealing pool, one thread per CPU
}

#[test]
fn one_thread_serves_reloads_and_stops_the_same() {
    serve_reload_and_stop("1"); // the current-thread runtime
}

fn serve_reload_and_stop(threads: &str) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("serve.toml");
    std::fs::write(
        &p,
        "listen = \"127.0.0.1:0\"\nworkers = 2\n[admin]\nlisten = \"127.0.0.1:0\"\n[headers]\nclass = true\n",
    )
    .unwrap();
    let (mut child, addr, admin, _stderr) =
        spawn_serve(&p, &["--policy", "stride", "--threads", threads]);
    let r = http_get(&addr, "/bytes?n=7");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.ends_with("xxxxxxx"), "{r}");
    assert!(
        r.contains("X-Ordo-Class: default") || r.contains("x-ordo-class: default"),
        "{r}"
    );
    let admin = admin.expect("admin address");
    let status = http_get(&admin, "/status");
    assert!(status.contains("\"policy\": \"stride\""), "{status}");
    assert!(status.contains("\"workers\": 2"), "{status}");
    // SIGHUP re-reads the file (the --policy override stays). The new file is valid only with that
    // override (`policy = "lua"` has no script): it is checked with the overrides applied, as at start.
    std::fs::write(
        &p,
        "listen = \"127.0.0.1:0\"\nworkers = 3\npolicy = \"lua\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[headers]\nclass = true\n",
    )
    .unwrap();
    signal(&child, "-HUP");
    let mut reloaded = false;
    for _ in 0..200 {
        let status = http_get(&admin, "/status");
        if status.contains("\"workers\": 3") {
            assert!(status.contains("\"policy\": \"stride\""), "{status}");
            reloaded = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(reloaded, "SIGHUP did not reload within 5 s");
    signal(&child, "-TERM");
    let st = wait_with_timeout(&mut child, Duration::from_secs(20)).expect("exits after SIGTERM");
    assert_eq!(st.code(), Some(0));
}

/// Starts `ordo serve --config FILE FLAGS...` and waits for its `listening on` line: the child, the HTTP and
/// admin addresses, and the rest of its stderr line by line.
fn spawn_serve(
    config: &Path,
    flags: &[&str],
) -> (
    std::process::Child,
    String,
    Option<String>,
    std::sync::mpsc::Receiver<String>,
) {
    let mut child = ordo()
        .args(["serve", "--config"])
        .arg(config)
        .args(flags)
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
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let main = rest.split_whitespace().next().unwrap().to_string();
                let admin = rest
                    .split("admin http://")
                    .nth(1)
                    .map(|a| a.trim_end_matches(')').to_string());
                return (child, main, admin, rx);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no `listening on` line within 30 s");
}

/// A client that sends a request head announcing a 1000-byte body, then one byte every 50 ms for up to
/// 30 s (each within head_timeout, so only shutdown ends it).
fn slow_body_client(addr: &str) -> std::thread::JoinHandle<()> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n")
        .unwrap();
    std::thread::spawn(move || {
        for _ in 0..600 {
            if s.write_all(b"x").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Issue 10 defect 7: after SIGTERM a slow request body kept `ordo serve` running for as long as the client
/// went on. With `--shutdown-grace 1s` it exits (0) about a second after the signal.
/// A config on port 0 with a 60 s shutdown grace.
fn long_grace_config(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("serve.toml");
    std::fs::write(
        &p,
        "listen = \"127.0.0.1:0\"\nshutdown_grace = \"60s\"\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    p
}

#[test]
fn issue10_sigterm_exits_after_the_shutdown_grace() {
    let dir = tempfile::tempdir().unwrap();
    let p = long_grace_config(dir.path());
    // the flag wins over the file's 60 s
    let (mut child, addr, _, _stderr) = spawn_serve(&p, &["--shutdown-grace", "1s"]);
    let _client = slow_body_client(&addr);
    std::thread::sleep(Duration::from_millis(200));
    let t = std::time::Instant::now();
    signal(&child, "-TERM");
    let st = wait_with_timeout(&mut child, Duration::from_secs(20)).expect("exits after the grace");
    let took = t.elapsed();
    assert_eq!(st.code(), Some(0));
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A second SIGTERM ends the grace at once.
#[test]
fn issue10_a_second_sigterm_ends_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let p = long_grace_config(dir.path());
    let (mut child, addr, _, stderr) = spawn_serve(&p, &[]);
    let _client = slow_body_client(&addr);
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, "-TERM");
    // the first signal has been handled (stopped accepting) before the second is sent
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&addr).is_ok() {
        assert!(std::time::Instant::now() < deadline, "still accepting");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = std::time::Instant::now();
    signal(&child, "-TERM");
    let st = wait_with_timeout(&mut child, Duration::from_secs(20)).expect("exits");
    assert_eq!(st.code(), Some(0));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // the reader thread ends with the child's stderr
    let log: Vec<String> = stderr.iter().collect();
    assert!(
        log.iter()
            .any(|l| l.contains("closing the connections still open")),
        "{log:?}"
    );
}

pub(crate) fn signal(child: &std::process::Child, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(st.success());
}

/// `ordo serve --check FILE` with overrides; returns (exit code, stderr).
fn check_with(file: &Path, flags: &[&str]) -> (Option<i32>, String) {
    let mut cmd = ordo();
    cmd.args(["serve", "--check"]).arg(file).args(flags);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    (out.code(), out.stderr)
}

/// 1-based number of the first line of `file` that starts with `prefix` (examples change; tests follow).
fn line_of(file: &Path, prefix: &str) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    1 + text
        .lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{}: no line starting with {prefix:?}", file.display()))
}

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/serve")
        .join(name)
}

/// A flag that makes a valid file invalid is named in the error (exit 2), not the file's line it
/// overrides: `--policy lua` on a file without `policy_script` used to be reported at the file's
/// `policy =` line.
#[test]
fn serve_override_errors_name_the_flag() {
    let default = example("default.toml");
    let d = default.display().to_string();

    let (code, err) = check_with(&default, &["--policy", "lua"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--policy lua: needs `policy_script` in {d} (or --policy-script PATH)"
        )),
        "{err}"
    );
    assert!(
        !err.contains(&format!("{d}:{}", line_of(&default, "policy ="))),
        "blames the file's line: {err}"
    );

    // --policy-script completes it (relative to the current directory, not the file's)
    let script = example("lua-policy.lua");
    let (code, err) = check_with(
        &default,
        &[
            "--policy",
            "lua",
            "--policy-script",
            &script.display().to_string(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("ok (policy lua"), "{err}");

    // a script that cannot be loaded is the flag's fault too
    let (code, err) = check_with(
        &default,
        &[
            "--policy",
            "lua",
            "--policy-script",
            "/nonexistent/pick.lua",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--policy-script /nonexistent/pick.lua: "),
        "{err}"
    );

    let (code, err) = check_with(
        &default,
        &["--policy-script", &script.display().to_string()],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("only used with policy \"lua\" (policy is \"fcfs\" in ")
            && err.contains("add --policy lua"),
        "{err}"
    );

    // the other way round: a Lua file with --policy fcfs names the flag and the file's policy_script line
    let lua = example("lua-policy.toml");
    let (code, err) = check_with(&lua, &["--policy", "fcfs"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--policy fcfs: {}:{} sets `policy_script`",
            lua.display(),
            line_of(&lua, "policy_script")
        )),
        "{err}"
    );

    let (code, err) = check_with(&default, &["--policy", "edf"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--policy edf: policy \"edf\" needs at least one class with a `deadline`"),
        "{err}"
    );

    // --listen onto the file's admin address, --admin onto the listen address
    let (code, err) = check_with(&default, &["--listen", "127.0.0.1:9090"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--listen 127.0.0.1:9090: same address as the admin listener (`admin.listen`, {d}:{})",
            line_of(&default, "listen = \"127.0.0.1:9090\"")
        )),
        "{err}"
    );
    let (code, err) = check_with(&default, &["--admin", "127.0.0.1:8080"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--admin 127.0.0.1:8080: same address as the HTTP listener (127.0.0.1:8080)"),
        "{err}"
    );
    let (code, err) = check_with(&default, &["--listen", "127.0.0.1:9090", "--admin", "off"]);
    assert_eq!(code, Some(0), "{err}");

    // --listen onto the proxy's upstream: a loop, named with the route's line
    let proxy = example("proxy.toml");
    let (code, err) = check_with(&proxy, &["--listen", "127.0.0.1:8081"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--listen 127.0.0.1:8081: {}:{}: routes[0].proxy.upstreams[0] upstream `127.0.0.1:8081` is this address",
            proxy.display(),
            line_of(&proxy, "proxy = ")
        )),
        "{err}"
    );

    // without a file: the defaults plus the flag
    let mut cmd = ordo();
    cmd.args([
        "serve",
        "--policy",
        "lua",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "off",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--policy lua: needs --policy-script PATH"),
        "{}",
        out.stderr
    );
}

/// A file whose own values are wrong is still reported at its line, overrides or not.
#[test]
fn serve_file_errors_still_name_the_line_with_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loop.toml");
    std::fs::write(
        &p,
        "listen = \"127.0.0.1:18080\"\n\n[[routes]]\nprefix = \"/\"\nproxy = { upstreams = [\"localhost:18080\"] }\n",
    )
    .unwrap();
    let (code, err) = check_with(&p, &["--workers", "4"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:5: routes[0].proxy.upstreams[0]: `localhost:18080` is this server's own `listen` address",
            p.display()
        )),
        "{err}"
    );
}

/// `--policy-script` is relative to the directory the command runs in, not to the config file's.
#[test]
fn serve_policy_script_is_relative_to_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.toml");
    std::fs::write(&p, "workers = 2\n[admin]\nenabled = false\n").unwrap();
    let mut cmd = ordo();
    cmd.current_dir(example(""))
        .args(["serve", "--check"])
        .arg(&p)
        .args(["--policy", "lua", "--policy-script", "lua-policy.lua"]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stderr.contains("ok (policy lua"), "{}", out.stderr);

    // a file that says `policy = "lua"` and leaves the script to the command line
    std::fs::write(
        &p,
        "workers = 2\npolicy = \"lua\"\n[admin]\nenabled = false\n",
    )
    .unwrap();
    let (code, err) = check_with(&p, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("{}:2: policy: ", p.display())),
        "{err}"
    );
    let script = example("lua-policy.lua").display().to_string();
    let (code, err) = check_with(&p, &["--policy-script", &script]);
    assert_eq!(code, Some(0), "{err}");
}
