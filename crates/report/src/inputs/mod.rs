//! Reading inputs: detect what a file is (a JSON result with a `"kind"` field, a JSON-lines stream of
//! `probe-pid` intervals, or an `ordo tune` SQLite store by its file magic), check its version, and parse it
//! into the kind's type. Anything else is refused with the file's name and what was expected. A store is
//! not opened here: the caller's [`StoreReader`] (ordo's is ordo-tune's) turns it into typed results.

pub(crate) mod bench;
pub(crate) mod demo;
pub(crate) mod probe;
pub(crate) mod series;
pub(crate) mod tune;

use std::path::Path;

use ordo_results::tune::{ExperimentResult, StoreReadError};
use serde_json::Value;

use crate::doc::Section;
use crate::machine::Machine;

/// What `ordo report` accepts, for error messages.
pub const EXPECTED: &str = "a JSON result with \"kind\" one of demo, bench, probe-loop, probe-compare, probe-pid, series (as written by ordo demo / ordo bench --json / ordo probe --json / bench/ scripts) or an ordo tune SQLite store";

/// The first 16 bytes of every SQLite 3 database.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not an ordo result ({reason}); expected {EXPECTED}")]
    Unknown { path: String, reason: String },
    #[error("{path}: corrupt {kind} result: {reason}")]
    Corrupt {
        path: String,
        kind: String,
        reason: String,
    },
    #[error("{path}: {kind} result has version {found}; this ordo reads version {expected}")]
    Version {
        path: String,
        kind: String,
        found: String,
        expected: u64,
    },
}

pub use ordo_results::Kind;

/// Reads an `ordo tune` SQLite store as typed results: every experiment in it (or only experiment `only`)
/// with its analysis, oldest first. ordo passes ordo-tune's `export::read_store`; this crate never opens
/// SQLite or runs the statistics itself.
pub type StoreReader<'a> =
    &'a dyn Fn(&Path, Option<i64>) -> Result<Vec<ExperimentResult>, StoreReadError>;

/// A parsed input of one kind.
#[derive(Clone, Debug)]
pub enum InputData {
    Demo(Box<demo::DemoResult>),
    Bench(Box<ordo_results::bench::BenchReport>),
    ProbeLoop(Box<ordo_results::probe::LoopReport>),
    ProbeCompare(Box<ordo_results::probe::CompareReport>),
    /// One report per interval, in order (`ordo probe pid --json` writes one JSON object per line).
    ProbePid(Vec<ordo_results::probe::PidReport>),
    /// Every experiment of an `ordo tune` store, analysed.
    Tune(Box<tune::TuneStore>),
    /// Generic charts and tables from a bench/ script.
    Series(Box<ordo_results::series::SeriesResult>),
}

/// One input: where it came from and what it holds.
#[derive(Clone, Debug)]
pub struct Input {
    /// The file name shown in the report (as given on the command line).
    pub name: String,
    /// The machine it was measured on (from the `"fingerprint"` object when the result has one).
    pub machine: Machine,
    pub data: InputData,
}

impl Input {
    /// Wrap an in-memory demo result (what `ordo demo` hands over when it finishes).
    pub fn demo(name: impl Into<String>, result: demo::DemoResult) -> Input {
        Input {
            name: name.into(),
            machine: Machine::from_value(
                result
                    .fingerprint
                    .as_ref()
                    .and_then(|f| serde_json::to_value(f).ok())
                    .as_ref(),
            ),
            data: InputData::Demo(Box::new(result)),
        }
    }

    /// Wrap an in-memory bench report.
    pub fn bench(name: impl Into<String>, report: ordo_results::bench::BenchReport) -> Input {
        Input {
            name: name.into(),
            machine: Machine::default(),
            data: InputData::Bench(Box::new(report)),
        }
    }

    /// Wrap the experiments of an `ordo tune` store (what ordo hands over when an experiment finishes);
    /// `name` is the store's file.
    pub fn tune(name: impl Into<String>, experiments: Vec<ExperimentResult>) -> Input {
        let store = tune::TuneStore {
            experiments: experiments
                .into_iter()
                .map(tune::Experiment::from)
                .collect(),
        };
        let machine = store
            .experiments
            .last()
            .map(|e| e.machine.clone())
            .unwrap_or_default();
        Input {
            name: name.into(),
            machine,
            data: InputData::Tune(Box::new(store)),
        }
    }

    /// Read the `ordo tune` store at `path` through `stores` (every experiment, or only `only`).
    pub fn tune_store(
        path: &Path,
        only: Option<i64>,
        stores: StoreReader<'_>,
    ) -> Result<Input, InputError> {
        let name = path.display().to_string();
        let experiments = stores(path, only).map_err(|e| match e {
            StoreReadError::NotAStore(reason) => InputError::Unknown {
                path: name.clone(),
                reason: format!("an SQLite database but not an ordo tune store: {reason}"),
            },
            StoreReadError::Corrupt(reason) => InputError::Corrupt {
                path: name.clone(),
                kind: "tune store".into(),
                reason,
            },
        })?;
        Ok(Input::tune(name, experiments))
    }

    pub fn kind(&self) -> Kind {
        match &self.data {
            InputData::Demo(_) => Kind::Demo,
            InputData::Bench(_) => Kind::Bench,
            InputData::ProbeLoop(_) => Kind::ProbeLoop,
            InputData::ProbeCompare(_) => Kind::ProbeCompare,
            InputData::ProbePid(_) => Kind::ProbePid,
            InputData::Tune(_) => Kind::Tune,
            InputData::Series(_) => Kind::Series,
        }
    }

    /// The file name without its directories.
    pub fn short_name(&self) -> String {
        Path::new(&self.name)
            .file_name()
            .map_or_else(|| self.name.clone(), |n| n.to_string_lossy().into_owned())
    }

    /// Every machine the input was measured on: one for most results; for a tune store, whose merged form
    /// holds one experiment per machine or kernel, one per distinct machine, naming its experiments
    /// ("experiment #1, #3").
    pub fn machines(&self) -> Vec<(String, Machine)> {
        if let InputData::Bench(b) = &self.data {
            // a merged bench result: one generator machine per run merged
            if !b.merged.is_empty() {
                return b
                    .merged
                    .iter()
                    .map(|run| {
                        let fp = run
                            .fingerprint
                            .as_ref()
                            .and_then(|f| serde_json::to_value(f).ok());
                        (
                            format!("run {}", run.source),
                            Machine::from_value(fp.as_ref()),
                        )
                    })
                    .collect();
            }
        }
        let InputData::Tune(t) = &self.data else {
            return vec![(String::new(), self.machine.clone())];
        };
        let mut out: Vec<(Vec<String>, Machine)> = Vec::new();
        for e in &t.experiments {
            let id = format!("#{}", e.data.experiment.id);
            match out.iter_mut().find(|(_, m)| *m == e.machine) {
                Some((ids, _)) => ids.push(id),
                None => out.push((vec![id], e.machine.clone())),
            }
        }
        if out.len() <= 1 {
            return vec![(String::new(), self.machine.clone())];
        }
        out.into_iter()
            .map(|(ids, m)| (format!("experiment {}", ids.join(", ")), m))
            .collect()
    }

    /// Warnings the page header repeats (a tune store or bench results merged with `--force`).
    pub fn warnings(&self) -> Vec<String> {
        if let InputData::Bench(b) = &self.data {
            return b.warnings.clone();
        }
        let InputData::Tune(t) = &self.data else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for w in t.experiments.iter().flat_map(|e| &e.analysis.warnings) {
            if !out.contains(w) {
                out.push(w.clone());
            }
        }
        out
    }

    /// "kernel @ host" when known, else the file name.
    pub fn label(&self) -> String {
        self.machine.label().unwrap_or_else(|| self.short_name())
    }

    /// One line saying what was run.
    pub fn summary(&self) -> String {
        match &self.data {
            InputData::Demo(d) => demo::summary(d),
            InputData::Bench(b) => bench::summary(b),
            InputData::ProbeLoop(r) => probe::loop_summary(r),
            InputData::ProbeCompare(r) => probe::compare_summary(r),
            InputData::ProbePid(r) => probe::pid_summary(r),
            InputData::Tune(t) => tune::summary(t),
            InputData::Series(r) => series::summary(r),
        }
    }

    /// The input's own sections (one, or one per experiment of a tune store).
    pub(crate) fn sections(&self, id: &str) -> Vec<Section> {
        let one = match &self.data {
            InputData::Demo(d) => demo::section(d, id, &self.short_name(), &self.machine),
            InputData::Bench(b) => bench::section(b, id, &self.short_name(), &self.machine),
            InputData::ProbeLoop(r) => {
                probe::loop_section(r, id, &self.short_name(), &self.machine)
            }
            InputData::ProbeCompare(r) => {
                probe::compare_section(r, id, &self.short_name(), &self.machine)
            }
            InputData::ProbePid(r) => probe::pid_section(r, id, &self.short_name()),
            InputData::Series(r) => series::section(r, id, &self.short_name()),
            InputData::Tune(t) => return tune::sections(t, id, &self.short_name()),
        };
        vec![one]
    }
}

/// Read and parse one input file; an `ordo tune` store is read through `stores` (without one, a store is
/// refused as an input this caller cannot read).
pub fn load(path: &Path, stores: Option<StoreReader<'_>>) -> Result<Input, InputError> {
    let name = path.display().to_string();
    if is_sqlite(path) {
        return match stores {
            Some(read) => Input::tune_store(path, None, read),
            None => Err(InputError::Unknown {
                path: name,
                reason: "an SQLite database (an ordo tune store?), and this reader opens JSON results only"
                    .into(),
            }),
        };
    }
    let bytes = std::fs::read(path).map_err(|source| InputError::Read {
        path: name.clone(),
        source,
    })?;
    parse(&name, &bytes)
}

/// Read several inputs, stopping at the first that fails.
pub fn load_all<P: AsRef<Path>>(
    paths: &[P],
    stores: Option<StoreReader<'_>>,
) -> Result<Vec<Input>, InputError> {
    paths.iter().map(|p| load(p.as_ref(), stores)).collect()
}

/// Parse an input's bytes; `name` is used in messages.
pub fn parse(name: &str, bytes: &[u8]) -> Result<Input, InputError> {
    let unknown = |reason: String| InputError::Unknown {
        path: name.to_string(),
        reason,
    };
    if bytes.starts_with(SQLITE_MAGIC) {
        return Err(unknown(
            "an SQLite database, which can only be read from a file".into(),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        unknown(format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Err(unknown("the file is empty".into()));
    }
    // One JSON document, or several (JSON lines: `ordo probe pid --json` writes one object per interval).
    let mut docs: Vec<Value> = Vec::new();
    for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match v {
            Ok(v) => docs.push(v),
            Err(e) if docs.is_empty() => return Err(unknown(format!("not JSON: {e}"))),
            Err(e) => {
                return Err(InputError::Corrupt {
                    path: name.to_string(),
                    kind: kind_of(&docs[0]).unwrap_or("JSON").to_string(),
                    reason: format!("document {} of the stream: {e}", docs.len() + 1),
                });
            }
        }
    }
    let first = &docs[0];
    let Some(obj) = first.as_object() else {
        return Err(unknown("the JSON document is not an object".into()));
    };
    let Some(kind_s) = kind_of(first) else {
        return Err(unknown("the JSON object has no \"kind\" field".into()));
    };
    let Some(kind) = Kind::from_kind_field(kind_s) else {
        return Err(unknown(format!("unknown kind {kind_s:?}")));
    };
    if docs.len() > 1 && kind != Kind::ProbePid {
        return Err(InputError::Corrupt {
            path: name.to_string(),
            kind: kind.as_str().to_string(),
            reason: format!(
                "{} JSON documents in one file; only probe-pid results are a stream",
                docs.len()
            ),
        });
    }
    for d in &docs {
        check_version(name, kind, d)?;
    }
    let corrupt = |e: Located| InputError::Corrupt {
        path: name.to_string(),
        kind: kind.as_str().to_string(),
        reason: located(&e),
    };
    let machine = Machine::from_value(obj.get("fingerprint"));
    let one = |docs: &mut Vec<Value>| docs.pop().unwrap_or(Value::Null);
    let data = match kind {
        Kind::Demo => InputData::Demo(Box::new(typed(one(&mut docs)).map_err(corrupt)?)),
        Kind::Bench => InputData::Bench(Box::new(typed(one(&mut docs)).map_err(corrupt)?)),
        Kind::ProbeLoop => InputData::ProbeLoop(Box::new(typed(one(&mut docs)).map_err(corrupt)?)),
        Kind::ProbeCompare => {
            InputData::ProbeCompare(Box::new(typed(one(&mut docs)).map_err(corrupt)?))
        }
        Kind::ProbePid => {
            let mut out = Vec::with_capacity(docs.len());
            for (i, d) in docs.into_iter().enumerate() {
                if kind_of(&d) != Some("probe-pid") {
                    return Err(InputError::Corrupt {
                        path: name.to_string(),
                        kind: "probe-pid".into(),
                        reason: format!("document {} is not a probe-pid interval", i + 1),
                    });
                }
                out.push(typed(d).map_err(|e| InputError::Corrupt {
                    path: name.to_string(),
                    kind: "probe-pid".into(),
                    reason: format!("document {}: {}", i + 1, located(&e)),
                })?);
            }
            InputData::ProbePid(out)
        }
        Kind::Series => InputData::Series(Box::new(typed(one(&mut docs)).map_err(corrupt)?)),
        // Tune stores are SQLite files; no JSON document has this kind.
        Kind::Tune => return Err(unknown(format!("unknown kind {kind_s:?}"))),
    };
    Ok(Input {
        name: name.to_string(),
        machine,
        data,
    })
}

/// A result document's failure to read as its type, with where in the document it happened.
type Located = serde_path_to_error::Error<serde_json::Error>;

/// `doc` as the result type `T`; an error names the field that did not fit (`summary.latency.count`).
fn typed<T: serde::de::DeserializeOwned>(doc: Value) -> Result<T, Located> {
    serde_path_to_error::deserialize(doc)
}

/// The error's text, after the path of the field it is about when there is one (`.`: the document).
fn located(e: &Located) -> String {
    match e.path().to_string().as_str() {
        "." => e.inner().to_string(),
        path => format!("{path}: {}", e.inner()),
    }
}

/// Whether the file starts with SQLite's magic (unreadable files are left to the JSON path's error).
fn is_sqlite(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == SQLITE_MAGIC)
}

fn kind_of(v: &Value) -> Option<&str> {
    ordo_results::kind_of(v)
}

fn check_version(name: &str, kind: Kind, doc: &Value) -> Result<(), InputError> {
    ordo_results::check_version(doc).map_err(|found| InputError::Version {
        path: name.to_string(),
        kind: kind.as_str().to_string(),
        found,
        expected: ordo_results::VERSION,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_it_does_not_know() {
        let e = parse("x.json", b"").unwrap_err().to_string();
        assert!(e.starts_with("x.json: not an ordo result (the file is empty)"));
        let e = parse("x.json", b"{\"a\": 1").unwrap_err().to_string();
        assert!(e.contains("x.json: not an ordo result (not JSON"), "{e}");
        let e = parse("x.json", b"[1, 2]").unwrap_err().to_string();
        assert!(e.contains("not an object"));
        let e = parse("x.json", b"{\"kind\": \"pizza\"}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown kind \"pizza\"") && e.contains("expected a JSON result"));
        let e = parse("x.json", b"{\"kind\": \"demo\", \"version\": 7}")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "x.json: demo result has version 7; this ordo reads version 1"
        );
        let e = parse("x.json", b"{\"kind\": \"demo\", \"version\": 1}")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("x.json: corrupt demo result: missing field"),
            "{e}"
        );
        let e = parse("x.bin", &[0xff, 0xfe, 0]).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"));
    }

    /// A result whose field has the wrong type is refused naming that field, however deep it is.
    #[test]
    fn a_corrupt_field_is_named_by_its_path() {
        let good = include_str!("../../../../examples/report/bench-mix.json");
        let mut v: Value = serde_json::from_str(good).unwrap();
        assert!(parse("x.json", good.as_bytes()).is_ok());
        v["summary"]["latency"]["count"] = Value::from("many");
        let e = parse("x.json", v.to_string().as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "x.json: corrupt bench result: summary.latency.count: invalid type: string \"many\""
            ),
            "{e}"
        );
        // in a stream of probe-pid intervals, the document and the field
        let pid = include_str!("../../../../examples/report/probe-pid.jsonl");
        let mut docs: Vec<Value> = pid
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        docs[2]["process"]["cpu_pct"] = Value::from("hot");
        let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
        let e = parse("x.jsonl", text.as_bytes()).unwrap_err().to_string();
        assert!(
            e.contains("document 3: process.cpu_pct: invalid type: string \"hot\""),
            "{e}"
        );
    }

    /// A store is read through the caller's reader only; its two errors name the file.
    #[test]
    fn a_store_goes_through_the_reader_and_its_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        std::fs::write(&db, SQLITE_MAGIC).unwrap();
        let e = load(&db, None).unwrap_err().to_string();
        assert!(
            e.contains("t.db: not an ordo result (an SQLite database"),
            "{e}"
        );
        let not_store: StoreReader<'_> = &|_, _| {
            Err(StoreReadError::NotAStore(
                "no such table: experiments".into(),
            ))
        };
        let e = load(&db, Some(not_store)).unwrap_err().to_string();
        assert!(
            e.contains("t.db: not an ordo result (an SQLite database but not an ordo tune store: no such table"),
            "{e}"
        );
        let corrupt: StoreReader<'_> = &|_, only| {
            Err(StoreReadError::Corrupt(format!(
                "the store has no experiment {only:?}"
            )))
        };
        let e = Input::tune_store(&db, Some(4), corrupt)
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("t.db: corrupt tune store result: the store has no experiment Some(4)"),
            "{e}"
        );
        let empty: StoreReader<'_> = &|_, _| Ok(Vec::new());
        let input = load(&db, Some(empty)).unwrap();
        assert_eq!(input.kind(), Kind::Tune);
    }
}
