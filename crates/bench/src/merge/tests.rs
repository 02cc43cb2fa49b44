//! Unit tests of the merge: exact percentiles of the union, refusals naming what differs, broken
//! histograms named by file and field, stages merged stage by stage.

use super::*;
use crate::report::{BuildInput, latency_summary};
use crate::stats::{FailKind, new_hist};
use hdrhistogram::Histogram;

/// The report of a 2 s, one-connection run to http://x/ with `st`'s figures, started at `started_unix_ms`.
fn report_of(st: &Stats, started_unix_ms: u64, stages: Vec<report::StagePlan>) -> BenchReport {
    report::build(BuildInput {
        config: report::sample(0, 0, 0, 0.0, false).config,
        target: "http://x/".into(),
        started_unix_ms,
        interrupted: false,
        elapsed_s: 2.0,
        class_names: vec!["default".into()],
        shares: vec![1.0],
        class_connections: vec![1],
        connections: 1,
        stats: st,
        server: None,
        hostname: "x".into(),
        port: 80,
        path: "/".into(),
        stages,
    })
}

/// One run of `n` requests with latencies drawn from `base + [0, spread)` µs (seeded), one connect
/// failure, started at `start_ms`; and the histogram of its latencies.
fn run(
    seed: u64,
    n: usize,
    base: u64,
    spread: usize,
    start_ms: u64,
) -> (BenchReport, Histogram<u64>) {
    let mut st = Stats::new(1, false);
    let mut rng = ordo_util::SplitMix64::new(seed);
    let mut h = new_hist();
    for i in 0..n {
        let v = base + rng.index(spread) as u64;
        st.record_ok(
            0,
            200,
            v,
            None,
            0,
            v / 2,
            v / 2,
            100,
            10,
            10,
            i as u64 * 1000,
        );
        h.record(v).unwrap();
    }
    st.record_fail(0, FailKind::Connect, 5);
    let r = report_of(&st, start_ms, Vec::new());
    // what `ordo bench --save` writes and `ordo report merge` reads
    let text = serde_json::to_string(&r).unwrap();
    (serde_json::from_str(&text).unwrap(), h)
}

fn named(rs: &[&BenchReport]) -> Vec<(String, BenchReport)> {
    rs.iter()
        .enumerate()
        .map(|(i, r)| (format!("m{}.json", i + 1), (*r).clone()))
        .collect()
}

#[test]
fn merged_percentiles_are_those_of_one_histogram_of_both() {
    let (a, ha) = run(1, 3000, 100, 900, 1_000_000);
    let (b, hb) = run(2, 1000, 20_000, 30_000, 1_000_400);
    let m = merge(&named(&[&a, &b]), false).unwrap();
    let mut union = new_hist();
    union.add(&ha).unwrap();
    union.add(&hb).unwrap();
    assert_eq!(m.summary.latency, latency_summary(&union));
    assert_eq!(m.classes[0].latency, latency_summary(&union));
    assert_eq!(m.summary.latency.count, 4000);
    // not what averaging the two runs' percentiles gives
    let p99 = |r: &BenchReport| r.summary.latency.percentiles[7].ms;
    assert!((p99(&m) - (p99(&a) + p99(&b)) / 2.0).abs() > 1.0);
    assert_eq!(m.summary.complete, 4000);
    assert_eq!(m.summary.failed.connect, 2);
    assert_eq!(
        m.summary.total_bytes,
        a.summary.total_bytes + b.summary.total_bytes
    );
    assert_eq!(m.status_counts[0].count, 4000);
    assert_eq!(m.config.connections, 2);
    assert_eq!(m.config.rate, None);
    // rates over the span: 1.0 s to 3.4 s
    assert!((m.elapsed_s - 2.4).abs() < 1e-9, "{}", m.elapsed_s);
    assert!((m.summary.rps - 4000.0 / 2.4).abs() < 1e-6);
    // timelines aligned on wall clock: both runs' first second fall in second 0
    let tl: u64 = m.timeline.iter().map(|t| t.complete).sum();
    assert_eq!(tl, 4000);
    assert_eq!(
        m.timeline[0].complete,
        a.timeline[0].complete + b.timeline[0].complete
    );
    // a header per machine, none of this machine's
    assert_eq!(m.merged.len(), 2);
    assert_eq!(m.merged[1].source, "m2.json");
    assert_eq!(m.merged[1].complete, 1000);
    assert!(m.fingerprint.is_none());
    assert!(m.warnings.is_empty());
    // and the merged report merges again, exactly
    let (c, hc) = run(3, 500, 5_000, 100, 1_000_000);
    let m3 = merge(&named(&[&m, &c]), false).unwrap();
    union.add(&hc).unwrap();
    assert_eq!(m3.summary.latency, latency_summary(&union));
    assert_eq!(m3.merged.len(), 3);
}

#[test]
fn refuses_different_workloads_with_what_differs() {
    let (a, _) = run(1, 10, 100, 10, 0);
    let (mut b, _) = run(2, 10, 100, 10, 0);
    b.config.method = "POST".into();
    b.target = "http://y/".into();
    let e = merge(&named(&[&a, &b]), false).unwrap_err();
    let MergeError::Mismatch(d) = &e else {
        panic!("{e}")
    };
    assert_eq!(
        d,
        &[
            "target: m1.json has http://x/, m2.json has http://y/".to_string(),
            "config.method: m1.json has GET, m2.json has POST".to_string(),
        ]
    );
    assert!(e.to_string().contains("--force"), "{e}");
    // forced: merged, and the report carries the warning
    let m = merge(&named(&[&a, &b]), true).unwrap();
    assert_eq!(m.warnings.len(), 1);
    assert!(m.warnings[0].contains("config.method: m1.json has GET, m2.json has POST"));
    // the warning survives a further merge
    let m2 = merge(&named(&[&m, &a]), true).unwrap();
    assert!(m2.warnings.iter().any(|w| w.contains("config.method")));
    // other kinds: a mix, an open loop at another rate, another class set
    let (mut c, _) = run(3, 10, 100, 10, 0);
    c.config.rate = Some(100.0);
    c.config.mode = "open".into();
    c.config.connections = 7;
    c.config.requests = Some(5);
    let d = differences(&named(&[&a, &c]));
    assert_eq!(
        d,
        ["config.mode: m1.json has closed, m2.json has open".to_string()],
        "a generator's share (rate, connections, count) may differ; the loop may not"
    );
    let (mut c, _) = run(3, 10, 100, 10, 0);
    c.classes[0].name = "other".into();
    c.config.mix = Some("m.toml".into());
    let d = differences(&named(&[&a, &c]));
    assert!(
        d.iter()
            .any(|l| l.starts_with("config.mix: m1.json has none, m2.json has m.toml"))
    );
    assert!(
        d.iter()
            .any(|l| l.starts_with("classes: m1.json has default, m2.json has other"))
    );
}

#[test]
fn refuses_results_without_or_with_broken_histograms() {
    let (a, _) = run(1, 10, 100, 10, 0);
    let (mut b, _) = run(2, 10, 100, 10, 0);
    assert!(matches!(
        merge(&named(&[&a]), false),
        Err(MergeError::TooFew(1))
    ));
    b.histograms = None;
    let e = merge(&named(&[&a, &b]), true).unwrap_err().to_string();
    assert!(e.starts_with("m2.json has no histograms"), "{e}");
    let (mut b, _) = run(2, 10, 100, 10, 0);
    b.histograms.as_mut().unwrap().waiting = "!!not base64".into();
    let e = merge(&named(&[&a, &b]), false).unwrap_err().to_string();
    assert!(
        e.starts_with("m2.json: histograms.waiting: not base64"),
        "{e}"
    );
    let (mut b, _) = run(2, 10, 100, 10, 0);
    b.histograms.as_mut().unwrap().latency = "AAAA".into();
    // the total is rebuilt from the classes: a broken class histogram is named
    b.histograms.as_mut().unwrap().classes[0].latency = "AAAA".into();
    let e = merge(&named(&[&a, &b]), false).unwrap_err().to_string();
    assert!(
        e.contains("histograms.classes[0].latency: not a V2 HdrHistogram"),
        "{e}"
    );
}

#[test]
fn histograms_round_trip() {
    let mut h = new_hist();
    for v in [1u64, 5, 999, 123_456, 99_999_999] {
        h.record(v).unwrap();
    }
    let back = report::decode(&report::encode(&h).unwrap()).unwrap();
    assert_eq!(back, h);
}

/// Two ramps of the same stages (each generator's own targets) merge stage by stage: the targets add up
/// and each stage's percentiles are those of both runs' requests in it.
#[test]
fn stages_merge_stage_by_stage() {
    let staged = |seed: u64, target: f64| {
        let mut st = Stats::new(1, false).with_stages(2);
        let mut rng = ordo_util::SplitMix64::new(seed);
        let mut hs = [new_hist(), new_hist()];
        for i in 0..400u64 {
            let v = 100 + rng.index(5000) as u64;
            st.record_ok(0, 200, v, None, 0, v, v, 10, 10, 10, i * 5000);
            let s = usize::from(i >= 200);
            st.record_stage(s, Some((v, None)));
            hs[s].record(v).unwrap();
        }
        let plan = |i: usize| report::StagePlan {
            start_s: i as f64,
            duration_s: 1.0,
            from: if i == 0 { 0.0 } else { target },
            target,
            unit: "connections".into(),
        };
        let r = report_of(&st, 0, vec![plan(0), plan(1)]);
        (r, hs)
    };
    let (a, ha) = staged(1, 10.0);
    let (b, hb) = staged(2, 30.0);
    let m = merge(&named(&[&a, &b]), false).unwrap();
    assert_eq!(m.stages.len(), 2);
    for i in 0..2 {
        let mut both = ha[i].clone();
        both.add(&hb[i]).unwrap();
        assert_eq!(m.stages[i].latency, latency_summary(&both));
        assert_eq!(m.stages[i].complete, 400);
    }
    assert_eq!((m.stages[1].from, m.stages[1].target), (40.0, 40.0));
    // another ramp length is another workload
    let (mut c, _) = staged(3, 10.0);
    c.stages[1].duration_s = 2.0;
    let d = differences(&named(&[&a, &c]));
    assert!(
        d[0].starts_with("stages (durations): m1.json has 1s,1s, m2.json has 1s,2s"),
        "{d:?}"
    );
}
