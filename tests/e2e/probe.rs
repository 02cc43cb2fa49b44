//! End-to-end tests of `ordo probe` (owned by the probe work; see docs/probe.md): short loop runs in text
//! and JSON, a comparison, the pid view on a child process (running, then killed mid-run), and bad input.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{ordo, run_with_timeout, wait_with_timeout};

#[test]
fn probe_loop_text_shows_histogram_and_split() {
    let mut cmd = ordo();
    cmd.args([
        "probe",
        "loop",
        "--samples",
        "30",
        "--work",
        "1ms",
        "--buckets",
        "1,2,4",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for needle in [
        "elapsed relative to nominal",
        "≤1.1×",
        "1–2 ms",
        "where the time went",
        "involuntary switches",
    ] {
        assert!(
            out.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            out.stdout
        );
    }
}

#[test]
fn probe_loop_json_has_kind_samples_and_fingerprint() {
    let mut cmd = ordo();
    cmd.args([
        "probe",
        "loop",
        "--samples",
        "25",
        "--work",
        "1ms",
        "--json",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON document");
    assert_eq!(v["kind"], "probe-loop");
    assert_eq!(v["version"], 1);
    assert_eq!(v["samples"].as_array().unwrap().len(), 25);
    assert!(v["summary"]["elapsed_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert!(v["fingerprint"]["kernel_release"].as_str().is_some());
}

#[test]
fn probe_loop_compare_pinned_json() {
    let mut cmd = ordo();
    cmd.args([
        "probe",
        "loop",
        "--compare",
        "--samples",
        "20",
        "--work",
        "1ms",
        "--cpu",
        "0",
        "--load",
        "1",
        "--json",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(v["kind"], "probe-compare");
    assert_eq!(v["columns"].as_array().unwrap().len(), 2);
    assert_eq!(v["columns"][0], "quiet");
    assert_eq!(v["runs"][1]["config"]["load"]["threads"], 1);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
}

#[test]
fn probe_pid_reports_a_childs_switches_as_json_lines() {
    let mut child = Command::new("sh")
        .args(["-c", "while :; do sleep 0.01; done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut cmd = ordo();
    cmd.args([
        "probe",
        "pid",
        &child.id().to_string(),
        "--interval",
        "200ms",
        "--duration",
        "1s",
        "--json",
    ]);
    let out = run_with_timeout(cmd, Duration::from_secs(20));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let lines: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(lines.len() >= 3, "{} lines", lines.len());
    assert!(lines.iter().all(|l| l["kind"] == "probe-pid"));
    let vol: f64 = lines
        .iter()
        .map(|l| l["process"]["voluntary_per_s"].as_f64().unwrap())
        .sum();
    assert!(
        vol > 10.0,
        "voluntary switches/s summed over intervals: {vol}"
    );
}

#[test]
fn probe_pid_text_stops_cleanly_when_the_process_is_killed() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let mut probe = ordo()
        .args([
            "probe",
            "pid",
            &child.id().to_string(),
            "--interval",
            "100ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    child.kill().unwrap();
    child.wait().unwrap();
    let start = Instant::now();
    let status =
        wait_with_timeout(&mut probe, Duration::from_secs(5)).expect("probe stops after the exit");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(0));
    let mut stderr = String::new();
    let mut stdout = String::new();
    use std::io::Read;
    probe
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    probe
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(stderr.contains("exited"), "{stderr}");
    assert!(stdout.contains("CPU%"), "{stdout}");
}

#[test]
fn probe_bad_input_exits_2_with_a_message() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["probe", "pid", "99999999"],
            "no process with PID 99999999",
        ),
        (&["probe", "loop", "--buckets", "5,2"], "increase"),
        (
            &["probe", "loop", "--policy", "fifo:0"],
            "invalid scheduling policy",
        ),
        (&["probe", "loop", "--samples", "0"], "--samples"),
        (
            &[
                "probe",
                "loop",
                "--samples",
                "2",
                "--load-cmd",
                "ordo_no_such_command_xyz",
            ],
            "command not found",
        ),
    ];
    for (args, needle) in cases {
        let mut cmd = ordo();
        cmd.args(args);
        let out = run_with_timeout(cmd, Duration::from_secs(20));
        assert_eq!(out.code(), Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
}

/// A running `ordo` whose stdout and stderr are collected as they arrive, for the Ctrl-C tests.
struct Live {
    child: std::process::Child,
    out: std::sync::Arc<std::sync::Mutex<String>>,
    err: std::sync::Arc<std::sync::Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Live {
    fn start(args: &[&str]) -> Live {
        Live::start_with(args, false)
    }

    /// With `own_group`, ordo leads a process group of its own, as a shell's foreground job does, so
    /// `signal_group` can play a terminal's Ctrl-C (a signal to every process in the group).
    fn start_with(args: &[&str], own_group: bool) -> Live {
        let mut cmd = ordo();
        if own_group {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let collect = |mut r: Box<dyn std::io::Read + Send>,
                       into: std::sync::Arc<std::sync::Mutex<String>>| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    into.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        };
        let readers = vec![
            collect(Box::new(child.stdout.take().unwrap()), out.clone()),
            collect(Box::new(child.stderr.take().unwrap()), err.clone()),
        ];
        Live {
            child,
            out,
            err,
            readers,
        }
    }

    /// Wait (bounded) until `f` holds for what stdout and stderr have so far.
    fn wait_for(&self, what: &str, limit: Duration, f: impl Fn(&str, &str) -> bool) {
        let start = Instant::now();
        loop {
            if f(&self.out.lock().unwrap(), &self.err.lock().unwrap()) {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "no {what} within {limit:?}; stderr:\n{}",
                self.err.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, sig: &str) {
        self.kill(sig, &self.child.id().to_string());
    }

    /// Signal ordo's whole process group (only after `start_with(.., true)`).
    fn signal_group(&self, sig: &str) {
        self.kill(sig, &format!("-{}", self.child.id()));
    }

    fn kill(&self, sig: &str, target: &str) {
        let ok = Command::new("kill")
            .args([sig, "--", target])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    /// Wait (bounded) for the exit; its code (None = killed by a signal), stdout and stderr.
    fn finish(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let status = wait_with_timeout(&mut self.child, limit);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.out.lock().unwrap().clone();
        let err = self.err.lock().unwrap().clone();
        let status = status.unwrap_or_else(|| panic!("no exit within {limit:?}; stderr:\n{err}"));
        (status.code(), out, err)
    }
}

/// A load command that reports the PID of the process it forks (a `sleep 30`), so the test can check
/// that an interrupted probe leaves nothing running.
fn load_cmd_with_pidfile(pidfile: &std::path::Path) -> String {
    format!("sleep 30 & echo $! > '{}'; wait", pidfile.display())
}

fn read_pid(path: &std::path::Path, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            return p;
        }
        assert!(start.elapsed() < limit, "the load command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn probe_loop_ctrl_c_prints_a_partial_json_report_and_kills_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let load = load_cmd_with_pidfile(&pidfile);
    let live = Live::start(&[
        "probe",
        "loop",
        "--samples",
        "100000",
        "--work",
        "1ms",
        "--warmup",
        "0",
        "--load-cmd",
        &load,
        "--json",
    ]);
    // The load starts right before the first sample (after the signal handler is in place).
    let sleep_pid = read_pid(&pidfile, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    live.signal("-INT");
    let (code, out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON document");
    assert_eq!(v["kind"], "probe-loop");
    assert_eq!(v["interrupted"], true);
    let n = v["samples"].as_array().unwrap().len();
    assert!(n > 0 && n < 100_000, "{n} samples");
    assert_eq!(v["summary"]["samples"], n);
    assert_eq!(v["config"]["samples"], 100_000);
    assert!(v["summary"]["elapsed_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert!(
        err.contains(&format!("interrupted after {n} of 100000 samples")),
        "{err}"
    );
    assert!(
        ordo_sys::process::exited_within(sleep_pid, Duration::from_secs(5)),
        "the load's sleep (pid {sleep_pid}) is still running"
    );
}

#[test]
fn probe_loop_ctrl_c_text_report_is_marked_partial() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let load = load_cmd_with_pidfile(&pidfile);
    let live = Live::start(&[
        "probe",
        "loop",
        "--samples",
        "100000",
        "--work",
        "1ms",
        "--warmup",
        "0",
        "--buckets",
        "1,2,4",
        "--load-cmd",
        &load,
    ]);
    let sleep_pid = read_pid(&pidfile, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    live.signal("-TERM");
    let (code, out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    assert!(out.contains("of 100000 samples — partial report"), "{out}");
    for needle in [
        "elapsed relative to nominal",
        "1–2 ms",
        "where the time went",
        "slowest sample",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(ordo_sys::process::exited_within(
        sleep_pid,
        Duration::from_secs(5)
    ));
}

#[test]
fn probe_compare_ctrl_c_in_the_first_run_says_the_comparison_did_not_run() {
    let live = Live::start(&[
        "probe",
        "loop",
        "--compare",
        "--samples",
        "100000",
        "--work",
        "1ms",
        "--load",
        "1",
        "--json",
    ]);
    live.wait_for("first run", Duration::from_secs(20), |_, err| {
        err.contains("running quiet")
    });
    std::thread::sleep(Duration::from_millis(500));
    live.signal("-INT");
    let (code, out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("the comparison did not run"), "{err}");
    assert!(!err.contains("running loaded"), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["kind"], "probe-compare");
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
    assert_eq!(v["runs"][0]["interrupted"], true);
    assert_eq!(v["not_run"][0], "loaded (1 busy thread)");
}

#[test]
fn probe_compare_ctrl_c_in_the_second_run_reports_both() {
    // 300 samples of 1 ms of CPU: the loaded run cannot finish in the 100 ms before the signal.
    let live = Live::start(&[
        "probe",
        "loop",
        "--compare",
        "--samples",
        "300",
        "--work",
        "1ms",
        "--load",
        "1",
    ]);
    live.wait_for("second run", Duration::from_secs(30), |_, err| {
        err.contains("running loaded")
    });
    std::thread::sleep(Duration::from_millis(100));
    live.signal("-INT");
    let (code, out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    assert!(out.contains("Time range"), "{out}");
    assert!(out.contains("quiet"), "{out}");
    assert!(
        out.contains("loaded (1 busy thread) (partial, "),
        "the second column is marked partial:\n{out}"
    );
    assert!(!out.contains("did not run"), "{out}");
}

#[test]
fn probe_pid_ctrl_c_reports_the_last_interval_and_exits_130() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let live = Live::start(&[
        "probe",
        "pid",
        &child.id().to_string(),
        "--interval",
        "300ms",
        "--json",
    ]);
    live.wait_for("first interval", Duration::from_secs(20), |out, _| {
        out.lines().count() >= 1
    });
    // Into the second interval, so the cut-short one is long enough (≥ 10 ms) to be reported.
    std::thread::sleep(Duration::from_millis(100));
    live.signal("-INT");
    let (code, out, err) = live.finish(Duration::from_secs(10));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, Some(130), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(lines.len() >= 2, "{out}");
    let (last, earlier) = lines.split_last().unwrap();
    assert_eq!(last["interrupted"], true);
    assert!(earlier.iter().all(|l| l["interrupted"] == false));
    assert!(err.contains("interrupted after"), "{err}");
}

#[test]
fn probe_loop_second_ctrl_c_exits_at_once_and_leaves_no_load() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let load = load_cmd_with_pidfile(&pidfile);
    let live = Live::start(&[
        "probe",
        "loop",
        "--samples",
        "100000",
        "--work",
        "1ms",
        "--load-cmd",
        &load,
    ]);
    let sleep_pid = read_pid(&pidfile, Duration::from_secs(20));
    live.signal("-INT");
    live.signal("-INT");
    // Whichever comes first — the report after the first signal or the exit on the second — the exit
    // code is 130 and the load command's process tree is gone.
    let (code, _out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    assert!(
        ordo_sys::process::exited_within(sleep_pid, Duration::from_secs(5)),
        "the load's sleep (pid {sleep_pid}) is still running"
    );
}

#[test]
fn probe_loop_terminal_ctrl_c_leaves_nothing_the_load_command_started() {
    // A terminal's Ctrl-C signals the whole foreground group. The load command's shell must not die
    // of it first, orphaning its background `sleep` out of ordo's reach (a non-interactive shell's
    // background jobs ignore SIGINT): the load runs in a group of its own, which ordo kills.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let load = load_cmd_with_pidfile(&pidfile);
    let live = Live::start_with(
        &[
            "probe",
            "loop",
            "--samples",
            "100000",
            "--work",
            "1ms",
            "--load-cmd",
            &load,
        ],
        true,
    );
    let sleep_pid = read_pid(&pidfile, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    live.signal_group("-INT");
    let (code, out, err) = live.finish(Duration::from_secs(20));
    assert_eq!(code, Some(130), "{err}");
    assert!(out.contains("partial report"), "{out}");
    assert!(!out.contains("warning: the load command exited"), "{out}");
    assert!(
        ordo_sys::process::exited_within(sleep_pid, Duration::from_secs(5)),
        "the load's background sleep (pid {sleep_pid}) is still running"
    );
}
