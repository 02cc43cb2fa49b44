//! Test support: builds small `ordo tune` stores through ordo_tune's own store API (the same schema
//! `ordo tune run` writes), with synthetic, deterministic measurements shaped like seeds 000 and 001.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use ordo_tune::design::Configuration;

/// The tune store reader ordo passes to ordo-report: ordo-tune's.
pub const STORES: Option<ordo_report::StoreReader<'static>> = Some(&ordo_tune::export::read_store);
use ordo_tune::store::{ExperimentMeta, NewRun, Store};

pub const KNOB_SWAP: &str = "sysctl:vm.swappiness";
pub const KNOB_THREADS: &str = "param:threads";

/// Throughput model: threads 2/4/8/16 and swappiness 10/60; `speed` scales the machine.
fn model(values: &BTreeMap<String, String>, speed: f64) -> f64 {
    let t = match values.get(KNOB_THREADS).map(String::as_str) {
        Some("2") => 0.80,
        Some("4") => 1.00,
        Some("8") => 1.06,
        Some("16") => 1.03,
        _ => 1.0,
    };
    let s = match values.get(KNOB_SWAP).map(String::as_str) {
        Some("10") => 1.0,
        Some("60") => 0.995,
        _ => 1.0,
    };
    10_000.0 * speed * t * s
}

/// Deterministic noise in [-1, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}

/// The metrics of one run, as the tune runner names them for a bench workload called "web".
pub fn run_metrics(
    values: &BTreeMap<String, String>,
    speed: f64,
    noise: f64,
) -> BTreeMap<String, f64> {
    let rps = model(values, speed) * (1.0 + 0.01 * noise);
    let mean = 100.0 / rps * 1000.0;
    let mut m = BTreeMap::new();
    m.insert("web.throughput".to_string(), rps);
    m.insert("web.requests".to_string(), 100_000.0);
    m.insert("web.elapsed_s".to_string(), 100_000.0 / rps);
    m.insert("web.mean_ms".to_string(), mean);
    m.insert("web.p50_ms".to_string(), mean * 0.9);
    m.insert("web.p90_ms".to_string(), mean * 1.6);
    m.insert("web.p95_ms".to_string(), mean * 2.0);
    m.insert("web.p99_ms".to_string(), mean * 3.2);
    m
}

/// Configurations: the baseline (machine defaults) then the 2 × 4 full factorial.
pub fn configurations() -> Vec<Configuration> {
    let mut out = vec![Configuration {
        label: "machine defaults".into(),
        values: BTreeMap::new(),
        is_baseline: true,
    }];
    for s in ["10", "60"] {
        for t in ["2", "4", "8", "16"] {
            let values: BTreeMap<String, String> = [
                (KNOB_SWAP.to_string(), s.to_string()),
                (KNOB_THREADS.to_string(), t.to_string()),
            ]
            .into();
            out.push(Configuration {
                label: format!("swappiness={s} threads={t}"),
                values,
                is_baseline: false,
            });
        }
    }
    out
}

/// A fingerprint in ordo-sys's shape.
pub fn fingerprint(host: &str, kernel: &str, hz: u32) -> serde_json::Value {
    serde_json::json!({
        "hostname": host, "kernel_release": kernel, "kernel_version": "#1 SMP PREEMPT_DYNAMIC",
        "arch": "x86_64", "config_hz": hz, "config_hz_source": "/boot/config", "preemption": "voluntary",
        "preemption_source": "debugfs", "preempt_dynamic": true, "cpu_model": "Test CPU @ 2.4GHz",
        "cores": 2, "memory_bytes": 4294967296u64, "sched_ext": "absent", "clocksource": "tsc",
        "governor": null, "base_slice_ns": 3000000, "schedstat": true
    })
}

/// Write a finished experiment of `runs` measured runs per configuration (plus one warm-up block).
pub fn build_store(path: &Path, host: &str, kernel: &str, speed: f64, seed: u64, runs: usize) {
    let mut store = Store::open(path).expect("open store");
    // Built from JSON so fields ordo_tune adds later (with serde defaults) do not break this helper.
    let meta: ExperimentMeta = serde_json::from_value(serde_json::json!({
        "knobs": [[KNOB_SWAP, ["10", "60"]], [KNOB_THREADS, ["2", "4", "8", "16"]]],
        "objective": "maximize",
        "score_terms": [["web.throughput", 1.0]],
        "scale_knob": KNOB_THREADS,
        "min_runs": 3,
        "max_runs": 10,
        "rel_ci": 0.02,
        "warmup_blocks": 1,
        "fixed_work": true,
        "notes": []
    }))
    .expect("experiment meta");
    let configs = configurations();
    let fp = fingerprint(host, kernel, 250);
    let id = store
        .create_experiment(
            "seed000-style sweep",
            "synthetic.toml",
            "# synthetic measurements written by crates/report/tests/common",
            seed,
            &meta,
            &configs,
            Some(&fp),
        )
        .expect("create experiment");
    let mut rng = Lcg(seed);
    for block in 0..=runs {
        for (i, c) in configs.iter().enumerate() {
            store
                .record_run(
                    id,
                    &NewRun {
                        config: i,
                        block,
                        warmup: block == 0,
                        started_unix_ms: 1_795_000_000_000 + (block * 100 + i) as i64 * 1000,
                        duration_s: 10.0,
                        error: None,
                        metrics: run_metrics(&c.values, speed, rng.next()),
                    },
                )
                .expect("record run");
        }
    }
    store.set_status(id, "finished").expect("status");
}

/// Switch a store from WAL to a rollback journal, so that reading the committed file leaves no -wal/-shm
/// files beside it.
pub fn to_rollback_journal(path: &Path) {
    let c = rusqlite::Connection::open(path).expect("open");
    let mode: String = c
        .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(mode, "delete");
}
