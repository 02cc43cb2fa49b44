//! The JSON Schemas (draft 2020-12) of the results, generated from the Rust types so they cannot drift: the
//! files committed under `crates/results/schema/` must equal [`files`] (tests/schemas.rs checks it, and
//! `ORDO_BLESS=1 cargo test -p ordo-results --test it schemas::` rewrites them after a deliberate change).
//! The schemas describe what ordo reads (fields with a serde default, added in later releases, are optional
//! so older files stay valid). Every object schema is closed (`additionalProperties: false`), so a
//! document with a field the type does not know is refused.

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

use crate::bench::BenchReport;
use crate::demo::DemoResult;
use crate::probe::{CompareReport, LoopReport, PidReport};
use crate::series::SeriesResult;
use crate::tune::{AnalysisResult, ComparisonResult, ExperimentResult};

/// Output of `ordo probe loop --json` (LoopReport, kind probe-loop), `ordo probe loop --compare|--footprints
/// --json` (CompareReport, kind probe-compare) and each line of `ordo probe pid --json` (PidReport, kind
/// probe-pid). Field names give their unit (_ns, _ms, _pct, _per_s); fractions are 0..1.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // exists for its schema only, never built
enum ProbeReport {
    Loop(LoopReport),
    Compare(CompareReport),
    Pid(PidReport),
}

/// `additionalProperties: false` on every object schema that lists its properties.
fn close_objects(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
            obj.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
}

/// `"type": "number"` → `["number", "null"]`: serde_json writes a float that is not finite (the mean of no
/// runs, the interval of one) as `null`, and tune's statistics have such values.
fn nullable_numbers(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        if obj.get("type") == Some(&Value::from("number")) {
            obj.insert("type".into(), serde_json::json!(["number", "null"]));
        }
    }
}

fn generate<T: JsonSchema>(file: &str, title: &str) -> Value {
    generate_with::<T>(file, title, false)
}

fn generate_with<T: JsonSchema>(file: &str, title: &str, nullable: bool) -> Value {
    let mut close = RecursiveTransform(close_objects);
    let mut schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>();
    close.transform(&mut schema);
    if nullable {
        RecursiveTransform(nullable_numbers).transform(&mut schema);
    }
    let mut v = schema.to_value();
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "$id".into(),
            Value::from(format!("https://example.invalid/ordo/{file}")),
        );
        obj.insert("title".into(), Value::from(title));
    }
    v
}

/// The schema of `ordo bench --json`.
pub fn bench() -> Value {
    generate::<BenchReport>("bench-report.schema.json", "ordo bench report")
}

/// The schema of every `ordo probe --json` output (loop, compare, one pid interval).
pub fn probe() -> Value {
    generate::<ProbeReport>("probe-report.schema.json", "ordo probe reports")
}

/// The schema of `ordo demo`'s result file.
pub fn demo() -> Value {
    generate::<DemoResult>("demo-result.schema.json", "ordo demo result")
}

/// The schema of the generic `series` document bench/ scripts write.
pub fn series() -> Value {
    generate::<SeriesResult>("series.schema.json", "ordo series (bench/ scripts' charts)")
}

/// The schema of `ordo tune show --json` (kind tune-analysis).
pub fn tune_analysis() -> Value {
    generate_with::<AnalysisResult>("tune-analysis.schema.json", "ordo tune analysis", true)
}

/// The schema of `ordo tune export --format json` (kind tune-experiment).
pub fn tune_experiment() -> Value {
    generate_with::<ExperimentResult>("tune-experiment.schema.json", "ordo tune experiment", true)
}

/// The schema of `ordo tune compare --json` (kind tune-comparison).
pub fn tune_comparison() -> Value {
    generate_with::<ComparisonResult>("tune-comparison.schema.json", "ordo tune comparison", true)
}

/// Every committed schema: its file name under `crates/results/schema/` and its text (pretty JSON with a
/// final newline).
pub fn files() -> Vec<(&'static str, String)> {
    [
        ("bench-report.schema.json", bench()),
        ("probe-report.schema.json", probe()),
        ("demo-result.schema.json", demo()),
        ("series.schema.json", series()),
        ("tune-analysis.schema.json", tune_analysis()),
        ("tune-experiment.schema.json", tune_experiment()),
        ("tune-comparison.schema.json", tune_comparison()),
    ]
    .into_iter()
    .map(|(f, v)| {
        let mut text = serde_json::to_string_pretty(&v).unwrap_or_default();
        text.push('\n');
        (f, text)
    })
    .collect()
}
