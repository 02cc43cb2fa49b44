//! The committed JSON Schema (crates/bench/schema/bench-report.schema.json) against real `BenchReport`
//! output (closed loop, open loop with a mix, with a server sample), with a small validator for the subset
//! of JSON Schema the file uses; unknown keywords fail the test so the schema cannot drift past it.
//! Also checks the CSV header and rows.

mod common;

use std::time::Duration;

use ordo_bench::{Assign, BenchConfig, CancelToken, Mix, MixClass, Pacing, Stop, run};
use serde_json::Value;

#[path = "../../../tests/support/json_schema.rs"]
mod json_schema;

fn schema() -> Value {
    serde_json::from_str(ordo_bench::SCHEMA).unwrap()
}

fn check(v: &Value) -> Vec<String> {
    json_schema::check(&schema(), v)
}

fn cfg(url: &str) -> BenchConfig {
    let mut c = BenchConfig::new(url).unwrap();
    c.connections = 3;
    c.timeout = Duration::from_secs(5);
    c
}

#[test]
fn reports_validate_against_the_schema() {
    let s = common::start();
    // Closed loop, one class, with the server sample (this process).
    let mut c = cfg(&s.url("/"));
    c.stop = Stop::Requests(50);
    c.server_pid = Some(std::process::id() as i32);
    let r = run(c, CancelToken::new()).unwrap();
    assert!(r.server.is_some());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    assert_eq!(v["kind"], "bench");
    assert_eq!(v["version"], 1);
    // Round trip.
    let back: ordo_bench::BenchReport = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);

    // Open loop with a mix.
    let mut c = cfg(&s.url("/"));
    c.stop = Stop::Requests(60);
    c.pacing = Pacing::Open { rate: 1000.0 };
    c.mix = Some(Mix::new(
        Assign::Requests,
        vec![MixClass::new("a", 1.0, "/a"), MixClass::new("b", 2.0, "/b")],
    ));
    let r = run(c, CancelToken::new()).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    assert!(v["summary"]["corrected"].is_object());
    assert_eq!(v["classes"].as_array().unwrap().len(), 2);

    // The validator catches a broken document (so this test can fail).
    let mut bad = v.clone();
    bad["summary"]["complete"] = Value::from(-1);
    bad["kind"] = Value::from("demo");
    bad.as_object_mut()
        .unwrap()
        .insert("extra".into(), Value::Null);
    bad["summary"].as_object_mut().unwrap().remove("rps");
    let e = check(&bad);
    assert_eq!(e.len(), 4, "{e:?}");
}

#[test]
fn csv_has_a_header_and_one_row_per_class_and_kind() {
    let s = common::start();
    let mut c = cfg(&s.url("/"));
    c.stop = Stop::Requests(30);
    c.pacing = Pacing::Open { rate: 1000.0 };
    c.mix = Some(Mix::new(
        Assign::Requests,
        vec![MixClass::new("a", 1.0, "/a"), MixClass::new("b", 1.0, "/b")],
    ));
    let r = run(c, CancelToken::new()).unwrap();
    let csv = ordo_bench::print::csv(&r);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "class,latency,complete,failed,failed_connect,failed_receive,failed_length,failed_exceptions,non_2xx,rps,mean_ms,stdev_ms,min_ms,p50_ms,p66_ms,p75_ms,p80_ms,p90_ms,p95_ms,p98_ms,p99_ms,p99.9_ms,p99.99_ms,p100_ms"
    );
    // a, b, all × uncorrected, corrected
    assert_eq!(lines.len(), 1 + 6);
    let cols = lines[0].split(',').count();
    for l in &lines[1..] {
        assert_eq!(l.split(',').count(), cols, "{l}");
    }
    assert!(lines[5].starts_with("all,uncorrected,30,"));

    let text = ordo_bench::print::text(&r);
    for needle in [
        "Time taken for tests:",
        "Complete requests:      30",
        "Failed requests:        0",
        "Requests per second:",
        "Time per request:",
        "(mean, across all concurrent requests)",
        "Transfer rate:",
        "Connection Times (ms)",
        "Processing:",
        "Waiting:",
        "corrected  uncorrected",
        "99.99%",
        "Per class",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}
