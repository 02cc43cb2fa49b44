//! `ordo probe --json` results: the timed loop (`ordo_results::probe::LoopReport`, seed 004's histogram relative to
//! the nominal time and elapsed against involuntary switches), the side-by-side comparison
//! (`ordo_results::probe::CompareReport`: quiet vs loaded, footprints) and the live process view
//! (`ordo_results::probe::PidReport`, one JSON object per interval: switches/s and run-queue wait over time).

use ordo_results::probe::stats::{Distribution, Histogram};
use ordo_results::probe::{CompareReport, LoopReport, LoopSummary, PidReport};

use crate::doc::{Block, Section, Table};
use crate::fmt::num;
use crate::machine::Machine;
use crate::svg::{BarChart, BarSeries, BarValue, Point, XyChart, XySeries};

/// Points drawn per scatter series at most; larger runs are thinned evenly (the caption says so).
pub(crate) const MAX_SCATTER_POINTS: usize = 2000;

fn nominal_ms(nominal_ns: u64) -> f64 {
    nominal_ns as f64 / 1e6
}

/// "probe loop 'quiet': 1000 samples of 14 ms nominal".
pub(crate) fn loop_summary(r: &LoopReport) -> String {
    format!(
        "ordo probe loop{}: {} samples of a {} ms loop, footprint {} MB, policy {} nice {}",
        if r.label.is_empty() {
            String::new()
        } else {
            format!(" \u{201c}{}\u{201d}", r.label)
        },
        r.summary.samples,
        num(nominal_ms(r.nominal_ns), 3),
        r.config.footprint_mb,
        r.applied.policy,
        r.applied.nice
    )
}

pub(crate) fn compare_summary(r: &CompareReport) -> String {
    format!(
        "ordo probe loop --compare: {} runs ({}) of a {} ms loop",
        r.runs.len(),
        r.columns.join(", "),
        num(nominal_ms(r.nominal_ns), 3)
    )
}

pub(crate) fn pid_summary(r: &[PidReport]) -> String {
    match (r.first(), r.last()) {
        (Some(a), Some(b)) => format!(
            "ordo probe pid {} ({}): {} intervals over {} s",
            a.pid,
            a.name,
            r.len(),
            num(b.t_s, 1)
        ),
        _ => "ordo probe pid: no interval".into(),
    }
}

/// Every `step`-th sample so a scatter has at most [`MAX_SCATTER_POINTS`] points; (points, thinned?).
pub(crate) fn scatter_points(r: &LoopReport) -> (Vec<Point>, bool) {
    let n = r.samples.len();
    let step = n.div_ceil(MAX_SCATTER_POINTS).max(1);
    let pts = r
        .samples
        .iter()
        .step_by(step)
        .map(|s| Point::new(s.involuntary as f64, s.elapsed_ns as f64 / 1e6))
        .collect();
    (pts, step > 1)
}

/// A histogram chart with one series per (name, histogram), in % of samples.
fn histogram_chart(
    id: &str,
    caption: String,
    x_label: &str,
    hists: &[(String, &Histogram)],
) -> BarChart {
    let mut c = BarChart::new(id, caption, x_label, "% of samples");
    if let Some((_, first)) = hists.first() {
        c.categories = first.buckets.iter().map(|b| b.label.clone()).collect();
    }
    for (name, h) in hists {
        c.series.push(BarSeries {
            name: name.clone(),
            values: c
                .categories
                .iter()
                .map(|cat| {
                    h.buckets.iter().find(|b| &b.label == cat).map(|b| {
                        let mut v = BarValue::new(b.fraction * 100.0);
                        v.note = Some(format!("{} samples", b.count));
                        v
                    })
                })
                .collect(),
        });
    }
    c
}

fn relative_caption(nominal_ns: u64) -> String {
    format!(
        "Elapsed time of each sample relative to the loop's nominal {} ms (seed 004's buckets), in % of samples.",
        num(nominal_ms(nominal_ns), 3)
    )
}

fn scatter_chart(id: &str, runs: &[(String, &LoopReport)]) -> XyChart {
    let mut thinned = false;
    let mut c = XyChart::new(
        id,
        "",
        "involuntary context switches in the sample",
        "elapsed (ms)",
    );
    for (name, r) in runs {
        let (pts, t) = scatter_points(r);
        thinned |= t;
        c.series.push(XySeries::scatter(name.clone(), pts));
    }
    c.caption = format!(
        "Elapsed time of each sample against its involuntary context switches{}.",
        if thinned {
            format!(" (every sample up to {MAX_SCATTER_POINTS} per run, evenly thinned beyond)")
        } else {
            String::new()
        }
    );
    c
}

fn summary_rows(t: &mut Table, name: &str, s: &Distribution, d: usize) {
    t.row(vec![
        name.to_string(),
        num(s.min, d),
        num(s.mean, d),
        num(s.p50, d),
        num(s.p90, d),
        num(s.p99, d),
        num(s.p999, d),
        num(s.max, d),
    ]);
}

fn loop_tables(s: &LoopSummary) -> Vec<Block> {
    let mut t = Table::new(
        "Per sample",
        &["", "min", "mean", "p50", "p90", "p99", "p99.9", "max"],
    );
    summary_rows(&mut t, "elapsed ms", &s.elapsed_ms, 3);
    summary_rows(&mut t, "CPU ms", &s.cpu_ms, 3);
    if let Some(rd) = &s.run_delay_ms {
        summary_rows(&mut t, "run-queue wait ms", rd, 3);
    }
    summary_rows(&mut t, "involuntary switches", &s.involuntary, 2);
    summary_rows(&mut t, "voluntary switches", &s.voluntary, 2);
    let sp = &s.split;
    let mut split = Table::new("Where the elapsed time went", &["", "ms", "share"]);
    split.row(vec!["elapsed".into(), num(sp.elapsed_ms, 1), "100%".into()]);
    split.row(vec![
        "on CPU".into(),
        num(sp.cpu_ms, 1),
        format!("{}%", num(sp.cpu_fraction * 100.0, 1)),
    ]);
    if let (Some(w), Some(f)) = (sp.run_queue_wait_ms, sp.run_queue_wait_fraction) {
        split.row(vec![
            "waiting in the run queue".into(),
            num(w, 1),
            format!("{}%", num(f * 100.0, 1)),
        ]);
    }
    split.row(vec![
        "other (blocked, unaccounted)".into(),
        num(sp.other_ms, 1),
        format!("{}%", num(sp.other_fraction * 100.0, 1)),
    ]);
    let mut g = Table::new(
        "Samples by involuntary switches",
        &[
            "switches",
            "samples",
            "median elapsed ms",
            "× median",
            "mean wait ms",
        ],
    );
    for grp in &s.switch_cost.groups {
        g.row(vec![
            grp.label.clone(),
            grp.samples.to_string(),
            num(grp.median_elapsed_ms, 3),
            num(grp.ratio_to_median, 2),
            grp.mean_run_delay_ms.map_or("–".into(), |v| num(v, 3)),
        ]);
    }
    let mut out: Vec<Block> = Vec::new();
    if !s.switch_cost.headline.is_empty() {
        out.push(Block::Note(s.switch_cost.headline.clone()));
    }
    out.extend([t.into(), split.into(), g.into()]);
    out
}

/// A `probe-loop` section.
pub(crate) fn loop_section(r: &LoopReport, id: &str, name: &str, m: &Machine) -> Section {
    let mut blocks: Vec<Block> = r.warnings.iter().map(|w| Block::Note(w.clone())).collect();
    if r.interrupted {
        blocks.push(Block::Note(format!(
            "The run was interrupted after {} of {} samples; the figures cover the samples completed.",
            r.summary.samples, r.config.samples
        )));
    }
    if r.samples.is_empty() && r.summary.samples == 0 {
        blocks.push(Block::Note("The run holds no sample.".into()));
    } else {
        blocks.push(
            histogram_chart(
                &format!("{id}-relative"),
                relative_caption(r.nominal_ns),
                "elapsed / nominal",
                &[(label_or(&r.label, "samples"), &r.summary.relative)],
            )
            .into(),
        );
        if let Some(b) = &r.summary.buckets {
            blocks.push(
                histogram_chart(
                    &format!("{id}-buckets"),
                    "Elapsed time of each sample on the requested bucket edges, in % of samples."
                        .into(),
                    "elapsed (ms)",
                    &[(label_or(&r.label, "samples"), b)],
                )
                .into(),
            );
        }
        if !r.samples.is_empty() {
            blocks.push(
                scatter_chart(
                    &format!("{id}-scatter"),
                    &[(label_or(&r.label, "samples"), r)],
                )
                .into(),
            );
        }
    }
    blocks.extend(loop_tables(&r.summary));
    Section {
        id: id.to_string(),
        title: format!("Probe loop — {name}"),
        subtitle: with_machine(loop_summary(r), m),
        blocks,
    }
}

fn label_or(l: &str, d: &str) -> String {
    if l.is_empty() {
        d.to_string()
    } else {
        l.to_string()
    }
}

fn with_machine(mut s: String, m: &Machine) -> String {
    if let Some(l) = m.label() {
        s.push_str(&format!("; {l}"));
    }
    s
}

/// A `probe-compare` section: the histograms side by side (seed 004's development vs production table).
pub(crate) fn compare_section(r: &CompareReport, id: &str, name: &str, m: &Machine) -> Section {
    let mut blocks: Vec<Block> = Vec::new();
    if r.interrupted {
        let mut note = "The comparison was interrupted; its last run is partial".to_string();
        if !r.not_run.is_empty() {
            note = format!(
                "The comparison was interrupted; not run: {}",
                r.not_run.join(", ")
            );
        }
        blocks.push(Block::Note(format!("{note}.")));
    }
    // The side-by-side histogram straight from the report's rows (one series per column).
    let mut c = BarChart::new(
        format!("{id}-histograms"),
        if r.unit == "relative" {
            format!(
                "Elapsed time relative to the nominal {} ms, side by side per run, in % of samples.",
                num(nominal_ms(r.nominal_ns), 3)
            )
        } else {
            "Elapsed time on the requested bucket edges, side by side per run, in % of samples."
                .into()
        },
        if r.unit == "relative" {
            "elapsed / nominal"
        } else {
            "elapsed (ms)"
        },
        "% of samples",
    );
    c.categories = r.rows.iter().map(|row| row.label.clone()).collect();
    for (ci, col) in r.columns.iter().enumerate() {
        c.series.push(BarSeries {
            name: col.clone(),
            values: r
                .rows
                .iter()
                .map(|row| row.fractions.get(ci).map(|f| BarValue::new(f * 100.0)))
                .collect(),
        });
    }
    blocks.push(c.into());
    let runs: Vec<(String, &LoopReport)> = r
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            (
                r.columns
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| label_or(&run.label, "run")),
                run,
            )
        })
        .collect();
    if runs.iter().any(|(_, run)| !run.samples.is_empty()) {
        blocks.push(scatter_chart(&format!("{id}-scatter"), &runs).into());
    }
    let mut hdr: Vec<&str> = vec!["elapsed"];
    hdr.extend(r.columns.iter().map(String::as_str));
    let mut t = Table::new("% of samples per bucket", &hdr);
    for row in &r.rows {
        let mut cells = vec![row.label.clone()];
        cells.extend(
            row.fractions
                .iter()
                .map(|f| format!("{}%", num(f * 100.0, 1))),
        );
        t.row(cells);
    }
    blocks.push(t.into());
    let mut s = Table::new(
        "Per run",
        &[
            "run",
            "samples",
            "p50 ms",
            "p99 ms",
            "max ms",
            "mean invol.",
            "CPU share",
            "wait share",
        ],
    );
    for (label, run) in &runs {
        let sm = &run.summary;
        s.row(vec![
            label.clone(),
            sm.samples.to_string(),
            num(sm.elapsed_ms.p50, 3),
            num(sm.elapsed_ms.p99, 3),
            num(sm.elapsed_ms.max, 3),
            num(sm.involuntary.mean, 2),
            format!("{}%", num(sm.split.cpu_fraction * 100.0, 1)),
            sm.split
                .run_queue_wait_fraction
                .map_or("–".into(), |f| format!("{}%", num(f * 100.0, 1))),
        ]);
    }
    blocks.push(s.into());
    for (label, run) in &runs {
        if !run.summary.switch_cost.headline.is_empty() {
            blocks.push(Block::Note(format!(
                "{label}: {}",
                run.summary.switch_cost.headline
            )));
        }
    }
    Section {
        id: id.to_string(),
        title: format!("Probe comparison — {name}"),
        subtitle: with_machine(compare_summary(r), m),
        blocks,
    }
}

/// A `probe-pid` section from its intervals.
pub(crate) fn pid_section(r: &[PidReport], id: &str, name: &str) -> Section {
    let mut sw = XyChart::new(
        format!("{id}-switches"),
        "Context switches per second of the process (all threads), voluntary and involuntary, per interval.",
        "time (s)",
        "switches per second",
    );
    sw.series.push(XySeries::line(
        "voluntary",
        r.iter()
            .map(|x| Point::new(x.t_s, x.process.voluntary_per_s))
            .collect(),
    ));
    sw.series.push(XySeries::line(
        "involuntary",
        r.iter()
            .map(|x| Point::new(x.t_s, x.process.involuntary_per_s))
            .collect(),
    ));
    let mut blocks: Vec<Block> = vec![sw.into()];
    let waits: Vec<Point> = r
        .iter()
        .filter_map(|x| x.process.run_delay_ms_per_s.map(|w| Point::new(x.t_s, w)))
        .collect();
    if waits.is_empty() {
        blocks.push(Block::Note(
            "No run-queue wait was measured (the kernel has no schedstat).".into(),
        ));
    } else {
        let mut w = XyChart::new(
            format!("{id}-wait"),
            "Run-queue wait of the process's threads, milliseconds per second of wall time, per interval.",
            "time (s)",
            "run-queue wait (ms/s)",
        );
        w.series.push(XySeries::line("run-queue wait", waits));
        blocks.push(w.into());
    }
    let mut cpu = XyChart::new(
        format!("{id}-cpu"),
        "CPU use of the process (100% = one core), and the system's CPU pressure (PSI some) where readable.",
        "time (s)",
        "percent",
    );
    cpu.series.push(XySeries::line(
        "CPU %",
        r.iter()
            .map(|x| Point::new(x.t_s, x.process.cpu_pct))
            .collect(),
    ));
    let psi: Vec<Point> = r
        .iter()
        .filter_map(|x| x.psi.map(|p| Point::new(x.t_s, p.some_pct)))
        .collect();
    if !psi.is_empty() {
        cpu.series
            .push(XySeries::line("CPU pressure (some) %", psi).dashed());
    }
    blocks.push(cpu.into());
    let mut t = Table::new("Over the intervals", &["", "mean", "max"]);
    let stat = |f: &dyn Fn(&PidReport) -> Option<f64>| {
        let v: Vec<f64> = r.iter().filter_map(f).collect();
        if v.is_empty() {
            ("–".to_string(), "–".to_string())
        } else {
            (
                num(v.iter().sum::<f64>() / v.len() as f64, 2),
                num(v.iter().copied().fold(f64::NEG_INFINITY, f64::max), 2),
            )
        }
    };
    for (label, f) in [
        (
            "CPU %",
            &(|x: &PidReport| Some(x.process.cpu_pct)) as &dyn Fn(&PidReport) -> Option<f64>,
        ),
        ("voluntary switches/s", &|x: &PidReport| {
            Some(x.process.voluntary_per_s)
        }),
        ("involuntary switches/s", &|x: &PidReport| {
            Some(x.process.involuntary_per_s)
        }),
        ("run-queue wait ms/s", &|x: &PidReport| {
            x.process.run_delay_ms_per_s
        }),
        ("wait per switch µs", &|x: &PidReport| {
            x.process.run_delay_us_per_switch
        }),
        ("migrations/s", &|x: &PidReport| x.process.migrations_per_s),
    ] {
        let (mean, max) = stat(f);
        t.row(vec![label.to_string(), mean, max]);
    }
    blocks.push(t.into());
    if let Some(last) = r.last() {
        let mut th = Table::new(
            format!("Threads in the last interval (t = {} s)", num(last.t_s, 1)),
            &[
                "tid",
                "name",
                "policy",
                "nice",
                "CPU %",
                "vol/s",
                "invol/s",
                "wait ms/s",
            ],
        )
        .left(1)
        .left(2);
        let mut threads: Vec<_> = last.per_thread.iter().collect();
        threads.sort_by(|a, b| b.rates.cpu_pct.total_cmp(&a.rates.cpu_pct));
        for x in threads.iter().take(20) {
            th.row(vec![
                x.tid.to_string(),
                x.name.clone(),
                x.policy.clone().unwrap_or_else(|| "–".into()),
                x.nice.to_string(),
                num(x.rates.cpu_pct, 1),
                num(x.rates.voluntary_per_s, 1),
                num(x.rates.involuntary_per_s, 1),
                x.rates.run_delay_ms_per_s.map_or("–".into(), |v| num(v, 2)),
            ]);
        }
        blocks.push(th.into());
        if !last.unavailable.is_empty() {
            blocks.push(Block::Note(format!(
                "Not measurable here: {}.",
                last.unavailable.join(", ")
            )));
        }
        if last.interrupted {
            blocks.push(Block::Note(
                "Watching was interrupted (Ctrl-C); the last interval is shorter than the others."
                    .into(),
            ));
        }
    }
    Section {
        id: id.to_string(),
        title: format!("Probe pid — {name}"),
        subtitle: pid_summary(r),
        blocks,
    }
}
