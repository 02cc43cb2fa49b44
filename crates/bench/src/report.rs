//! Builds the `BenchReport` of a run (`ordo bench --json`; the type lives in ordo-results, which `ordo report`
//! reads without linking the load generator) once from the merged statistics. Printers only read it.

use hdrhistogram::Histogram;

pub use ordo_results::bench::*;

use crate::stats::{Failures, Stats};

impl From<&Failures> for FailedCounts {
    fn from(f: &Failures) -> Self {
        FailedCounts {
            total: f.total(),
            connect: f.connect,
            receive: f.receive,
            length: f.length,
            exceptions: f.exceptions,
            timeouts: f.timeouts,
        }
    }
}

/// Summarise a µs histogram.
pub(crate) fn latency_summary(h: &Histogram<u64>) -> Latency {
    let ms = |v: u64| v as f64 / 1000.0;
    let empty = h.is_empty();
    Latency {
        count: h.len(),
        min_ms: if empty { 0.0 } else { ms(h.min()) },
        mean_ms: if empty { 0.0 } else { h.mean() / 1000.0 },
        stdev_ms: if empty { 0.0 } else { h.stdev() / 1000.0 },
        max_ms: if empty { 0.0 } else { ms(h.max()) },
        percentiles: PERCENTILES
            .iter()
            .map(|&p| Percentile {
                p,
                ms: if empty {
                    0.0
                } else if p >= 100.0 {
                    ms(h.max())
                } else {
                    ms(h.value_at_percentile(p))
                },
            })
            .collect(),
    }
}

fn time_row(h: &Histogram<u64>) -> TimeRow {
    if h.is_empty() {
        return TimeRow {
            min_ms: 0.0,
            mean_ms: 0.0,
            sd_ms: 0.0,
            median_ms: 0.0,
            max_ms: 0.0,
        };
    }
    TimeRow {
        min_ms: h.min() as f64 / 1000.0,
        mean_ms: h.mean() / 1000.0,
        sd_ms: h.stdev() / 1000.0,
        median_ms: h.value_at_quantile(0.5) as f64 / 1000.0,
        max_ms: h.max() as f64 / 1000.0,
    }
}

/// A histogram in HdrHistogram's V2 serialisation, base64 (the report's `histograms`).
pub(crate) fn encode(h: &Histogram<u64>) -> Option<String> {
    use base64::Engine as _;
    use hdrhistogram::serialization::Serializer as _;
    let mut buf = Vec::new();
    hdrhistogram::serialization::V2Serializer::new()
        .serialize(h, &mut buf)
        .ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(buf))
}

/// [`encode`]'s inverse; the error says what is wrong with the text.
pub(crate) fn decode(s: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let h: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("not a V2 HdrHistogram: {e:?}"))?;
    Ok(h)
}

/// Every histogram of the run, serialised (None if one cannot be: a count beyond i64).
fn histograms(
    st: &Stats,
    latency: &Histogram<u64>,
    corrected: Option<&Histogram<u64>>,
) -> Option<Histograms> {
    let corrected = match corrected {
        Some(h) => Some(encode(h)?),
        None => None,
    };
    let mut classes = Vec::with_capacity(st.classes.len());
    for c in &st.classes {
        classes.push(ClassHistograms {
            latency: encode(&c.latency)?,
            corrected: match &c.corrected {
                Some(h) => Some(encode(h)?),
                None => None,
            },
        });
    }
    let mut stages = Vec::with_capacity(st.stages.len());
    for s in &st.stages {
        stages.push(ClassHistograms {
            latency: encode(&s.latency)?,
            corrected: match &s.corrected {
                Some(h) => Some(encode(h)?),
                None => None,
            },
        });
    }
    Some(Histograms {
        stages,
        latency: encode(latency)?,
        corrected,
        connect: encode(&st.connect)?,
        waiting: encode(&st.waiting)?,
        processing: encode(&st.processing)?,
        classes,
    })
}

/// A stage as planned: start and length (s), from and to (in `unit`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StagePlan {
    pub start_s: f64,
    pub duration_s: f64,
    pub from: f64,
    pub target: f64,
    pub unit: String,
}

/// Inputs the report needs besides the statistics.
pub(crate) struct BuildInput<'a> {
    pub config: RunConfig,
    pub target: String,
    pub started_unix_ms: u64,
    pub interrupted: bool,
    pub elapsed_s: f64,
    pub class_names: Vec<String>,
    pub shares: Vec<f64>,
    pub class_connections: Vec<u64>,
    pub connections: u64,
    pub stats: &'a Stats,
    pub server: Option<ServerReport>,
    /// The ramp's stages (empty without), in the order of the statistics' stages.
    pub stages: Vec<StagePlan>,
    /// The target's host, port and path (ab's header block).
    pub hostname: String,
    pub port: u16,
    pub path: String,
}

pub(crate) fn build(inp: BuildInput<'_>) -> BenchReport {
    let st = inp.stats;
    let elapsed = inp.elapsed_s.max(1e-9);
    let mut fail = Failures::default();
    let mut complete = 0;
    let mut non_2xx = 0;
    for c in &st.classes {
        complete += c.completed;
        non_2xx += c.non_2xx;
        fail.connect += c.failures.connect;
        fail.receive += c.failures.receive;
        fail.length += c.failures.length;
        fail.exceptions += c.failures.exceptions;
        fail.timeouts += c.failures.timeouts;
    }
    let measured_total: u64 = complete + fail.total();
    let total_bytes = st.head_bytes + st.body_bytes;
    let latency = st.total_latency();
    let corrected = st.total_corrected();
    let classes = st
        .classes
        .iter()
        .enumerate()
        .map(|(i, c)| ClassReport {
            name: inp.class_names[i].clone(),
            share: inp.shares[i],
            client_share: inp.class_connections[i] as f64 / inp.connections.max(1) as f64,
            request_share: if measured_total == 0 {
                0.0
            } else {
                (c.completed + c.failures.total()) as f64 / measured_total as f64
            },
            connections: inp.class_connections[i],
            complete: c.completed,
            failed: (&c.failures).into(),
            non_2xx: c.non_2xx,
            rps: c.completed as f64 / elapsed,
            bytes: c.bytes,
            latency: latency_summary(&c.latency),
            corrected: c.corrected.as_ref().map(latency_summary),
        })
        .collect();
    BenchReport {
        kind: "bench".to_string(),
        version: 1,
        target: inp.target,
        started_unix_ms: inp.started_unix_ms,
        interrupted: inp.interrupted,
        elapsed_s: inp.elapsed_s,
        summary: RunSummary {
            complete,
            failed: (&fail).into(),
            non_2xx,
            rps: complete as f64 / elapsed,
            time_per_request_ms: if complete == 0 {
                0.0
            } else {
                elapsed * 1000.0 * inp.connections as f64 / complete as f64
            },
            time_per_request_all_ms: if complete == 0 {
                0.0
            } else {
                elapsed * 1000.0 / complete as f64
            },
            total_bytes,
            body_bytes: st.content_bytes,
            transfer_kbytes_per_s: total_bytes as f64 / 1024.0 / elapsed,
            connections_opened: st.connections_opened,
            latency: latency_summary(&latency),
            corrected: corrected.as_ref().map(latency_summary),
            target_rate: inp.config.rate,
            connection_errors: st
                .conn_errors
                .iter()
                .map(|(reason, count)| ErrorCount {
                    reason: reason.clone(),
                    count: *count,
                })
                .collect(),
        },
        connection_times: ConnectionTimes {
            connect: time_row(&st.connect),
            processing: time_row(&st.processing),
            waiting: time_row(&st.waiting),
            total: time_row(&latency),
        },
        classes,
        status_counts: st
            .status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| StatusCount {
                status: s as u16,
                count: *n,
            })
            .collect(),
        timeline: st
            .timeline
            .iter()
            .enumerate()
            .map(|(i, s)| TimelinePoint {
                second: i as u64,
                complete: s.completed,
                failed: s.failed,
                bytes: s.bytes,
            })
            .collect(),
        config: inp.config,
        server: inp.server,
        fingerprint: Some(ordo_sys::fingerprint::collect()),
        document: Some(Document {
            server_software: st.server_software.clone(),
            hostname: inp.hostname,
            port: inp.port,
            path: inp.path,
            length: st.document_length,
        }),
        stages: inp
            .stages
            .iter()
            .zip(&st.stages)
            .enumerate()
            .map(|(i, (p, s))| StageReport {
                stage: i as u64 + 1,
                start_s: p.start_s,
                duration_s: p.duration_s,
                from: p.from,
                target: p.target,
                unit: p.unit.clone(),
                complete: s.completed,
                failed: s.failed,
                rps: s.completed as f64 / p.duration_s.max(1e-9),
                latency: latency_summary(&s.latency),
                corrected: s.corrected.as_ref().map(latency_summary),
            })
            .collect(),
        histograms: histograms(st, &latency, corrected.as_ref()),
        merged: Vec::new(),
        warnings: Vec::new(),
    }
}

/// A report for printer and threshold tests: `complete` requests with p99 at 73.2 ms (× 10 when `corrected`
/// adds an open loop's corrected latency), `failed` connect failures, `non_2xx`, `rps`.
#[cfg(test)]
pub(crate) fn sample(
    complete: u64,
    failed: u64,
    non_2xx: u64,
    rps: f64,
    corrected: bool,
) -> BenchReport {
    let lat = |scale: f64| Latency {
        count: complete,
        min_ms: 0.5 * scale,
        mean_ms: 2.0 * scale,
        stdev_ms: 1.0,
        max_ms: 90.0 * scale,
        percentiles: PERCENTILES
            .iter()
            .map(|&p| Percentile {
                p,
                ms: if p >= 99.0 { 73.2 * scale } else { 1.0 * scale },
            })
            .collect(),
    };
    let mut r = BenchReport::fixture();
    r.config.duration_s = Some(1.0);
    let s = &mut r.summary;
    s.complete = complete;
    s.failed = FailedCounts {
        total: failed,
        connect: failed,
        receive: 0,
        length: 0,
        exceptions: 0,
        timeouts: 0,
    };
    s.non_2xx = non_2xx;
    s.rps = rps;
    s.latency = lat(1.0);
    s.corrected = corrected.then(|| lat(10.0));
    r
}
