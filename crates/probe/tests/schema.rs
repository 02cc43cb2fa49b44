//! The committed JSON Schema (crates/probe/schema/probe-report.schema.json) against real reports of all
//! three kinds, with a small validator for the subset of JSON Schema the file uses (unknown keywords fail,
//! so the schema cannot drift past the validator), and the reports' serde round trip.

use std::time::Duration;

use ordo_probe::{
    CancelToken, CompareConfig, CompareReport, LoadSpec, LoopConfig, LoopReport, PidConfig,
    PidReport, Work, run_compare, run_compare_until, run_loop, run_loop_until, watch,
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
fn interrupted_reports_match_schema() {
    let cancel = CancelToken::new();
    cancel.cancel();
    let r = run_loop_until(&small(), &cancel).unwrap();
    assert!(r.interrupted);
    assert!(r.samples.is_empty());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(check(&v), Vec::<String>::new());
    assert_eq!(serde_json::from_value::<LoopReport>(v).unwrap(), r);

    let cfg = CompareConfig {
        base: LoopConfig {
            load: LoadSpec::Threads(1),
            ..small()
        },
        quiet_vs_loaded: true,
        footprints: None,
    };
    let r = run_compare_until(&cfg, &cancel, |_| {}).unwrap();
    assert!(r.interrupted);
    assert_eq!(r.runs.len(), 1);
    assert_eq!(r.not_run, vec!["loaded (1 busy thread)".to_string()]);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(check(&v), Vec::<String>::new());
    let _: CompareReport = serde_json::from_value(v).unwrap();
}

#[test]
fn reports_written_before_interruption_existed_still_load() {
    let r = run_loop(&LoopConfig {
        samples: 2,
        ..small()
    })
    .unwrap();
    let mut v = serde_json::to_value(&r).unwrap();
    v.as_object_mut().unwrap().remove("interrupted");
    let back: LoopReport = serde_json::from_value(v).unwrap();
    assert!(!back.interrupted);
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
