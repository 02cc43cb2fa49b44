//! Comparisons: when several inputs of the same kind are given (typically from different kernels or
//! machines, as seeds 001 and 002 compare kernels), their key curves are drawn in one chart with a series per
//! input, labelled "kernel @ host" from the fingerprints (the file name when that is ambiguous or unknown).

use crate::doc::{Block, Section, Table};
use crate::fmt::num;
use crate::inputs::{Input, InputData, bench, demo, tune};
use crate::svg::ScaleKind;
use crate::svg::{BarChart, BarSeries, BarValue};
use crate::svg::{RefLine, XyChart, XySeries};

/// Labels for `inputs`, unique: "kernel @ host", with the file name added where two would be equal.
pub(crate) fn labels(inputs: &[&Input]) -> Vec<String> {
    let base: Vec<String> = inputs.iter().map(|i| i.label()).collect();
    base.iter()
        .zip(inputs)
        .map(|(l, i)| {
            if base.iter().filter(|b| *b == l).count() > 1 && *l != i.short_name() {
                format!("{l} ({})", i.short_name())
            } else {
                l.clone()
            }
        })
        .collect()
}

/// The comparison sections for `inputs` (none when no kind appears twice).
pub(crate) fn sections(inputs: &[Input]) -> Vec<Section> {
    let mut out = Vec::new();
    let demos: Vec<&Input> = inputs
        .iter()
        .filter(|i| matches!(i.data, InputData::Demo(_)))
        .collect();
    if demos.len() > 1 {
        out.push(compare_demos(&demos));
    }
    let benches: Vec<&Input> = inputs
        .iter()
        .filter(|i| matches!(i.data, InputData::Bench(_)))
        .collect();
    if benches.len() > 1 {
        out.push(compare_benches(&benches));
    }
    out.extend(compare_tune(inputs));
    out
}

/// Experiments of the same name across tune stores (or within one), side by side.
fn compare_tune(inputs: &[Input]) -> Vec<Section> {
    let mut exps: Vec<(&Input, &tune::Experiment)> = Vec::new();
    for i in inputs {
        if let InputData::Tune(t) = &i.data {
            exps.extend(t.experiments.iter().map(|e| (i, e)));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (_, e) in &exps {
        if !names.contains(&e.data.experiment.name.as_str()) {
            names.push(&e.data.experiment.name);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let group: Vec<&(&Input, &tune::Experiment)> = exps
            .iter()
            .filter(|(_, e)| e.data.experiment.name == name)
            .collect();
        if group.len() < 2 {
            continue;
        }
        let id = format!("compare-tune-{}", out.len() + 1);
        let base: Vec<String> = group
            .iter()
            .map(|(i, e)| {
                e.machine
                    .label()
                    .unwrap_or_else(|| format!("{} #{}", i.short_name(), e.data.experiment.id))
            })
            .collect();
        let labels: Vec<String> = base
            .iter()
            .zip(&group)
            .map(|(l, (i, e))| {
                if base.iter().filter(|b| *b == l).count() > 1 {
                    format!("{l} ({} #{})", i.short_name(), e.data.experiment.id)
                } else {
                    l.clone()
                }
            })
            .collect();
        let y = tune::score_label(&group[0].1.analysis);
        let mut chart = BarChart::new(
            format!("{id}-configs"),
            format!(
                "Mean {y} per configuration with its 95% CI, one bar per machine or kernel; hatched bars and dashed lines in each colour: that input's baseline."
            ),
            "configuration",
            tune::score_axis(&group[0].1.analysis),
        );
        for (_, e) in &group {
            for c in e.analysis.configs.iter().filter(|c| c.score.n > 0) {
                if !chart.categories.contains(&c.label) {
                    chart.categories.push(c.label.clone());
                }
            }
        }
        let mut table = Table::new(
            format!("{y}: best configuration per input"),
            &[
                "input",
                "best",
                "mean",
                "95% CI ±",
                "vs baseline",
                "significant",
            ],
        )
        .left(0)
        .left(1);
        for ((_, e), label) in group.iter().zip(&labels) {
            let values = chart
                .categories
                .iter()
                .map(|cat| {
                    e.analysis
                        .configs
                        .iter()
                        .find(|c| &c.label == cat && c.score.n > 0)
                        .map(|c| {
                            let mut v = BarValue::new(c.score.mean);
                            if c.score.ci95.is_finite() {
                                v = v.interval(
                                    c.score.mean - c.score.ci95,
                                    c.score.mean + c.score.ci95,
                                );
                            }
                            v.baseline = c.is_baseline;
                            if e.analysis
                                .comparisons
                                .iter()
                                .any(|x| x.idx == c.idx && x.significant)
                            {
                                v.flag = Some("*".into());
                            }
                            v
                        })
                })
                .collect();
            chart.series.push(BarSeries {
                name: label.clone(),
                values,
            });
            if let Some(b) = &e.analysis.best {
                table.row(vec![
                    label.clone(),
                    b.label.clone(),
                    num(b.mean, 3),
                    num(b.ci95, 3),
                    b.vs_baseline
                        .as_ref()
                        .map_or("–".into(), |c| format!("{}%", num(c.rel * 100.0, 2))),
                    b.vs_baseline.as_ref().map_or("–".into(), |c| {
                        if c.significant { "yes" } else { "no" }.into()
                    }),
                ]);
            }
        }
        // Same name is not the same experiment: say what differs (workload, target, objective, units, ...).
        let differences: Vec<String> = group
            .iter()
            .zip(&labels)
            .skip(1)
            .filter_map(|((_, e), label)| {
                ordo_results::tune::incompatibility(&group[0].1.data, &e.data)
                    .map(|why| format!("{label}: {why}"))
            })
            .collect();
        let mut blocks = Vec::new();
        if !differences.is_empty() {
            blocks.push(Block::Note(format!(
                "WARNING: these runs are not the same experiment as {} ({}); differences between them may be the setup's, not the machines'.",
                labels[0],
                differences.join("; ")
            )));
        }
        blocks.push(Block::from(chart));
        blocks.push(Block::from(table));
        out.push(Section {
            id: id.clone(),
            title: format!("Comparison — tune experiment {name:?}"),
            subtitle: format!("{} runs: {}", group.len(), labels.join("; ")),
            blocks,
        });
    }
    out
}

fn compare_benches(inputs: &[&Input]) -> Section {
    let labels = labels(inputs);
    let mut chart = XyChart::new(
        "compare-bench-percentiles",
        "Latency by percentile, one line per input (corrected latency for open-loop runs); both axes logarithmic.",
        "percentile",
        "latency (ms)",
    );
    chart.x_scale = ScaleKind::Nines;
    chart.y_scale = ScaleKind::Log;
    let mut rps = XyChart::new(
        "compare-bench-throughput",
        "Throughput over time, one line per input.",
        "time since start (s)",
        "requests per second",
    );
    let mut table = Table::new(
        "Side by side",
        &[
            "input", "req/s", "mean ms", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "failed",
        ],
    )
    .left(0);
    for (input, label) in inputs.iter().zip(&labels) {
        let InputData::Bench(r) = &input.data else {
            continue;
        };
        let l = r.summary.corrected.as_ref().unwrap_or(&r.summary.latency);
        chart
            .series
            .push(XySeries::line(label.clone(), bench::percentile_points(l)));
        rps.series.push(XySeries::line(
            label.clone(),
            r.timeline_rates()
                .iter()
                .map(|t| crate::svg::Point::new(t.second as f64, t.complete_per_s))
                .collect(),
        ));
        let at = |p: f64| l.at(p).map_or("–".into(), |v| num(v, 3));
        table.row(vec![
            label.clone(),
            num(r.summary.rps, 2),
            num(l.mean_ms, 3),
            at(50.0),
            at(99.0),
            at(99.9),
            num(l.max_ms, 3),
            r.summary.failed.total.to_string(),
        ]);
    }
    Section {
        id: "compare-bench".into(),
        title: "Comparison — bench runs".into(),
        subtitle: format!("{} runs: {}", inputs.len(), labels.join("; ")),
        blocks: vec![Block::from(chart), Block::from(rps), Block::from(table)],
    }
}

fn compare_demos(inputs: &[&Input]) -> Section {
    let labels = labels(inputs);
    let mut lh = XyChart::new(
        "compare-demo-lh",
        "Light/heavy response-time ratio against clients, one line per input; the dashed line is the target 4.",
        "clients",
        "light/heavy ratio",
    );
    let mut mh = XyChart::new(
        "compare-demo-mh",
        "Medium/heavy response-time ratio against clients, one line per input; the dashed line is the target 2.",
        "clients",
        "medium/heavy ratio",
    );
    let mut table = Table::new(
        "Ratios at the largest client count",
        &["input", "clients", "light/heavy", "medium/heavy"],
    )
    .left(0);
    for (input, label) in inputs.iter().zip(&labels) {
        let InputData::Demo(d) = &input.data else {
            continue;
        };
        let (a, b) = demo::ratio_series(d);
        lh.series.push(XySeries::line(label.clone(), a));
        mh.series.push(XySeries::line(label.clone(), b));
        if let Some(last) = d.steps.last() {
            table.row(vec![
                label.clone(),
                last.clients.to_string(),
                last.ratio_light_heavy.map_or("–".into(), |r| num(r, 3)),
                last.ratio_medium_heavy.map_or("–".into(), |r| num(r, 3)),
            ]);
        }
    }
    lh.ref_lines.push(RefLine {
        y: demo::TARGET_LIGHT_HEAVY,
        label: "target 4".into(),
    });
    mh.ref_lines.push(RefLine {
        y: demo::TARGET_MEDIUM_HEAVY,
        label: "target 2".into(),
    });
    Section {
        id: "compare-demo".into(),
        title: "Comparison — demo runs".into(),
        subtitle: format!("{} runs: {}", inputs.len(), labels.join("; ")),
        blocks: vec![Block::from(lh), Block::from(mh), Block::from(table)],
    }
}
