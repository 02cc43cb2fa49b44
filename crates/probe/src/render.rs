//! Terminal text for the probe reports: the loop run (summary, histogram, time split, switch cost), the
//! side-by-side comparison table and the per-interval pid view, each built as an ordo-doc document and
//! rendered by its terminal renderer.

use ordo_doc::{Align, Block, Document, KeyValue, Table};

use crate::stats::{Distribution, Histogram};
use crate::{CompareReport, LoopReport, LoopSummary, PidReport, Rates};

/// The distributions of a loop run, a row each.
fn distributions(s: &LoopSummary) -> Table {
    let mut t = Table::new(
        "",
        &["", "min", "mean", "p50", "p90", "p99", "p99.9", "max"],
    );
    let mut row = |name: &str, d: &Distribution| {
        t.row(
            std::iter::once(name.to_string())
                .chain(
                    [d.min, d.mean, d.p50, d.p90, d.p99, d.p999, d.max]
                        .iter()
                        .map(|v| format!("{v:.2}")),
                )
                .collect(),
        );
    };
    row("elapsed ms", &s.elapsed_ms);
    row("CPU ms", &s.cpu_ms);
    if let Some(rd) = &s.run_delay_ms {
        row("run-queue wait ms", rd);
    }
    row("involuntary switches", &s.involuntary);
    row("voluntary switches", &s.voluntary);
    t
}

/// A histogram: a row per bucket with its count, share and a bar of up to 40 `#`.
fn histogram(title: String, h: &Histogram) -> Table {
    let mut t = Table::headless(
        title,
        &[Align::Left, Align::Right, Align::Right, Align::Left],
    )
    .columns(2, &[14, 7, 7]);
    let max = h.buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    for b in &h.buckets {
        t.row(vec![
            b.label.clone(),
            b.count.to_string(),
            format!("{:.1}%", b.fraction * 100.0),
            "#".repeat((b.count * 40).div_ceil(max).min(40)),
        ]);
    }
    t
}

/// "interrupted after 12 of 1000 samples" for a partial run.
pub fn interrupted_line(r: &LoopReport) -> String {
    format!(
        "interrupted after {} of {} samples",
        r.summary.samples, r.config.samples
    )
}

/// A loop run as text.
pub fn loop_text(r: &LoopReport) -> String {
    ordo_doc::text::render(&Document::of(loop_blocks(r)))
}

/// A loop run as blocks: what was run, the distributions, histograms, time split and switch cost.
fn loop_blocks(r: &LoopReport) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let s = &r.summary;
    let cfg = &r.config;
    if r.interrupted {
        out.push(Block::Note(format!(
            "ordo probe loop: {} — partial report of the samples completed",
            interrupted_line(r)
        )));
    }
    let mut run = KeyValue::new(format!(
        "ordo probe loop: {} samples of {:.2} ms nominal work ({} iterations, {:.3} ns each)",
        s.samples,
        r.nominal_ns as f64 / 1e6,
        r.iterations,
        r.ns_per_iteration
    ))
    .indent(2);
    run.pair("load", cfg.load.describe());
    run.pair(
        "cpu",
        match cfg.cpu {
            Some(c) => format!("pinned to {c}"),
            None => format!("any of {:?}", r.applied.cpus),
        },
    );
    run.pair(
        "scheduling",
        format!(
            "policy {}, nice {}, slice {}",
            r.applied.policy,
            r.applied.nice,
            r.applied
                .slice_ns
                .map(|n| format!("{:.2} ms", n as f64 / 1e6))
                .unwrap_or_else(|| "default".into())
        ),
    );
    run.pair("footprint", format!("{} MB", cfg.footprint_mb));
    out.push(run.into());
    let warnings = || {
        let lines: Vec<String> = r.warnings.iter().map(|w| format!("warning: {w}")).collect();
        (!lines.is_empty()).then(|| Block::Note(lines.join("\n")))
    };
    if s.samples == 0 {
        out.push(Block::Note(
            "no sample was completed; nothing to summarise".into(),
        ));
        out.extend(warnings());
        return out;
    }
    out.push(distributions(s).into());
    out.push(
        histogram(
            format!(
                "elapsed relative to nominal ({:.2} ms):",
                r.nominal_ns as f64 / 1e6
            ),
            &s.relative,
        )
        .into(),
    );
    if let Some(b) = &s.buckets {
        out.push(histogram("elapsed (ms buckets):".into(), b).into());
    }
    let sp = &s.split;
    out.push(Block::Note(format!(
        "where the time went: CPU {:.1}%, {}, other {:.1}%",
        sp.cpu_fraction * 100.0,
        match sp.run_queue_wait_fraction {
            Some(f) => format!("run-queue wait {:.1}%", f * 100.0),
            None => "run-queue wait unavailable".into(),
        },
        sp.other_fraction * 100.0
    )));
    let groups = &s.switch_cost.groups;
    let waits = groups.iter().any(|g| g.mean_run_delay_ms.is_some());
    let mut headers = vec!["switches", "samples", "median ms", "× the median"];
    if waits {
        headers.push("mean run-queue wait ms");
    }
    let mut t = Table::new("involuntary switches:", &headers);
    for g in groups {
        let mut row = vec![
            g.label.clone(),
            g.samples.to_string(),
            format!("{:.2}", g.median_elapsed_ms),
            format!("{:.2}×", g.ratio_to_median),
        ];
        if waits {
            row.push(
                g.mean_run_delay_ms
                    .map_or_else(|| "-".into(), |rd| format!("{rd:.2}")),
            );
        }
        t.row(row);
    }
    out.push(t.into());
    let mut findings = Vec::new();
    if let Some(c) = s.switch_cost.mean_ms_per_involuntary_switch {
        findings.push(format!(
            "each involuntary switch added {c:.2} ms on average (elapsed − CPU, per switch)"
        ));
    }
    findings.push(s.switch_cost.headline.clone());
    let w = &s.slowest;
    findings.push(format!(
        "slowest sample: elapsed {:.2} ms, CPU {:.2} ms (user {:.2} ms, system {:.2} ms), {} involuntary / {} voluntary switches{}",
        w.elapsed_ns as f64 / 1e6,
        w.cpu_ns as f64 / 1e6,
        w.user_ns as f64 / 1e6,
        w.sys_ns as f64 / 1e6,
        w.involuntary,
        w.voluntary,
        w.run_delay_ns
            .map(|rd| format!(", run-queue wait {:.2} ms", rd as f64 / 1e6))
            .unwrap_or_default()
    ));
    out.push(Block::Note(findings.join("\n")));
    out.extend(warnings());
    out
}

/// What an interrupted comparison has and lacks, one line.
fn compare_interrupted_line(c: &CompareReport) -> String {
    let mut parts = Vec::new();
    if let Some(r) = c.runs.iter().find(|r| r.interrupted) {
        parts.push(format!("{}: {}", r.label, interrupted_line(r)));
    }
    if !c.not_run.is_empty() {
        parts.push(format!("not run: {}", c.not_run.join(", ")));
    }
    format!("interrupted — {}", parts.join("; "))
}

/// A comparison as a side-by-side table. An interrupted one marks its partial column; with fewer than two
/// runs it says the comparison did not run and shows the one run in full.
pub fn compare_text(c: &CompareReport) -> String {
    let mut out: Vec<Block> = Vec::new();
    if c.interrupted && c.runs.len() < 2 {
        out.push(Block::Note(format!(
            "ordo probe loop --compare: {}; the comparison did not run",
            compare_interrupted_line(c)
        )));
        for r in &c.runs {
            out.push(Block::Note(format!("[{}]", r.label)));
            out.extend(loop_blocks(r));
        }
        return ordo_doc::text::render(&Document::of(out));
    }
    if c.interrupted {
        out.push(Block::Note(format!(
            "ordo probe loop --compare: {}",
            compare_interrupted_line(c)
        )));
    }
    // A partial run's column says so in its heading.
    let headings: Vec<String> = c
        .columns
        .iter()
        .enumerate()
        .map(|(i, col)| match c.runs.get(i) {
            Some(r) if r.interrupted => format!("{col} (partial, {} samples)", r.summary.samples),
            _ => col.clone(),
        })
        .collect();
    // Every run's column as wide as the widest heading, so the columns read as one grid.
    let w = headings
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(8)
        .max(9);
    let mut widths = vec![24];
    widths.extend(headings.iter().map(|_| w));
    let headers: Vec<&str> = std::iter::once("Time range")
        .chain(headings.iter().map(String::as_str))
        .collect();
    let mut t = Table::new(
        format!(
            "ordo probe loop --compare: nominal {:.2} ms, {} samples per column",
            c.nominal_ns as f64 / 1e6,
            c.runs.first().map(|r| r.summary.samples).unwrap_or(0)
        ),
        &headers,
    )
    .columns(0, &widths);
    for r in &c.rows {
        t.row(
            std::iter::once(r.label.clone())
                .chain(r.fractions.iter().map(|f| format!("{:.1}%", f * 100.0)))
                .collect(),
        );
    }
    let mut line = |name: &str, f: &dyn Fn(&LoopReport) -> String| {
        t.row(
            std::iter::once(name.to_string())
                .chain(c.runs.iter().map(f))
                .collect(),
        );
    };
    line("p50 ms", &|r| format!("{:.2}", r.summary.elapsed_ms.p50));
    line("p99 ms", &|r| format!("{:.2}", r.summary.elapsed_ms.p99));
    line("max ms", &|r| format!("{:.2}", r.summary.elapsed_ms.max));
    line("involuntary sw./sample", &|r| {
        format!("{:.2}", r.summary.involuntary.mean)
    });
    line(
        "run-queue wait share",
        &|r| match r.summary.split.run_queue_wait_fraction {
            Some(f) => format!("{:.1}%", f * 100.0),
            None => "n/a".into(),
        },
    );
    line("CPU share", &|r| {
        format!("{:.1}%", r.summary.split.cpu_fraction * 100.0)
    });
    out.push(t.into());
    let mut findings = Vec::new();
    for r in &c.runs {
        findings.push(format!("{}: {}", r.label, r.summary.switch_cost.headline));
        for w in &r.warnings {
            findings.push(format!("{}: warning: {w}", r.label));
        }
    }
    if !findings.is_empty() {
        out.push(Block::Note(findings.join("\n")));
    }
    ordo_doc::text::render(&Document::of(out))
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// A row's rate cells: CPU %, switches per second, run-queue wait, migrations.
fn rates_cells(name: String, tid: String, r: &Rates) -> Vec<String> {
    vec![
        tid,
        name,
        format!("{:.1}", r.cpu_pct),
        format!("{:.1}", r.voluntary_per_s),
        format!("{:.1}", r.involuntary_per_s),
        opt(r.run_delay_ms_per_s, 2),
        opt(r.run_delay_us_per_switch, 1),
        opt(r.migrations_per_s, 1),
    ]
}

/// One pid interval as text: a process line, the busiest threads, and PSI.
pub fn pid_text(r: &PidReport, max_threads: usize) -> String {
    let mut t = Table::new(
        format!(
            "[{:>7.1}s] pid {} ({}), {} thread{}{}",
            r.t_s,
            r.pid,
            r.name,
            r.threads,
            if r.threads == 1 { "" } else { "s" },
            match &r.psi {
                Some(p) => format!(
                    "; system CPU pressure: some {:.1}% this interval (avg10 {:.2}%)",
                    p.some_pct, p.some_avg10
                ),
                None => String::new(),
            }
        ),
        &[
            "tid",
            "name",
            "CPU%",
            "vol/s",
            "invol/s",
            "rq ms/s",
            "rq µs/sw",
            "migr/s",
        ],
    )
    .left(1)
    .columns(2, &[8, 16, 7, 9, 9, 10, 9, 8]);
    t.row(rates_cells(String::new(), "all".into(), &r.process));
    for th in r.per_thread.iter().take(max_threads) {
        t.row(rates_cells(
            th.name.chars().take(16).collect(),
            th.tid.to_string(),
            &th.rates,
        ));
    }
    let mut blocks: Vec<Block> = vec![t.into()];
    if r.per_thread.len() > max_threads {
        blocks.push(Block::Note(format!(
            "({} more threads)",
            r.per_thread.len() - max_threads
        )));
    }
    ordo_doc::text::render(&Document::of(blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One interval of `ordo probe pid`: the process line is the table's title, the busiest threads its rows
    /// in fixed columns, and the threads left out a note.
    #[test]
    fn pid_interval_as_a_table() {
        let rates = r#""cpu_pct":65.03,"user_pct":63.9,"sys_pct":0.0,"voluntary_per_s":0.0,"involuntary_per_s":119.81,"run_delay_ms_per_s":349.704,"run_delay_us_per_switch":2918.76,"migrations_per_s":null"#;
        let json = format!(
            r#"{{"kind":"probe-pid","version":1,"pid":3371,"name":"sh","seq":2,"t_s":1.0016,"interval_s":0.5,"threads":2,
            "process":{{{rates}}},
            "delta":{{"at_ns":1,"threads":2,"utime_ns":0,"stime_ns":0,"voluntary_switches":0,"involuntary_switches":60,"run_delay_ns":0,"timeslices":60,"cpu_ns":0,"migrations":0,"rss_kb":1644,"schedstat":true}},
            "per_thread":[
              {{"tid":3371,"name":"a-thread-name-longer-than-16","state":"R","processor":0,"policy":"other","nice":0,{rates}}},
              {{"tid":3372,"name":"b","state":"S","processor":0,"policy":"other","nice":0,{rates}}}],
            "psi":null,"unavailable":[]}}"#
        );
        let r: PidReport = serde_json::from_str(&json).unwrap();
        assert_eq!(
            pid_text(&r, 1),
            "[    1.0s] pid 3371 (sh), 2 threads\n\
             \x20 tid      name                CPU%     vol/s   invol/s    rq ms/s  rq µs/sw   migr/s\n\
             \x20 all                          65.0       0.0     119.8     349.70    2918.8        -\n\
             \x20 3371     a-thread-name-lo    65.0       0.0     119.8     349.70    2918.8        -\n\
             \n\
             (1 more threads)\n"
        );
    }
}
