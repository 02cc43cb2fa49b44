//! The committed JSON Schema (crates/bench/schema/bench-report.schema.json) against real `BenchReport`
//! output (closed loop, open loop with a mix, with a server sample), with a small validator for the subset
//! of JSON Schema the file uses; unknown keywords fail the test so the schema cannot drift past it.
//! Also checks the CSV header and rows.

mod common;

use std::time::Duration;

use ordo_bench::{Assign, BenchConfig, CancelToken, Mix, MixClass, Pacing, Stop, run};
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

fn resolve<'a>(root: &'a Value, r: &str) -> &'a Value {
    let name = r
        .strip_prefix("#/$defs/")
        .unwrap_or_else(|| panic!("unsupported $ref {r}"));
    &root["$defs"][name]
}

fn validate(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let obj = schema.as_object().expect("schema is an object");
    for k in obj.keys() {
        assert!(
            KNOWN.contains(&k.as_str()),
            "schema keyword {k} at {path} is not supported by the test validator"
        );
    }
    if let Some(r) = obj.get("$ref") {
        validate(root, resolve(root, r.as_str().unwrap()), v, path, errors);
    }
    if let Some(any) = obj.get("anyOf") {
        let ok = any.as_array().unwrap().iter().any(|s| {
            let mut e = Vec::new();
            validate(root, s, v, path, &mut e);
            e.is_empty()
        });
        if !ok {
            errors.push(format!("{path}: matches no anyOf branch"));
        }
    }
    if let Some(t) = obj.get("type") {
        let ok = match t {
            Value::String(s) => type_ok(s, v),
            Value::Array(a) => a.iter().any(|s| type_ok(s.as_str().unwrap(), v)),
            _ => panic!("bad type"),
        };
        if !ok {
            errors.push(format!("{path}: expected type {t}, got {v}"));
            return;
        }
    }
    if let Some(c) = obj.get("const") {
        if c != v {
            errors.push(format!("{path}: expected {c}, got {v}"));
        }
    }
    if let Some(e) = obj.get("enum") {
        if !e.as_array().unwrap().contains(v) {
            errors.push(format!("{path}: {v} not in {e}"));
        }
    }
    if let (Some(m), Some(x)) = (obj.get("minimum"), v.as_f64()) {
        if x < m.as_f64().unwrap() {
            errors.push(format!("{path}: {x} < minimum {m}"));
        }
    }
    if let Some(o) = v.as_object() {
        let props = obj.get("properties").and_then(Value::as_object);
        if let Some(req) = obj.get("required") {
            for r in req.as_array().unwrap() {
                if !o.contains_key(r.as_str().unwrap()) {
                    errors.push(format!("{path}: missing required {r}"));
                }
            }
        }
        for (k, val) in o {
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(root, s, val, &format!("{path}.{k}"), errors),
                None => {
                    if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
                        errors.push(format!("{path}: unexpected property {k}"));
                    }
                }
            }
        }
    }
    if let (Some(items), Some(a)) = (obj.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            validate(root, items, x, &format!("{path}[{i}]"), errors);
        }
    }
}

fn schema() -> Value {
    serde_json::from_str(ordo_bench::SCHEMA).unwrap()
}

fn check(v: &Value) -> Vec<String> {
    let s = schema();
    let mut e = Vec::new();
    validate(&s, &s, v, "$", &mut e);
    e
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
