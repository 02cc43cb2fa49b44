//! End-to-end tests of `ordo tune` (owned by the tune work; see docs/tune.md): every example's dry run;
//! errors naming file and line; a 2×2 experiment against the built-in ordo serve that is interrupted with
//! SIGINT, resumed, shown and exported; an experiment killed with SIGKILL half-way whose knobs (in a
//! temporary fake root) `ordo tune recover` restores; `ordo tune resume` after SIGINT and after SIGKILL
//! (+ recover), from another directory, counted against the plan, and on finished, missing and foreign files.

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
        "search.toml",
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
        // A search lists its baseline and says how many it will try.
        assert!(
            out.stdout.contains("configuration(s):") || out.stdout.contains("search: at most"),
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
        if name == "search.toml" {
            assert!(
                out.stdout.contains("search: at most 11 configuration(s)"),
                "{}",
                out.stdout
            );
            assert!(!out.stdout.contains("would refuse"), "{}", out.stdout);
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
    // The resume hint names the store it used (issue 13: it dropped --db, so following it resumed nothing).
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains(&format!(
            "Resume with `ordo tune run {} --db {}`",
            f.display(),
            db.display()
        )),
        "{stderr}"
    );
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
    // Five configurations, three pilot and three confirmatory runs each.
    assert_eq!(measured, 30, "{}", out.stdout);

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
    assert!(!targets.is_empty());
    child.kill().unwrap();
    let _ = child.wait();
    // Whatever happens below, leave no target behind.
    struct Reap(Vec<i32>);
    impl Drop for Reap {
        fn drop(&mut self) {
            for &t in &self.0 {
                let _ = ordo_sys::process::kill_group(t);
            }
        }
    }
    let _reap = Reap(targets.clone());
    assert_ne!(read("proc/sys/vm/swappiness"), "60");
    assert!(journal.exists());
    // SIGKILL leaves the target running (issue 13 defect 3)...
    assert!(targets.iter().all(|&t| !ordo_sys::process::exited(t)));

    let mut cmd = ordo();
    cmd.args(["tune", "recover", "--journal"]).arg(&journal);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(read("proc/sys/vm/swappiness"), "60");
    assert_eq!(read("proc/sys/vm/dirty_ratio"), "20");
    // ...and recover stops it (after restoring its threads' nice value), saying so.
    for t in &targets {
        assert!(
            ordo_sys::process::exited_within(*t, Duration::from_secs(10)),
            "target {t} still running\n{}",
            out.stdout
        );
        assert!(
            out.stdout.contains(&format!("stopped pid:{t}")),
            "{}",
            out.stdout
        );
    }
    assert!(
        out.stdout.contains("restored nice on tid:"),
        "{}",
        out.stdout
    );
    assert!(!journal.exists());

    // A second recover has nothing to do.
    let mut cmd = ordo();
    cmd.args(["tune", "recover", "--journal"]).arg(&journal);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0));
    assert!(out.stdout.contains("nothing to restore"), "{}", out.stdout);
}

// ---- `ordo tune resume` ------------------------------------------------------------------------------

/// Three configurations (baseline; workers 1 and 2 with swappiness 10 in a fake root) × exactly 3 runs.
/// The target's config is named relative to the file, so a resume from another directory must find it.
const RESUMABLE: &str = r#"
name = "resumable"
seed = 11

[target]
builtin = "ordo-serve"
config = "serve.toml"
args = ["--workers", "{workers}"]

[[workload]]
url = "http://127.0.0.1:{port}/cpu?us=50"
connections = 2
duration = "250ms"

[knobs]
"param:workers" = [1, 2]
"sysctl:vm.swappiness" = [10]

[repeat]
min = 3
max = 3
ci = 0.5
"#;

/// Three pilot runs (min = max = 3), then three confirmatory ones.
const PER_CONFIG: usize = 6;

/// A work area: the experiment (exp/exp.toml + exp/serve.toml), a fake root whose vm.swappiness is 60,
/// and another directory to resume from.
struct ResumeCase {
    _d: tempfile::TempDir,
    exp_dir: PathBuf,
    other_dir: PathBuf,
    root: PathBuf,
    db: PathBuf,
    journal: PathBuf,
}

impl ResumeCase {
    fn new() -> ResumeCase {
        let d = tempfile::tempdir().unwrap();
        let exp_dir = d.path().join("exp");
        let other_dir = d.path().join("elsewhere");
        let root = d.path().join("root");
        for (rel, v) in [
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/kernel/osrelease", "6.18.0\n"),
        ] {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        }
        std::fs::create_dir_all(&exp_dir).unwrap();
        std::fs::create_dir_all(&other_dir).unwrap();
        std::fs::write(exp_dir.join("exp.toml"), RESUMABLE).unwrap();
        std::fs::write(
            exp_dir.join("serve.toml"),
            "workers = 4\npolicy = \"fcfs\"\n[[routes]]\nprefix = \"/\"\nsynthetic = {}\n",
        )
        .unwrap();
        ResumeCase {
            db: d.path().join("t.db"),
            journal: d.path().join("t.db.journal"),
            exp_dir,
            other_dir,
            root,
            _d: d,
        }
    }

    fn swappiness(&self) -> String {
        std::fs::read_to_string(self.root.join("proc/sys/vm/swappiness"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// `ordo tune run exp.toml` started in the experiment's directory (a relative file name).
    fn start_run(&self) -> Child {
        let mut cmd = ordo();
        cmd.current_dir(&self.exp_dir)
            .args(["tune", "run", "--no-progress", "--sys-root"])
            .arg(&self.root)
            .arg("--db")
            .arg(&self.db)
            .arg("exp.toml");
        spawn(cmd)
    }

    /// `ordo tune resume` from another directory.
    fn resume_cmd(&self) -> std::process::Command {
        let mut cmd = ordo();
        cmd.current_dir(&self.other_dir)
            .args(["tune", "resume", "--no-progress", "--sys-root"])
            .arg(&self.root)
            .arg("--db")
            .arg(&self.db);
        cmd
    }

    fn resume(&self) -> crate::util::Output {
        run_with_timeout(self.resume_cmd(), Duration::from_secs(60))
    }

    /// The stored experiment (read through ordo_tune's store, read-only), or None before it exists.
    fn stored(&self) -> Option<ordo_tune::store::ExperimentData> {
        if !self.db.exists() {
            return None;
        }
        let store = ordo_tune::store::Store::open_read_only(&self.db).ok()?;
        let id = store.latest().ok()?;
        store.load(id).ok()
    }

    /// Stop targets left by a killed `ordo tune run` (they inherited its working directory, exp/).
    fn kill_orphaned_targets(&self) {
        let dir = self.exp_dir.canonicalize().unwrap();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if std::fs::read_link(format!("/proc/{p}/cwd")).is_ok_and(|c| c == dir) {
                let _ = ordo_sys::process::kill_group(p);
            }
        }
    }

    /// Wait (bounded) until at least one run is stored, then return the child's target processes.
    fn wait_for_first_run(&self, child: &mut Child) -> Vec<i32> {
        let stored = wait_for(Duration::from_secs(30), || {
            self.stored().is_some_and(|e| !e.runs.is_empty())
        });
        if !stored {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no run was stored within 30 s");
        }
        children_of(child.id())
    }
}

/// (block, configuration, started) of every run, sorted: the identity of each stored run.
fn run_keys(e: &ordo_tune::store::ExperimentData) -> Vec<(usize, usize, i64)> {
    let mut v: Vec<_> = e
        .runs
        .iter()
        .map(|r| (r.block, r.config, r.started_unix_ms))
        .collect();
    v.sort();
    v
}

/// The finished experiment follows the plan: every configuration exactly PER_CONFIG measured runs, one per
/// block, nothing repeated, every run before the interruption kept as it was.
fn assert_complete(e: &ordo_tune::store::ExperimentData, before: &[(usize, usize, i64)]) {
    assert_eq!(e.experiment.status, "finished");
    let n = e.configurations.len();
    assert_eq!(n, 3, "{:?}", e.configurations);
    assert_eq!(e.runs.len(), n * PER_CONFIG, "{:?}", run_keys(e));
    for c in 0..n {
        let mut blocks: Vec<usize> = e
            .runs
            .iter()
            .filter(|r| r.config == c)
            .map(|r| r.block)
            .collect();
        blocks.sort();
        assert_eq!(
            blocks,
            (0..PER_CONFIG).collect::<Vec<_>>(),
            "configuration {c}"
        );
        assert_eq!(e.values(c, "score").len(), PER_CONFIG, "configuration {c}");
    }
    let after = run_keys(e);
    for k in before {
        assert!(
            after.contains(k),
            "run {k:?} from before the interruption was lost or redone"
        );
    }
}

fn assert_shows(db: &Path) {
    let mut cmd = ordo();
    cmd.args(["tune", "show"]).arg(db);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Welch"), "{}", out.stdout);
    assert!(out.stdout.contains("best:"), "{}", out.stdout);
}

#[test]
fn resume_after_sigint_keeps_the_runs_done_and_finishes_the_plan() {
    let c = ResumeCase::new();
    let mut child = c.start_run();
    let targets = c.wait_for_first_run(&mut child);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let st = wait_with_timeout(&mut child, Duration::from_secs(30)).expect("ordo stops on SIGINT");
    assert_eq!(st.code(), Some(130));
    for t in targets {
        assert!(
            !Path::new(&format!("/proc/{t}")).exists(),
            "target {t} still running"
        );
    }
    // A consistent store: interrupted, some but not all runs, every knob restored, no journal left.
    let e = c.stored().expect("stored");
    assert_eq!(e.experiment.status, "interrupted");
    let before = run_keys(&e);
    assert!(
        !before.is_empty() && before.len() < 3 * PER_CONFIG,
        "{before:?}"
    );
    assert_eq!(c.swappiness(), "60");
    assert!(!c.journal.exists());

    let out = c.resume();
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "resuming experiment 1 ({} run(s) already stored)",
            before.len()
        )),
        "{}",
        out.stdout
    );
    // One line per run done now: exactly the runs that were missing.
    let lines = out.stdout.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(lines, 3 * PER_CONFIG - before.len(), "{}", out.stdout);
    assert_complete(&c.stored().unwrap(), &before);
    assert_eq!(c.swappiness(), "60");
    assert!(!c.journal.exists());
    assert_shows(&c.db);

    // Resuming a finished store: nothing to do, said with the file's name; exit 1; the store unchanged.
    let out = c.resume();
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("t.db: nothing to resume"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("finished"), "{}", out.stderr);
    assert_eq!(c.stored().unwrap().runs.len(), 3 * PER_CONFIG);
}

#[test]
fn resume_after_sigkill_needs_recover_first_then_finishes_the_plan() {
    // Kill it while a configuration's knob is applied (two of the three set swappiness to 10). The kill
    // can land just after the run restored the knob (a window of about a millisecond in a 250 ms run);
    // then the scenario is started again on a fresh store, at most three times.
    let mut attempt = 0;
    let c = loop {
        attempt += 1;
        let c = ResumeCase::new();
        let mut child = c.start_run();
        c.wait_for_first_run(&mut child);
        let applied = wait_for(Duration::from_secs(30), || c.swappiness() == "10");
        child.kill().unwrap();
        let _ = child.wait();
        // Its target outlives it (now orphaned): found by the config path on its command line.
        c.kill_orphaned_targets();
        assert!(applied, "a configuration with swappiness 10 ran");
        if c.swappiness() == "10" || attempt == 3 {
            break c;
        }
    };
    assert_eq!(c.swappiness(), "10", "killed while the knob was applied");
    assert!(c.journal.exists());
    let e = c.stored().expect("stored");
    // Nobody marked it: the status stays "running" (resumable), the run in progress is not stored.
    assert_eq!(e.experiment.status, "running");
    let before = run_keys(&e);
    assert!(
        !before.is_empty() && before.len() < 3 * PER_CONFIG,
        "{before:?}"
    );

    // The journal still holds a change: resume refuses (exit 1), names the journal and `recover`.
    let out = c.resume();
    assert_eq!(out.code(), Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("t.db.journal"), "{}", out.stderr);
    assert!(out.stderr.contains("ordo tune recover"), "{}", out.stderr);
    assert_eq!(c.swappiness(), "10");
    assert_eq!(run_keys(&c.stored().unwrap()), before);

    let mut cmd = ordo();
    cmd.args(["tune", "recover", "--journal"]).arg(&c.journal);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(c.swappiness(), "60");

    // The resume itself interrupted (SIGINT once it has stored a run): 130, resumable again, runs kept.
    assert!(
        before.len() <= 7,
        "too few runs left to interrupt: {before:?}"
    );
    let mut child = spawn(c.resume_cmd());
    let more = wait_for(Duration::from_secs(30), || {
        c.stored().is_some_and(|e| e.runs.len() > before.len())
    });
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let st =
        wait_with_timeout(&mut child, Duration::from_secs(30)).expect("resume stops on SIGINT");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(more, "the resume stored a run");
    assert_eq!(st.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("Resume with `ordo tune resume --db"),
        "{stderr}"
    );
    let e = c.stored().unwrap();
    assert_eq!(e.experiment.status, "interrupted");
    let before = run_keys(&e);
    assert_eq!(c.swappiness(), "60");
    assert!(!c.journal.exists());

    let out = c.resume();
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!(
            "resuming experiment 1 ({} run(s) already stored)",
            before.len()
        )),
        "{}",
        out.stdout
    );
    assert_complete(&c.stored().unwrap(), &before);
    assert_eq!(c.swappiness(), "60");
    assert!(!c.journal.exists());
    assert_shows(&c.db);
}

#[test]
fn resume_of_a_missing_or_foreign_file_names_it_exits_2_and_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let resume = |db: &Path| {
        let mut cmd = ordo();
        cmd.args(["tune", "resume", "--no-progress", "--db"])
            .arg(db);
        run_with_timeout(cmd, Duration::from_secs(30))
    };
    let missing = d.path().join("missing.db");
    let out = resume(&missing);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("missing.db: no such database"),
        "{}",
        out.stderr
    );
    assert!(!missing.exists(), "resume created {}", missing.display());

    let garbage = d.path().join("notes.db");
    std::fs::write(&garbage, "just some text, not SQLite\n").unwrap();
    let out = resume(&garbage);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("notes.db: not an ordo tune store"),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(&garbage).unwrap(),
        "just some text, not SQLite\n"
    );

    // A truncated store (header intact, pages lost) is refused the same way, and left as it was.
    let db = d.path().join("t.db");
    drop(ordo_tune::store::Store::open(&db).unwrap());
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 100);
    bytes.truncate(100);
    std::fs::write(&db, &bytes).unwrap();
    let out = resume(&db);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("t.db: not an ordo tune store"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read(&db).unwrap(), bytes);
}

/// Two `ordo tune` processes on one journal would record each other's applied values as originals (and
/// could leave the machine changed); `recover` under a running experiment would restore its knobs under its
/// feet. While one runs, the other is refused and changes nothing.
#[test]
fn a_second_tune_on_the_same_journal_is_refused_while_the_first_runs() {
    let c = ResumeCase::new();
    let mut first = c.start_run();
    c.wait_for_first_run(&mut first);
    let before = c.stored().unwrap().runs.len();

    let second = run_with_timeout(
        {
            let mut cmd = ordo();
            cmd.current_dir(&c.exp_dir)
                .args(["tune", "run", "--no-progress", "--sys-root"])
                .arg(&c.root)
                .arg("--db")
                .arg(&c.db)
                .arg("exp.toml");
            cmd
        },
        Duration::from_secs(60),
    );
    let recover = run_with_timeout(
        {
            let mut cmd = ordo();
            cmd.args(["tune", "recover", "--journal"]).arg(&c.journal);
            cmd
        },
        Duration::from_secs(30),
    );
    let alive = first.try_wait().unwrap().is_none();
    let _ = std::process::Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status();
    let st = wait_with_timeout(&mut first, Duration::from_secs(30)).expect("first run stops");
    c.kill_orphaned_targets();
    if !alive {
        // the first experiment ended before the others were tried: nothing was in use
        eprintln!("skipped: the first run finished before the second started");
        return;
    }
    for (what, out) in [("run", &second), ("recover", &recover)] {
        assert_ne!(
            out.code(),
            Some(0),
            "{what}: {}\n{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stderr.contains("in use by another running `ordo tune`"),
            "{what}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("t.db.journal"),
            "{what}: {}",
            out.stderr
        );
    }
    assert_eq!(st.code(), Some(130));
    assert_eq!(c.swappiness(), "60", "the first run restored its knob");
    let e = c.stored().unwrap();
    assert!(e.runs.len() >= before);
    // the refused run stored no experiment of its own
    let store = ordo_tune::store::Store::open_read_only(&c.db).unwrap();
    assert_eq!(store.latest().unwrap(), e.experiment.id);
}

/// Issue 13 defect 1: two experiments on the same sysctl, each with its own --db (as the docs advise),
/// each journalled the other's value as the original; both exited 0 and the knob stayed changed. The
/// second is refused naming the first, and the knob ends at its value from before the first.
#[test]
fn a_second_experiment_on_the_same_knob_with_its_own_db_is_refused_naming_the_first() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    for (rel, v) in [
        ("proc/sys/vm/swappiness", "60\n"),
        ("proc/sys/kernel/osrelease", "6.18.0\n"),
    ] {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(rel), v).unwrap();
    }
    let swappiness = || {
        std::fs::read_to_string(root.join("proc/sys/vm/swappiness"))
            .unwrap()
            .trim()
            .to_string()
    };
    let file = |name: &str, level: u32, duration: &str| {
        let f = d.path().join(name);
        std::fs::write(
            &f,
            format!(
                "[target]\nbuiltin = \"ordo-serve\"\n[[workload]]\nurl = \"http://127.0.0.1:{{port}}/cpu?us=50\"\nconnections = 2\nduration = \"{duration}\"\n[knobs]\n\"sysctl:vm.swappiness\" = [{level}, {}]\n[baseline]\n\"sysctl:vm.swappiness\" = {level}\n[repeat]\nmin = 3\nmax = 3\nci = 0.5\n",
                level + 1
            ),
        )
        .unwrap();
        f
    };
    let (long, short) = (
        file("long.toml", 10, "30s"),
        file("short.toml", 30, "200ms"),
    );
    let run = |f: &Path, db: &str| {
        let mut cmd = ordo();
        cmd.args(["tune", "run", "--no-progress", "--sys-root"])
            .arg(&root)
            .arg("--db")
            .arg(d.path().join(db))
            .arg(f);
        cmd
    };
    let mut first = spawn(run(&long, "first.db"));
    // Stop it (it restores its knob) however this test ends.
    struct Interrupt(u32);
    impl Drop for Interrupt {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-INT", &self.0.to_string()])
                .status();
        }
    }
    let _stop = Interrupt(first.id());
    assert!(
        wait_for(Duration::from_secs(30), || swappiness() != "60"),
        "the first run applied a level"
    );
    let second = run_with_timeout(run(&short, "second.db"), Duration::from_secs(60));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status();
    let st = wait_with_timeout(&mut first, Duration::from_secs(30)).expect("first run stops");
    assert_ne!(
        second.code(),
        Some(0),
        "{}\n{}",
        second.stdout,
        second.stderr
    );
    assert!(
        second.stderr.contains("sysctl:vm.swappiness"),
        "{}",
        second.stderr
    );
    assert!(
        second
            .stderr
            .contains(&format!("in use by ordo tune (pid {}", first.id())),
        "{}",
        second.stderr
    );
    assert!(
        second.stderr.contains("first.db.journal"),
        "{}",
        second.stderr
    );
    // The refused one changed nothing and stored nothing.
    assert!(!d.path().join("second.db.journal").exists());
    assert!(!d.path().join("second.db").exists());
    assert_eq!(st.code(), Some(130));
    assert_eq!(
        swappiness(),
        "60",
        "the knob is back at its value from before the first run"
    );
}

/// The experiment file stored with `small_store`'s experiments.
const SMALL_SPEC: &str = "[target]\nbuiltin = \"ordo-serve\"\n[workload]\nurl = \"http://127.0.0.1:{port}/\"\nconnections = 10\n[knobs]\nnice = [0, 5]\n";

/// A store holding one finished experiment over `nice` with these levels; `shift` moves every run's score.
fn small_store(path: &Path, levels: &[&str], shift: f64) {
    small_store_of(path, levels, shift, SMALL_SPEC)
}

fn small_store_of(path: &Path, levels: &[&str], shift: f64, spec: &str) {
    use ordo_tune::design::Configuration;
    use ordo_tune::store::{ExperimentMeta, NewRun, Store};
    let mut s = Store::open(path).unwrap();
    let meta = ExperimentMeta {
        knobs: vec![(
            "nice".into(),
            levels.iter().map(|l| l.to_string()).collect(),
        )],
        objective: "maximize".into(),
        score_terms: vec![("web.throughput".into(), 1.0)],
        min_runs: 3,
        max_runs: 3,
        rel_ci: 0.02,
        ..Default::default()
    };
    let configs: Vec<Configuration> = std::iter::once(Configuration {
        label: "baseline (machine defaults)".into(),
        values: Default::default(),
        is_baseline: true,
    })
    .chain(levels.iter().map(|l| Configuration {
        label: format!("nice={l}"),
        values: [("nice".to_string(), l.to_string())].into(),
        is_baseline: false,
    }))
    .collect();
    let id = s
        .create_experiment("kernels", "k.toml", spec, 1, &meta, &configs, None)
        .unwrap();
    for c in 0..configs.len() {
        for (b, noise) in [0.0, 2.0, -2.0].iter().enumerate() {
            let v = 1000.0 + shift * c as f64 + noise;
            s.record_run(
                id,
                &NewRun {
                    config: c,
                    block: b,
                    warmup: false,
                    started_unix_ms: 0,
                    duration_s: 1.0,
                    error: None,
                    metrics: [("web.throughput".to_string(), v)].into(),
                },
            )
            .unwrap();
        }
    }
    s.set_status(id, "finished").unwrap();
}

/// Kernel against kernel: two stores of one experiment merge into one and compare per configuration;
/// a store of another experiment is refused with the reason, exit 2, nothing written.
#[test]
fn merge_and_compare_two_stores_of_one_experiment() {
    let d = tempfile::tempdir().unwrap();
    let (a, b, other) = (
        d.path().join("k6.8.db"),
        d.path().join("k6.12.db"),
        d.path().join("other.db"),
    );
    small_store(&a, &["0", "5"], 0.0);
    small_store(&b, &["0", "5"], 100.0);
    small_store(&other, &["0", "10"], 0.0);
    let merged = d.path().join("kernels.db");
    let mut cmd = ordo();
    cmd.args(["tune", "merge"])
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&merged);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("experiment 1 -> "), "{}", out.stdout);

    let mut cmd = ordo();
    cmd.args(["tune", "compare"]).arg(&merged);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "Welch's t-test on each side's confirmatory runs, Holm-corrected over 3 configurations"
        ),
        "{}",
        out.stdout
    );
    let line = |label: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("baseline").ends_with("no significant difference"),
        "{}",
        out.stdout
    );
    assert!(line("nice=0").ends_with("SIGNIFICANT"), "{}", out.stdout);
    // The same comparison straight from the two stores, as JSON.
    let mut cmd = ordo();
    cmd.args(["tune", "compare", "--json"]).arg(&a).arg(&b);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["kind"], "tune-comparison");
    assert_eq!(v["comparison"]["configs"][2]["significant"], true);

    let refused = d.path().join("refused.db");
    let mut cmd = ordo();
    cmd.args(["tune", "merge"])
        .arg(&a)
        .arg(&other)
        .arg("-o")
        .arg(&refused);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("other.db"), "{}", out.stderr);
    assert!(out.stderr.contains("the knobs differ"), "{}", out.stderr);
    assert!(!refused.exists());
}

/// Issue 24: a store with another workload merged and compared as if it were the same experiment. It is
/// refused (exit 2, naming the difference); `--force` merges and compares with a warning on every output.
#[test]
fn another_workload_is_refused_and_force_warns_on_every_output() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.db"), d.path().join("b.db"));
    small_store(&a, &["0", "5"], 0.0);
    small_store_of(
        &b,
        &["0", "5"],
        100.0,
        &SMALL_SPEC.replace("connections = 10", "connections = 1000"),
    );
    let merged = d.path().join("ab.db");
    let merge = |force: bool| {
        let mut cmd = ordo();
        cmd.args(["tune", "merge"])
            .arg(&a)
            .arg(&b)
            .arg("-o")
            .arg(&merged);
        if force {
            cmd.arg("--force");
        }
        run_with_timeout(cmd, Duration::from_secs(30))
    };
    let out = merge(false);
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("workload: the workloads differ")
            && out.stderr.contains("connections = 1000"),
        "{}",
        out.stderr
    );
    assert!(!merged.exists());
    let mut cmd = ordo();
    cmd.args(["tune", "compare"]).arg(&a).arg(&b);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("connections = 1000"), "{}", out.stderr);

    let out = merge(true);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stdout.starts_with("WARNING: merged with --force"),
        "{}",
        out.stdout
    );
    for args in [vec!["compare", "--force"], vec!["show"]] {
        let mut cmd = ordo();
        cmd.arg("tune").args(&args).arg(&merged);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        assert_eq!(out.code(), Some(0), "{args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("WARNING: merged with --force"),
            "{args:?}: {}",
            out.stdout
        );
    }
}
