//! End to end inside one process: a 2×2 experiment (nice × affinity of the server's threads) against an
//! in-process `ordo serve`, driven by the built-in bench; stored, interrupted, resumed, summarised; the
//! threads' settings are back to their originals afterwards.

use std::time::{Duration, Instant};

use ordo_sys::knobs::{RealThreads, SysRoot, ThreadKnob, ThreadOps};
use ordo_tune::runner::{self, RunOptions};
use ordo_tune::spec::Spec;
use ordo_tune::store::Store;

fn serve_threads() -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with("lab-serve") {
            v.push(e.file_name().to_str().unwrap().parse().unwrap());
        }
    }
    v
}

#[test]
fn two_by_two_against_in_process_serve_completes_resumes_and_restores() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lab-serve")
        // The OS-level name (comm) is what `threads = "^lab-serve"` matches; set it explicitly.
        .on_thread_start(|| {
            let _ = std::fs::write("/proc/thread-self/comm", "lab-serve");
        })
        .enable_all()
        .build()
        .unwrap();
    let cfg = ordo_serve::ServeConfig::from_toml_str(
        "listen = \"127.0.0.1:0\"\nworkers = 16\n[admin]\nenabled = false\n[[routes]]\nprefix = \"/\"\nsynthetic = {}\n",
        "test.toml",
    )
    .unwrap();
    let handle = rt.block_on(ordo_serve::Server::start(cfg)).unwrap();
    let addr = handle.local_addr();

    let threads = RealThreads;
    // Worker threads name themselves when they start; wait (bounded) until both have.
    let mut tids = serve_threads();
    let wait = Instant::now();
    while tids.len() < 2 && wait.elapsed() < Duration::from_secs(5) {
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(10)).await });
        tids = serve_threads();
    }
    assert!(!tids.is_empty());
    let before: Vec<(String, String)> = tids
        .iter()
        .map(|&t| {
            (
                threads.get(t, ThreadKnob::Nice).unwrap(),
                threads.get(t, ThreadKnob::Affinity).unwrap(),
            )
        })
        .collect();

    let d = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
name = "two-by-two"
seed = 11

[target]
pid = {pid}
threads = "^lab-serve"

[workload]
url = "http://{addr}/?us=20"
connections = 4
duration = "500ms"

[knobs]
nice = [0, 5]
affinity = ["0", "0-1"]

[repeat]
min = 3
max = 3
ci = 0.5
warmup = 1
"#,
        pid = std::process::id()
    );
    let file = d.path().join("exp.toml");
    std::fs::write(&file, &text).unwrap();
    let spec = Spec::from_file(&file).unwrap();
    let mut opts = RunOptions::new(
        d.path().join("tune.db"),
        d.path().join("journal.jsonl"),
        SysRoot::real(),
    );
    opts.run_limit = Some(4);

    // The plan: baseline + 4 configurations, checked against the live threads.
    let plan = runner::plan(&spec, &opts, false).unwrap();
    assert_eq!(plan.configs.len(), 5);
    assert!(plan.refusals().is_empty(), "{:?}", plan.refusals());
    assert!(plan.render().contains("estimated duration"));

    // Interrupted after 4 runs...
    let first = ordo_tune::run(&spec, &opts).unwrap();
    assert!(first.interrupted);
    assert_eq!(first.runs_this_session, 4);
    assert!(!opts.journal.exists() || std::fs::read_to_string(&opts.journal).unwrap().is_empty());
    // ...resumed and interrupted again inside the first confirmatory block (a warm-up block and three
    // pilot blocks are 20 runs; this stops after 24), where the confirmatory phase is already stored...
    opts.run_limit = Some(20);
    let middle = ordo_tune::run(&spec, &opts).unwrap();
    assert!(middle.resumed && middle.interrupted);
    assert_eq!(middle.runs_this_session, 20);
    let stored = Store::open_read_only(&opts.db)
        .unwrap()
        .load(first.experiment)
        .unwrap();
    assert_eq!(
        stored.experiment.meta.confirm,
        Some(ordo_tune::sequential::Confirm { from: 4, blocks: 3 })
    );
    assert!(stored.runs.iter().any(|r| r.block == 4));
    // ...then resumed to the end.
    opts.run_limit = None;
    let second = ordo_tune::run(&spec, &opts).unwrap();
    assert!(second.resumed && !second.interrupted);
    assert_eq!(second.experiment, first.experiment);
    // A warm-up block, three pilot blocks, three confirmatory blocks: 7 × 5 runs.
    assert_eq!(second.runs_this_session, 11);
    assert!(!opts.journal.exists(), "the journal is removed at the end");

    let store = Store::open_read_only(&opts.db).unwrap();
    let data = store.load(first.experiment).unwrap();
    assert_eq!(data.experiment.status, "finished");
    assert_eq!(data.runs.len(), 35);
    assert_eq!(
        data.experiment.meta.confirm,
        Some(ordo_tune::sequential::Confirm { from: 4, blocks: 3 })
    );
    // The first block is a discarded warm-up.
    assert_eq!(data.runs.iter().filter(|r| r.warmup).count(), 5);
    assert!(data.runs.iter().filter(|r| r.warmup).all(|r| r.block == 0));
    assert!(data.fingerprint().is_some());
    for c in 0..5 {
        let v = data.values(c, "web.throughput");
        assert_eq!(v.len(), 6, "configuration {c}");
        assert!(v.iter().all(|x| *x > 0.0));
        assert_eq!(data.values(c, "score"), v);
    }
    assert!(
        data.runs
            .iter()
            .all(|r| r.metrics.contains_key("target.cpu_s"))
    );
    let text = ordo_tune::analysis::render(&second.analysis);
    assert!(text.contains("best:"), "{text}");
    assert!(text.contains("main effects"), "{text}");
    assert!(text.contains("against the baseline"), "{text}");

    // Every thread is back where it was.
    let after: Vec<(String, String)> = tids
        .iter()
        .map(|&t| {
            (
                threads.get(t, ThreadKnob::Nice).unwrap(),
                threads.get(t, ThreadKnob::Affinity).unwrap(),
            )
        })
        .collect();
    assert_eq!(before, after);
    drop(handle);
    drop(rt);
}

/// A search experiment file whose workload prints a score computed from two parameters (a smooth
/// surface with its optimum at a = 4, b = 2 on a 6 x 6 grid).
fn search_file(dir: &std::path::Path) -> std::path::PathBuf {
    let text = r#"
name = "search"
seed = 3

[target]
command = "sleep 30"

[workload]
command = ["sh", "-c", "echo score $(( 1000 - 20 * ({a} - 4) * ({a} - 4) - 15 * ({b} - 2) * ({b} - 2) ))"]
regex = 'score (?P<throughput>[0-9]+)'

[knobs]
"param:a" = [0, 1, 2, 3, 4, 5]
"param:b" = [0, 1, 2, 3, 4, 5]

[baseline]
"param:a" = 0
"param:b" = 0

[design]
kind = "search"
budget = 10
initial = 3

[repeat]
min = 3
max = 4
ci = 0.5
"#;
    let f = dir.join("search.toml");
    std::fs::write(&f, text).unwrap();
    f
}

fn opts_in(dir: &std::path::Path, db: &str) -> RunOptions {
    RunOptions::new(
        dir.join(db),
        dir.join(format!("{db}.journal")),
        SysRoot::at(dir.join("root")),
    )
}

#[test]
fn a_search_finds_the_optimum_with_a_fraction_of_the_grid_rechecks_it_and_resumes_the_same() {
    let d = tempfile::tempdir().unwrap();
    let spec = Spec::from_file(&search_file(d.path())).unwrap();

    // Without interruption.
    let whole = ordo_tune::run(&spec, &opts_in(d.path(), "whole.db")).unwrap();
    assert!(!whole.interrupted);
    let a = &whole.analysis;
    let s = a.search.clone().expect("a search summary");
    assert_eq!((s.trials, s.grid), (10, 36));
    // 10 of 36 points found the optimum (a=4 b=2: 1000) or a neighbour of it (>= 980).
    let best = s.best.clone().unwrap();
    let best_score = a
        .configs
        .iter()
        .find(|c| c.label == best)
        .unwrap()
        .score
        .mean;
    assert!(best_score >= 980.0, "{best}: {best_score}");
    // The surface is noise-free, so the re-check keeps the whole gain.
    let r = s.recheck.clone().expect("re-checked");
    assert_eq!(r.runs, 3);
    assert!((s.kept.unwrap() - 1.0).abs() < 1e-9, "{s:?}");
    let text = ordo_tune::analysis::render(a);
    assert!(
        text.contains("100% of the reported gain survived the re-check"),
        "{text}"
    );

    // Interrupted twice (mid-trial) and resumed: the same trials, in the same order, the same result.
    let mut opts = opts_in(d.path(), "parts.db");
    opts.run_limit = Some(7);
    assert!(ordo_tune::run(&spec, &opts).unwrap().interrupted);
    assert!(ordo_tune::run(&spec, &opts).unwrap().interrupted);
    opts.run_limit = None;
    let parts = ordo_tune::run(&spec, &opts).unwrap();
    assert!(parts.resumed && !parts.interrupted);
    let labels = |db: &str| -> Vec<String> {
        let store = Store::open_read_only(&d.path().join(db)).unwrap();
        let data = store.load(store.latest().unwrap()).unwrap();
        assert_eq!(data.experiment.status, "finished");
        data.configurations.into_iter().map(|c| c.label).collect()
    };
    assert_eq!(labels("whole.db"), labels("parts.db"));
    assert_eq!(
        labels("whole.db").len(),
        12,
        "10 trials + the re-check's two"
    );
    assert_eq!(parts.analysis.search, whole.analysis.search);
    // Every process the runs started was stopped; nothing is left in a journal.
    assert!(!d.path().join("whole.db.journal").exists());
    assert!(!d.path().join("parts.db.journal").exists());
}
