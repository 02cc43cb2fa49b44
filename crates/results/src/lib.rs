//! ordo-results: every result ordo writes and `ordo report` reads, as plain data — the kind/version
//! envelope, `ordo bench --json`'s report, `ordo probe --json`'s three reports, `ordo demo`'s result, `ordo
//! tune`'s experiment, analysis and comparison, and the machine data they embed (fingerprint, scheduling
//! policy, process counters).
//!
//! It depends on no project crate: the producers (ordo-bench, ordo-probe, ordo-demo, ordo-tune, ordo-sys)
//! fill these types; readers (ordo-report) need only this crate, never the server, the load generator, the
//! tune runner or the Linux layer. The committed JSON Schemas under `crates/results/schema/` are generated
//! from the types by [`schema`] and a test keeps them equal.

pub mod bench;
pub mod demo;
pub mod machine;
pub mod probe;
pub mod schema;
pub mod series;
pub mod tune;

use serde_json::Value;

/// The layout version every JSON result carries in `"version"`; readers refuse any other.
pub const VERSION: u64 = 1;

/// The kinds of result, as written in the `"kind"` field (and, for tune, an SQLite store).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Demo,
    Bench,
    ProbeLoop,
    ProbeCompare,
    ProbePid,
    /// An `ordo tune` SQLite store, read as typed [`tune::ExperimentResult`]s (no JSON document
    /// `ordo report` reads has this kind).
    Tune,
    /// Generic charts and tables a bench/ script writes (`ordo_report`'s `inputs::series`).
    Series,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Demo => "demo",
            Kind::Bench => "bench",
            Kind::ProbeLoop => "probe-loop",
            Kind::ProbeCompare => "probe-compare",
            Kind::ProbePid => "probe-pid",
            Kind::Tune => "tune",
            Kind::Series => "series",
        }
    }

    /// The kind a JSON document's `"kind"` field names (tune stores are not JSON, so never [`Kind::Tune`]).
    pub fn from_kind_field(s: &str) -> Option<Kind> {
        match s {
            "demo" => Some(Kind::Demo),
            "bench" => Some(Kind::Bench),
            "probe-loop" => Some(Kind::ProbeLoop),
            "probe-compare" => Some(Kind::ProbeCompare),
            "probe-pid" => Some(Kind::ProbePid),
            "series" => Some(Kind::Series),
            _ => None,
        }
    }
}

/// The `"kind"` field of a JSON document, if it has one.
pub fn kind_of(v: &Value) -> Option<&str> {
    v.get("kind").and_then(Value::as_str)
}

/// Whether a document's `"version"` is the one this code reads; `Err` carries what was found, as written
/// (`"(missing)"` when absent).
pub fn check_version(v: &Value) -> Result<(), String> {
    let found = v.get("version");
    match found.and_then(Value::as_u64) {
        Some(VERSION) => Ok(()),
        _ => Err(found.map_or_else(|| "(missing)".to_string(), Value::to_string)),
    }
}
