//! Whether two experiments are the same experiment (the same workload, target, objective, score, knobs
//! and configurations — the machines may differ), and two runs of one experiment compared configuration
//! by configuration: what `ordo tune compare --json` writes (`"kind": "tune-comparison"`). `ordo tune
//! merge`/`compare` refuse what [`mismatches`] finds; `ordo report` warns with it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::analysis::Summary;
use super::experiment::{ExperimentData, ExperimentMeta};

/// What two experiments can differ in that makes comparing them meaningless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MismatchKind {
    /// The load generator and how it loads (`[[workload]]`: command or bench settings).
    Workload,
    /// What is tuned (`[target]`: the command, built-in server and its arguments, process name).
    Target,
    Objective,
    /// The score's metrics measure different things (req/s against ms).
    Units,
    /// The same units, but another metric or weight.
    Score,
    Knobs,
    Configurations,
    /// The store does not hold its experiment file, so its workload and target cannot be checked.
    Unknown,
}

impl std::fmt::Display for MismatchKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MismatchKind::Workload => "workload",
            MismatchKind::Target => "target",
            MismatchKind::Objective => "objective",
            MismatchKind::Units => "units",
            MismatchKind::Score => "score",
            MismatchKind::Knobs => "knobs",
            MismatchKind::Configurations => "configurations",
            MismatchKind::Unknown => "unknown",
        })
    }
}

/// One way two experiments differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mismatch {
    pub kind: MismatchKind,
    /// What differs, both sides named.
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.what)
    }
}

/// The unit of a metric, from its name (`web.p99_ms` → ms, `web.throughput` → req/s).
pub fn unit_of(metric: &str) -> &'static str {
    let m = metric.rsplit('.').next().unwrap_or(metric);
    if m.ends_with("_us_per_req") {
        "µs/req"
    } else if m.ends_with("_per_req") {
        "1/req"
    } else if m.ends_with("_ms") {
        "ms"
    } else if m.ends_with("_s") {
        "s"
    } else if m.ends_with("throughput") {
        "req/s"
    } else if matches!(
        m,
        "requests" | "errors" | "voluntary_switches" | "involuntary_switches"
    ) {
        "count"
    } else {
        "unknown unit"
    }
}

/// The `[target]` and `[[workload]]` tables of an experiment file as written (canonical TOML, so layout and
/// comments do not matter). A `pid = N` target is a running process whose number means nothing on another
/// machine: it counts as "a running process"; `ready_timeout` changes nothing measured and is left out.
fn setup(data: &ExperimentData) -> Option<(String, Vec<String>)> {
    let v: toml::Table = data.experiment.spec_text.parse().ok()?;
    let mut target = v.get("target")?.as_table()?.clone();
    target.remove("ready_timeout");
    if target.contains_key("pid") {
        target.insert(
            "pid".into(),
            toml::Value::String("a running process".into()),
        );
    }
    let workloads: Vec<String> = match v.get("workload")? {
        toml::Value::Array(a) => a.iter().map(one_line).collect(),
        t @ toml::Value::Table(_) => vec![one_line(t)],
        _ => return None,
    };
    Some((one_line(&toml::Value::Table(target)), workloads))
}

/// A TOML value on one line (`{ builtin = "ordo-serve", args = ["--workers", "4"] }`).
fn one_line(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => format!(
            "{{ {} }}",
            t.iter()
                .map(|(k, v)| format!("{k} = {}", one_line(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        toml::Value::Array(a) => format!(
            "[{}]",
            a.iter().map(one_line).collect::<Vec<_>>().join(", ")
        ),
        v => v.to_string(),
    }
}

fn score_text(terms: &[(String, f64)]) -> String {
    terms
        .iter()
        .map(|(m, w)| {
            if *w == 1.0 {
                format!("{m} ({})", unit_of(m))
            } else {
                format!("{w}×{m} ({})", unit_of(m))
            }
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Every way `b` is not the same experiment as `a` (empty when it is): its workload, target, objective,
/// score units and metrics, knobs and levels, configurations (labels and values, in order). A search's
/// configurations are the trials it chose, so two searches compare only when they chose the same. The
/// machines may differ: that is what comparing is for.
pub fn mismatches(a: &ExperimentData, b: &ExperimentData) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut add = |kind, what: String| out.push(Mismatch { kind, what });
    let (ma, mb) = (&a.experiment.meta, &b.experiment.meta);
    let ida = format!("experiment {}", a.experiment.id);
    let idb = format!("experiment {}", b.experiment.id);
    match (setup(a), setup(b)) {
        (Some((ta, wa)), Some((tb, wb))) => {
            if wa != wb {
                add(
                    MismatchKind::Workload,
                    format!(
                        "the workloads differ: {} against {}",
                        wa.join("; "),
                        wb.join("; ")
                    ),
                );
            }
            if ta != tb {
                add(
                    MismatchKind::Target,
                    format!("the targets differ: {ta} against {tb}"),
                );
            }
        }
        (x, y) => {
            let missing: Vec<String> = [(x.is_none(), "A", &ida), (y.is_none(), "B", &idb)]
                .into_iter()
                .filter(|(m, _, _)| *m)
                .map(|(_, side, id)| format!("{side} ({id})"))
                .collect();
            add(
                MismatchKind::Unknown,
                format!(
                    "{}: no readable experiment file stored, so the workload and target cannot be checked",
                    missing.join(" and ")
                ),
            );
        }
    }
    if ma.objective != mb.objective {
        add(
            MismatchKind::Objective,
            format!(
                "the objective differs: {} against {}",
                ma.objective, mb.objective
            ),
        );
    }
    if ma.score_terms != mb.score_terms {
        let units = |m: &ExperimentMeta| {
            m.score_terms
                .iter()
                .map(|(x, _)| unit_of(x))
                .collect::<Vec<_>>()
        };
        let kind = if units(ma) != units(mb) {
            MismatchKind::Units
        } else {
            MismatchKind::Score
        };
        add(
            kind,
            format!(
                "the score differs: {} against {}",
                score_text(&ma.score_terms),
                score_text(&mb.score_terms)
            ),
        );
    }
    if ma.knobs != mb.knobs {
        let names = |m: &ExperimentMeta| {
            m.knobs
                .iter()
                .map(|(k, l)| format!("{k} = [{}]", l.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        add(
            MismatchKind::Knobs,
            format!("the knobs differ: {} against {}", names(ma), names(mb)),
        );
    }
    if a.configurations.len() != b.configurations.len() {
        add(
            MismatchKind::Configurations,
            format!(
                "{} configurations against {}",
                a.configurations.len(),
                b.configurations.len()
            ),
        );
    } else if let Some((x, y)) = a
        .configurations
        .iter()
        .zip(&b.configurations)
        .find(|(x, y)| x.values != y.values || x.label != y.label || x.is_baseline != y.is_baseline)
    {
        add(
            MismatchKind::Configurations,
            format!(
                "configuration {} is `{}` in one and `{}` in the other",
                x.idx, x.label, y.label
            ),
        );
    }
    out
}

/// Why `b` is not the same experiment as `a`, if it is not (every difference, `; `-separated).
pub fn incompatibility(a: &ExperimentData, b: &ExperimentData) -> Option<String> {
    let m = mismatches(a, b);
    (!m.is_empty()).then(|| joined(&m))
}

/// Differences as one line, `; `-separated.
pub fn joined(mismatches: &[Mismatch]) -> String {
    mismatches
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Where an experiment came from, for the output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Side {
    pub experiment: i64,
    pub name: String,
    /// `hostname — Linux <release>, HZ=…, <preemption>` when the fingerprint is known.
    pub machine: String,
}

/// One configuration in both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigComparison {
    pub idx: usize,
    pub label: String,
    pub a: Summary,
    pub b: Summary,
    /// mean(b) - mean(a), and relative to |mean(a)|, in score units (not the objective's direction).
    pub diff: f64,
    pub rel: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub p: f64,
    pub p_holm: f64,
    pub significant: bool,
}

/// Every configuration of two runs of one experiment, compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreComparison {
    pub a: Side,
    pub b: Side,
    /// Set when the experiments differ and `--force` compared them anyway (also a merge forced before):
    /// every output prints it first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    pub objective: String,
    pub configs: Vec<ConfigComparison>,
}
