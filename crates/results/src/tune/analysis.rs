//! An experiment's analysis as data: per-configuration statistics, seed 000's table, main effects, the
//! comparisons against the baseline, the best configuration, scalability and a search's summary — what
//! `ordo tune show --json` writes (`"kind": "tune-analysis"`) and `ordo report` draws. ordo-tune computes it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Descriptive statistics of one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for n < 2.
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    /// Half-width of the 95% confidence interval of the mean (Student t); infinite for n < 2.
    pub ci95: f64,
}

impl Summary {
    /// CI half-width relative to |mean| (infinite when the mean is 0).
    pub fn rel_ci(&self) -> f64 {
        if self.mean == 0.0 || !self.mean.is_finite() {
            f64::INFINITY
        } else {
            self.ci95 / self.mean.abs()
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigStats {
    pub idx: usize,
    pub label: String,
    pub is_baseline: bool,
    pub values: BTreeMap<String, String>,
    pub score: Summary,
    /// Every metric's statistics.
    pub metrics: BTreeMap<String, Summary>,
}

/// Seed 000's table, over the configurations' mean scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeedTable {
    pub mean: f64,
    pub sd: f64,
    pub max: f64,
    pub min: f64,
    pub range: f64,
    pub baseline: Option<f64>,
    /// (best - baseline) / baseline, in the objective's direction.
    pub max_abs_increase: Option<f64>,
    /// (best - worst) / worst, in the objective's direction.
    pub max_rel_increase: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LevelMean {
    pub level: String,
    pub mean: f64,
    pub configurations: usize,
}

/// The mean score at each level of a knob (averaged over the configurations that set it to that level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MainEffect {
    pub knob: String,
    pub levels: Vec<LevelMean>,
    /// Largest minus smallest level mean.
    pub spread: f64,
    /// Computed over the points a search chose to visit, not a balanced design: a level's mean depends on
    /// where the search looked (mostly near its best), so it is an observation, not the knob's effect.
    #[serde(default)]
    pub observational: bool,
}

/// A configuration against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Comparison {
    pub idx: usize,
    pub label: String,
    /// mean(config) - mean(baseline)
    pub diff: f64,
    /// diff / mean(baseline)
    pub rel: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub p: f64,
    pub p_holm: f64,
    pub significant: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Best {
    pub idx: usize,
    pub label: String,
    pub mean: f64,
    pub ci95: f64,
    /// Against the baseline, when one was measured and this is not it.
    pub vs_baseline: Option<Comparison>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ScaleRow {
    /// The other knobs' values (empty when the scale knob is the only one).
    pub group: String,
    pub a: f64,
    pub b: f64,
    pub runtime_a: f64,
    pub runtime_b: f64,
    /// (runtime_b / runtime_a) / (b / a): 1 = runtime grows in proportion to the count; lower is better.
    pub ratio: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Scalability {
    pub knob: String,
    /// What "runtime" is: `<w>.elapsed_s` for a fixed amount of work, else 1 / throughput.
    pub runtime_metric: String,
    pub rows: Vec<ScaleRow>,
}

/// Everything `ordo tune show` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Analysis {
    pub experiment: i64,
    pub name: String,
    pub status: String,
    pub objective: String,
    pub score_terms: Vec<(String, f64)>,
    pub configs: Vec<ConfigStats>,
    pub table: Option<SeedTable>,
    pub main_effects: Vec<MainEffect>,
    pub comparisons: Vec<Comparison>,
    pub best: Option<Best>,
    pub scalability: Option<Scalability>,
    /// A search experiment's trials and re-check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSummary>,
    pub notes: Vec<String>,
    /// Printed before anything else by every output (a store merged with `--force`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What a search found, and how much of it survived the re-check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchSummary {
    pub budget: usize,
    /// Configurations tried (the baseline included).
    pub trials: usize,
    /// Points in the full grid.
    pub grid: usize,
    /// The configuration the search reported best, and its gain over the baseline in the search's own
    /// runs (in the objective's direction).
    pub best: Option<String>,
    pub reported_gain: Option<f64>,
    /// The best against the baseline in fresh interleaved blocks.
    pub recheck: Option<RecheckResult>,
    /// recheck gain / reported gain.
    pub kept: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecheckResult {
    /// Runs of each of the two.
    pub runs: usize,
    /// Gain over the baseline (in the objective's direction), relative to the baseline's mean.
    pub gain: f64,
    /// 95% interval of the difference (candidate − baseline), in score units.
    pub ci_low: f64,
    pub ci_high: f64,
    pub p: f64,
    pub significant: bool,
    /// mean(candidate) − mean(baseline) in score units, and relative to |mean(baseline)| (not in the
    /// objective's direction).
    #[serde(default)]
    pub diff: f64,
    #[serde(default)]
    pub rel: f64,
}
