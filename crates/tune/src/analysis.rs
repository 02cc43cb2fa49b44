//! What an experiment's numbers say: per-configuration statistics with confidence intervals, seed 000's
//! summary table, the main effect of each knob, Welch's t-test of every configuration against the
//! baseline with Holm's correction (so "no significant difference" is said when that is the truth), the
//! best configuration with its gain and interval, and seed 001's scalability ratio.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::spec::Objective;
use crate::stats::{Summary, holm, welch};
use crate::store::ExperimentData;

/// Significance level after Holm's correction.
pub const ALPHA: f64 = 0.05;

/// The composite score of one run: sum(weight * metric); `None` when a term's metric is missing.
pub fn score_of(metrics: &BTreeMap<String, f64>, terms: &[(String, f64)]) -> Option<f64> {
    terms
        .iter()
        .map(|(m, w)| metrics.get(m).map(|v| v * w))
        .sum::<Option<f64>>()
        .filter(|v| v.is_finite())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelMean {
    pub level: String,
    pub mean: f64,
    pub configurations: usize,
}

/// The mean score at each level of a knob (averaged over the configurations that set it to that level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MainEffect {
    pub knob: String,
    pub levels: Vec<LevelMean>,
    /// Largest minus smallest level mean.
    pub spread: f64,
}

/// A configuration against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub idx: usize,
    pub label: String,
    pub mean: f64,
    pub ci95: f64,
    /// Against the baseline, when one was measured and this is not it.
    pub vs_baseline: Option<Comparison>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scalability {
    pub knob: String,
    /// What "runtime" is: `<w>.elapsed_s` for a fixed amount of work, else 1 / throughput.
    pub runtime_metric: String,
    pub rows: Vec<ScaleRow>,
}

/// Everything `ordo tune show` prints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    pub notes: Vec<String>,
}

fn better(obj: Objective, a: f64, b: f64) -> bool {
    match obj {
        Objective::Maximize => a > b,
        Objective::Minimize => a < b,
    }
}

/// Analyse a stored experiment.
pub fn analyze(data: &ExperimentData) -> Analysis {
    let meta = &data.experiment.meta;
    let obj = meta.objective();
    let score_values = |idx: usize| -> Vec<f64> {
        data.runs
            .iter()
            .filter(|r| r.config == idx && !r.warmup && r.ok)
            .filter_map(|r| {
                r.metrics
                    .get("score")
                    .copied()
                    .or_else(|| score_of(&r.metrics, &meta.score_terms))
            })
            .filter(|v| v.is_finite())
            .collect()
    };
    let names = data.metric_names();
    let configs: Vec<ConfigStats> = data
        .configurations
        .iter()
        .map(|c| ConfigStats {
            idx: c.idx,
            label: c.label.clone(),
            is_baseline: c.is_baseline,
            values: c.values.clone(),
            score: Summary::of(&score_values(c.idx)),
            metrics: names
                .iter()
                .map(|m| (m.clone(), Summary::of(&data.values(c.idx, m))))
                .filter(|(_, s)| s.n > 0)
                .collect(),
        })
        .collect();
    let measured: Vec<&ConfigStats> = configs.iter().filter(|c| c.score.n > 0).collect();
    let baseline = configs.iter().find(|c| c.is_baseline && c.score.n > 0);

    // Seed 000's table.
    let table = (!measured.is_empty()).then(|| {
        let means: Vec<f64> = measured.iter().map(|c| c.score.mean).collect();
        let s = Summary::of(&means);
        let (best, worst) = match obj {
            Objective::Maximize => (s.max, s.min),
            Objective::Minimize => (s.min, s.max),
        };
        let dir = if obj == Objective::Maximize {
            1.0
        } else {
            -1.0
        };
        SeedTable {
            mean: s.mean,
            sd: s.sd,
            max: s.max,
            min: s.min,
            range: s.max - s.min,
            baseline: baseline.map(|b| b.score.mean),
            max_abs_increase: baseline.map(|b| dir * (best - b.score.mean) / b.score.mean.abs()),
            max_rel_increase: dir * (best - worst) / worst.abs(),
        }
    });

    // Main effects.
    let main_effects = meta
        .knobs
        .iter()
        .map(|(knob, levels)| {
            let mut out = Vec::new();
            let mut all_levels: Vec<String> = levels.clone();
            if measured.iter().any(|c| !c.values.contains_key(knob)) {
                all_levels.push("(machine)".into());
            }
            for l in all_levels {
                let ms: Vec<f64> = measured
                    .iter()
                    .filter(|c| match c.values.get(knob) {
                        Some(v) => *v == l,
                        None => l == "(machine)",
                    })
                    .map(|c| c.score.mean)
                    .collect();
                if !ms.is_empty() {
                    out.push(LevelMean {
                        level: l,
                        mean: crate::stats::mean(&ms),
                        configurations: ms.len(),
                    });
                }
            }
            let hi = out.iter().map(|l| l.mean).fold(f64::NEG_INFINITY, f64::max);
            let lo = out.iter().map(|l| l.mean).fold(f64::INFINITY, f64::min);
            MainEffect {
                knob: knob.clone(),
                spread: if out.is_empty() { 0.0 } else { hi - lo },
                levels: out,
            }
        })
        .collect();

    // Welch vs baseline, Holm-corrected.
    let mut comparisons = Vec::new();
    if let Some(b) = baseline {
        let bv = score_values(b.idx);
        let mut raw = Vec::new();
        for c in measured.iter().filter(|c| !c.is_baseline) {
            if let Some(w) = welch(&score_values(c.idx), &bv) {
                raw.push((c, w));
            }
        }
        let adj = holm(&raw.iter().map(|(_, w)| w.p).collect::<Vec<_>>());
        for ((c, w), p_holm) in raw.into_iter().zip(adj) {
            comparisons.push(Comparison {
                idx: c.idx,
                label: c.label.clone(),
                diff: w.diff,
                rel: w.diff / b.score.mean.abs(),
                ci_low: w.ci_low,
                ci_high: w.ci_high,
                p: w.p,
                p_holm,
                significant: p_holm < ALPHA,
            });
        }
    }

    // Best.
    let best = measured
        .iter()
        .copied()
        .reduce(|a, c| {
            if better(obj, c.score.mean, a.score.mean) {
                c
            } else {
                a
            }
        })
        .map(|c| Best {
            idx: c.idx,
            label: c.label.clone(),
            mean: c.score.mean,
            ci95: c.score.ci95,
            vs_baseline: comparisons.iter().find(|x| x.idx == c.idx).cloned(),
        });

    Analysis {
        experiment: data.experiment.id,
        name: data.experiment.name.clone(),
        status: data.experiment.status.clone(),
        objective: meta.objective.clone(),
        score_terms: meta.score_terms.clone(),
        table,
        main_effects,
        comparisons,
        best,
        scalability: meta
            .scale_knob
            .as_ref()
            .map(|k| scalability(data, &configs, k)),
        configs,
        notes: meta.notes.clone(),
    }
}

/// Analyse `metric` instead of the experiment's score (e.g. `web.p99_ms`, minimize).
pub fn analyze_metric(data: &ExperimentData, metric: &str, objective: Objective) -> Analysis {
    let mut d = data.clone();
    d.experiment.meta.score_terms = vec![(metric.to_string(), 1.0)];
    d.experiment.meta.objective = match objective {
        Objective::Maximize => "maximize".into(),
        Objective::Minimize => "minimize".into(),
    };
    for r in &mut d.runs {
        r.metrics.remove("score");
    }
    analyze(&d)
}

fn scalability(data: &ExperimentData, configs: &[ConfigStats], knob: &str) -> Scalability {
    let first = data
        .experiment
        .meta
        .score_terms
        .first()
        .map(|(m, _)| m.split('.').next().unwrap_or("web").to_string())
        .unwrap_or_else(|| "web".into());
    let elapsed = format!("{first}.elapsed_s");
    let throughput = format!("{first}.throughput");
    let fixed_work = data.experiment.meta.fixed_work
        && configs
            .iter()
            .filter(|c| c.score.n > 0)
            .all(|c| c.metrics.contains_key(&elapsed));
    let runtime_metric = if fixed_work {
        elapsed.clone()
    } else {
        format!("1/{throughput}")
    };
    let runtime = |c: &ConfigStats| -> Option<f64> {
        if fixed_work {
            c.metrics.get(&elapsed).map(|s| s.mean)
        } else {
            c.metrics
                .get(&throughput)
                .map(|s| s.mean)
                .filter(|v| *v > 0.0)
                .map(|v| 1.0 / v)
        }
    };
    // Group configurations by the other knobs' values.
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for c in configs.iter().filter(|c| c.score.n > 0) {
        let Some(level) = c.values.get(knob).and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let Some(rt) = runtime(c) else { continue };
        let group = c
            .values
            .iter()
            .filter(|(k, _)| k.as_str() != knob)
            .map(|(k, v)| format!("{}={v}", crate::design::short_name(k)))
            .collect::<Vec<_>>()
            .join(" ");
        groups.entry(group).or_default().push((level, rt));
    }
    let mut rows = Vec::new();
    for (group, mut pts) in groups {
        pts.sort_by(|x, y| x.0.total_cmp(&y.0));
        pts.dedup_by(|x, y| x.0 == y.0);
        let base = data
            .experiment
            .meta
            .scale_base
            .and_then(|b| pts.iter().find(|p| p.0 == b))
            .or(pts.first());
        let Some(&(a, ra)) = base else {
            continue;
        };
        for &(b, rb) in pts.iter().filter(|p| p.0 != a) {
            rows.push(ScaleRow {
                group: group.clone(),
                a,
                b,
                runtime_a: ra,
                runtime_b: rb,
                ratio: (rb / ra) / (b / a),
            });
        }
    }
    Scalability {
        knob: knob.to_string(),
        runtime_metric,
        rows,
    }
}

fn pct(x: f64) -> String {
    format!("{:+.2}%", 100.0 * x)
}

fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 1e5 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

/// The analysis as terminal text.
pub fn render(a: &Analysis) -> String {
    let mut o = String::new();
    let terms = a
        .score_terms
        .iter()
        .map(|(m, w)| {
            if *w == 1.0 {
                m.clone()
            } else {
                format!("{w}×{m}")
            }
        })
        .collect::<Vec<_>>()
        .join(" + ");
    let _ = writeln!(
        o,
        "experiment {} `{}` ({}) — score = {terms}, {}",
        a.experiment, a.name, a.status, a.objective
    );
    for n in &a.notes {
        let _ = writeln!(o, "note: {n}");
    }
    let w = a
        .configs
        .iter()
        .map(|c| c.label.len())
        .max()
        .unwrap_or(5)
        .clamp(5, 60);
    let _ = writeln!(
        o,
        "\n{:<w$}  {:>3}  {:>12}  {:>10}  {:>10}  {:>12}  {:>12}  {:>12}",
        "configuration", "n", "mean", "sd", "±95% CI", "CI/mean", "min", "max"
    );
    for c in &a.configs {
        let s = &c.score;
        let _ = writeln!(
            o,
            "{:<w$}  {:>3}  {:>12}  {:>10}  {:>10}  {:>12}  {:>12}  {:>12}",
            c.label,
            s.n,
            num(s.mean),
            num(s.sd),
            num(s.ci95),
            if s.n > 1 {
                format!("{:.2}%", 100.0 * s.rel_ci())
            } else {
                "-".into()
            },
            num(s.min),
            num(s.max)
        );
    }
    // Key measurements next to the score: throughput, p99, errors, and the target's cost per request.
    let first = a
        .score_terms
        .first()
        .and_then(|(m, _)| m.split('.').next())
        .filter(|p| *p != "target")
        .unwrap_or("web")
        .to_string();
    let cols: Vec<(String, &str)> = [
        (format!("{first}.throughput"), "req/s"),
        (format!("{first}.p99_ms"), "p99 ms"),
        (format!("{first}.errors"), "errors"),
        ("target.cpu_us_per_req".to_string(), "cpu µs/req"),
        ("target.vcsw_per_req".to_string(), "vcsw/req"),
        ("target.ivcsw_per_req".to_string(), "ivcsw/req"),
        ("target.run_delay_us_per_req".to_string(), "wait µs/req"),
    ]
    .into_iter()
    .filter(|(m, _)| a.configs.iter().any(|c| c.metrics.contains_key(m)))
    .collect();
    if !cols.is_empty() {
        let _ = write!(o, "\n{:<w$}", "means per configuration");
        for (_, h) in &cols {
            let _ = write!(o, "  {h:>11}");
        }
        let _ = writeln!(o);
        for c in &a.configs {
            let _ = write!(o, "{:<w$}", c.label);
            for (m, _) in &cols {
                let v = c.metrics.get(m).map(|s| s.mean).unwrap_or(f64::NAN);
                let _ = write!(o, "  {:>11}", num(v));
            }
            let _ = writeln!(o);
        }
    }
    if let Some(t) = &a.table {
        let _ = writeln!(o, "\nsummary over configuration means (seed 000's table)");
        let _ = writeln!(
            o,
            "  mean {}  sd {}  max {}  min {}  range {}",
            num(t.mean),
            num(t.sd),
            num(t.max),
            num(t.min),
            num(t.range)
        );
        if let (Some(b), Some(x)) = (t.baseline, t.max_abs_increase) {
            let _ = writeln!(
                o,
                "  baseline {}  max absolute increase over baseline {}",
                num(b),
                pct(x)
            );
        }
        let _ = writeln!(
            o,
            "  max relative increase of best over worst {}",
            pct(t.max_rel_increase)
        );
    }
    if !a.main_effects.is_empty() {
        let _ = writeln!(o, "\nmain effects (mean score per level)");
        for m in &a.main_effects {
            let levels = m
                .levels
                .iter()
                .map(|l| format!("{}: {} (n={})", l.level, num(l.mean), l.configurations))
                .collect::<Vec<_>>()
                .join("  ");
            let _ = writeln!(o, "  {:<36} {levels}  spread {}", m.knob, num(m.spread));
        }
    }
    if !a.comparisons.is_empty() {
        let _ = writeln!(
            o,
            "\nagainst the baseline (Welch's t-test, Holm-corrected, alpha {ALPHA})"
        );
        for c in &a.comparisons {
            let verdict = if c.significant {
                "SIGNIFICANT"
            } else {
                "no significant difference"
            };
            let _ = writeln!(
                o,
                "  {:<w$}  {:>9}  CI [{}, {}]  p={:.4}  p_holm={:.4}  {verdict}",
                c.label,
                pct(c.rel),
                num(c.ci_low),
                num(c.ci_high),
                c.p,
                c.p_holm
            );
        }
        if a.comparisons.iter().all(|c| !c.significant) {
            let _ = writeln!(
                o,
                "  => no configuration differs significantly from the baseline"
            );
        }
    }
    if let Some(s) = &a.scalability {
        let _ = writeln!(
            o,
            "\nscalability over {} (runtime = {}; (rt_B/rt_A)/(B/A), 1 = proportional, lower is better)",
            s.knob, s.runtime_metric
        );
        for r in &s.rows {
            let g = if r.group.is_empty() {
                String::new()
            } else {
                format!("[{}] ", r.group)
            };
            let _ = writeln!(o, "  {g}{}→{}: {:.4}", r.a, r.b, r.ratio);
        }
    }
    if let Some(b) = &a.best {
        match &b.vs_baseline {
            Some(c) => {
                let _ = writeln!(
                    o,
                    "\nbest: {} — {} ± {} ({} vs baseline{}, difference CI [{}, {}]; {})",
                    b.label,
                    num(b.mean),
                    num(b.ci95),
                    pct(c.rel),
                    match (a.objective.as_str(), c.rel < 0.0) {
                        ("minimize", true) | ("maximize", false) => ", better",
                        _ => ", worse",
                    },
                    num(c.ci_low),
                    num(c.ci_high),
                    if c.significant {
                        "significant after Holm correction"
                    } else {
                        "NOT significant: no significant difference from the baseline"
                    }
                );
            }
            None => {
                let _ = writeln!(o, "\nbest: {} — {} ± {}", b.label, num(b.mean), num(b.ci95));
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Rng;
    use crate::store::{ConfigurationRow, ExperimentMeta, ExperimentRow, RunRow};

    fn data(groups: &[(&str, Option<&str>, Vec<f64>)]) -> ExperimentData {
        let configurations = groups
            .iter()
            .enumerate()
            .map(|(i, (label, v, _))| ConfigurationRow {
                id: i as i64,
                idx: i,
                label: label.to_string(),
                values: v
                    .map(|v| [("param:threads".to_string(), v.to_string())].into())
                    .unwrap_or_default(),
                is_baseline: i == 0,
            })
            .collect();
        let mut runs = Vec::new();
        for (i, (_, _, xs)) in groups.iter().enumerate() {
            for (j, x) in xs.iter().enumerate() {
                runs.push(RunRow {
                    id: runs.len() as i64,
                    config: i,
                    block: j,
                    warmup: false,
                    started_unix_ms: 0,
                    duration_s: 1.0,
                    ok: true,
                    error: None,
                    metrics: [("web.throughput".to_string(), *x)].into(),
                });
            }
        }
        ExperimentData {
            experiment: ExperimentRow {
                id: 1,
                name: "t".into(),
                spec_path: String::new(),
                spec_text: String::new(),
                spec_hash: String::new(),
                seed: 1,
                status: "finished".into(),
                created_unix: 0,
                finished_unix: None,
                meta: ExperimentMeta {
                    knobs: vec![(
                        "param:threads".into(),
                        vec!["2".into(), "4".into(), "8".into()],
                    )],
                    objective: "maximize".into(),
                    score_terms: vec![("web.throughput".into(), 1.0)],
                    scale_knob: Some("param:threads".into()),
                    scale_base: None,
                    min_runs: 3,
                    max_runs: 5,
                    rel_ci: 0.02,
                    warmup_blocks: 0,
                    fixed_work: false,
                    notes: vec![],
                },
            },
            fingerprint: None,
            configurations,
            runs,
        }
    }

    #[test]
    fn table_effects_tests_best_and_scalability() {
        let d = data(&[
            ("base", Some("2"), vec![100.0, 101.0, 99.0, 100.0]),
            ("t4", Some("4"), vec![150.0, 151.0, 149.0, 150.0]),
            ("t8", Some("8"), vec![100.5, 99.5, 100.0, 100.0]),
        ]);
        let a = analyze(&d);
        let t = a.table.clone().unwrap();
        assert!((t.max - 150.0).abs() < 1e-9 && (t.min - 100.0).abs() < 1e-9);
        assert!((t.max_abs_increase.unwrap() - 0.5).abs() < 1e-9);
        assert!((t.max_rel_increase - 0.5).abs() < 1e-9);
        assert_eq!(a.comparisons.len(), 2);
        let c4 = a.comparisons.iter().find(|c| c.label == "t4").unwrap();
        assert!(c4.significant);
        let c8 = a.comparisons.iter().find(|c| c.label == "t8").unwrap();
        assert!(!c8.significant);
        assert_eq!(a.best.as_ref().unwrap().label, "t4");
        assert_eq!(a.main_effects[0].levels.len(), 3);
        // Scalability with runtime = 1/throughput: 2 -> 4: (100/150) / 2 = 0.3333.
        let s = a.scalability.clone().unwrap();
        assert_eq!(s.rows.len(), 2);
        assert!((s.rows[0].ratio - (100.0 / 150.0) / 2.0).abs() < 1e-9);
        // Any metric can be analysed in place of the score.
        let m = analyze_metric(&d, "web.throughput", Objective::Minimize);
        assert_eq!(m.best.unwrap().label, "base");
        // With base 4: 4 -> 2 and 4 -> 8.
        let mut d4 = d.clone();
        d4.experiment.meta.scale_base = Some(4.0);
        let s4 = analyze(&d4).scalability.unwrap();
        assert_eq!(
            s4.rows.iter().map(|r| (r.a, r.b)).collect::<Vec<_>>(),
            vec![(4.0, 2.0), (4.0, 8.0)]
        );
        let text = render(&a);
        assert!(text.contains("no significant difference"), "{text}");
        assert!(text.contains("SIGNIFICANT"), "{text}");
        assert!(text.contains("best: t4"), "{text}");
    }

    #[test]
    fn a_a_experiment_reports_no_significant_difference() {
        // Two identical configurations; >= 95% of seeded trials must say "no significant difference".
        let mut rng = Rng::new(2024);
        let trials = 1000;
        let mut quiet = 0;
        for _ in 0..trials {
            let mut draw = || {
                (0..5)
                    .map(|_| 5000.0 + 100.0 * rng.normal())
                    .collect::<Vec<f64>>()
            };
            let d = data(&[("a", None, draw()), ("a'", None, draw())]);
            let a = analyze(&d);
            if a.comparisons.iter().all(|c| !c.significant) {
                quiet += 1;
            }
        }
        assert!(quiet as f64 / trials as f64 >= 0.95, "{quiet}/{trials}");
    }

    #[test]
    fn score_terms() {
        let m: BTreeMap<String, f64> = [
            ("php".to_string(), 100.0),
            ("web.throughput".to_string(), 10.0),
        ]
        .into();
        assert_eq!(
            score_of(&m, &[("php".into(), 1.0), ("web.throughput".into(), 10.0)]),
            Some(200.0)
        );
        assert_eq!(score_of(&m, &[("nope".into(), 1.0)]), None);
    }
}
