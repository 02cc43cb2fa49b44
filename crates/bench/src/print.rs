//! Printers: the ab-style text report, the per-class table, the throughput timeline and CSV. They only read
//! a finished [`BenchReport`].

use std::fmt::Write as _;

use crate::report::{BenchReport, Latency, PERCENTILES, TimeRow};

/// The human report (ab's layout, then ordo's additions).
pub fn text(r: &BenchReport) -> String {
    let mut o = String::new();
    for part in [
        merged,
        header,
        document,
        totals,
        connection_times,
        percentiles,
        stages,
        classes,
        status_and_timeline,
        server,
    ] {
        part(&mut o, r);
    }
    o
}

/// A ramp's stages: a row each, with the requests that ended in it.
fn stages(o: &mut String, r: &BenchReport) {
    if r.stages.is_empty() {
        return;
    }
    let corrected = r.stages.iter().any(|s| s.corrected.is_some());
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Stages (requests by the stage they ended in; latency in ms{})",
        if corrected {
            ", from when each request was due"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "{:>5} {:>15} {:>24} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9}",
        "stage", "time (s)", "load", "complete", "failed", "req/s", "p50", "p99", "max"
    );
    for s in &r.stages {
        let l = s.corrected.as_ref().unwrap_or(&s.latency);
        let p = |q: f64| {
            l.percentiles
                .iter()
                .find(|p| p.p == q)
                .map_or(0.0, |p| p.ms)
        };
        let _ = writeln!(
            o,
            "{:>5} {:>15} {:>24} {:>9} {:>7} {:>10.2} {:>9.3} {:>9.3} {:>9.3}",
            s.stage,
            format!("{:.1}–{:.1}", s.start_s, s.start_s + s.duration_s),
            format!("{} → {} {}", trim_num(s.from), trim_num(s.target), s.unit),
            s.complete,
            s.failed,
            s.rps,
            p(50.0),
            p(99.0),
            l.max_ms
        );
    }
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
fn merged(o: &mut String, r: &BenchReport) {
    for w in &r.warnings {
        let _ = writeln!(o, "{w}");
    }
    if r.merged.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "Merged from {} runs (percentiles from their summed histograms):",
        r.merged.len()
    );
    for m in &r.merged {
        let host = m
            .fingerprint
            .as_ref()
            .map(|f| f.hostname.as_str())
            .filter(|h| !h.is_empty())
            .unwrap_or("unknown machine");
        let _ = writeln!(
            o,
            "  {}: {host}, {} connections, {:.2} s, {} complete, {} failed, {:.2} req/s, p50 {:.3} ms, p99 {:.3} ms",
            m.source, m.connections, m.elapsed_s, m.complete, m.failed, m.rps, m.p50_ms, m.p99_ms
        );
    }
    o.push('\n');
}

/// wrk's short summary (`--brief`): what was run, then requests and rate, latency, errors and transfer, a
/// line each. In an open loop the latency line is the one measured from when each request was due, and a
/// second line gives the uncorrected one.
pub fn brief(r: &BenchReport) -> String {
    let mut o = String::new();
    merged(&mut o, r);
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
    let _ = writeln!(
        o,
        "{}: {} connection{}{proto}, {mode}, {:.2} s{}",
        r.target,
        c.connections,
        if c.connections == 1 { "" } else { "s" },
        r.elapsed_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    let _ = writeln!(
        o,
        "  Requests:    {} complete, {:.2} req/s",
        s.complete, s.rps
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
            let _ = writeln!(o, "  Latency:     {}  (from when due)", lat(cor));
            let _ = writeln!(o, "  Uncorrected: {}  (from when sent)", lat(&s.latency));
        }
        None => {
            let _ = writeln!(o, "  Latency:     {}", lat(&s.latency));
        }
    }
    let f = &s.failed;
    let measured = s.complete + f.total;
    let errors = f.total + s.non_2xx;
    if errors == 0 {
        let _ = writeln!(o, "  Errors:      none");
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
        let _ = writeln!(
            o,
            "  Errors:      {errors} ({:.2}%): {} failed{}, {} non-2xx",
            errors as f64 * 100.0 / measured.max(1) as f64,
            f.total,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            },
            s.non_2xx
        );
    }
    for e in &s.connection_errors {
        let _ = writeln!(o, "  Connection failed: {} × {}", e.count, e.reason);
    }
    let _ = writeln!(
        o,
        "  Transfer:    {} received, {}/s",
        fmt_bytes(s.total_bytes as f64),
        fmt_bytes(s.transfer_kbytes_per_s * 1024.0)
    );
    for st in &r.stages {
        let l = st.corrected.as_ref().unwrap_or(&st.latency);
        let p99 = l
            .percentiles
            .iter()
            .find(|p| p.p == 99.0)
            .map_or(0.0, |p| p.ms);
        let _ = writeln!(
            o,
            "  Stage {}:     {:.1}–{:.1} s, {} → {} {}: {} complete, {} failed, {:.2} req/s, p99 {:.3} ms",
            st.stage,
            st.start_s,
            st.start_s + st.duration_s,
            trim_num(st.from),
            trim_num(st.target),
            st.unit,
            st.complete,
            st.failed,
            st.rps,
            p99
        );
    }
    o
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

/// What was run: target, mode, mix, whether it was interrupted.
fn header(o: &mut String, r: &BenchReport) {
    let c = &r.config;
    let _ = writeln!(o, "Target:                 {}", r.target);
    let mode = match c.rate {
        Some(rate) => format!("open loop, {rate} req/s target"),
        None => "closed loop".to_string(),
    };
    let _ = writeln!(
        o,
        "Mode:                   {mode}, {} connections, {} thread{}, keep-alive {}",
        c.connections,
        c.threads,
        if c.threads == 1 { "" } else { "s" },
        if c.keepalive { "on" } else { "off" }
    );
    if let (Some(p), Some(s)) = (&c.protocol, c.streams) {
        let _ = writeln!(
            o,
            "Protocol:               HTTP/2 ({p}), {s} stream{} per connection",
            if s == 1 { "" } else { "s" }
        );
    }
    if let Some(m) = &c.mix {
        let _ = writeln!(o, "Mix:                    {m} (assign by {})", c.assign);
    }
    if r.interrupted {
        let _ = writeln!(
            o,
            "Interrupted:            yes (figures cover what completed)"
        );
    }
}

/// ab's header block: server, document, concurrency.
fn document(o: &mut String, r: &BenchReport) {
    let c = &r.config;
    let _ = writeln!(o);
    if let Some(d) = &r.document {
        let _ = writeln!(
            o,
            "Server Software:        {}",
            d.server_software.as_deref().unwrap_or("")
        );
        let _ = writeln!(o, "Server Hostname:        {}", d.hostname);
        let _ = writeln!(o, "Server Port:            {}", d.port);
        let _ = writeln!(o);
        let _ = writeln!(o, "Document Path:          {}", d.path);
        match d.length {
            Some(n) => {
                let _ = writeln!(o, "Document Length:        {n} bytes");
            }
            None => {
                let _ = writeln!(o, "Document Length:        (no complete response)");
            }
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "Concurrency Level:      {}", c.connections);
}

/// ab's totals: time, requests (failed split as ab does), bytes, rates.
fn totals(o: &mut String, r: &BenchReport) {
    let s = &r.summary;
    let c = &r.config;
    let _ = writeln!(o, "Time taken for tests:   {:.3} seconds", r.elapsed_s);
    let _ = writeln!(o, "Complete requests:      {}", s.complete);
    let f = &s.failed;
    let _ = writeln!(o, "Failed requests:        {}", f.total);
    if f.total > 0 {
        let _ = writeln!(
            o,
            "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {}{})",
            f.connect,
            f.receive,
            f.length,
            f.exceptions,
            if f.timeouts > 0 {
                format!(" incl. {} timeouts", f.timeouts)
            } else {
                String::new()
            }
        );
    }
    for e in &s.connection_errors {
        let _ = writeln!(o, "Connection failed:      {} × {}", e.count, e.reason);
    }
    if s.non_2xx > 0 {
        let _ = writeln!(o, "Non-2xx responses:      {}", s.non_2xx);
    }
    let _ = writeln!(o, "Total transferred:      {} bytes", s.total_bytes);
    let _ = writeln!(o, "HTML transferred:       {} bytes", s.body_bytes);
    let _ = writeln!(o, "Requests per second:    {:.2} [#/sec] (mean)", s.rps);
    // ab's two "Time per request" lines are throughput restated (connections / rate, 1 / rate). In a
    // closed loop the first equals the mean latency; in an open loop it does not, and beside the real
    // latencies below it read like one.
    let _ = writeln!(
        o,
        "Time per request:       {:.3} [ms] (mean{})",
        s.time_per_request_ms,
        if c.rate.is_some() {
            "; ab's connections / requests per second — not a latency in an open loop; latencies below"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
        s.time_per_request_all_ms
    );
    let _ = writeln!(
        o,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        s.transfer_kbytes_per_s
    );
    let _ = writeln!(o, "Connections opened:     {}", s.connections_opened);
}

/// ab's Connection Times table.
fn connection_times(o: &mut String, r: &BenchReport) {
    let _ = writeln!(o);
    let _ = writeln!(o, "Connection Times (ms)");
    let _ = writeln!(
        o,
        "              {:>9} {:>9} {:>8} {:>9} {:>9}",
        "min", "mean", "[+/-sd]", "median", "max"
    );
    let row = |o: &mut String, name: &str, t: &TimeRow| {
        let _ = writeln!(
            o,
            "{name:<13} {:>9.3} {:>9.3} {:>8.3} {:>9.3} {:>9.3}",
            t.min_ms, t.mean_ms, t.sd_ms, t.median_ms, t.max_ms
        );
    };
    let ct = &r.connection_times;
    row(o, "Connect:", &ct.connect);
    row(o, "Processing:", &ct.processing);
    row(o, "Waiting:", &ct.waiting);
    row(o, "Total:", &ct.total);
}

/// Latency percentiles (corrected beside uncorrected in an open loop).
fn percentiles(o: &mut String, r: &BenchReport) {
    let s = &r.summary;
    let _ = writeln!(o);
    match &s.corrected {
        Some(cor) => {
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms)"
            );
            let _ = writeln!(
                o,
                "          corrected  uncorrected   (corrected: from when each request was due)"
            );
            for (a, b) in cor.percentiles.iter().zip(&s.latency.percentiles) {
                let _ = writeln!(
                    o,
                    "  {:>6}  {:>9.3}  {:>11.3}{}",
                    pct_label(a.p),
                    a.ms,
                    b.ms,
                    if a.p >= 100.0 {
                        " (longest request)"
                    } else {
                        ""
                    }
                );
            }
        }
        None => {
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms)"
            );
            for p in &s.latency.percentiles {
                let _ = writeln!(
                    o,
                    "  {:>6}  {:>9.3}{}",
                    pct_label(p.p),
                    p.ms,
                    if p.p >= 100.0 {
                        " (longest request)"
                    } else {
                        ""
                    }
                );
            }
        }
    }
}

/// The per-class table, and a note when connections cannot split into the shares.
fn classes(o: &mut String, r: &BenchReport) {
    let c = &r.config;
    if r.classes.len() > 1 {
        let _ = writeln!(o);
        let _ = writeln!(o, "Per class (latency in ms{})", corrected_note(r));
        let _ = writeln!(
            o,
            "{:<12} {:>6} {:>7} {:>7} {:>9} {:>6} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "class",
            "share",
            "clients",
            "reqs%",
            "complete",
            "failed",
            "non2xx",
            "req/s",
            "mean",
            "p50",
            "p95",
            "p99"
        );
        for cl in &r.classes {
            let l = cl.corrected.as_ref().unwrap_or(&cl.latency);
            let clients = if c.assign == "clients" {
                format!("{:.1}%", cl.client_share * 100.0)
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                o,
                "{:<12} {:>5.1}% {:>7} {:>6.2}% {:>9} {:>6} {:>6} {:>10.2} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                cl.name,
                cl.share * 100.0,
                clients,
                cl.request_share * 100.0,
                cl.complete,
                cl.failed.total,
                cl.non_2xx,
                cl.rps,
                l.mean_ms,
                l.at(50.0).unwrap_or(0.0),
                l.at(95.0).unwrap_or(0.0),
                l.at(99.0).unwrap_or(0.0),
            );
        }
    }
    if c.assign == "clients" && r.classes.len() > 1 {
        let worst = r
            .classes
            .iter()
            .map(|cl| (cl.client_share - cl.share).abs())
            .fold(0.0f64, f64::max);
        if worst > 0.005 {
            let _ = writeln!(
                o,
                "note: {} connections cannot split exactly into these shares (client shares are off by up to {:.2} \
                 percentage points); pick a connection count that divides, or assign = \"requests\"",
                c.connections,
                worst * 100.0
            );
        }
    }
}

/// Responses per status and the throughput sparkline.
fn status_and_timeline(o: &mut String, r: &BenchReport) {
    if !r.status_counts.is_empty() {
        let _ = writeln!(o);
        let list: Vec<String> = r
            .status_counts
            .iter()
            .map(|s| format!("{}: {}", s.status, s.count))
            .collect();
        let _ = writeln!(o, "Status codes:           {}", list.join(", "));
    }
    if r.timeline_rates().len() > 1 {
        let _ = writeln!(o);
        let _ = writeln!(o, "Throughput over time (complete requests per second)");
        let _ = writeln!(o, "  {}", sparkline(r));
    }
}

/// The server process during the measured part (`--server-pid`).
fn server(o: &mut String, r: &BenchReport) {
    if let Some(sv) = &r.server {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Server process {} ({} threads) over {:.2} s",
            sv.pid, sv.threads, sv.interval_s
        );
        let _ = writeln!(
            o,
            "  CPU time:             {:.3} s ({:.3} user, {:.3} system) = {:.2} cores",
            sv.cpu_s, sv.user_s, sv.system_s, sv.cpu_cores
        );
        let _ = writeln!(
            o,
            "  Context switches:     {} voluntary, {} involuntary",
            sv.voluntary_switches, sv.involuntary_switches
        );
        match sv.run_delay_s {
            Some(d) => {
                let _ = writeln!(o, "  Run-queue wait:       {d:.3} s");
            }
            None => {
                let _ = writeln!(
                    o,
                    "  Run-queue wait:       n/a (no /proc/PID/task/*/schedstat)"
                );
            }
        }
        let p = &sv.per_request;
        let _ = writeln!(
            o,
            "  Per request:          {:.1} µs CPU, {:.3} voluntary + {:.3} involuntary switches{}",
            p.cpu_us,
            p.voluntary_switches,
            p.involuntary_switches,
            p.run_delay_us
                .map(|d| format!(", {d:.1} µs run-queue wait"))
                .unwrap_or_default()
        );
    }
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

/// Complete requests per second as bars (the last, partial second as a rate: see `timeline_rates`).
fn sparkline(r: &BenchReport) -> String {
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
    format!("{line}  (peak {max:.0}/s)")
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
        assert_eq!(sparkline(&r), "███  (peak 1000/s)");
        assert!(text(&r).contains("Throughput over time"));
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
