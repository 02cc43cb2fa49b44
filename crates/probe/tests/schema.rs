//! The committed JSON Schema (crates/probe/schema/probe-report.schema.json) against real reports of all
//! three kinds, with a small validator for the subset of JSON Schema the file uses (unknown keywords fail,
//! so the schema cannot drift past the validator), and the reports' serde round trip.

use std::time::Duration;

use ordo_probe::{
    CompareConfig, CompareReport, LoadSpec, LoopConfig, LoopReport, PidConfig, PidReport, Work,
    run_compare, run_loop, watch,
};
use serde_json::Value;

#[path = "../../../tests/support/json_schema.rs"]
mod json_schema;

fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/probe-report.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn check(v: &Value) -> Vec<String> {
    json_schema::check(&schema(), v)
}

fn small() -> LoopConfig {
    LoopConfig {
        work: Work::Nominal(300_000),
        samples: 10,
        buckets_ms: Some(vec![0.2, 0.5, 1.0]),
        ..Default::default()
    }
}

#[test]
fn loop_report_matches_schema_and_round_trips() {
    let mut r = run_loop(&small()).unwrap();
    r.fingerprint = Some(ordo_sys::Fingerprint::collect());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    let back: LoopReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.samples, r.samples);
    assert_eq!(back.summary.relative, r.summary.relative);
}

#[test]
fn compare_report_matches_schema() {
    let cfg = CompareConfig {
        base: LoopConfig {
            load: LoadSpec::Threads(1),
            ..small()
        },
        quiet_vs_loaded: true,
        footprints: None,
    };
    let r = run_compare(&cfg, |_| {}).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    let back: CompareReport = serde_json::from_value(v).unwrap();
    assert_eq!(
        back.columns,
        vec!["quiet".to_string(), "loaded (1 busy thread)".to_string()]
    );
    assert_eq!(back.rows.len(), 4);
}

#[test]
fn pid_report_matches_schema() {
    let mut cfg = PidConfig::new(std::process::id() as i32);
    cfg.interval = Duration::from_millis(30);
    let mut got = None;
    watch(&cfg, |r| {
        got = Some(r.clone());
        false
    })
    .unwrap();
    let v = serde_json::to_value(got.unwrap()).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    let _: PidReport = serde_json::from_value(v).unwrap();
}

#[test]
fn the_validator_rejects_drift() {
    let r = run_loop(&LoopConfig {
        samples: 2,
        ..small()
    })
    .unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    v["surprise"] = Value::Bool(true);
    v["summary"]["samples"] = Value::String("two".into());
    v.as_object_mut().unwrap().remove("warnings");
    let errs = check(&v);
    assert_eq!(errs.len(), 1, "anyOf reports once: {errs:?}");
    let mut e = Vec::new();
    let root = schema();
    json_schema::validate(&root, &root["$defs"]["loop_report"], &v, "$", &mut e);
    assert!(
        e.iter().any(|m| m.contains("unexpected property surprise")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.contains("missing required \"warnings\"")),
        "{e:?}"
    );
    assert!(e.iter().any(|m| m.contains("$.summary.samples")), "{e:?}");
}
