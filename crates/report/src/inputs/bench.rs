//! `ordo bench --json` results (`ordo_results::bench::BenchReport`, `"kind": "bench"`): latency percentile curves on
//! log axes (per class for mixes; coordinated-omission corrected and uncorrected for open-loop runs),
//! throughput over time, and the ab-style summary, percentile, class, connection-time and server tables.

use ordo_results::bench::{BenchReport, Latency};

use crate::doc::{Block, Section, Table};
use crate::fmt::{civil_utc, num};
use crate::machine::Machine;
use crate::svg::{Point, ScaleKind, XyChart, XySeries};

/// "closed loop, 100 connections, keep-alive, GET http://…".
pub(crate) fn summary(r: &BenchReport) -> String {
    let c = &r.config;
    let mut s = match c.rate {
        Some(rate) if c.mode == "open" => format!("open loop at {} req/s", num(rate, 1)),
        _ => format!("{} loop", c.mode),
    };
    s.push_str(&format!(", {} connections", c.connections));
    s.push_str(if c.keepalive {
        ", keep-alive"
    } else {
        ", new connection per request"
    });
    if let Some(m) = &c.mix {
        s.push_str(&format!(", mix {m}"));
    }
    s.push_str(&format!(", {} {}", c.method, r.target));
    s
}

/// Plottable percentile points of a latency summary (100 is left to the tables: it is the maximum).
pub(crate) fn percentile_points(l: &Latency) -> Vec<Point> {
    l.percentiles
        .iter()
        .filter(|p| p.p < 100.0)
        .map(|p| Point::new(p.p, p.ms))
        .collect()
}

/// Latency-percentile series for one report, names prefixed by `prefix` (used by comparisons).
pub(crate) fn percentile_series(r: &BenchReport, prefix: &str) -> Vec<XySeries> {
    let join = |a: &str, b: &str| -> String {
        match (a.is_empty(), b.is_empty()) {
            (true, _) => b.to_string(),
            (_, true) => a.to_string(),
            _ => format!("{a} · {b}"),
        }
    };
    let mut out = Vec::new();
    let open = r.summary.corrected.is_some();
    if r.classes.len() > 1 {
        for (i, c) in r.classes.iter().enumerate() {
            match &c.corrected {
                Some(corr) => {
                    out.push(
                        XySeries::line(
                            join(prefix, &format!("{} corrected", c.name)),
                            percentile_points(corr),
                        )
                        .style(i),
                    );
                    out.push(
                        XySeries::line(
                            join(prefix, &format!("{} uncorrected", c.name)),
                            percentile_points(&c.latency),
                        )
                        .style(i)
                        .dashed(),
                    );
                }
                None => out.push(
                    XySeries::line(join(prefix, &c.name), percentile_points(&c.latency)).style(i),
                ),
            }
        }
    } else if open {
        if let Some(corr) = &r.summary.corrected {
            out.push(XySeries::line(
                join(prefix, "corrected"),
                percentile_points(corr),
            ));
        }
        out.push(
            XySeries::line(
                join(prefix, "uncorrected"),
                percentile_points(&r.summary.latency),
            )
            .dashed(),
        );
    } else {
        let name = if prefix.is_empty() {
            "all requests"
        } else {
            prefix
        };
        out.push(XySeries::line(name, percentile_points(&r.summary.latency)));
    }
    out
}

/// The percentile chart for one report.
pub(crate) fn percentile_chart(id: &str, r: &BenchReport) -> XyChart {
    let open = r.summary.corrected.is_some();
    let what = match (r.classes.len() > 1, open) {
        (true, true) => {
            "per class, corrected for coordinated omission (solid) and uncorrected (dashed)"
        }
        (true, false) => "per class",
        (false, true) => "corrected for coordinated omission (solid) and uncorrected (dashed)",
        (false, false) => "all requests",
    };
    let mut c = XyChart::new(
        id,
        format!(
            "Latency by percentile, {what}; both axes logarithmic, the maximum is in the table."
        ),
        "percentile",
        "latency (ms)",
    );
    c.x_scale = ScaleKind::Nines;
    c.y_scale = ScaleKind::Log;
    c.series = percentile_series(r, "");
    c
}

/// Completed (and failed) requests per second of the run; the last, partial second as a rate over the part
/// of it the run covered (or left out when that is under a quarter second), not as a drop.
pub(crate) fn throughput_chart(id: &str, r: &BenchReport) -> XyChart {
    let mut c = XyChart::new(
        id,
        "Throughput over time: completed requests per second in each second of the measured run (warm-up \
         excluded; the last, partial second scaled to a rate).",
        "time since start (s)",
        "requests per second",
    );
    let rates = r.timeline_rates();
    c.series.push(XySeries::line(
        "completed",
        rates
            .iter()
            .map(|t| Point::new(t.second as f64, t.complete_per_s))
            .collect(),
    ));
    if rates.iter().any(|t| t.failed_per_s > 0.0) {
        c.series.push(XySeries::line(
            "failed",
            rates
                .iter()
                .map(|t| Point::new(t.second as f64, t.failed_per_s))
                .collect(),
        ));
    }
    c
}

/// A ramp's load (`--stage`): each stage's line from where it started to its target, at the time it ran.
fn stage_ramp(r: &BenchReport) -> Vec<Point> {
    let mut ramp = Vec::new();
    for s in &r.stages {
        ramp.push(Point::new(s.start_s, s.from));
        ramp.push(Point::new(s.start_s + s.duration_s, s.target));
    }
    ramp
}

/// The mean offered rate of a ramp over the second starting at `t` (over its covered part when the run
/// ends within it), req/s: the stages' piecewise-linear rate integrated in small steps.
fn offered_in_second(r: &BenchReport, t: f64) -> f64 {
    let end = r
        .stages
        .last()
        .map_or(t, |s| s.start_s + s.duration_s)
        .min(t + 1.0);
    if end <= t {
        return 0.0;
    }
    let at = |x: f64| {
        r.stages
            .iter()
            .find(|s| x >= s.start_s && x < s.start_s + s.duration_s)
            .map_or(0.0, |s| {
                s.from + (s.target - s.from) * (x - s.start_s) / s.duration_s.max(f64::MIN_POSITIVE)
            })
    };
    const STEPS: usize = 1000;
    let dx = (end - t) / STEPS as f64;
    (0..STEPS)
        .map(|i| at(t + (i as f64 + 0.5) * dx))
        .sum::<f64>()
        * dx
        / (end - t)
}

/// A ramp (`--stage`) as charts, one unit per axis: an open loop's offered rate goes on the throughput chart
/// (`throughput`, same unit, dashed); a closed loop's connections get a chart of their own. Then the p50/p99
/// of the requests that ended in each stage, drawn at the stage's middle.
pub(crate) fn stage_charts(
    id: &str,
    r: &BenchReport,
    throughput: Option<&mut XyChart>,
) -> Vec<XyChart> {
    let Some(first) = r.stages.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match throughput {
        Some(t) if first.unit == "req/s" => {
            // the offered rate averaged over each second the completed rate covers, so both are read
            // at the same x (a second's bucket, drawn at its start)
            let pts = t
                .series
                .first()
                .map(|c| {
                    c.points
                        .iter()
                        .map(|p| Point::new(p.x, offered_in_second(r, p.x)))
                        .collect()
                })
                .unwrap_or_default();
            t.series
                .push(XySeries::line("offered (stages)", pts).dashed());
            t.caption
                .push_str(" Dashed: the rate the stages offered, averaged over each second.");
        }
        _ => {
            let mut load = XyChart::new(
                format!("{id}-load"),
                format!(
                    "Stages: the load each stage ramped through ({}).",
                    first.unit
                ),
                "time since start (s)",
                first.unit.clone(),
            );
            load.series
                .push(XySeries::line(first.unit.clone(), stage_ramp(r)));
            out.push(load);
        }
    }
    let mid = |s: &ordo_results::bench::StageReport| s.start_s + s.duration_s / 2.0;
    let mut lat = XyChart::new(
        format!("{id}-stage-latency"),
        "Stages: latency of the requests that ended in each stage (from when due in an open loop), at the \
         stage's middle.",
        "time since start (s)",
        "latency (ms)",
    );
    for p in [50.0, 99.0] {
        let pts: Vec<Point> = r
            .stages
            .iter()
            .filter_map(|s| {
                let l = s.corrected.as_ref().unwrap_or(&s.latency);
                (l.count > 0).then(|| l.at(p).map(|v| Point::new(mid(s), v)))?
            })
            .collect();
        if !pts.is_empty() {
            lat.series.push(XySeries::line(format!("p{p}"), pts));
        }
    }
    if !lat.series.is_empty() {
        out.push(lat);
    }
    out
}

/// The stages as a table, as the terminal report prints them.
fn stage_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "Stages (requests by the stage they ended in; latency in ms)",
        &[
            "stage", "time (s)", "load", "complete", "failed", "req/s", "p50", "p99", "max",
        ],
    )
    .left(2);
    for s in &r.stages {
        let l = s.corrected.as_ref().unwrap_or(&s.latency);
        let pct = |p: f64| l.at(p).map_or("–".into(), |v| num(v, 3));
        t.row(vec![
            s.stage.to_string(),
            format!("{}–{}", num(s.start_s, 1), num(s.start_s + s.duration_s, 1)),
            format!("{} → {} {}", num(s.from, 0), num(s.target, 0), s.unit),
            s.complete.to_string(),
            s.failed.to_string(),
            num(s.rps, 2),
            pct(50.0),
            pct(99.0),
            if l.count > 0 {
                num(l.max_ms, 3)
            } else {
                "–".into()
            },
        ]);
    }
    t
}

/// ab's report block: the server and document (when the report recorded them), the concurrency, then the
/// totals and rates, in ab's order.
fn summary_table(r: &BenchReport) -> Table {
    let s = &r.summary;
    let c = &r.config;
    let mut t = Table::new("Summary", &["", "value"]);
    let mut row = |k: &str, v: String| t.row(vec![k.to_string(), v]);
    if let Some(d) = &r.document {
        row(
            "Server Software",
            d.server_software.clone().unwrap_or_else(|| "–".into()),
        );
        row("Server Hostname", d.hostname.clone());
        row("Server Port", d.port.to_string());
        row("Document Path", d.path.clone());
        row(
            "Document Length",
            d.length
                .map_or("(no complete response)".into(), |n| format!("{n} bytes")),
        );
    }
    row(
        "Concurrency Level",
        match (&c.protocol, c.streams) {
            (Some(p), Some(n)) => format!(
                "{} ({} connections × {n} {p} streams)",
                c.connections * n,
                c.connections
            ),
            _ => c.connections.to_string(),
        },
    );
    row("Time taken for tests (s)", num(r.elapsed_s, 3));
    row("Complete requests", s.complete.to_string());
    row(
        "Failed requests",
        format!(
            "{} (connect {}, receive {}, length {}, exceptions {}, timeouts {})",
            s.failed.total,
            s.failed.connect,
            s.failed.receive,
            s.failed.length,
            s.failed.exceptions,
            s.failed.timeouts
        ),
    );
    for e in &s.connection_errors {
        row("Connection failed", format!("{} × {}", e.count, e.reason));
    }
    row("Non-2xx responses", s.non_2xx.to_string());
    row("Total transferred (bytes)", s.total_bytes.to_string());
    row("HTML transferred (bytes)", s.body_bytes.to_string());
    row("Requests per second", num(s.rps, 2));
    if let Some(rate) = s.target_rate {
        row("Target rate (req/s)", num(rate, 2));
    }
    row("Time per request (ms, mean)", num(s.time_per_request_ms, 3));
    row(
        "Time per request (ms, mean, across all)",
        num(s.time_per_request_all_ms, 3),
    );
    row("Transfer rate (KB/s)", num(s.transfer_kbytes_per_s, 2));
    row("Connections opened", s.connections_opened.to_string());
    t
}

fn percentile_table(r: &BenchReport) -> Table {
    let corr = r.summary.corrected.as_ref();
    let mut t = if corr.is_some() {
        Table::new(
            "Latency percentiles (ms)",
            &["percentile", "corrected", "uncorrected"],
        )
    } else {
        Table::new("Latency percentiles (ms)", &["percentile", "latency"])
    };
    for p in &r.summary.latency.percentiles {
        let mut row = vec![format!("{}%", num(p.p, 2)), num(p.ms, 3)];
        if let Some(c) = corr {
            row.insert(1, c.at(p.p).map_or("–".into(), |v| num(v, 3)));
        }
        t.row(row);
    }
    t
}

fn class_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "Per class",
        &[
            "class", "share", "realised", "complete", "failed", "req/s", "mean ms", "p50 ms",
            "p95 ms", "p99 ms", "max ms",
        ],
    );
    for c in &r.classes {
        let l = c.corrected.as_ref().unwrap_or(&c.latency);
        let at = |p: f64| l.at(p).map_or("–".into(), |v| num(v, 3));
        t.row(vec![
            c.name.clone(),
            format!("{}%", num(c.share * 100.0, 1)),
            format!("{}%", num(c.request_share * 100.0, 2)),
            c.complete.to_string(),
            c.failed.total.to_string(),
            num(c.rps, 2),
            num(l.mean_ms, 3),
            at(50.0),
            at(95.0),
            at(99.0),
            num(l.max_ms, 3),
        ]);
    }
    t
}

fn connection_table(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "Connection Times (ms)",
        &["", "min", "mean", "[+/-sd]", "median", "max"],
    );
    let ct = &r.connection_times;
    for (name, row) in [
        ("Connect", &ct.connect),
        ("Processing", &ct.processing),
        ("Waiting", &ct.waiting),
        ("Total", &ct.total),
    ] {
        t.row(vec![
            name.to_string(),
            num(row.min_ms, 3),
            num(row.mean_ms, 3),
            num(row.sd_ms, 3),
            num(row.median_ms, 3),
            num(row.max_ms, 3),
        ]);
    }
    t
}

fn server_table(r: &BenchReport) -> Option<Table> {
    let s = r.server.as_ref()?;
    let mut t = Table::new(
        format!("Server process {} ({} threads)", s.pid, s.threads),
        &["", "total", "per request"],
    );
    t.row(vec![
        "CPU".into(),
        format!("{} s ({} cores)", num(s.cpu_s, 3), num(s.cpu_cores, 2)),
        format!("{} µs", num(s.per_request.cpu_us, 2)),
    ]);
    t.row(vec![
        "voluntary switches".into(),
        s.voluntary_switches.to_string(),
        num(s.per_request.voluntary_switches, 3),
    ]);
    t.row(vec![
        "involuntary switches".into(),
        s.involuntary_switches.to_string(),
        num(s.per_request.involuntary_switches, 3),
    ]);
    t.row(vec![
        "run-queue wait".into(),
        s.run_delay_s
            .map_or("–".into(), |v| format!("{} s", num(v, 4))),
        s.per_request
            .run_delay_us
            .map_or("–".into(), |v| format!("{} µs", num(v, 2))),
    ]);
    Some(t)
}

/// A merged result's runs, one row per generator machine (what each measured alone); None for one run.
fn merged_table(r: &BenchReport) -> Option<Table> {
    if r.merged.is_empty() {
        return None;
    }
    let mut t = Table::new(
        format!(
            "Merged from {} runs (percentiles above are exact: from the summed histograms)",
            r.merged.len()
        ),
        &[
            "run",
            "machine",
            "started",
            "seconds",
            "connections",
            "complete",
            "failed",
            "req/s",
            "p50",
            "p99",
        ],
    )
    .left(0)
    .left(1)
    .left(2);
    for m in &r.merged {
        let machine = m
            .fingerprint
            .as_ref()
            .and_then(|f| serde_json::to_value(f).ok())
            .map(|v| Machine::from_value(Some(&v)))
            .and_then(|m| m.label())
            .unwrap_or_else(|| "–".into());
        t.row(vec![
            m.source.clone(),
            machine,
            civil_utc(m.started_unix_ms / 1000),
            num(m.elapsed_s, 2),
            m.connections.to_string(),
            m.complete.to_string(),
            m.failed.to_string(),
            num(m.rps, 1),
            format!("{} ms", num(m.p50_ms, 3)),
            format!("{} ms", num(m.p99_ms, 3)),
        ]);
    }
    Some(t)
}

/// The bench result's section.
pub(crate) fn section(r: &BenchReport, id: &str, name: &str, m: &Machine) -> Section {
    let mut sub = summary(r);
    if r.started_unix_ms > 0 {
        sub.push_str(&format!(
            "; started {}",
            civil_utc(r.started_unix_ms / 1000)
        ));
    }
    if !r.merged.is_empty() {
        sub.push_str(&format!("; merged from {} runs", r.merged.len()));
    } else if let Some(l) = m.label() {
        sub.push_str(&format!("; {l}"));
    }
    let mut blocks: Vec<Block> = Vec::new();
    for w in &r.warnings {
        blocks.push(Block::Note(w.clone()));
    }
    if let Some(t) = merged_table(r) {
        blocks.push(t.into());
    }
    if r.interrupted {
        blocks.push(Block::Note(
            "The run was interrupted; the figures cover the requests that completed.".into(),
        ));
    }
    if r.summary.latency.count == 0 {
        blocks.push(Block::Note(
            "No request completed, so there is no latency to plot.".into(),
        ));
    } else {
        blocks.push(percentile_chart(&format!("{id}-percentiles"), r).into());
    }
    let mut throughput =
        (!r.timeline_rates().is_empty()).then(|| throughput_chart(&format!("{id}-throughput"), r));
    let stages = stage_charts(id, r, throughput.as_mut());
    if let Some(t) = throughput {
        blocks.push(t.into());
    }
    for c in stages {
        blocks.push(c.into());
    }
    blocks.push(summary_table(r).left(1).into());
    blocks.push(percentile_table(r).into());
    if !r.stages.is_empty() {
        blocks.push(stage_table(r).into());
    }
    if r.classes.len() > 1 {
        blocks.push(class_table(r).into());
    }
    blocks.push(connection_table(r).into());
    if let Some(t) = server_table(r) {
        blocks.push(t.into());
    }
    Section {
        id: id.to_string(),
        title: format!("Bench — {name}"),
        subtitle: sub,
        blocks,
    }
}
