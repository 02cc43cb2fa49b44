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
