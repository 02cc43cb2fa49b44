//! One `ordo tune` experiment as stored (its row, configurations, runs and machine): what `ordo tune
//! export --format json` writes under `"experiment"` and what `ordo report` reads from a store. ordo-tune's
//! SQLite store fills these types.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::machine::Fingerprint;

/// What the analysis needs to know about an experiment, stored with it so readers need not re-parse the
/// experiment file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExperimentMeta {
    /// Knob names in file order, with their levels.
    pub knobs: Vec<(String, Vec<String>)>,
    pub objective: String,
    /// score = sum(weight * metric)
    pub score_terms: Vec<(String, f64)>,
    pub scale_knob: Option<String>,
    /// Base count of the scalability ratio (default: the smallest level).
    #[serde(default)]
    pub scale_base: Option<f64>,
    pub min_runs: usize,
    pub max_runs: usize,
    pub rel_ci: f64,
    pub warmup_blocks: usize,
    /// The first workload does a fixed amount of work (request count, external command), so its
    /// `elapsed_s` is a runtime for the scalability ratio; otherwise runtime is 1 / throughput.
    #[serde(default)]
    pub fixed_work: bool,
    /// Knobs skipped (not root) or other notes printed at the start.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The design's kind (`full`, `ofat`, `list`, `random`, `search`); absent in stores written before it
    /// was recorded. Main effects are taken over the design's own points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<String>,
    /// A search's settings and, once it started, its re-check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchMeta>,
    /// Significance is decided on confirmatory blocks only (ordo-tune's `sequential`); false in stores
    /// written before, whose tests reused the runs that decided when to stop.
    #[serde(default)]
    pub confirmatory: bool,
    /// The confirmatory phase of a fixed design, once its pilot ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
    /// Warnings every output of this experiment carries (a merge forced over differing experiments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `[design] kind = "search"` as run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchMeta {
    pub budget: usize,
    pub initial: usize,
    pub seed: u64,
    /// Points of the full grid the search chose from.
    pub grid: usize,
    /// Set when the re-check starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recheck: Option<RecheckMeta>,
}

/// The re-check of a search's best trial: its configuration and the two configurations run against each
/// other in fresh interleaved blocks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecheckMeta {
    /// The configuration (trial) the search reported best.
    pub best: usize,
    /// The re-check's baseline and candidate configurations.
    pub baseline: usize,
    pub candidate: usize,
    /// The re-check's confirmatory phase, once its pilot ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
}

impl SearchMeta {
    /// Whether configuration `idx` belongs to the re-check (not a trial of the search).
    pub fn is_recheck(&self, idx: usize) -> bool {
        self.recheck
            .as_ref()
            .is_some_and(|r| r.baseline == idx || r.candidate == idx)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExperimentRow {
    pub id: i64,
    pub name: String,
    pub spec_path: String,
    pub spec_text: String,
    pub spec_hash: String,
    pub seed: u64,
    /// running | finished | interrupted | failed
    pub status: String,
    pub created_unix: i64,
    pub finished_unix: Option<i64>,
    pub meta: ExperimentMeta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigurationRow {
    pub id: i64,
    /// Position in the design (0 = baseline).
    pub idx: usize,
    pub label: String,
    pub values: BTreeMap<String, String>,
    pub is_baseline: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRow {
    pub id: i64,
    /// Index of the configuration (ConfigurationRow::idx).
    pub config: usize,
    pub block: usize,
    pub warmup: bool,
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub ok: bool,
    pub error: Option<String>,
    pub metrics: BTreeMap<String, f64>,
}

/// One experiment with everything stored about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExperimentData {
    pub experiment: ExperimentRow,
    /// The machine's [`Fingerprint`] as JSON (kept as a value so old stores stay readable and are
    /// written back as stored).
    #[schemars(with = "Option<Fingerprint>")]
    pub fingerprint: Option<serde_json::Value>,
    pub configurations: Vec<ConfigurationRow>,
    pub runs: Vec<RunRow>,
}

impl ExperimentData {
    /// Measured (non-warm-up, successful) values of `metric` for configuration `idx`, in run order.
    pub fn values(&self, idx: usize, metric: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter(|r| r.config == idx && !r.warmup && r.ok)
            .filter_map(|r| r.metrics.get(metric).copied())
            .filter(|v| v.is_finite())
            .collect()
    }

    /// Every metric name seen in measured runs.
    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .runs
            .iter()
            .flat_map(|r| r.metrics.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The fingerprint decoded, when it has the current shape.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fingerprint
            .clone()
            .and_then(|v| serde_json::from_value(v).ok())
    }
}

/// The confirmatory phase of an experiment (or of a search's re-check), decided when the pilot ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Confirm {
    /// The first confirmatory block: runs of this block and later decide significance.
    pub from: usize,
    /// Confirmatory blocks (each runs every configuration once).
    pub blocks: usize,
}

impl Confirm {
    /// Whether a run of `block` is confirmatory.
    pub fn holds(&self, block: usize) -> bool {
        block >= self.from
    }
}

/// A knob's short name for labels: `sysctl:vm.swappiness` -> `swappiness`, `param:threads` -> `threads`.
pub fn short_name(knob: &str) -> &str {
    let after_colon = knob.rsplit(':').next().unwrap_or(knob);
    if knob.starts_with("sysctl:") {
        after_colon.rsplit('.').next().unwrap_or(after_colon)
    } else {
        after_colon
    }
}
