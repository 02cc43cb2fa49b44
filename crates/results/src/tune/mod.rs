//! `ordo tune`'s results as data: an experiment as stored, its analysis and the comparison of two runs of
//! one experiment, each with the kind/version envelope of the JSON `ordo tune show|export|compare --json`
//! write (`tune-analysis`, `tune-experiment`, `tune-comparison`). ordo-tune computes them from its SQLite
//! store; `ordo report` reads them without the store or the statistics.

mod analysis;
mod compare;
mod experiment;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use analysis::{
    Analysis, Best, Comparison, ConfigStats, LevelMean, MainEffect, RecheckResult, Scalability,
    ScaleRow, SearchSummary, SeedTable, Summary,
};
pub use compare::{
    ConfigComparison, Mismatch, MismatchKind, Side, StoreComparison, incompatibility, joined,
    mismatches, unit_of,
};
pub use experiment::{
    ConfigurationRow, Confirm, ExperimentData, ExperimentMeta, ExperimentRow, RecheckMeta, RunRow,
    SearchMeta, short_name,
};

use crate::machine::Fingerprint;

/// Why a file could not be read as an `ordo tune` store (ordo-tune's reader says which; `ordo report`
/// names the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreReadError {
    /// Not an ordo tune store (another SQLite database, or an unreadable one).
    #[error("{0}")]
    NotAStore(String),
    /// A tune store without the experiment asked for, with none, or with one that does not load.
    #[error("{0}")]
    Corrupt(String),
}

/// The `kind` of `ordo tune show --json`.
pub const ANALYSIS_KIND: &str = "tune-analysis";
/// The `kind` of `ordo tune export --format json`.
pub const EXPERIMENT_KIND: &str = "tune-experiment";
/// The `kind` of `ordo tune compare --json`.
pub const COMPARISON_KIND: &str = "tune-comparison";

/// `ordo tune show --json`: one experiment's analysis (of its score, or of the metric `--metric` names) and
/// the machine it ran on. Numbers that are not finite (the mean of no runs, the interval of one) are `null`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AnalysisResult {
    /// Always "tune-analysis".
    #[schemars(extend("const" = "tune-analysis"))]
    pub kind: String,
    /// Always 1.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub analysis: Analysis,
    /// The machine's fingerprint as stored (absent in stores written without one).
    #[schemars(with = "Option<Fingerprint>")]
    pub fingerprint: Option<Value>,
}

impl AnalysisResult {
    pub fn new(analysis: Analysis, fingerprint: Option<Value>) -> Self {
        AnalysisResult {
            kind: ANALYSIS_KIND.into(),
            version: crate::VERSION as u32,
            analysis,
            fingerprint,
        }
    }
}

/// `ordo tune export --format json`: everything stored about one experiment (its file, configurations,
/// every run's metrics, its machine) with its analysis; `ordo report` reads a store as one of these per
/// experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExperimentResult {
    /// Always "tune-experiment".
    #[schemars(extend("const" = "tune-experiment"))]
    pub kind: String,
    /// Always 1.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub experiment: ExperimentData,
    pub analysis: Analysis,
}

impl ExperimentResult {
    pub fn new(experiment: ExperimentData, analysis: Analysis) -> Self {
        ExperimentResult {
            kind: EXPERIMENT_KIND.into(),
            version: crate::VERSION as u32,
            experiment,
            analysis,
        }
    }
}

/// `ordo tune compare --json`: experiment B against experiment A, configuration by configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComparisonResult {
    /// Always "tune-comparison".
    #[schemars(extend("const" = "tune-comparison"))]
    pub kind: String,
    /// Always 1.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub comparison: StoreComparison,
}

impl ComparisonResult {
    pub fn new(comparison: StoreComparison) -> Self {
        ComparisonResult {
            kind: COMPARISON_KIND.into(),
            version: crate::VERSION as u32,
            comparison,
        }
    }
}
