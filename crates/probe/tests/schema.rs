//! The committed JSON Schema (crates/probe/schema/probe-report.schema.json) against real reports of all
//! three kinds, with a small validator for the subset of JSON Schema the file uses (unknown keywords fail,
//! so the schema cannot drift past the validator), and the reports' serde round trip.

use std::time::Duration;

use ordo_probe::{
    CompareConfig, CompareReport, LoadSpec, LoopConfig, LoopReport, PidConfig, PidReport, Work,
    run_compare, run_loop, watch,
};
use serde_json::Value;

const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "const",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "$ref",
    "$defs",
    "anyOf",
    "minimum",
];

fn schema() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/probe-report.schema.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        other => panic!("unsupported type {other}"),
    }
}

fn validate(root: &Value, s: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let obj = s.as_object().expect("a schema is an object");
    for k in obj.keys() {
        assert!(
            KNOWN.contains(&k.as_str()),
            "schema keyword {k} is not supported by this validator"
        );
    }
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        validate(root, &root["$defs"][name], v, path, errs);
    }
    if let Some(t) = obj.get("type").and_then(Value::as_str) {
        if !type_ok(t, v) {
            errs.push(format!("{path}: expected {t}, got {v}"));
            return;
        }
    }
    if let Some(c) = obj.get("const") {
        if c != v {
            errs.push(format!("{path}: expected {c}, got {v}"));
        }
    }
    if let Some(e) = obj.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errs.push(format!("{path}: {v} not in {e:?}"));
        }
    }
    if let Some(m) = obj.get("minimum").and_then(Value::as_f64) {
        if v.as_f64().is_some_and(|x| x < m) {
            errs.push(format!("{path}: {v} below {m}"));
        }
    }
    if let Some(any) = obj.get("anyOf").and_then(Value::as_array) {
        let ok = any.iter().any(|alt| {
            let mut e = Vec::new();
            validate(root, alt, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errs.push(format!("{path}: matches none of anyOf"));
        }
    }
    if let Some(map) = v.as_object() {
        if let Some(req) = obj.get("required").and_then(Value::as_array) {
            for r in req {
                let r = r.as_str().unwrap();
                if !map.contains_key(r) {
                    errs.push(format!("{path}: missing {r}"));
                }
            }
        }
        let props = obj.get("properties").and_then(Value::as_object);
        for (k, val) in map {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => validate(root, ps, val, &format!("{path}.{k}"), errs),
                None if obj.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errs.push(format!("{path}: unexpected field {k}"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (obj.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(root, items, x, &format!("{path}[{i}]"), errs);
        }
    }
}

fn check(v: &Value) -> Vec<String> {
    let root = schema();
    let mut errs = Vec::new();
    validate(&root, &root, v, "$", &mut errs);
    errs
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
    validate(&root, &root["$defs"]["loop_report"], &v, "$", &mut e);
    assert!(
        e.iter().any(|m| m.contains("unexpected field surprise")),
        "{e:?}"
    );
    assert!(e.iter().any(|m| m.contains("missing warnings")), "{e:?}");
    assert!(e.iter().any(|m| m.contains("$.summary.samples")), "{e:?}");
}
