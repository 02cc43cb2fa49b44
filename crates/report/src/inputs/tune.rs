//! `ordo tune` experiments, as typed results (ordo-results' `tune-experiment`: the stored experiment with
//! its analysis, which ordo hands over from a store read by ordo-tune): one bar per configuration with its 95% confidence interval, the baseline marked and
//! significant differences flagged (seed 000, Figures 1–3); a main-effect plot per knob; latency percentile
//! curves per configuration; the scalability chart over a thread-count knob (seed 001); and the tables
//! `ordo tune show` prints.

use ordo_results::tune::{
    Analysis, ConfigStats, ExperimentData, ExperimentResult, SearchSummary, short_name,
};
use ordo_util::pvalue::format_p;

use crate::doc::{Block, Section, Table};
use crate::fmt::{civil_utc, num};
use crate::machine::Machine;
use crate::svg::{BarChart, BarSeries, BarValue, Point, RefLine, ScaleKind, XyChart, XySeries};

/// Configurations drawn as separate percentile curves at most; beyond, the baseline, best and worst.
pub(crate) const MAX_CURVES: usize = 8;

/// One stored experiment with its analysis.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub data: ExperimentData,
    pub analysis: Analysis,
    pub machine: Machine,
}

/// Every experiment in a store, oldest first.
#[derive(Clone, Debug)]
pub struct TuneStore {
    pub experiments: Vec<Experiment>,
}

impl From<ExperimentResult> for Experiment {
    fn from(r: ExperimentResult) -> Self {
        let machine = Machine::from_value(r.experiment.fingerprint.as_ref());
        Experiment {
            data: r.experiment,
            analysis: r.analysis,
            machine,
        }
    }
}

/// A configuration's label with "(baseline)" added when it is the baseline and does not say so already.
fn marked(c: &ConfigStats) -> String {
    if c.is_baseline && !c.label.contains("baseline") {
        format!("{} (baseline)", c.label)
    } else {
        c.label.clone()
    }
}

/// The y-axis name of the score: the metric itself when the score is one metric with weight 1.
pub(crate) fn score_label(a: &Analysis) -> String {
    match a.score_terms.as_slice() {
        [(m, w)] if *w == 1.0 => m.clone(),
        [] => "score".into(),
        terms => format!(
            "score = {}",
            terms
                .iter()
                .map(|(m, w)| if *w == 1.0 {
                    m.clone()
                } else {
                    format!("{}×{m}", num(*w, 3))
                })
                .collect::<Vec<_>>()
                .join(" + ")
        ),
    }
}

/// The score as a y-axis label, with its unit where the metric's name does not carry one
/// (`web.throughput` → `web.throughput (per s)`; `web.p99_ms` already says ms).
pub(crate) fn score_axis(a: &Analysis) -> String {
    let label = score_label(a);
    match a.score_terms.as_slice() {
        [(m, w)] if *w == 1.0 && m.ends_with("throughput") => format!("{label} (per s)"),
        [] | [_] => label,
        _ => format!("{label} (weighted sum)"),
    }
}

pub(crate) fn summary(s: &TuneStore) -> String {
    let names: Vec<String> = s
        .experiments
        .iter()
        .map(|e| {
            format!(
                "#{} {} ({} configurations, {})",
                e.data.experiment.id,
                e.data.experiment.name,
                e.data.configurations.len(),
                e.data.experiment.status
            )
        })
        .collect();
    format!("ordo tune store: {}", names.join("; "))
}

/// The bar chart of every configuration's mean score with CI, baseline and significance.
pub(crate) fn config_chart(id: &str, a: &Analysis) -> BarChart {
    let y = score_label(a);
    let mut c = BarChart::new(
        id,
        format!(
            "Mean {y} per configuration with its 95% confidence interval ({}); hatched: the baseline; *: differs from it (Welch, Holm-corrected, α = 0.05).",
            if a.objective == "minimize" {
                "lower is better"
            } else {
                "higher is better"
            }
        ),
        "configuration",
        score_axis(a),
    );
    let measured: Vec<&ConfigStats> = a.configs.iter().filter(|c| c.score.n > 0).collect();
    c.categories = measured.iter().map(|c| c.label.clone()).collect();
    let order: Vec<String> = a.main_effects.iter().map(|e| e.knob.clone()).collect();
    let (ticks, knobs) = tick_labels(&measured, &order);
    if !knobs.is_empty() {
        c.tick_labels = ticks;
        c.x_label = format!("configuration: {}", knobs.join(" · "));
    }
    c.series.push(BarSeries {
        name: "mean".into(),
        values: measured
            .iter()
            .map(|cs| {
                let mut v = BarValue::new(cs.score.mean);
                if cs.score.ci95.is_finite() {
                    v = v.interval(cs.score.mean - cs.score.ci95, cs.score.mean + cs.score.ci95);
                }
                v.baseline = cs.is_baseline;
                let cmp = a.comparisons.iter().find(|x| x.idx == cs.idx);
                if cmp.is_some_and(|x| x.significant) {
                    v.flag = Some("*".into());
                }
                let mut note = format!("{} runs", cs.score.n);
                if let Some(x) = cmp {
                    note.push_str(&format!(
                        ", {}% vs baseline, p(Holm) {}",
                        signed(x.rel * 100.0, 2),
                        p_text(x.p_holm)
                    ));
                }
                v.note = Some(note);
                Some(v)
            })
            .collect(),
    });
    c
}

/// Bar labels that tell configurations apart: only the values of the knobs that differ between them, in
/// knob order, numbers compacted (3000000 → 3M), with the knobs named once on the axis. Full labels of a
/// 3^3 sweep ("swappiness=10 nice=0 base_slice_ns=1000000") were all cut to the same prefix.
fn tick_labels(configs: &[&ConfigStats], order: &[String]) -> (Vec<String>, Vec<String>) {
    let mut knobs: Vec<String> = order.to_vec();
    for c in configs {
        for k in c.values.keys() {
            if !knobs.contains(k) {
                knobs.push(k.clone());
            }
        }
    }
    knobs.retain(|k| {
        let first = configs.first().and_then(|c| c.values.get(k));
        configs.iter().any(|c| c.values.get(k) != first)
    });
    let compact = |v: &str| match v.parse::<f64>() {
        Ok(x) if x.fract() == 0.0 && x.abs() >= 1e4 => {
            let (d, unit) = if x.abs() >= 1e9 && x % 1e9 == 0.0 {
                (1e9, "G")
            } else if x.abs() >= 1e6 && x % 1e5 == 0.0 {
                (1e6, "M")
            } else if x % 100.0 == 0.0 {
                (1e3, "k")
            } else {
                return v.to_string();
            };
            format!("{}{unit}", x / d)
        }
        _ => v.to_string(),
    };
    let ticks = configs
        .iter()
        .map(|c| {
            if c.is_baseline {
                return "baseline".to_string();
            }
            knobs
                .iter()
                .map(|k| c.values.get(k).map_or("–".to_string(), |v| compact(v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let names = knobs.iter().map(|k| short_name(k).to_string()).collect();
    (ticks, names)
}

fn signed(v: f64, d: usize) -> String {
    if v > 0.0 {
        format!("+{}", num(v, d))
    } else {
        num(v, d)
    }
}

/// One main-effect chart per knob: mean score at each level.
pub(crate) fn main_effect_charts(id: &str, a: &Analysis) -> Vec<XyChart> {
    let grand = {
        let m: Vec<f64> = a
            .configs
            .iter()
            .filter(|c| c.score.n > 0)
            .map(|c| c.score.mean)
            .collect();
        (!m.is_empty()).then(|| m.iter().sum::<f64>() / m.len() as f64)
    };
    a.main_effects
        .iter()
        .enumerate()
        .filter(|(_, e)| !e.levels.is_empty())
        .map(|(i, e)| {
            let mut c = XyChart::new(
                format!("{id}-effect-{}", i + 1),
                format!(
                    "{}Main effect of {}: mean {} over the configurations at each level (spread {}).",
                    if e.observational {
                        "Observational — over the points the search chose to visit, not a balanced design. "
                    } else {
                        ""
                    },
                    e.knob,
                    score_label(a),
                    num(e.spread, 3)
                ),
                e.knob.clone(),
                format!("mean {}", score_axis(a)),
            );
            c.y_zero = false;
            c.x_categories = Some(e.levels.iter().map(|l| l.level.clone()).collect());
            c.series.push(XySeries::line(
                e.knob.clone(),
                e.levels
                    .iter()
                    .enumerate()
                    .map(|(j, l)| Point {
                        x: j as f64,
                        y: l.mean,
                        note: Some(format!("{} configurations", l.configurations)),
                    })
                    .collect(),
            ));
            if let Some(g) = grand {
                c.ref_lines.push(RefLine {
                    y: g,
                    label: "mean of all configurations".into(),
                });
            }
            c
        })
        .collect()
}

const CURVE_PERCENTILES: [(f64, &str); 4] = [
    (50.0, "p50_ms"),
    (90.0, "p90_ms"),
    (95.0, "p95_ms"),
    (99.0, "p99_ms"),
];

/// The workload prefix (e.g. "web") of the first workload with latency percentiles.
fn latency_workload(a: &Analysis) -> Option<String> {
    let mut names: Vec<&String> = a.configs.iter().flat_map(|c| c.metrics.keys()).collect();
    names.sort();
    names
        .into_iter()
        .find(|m| m.ends_with(".p99_ms") && !m.contains(".class."))
        .map(|m| m.trim_end_matches(".p99_ms").to_string())
}

/// Percentile points (mean over runs) of one configuration for workload `w`.
pub(crate) fn config_percentiles(c: &ConfigStats, w: &str) -> Vec<Point> {
    CURVE_PERCENTILES
        .iter()
        .filter_map(|(p, m)| {
            c.metrics
                .get(&format!("{w}.{m}"))
                .map(|s| Point::new(*p, s.mean))
        })
        .collect()
}

/// Latency percentile curves per configuration (or baseline, best and worst when there are many).
pub(crate) fn percentile_chart(id: &str, a: &Analysis) -> Option<XyChart> {
    let w = latency_workload(a)?;
    let measured: Vec<&ConfigStats> = a
        .configs
        .iter()
        .filter(|c| c.score.n > 0 && c.metrics.contains_key(&format!("{w}.p99_ms")))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let p99 = |c: &ConfigStats| c.metrics[&format!("{w}.p99_ms")].mean;
    let (shown, which): (Vec<&ConfigStats>, String) = if measured.len() <= MAX_CURVES {
        (measured.clone(), "per configuration".to_string())
    } else {
        let mut pick: Vec<&ConfigStats> = Vec::new();
        if let Some(b) = measured.iter().find(|c| c.is_baseline) {
            pick.push(b);
        }
        let best = measured.iter().min_by(|x, y| p99(x).total_cmp(&p99(y)));
        let worst = measured.iter().max_by(|x, y| p99(x).total_cmp(&p99(y)));
        for c in [best, worst].into_iter().flatten() {
            if !pick.iter().any(|p| p.idx == c.idx) {
                pick.push(c);
            }
        }
        let n = measured.len();
        (
            pick,
            format!("of the baseline and of the lowest and highest p99 of {n} configurations"),
        )
    };
    let mut c = XyChart::new(
        id,
        format!(
            "Latency percentiles of workload {w} {which} (mean over runs); both axes logarithmic."
        ),
        "percentile",
        "latency (ms)",
    );
    c.x_scale = ScaleKind::Nines;
    c.y_scale = ScaleKind::Log;
    for cs in shown {
        let mut s = XySeries::line(marked(cs), config_percentiles(cs, &w));
        if cs.is_baseline {
            s = s.dashed();
        }
        c.series.push(s);
    }
    Some(c)
}

/// Seed 001's charts: runtime against the scale knob per group, and the scalability ratio.
pub(crate) fn scalability_charts(id: &str, a: &Analysis) -> Vec<XyChart> {
    let Some(sc) = &a.scalability else {
        return Vec::new();
    };
    if sc.rows.is_empty() {
        return Vec::new();
    }
    let mut groups: Vec<String> = Vec::new();
    for r in &sc.rows {
        if !groups.contains(&r.group) {
            groups.push(r.group.clone());
        }
    }
    let per_request = sc.runtime_metric.starts_with("1/");
    let xs: Vec<f64> = sc.rows.iter().flat_map(|r| [r.a, r.b]).collect();
    let x_log = xs.iter().all(|x| *x > 0.0)
        && xs.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            / xs.iter().copied().fold(f64::INFINITY, f64::min)
            >= 8.0;
    let name = |g: &str| {
        if g.is_empty() {
            "all".to_string()
        } else {
            g.to_string()
        }
    };
    let mut rt = XyChart::new(
        format!("{id}-scale-runtime"),
        format!(
            "Runtime against {} ({}), one line per setting of the other knobs (seed 001, Figures 3–4).",
            sc.knob,
            if per_request {
                "seconds per request = 1 / throughput"
            } else {
                "elapsed seconds of the fixed workload"
            }
        ),
        sc.knob.clone(),
        if per_request {
            "seconds per request"
        } else {
            "runtime (s)"
        },
    );
    let mut ratio = XyChart::new(
        format!("{id}-scale-ratio"),
        format!(
            "Scalability ratio (runtime_B / runtime_A) / (B / A) from the base {} A = {}; below 1 is better than proportional (a logarithmic axis when the ratios span a factor of 10 or more).",
            sc.knob,
            sc.rows.first().map_or("–".into(), |r| num(r.a, 3))
        ),
        sc.knob.clone(),
        "scalability ratio",
    );
    if x_log {
        rt.x_scale = ScaleKind::Log;
        ratio.x_scale = ScaleKind::Log;
    }
    ratio.ref_lines.push(RefLine {
        y: 1.0,
        label: "proportional".into(),
    });
    // Points in order of the count: with a base that is not the smallest level (seed 001 used 16), the
    // lines were drawn base first and joined out of order. The base's own ratio is 1 by definition.
    let sorted = |mut v: Vec<Point>| {
        v.sort_by(|p, q| p.x.total_cmp(&q.x));
        v
    };
    for (i, g) in groups.iter().enumerate() {
        let rows: Vec<_> = sc.rows.iter().filter(|r| &r.group == g).collect();
        let mut pts: Vec<Point> = Vec::new();
        let mut ratios: Vec<Point> = Vec::new();
        if let Some(first) = rows.first() {
            pts.push(Point::new(first.a, first.runtime_a));
            ratios.push(Point::new(first.a, 1.0));
        }
        pts.extend(rows.iter().map(|r| Point::new(r.b, r.runtime_b)));
        ratios.extend(rows.iter().map(|r| Point::new(r.b, r.ratio)));
        rt.series
            .push(XySeries::line(name(g), sorted(pts)).style(i));
        ratio
            .series
            .push(XySeries::line(name(g), sorted(ratios)).style(i));
    }
    // One huge value (a ratio of 40 beside ratios near 1) flattens every other line on a linear axis.
    let wide = |ys: Vec<f64>| {
        ys.iter().all(|y| *y > 0.0)
            && ys.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                / ys.iter().copied().fold(f64::INFINITY, f64::min)
                >= 10.0
    };
    if wide(sc.rows.iter().map(|r| r.ratio).chain([1.0]).collect()) {
        ratio.y_scale = ScaleKind::Log;
    }
    if wide(
        sc.rows
            .iter()
            .flat_map(|r| [r.runtime_a, r.runtime_b])
            .collect(),
    ) {
        rt.y_scale = ScaleKind::Log;
    }
    vec![rt, ratio]
}

fn config_table(a: &Analysis) -> Table {
    let mut t = Table::new(
        format!("Per configuration ({})", score_label(a)),
        &[
            "configuration",
            "runs",
            "mean",
            "sd",
            "95% CI ±",
            "min",
            "max",
            "vs baseline",
            "p (Holm)",
            "significant",
        ],
    );
    for c in &a.configs {
        let cmp = a.comparisons.iter().find(|x| x.idx == c.idx);
        t.row(vec![
            marked(c),
            c.score.n.to_string(),
            num(c.score.mean, 3),
            num(c.score.sd, 3),
            num(c.score.ci95, 3),
            num(c.score.min, 3),
            num(c.score.max, 3),
            cmp.map_or("–".into(), |x| format!("{}%", signed(x.rel * 100.0, 2))),
            cmp.map_or("–".into(), |x| format_p(x.p_holm)),
            cmp.map_or("–".into(), |x| {
                if x.significant { "yes" } else { "no" }.to_string()
            }),
        ]);
    }
    t
}

fn seed_table(a: &Analysis) -> Option<Table> {
    let s = a.table.as_ref()?;
    let mut t = Table::new("Summary over configurations (seed 000)", &["", "value"]);
    let pct = |v: Option<f64>| v.map_or("–".into(), |v| format!("{}%", signed(v * 100.0, 2)));
    for (k, v) in [
        ("mean", num(s.mean, 3)),
        ("standard deviation", num(s.sd, 3)),
        ("max", num(s.max, 3)),
        ("min", num(s.min, 3)),
        ("range", num(s.range, 3)),
        ("baseline", s.baseline.map_or("–".into(), |b| num(b, 3))),
        ("max increase over the baseline", pct(s.max_abs_increase)),
        ("best over worst", pct(Some(s.max_rel_increase))),
    ] {
        t.row(vec![k.to_string(), v]);
    }
    Some(t)
}

fn effects_table(a: &Analysis) -> Table {
    let mut t = Table::new(
        if a.main_effects.iter().any(|e| e.observational) {
            "Main effects — observational (mean per level over the points the search visited)"
        } else {
            "Main effects (mean per level)"
        },
        &["knob", "level", "mean", "configurations"],
    )
    .left(1);
    for e in &a.main_effects {
        for l in &e.levels {
            t.row(vec![
                e.knob.clone(),
                l.level.clone(),
                num(l.mean, 3),
                l.configurations.to_string(),
            ]);
        }
    }
    t
}

fn scale_table(a: &Analysis) -> Option<Table> {
    let sc = a.scalability.as_ref()?;
    let mut t = Table::new(
        format!("Scalability over {} ({})", sc.knob, sc.runtime_metric),
        &["group", "A", "B", "runtime A", "runtime B", "ratio"],
    );
    for r in &sc.rows {
        t.row(vec![
            if r.group.is_empty() {
                "all".into()
            } else {
                r.group.clone()
            },
            num(r.a, 3),
            num(r.b, 3),
            num(r.runtime_a, 6),
            num(r.runtime_b, 6),
            num(r.ratio, 4),
        ]);
    }
    Some(t)
}

/// "= 0.0123" or "< 0.001".
fn p_text(p: f64) -> String {
    let f = format_p(p);
    if f.starts_with('<') {
        f
    } else {
        format!("= {f}")
    }
}

/// A search: trials against the grid, the gain it reported and what the re-check kept of it.
fn search_table(s: &SearchSummary) -> Table {
    let mut t = Table::new(
        "Search (model-based) and the re-check of its best against the baseline",
        &["", "value"],
    )
    .left(1);
    let pct = |v: f64| format!("{}%", signed(v * 100.0, 2));
    t.row(vec![
        "configurations tried".into(),
        format!(
            "{} of {} ({}% of the grid; budget {})",
            s.trials,
            s.grid,
            num(100.0 * s.trials as f64 / s.grid.max(1) as f64, 1),
            s.budget
        ),
    ]);
    t.row(vec![
        "reported best".into(),
        s.best
            .clone()
            .unwrap_or_else(|| "none beat the baseline".into()),
    ]);
    if let Some(g) = s.reported_gain {
        t.row(vec!["gain in the search's runs".into(), pct(g)]);
    }
    if let Some(r) = &s.recheck {
        t.row(vec![
            format!("gain re-checked ({} interleaved runs each)", r.runs),
            format!(
                "{} (p {}{})",
                pct(r.gain),
                p_text(r.p),
                if r.significant {
                    ", significant"
                } else {
                    ", not significant"
                }
            ),
        ]);
    }
    if let Some(k) = s.kept {
        t.row(vec![
            "share of the reported gain that survived".into(),
            format!("{}%", num(100.0 * k, 0)),
        ]);
    }
    t
}

fn best_note(a: &Analysis) -> Option<String> {
    let b = a.best.as_ref()?;
    let mut s = format!(
        "Best: {} with mean {} ± {} (95% CI)",
        b.label,
        num(b.mean, 3),
        num(b.ci95, 3)
    );
    match &b.vs_baseline {
        Some(c) if c.significant => s.push_str(&format!(
            ", {}% vs the baseline (significant, p(Holm) {}).",
            signed(c.rel * 100.0, 2),
            p_text(c.p_holm)
        )),
        Some(c) => s.push_str(&format!(
            ", {}% vs the baseline — not a significant difference (p(Holm) {}).",
            signed(c.rel * 100.0, 2),
            p_text(c.p_holm)
        )),
        None => s.push('.'),
    }
    Some(s)
}

/// One section per experiment in the store.
pub(crate) fn sections(s: &TuneStore, id: &str, name: &str) -> Vec<Section> {
    s.experiments
        .iter()
        .map(|e| experiment_section(e, &format!("{id}-e{}", e.data.experiment.id), name))
        .collect()
}

fn experiment_section(e: &Experiment, id: &str, name: &str) -> Section {
    let a = &e.analysis;
    let x = &e.data.experiment;
    let measured_runs = e.data.runs.iter().filter(|r| !r.warmup && r.ok).count();
    let mut sub = format!(
        "experiment #{} {:?} from {}: {}, {} configurations, {} measured runs, objective {} {}",
        x.id,
        x.name,
        x.spec_path,
        x.status,
        e.data.configurations.len(),
        measured_runs,
        a.objective,
        score_label(a)
    );
    if x.created_unix > 0 {
        sub.push_str(&format!("; started {}", civil_utc(x.created_unix as u64)));
    }
    if let Some(l) = e.machine.label() {
        sub.push_str(&format!("; {l}"));
    }
    let mut blocks: Vec<Block> = a
        .warnings
        .iter()
        .chain(&a.notes)
        .map(|n| Block::Note(n.clone()))
        .collect();
    if a.configs.iter().all(|c| c.score.n == 0) {
        blocks.push(Block::Note(
            "No configuration has a measured run yet.".into(),
        ));
    } else {
        if let Some(n) = best_note(a) {
            blocks.push(Block::Note(n));
        }
        blocks.push(config_chart(&format!("{id}-configs"), a).into());
        for c in main_effect_charts(id, a) {
            blocks.push(c.into());
        }
        if let Some(c) = percentile_chart(&format!("{id}-percentiles"), a) {
            blocks.push(c.into());
        }
        for c in scalability_charts(id, a) {
            blocks.push(c.into());
        }
    }
    blocks.push(config_table(a).left(0).into());
    if let Some(t) = seed_table(a) {
        blocks.push(t.left(1).into());
    }
    if !a.main_effects.is_empty() {
        blocks.push(effects_table(a).into());
    }
    if let Some(t) = scale_table(a) {
        blocks.push(t.into());
    }
    if let Some(s) = &a.search {
        blocks.push(search_table(s).into());
    }
    Section {
        id: id.to_string(),
        title: format!("Tune — {} ({name})", x.name),
        subtitle: sub,
        blocks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ordo_results::tune::{ConfigStats, MainEffect, Scalability, ScaleRow, Summary};
    use std::collections::BTreeMap;

    /// A configuration: its knob values, whether it is the baseline, its mean score (3 runs).
    type Config<'a> = (Vec<(&'a str, String)>, bool, f64);

    /// A typed analysis (as ordo-tune would hand it over) of a maximised throughput: the configurations
    /// measured with their means, main effects naming the knobs in file order, and `scalability`.
    fn analysis(
        knobs: &[&str],
        configs: Vec<Config<'_>>,
        scalability: Option<Scalability>,
    ) -> Analysis {
        let configs = configs
            .into_iter()
            .enumerate()
            .map(|(i, (values, base, mean))| {
                let values: BTreeMap<String, String> = values
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                ConfigStats {
                    idx: i,
                    label: if base {
                        "baseline (machine defaults)".into()
                    } else {
                        values
                            .iter()
                            .map(|(k, v)| format!("{}={v}", short_name(k)))
                            .collect::<Vec<_>>()
                            .join(" ")
                    },
                    is_baseline: base,
                    values,
                    score: Summary {
                        n: 3,
                        mean,
                        sd: 1.0,
                        min: mean - 1.0,
                        max: mean + 1.0,
                        ci95: 2.5,
                    },
                    metrics: BTreeMap::new(),
                }
            })
            .collect();
        Analysis {
            experiment: 1,
            name: "t".into(),
            status: "finished".into(),
            objective: "maximize".into(),
            score_terms: vec![("web.throughput".into(), 1.0)],
            configs,
            table: None,
            main_effects: knobs
                .iter()
                .map(|k| MainEffect {
                    knob: k.to_string(),
                    levels: Vec::new(),
                    spread: 0.0,
                    observational: false,
                })
                .collect(),
            comparisons: Vec::new(),
            best: None,
            scalability,
            search: None,
            notes: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Issue 13: with the base count not the smallest (seed 001 used 16), the lines were joined base first,
    /// out of order; one huge ratio flattened the others on a linear axis.
    #[test]
    fn scalability_lines_run_in_count_order_and_a_huge_ratio_gets_a_log_axis() {
        // Throughput collapses at 64: its ratio is 25, the others' 1 to 9.
        let tput = [(2.0, 900.0), (4.0, 1000.0), (16.0, 1000.0), (64.0, 10.0)];
        let runtime = |t: f64| 1.0 / t;
        let rows = tput
            .iter()
            .filter(|(n, _)| *n != 16.0)
            .map(|&(b, t)| ScaleRow {
                group: String::new(),
                a: 16.0,
                b,
                runtime_a: runtime(1000.0),
                runtime_b: runtime(t),
                ratio: (runtime(t) / runtime(1000.0)) / (b / 16.0),
            })
            .collect();
        let a = analysis(
            &["param:threads"],
            tput.iter()
                .map(|(n, t)| (vec![("param:threads", n.to_string())], false, *t))
                .collect(),
            Some(Scalability {
                knob: "param:threads".into(),
                runtime_metric: "1/web.throughput".into(),
                rows,
            }),
        );
        let charts = scalability_charts("s", &a);
        assert_eq!(charts.len(), 2);
        for c in &charts {
            let xs: Vec<f64> = c.series[0].points.iter().map(|p| p.x).collect();
            assert_eq!(xs, vec![2.0, 4.0, 16.0, 64.0], "{}", c.id);
        }
        let ratio = &charts[1];
        assert_eq!(ratio.series[0].points[2].y, 1.0, "the base's own ratio");
        assert_eq!(ratio.y_scale, ScaleKind::Log);
        assert!(ratio.caption.contains("A = 16"), "{}", ratio.caption);
    }

    /// Issue 13: bar labels of a 3^3 sweep were all cut to the same prefix.
    #[test]
    fn bars_of_a_sweep_are_labelled_by_the_values_that_differ() {
        let mut configs = vec![(vec![], true, 100.0)];
        for sw in ["10", "60", "100"] {
            for nice in ["0", "5", "10"] {
                for slice in ["1000000", "3000000", "750000"] {
                    configs.push((
                        vec![
                            ("sysctl:vm.swappiness", sw.to_string()),
                            ("nice", nice.to_string()),
                            ("debugfs:base_slice_ns", slice.to_string()),
                        ],
                        false,
                        100.0,
                    ));
                }
            }
        }
        let a = analysis(
            &["sysctl:vm.swappiness", "nice", "debugfs:base_slice_ns"],
            configs,
            None,
        );
        let chart = config_chart("c", &a);
        assert_eq!(chart.tick_labels.len(), 28);
        assert_eq!(chart.tick_labels[0], "baseline");
        let mut distinct = chart.tick_labels.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 28, "{:?}", chart.tick_labels);
        assert!(
            chart.tick_labels.iter().all(|l| l.chars().count() <= 12),
            "{:?}",
            chart.tick_labels
        );
        assert!(
            chart.tick_labels.contains(&"10 5 750k".to_string()),
            "{:?}",
            chart.tick_labels
        );
        assert_eq!(
            chart.x_label,
            "configuration: swappiness · nice · base_slice_ns"
        );
        // The full label stays the bar's identity and tooltip.
        let svg = chart.render();
        assert!(svg.contains("data-category=\"base_slice_ns=750000 nice=5 swappiness=10\""));
    }
}
