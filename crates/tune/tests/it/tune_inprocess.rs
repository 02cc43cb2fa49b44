//! End to end inside one process: a 2×2 experiment (nice × affinity of the server's threads) against an
//! in-process `ordo serve`, driven by the built-in bench; stored, interrupted, resumed, summarised; the
//! threads' settings are back to their originals afterwards.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
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
    let start = Instant::now();
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
duration = "250ms"

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
    let mut opts = RunOptions {
        db: d.path().join("tune.db"),
        journal: d.path().join("journal.jsonl"),
        root: SysRoot::real(),
        threads: Arc::new(RealThreads),
        ordo: None,
        stop: Arc::new(AtomicBool::new(false)),
        progress: false,
        run_limit: Some(4),
        print: false,
    };

    // The plan: baseline + 4 configurations, checked against the live threads.
    let plan = runner::plan(&spec, &opts, false).unwrap();
    assert_eq!(plan.configs.len(), 5);
    assert!(plan.refusals().is_empty(), "{:?}", plan.refusals());
    assert!(plan.render().contains("estimated duration"));

    // Interrupted after 4 runs...
    let first = runner::run(&spec, &opts).unwrap();
    assert!(first.interrupted);
    assert_eq!(first.runs_this_session, 4);
    assert!(!opts.journal.exists() || std::fs::read_to_string(&opts.journal).unwrap().is_empty());
    // ...then resumed to the end.
    opts.run_limit = None;
    let second = runner::run(&spec, &opts).unwrap();
    assert!(second.resumed && !second.interrupted);
    assert_eq!(second.experiment, first.experiment);
    assert_eq!(second.runs_this_session, 16);
    assert!(!opts.journal.exists(), "the journal is removed at the end");

    let store = Store::open_read_only(&opts.db).unwrap();
    let data = store.load(first.experiment).unwrap();
    assert_eq!(data.experiment.status, "finished");
    assert_eq!(data.runs.len(), 20);
    // The first block is a discarded warm-up.
    assert_eq!(data.runs.iter().filter(|r| r.warmup).count(), 5);
    assert!(data.runs.iter().filter(|r| r.warmup).all(|r| r.block == 0));
    assert!(data.fingerprint().is_some());
    for c in 0..5 {
        let v = data.values(c, "web.throughput");
        assert_eq!(v.len(), 3, "configuration {c}");
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
    assert!(
        start.elapsed() < Duration::from_secs(45),
        "took {:?}",
        start.elapsed()
    );
}
