//! End-to-end tests of `ordo tune` (owned by the tune work; see docs/tune.md): every example's dry run;
//! errors naming file and line; a 2×2 experiment against the built-in ordo serve that is interrupted with
//! SIGINT, resumed, shown and exported; an experiment killed with SIGKILL half-way whose knobs (in a
//! temporary fake root) `ordo tune recover` restores.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::util::{ordo, run_with_timeout, wait_with_timeout};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tune")
}

#[test]
fn every_example_has_a_plan() {
    for name in [
        "seed000.toml",
        "seed001.toml",
        "seed002.toml",
        "tuned-profiles.toml",
        "nginx.toml",
        "seed001-sysbench.toml",
    ] {
        let d = tempfile::tempdir().unwrap();
        let mut cmd = ordo();
        cmd.args(["tune", "run", "--dry-run", "--no-progress", "--db"])
            .arg(d.path().join("t.db"))
            .arg(examples().join(name));
        let out = run_with_timeout(cmd, Duration::from_secs(60));
        assert_eq!(
            out.code(),
            Some(0),
            "{name}\n{}\n{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stdout.contains("configuration(s):"),
            "{name}: {}",
            out.stdout
        );
        assert!(
            out.stdout.contains("estimated duration"),
            "{name}: {}",
            out.stdout
        );
        assert!(
            out.stdout.contains("nothing was changed"),
            "{name}: {}",
            out.stdout
        );
        // A dry run starts no target, so per-thread knobs are not called "ok" without saying so.
        if name == "seed002.toml" {
            assert!(
                out.stdout
                    .contains("policy = [other, batch]  levels ok; checked against the target"),
                "{name}: {}",
                out.stdout
            );
        }
        // A dry run creates nothing.
        assert!(!d.path().join("t.db").exists(), "{name}");
    }
}

#[test]
fn bad_files_and_removed_knobs_exit_2_with_reasons() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("bad.toml");
    std::fs::write(
        &f,
        "[target]\nbuiltin = \"ordo-serve\"\n[[workload]]\nurl = \"http://127.0.0.1:{port}/\"\n[knobs]\n\"sysctl:vm.swappiness\" = [10, 10]\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--dry-run"]).arg(&f);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("bad.toml:6"), "{}", out.stderr);

    std::fs::write(
        &f,
        "[target]\nbuiltin = \"ordo-serve\"\n[[workload]]\nurl = \"http://127.0.0.1:{port}/\"\n[knobs]\n\"sysctl:kernel.sched_latency_ns\" = [1000000, 2000000]\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--dry-run"]).arg(&f);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("removed"), "{}", out.stderr);
    assert!(out.stderr.contains("base_slice_ns"), "{}", out.stderr);

    // A target PID that does not exist is a bad file too: exit 2, the key and the value named.
    std::fs::write(
        &f,
        "[target]\npid = 99999999\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n[knobs]\nnice = [0, 5]\n",
    )
    .unwrap();
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--dry-run"]).arg(&f);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("pid = 99999999"), "{}", out.stderr);

    // Not TOML: file and line, no empty key field.
    std::fs::write(&f, "not toml [\n").unwrap();
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--dry-run"]).arg(&f);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("bad.toml:1: "), "{}", out.stderr);
    assert!(!out.stderr.contains(": : "), "{}", out.stderr);

    // `show`, `list` and `export` on a file that is not a tune store name it and exit 2.
    let not_db = d.path().join("notes.db");
    std::fs::write(&not_db, "just some text, not SQLite\n").unwrap();
    for sub in ["show", "list", "export"] {
        let mut cmd = ordo();
        cmd.args(["tune", sub]).arg(&not_db);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        assert_eq!(out.code(), Some(2), "{sub}: {}", out.stderr);
        assert!(out.stderr.contains("notes.db"), "{sub}: {}", out.stderr);
        assert!(
            out.stderr.contains("not an ordo tune store"),
            "{sub}: {}",
            out.stderr
        );
    }
}

fn spawn(mut cmd: std::process::Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("spawn ordo")
}

fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn children_of(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if ppid == Some(&pid.to_string()) {
            out.push(p);
        }
    }
    out
}

const TWO_BY_TWO: &str = r#"
name = "two-by-two"
seed = 5

[target]
builtin = "ordo-serve"
args = ["--workers", "{workers}"]

[[workload]]
url = "http://127.0.0.1:{port}/cpu?us=100"
connections = 8
duration = "300ms"

[knobs]
"param:workers" = [4, 8]
nice = [0, 5]

[repeat]
min = 3
max = 3
ci = 0.5
"#;

#[test]
fn two_by_two_is_stored_interrupted_resumed_shown_and_exported() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("exp.toml");
    std::fs::write(&f, TWO_BY_TWO).unwrap();
    let db = d.path().join("t.db");

    // Interrupt with SIGINT once a few runs are stored.
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--no-progress", "--db"])
        .arg(&db)
        .arg(&f);
    let mut child = spawn(cmd);
    assert!(
        wait_for(Duration::from_secs(30), || {
            db.exists()
                && run_with_timeout(
                    {
                        let mut c = ordo();
                        c.args(["tune", "export", "--format", "csv"]).arg(&db);
                        c
                    },
                    Duration::from_secs(10),
                )
                .stdout
                .lines()
                .count()
                    > 3
        }),
        "runs are stored"
    );
    let targets = children_of(child.id());
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let st = wait_with_timeout(&mut child, Duration::from_secs(30)).expect("ordo stops on SIGINT");
    assert_eq!(st.code(), Some(130));
    // The target it had started is stopped too.
    for t in targets {
        assert!(
            !Path::new(&format!("/proc/{t}")).exists(),
            "target {t} still running"
        );
    }

    // Running the same file again resumes and finishes.
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--no-progress", "--db"])
        .arg(&db)
        .arg(&f);
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("resuming experiment 1"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("(finished)"), "{}", out.stdout);
    assert!(out.stdout.contains("best:"), "{}", out.stdout);
    assert!(!d.path().join("t.db.journal").exists());

    let mut cmd = ordo();
    cmd.args(["tune", "show"]).arg(&db);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("machine:"), "{}", out.stdout);
    assert!(out.stdout.contains("Welch"), "{}", out.stdout);

    let mut cmd = ordo();
    cmd.args(["tune", "export", "--format", "csv"]).arg(&db);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    let measured = out
        .stdout
        .lines()
        .skip(1)
        .filter(|l| l.contains(",false,true,"))
        .count();
    assert_eq!(measured, 15, "{}", out.stdout);

    let mut cmd = ordo();
    cmd.args(["tune", "export", "--format", "json"]).arg(&db);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["kind"], "tune-experiment");
    assert_eq!(
        v["experiment"]["configurations"].as_array().unwrap().len(),
        5
    );
}

#[test]
fn sigkill_half_way_then_recover_restores_every_value() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let w = |rel: &str, v: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    };
    w("proc/sys/vm/swappiness", "60\n");
    w("proc/sys/vm/dirty_ratio", "20\n");
    w("proc/sys/kernel/osrelease", "6.18.0\n");
    let f = d.path().join("exp.toml");
    std::fs::write(
        &f,
        r#"
[target]
builtin = "ordo-serve"
[[workload]]
url = "http://127.0.0.1:{port}/cpu?us=50"
connections = 4
duration = "20s"
[knobs]
"sysctl:vm.swappiness" = [10, 30]
"sysctl:vm.dirty_ratio" = [5]
nice = [3]
"#,
    )
    .unwrap();
    let db = d.path().join("t.db");
    let journal = d.path().join("j.jsonl");
    let mut cmd = ordo();
    cmd.args(["tune", "run", "--no-progress", "--sys-root"])
        .arg(&root)
        .arg("--db")
        .arg(&db)
        .arg("--journal")
        .arg(&journal)
        .arg(&f);
    let mut child = spawn(cmd);
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel))
            .unwrap()
            .trim()
            .to_string()
    };
    // Half-way: the first configuration's knobs are applied and its 20 s workload is running.
    assert!(
        wait_for(Duration::from_secs(30), || read("proc/sys/vm/swappiness")
            != "60"
            && read("proc/sys/vm/dirty_ratio") == "5"),
        "knobs applied"
    );
    let targets = children_of(child.id());
    child.kill().unwrap();
    let _ = child.wait();
    for t in targets {
        let _ = ordo_sys::process::kill_group(t);
    }
    assert_ne!(read("proc/sys/vm/swappiness"), "60");
    assert!(journal.exists());

    let mut cmd = ordo();
    cmd.args(["tune", "recover", "--journal"]).arg(&journal);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(read("proc/sys/vm/swappiness"), "60");
    assert_eq!(read("proc/sys/vm/dirty_ratio"), "20");
    // The target's threads died with it: restoring their nice value is moot, and said so.
    assert!(out.stdout.contains("moot"), "{}", out.stdout);
    assert!(!journal.exists());

    // A second recover has nothing to do.
    let mut cmd = ordo();
    cmd.args(["tune", "recover", "--journal"]).arg(&journal);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0));
    assert!(out.stdout.contains("nothing to restore"), "{}", out.stdout);
}
