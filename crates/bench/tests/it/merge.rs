//! Two real runs saved as JSON (`ordo bench --save`) and merged (`ordo report merge`): the merged
//! percentiles are exactly those of one histogram holding both runs' latencies, decoded from the saved
//! histograms; counts add up; a different workload is refused.

use crate::common;

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use ordo_bench::{BenchConfig, BenchReport, CancelToken, Stop, run};

fn saved(url: &str, n: u64, conns: usize) -> BenchReport {
    let mut c = BenchConfig::new(url).unwrap();
    c.connections = conns;
    c.stop = Stop::Requests(n);
    c.timeout = Duration::from_secs(5);
    let r = run(c, CancelToken::new()).unwrap();
    serde_json::from_str(&serde_json::to_string_pretty(&r).unwrap()).unwrap()
}

fn hist(b64: &str) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    Deserializer::new().deserialize(&mut &bytes[..]).unwrap()
}

#[test]
fn two_saved_runs_merge_into_the_percentiles_of_both() {
    let s = common::start();
    let a = saved(&s.url("/"), 300, 2);
    let b = saved(&s.url("/"), 200, 3);
    let ha = hist(&a.histograms.as_ref().unwrap().latency);
    let hb = hist(&b.histograms.as_ref().unwrap().latency);
    assert_eq!(ha.len(), 300);
    assert_eq!(hb.len(), 200);
    let inputs = vec![("a.json".to_string(), a.clone()), ("b.json".to_string(), b)];
    let m = ordo_bench::merge(&inputs, false).unwrap();
    let mut both = ha.clone();
    both.add(&hb).unwrap();
    assert_eq!(m.summary.latency.count, 500);
    for p in &m.summary.latency.percentiles {
        let want = if p.p >= 100.0 {
            both.max()
        } else {
            both.value_at_percentile(p.p)
        } as f64
            / 1000.0;
        assert_eq!(p.ms, want, "p{}", p.p);
    }
    assert_eq!(m.summary.latency.mean_ms, both.mean() / 1000.0);
    assert_eq!(m.summary.complete, 500);
    assert_eq!(m.config.connections, 5);
    assert_eq!(m.merged.len(), 2);
    assert!(m.merged[0].fingerprint.is_some());
    // the merged result is a bench result like any other: it validates and merges again
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(
        ordo_testkit::json_schema::check(&ordo_results::schema::bench(), &v),
        Vec::<String>::new()
    );
    // another path is another workload
    let c = saved(&s.url("/other"), 10, 1);
    let e = ordo_bench::merge(&[inputs[0].clone(), ("c.json".into(), c)], false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("target: a.json has http://"), "{e}");
}
