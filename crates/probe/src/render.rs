//! Terminal text for the probe reports: the loop run (summary, histogram, time split, switch cost), the
//! side-by-side comparison table and the per-interval pid view.

use std::fmt::Write;

use crate::stats::{Distribution, Histogram};
use crate::{CompareReport, LoopReport, PidReport, Rates};

fn row(out: &mut String, name: &str, s: &Distribution, unit: &str) {
    let _ = writeln!(
        out,
        "  {name:<22} min {:>8.2}  mean {:>8.2}  p50 {:>8.2}  p90 {:>8.2}  p99 {:>8.2}  p99.9 {:>8.2}  max {:>8.2} {unit}",
        s.min, s.mean, s.p50, s.p90, s.p99, s.p999, s.max
    );
}

fn histogram(out: &mut String, title: &str, h: &Histogram) {
    let _ = writeln!(out, "{title}");
    let max = h.buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    for b in &h.buckets {
        let bar = "#".repeat((b.count * 40).div_ceil(max).min(40));
        let _ = writeln!(
            out,
            "  {:<14} {:>7} {:>6.1}%  {bar}",
            b.label,
            b.count,
            b.fraction * 100.0
        );
    }
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
    let mut out = String::new();
    let s = &r.summary;
    let cfg = &r.config;
    if r.interrupted {
        let _ = writeln!(
            out,
            "ordo probe loop: {} — partial report of the samples completed",
            interrupted_line(r)
        );
    }
    let _ = writeln!(
        out,
        "ordo probe loop: {} samples of {:.2} ms nominal work ({} iterations, {:.3} ns each)",
        s.samples,
        r.nominal_ns as f64 / 1e6,
        r.iterations,
        r.ns_per_iteration
    );
    let _ = writeln!(
        out,
        "  load: {}; cpu: {}; policy {}, nice {}, slice {}; footprint {} MB",
        cfg.load.describe(),
        match cfg.cpu {
            Some(c) => format!("pinned to {c}"),
            None => format!("any of {:?}", r.applied.cpus),
        },
        r.applied.policy,
        r.applied.nice,
        r.applied
            .slice_ns
            .map(|n| format!("{:.2} ms", n as f64 / 1e6))
            .unwrap_or_else(|| "default".into()),
        cfg.footprint_mb
    );
    out.push('\n');
    if s.samples == 0 {
        let _ = writeln!(out, "no sample was completed; nothing to summarise");
        for warn in &r.warnings {
            let _ = writeln!(out, "warning: {warn}");
        }
        return out;
    }
    row(&mut out, "elapsed", &s.elapsed_ms, "ms");
    row(&mut out, "CPU", &s.cpu_ms, "ms");
    if let Some(rd) = &s.run_delay_ms {
        row(&mut out, "run-queue wait", rd, "ms");
    }
    row(&mut out, "involuntary switches", &s.involuntary, "");
    row(&mut out, "voluntary switches", &s.voluntary, "");
    out.push('\n');
    histogram(
        &mut out,
        &format!(
            "elapsed relative to nominal ({:.2} ms):",
            r.nominal_ns as f64 / 1e6
        ),
        &s.relative,
    );
    if let Some(b) = &s.buckets {
        out.push('\n');
        histogram(&mut out, "elapsed (ms buckets):", b);
    }
    out.push('\n');
    let sp = &s.split;
    let _ = write!(
        out,
        "where the time went: CPU {:.1}%",
        sp.cpu_fraction * 100.0
    );
    match sp.run_queue_wait_fraction {
        Some(f) => {
            let _ = write!(out, ", run-queue wait {:.1}%", f * 100.0);
        }
        None => out.push_str(", run-queue wait unavailable"),
    }
    let _ = writeln!(out, ", other {:.1}%", sp.other_fraction * 100.0);
    let _ = writeln!(out, "involuntary switches:");
    for g in &s.switch_cost.groups {
        let _ = write!(
            out,
            "  {:<4} {:>7} samples  median {:>8.2} ms  ({:.2}× the median)",
            g.label, g.samples, g.median_elapsed_ms, g.ratio_to_median
        );
        if let Some(rd) = g.mean_run_delay_ms {
            let _ = write!(out, "  mean run-queue wait {rd:.2} ms");
        }
        out.push('\n');
    }
    if let Some(c) = s.switch_cost.mean_ms_per_involuntary_switch {
        let _ = writeln!(
            out,
            "  each involuntary switch added {c:.2} ms on average (elapsed − CPU, per switch)"
        );
    }
    let _ = writeln!(out, "{}", s.switch_cost.headline);
    let w = &s.slowest;
    let _ = write!(
        out,
        "slowest sample: elapsed {:.2} ms, CPU {:.2} ms (user {:.2} ms, system {:.2} ms), {} involuntary / {} voluntary switches",
        w.elapsed_ns as f64 / 1e6,
        w.cpu_ns as f64 / 1e6,
        w.user_ns as f64 / 1e6,
        w.sys_ns as f64 / 1e6,
        w.involuntary,
        w.voluntary
    );
    if let Some(rd) = w.run_delay_ns {
        let _ = write!(out, ", run-queue wait {:.2} ms", rd as f64 / 1e6);
    }
    out.push('\n');
    for warn in &r.warnings {
        let _ = writeln!(out, "warning: {warn}");
    }
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
    let mut out = String::new();
    if c.interrupted && c.runs.len() < 2 {
        let _ = writeln!(
            out,
            "ordo probe loop --compare: {}; the comparison did not run",
            compare_interrupted_line(c)
        );
        for r in &c.runs {
            let _ = writeln!(out, "\n[{}]", r.label);
            out.push_str(&loop_text(r));
        }
        return out;
    }
    if c.interrupted {
        let _ = writeln!(
            out,
            "ordo probe loop --compare: {}",
            compare_interrupted_line(c)
        );
    }
    let _ = writeln!(
        out,
        "ordo probe loop --compare: nominal {:.2} ms, {} samples per column",
        c.nominal_ns as f64 / 1e6,
        c.runs.first().map(|r| r.summary.samples).unwrap_or(0)
    );
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
    let w = headings
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(8)
        .max(9);
    let _ = write!(out, "{:<24}", "Time range");
    for col in &headings {
        let _ = write!(out, " {col:>w$}");
    }
    out.push('\n');
    for r in &c.rows {
        let _ = write!(out, "{:<24}", r.label);
        for f in &r.fractions {
            let _ = write!(out, " {:>w$}", format!("{:.1}%", f * 100.0));
        }
        out.push('\n');
    }
    let line = |out: &mut String, name: &str, f: &dyn Fn(&LoopReport) -> String| {
        let _ = write!(out, "{name:<24}");
        for r in &c.runs {
            let _ = write!(out, " {:>w$}", f(r));
        }
        out.push('\n');
    };
    line(&mut out, "p50 ms", &|r| {
        format!("{:.2}", r.summary.elapsed_ms.p50)
    });
    line(&mut out, "p99 ms", &|r| {
        format!("{:.2}", r.summary.elapsed_ms.p99)
    });
    line(&mut out, "max ms", &|r| {
        format!("{:.2}", r.summary.elapsed_ms.max)
    });
    line(&mut out, "involuntary sw./sample", &|r| {
        format!("{:.2}", r.summary.involuntary.mean)
    });
    line(
        &mut out,
        "run-queue wait share",
        &|r| match r.summary.split.run_queue_wait_fraction {
            Some(f) => format!("{:.1}%", f * 100.0),
            None => "n/a".into(),
        },
    );
    line(&mut out, "CPU share", &|r| {
        format!("{:.1}%", r.summary.split.cpu_fraction * 100.0)
    });
    for r in &c.runs {
        let _ = writeln!(out, "{}: {}", r.label, r.summary.switch_cost.headline);
        for w in &r.warnings {
            let _ = writeln!(out, "{}: warning: {w}", r.label);
        }
    }
    out
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

fn rates_cols(r: &Rates) -> String {
    format!(
        "{:>7.1} {:>9.1} {:>9.1} {:>10} {:>9} {:>8}",
        r.cpu_pct,
        r.voluntary_per_s,
        r.involuntary_per_s,
        opt(r.run_delay_ms_per_s, 2),
        opt(r.run_delay_us_per_switch, 1),
        opt(r.migrations_per_s, 1)
    )
}

/// One pid interval as text: a process line, the busiest threads, and PSI.
pub fn pid_text(r: &PidReport, max_threads: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
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
    );
    let _ = writeln!(
        out,
        "  {:<8} {:<16} {:>7} {:>9} {:>9} {:>10} {:>9} {:>8}",
        "tid", "name", "CPU%", "vol/s", "invol/s", "rq ms/s", "rq µs/sw", "migr/s"
    );
    let _ = writeln!(out, "  {:<8} {:<16} {}", "all", "", rates_cols(&r.process));
    for t in r.per_thread.iter().take(max_threads) {
        let name: String = t.name.chars().take(16).collect();
        let _ = writeln!(out, "  {:<8} {:<16} {}", t.tid, name, rates_cols(&t.rates));
    }
    if r.per_thread.len() > max_threads {
        let _ = writeln!(out, "  ({} more threads)", r.per_thread.len() - max_threads);
    }
    out
}
