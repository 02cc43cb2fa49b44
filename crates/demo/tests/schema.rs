//! The committed JSON Schema of `ordo demo`'s result file (crates/demo/schema/demo-result.schema.json) against
//! real `DemoResult` output: a tiny in-process demo run, a hand-built result with the null/absent cases, and
//! the demo files `ordo report`'s tests keep as fixtures; broken documents must fail, and every property the
//! schema lists must be written, so the schema can drift from the Rust type in neither direction.

use std::time::Duration;

use ordo_demo::run::run_demo;
use ordo_demo::{ClassStats, DemoPlan, DemoPolicy, DemoResult, DemoStep, Outcome, PlanInput};
use serde_json::Value;

#[path = "../../../tests/support/json_schema.rs"]
mod json_schema;

const SCHEMA: &str = include_str!("../schema/demo-result.schema.json");

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("the schema is JSON")
}

fn check(v: &Value) -> Vec<String> {
    json_schema::check(&schema(), v)
}

/// Paths of properties the schema lists that `v` lacks (`$ref`s followed), except those in `absent_ok`.
fn unwritten(
    root: &Value,
    schema: &Value,
    v: &Value,
    path: &str,
    absent_ok: &[&str],
    out: &mut Vec<String>,
) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        unwritten(root, &root["$defs"][name], v, path, absent_ok, out);
    }
    if let (Some(props), Some(o)) = (
        schema.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for (k, s) in props {
            let p = format!("{path}.{k}");
            match o.get(k) {
                Some(x) => unwritten(root, s, x, &p, absent_ok, out),
                None if absent_ok.contains(&p.as_str()) => {}
                None => out.push(p),
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            unwritten(root, items, x, &format!("{path}[{i}]"), absent_ok, out);
        }
    }
}

fn assert_exact(v: &Value, absent_ok: &[&str]) {
    assert_eq!(check(v), Vec::<String>::new(), "{v:#}");
    let root = schema();
    let mut missing = Vec::new();
    unwritten(&root, &root, v, "$", absent_ok, &mut missing);
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "listed in the schema but not written"
    );
}

fn to_value(r: &DemoResult) -> Value {
    // The exact text `ordo demo` saves, parsed back.
    serde_json::from_str(&r.to_json()).expect("to_json writes JSON")
}

fn stats(name: &str, requests: u64, mean_ms: f64) -> ClassStats {
    ClassStats {
        name: name.into(),
        clients: 100,
        requests,
        errors: 0,
        mean_ms,
        p50_ms: mean_ms,
        p95_ms: mean_ms * 1.5,
        p99_ms: mean_ms * 2.0,
        throughput_rps: requests as f64 / 10.0,
    }
}

/// A result built through the public API: a step at 300 clients where heavy got no response (null ratios,
/// verdict missed), no fingerprint.
fn constructed() -> DemoResult {
    let plan = DemoPlan::resolve(PlanInput {
        policy: Some(DemoPolicy::Stride),
        ..Default::default()
    })
    .expect("default plan");
    let mut r = DemoResult::new(&plan, 1_700_000_000);
    r.push_step(DemoStep::new(
        17,
        10.0,
        vec![
            stats("light", 100, 12.0),
            stats("medium", 200, 11.0),
            stats("heavy", 400, 10.0),
        ],
    ));
    r.push_step(DemoStep::new(
        100,
        10.0,
        vec![
            stats("light", 100, 140.0),
            stats("medium", 200, 70.0),
            stats("heavy", 0, 0.0),
        ],
    ));
    r.complete = true;
    r
}

#[test]
fn a_real_demo_run_validates_and_writes_every_listed_property() {
    // The smallest demo: two steps of 100 ms with 2 workers, so the classes queue; well under a second.
    let plan = DemoPlan::resolve(PlanInput {
        policy: Some(DemoPolicy::Lottery),
        quick: true,
        steps: Some(vec![3, 12]),
        step_duration: Some(Duration::from_millis(100)),
        warmup: Some(Duration::ZERO),
        workers: Some(2),
        service: Some(Duration::from_millis(2)),
    })
    .expect("plan");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let result = rt
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), run_demo(&plan, stop, |_| {})).await
        })
        .expect("the demo ends within 30 s")
        .expect("the demo runs");
    assert!(result.complete);
    assert_eq!(result.steps.len(), 2);
    assert!(result.fingerprint.is_some());
    let v = to_value(&result);
    assert_exact(&v, &[]);
    assert_eq!(v["kind"], "demo");
    assert_eq!(v["steps"][1]["clients"], 12);
    // The real run measured something, so the validation saw numbers, not only zeros.
    assert!(
        v["steps"][1]["classes"][0]["requests"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{v:#}"
    );
}

#[test]
fn null_ratios_and_no_fingerprint_validate() {
    let r = constructed();
    let v = to_value(&r);
    assert!(v["steps"][1]["ratio_light_heavy"].is_null());
    assert!(v["verdict"]["worst_light_heavy_error"].is_null());
    assert_eq!(r.verdict.outcome, Outcome::Missed);
    assert!(v.get("fingerprint").is_none(), "None is left out, not null");
    assert_exact(&v, &["$.fingerprint"]);

    // No step reached 300 clients: not_checked, empty checked_clients.
    let mut r = constructed();
    r.steps.pop();
    r.push_step(r.steps[0].clone());
    assert_eq!(r.verdict.outcome, Outcome::NotChecked);
    assert_exact(&to_value(&r), &["$.fingerprint"]);
}

/// Turns a valid document into an invalid one.
type Breaker = fn(&mut Value);

#[test]
fn broken_documents_fail_validation() {
    let good = to_value(&constructed());
    assert_eq!(check(&good), Vec::<String>::new());
    // (what, a fragment of the error it must cause, how to break the document)
    let cases: Vec<(&str, &str, Breaker)> = vec![
        (
            "missing top-level kind",
            "$: missing required \"kind\"",
            |v| {
                v.as_object_mut().unwrap().remove("kind");
            },
        ),
        (
            "missing a class's mean_ms",
            "$.steps[0].classes[0]: missing required \"mean_ms\"",
            |v| {
                v["steps"][0]["classes"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("mean_ms");
            },
        ),
        (
            "missing verdict outcome",
            "$.verdict: missing required \"outcome\"",
            |v| {
                v["verdict"].as_object_mut().unwrap().remove("outcome");
            },
        ),
        ("workers as a string", "$.workers: expected type", |v| {
            v["workers"] = Value::from("100")
        }),
        (
            "requests as a float",
            "$.steps[0].classes[1].requests: expected type",
            |v| v["steps"][0]["classes"][1]["requests"] = Value::from(1.5),
        ),
        (
            "ratio as a string",
            "$.steps[0].ratio_light_heavy: expected type",
            |v| v["steps"][0]["ratio_light_heavy"] = Value::from("4"),
        ),
        (
            "negative mean",
            "$.steps[0].classes[2].mean_ms: -1 < minimum",
            |v| v["steps"][0]["classes"][2]["mean_ms"] = Value::from(-1.0),
        ),
        ("unknown policy", "$.policy: \"fifo\" not in", |v| {
            v["policy"] = Value::from("fifo")
        }),
        ("unknown outcome", "$.verdict.outcome: \"ok\" not in", |v| {
            v["verdict"]["outcome"] = Value::from("ok")
        }),
        (
            "unknown class name",
            "$.classes[0].name: \"tiny\" not in",
            |v| v["classes"][0]["name"] = Value::from("tiny"),
        ),
        ("wrong kind", "$.kind: expected \"demo\"", |v| {
            v["kind"] = Value::from("bench")
        }),
        ("wrong version", "$.version: expected 1", |v| {
            v["version"] = Value::from(2)
        }),
        (
            "an unknown field",
            "$.steps[0]: unexpected property extra",
            |v| {
                v["steps"][0]
                    .as_object_mut()
                    .unwrap()
                    .insert("extra".into(), Value::Null);
            },
        ),
        (
            "fingerprint without hostname",
            "$.fingerprint: missing required \"hostname\"",
            |v| {
                v["fingerprint"] = serde_json::json!({ "kernel_release": "6.1" });
            },
        ),
    ];
    for (what, expected, break_it) in cases {
        let mut v = good.clone();
        break_it(&mut v);
        let errors = check(&v);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{what}: expected an error containing {expected:?}, got {errors:?}"
        );
    }
}

#[test]
fn the_report_fixtures_validate() {
    // Real `ordo demo` outputs kept by ordo-report's tests, some written before `service_ms_values` and the
    // per-class `clients` existed: the schema accepts every version-1 file `ordo report` reads.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("report fixtures") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("demo-") && name.ends_with(".json")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read fixture");
        let v: Value = serde_json::from_str(&text).expect("fixture is JSON");
        assert_eq!(check(&v), Vec::<String>::new(), "{}", path.display());
        DemoResult::from_json(&text).expect("and the Rust type reads it");
        seen += 1;
    }
    assert!(seen > 0, "no demo fixtures in {}", dir.display());
}

#[test]
fn the_example_in_docs_demo_md_validates() {
    // docs/demo.md shows a shortened result file; it must stay a valid one.
    let page = include_str!("../../../docs/demo.md");
    let section = page
        .split("## The result file")
        .nth(1)
        .expect("docs/demo.md has a result-file section");
    let block = section
        .split("```json\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a ```json example");
    let v: Value = serde_json::from_str(block).expect("the example is JSON");
    assert_eq!(check(&v), Vec::<String>::new());
    DemoResult::from_json(block).expect("and the Rust type reads it");
}
