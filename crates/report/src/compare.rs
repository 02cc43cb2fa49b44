//! Comparisons: when several inputs of the same kind are given (typically from different kernels or
//! machines, as seeds 001 and 002 compare kernels), their key curves are drawn in one chart with a series per
//! input, labelled "kernel @ host" from the fingerprints (the file name when that is ambiguous or unknown).

use crate::doc::{Block, Section, Table};
use crate::fmt::num;
use crate::inputs::{Input, InputData, bench, demo};
use crate::svg::ScaleKind;
use crate::svg::{RefLine, XyChart, XySeries};

/// Labels for `inputs`, unique: "kernel @ host", with the file name added where two would be equal.
pub fn labels(inputs: &[&Input]) -> Vec<String> {
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
pub fn sections(inputs: &[Input]) -> Vec<Section> {
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
            r.timeline
                .iter()
                .map(|t| crate::svg::Point::new(t.second as f64, t.complete as f64))
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
