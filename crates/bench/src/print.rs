//! Printers: the ab-style text report, the per-class table, the throughput timeline (built as an ordo-doc
//! document and rendered by its terminal renderer), wrk's brief summary and CSV. They only read a finished
//! [`BenchReport`].

use std::fmt::Write as _;

use ordo_doc::{Align, Block, Document, KeyValue, Table};

use crate::report::{BenchReport, Latency, PERCENTILES, TimeRow};

/// The human report (ab's layout, then ordo's additions).
pub fn text(r: &BenchReport) -> String {
    ordo_doc::text::render(&document(r))
}

/// The human report as a document: ab's blocks, then ordo's tables.
pub fn document(r: &BenchReport) -> Document {
    let mut blocks = merged(r);
    blocks.push(header(r).into());
    blocks.extend(ab_document(r).into_iter().map(Block::from));
    blocks.push(totals(r).into());
    blocks.push(connection_times(r).into());
    blocks.push(percentiles(r).into());
    blocks.extend(stages(r).map(Block::from));
    blocks.extend(classes(r));
    blocks.extend(status_and_timeline(r));
    blocks.extend(server(r).map(Block::from));
    Document::of(blocks)
}

/// p`q` of a latency's percentiles (0 where it was not computed).
fn at(l: &Latency, q: f64) -> f64 {
    l.percentiles
        .iter()
        .find(|p| p.p == q)
        .map_or(0.0, |p| p.ms)
}

/// A ramp's stages: a row each, with the requests that ended in it.
fn stages(r: &BenchReport) -> Option<Table> {
    if r.stages.is_empty() {
        return None;
    }
    let corrected = r.stages.iter().any(|s| s.corrected.is_some());
    let title = format!(
        "Stages (requests by the stage they ended in; latency in ms{})",
        if corrected {
            ", from when each request was due"
        } else {
            ""
        }
    );
    let mut t = Table::new(
        title,
        &[
            "stage", "time (s)", "load", "complete", "failed", "req/s", "p50", "p99", "max",
        ],
    )
    .right(0)
    .columns(0, &[5, 15, 24, 9, 7, 10, 9, 9, 9]);
    for s in &r.stages {
        let l = s.corrected.as_ref().unwrap_or(&s.latency);
        t.row(vec![
            s.stage.to_string(),
            format!("{:.1}–{:.1}", s.start_s, s.start_s + s.duration_s),
            format!("{} → {} {}", trim_num(s.from), trim_num(s.target), s.unit),
            s.complete.to_string(),
            s.failed.to_string(),
            format!("{:.2}", s.rps),
            format!("{:.3}", at(l, 50.0)),
            format!("{:.3}", at(l, 99.0)),
            format!("{:.3}", l.max_ms),
        ]);
    }
    Some(t)
}

/// A number without a needless fraction: 50, 2.5.
fn trim_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}

/// A merged report (`ordo report merge`): its warnings, then one line per run merged.
fn merged(r: &BenchReport) -> Vec<Block> {
    let mut out = Vec::new();
    if !r.warnings.is_empty() {
        out.push(Block::Note(r.warnings.join("\n")));
    }
    if r.merged.is_empty() {
        return out;
    }
    let mut kv = KeyValue::new(format!(
        "Merged from {} runs (percentiles from their summed histograms):",
        r.merged.len()
    ))
    .indent(2)
    .width(0);
    for m in &r.merged {
        let host = m
            .fingerprint
            .as_ref()
            .map(|f| f.hostname.as_str())
            .filter(|h| !h.is_empty())
            .unwrap_or("unknown machine");
        kv.pair(
            m.source.clone(),
            format!(
                "{host}, {} connections, {:.2} s, {} complete, {} failed, {:.2} req/s, p50 {:.3} ms, p99 {:.3} ms",
                m.connections, m.elapsed_s, m.complete, m.failed, m.rps, m.p50_ms, m.p99_ms
            ),
        );
    }
    out.push(kv.into());
    out
}

/// wrk's short summary (`--brief`): what was run, then requests and rate, latency, errors and transfer, a
/// line each. In an open loop the latency line is the one measured from when each request was due, and a
/// second line gives the uncorrected one.
pub fn brief(r: &BenchReport) -> String {
    let mut blocks = merged(r);
    blocks.push(brief_summary(r).into());
    ordo_doc::text::render(&Document::of(blocks))
}

/// The lines of [`brief`] after a merged report's preamble: a title and values from column 15.
fn brief_summary(r: &BenchReport) -> KeyValue {
    let c = &r.config;
    let s = &r.summary;
    let mode = match c.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".to_string(),
    };
    let proto = match (&c.protocol, c.streams) {
        (Some(p), Some(n)) => format!(", {p} × {n} stream{}", if n == 1 { "" } else { "s" }),
        _ => String::new(),
    };
    let mut kv = KeyValue::new(format!(
        "{}: {} connection{}{proto}, {mode}, {:.2} s{}",
        r.target,
        c.connections,
        if c.connections == 1 { "" } else { "s" },
        r.elapsed_s,
        if r.interrupted { " (interrupted)" } else { "" }
    ))
    .indent(2)
    .width(13);
    kv.pair(
        "Requests",
        format!("{} complete, {:.2} req/s", s.complete, s.rps),
    );
    let lat = |l: &Latency| {
        if l.count == 0 {
            "no complete request".to_string()
        } else {
            format!(
                "avg {}  p50 {}  p99 {}  max {}",
                fmt_ms(l.mean_ms),
                fmt_ms(l.at(50.0).unwrap_or(0.0)),
                fmt_ms(l.at(99.0).unwrap_or(0.0)),
                fmt_ms(l.max_ms)
            )
        }
    };
    match &s.corrected {
        Some(cor) => {
            kv.pair("Latency", format!("{}  (from when due)", lat(cor)));
            kv.pair(
                "Uncorrected",
                format!("{}  (from when sent)", lat(&s.latency)),
            );
        }
        None => kv.pair("Latency", lat(&s.latency)),
    }
    let f = &s.failed;
    let measured = s.complete + f.total;
    let errors = f.total + s.non_2xx;
    if errors == 0 {
        kv.pair("Errors", "none");
    } else {
        let mut kinds = Vec::new();
        for (n, name) in [
            (f.connect, "connect"),
            (f.receive, "receive"),
            (f.length, "length"),
            (f.exceptions, "exceptions"),
        ] {
            if n > 0 {
                kinds.push(format!("{name} {n}"));
            }
        }
        if f.timeouts > 0 {
            kinds.push(format!("incl. {} timeouts", f.timeouts));
        }
        kv.pair(
            "Errors",
            format!(
                "{errors} ({:.2}%): {} failed{}, {} non-2xx",
                errors as f64 * 100.0 / measured.max(1) as f64,
                f.total,
                if kinds.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", kinds.join(", "))
                },
                s.non_2xx
            ),
        );
    }
    for e in &s.connection_errors {
        kv.pair("Connection failed", format!("{} × {}", e.count, e.reason));
    }
    kv.pair(
        "Transfer",
        format!(
            "{} received, {}/s",
            fmt_bytes(s.total_bytes as f64),
            fmt_bytes(s.transfer_kbytes_per_s * 1024.0)
        ),
    );
    for st in &r.stages {
        let l = st.corrected.as_ref().unwrap_or(&st.latency);
        kv.pair(
            format!("Stage {}", st.stage),
            format!(
                "{:.1}–{:.1} s, {} → {} {}: {} complete, {} failed, {:.2} req/s, p99 {:.3} ms",
                st.start_s,
                st.start_s + st.duration_s,
                trim_num(st.from),
                trim_num(st.target),
                st.unit,
                st.complete,
                st.failed,
                st.rps,
                at(l, 99.0)
            ),
        );
    }
    kv
}

/// A latency in ms in the unit that suits it (wrk's style): `850.0us`, `3.52ms`, `1.25s`.
fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.1}us", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.2}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

/// Bytes in binary units: `512 B`, `1.50 KiB`, `12.34 MiB`, `1.02 GiB`.
fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024.0 {
        return format!("{b:.0} B");
    }
    let mut v = b / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.2} {unit}")
}

/// ab's value column: the values of its key-value lines start at column 25.
const AB_KEYS: usize = 24;

/// What was run: target, mode, mix, whether it was interrupted.
fn header(r: &BenchReport) -> KeyValue {
    let c = &r.config;
    let mut kv = KeyValue::new("").width(AB_KEYS);
    kv.pair("Target", r.target.clone());
    let mode = match c.rate {
        Some(rate) => format!("open loop, {rate} req/s target"),
        None => "closed loop".to_string(),
    };
    kv.pair(
        "Mode",
        format!(
            "{mode}, {} connections, {} thread{}, keep-alive {}",
            c.connections,
            c.threads,
            if c.threads == 1 { "" } else { "s" },
            if c.keepalive { "on" } else { "off" }
        ),
    );
    if let (Some(p), Some(s)) = (&c.protocol, c.streams) {
        kv.pair(
            "Protocol",
            format!(
                "HTTP/2 ({p}), {s} stream{} per connection",
                if s == 1 { "" } else { "s" }
            ),
        );
    }
    if let Some(m) = &c.mix {
        kv.pair("Mix", format!("{m} (assign by {})", c.assign));
    }
    if r.interrupted {
        kv.pair("Interrupted", "yes (figures cover what completed)");
    }
    kv
}

/// ab's header blocks: server, then document.
fn ab_document(r: &BenchReport) -> Vec<KeyValue> {
    let Some(d) = &r.document else {
        return Vec::new();
    };
    let mut server = KeyValue::new("").width(AB_KEYS);
    server.pair(
        "Server Software",
        d.server_software.clone().unwrap_or_default(),
    );
    server.pair("Server Hostname", d.hostname.clone());
    server.pair("Server Port", d.port.to_string());
    let mut doc = KeyValue::new("").width(AB_KEYS);
    doc.pair("Document Path", d.path.clone());
    doc.pair(
        "Document Length",
        match d.length {
            Some(n) => format!("{n} bytes"),
            None => "(no complete response)".to_string(),
        },
    );
    vec![server, doc]
}

/// ab's totals: concurrency, time, requests (failed split as ab does), bytes, rates.
fn totals(r: &BenchReport) -> KeyValue {
    let s = &r.summary;
    let c = &r.config;
    let mut kv = KeyValue::new("").width(AB_KEYS);
    kv.pair("Concurrency Level", c.connections.to_string());
    kv.pair(
        "Time taken for tests",
        format!("{:.3} seconds", r.elapsed_s),
    );
    kv.pair("Complete requests", s.complete.to_string());
    let f = &s.failed;
    if f.total > 0 {
        kv.pair_with(
            "Failed requests",
            f.total.to_string(),
            format!(
                "(Connect: {}, Receive: {}, Length: {}, Exceptions: {}{})",
                f.connect,
                f.receive,
                f.length,
                f.exceptions,
                if f.timeouts > 0 {
                    format!(" incl. {} timeouts", f.timeouts)
                } else {
                    String::new()
                }
            ),
        );
    } else {
        kv.pair("Failed requests", "0");
    }
    for e in &s.connection_errors {
        kv.pair("Connection failed", format!("{} × {}", e.count, e.reason));
    }
    if s.non_2xx > 0 {
        kv.pair("Non-2xx responses", s.non_2xx.to_string());
    }
    kv.pair("Total transferred", format!("{} bytes", s.total_bytes));
    kv.pair("HTML transferred", format!("{} bytes", s.body_bytes));
    kv.pair(
        "Requests per second",
        format!("{:.2} [#/sec] (mean)", s.rps),
    );
    // ab's two "Time per request" lines are throughput restated (connections / rate, 1 / rate). In a
    // closed loop the first equals the mean latency; in an open loop it does not, and beside the real
    // latencies below it read like one.
    kv.pair(
        "Time per request",
        format!(
            "{:.3} [ms] (mean{})",
            s.time_per_request_ms,
            if c.rate.is_some() {
                "; ab's connections / requests per second — not a latency in an open loop; latencies below"
            } else {
                ""
            }
        ),
    );
    kv.pair(
        "Time per request",
        format!(
            "{:.3} [ms] (mean, across all concurrent requests)",
            s.time_per_request_all_ms
        ),
    );
    kv.pair(
        "Transfer rate",
        format!("{:.2} [Kbytes/sec] received", s.transfer_kbytes_per_s),
    );
    kv.pair("Connections opened", s.connections_opened.to_string());
    kv
}

/// ab's Connection Times table.
fn connection_times(r: &BenchReport) -> Table {
    let mut t = Table::new(
        "Connection Times (ms)",
        &["", "min", "mean", "[+/-sd]", "median", "max"],
    )
    .columns(0, &[13, 9, 9, 8, 9, 9]);
    let ct = &r.connection_times;
    for (name, row) in [
        ("Connect:", &ct.connect),
        ("Processing:", &ct.processing),
        ("Waiting:", &ct.waiting),
        ("Total:", &ct.total),
    ] {
        t.row(time_row(name, row));
    }
    t
}

fn time_row(name: &str, t: &TimeRow) -> Vec<String> {
    std::iter::once(name.to_string())
        .chain(
            [t.min_ms, t.mean_ms, t.sd_ms, t.median_ms, t.max_ms]
                .iter()
                .map(|v| format!("{v:.3}")),
        )
        .collect()
}

/// Latency percentiles (corrected beside uncorrected in an open loop).
fn percentiles(r: &BenchReport) -> Table {
    const TITLE: &str = "Percentage of the requests served within a certain time (ms)";
    let s = &r.summary;
    let longest = |p: f64| {
        if p >= 100.0 {
            "(longest request)".to_string()
        } else {
            String::new()
        }
    };
    match &s.corrected {
        Some(cor) => {
            let mut t = Table::new(
                TITLE,
                &[
                    "",
                    "corrected",
                    "uncorrected",
                    "(corrected: from when each request was due)",
                ],
            )
            .right(0)
            .left(3)
            .columns(2, &[6, 9, 11])
            .gap(2);
            for (a, b) in cor.percentiles.iter().zip(&s.latency.percentiles) {
                t.row(vec![
                    pct_label(a.p),
                    format!("{:.3}", a.ms),
                    format!("{:.3}", b.ms),
                    longest(a.p),
                ]);
            }
            t
        }
        None => {
            let mut t = Table::headless(TITLE, &[Align::Right, Align::Right, Align::Left])
                .columns(2, &[6, 9])
                .gap(2);
            for p in &s.latency.percentiles {
                t.row(vec![pct_label(p.p), format!("{:.3}", p.ms), longest(p.p)]);
            }
            t
        }
    }
}

/// The per-class table, and a note when connections cannot split into the shares.
fn classes(r: &BenchReport) -> Vec<Block> {
    let c = &r.config;
    let mut out = Vec::new();
    if r.classes.len() <= 1 {
        return out;
    }
    let mut t = Table::new(
        format!("Per class (latency in ms{})", corrected_note(r)),
        &[
            "class", "share", "clients", "reqs%", "complete", "failed", "non2xx", "req/s", "mean",
            "p50", "p95", "p99",
        ],
    )
    .columns(0, &[12, 6, 7, 7, 9, 6, 6, 10, 9, 9, 9, 9]);
    for cl in &r.classes {
        let l = cl.corrected.as_ref().unwrap_or(&cl.latency);
        let clients = if c.assign == "clients" {
            format!("{:.1}%", cl.client_share * 100.0)
        } else {
            "-".to_string()
        };
        t.row(vec![
            cl.name.clone(),
            format!("{:.1}%", cl.share * 100.0),
            clients,
            format!("{:.2}%", cl.request_share * 100.0),
            cl.complete.to_string(),
            cl.failed.total.to_string(),
            cl.non_2xx.to_string(),
            format!("{:.2}", cl.rps),
            format!("{:.3}", l.mean_ms),
            format!("{:.3}", l.at(50.0).unwrap_or(0.0)),
            format!("{:.3}", l.at(95.0).unwrap_or(0.0)),
            format!("{:.3}", l.at(99.0).unwrap_or(0.0)),
        ]);
    }
    out.push(t.into());
    if c.assign == "clients" {
        let worst = r
            .classes
            .iter()
            .map(|cl| (cl.client_share - cl.share).abs())
            .fold(0.0f64, f64::max);
        if worst > 0.005 {
            out.push(Block::Note(format!(
                "note: {} connections cannot split exactly into these shares (client shares are off by up to {:.2} \
                 percentage points); pick a connection count that divides, or assign = \"requests\"",
                c.connections,
                worst * 100.0
            )));
        }
    }
    out
}

/// Responses per status and the throughput sparkline.
fn status_and_timeline(r: &BenchReport) -> Vec<Block> {
    let mut out = Vec::new();
    if !r.status_counts.is_empty() {
        let list: Vec<String> = r
            .status_counts
            .iter()
            .map(|s| format!("{}: {}", s.status, s.count))
            .collect();
        let mut kv = KeyValue::new("").width(AB_KEYS);
        kv.pair("Status codes", list.join(", "));
        out.push(kv.into());
    }
    if r.timeline_rates().len() > 1 {
        let (bars, peak) = sparkline(r);
        let mut t = Table::headless(
            "Throughput over time (complete requests per second)",
            &[Align::Left, Align::Left],
        )
        .columns(2, &[])
        .gap(2);
        t.row(vec![bars, format!("(peak {peak:.0}/s)")]);
        out.push(t.into());
    }
    out
}

/// The server process during the measured part (`--server-pid`).
fn server(r: &BenchReport) -> Option<KeyValue> {
    let sv = r.server.as_ref()?;
    let mut kv = KeyValue::new(format!(
        "Server process {} ({} threads) over {:.2} s",
        sv.pid, sv.threads, sv.interval_s
    ))
    .indent(2)
    .width(AB_KEYS - 2);
    kv.pair(
        "CPU time",
        format!(
            "{:.3} s ({:.3} user, {:.3} system) = {:.2} cores",
            sv.cpu_s, sv.user_s, sv.system_s, sv.cpu_cores
        ),
    );
    kv.pair(
        "Context switches",
        format!(
            "{} voluntary, {} involuntary",
            sv.voluntary_switches, sv.involuntary_switches
        ),
    );
    kv.pair(
        "Run-queue wait",
        match sv.run_delay_s {
            Some(d) => format!("{d:.3} s"),
            None => "n/a (no /proc/PID/task/*/schedstat)".to_string(),
        },
    );
    let p = &sv.per_request;
    kv.pair(
        "Per request",
        format!(
            "{:.1} µs CPU, {:.3} voluntary + {:.3} involuntary switches{}",
            p.cpu_us,
            p.voluntary_switches,
            p.involuntary_switches,
            p.run_delay_us
                .map(|d| format!(", {d:.1} µs run-queue wait"))
                .unwrap_or_default()
        ),
    );
    Some(kv)
}

fn corrected_note(r: &BenchReport) -> &'static str {
    if r.summary.corrected.is_some() {
        ", corrected for coordinated omission"
    } else {
        ""
    }
}

fn pct_label(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}%")
    } else {
        format!("{p}%")
    }
}

/// Complete requests per second as bars (the last, partial second as a rate: see `timeline_rates`), and
/// the peak rate they are scaled to.
fn sparkline(r: &BenchReport) -> (String, f64) {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let rates = r.timeline_rates();
    let max = rates
        .iter()
        .map(|t| t.complete_per_s)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let line: String = rates
        .iter()
        .take(120)
        .map(|t| BARS[((t.complete_per_s * 7.0 / max) as usize).min(7)])
        .collect();
    (line, max)
}

fn csv_latency(o: &mut String, l: &Latency) {
    let _ = write!(o, ",{:.3},{:.3},{:.3}", l.mean_ms, l.stdev_ms, l.min_ms);
    for p in &l.percentiles {
        let _ = write!(o, ",{:.3}", p.ms);
    }
}

/// The CSV header row.
pub(crate) fn csv_header() -> String {
    let mut h = String::from(
        "class,latency,complete,failed,failed_connect,failed_receive,failed_length,failed_exceptions,non_2xx,rps,mean_ms,stdev_ms,min_ms",
    );
    for p in PERCENTILES {
        let label = if p.fract() == 0.0 {
            format!("{p:.0}")
        } else {
            p.to_string()
        };
        let _ = write!(h, ",p{label}_ms");
    }
    h
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// CSV: one row per class and latency kind (`uncorrected`, and `corrected` in an open loop), then the
/// same for all classes together as class `all`.
pub fn csv(r: &BenchReport) -> String {
    let mut o = csv_header();
    o.push('\n');
    let mut rows = |name: &str,
                    complete: u64,
                    failed: &crate::report::FailedCounts,
                    non_2xx: u64,
                    rps: f64,
                    lat: &Latency,
                    cor: Option<&Latency>| {
        for (kind, l) in std::iter::once(("uncorrected", lat)).chain(cor.map(|c| ("corrected", c)))
        {
            let _ = write!(
                o,
                "{},{kind},{complete},{},{},{},{},{},{non_2xx},{rps:.3}",
                csv_escape(name),
                failed.total,
                failed.connect,
                failed.receive,
                failed.length,
                failed.exceptions
            );
            csv_latency(&mut o, l);
            o.push('\n');
        }
    };
    for c in &r.classes {
        rows(
            &c.name,
            c.complete,
            &c.failed,
            c.non_2xx,
            c.rps,
            &c.latency,
            c.corrected.as_ref(),
        );
    }
    let s = &r.summary;
    rows(
        "all",
        s.complete,
        &s.failed,
        s.non_2xx,
        s.rps,
        &s.latency,
        s.corrected.as_ref(),
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample;

    #[test]
    fn brief_is_a_few_lines_like_wrk() {
        let mut r = sample(9990, 10, 40, 1234.5, false);
        r.summary.total_bytes = 3 * 1024 * 1024 + 512 * 1024;
        r.summary.transfer_kbytes_per_s = 350.0;
        r.summary.failed.timeouts = 4;
        let b = brief(&r);
        assert_eq!(
            b,
            "http://x/: 1 connection, closed loop, 1.00 s\n\
             \x20 Requests:    9990 complete, 1234.50 req/s\n\
             \x20 Latency:     avg 2.00ms  p50 1.00ms  p99 73.20ms  max 90.00ms\n\
             \x20 Errors:      50 (0.50%): 10 failed (connect 10, incl. 4 timeouts), 40 non-2xx\n\
             \x20 Transfer:    3.50 MiB received, 350.00 KiB/s\n"
        );
        // open loop: the corrected latency first, then the uncorrected; no errors
        let mut r = sample(100, 0, 0, 10.0, true);
        r.config.rate = Some(10.0);
        r.config.connections = 4;
        r.config.protocol = Some("h2c".into());
        r.config.streams = Some(8);
        r.interrupted = true;
        let b = brief(&r);
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(lines.len(), 6, "{b}");
        assert_eq!(
            lines[0],
            "http://x/: 4 connections, h2c × 8 streams, open loop at 10 req/s, 1.00 s (interrupted)"
        );
        assert_eq!(
            lines[2],
            "  Latency:     avg 20.00ms  p50 10.00ms  p99 732.00ms  max 900.00ms  (from when due)"
        );
        assert_eq!(
            lines[3],
            "  Uncorrected: avg 2.00ms  p50 1.00ms  p99 73.20ms  max 90.00ms  (from when sent)"
        );
        assert_eq!(lines[4], "  Errors:      none");
        assert_eq!(lines[5], "  Transfer:    0 B received, 0 B/s");
        // nothing completed; a connection failed by the client
        let mut r = sample(0, 3, 0, 0.0, false);
        r.summary.connection_errors = vec![crate::report::ErrorCount {
            reason: "HTTP/2: an HPACK bomb".into(),
            count: 2,
        }];
        let b = brief(&r);
        assert!(
            b.contains("\n  Connection failed: 2 × HTTP/2: an HPACK bomb\n"),
            "{b}"
        );
        assert!(text(&r).contains("\nConnection failed:      2 × HTTP/2: an HPACK bomb\n"));
        assert!(b.contains("Latency:     no complete request"), "{b}");
        assert!(
            b.contains("Errors:      3 (100.00%): 3 failed (connect 3), 0 non-2xx"),
            "{b}"
        );
    }

    #[test]
    fn the_sparkline_does_not_drop_at_a_partial_last_second() {
        let mut r = sample(2500, 0, 0, 1000.0, false);
        r.elapsed_s = 2.5;
        r.timeline = [1000, 1000, 500]
            .iter()
            .enumerate()
            .map(|(i, &c)| crate::report::TimelinePoint {
                second: i as u64,
                complete: c,
                failed: 0,
                bytes: 0,
            })
            .collect();
        assert_eq!(sparkline(&r), ("███".to_string(), 1000.0));
        assert!(text(&r).contains("\n  ███  (peak 1000/s)\n"));
        assert!(text(&r).contains("Throughput over time"));
    }

    /// ab's layout through the document model: values from column 25, the failed-request breakdown under
    /// its line, the Connection Times columns, the percentiles right-aligned with corrected beside
    /// uncorrected.
    #[test]
    fn text_keeps_abs_layout() {
        let mut r = sample(9990, 10, 40, 1234.5, true);
        r.summary.failed.connect = 10;
        let t = text(&r);
        assert!(
            t.starts_with(
                "Target:                 http://x/\n\
                 Mode:                   closed loop, 1 connections, 1 thread, keep-alive on\n\
                 \n\
                 Concurrency Level:      1\n"
            ),
            "{t}"
        );
        for block in [
            "Failed requests:        10\n   (Connect: 10, Receive: 0, Length: 0, Exceptions: 0)\nNon-2xx responses:      40\n",
            "\nConnection Times (ms)\n                    min      mean  [+/-sd]    median       max\n\
             Connect:          0.000     0.000    0.000     0.000     0.000\n",
            "\n          corrected  uncorrected  (corrected: from when each request was due)\n\
             \x20    50%     10.000        1.000\n",
            "\n    100%    732.000       73.200  (longest request)\n",
        ] {
            assert!(t.contains(block), "{block:?} not in\n{t}");
        }
        assert!(!t.contains(" \n"), "no trailing spaces in table rows: {t}");
    }

    #[test]
    fn units_suit_the_value() {
        assert_eq!(fmt_ms(0.8503), "850.3us");
        assert_eq!(fmt_ms(3.521), "3.52ms");
        assert_eq!(fmt_ms(1250.0), "1.25s");
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
        assert_eq!(fmt_bytes(5.0 * 1024.0 * 1024.0 * 1024.0), "5.00 GiB");
    }
}
