//! `ordo demo`'s result (`"kind": "demo"`): the set-up, one entry per client count, and the verdict against
//! seed 003's targets (light/heavy 4, medium/heavy 2), with the ratio and verdict arithmetic kept beside the
//! data so every reader computes them the same way. ordo-demo fills it; the JSON Schema is generated from
//! these types (crates/results/schema/demo-result.schema.json).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `kind` of every demo JSON document.
pub const KIND: &str = "demo";
/// The schema version of [`DemoResult`].
pub const VERSION: u32 = 1;
/// Steps at or above this many clients are held to the policy's tolerance (the seed: "by the time I had
/// approached 300 clients ... better than 5 percent").
pub const TARGET_MIN_CLIENTS: usize = 300;

/// Ideal light/heavy and medium/heavy response-time ratios for weights 1:2:4.
pub const TARGET_LIGHT_HEAVY: f64 = 4.0;
/// See [`TARGET_LIGHT_HEAVY`].
pub const TARGET_MEDIUM_HEAVY: f64 = 2.0;
/// The scheduling policy the demo runs the server with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DemoPolicy {
    /// The seed's probabilistic rule: each free worker draws a class with probability ∝ weight.
    Lottery,
    /// The deterministic proportional-share rule: same long-run shares, no randomness.
    Stride,
}

impl DemoPolicy {
    /// Every policy the demo runs, in the order `--policy` lists them.
    pub const ALL: [DemoPolicy; 2] = [DemoPolicy::Lottery, DemoPolicy::Stride];

    /// Name as used on the command line, in the server config and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DemoPolicy::Lottery => "lottery",
            DemoPolicy::Stride => "stride",
        }
    }

    /// How close to the ideal ratios (relative error) the steps at ≥ [`TARGET_MIN_CLIENTS`] must come.
    pub fn tolerance(self) -> f64 {
        match self {
            DemoPolicy::Lottery => 0.05,
            DemoPolicy::Stride => 0.02,
        }
    }
}

impl std::str::FromStr for DemoPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        DemoPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names = DemoPolicy::ALL.map(DemoPolicy::as_str);
                format!("unknown policy {s:?} (expected {})", names.join(" or "))
            })
    }
}

impl std::fmt::Display for DemoPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
/// One user class of the demo: its URL prefix, its weight and the size of the response it gets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DemoClass {
    /// `light`, `medium` or `heavy`.
    #[schemars(extend("enum" = ["light", "medium", "heavy"]))]
    pub name: String,
    /// Lottery tickets / stride share.
    #[schemars(range(min = 1))]
    pub weight: u32,
    /// Path prefix the server classifies on, e.g. `/light/`.
    pub path_prefix: String,
    /// Response body size in bytes (the seed's file for this user type, scaled down 100×).
    pub response_bytes: u64,
}
/// A whole demo run: set-up, one entry per client count, the verdict and the machine it ran on.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct DemoResult {
    /// Always `"demo"`.
    #[schemars(extend("const" = "demo"))]
    pub kind: String,
    /// Always 1 for this layout.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    /// `lottery` or `stride`.
    pub policy: DemoPolicy,
    /// The classes in order light, medium, heavy with their weights, URL prefixes and response sizes.
    pub classes: Vec<DemoClass>,
    /// The seed's MaxClients.
    pub workers: usize,
    /// Mean synthetic service time per request, in milliseconds.
    #[schemars(range(min = 0))]
    pub service_ms: f64,
    /// Each request's service time is drawn uniformly from these values (ms), mean `service_ms`.
    #[serde(default)]
    pub service_ms_values: Vec<u64>,
    /// Measured seconds per step.
    #[schemars(range(min = 0))]
    pub step_duration_s: f64,
    /// Unmeasured warm-up seconds per step.
    #[schemars(range(min = 0))]
    pub warmup_s: f64,
    /// Whether `--quick` chose the defaults.
    pub quick: bool,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: u64,
    /// False when the run was stopped (Ctrl-C) before its last step; the steps present are complete.
    pub complete: bool,
    /// One entry per finished step, in the order run.
    pub steps: Vec<DemoStep>,
    /// The comparison with the seed's targets.
    pub verdict: Verdict,
    /// The machine and kernel the run happened on (ordo-sys fingerprint), when it could be collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<crate::machine::Fingerprint>,
}

/// One client count, measured after its warm-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DemoStep {
    /// Total closed-loop clients (equal numbers per class).
    #[schemars(range(min = 1))]
    pub clients: usize,
    /// Clients in each class.
    pub clients_per_class: usize,
    /// Seconds measured.
    #[schemars(range(min = 0))]
    pub duration_s: f64,
    /// Per class, in the order of [`DemoResult::classes`].
    pub classes: Vec<ClassStats>,
    /// Mean response time of light over heavy; the seed's target is 4. None when a class got no response.
    pub ratio_light_heavy: Option<f64>,
    /// Mean response time of medium over heavy; the seed's target is 2.
    pub ratio_medium_heavy: Option<f64>,
}

/// Response times of one class during one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClassStats {
    #[schemars(extend("enum" = ["light", "medium", "heavy"]))]
    pub name: String,
    /// Closed-loop clients of this class as the load generator realised them.
    #[serde(default)]
    pub clients: u64,
    /// Successful responses measured.
    pub requests: u64,
    /// Failed requests (connect/read errors, non-2xx).
    pub errors: u64,
    #[schemars(range(min = 0))]
    pub mean_ms: f64,
    #[schemars(range(min = 0))]
    pub p50_ms: f64,
    #[schemars(range(min = 0))]
    pub p95_ms: f64,
    #[schemars(range(min = 0))]
    pub p99_ms: f64,
    /// Successful responses per second.
    #[schemars(range(min = 0))]
    pub throughput_rps: f64,
}

/// How the steps at ≥ 300 clients compare with the ideal ratios 4 and 2.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// Allowed relative error (0.05 lottery, 0.02 stride).
    #[schemars(range(min = 0))]
    pub tolerance: f64,
    /// Steps at or above this many clients are checked.
    pub min_clients: usize,
    /// Client counts of the checked steps.
    pub checked_clients: Vec<usize>,
    /// Largest relative error of light/heavy from 4 over the checked steps.
    pub worst_light_heavy_error: Option<f64>,
    /// Largest relative error of medium/heavy from 2 over the checked steps.
    pub worst_medium_heavy_error: Option<f64>,
    pub outcome: Outcome,
}

/// The verdict's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every checked step is within tolerance.
    Met,
    /// At least one checked step is outside tolerance.
    Missed,
    /// No step reached the client count the target applies to.
    NotChecked,
}

/// Ratio of two mean response times; None unless both are positive and finite.
pub fn ratio(numerator_ms: f64, denominator_ms: f64) -> Option<f64> {
    if numerator_ms.is_finite()
        && denominator_ms.is_finite()
        && numerator_ms > 0.0
        && denominator_ms > 0.0
    {
        Some(numerator_ms / denominator_ms)
    } else {
        None
    }
}

/// Relative error of `value` from `target`.
pub fn relative_error(value: f64, target: f64) -> f64 {
    (value - target).abs() / target
}

impl DemoStep {
    /// Build a step from its per-class stats (light, medium, heavy order), computing the ratios.
    pub fn new(clients_per_class: usize, duration_s: f64, classes: Vec<ClassStats>) -> DemoStep {
        let mean = |name: &str| {
            classes
                .iter()
                .find(|c| c.name == name && c.requests > 0)
                .map(|c| c.mean_ms)
        };
        let (light, medium, heavy) = (mean("light"), mean("medium"), mean("heavy"));
        let r = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => ratio(a, b),
            _ => None,
        };
        DemoStep {
            clients: clients_per_class * classes.len(),
            clients_per_class,
            duration_s,
            ratio_light_heavy: r(light, heavy),
            ratio_medium_heavy: r(medium, heavy),
            classes,
        }
    }

    /// Total successful responses over all classes.
    pub fn requests(&self) -> u64 {
        self.classes.iter().map(|c| c.requests).sum()
    }

    /// Total failed requests over all classes.
    pub fn errors(&self) -> u64 {
        self.classes.iter().map(|c| c.errors).sum()
    }
}

/// Compare the steps at ≥ [`TARGET_MIN_CLIENTS`] clients with 4 and 2 at the policy's tolerance. A checked
/// step without a ratio (a class got no response) misses.
pub fn verdict(policy: DemoPolicy, steps: &[DemoStep]) -> Verdict {
    let tolerance = policy.tolerance();
    let checked: Vec<&DemoStep> = steps
        .iter()
        .filter(|s| s.clients >= TARGET_MIN_CLIENTS)
        .collect();
    let mut worst_lh: Option<f64> = None;
    let mut worst_mh: Option<f64> = None;
    let mut missing = false;
    for s in &checked {
        match (s.ratio_light_heavy, s.ratio_medium_heavy) {
            (Some(lh), Some(mh)) => {
                let e_lh = relative_error(lh, TARGET_LIGHT_HEAVY);
                let e_mh = relative_error(mh, TARGET_MEDIUM_HEAVY);
                worst_lh = Some(worst_lh.map_or(e_lh, |w| w.max(e_lh)));
                worst_mh = Some(worst_mh.map_or(e_mh, |w| w.max(e_mh)));
            }
            _ => missing = true,
        }
    }
    let outcome = if checked.is_empty() {
        Outcome::NotChecked
    } else if missing
        || worst_lh.is_some_and(|e| e > tolerance)
        || worst_mh.is_some_and(|e| e > tolerance)
    {
        Outcome::Missed
    } else {
        Outcome::Met
    };
    Verdict {
        tolerance,
        min_clients: TARGET_MIN_CLIENTS,
        checked_clients: checked.iter().map(|s| s.clients).collect(),
        worst_light_heavy_error: worst_lh,
        worst_medium_heavy_error: worst_mh,
        outcome,
    }
}
impl DemoResult {
    /// Append a finished step and refresh the verdict.
    pub fn push_step(&mut self, step: DemoStep) {
        self.steps.push(step);
        self.verdict = verdict(self.policy, &self.steps);
    }

    /// Check that a document read back is a demo result this code understands.
    pub fn from_json(text: &str) -> Result<DemoResult, ResultError> {
        let r: DemoResult = serde_json::from_str(text)?;
        if r.kind != KIND {
            return Err(ResultError::Kind(r.kind));
        }
        if r.version != VERSION {
            return Err(ResultError::Version(r.version));
        }
        Ok(r)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}
/// Errors reading or writing a demo result.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    #[error("not valid demo JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("kind is {0:?}, expected \"demo\"")]
    Kind(String),
    #[error("version {0} is not supported (expected 1)")]
    Version(u32),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}
