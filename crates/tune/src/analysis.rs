//! What an experiment's numbers say: per-configuration statistics with confidence intervals, seed 000's
//! summary table, the main effect of each knob, Welch's t-test of every configuration against the
//! baseline with Holm's correction (so "no significant difference" is said when that is the truth), the
//! best configuration with its gain and interval, and seed 001's scalability ratio.

use std::collections::BTreeMap;

pub use ordo_results::tune::{
    Analysis, Best, Comparison, ConfigStats, LevelMean, MainEffect, RecheckResult, Scalability,
    ScaleRow, SearchSummary, SeedTable,
};

use ordo_doc::{Block, Document};

use crate::spec::Objective;
pub use crate::stats::format_p;
use crate::stats::{holm, p_equals, summary, welch};
use crate::store::{ExperimentData, ExperimentMeta, SearchMeta};

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

/// The scores of configuration `idx`'s measured runs (stored, or computed from the score's terms).
pub fn scores(data: &ExperimentData, idx: usize) -> Vec<f64> {
    scores_where(data, idx, |_| true)
}

/// The scores that may decide whether configuration `idx` differs: its confirmatory runs
/// ([`crate::sequential`]) — none before the confirmatory phase started — or, for a search's trials (a fixed
/// number of runs each, no adaptive stopping) and stores written before confirmatory blocks, every run.
pub fn test_scores(data: &ExperimentData, idx: usize) -> Vec<f64> {
    let meta = &data.experiment.meta;
    if !meta.confirmatory {
        return scores(data, idx);
    }
    let confirm = match &meta.search {
        Some(s) => match s.recheck.as_ref().filter(|_| s.is_recheck(idx)) {
            Some(r) => r.confirm,
            None => return scores(data, idx),
        },
        None => meta.confirm,
    };
    match confirm {
        Some(c) => scores_where(data, idx, |b| c.holds(b)),
        None => Vec::new(),
    }
}

/// The runs of configuration `idx` before its confirmatory blocks (every run when it has none).
fn pilot_scores(data: &ExperimentData, idx: usize) -> Vec<f64> {
    let meta = &data.experiment.meta;
    let recheck = meta
        .search
        .as_ref()
        .and_then(|s| s.recheck.as_ref().filter(|_| s.is_recheck(idx)));
    let confirm = match recheck {
        Some(r) => r.confirm,
        None => meta.confirm,
    };
    match confirm {
        Some(c) => scores_where(data, idx, |b| !c.holds(b)),
        None => scores(data, idx),
    }
}

fn scores_where(data: &ExperimentData, idx: usize, block: impl Fn(usize) -> bool) -> Vec<f64> {
    data.runs
        .iter()
        .filter(|r| r.config == idx && !r.warmup && r.ok && block(r.block))
        .filter_map(|r| {
            r.metrics
                .get("score")
                .copied()
                .or_else(|| score_of(&r.metrics, &data.experiment.meta.score_terms))
        })
        .filter(|v| v.is_finite())
        .collect()
}

/// The experiment's objective as stored ("minimize", else maximize).
pub fn objective(meta: &ExperimentMeta) -> Objective {
    if meta.objective == "minimize" {
        Objective::Minimize
    } else {
        Objective::Maximize
    }
}

fn better(obj: Objective, a: f64, b: f64) -> bool {
    match obj {
        Objective::Maximize => a > b,
        Objective::Minimize => a < b,
    }
}

/// Analyse a stored experiment: every configuration's statistics, then (over the measured ones, a
/// search's re-check left apart) seed 000's table, the main effects, the comparisons with the baseline and
/// the best, then the parts only some experiments have (scalability, search) and the notes.
pub fn analyze(data: &ExperimentData) -> Analysis {
    let meta = &data.experiment.meta;
    let obj = objective(meta);
    let configs = config_stats(data);
    let measured = measured(meta, &configs);
    let baseline = measured.iter().copied().find(|c| c.is_baseline);
    let table = seed_table(obj, &measured, baseline);
    let main_effects = main_effects(meta, &measured);
    let comparisons = baseline.map_or_else(Vec::new, |b| against_baseline(data, &measured, b));
    let search = meta
        .search
        .as_ref()
        .map(|s| search_summary(s, &configs, &|idx| test_scores(data, idx), obj));
    let best = match (&meta.search, &search) {
        (Some(m), Some(s)) => search_best(data, m, s, &configs),
        _ => best_of(obj, &measured, &comparisons),
    };
    let notes = meta
        .notes
        .iter()
        .cloned()
        .chain(ci_target_missed(data, &configs))
        .chain(confirmation_note(meta, &comparisons))
        .collect();
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
        search,
        notes,
        warnings: meta.warnings.clone(),
        configs,
    }
}

/// Every configuration's score and metric statistics (a metric it never reported is left out).
fn config_stats(data: &ExperimentData) -> Vec<ConfigStats> {
    let names = data.metric_names();
    data.configurations
        .iter()
        .map(|c| ConfigStats {
            idx: c.idx,
            label: c.label.clone(),
            is_baseline: c.is_baseline,
            values: c.values.clone(),
            score: summary(&scores(data, c.idx)),
            metrics: names
                .iter()
                .map(|m| (m.clone(), summary(&data.values(c.idx, m))))
                .filter(|(_, s)| s.n > 0)
                .collect(),
        })
        .collect()
}

/// The configurations with a score. A search's re-check runs are kept apart: they answer whether its best
/// survives (see `recheck`).
fn measured<'a>(meta: &ExperimentMeta, configs: &'a [ConfigStats]) -> Vec<&'a ConfigStats> {
    let in_recheck = |idx: usize| meta.search.as_ref().is_some_and(|s| s.is_recheck(idx));
    configs
        .iter()
        .filter(|c| c.score.n > 0 && !in_recheck(c.idx))
        .collect()
}

/// Seed 000's table over the measured configurations' mean scores (`None`: nothing measured).
fn seed_table(
    obj: Objective,
    measured: &[&ConfigStats],
    baseline: Option<&ConfigStats>,
) -> Option<SeedTable> {
    (!measured.is_empty()).then(|| {
        let means: Vec<f64> = measured.iter().map(|c| c.score.mean).collect();
        let s = summary(&means);
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
    })
}

/// Welch's t-test of every other measured configuration against `baseline`, Holm-corrected (a
/// configuration the test cannot be run on is left out).
fn against_baseline(
    data: &ExperimentData,
    measured: &[&ConfigStats],
    baseline: &ConfigStats,
) -> Vec<Comparison> {
    let bv = test_scores(data, baseline.idx);
    let mut raw = Vec::new();
    for c in measured.iter().filter(|c| !c.is_baseline) {
        if let Some(w) = welch(&test_scores(data, c.idx), &bv) {
            raw.push((c, w));
        }
    }
    let adj = holm(&raw.iter().map(|(_, w)| w.p).collect::<Vec<_>>());
    raw.into_iter()
        .zip(adj)
        .map(|((c, w), p_holm)| Comparison {
            idx: c.idx,
            label: c.label.clone(),
            diff: w.diff,
            rel: w.diff / baseline.score.mean.abs(),
            ci_low: w.ci_low,
            ci_high: w.ci_high,
            p: w.p,
            p_holm,
            significant: p_holm < ALPHA,
        })
        .collect()
}

/// The measured configuration with the best mean score (the first of equals), with its comparison.
fn best_of(obj: Objective, measured: &[&ConfigStats], comparisons: &[Comparison]) -> Option<Best> {
    measured
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
        })
}

/// A search's best is the one it re-checked, everywhere (the `best:` line, the HTML banner, the JSON): its
/// label, its mean and interval over the re-check's fresh runs (its own trial runs were the luckiest of many)
/// and the re-check's confirmatory test against the baseline. A finished search that re-checked nothing
/// found the baseline best; one stopped before its re-check has no best yet.
fn search_best(
    data: &ExperimentData,
    m: &SearchMeta,
    s: &SearchSummary,
    configs: &[ConfigStats],
) -> Option<Best> {
    let Some(r) = &m.recheck else {
        let base = configs
            .iter()
            .find(|c| c.is_baseline && c.score.n > 0)
            .filter(|_| data.experiment.status == "finished")?;
        return Some(Best {
            idx: base.idx,
            label: base.label.clone(),
            mean: base.score.mean,
            ci95: base.score.ci95,
            vs_baseline: None,
        });
    };
    let best = configs.iter().find(|c| c.idx == r.best)?;
    let fresh = configs
        .iter()
        .find(|c| c.idx == r.candidate)
        .filter(|c| c.score.n > 0)
        .map_or(&best.score, |c| &c.score);
    Some(Best {
        idx: best.idx,
        label: best.label.clone(),
        mean: fresh.mean,
        ci95: fresh.ci95,
        vs_baseline: s.recheck.as_ref().map(|x| Comparison {
            idx: r.candidate,
            label: best.label.clone(),
            diff: x.diff,
            rel: x.rel,
            ci_low: x.ci_low,
            ci_high: x.ci_high,
            p: x.p,
            p_holm: x.p,
            significant: x.significant,
        }),
    })
}

/// Whether `c` is a point of the design for `knob`: it sets the knob to one of its levels, and
/// - in a one-factor-at-a-time design, every other knob is as in the baseline (the baseline itself counts
///   when it sets the knob to a level: it is that point);
/// - otherwise the baseline counts only when it is a point of the design itself (sets every knob to one of
///   its levels): a baseline of machine settings, or one that sets only parameters, is not a level of
///   anything, and counting it inflated one level's n and added a "(machine)" level.
fn in_design(
    meta: &ExperimentMeta,
    c: &ConfigStats,
    baseline: Option<&ConfigStats>,
    knob: &str,
    levels: &[String],
) -> bool {
    if !c.values.get(knob).is_some_and(|v| levels.contains(v)) {
        return false;
    }
    if meta.design.as_deref() == Some("ofat") {
        let Some(b) = baseline else {
            return !c.is_baseline;
        };
        let keys: std::collections::BTreeSet<&String> =
            c.values.keys().chain(b.values.keys()).collect();
        return keys
            .into_iter()
            .all(|k| k == knob || c.values.get(k) == b.values.get(k));
    }
    !c.is_baseline
        || meta
            .knobs
            .iter()
            .all(|(k, ls)| c.values.get(k).is_some_and(|v| ls.contains(v)))
}

/// The mean score at each of a knob's levels, over the design's points with that level.
fn main_effects(meta: &ExperimentMeta, measured: &[&ConfigStats]) -> Vec<MainEffect> {
    let baseline = measured.iter().copied().find(|c| c.is_baseline);
    meta.knobs
        .iter()
        .map(|(knob, levels)| {
            let points: Vec<&ConfigStats> = measured
                .iter()
                .copied()
                .filter(|c| in_design(meta, c, baseline, knob, levels))
                .collect();
            let out: Vec<LevelMean> = levels
                .iter()
                .filter_map(|l| {
                    let ms: Vec<f64> = points
                        .iter()
                        .filter(|c| c.values.get(knob) == Some(l))
                        .map(|c| c.score.mean)
                        .collect();
                    (!ms.is_empty()).then(|| LevelMean {
                        level: l.clone(),
                        mean: crate::stats::mean(&ms),
                        configurations: ms.len(),
                    })
                })
                .collect();
            let hi = out.iter().map(|l| l.mean).fold(f64::NEG_INFINITY, f64::max);
            let lo = out.iter().map(|l| l.mean).fold(f64::INFINITY, f64::min);
            MainEffect {
                knob: knob.clone(),
                spread: if out.is_empty() { 0.0 } else { hi - lo },
                levels: out,
                observational: meta.search.is_some(),
            }
        })
        .collect()
}

/// Where the significance tests' runs came from, when it is not the usual confirmatory blocks: a store written
/// before them (its tests reused the runs that decided when to stop), or an experiment stopped before them.
fn confirmation_note(meta: &ExperimentMeta, comparisons: &[Comparison]) -> Option<String> {
    let rechecking = meta.search.as_ref().and_then(|s| s.recheck.as_ref());
    if !meta.confirmatory {
        let tested = !comparisons.is_empty() || rechecking.is_some();
        return tested.then(|| {
            "this experiment was stored before confirmatory blocks: its significance tests reuse the runs that decided when to stop, which calls identical configurations different more often than the 5% asked for (11% in an A/A simulation); run it again for a valid test".to_string()
        });
    }
    let stopped = match &meta.search {
        Some(_) => rechecking.is_some_and(|r| r.confirm.is_none()),
        None => meta.confirm.is_none(),
    };
    stopped.then(|| {
        "the experiment stopped before its confirmatory blocks, whose runs alone decide significance: nothing is tested yet (resume it)".to_string()
    })
}

/// Configurations that reached the maximum number of runs without the CI target: their intervals are
/// wider than asked for, and the output says so instead of presenting them like the others.
/// The rule is judged on each configuration's pilot (the runs before its confirmatory blocks).
fn ci_target_missed(data: &ExperimentData, configs: &[ConfigStats]) -> Vec<String> {
    let meta = &data.experiment.meta;
    if meta.max_runs == 0 || !meta.rel_ci.is_finite() {
        return Vec::new();
    }
    let missed: Vec<String> = configs
        .iter()
        .map(|c| (c, summary(&pilot_scores(data, c.idx))))
        .filter(|(_, p)| p.n >= meta.max_runs && p.rel_ci() > meta.rel_ci)
        .map(|(c, p)| format!("{} (±{:.2}%)", c.label, 100.0 * p.rel_ci()))
        .collect();
    if missed.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "{} configuration(s) reached the maximum of {} runs without the CI target ±{:.2}% of the mean: {}; their intervals are wider than asked for (raise repeat.max, lengthen the workload, or quiet the machine)",
        missed.len(),
        meta.max_runs,
        100.0 * meta.rel_ci,
        missed.join(", ")
    )]
}

/// A search: how many trials of how big a grid, the best it reported (by its trials) and what the re-check
/// against the baseline in fresh interleaved blocks made of that gain.
fn search_summary(
    s: &SearchMeta,
    configs: &[ConfigStats],
    score_values: &dyn Fn(usize) -> Vec<f64>,
    obj: Objective,
) -> SearchSummary {
    let dir = if obj == Objective::Maximize {
        1.0
    } else {
        -1.0
    };
    let trials = configs.iter().filter(|c| !s.is_recheck(c.idx)).count();
    let base = configs
        .iter()
        .find(|c| c.is_baseline && !s.is_recheck(c.idx));
    let reported = s.recheck.as_ref().and_then(|r| {
        let best = configs.iter().find(|c| c.idx == r.best)?;
        let b = base?;
        Some((
            best.label.clone(),
            dir * (best.score.mean - b.score.mean) / b.score.mean.abs(),
        ))
    });
    let recheck = s.recheck.as_ref().and_then(|r| {
        let cand = score_values(r.candidate);
        let base = score_values(r.baseline);
        let w = welch(&cand, &base)?;
        let mb = crate::stats::mean(&base);
        Some(RecheckResult {
            diff: w.diff,
            rel: w.diff / mb.abs(),
            runs: cand.len().min(base.len()),
            gain: dir * w.diff / mb.abs(),
            ci_low: w.ci_low,
            ci_high: w.ci_high,
            p: w.p,
            significant: w.p < ALPHA,
        })
    });
    let kept = match (&reported, &recheck) {
        (Some((_, g)), Some(r)) if *g > 0.0 => Some(r.gain / g),
        _ => None,
    };
    SearchSummary {
        budget: s.budget,
        trials,
        grid: s.grid,
        best: reported.as_ref().map(|(l, _)| l.clone()),
        reported_gain: reported.map(|(_, g)| g),
        recheck,
        kept,
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

pub(crate) fn pct(x: f64) -> String {
    format!("{:+.2}%", 100.0 * x)
}

pub(crate) fn num(x: f64) -> String {
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

/// A test's verdict as the tables print it.
pub(crate) fn verdict(significant: bool) -> &'static str {
    if significant {
        "SIGNIFICANT"
    } else {
        "no significant difference"
    }
}

/// The analysis as terminal text: its [`document`] through ordo-doc's terminal renderer.
pub fn render(a: &Analysis) -> String {
    ordo_doc::text::render(&document(a))
}

/// The analysis as a document: the blocks of the sections below in order, a section that has nothing to say
/// left out.
pub fn document(a: &Analysis) -> Document {
    use section::*;
    let parts: [fn(&Analysis) -> Vec<Block>; 9] = [
        header,
        score_table,
        means_table,
        summary,
        main_effects,
        comparisons,
        scalability,
        search,
        best,
    ];
    Document::of(parts.iter().flat_map(|part| part(a)).collect())
}

/// The sections of [`document`], in order: each returns its blocks (none when it has nothing to say).
mod section {
    use ordo_doc::{Align, Block, KeyValue, Table};

    use super::{ALPHA, Analysis, num, p_equals, pct, verdict};

    /// A table of the analysis: flush left, two spaces between columns, no rule under the headers, each
    /// column at least as wide as `min_widths` says (so the numbers' columns stay put from run to run).
    fn table(title: &str, headers: &[&str], min_widths: &[usize]) -> Table {
        Table::new(title, headers).columns(0, min_widths).gap(2)
    }

    /// Which experiment, its score and objective, and the notes about the run.
    pub(super) fn header(a: &Analysis) -> Vec<Block> {
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
        let mut lines = a.warnings.clone();
        lines.push(format!(
            "experiment {} `{}` ({}) — score = {terms}, {}",
            a.experiment, a.name, a.status, a.objective
        ));
        lines.extend(a.notes.iter().map(|n| format!("note: {n}")));
        vec![Block::Note(lines.join("\n"))]
    }

    /// The score's statistics per configuration.
    pub(super) fn score_table(a: &Analysis) -> Vec<Block> {
        let mut t = table(
            "",
            &[
                "configuration",
                "n",
                "mean",
                "sd",
                "±95% CI",
                "CI/mean",
                "min",
                "max",
            ],
            &[0, 3, 12, 10, 10, 12, 12, 12],
        );
        for c in &a.configs {
            let s = &c.score;
            t.row(vec![
                c.label.clone(),
                s.n.to_string(),
                num(s.mean),
                num(s.sd),
                num(s.ci95),
                if s.n > 1 {
                    format!("{:.2}%", 100.0 * s.rel_ci())
                } else {
                    "-".into()
                },
                num(s.min),
                num(s.max),
            ]);
        }
        vec![t.into()]
    }

    /// Key measurements next to the score: throughput, p99, errors, and the target's cost per request.
    pub(super) fn means_table(a: &Analysis) -> Vec<Block> {
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
        if cols.is_empty() {
            return Vec::new();
        }
        let headers: Vec<&str> = std::iter::once("means per configuration")
            .chain(cols.iter().map(|(_, h)| *h))
            .collect();
        let mut min_widths = vec![11; headers.len()];
        min_widths[0] = 0;
        let mut t = table("", &headers, &min_widths);
        for c in &a.configs {
            let mut row = vec![c.label.clone()];
            row.extend(
                cols.iter()
                    .map(|(m, _)| num(c.metrics.get(m).map(|s| s.mean).unwrap_or(f64::NAN))),
            );
            t.row(row);
        }
        vec![t.into()]
    }

    /// Seed 000's table: the spread of the configuration means.
    pub(super) fn summary(a: &Analysis) -> Vec<Block> {
        let Some(t) = &a.table else {
            return Vec::new();
        };
        let mut kv = KeyValue::new("summary over configuration means (seed 000's table)").indent(2);
        for (k, v) in [
            ("mean", t.mean),
            ("sd", t.sd),
            ("max", t.max),
            ("min", t.min),
            ("range", t.range),
        ] {
            kv.pair(k, num(v));
        }
        if let (Some(b), Some(x)) = (t.baseline, t.max_abs_increase) {
            kv.pair("baseline", num(b));
            kv.pair("max absolute increase over baseline", pct(x));
        }
        kv.pair(
            "max relative increase of best over worst",
            pct(t.max_rel_increase),
        );
        vec![kv.into()]
    }

    /// The mean score per level of each knob.
    pub(super) fn main_effects(a: &Analysis) -> Vec<Block> {
        if a.main_effects.is_empty() {
            return Vec::new();
        }
        let title = if a.main_effects.iter().any(|m| m.observational) {
            "main effects — OBSERVATIONAL (mean score per level over the points the search chose to visit, not a balanced design: a level's mean depends on where the search looked)"
        } else {
            "main effects (mean score per level)"
        };
        let mut t = Table::headless(title, &[Align::Left, Align::Left, Align::Left]).gap(2);
        for m in &a.main_effects {
            let levels = m
                .levels
                .iter()
                .map(|l| format!("{}: {} (n={})", l.level, num(l.mean), l.configurations))
                .collect::<Vec<_>>()
                .join("  ");
            t.row(vec![
                m.knob.clone(),
                levels,
                format!("spread {}", num(m.spread)),
            ]);
        }
        vec![t.into()]
    }

    /// Each configuration against the baseline, and the conclusion when none differs.
    pub(super) fn comparisons(a: &Analysis) -> Vec<Block> {
        if a.comparisons.is_empty() {
            return Vec::new();
        }
        let mut t = Table::headless(
            format!("against the baseline (Welch's t-test, Holm-corrected, alpha {ALPHA})"),
            &[
                Align::Left,
                Align::Right,
                Align::Left,
                Align::Left,
                Align::Left,
                Align::Left,
            ],
        )
        .columns(2, &[0, 9])
        .gap(2);
        for c in &a.comparisons {
            t.row(vec![
                c.label.clone(),
                pct(c.rel),
                format!("CI [{}, {}]", num(c.ci_low), num(c.ci_high)),
                p_equals("p", c.p),
                p_equals("p_holm", c.p_holm),
                verdict(c.significant).into(),
            ]);
        }
        let mut blocks = vec![t.into()];
        if a.comparisons.iter().all(|c| !c.significant) {
            blocks.push(Block::Note(
                "=> no configuration differs significantly from the baseline".into(),
            ));
        }
        blocks
    }

    /// The runtime ratios over the scalability knob.
    pub(super) fn scalability(a: &Analysis) -> Vec<Block> {
        let Some(s) = &a.scalability else {
            return Vec::new();
        };
        let mut kv = KeyValue::new(format!(
            "scalability over {} (runtime = {}; (rt_B/rt_A)/(B/A), 1 = proportional, lower is better)",
            s.knob, s.runtime_metric
        ))
        .indent(2);
        for r in &s.rows {
            let g = if r.group.is_empty() {
                String::new()
            } else {
                format!("[{}] ", r.group)
            };
            kv.pair(format!("{g}{}→{}", r.a, r.b), format!("{:.4}", r.ratio));
        }
        vec![kv.into()]
    }

    /// What a search tried and whether its best point survived the re-check.
    pub(super) fn search(a: &Analysis) -> Vec<Block> {
        let Some(s) = &a.search else {
            return Vec::new();
        };
        let mut lines = vec![format!(
            "search: {} configuration(s) tried of a {}-point grid ({:.0}%; budget {})",
            s.trials,
            s.grid,
            100.0 * s.trials as f64 / s.grid.max(1) as f64,
            s.budget
        )];
        match (&s.best, s.reported_gain) {
            (Some(b), Some(g)) => lines.push(format!(
                "  reported best: {b} — {} vs the baseline in its trial runs{}",
                pct(g),
                if g <= 0.0 {
                    " (no trial beat the baseline there)"
                } else {
                    ""
                }
            )),
            _ => lines.push("  the baseline is the best point tried: nothing to re-check".into()),
        }
        if let Some(r) = &s.recheck {
            lines.push(format!(
                "  re-check against the baseline in fresh interleaved blocks ({} confirmatory runs each): {} ({}), difference CI [{}, {}], {}, {}",
                r.runs,
                pct(r.gain),
                if r.gain >= 0.0 { "better" } else { "worse" },
                num(r.ci_low),
                num(r.ci_high),
                p_equals("p", r.p),
                verdict(r.significant)
            ));
            if let Some(k) = s.kept {
                lines.push(format!(
                    "  => {:.0}% of the reported gain survived the re-check{}",
                    100.0 * k,
                    if k < 0.9 {
                        " (most of it was noise picked as a winner: trust the re-check)"
                    } else {
                        ""
                    }
                ));
            }
        } else if s.best.is_some() {
            lines.push("  re-check not run yet (the experiment stopped before it)".into());
        }
        vec![Block::Note(lines.join("\n"))]
    }

    /// The best configuration and how it compares with the baseline.
    pub(super) fn best(a: &Analysis) -> Vec<Block> {
        let Some(b) = &a.best else {
            return Vec::new();
        };
        let rechecked = a.search.is_some() && b.vs_baseline.is_some();
        let what = if rechecked {
            "best (the search's pick, re-checked; mean over the re-check's runs)"
        } else {
            "best"
        };
        let line = match &b.vs_baseline {
            Some(c) => format!(
                "{what}: {} — {} ± {} ({} vs baseline{}, difference CI [{}, {}]; {})",
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
                if c.significant && rechecked {
                    "significant in the re-check's confirmatory runs"
                } else if c.significant {
                    "significant after Holm correction"
                } else {
                    "NOT significant: no significant difference from the baseline"
                }
            ),
            None => format!("{what}: {} — {} ± {}", b.label, num(b.mean), num(b.ci95)),
        };
        vec![Block::Note(line)]
    }
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
                    ..Default::default()
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

    /// The whole terminal text of a small analysis, pinned: the header, the two tables, seed 000's summary,
    /// main effects, the tests against the baseline, scalability and the `best:` line, built as ordo-doc
    /// blocks of the right kinds.
    #[test]
    fn the_rendered_analysis_is_pinned() {
        let a = analyze(&data(&[
            ("base", Some("2"), vec![100.0, 101.0, 99.0, 100.0]),
            ("threads=4", Some("4"), vec![150.0, 151.0, 149.0, 150.0]),
        ]));
        let expected = [
            "experiment 1 `t` (finished) — score = web.throughput, maximize",
            "note: this experiment was stored before confirmatory blocks: its significance tests reuse the runs that decided when to stop, which calls identical configurations different more often than the 5% asked for (11% in an A/A simulation); run it again for a valid test",
            "",
            "configuration    n          mean          sd     ±95% CI       CI/mean           min           max",
            "base             4         100.0      0.8165       1.299         1.30%        99.000         101.0",
            "threads=4        4         150.0      0.8165       1.299         0.87%         149.0         151.0",
            "",
            "means per configuration        req/s",
            "base                           100.0",
            "threads=4                      150.0",
            "",
            "summary over configuration means (seed 000's table)",
            "  mean:                                     125.0",
            "  sd:                                       35.355",
            "  max:                                      150.0",
            "  min:                                      100.0",
            "  range:                                    50.000",
            "  baseline:                                 100.0",
            "  max absolute increase over baseline:      +50.00%",
            "  max relative increase of best over worst: +50.00%",
            "",
            "main effects (mean score per level)",
            "  param:threads  2: 100.0 (n=1)  4: 150.0 (n=1)  spread 50.000",
            "",
            "against the baseline (Welch's t-test, Holm-corrected, alpha 0.05)",
            "  threads=4    +50.00%  CI [48.587, 51.413]  p < 0.001  p_holm < 0.001  SIGNIFICANT",
            "",
            "scalability over param:threads (runtime = 1/web.throughput; (rt_B/rt_A)/(B/A), 1 = proportional, lower is better)",
            "  2→4: 0.3333",
            "",
            "best: threads=4 — 150.0 ± 1.299 (+50.00% vs baseline, better, difference CI [48.587, 51.413]; significant after Holm correction)",
        ]
        .join("\n")
            + "\n";
        assert_eq!(render(&a), expected);
        let kinds: Vec<&str> = document(&a).sections[0]
            .blocks
            .iter()
            .map(|b| match b {
                Block::Table(_) => "table",
                Block::KeyValue(_) => "key-value",
                Block::Note(_) => "note",
                Block::Figure(f) => match *f {},
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "note",
                "table",
                "table",
                "key-value",
                "table",
                "table",
                "key-value",
                "note"
            ]
        );
    }

    /// A configuration: its knob values, whether it is the baseline, its runs' scores.
    type Config = (Vec<(&'static str, &'static str)>, bool, Vec<f64>);

    /// An experiment with two knobs, x (param) and swappiness.
    fn experiment(design: &str, configs: &[Config]) -> ExperimentData {
        let mut d = data(&[]);
        d.experiment.meta.knobs = vec![
            ("param:x".into(), vec!["1".into(), "2".into(), "3".into()]),
            (
                "sysctl:vm.swappiness".into(),
                vec!["10".into(), "60".into(), "100".into()],
            ),
        ];
        d.experiment.meta.scale_knob = None;
        d.experiment.meta.design = Some(design.into());
        for (i, (values, base, xs)) in configs.iter().enumerate() {
            d.configurations.push(ConfigurationRow {
                id: i as i64,
                idx: i,
                label: format!("c{i}"),
                values: values
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                is_baseline: *base,
            });
            for (j, x) in xs.iter().enumerate() {
                d.runs.push(RunRow {
                    id: d.runs.len() as i64,
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
        d
    }

    /// Issue 13 defect 5: in a 3x3 sweep whose baseline sets only the parameter, the baseline was counted
    /// as a point (n=4 for x=1 instead of 3) and swappiness got a "(machine)" level.
    #[test]
    fn main_effects_cover_the_designs_levels_only() {
        let mut configs: Vec<Config> = vec![(vec![("param:x", "1")], true, vec![1000.0, 1001.0])];
        for x in ["1", "2", "3"] {
            for sw in ["10", "60", "100"] {
                configs.push((
                    vec![("param:x", x), ("sysctl:vm.swappiness", sw)],
                    false,
                    vec![100.0, 101.0],
                ));
            }
        }
        let a = analyze(&experiment("full", &configs));
        for e in &a.main_effects {
            let levels: Vec<(&str, usize)> = e
                .levels
                .iter()
                .map(|l| (l.level.as_str(), l.configurations))
                .collect();
            assert_eq!(levels.len(), 3, "{e:?}");
            assert!(levels.iter().all(|(_, n)| *n == 3), "{e:?}");
            // The baseline's 1000 would make x=1 stand out.
            assert!(e.spread < 1e-9, "{e:?}");
        }
        // One factor at a time: each knob's effect over its own points (and the baseline when it is one).
        let ofat: Vec<Config> = vec![
            (vec![("param:x", "1")], true, vec![100.0, 100.0]),
            (vec![("param:x", "2")], false, vec![110.0, 110.0]),
            (vec![("param:x", "3")], false, vec![120.0, 120.0]),
            (
                vec![("param:x", "1"), ("sysctl:vm.swappiness", "10")],
                false,
                vec![90.0, 90.0],
            ),
            (
                vec![("param:x", "1"), ("sysctl:vm.swappiness", "60")],
                false,
                vec![95.0, 95.0],
            ),
        ];
        let a = analyze(&experiment("ofat", &ofat));
        let x = &a.main_effects[0];
        assert_eq!(
            x.levels
                .iter()
                .map(|l| (l.level.as_str(), l.mean))
                .collect::<Vec<_>>(),
            vec![("1", 100.0), ("2", 110.0), ("3", 120.0)]
        );
        let sw = &a.main_effects[1];
        assert_eq!(
            sw.levels
                .iter()
                .map(|l| (l.level.as_str(), l.configurations))
                .collect::<Vec<_>>(),
            vec![("10", 1), ("60", 1)]
        );
    }

    #[test]
    fn a_configuration_at_max_runs_without_the_ci_target_is_noted() {
        let mut d = data(&[
            ("base", Some("2"), vec![100.0, 100.1, 99.9, 100.0, 100.0]),
            ("noisy", Some("4"), vec![50.0, 150.0, 60.0, 140.0, 100.0]),
        ]);
        d.experiment.meta.max_runs = 5;
        let a = analyze(&d);
        let note = a
            .notes
            .iter()
            .find(|n| n.contains("CI target"))
            .expect("a note");
        assert!(note.contains("noisy"), "{note}");
        assert!(!note.contains("base ("), "{note}");
        assert!(render(&a).contains("note: 1 configuration(s) reached the maximum of 5 runs"));
    }

    #[test]
    fn a_search_reports_its_gain_and_how_much_survived_the_recheck() {
        let mut d = data(&[
            ("base", Some("2"), vec![100.0, 100.0, 100.0]),
            ("t4", Some("4"), vec![120.0, 121.0, 119.0]),
            ("t8", Some("8"), vec![105.0, 104.0, 106.0]),
            (
                "re-check: baseline",
                Some("2"),
                vec![100.0, 101.0, 99.0, 100.0],
            ),
            ("re-check: t4", Some("4"), vec![118.0, 119.0, 117.0, 118.0]),
        ]);
        d.experiment.meta.design = Some("search".into());
        d.experiment.meta.search = Some(crate::store::SearchMeta {
            budget: 3,
            initial: 2,
            seed: 1,
            grid: 3,
            recheck: Some(crate::store::RecheckMeta {
                best: 1,
                baseline: 3,
                candidate: 4,
                confirm: None,
            }),
        });
        let a = analyze(&d);
        // The re-check's configurations are not trials.
        assert_eq!(a.comparisons.len(), 2);
        assert_eq!(a.best.as_ref().unwrap().label, "t4");
        let s = a.search.clone().unwrap();
        assert_eq!(s.trials, 3);
        assert!((s.reported_gain.unwrap() - 0.2).abs() < 1e-9);
        let r = s.recheck.clone().unwrap();
        assert!((r.gain - 0.18).abs() < 1e-9, "{r:?}");
        assert!(r.significant);
        assert!((s.kept.unwrap() - 0.9).abs() < 1e-9);
        let text = render(&a);
        assert!(
            text.contains("90% of the reported gain survived the re-check"),
            "{text}"
        );
    }

    /// Issue 24: the re-check named one configuration (the model's pick) and the `best:` line, the HTML
    /// banner and the JSON another (the highest raw trial mean); main effects over the visited points were
    /// presented as a design's. One best everywhere, and the effects labelled observational.
    #[test]
    fn a_search_reports_the_rechecked_best_everywhere_and_observational_effects() {
        let mut d = data(&[
            ("base", Some("2"), vec![100.0, 100.0, 100.0]),
            // The luckiest trial: highest raw mean, not the model's pick.
            ("t4", Some("4"), vec![126.0, 124.0, 125.0]),
            ("t8", Some("8"), vec![121.0, 119.0, 120.0]),
            (
                "re-check: baseline",
                Some("2"),
                vec![100.0, 101.0, 99.0, 100.0, 100.5, 99.5],
            ),
            (
                "re-check: t8",
                Some("8"),
                vec![118.0, 119.0, 117.0, 118.0, 118.5, 117.5],
            ),
        ]);
        d.experiment.meta.design = Some("search".into());
        d.experiment.meta.confirmatory = true;
        d.experiment.meta.search = Some(crate::store::SearchMeta {
            budget: 3,
            initial: 2,
            seed: 1,
            grid: 3,
            recheck: Some(crate::store::RecheckMeta {
                best: 2,
                baseline: 3,
                candidate: 4,
                confirm: Some(crate::sequential::Confirm { from: 3, blocks: 3 }),
            }),
        });
        let a = analyze(&d);
        let b = a.best.clone().unwrap();
        assert_eq!((b.idx, b.label.as_str()), (2, "t8"));
        // Its mean is the re-check's (fresh runs), its test the re-check's confirmatory one.
        assert!((b.mean - 118.0).abs() < 1e-9, "{b:?}");
        let vs = b.vs_baseline.clone().unwrap();
        assert!(vs.significant && (vs.rel - 0.18).abs() < 0.01, "{vs:?}");
        let s = a.search.clone().unwrap();
        assert_eq!(s.best.as_deref(), Some("t8"));
        assert_eq!(
            s.recheck.as_ref().unwrap().runs,
            3,
            "confirmatory runs only"
        );
        let text = render(&a);
        assert!(
            text.contains("re-checked; mean over the re-check's runs): t8"),
            "{text}"
        );
        assert!(
            !text.contains("best: t4") && !text.contains("): t4"),
            "{text}"
        );
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["best"]["label"], "t8");
        assert_eq!(json["search"]["best"], "t8");
        // Effects over the points the search visited are labelled so.
        assert!(a.main_effects.iter().all(|e| e.observational));
        assert!(text.contains("main effects — OBSERVATIONAL"), "{text}");
        // A fixed design's are not.
        let fixed = analyze(&data(&[
            ("base", Some("2"), vec![100.0, 101.0]),
            ("t4", Some("4"), vec![110.0, 111.0]),
        ]));
        assert!(fixed.main_effects.iter().all(|e| !e.observational));
        // Stopped before its re-check: no best yet (not the luckiest trial).
        let mut early = d.clone();
        early.experiment.status = "interrupted".into();
        early.experiment.meta.search.as_mut().unwrap().recheck = None;
        early.runs.retain(|r| r.config < 3);
        early.configurations.truncate(3);
        assert!(analyze(&early).best.is_none());
    }

    /// A new experiment's tests use its confirmatory runs only; one stopped before them tests nothing and
    /// says why; a store written before confirmatory blocks tests every run and says that is not valid.
    #[test]
    fn significance_is_decided_on_the_confirmatory_runs() {
        // Pilot (blocks 0..3): a lucky 10% gap; confirmatory (blocks 3..6): identical.
        let pilot_and_confirm = |gap: f64| -> Vec<f64> {
            vec![100.0 + gap, 100.5 + gap, 99.5 + gap, 100.0, 101.0, 99.0]
        };
        let mut d = data(&[
            ("base", Some("2"), pilot_and_confirm(0.0)),
            ("t4", Some("4"), pilot_and_confirm(10.0)),
        ]);
        d.experiment.meta.scale_knob = None;
        d.experiment.meta.confirmatory = true;
        d.experiment.meta.confirm = Some(crate::sequential::Confirm { from: 3, blocks: 3 });
        let a = analyze(&d);
        assert_eq!(a.comparisons.len(), 1);
        assert!(!a.comparisons[0].significant, "{:?}", a.comparisons);
        assert!(a.notes.is_empty(), "{:?}", a.notes);
        // Every run (as stores written before did): the pilot's gap is called significant, with a note.
        let mut old = d.clone();
        old.experiment.meta.confirmatory = false;
        old.experiment.meta.confirm = None;
        let a = analyze(&old);
        assert!(
            a.notes
                .iter()
                .any(|n| n.contains("stored before confirmatory blocks")),
            "{:?}",
            a.notes
        );
        // Stopped in the pilot: nothing tested.
        let mut early = d.clone();
        early.experiment.meta.confirm = None;
        let a = analyze(&early);
        assert!(a.comparisons.is_empty());
        assert!(render(&a).contains("stopped before its confirmatory blocks"));
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
