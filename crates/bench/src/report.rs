//! `BenchReport`: the serde result of a run (`ordo bench --json`, consumed by `ordo report`, demo and tune),
//! built once from the merged statistics. Printers only read it. Its JSON Schema is committed at
//! crates/bench/schema/bench-report.schema.json and checked by the tests.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::stats::{Failures, Stats};

/// The percentiles every latency summary carries.
pub const PERCENTILES: [f64; 11] = [
    50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0,
];

/// One run's result. Times are milliseconds unless a field name says otherwise.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchReport {
    /// Always "bench".
    pub kind: String,
    /// Always 1.
    pub version: u32,
    pub target: String,
    pub config: RunConfig,
    /// Wall-clock start of the measured part, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// The run was ended early (Ctrl-C or a cancel token); figures cover what completed.
    pub interrupted: bool,
    /// Measured time (warm-up excluded), seconds.
    pub elapsed_s: f64,
    pub summary: Summary,
    /// ab's Connection Times table.
    pub connection_times: ConnectionTimes,
    /// Per class (one class named "default" without a mix).
    pub classes: Vec<ClassReport>,
    /// Responses per HTTP status.
    pub status_counts: Vec<StatusCount>,
    /// Throughput per second of the measured run.
    pub timeline: Vec<TimelinePoint>,
    /// The server process's side of the run (`--server-pid`).
    pub server: Option<ServerReport>,
    /// The machine the run was measured on, so `ordo report` can compare runs across kernels and hosts.
    /// Absent in reports written before it was recorded.
    #[serde(default)]
    pub fingerprint: Option<ordo_sys::Fingerprint>,
}

/// The settings that shaped the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RunConfig {
    /// "closed" or "open".
    pub mode: String,
    pub connections: u64,
    pub threads: u64,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    /// Open loop: target requests per second.
    pub rate: Option<f64>,
    pub keepalive: bool,
    pub method: String,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub connect_timeout_s: f64,
    /// The mix file, if any.
    pub mix: Option<String>,
    /// "clients" or "requests": how class shares were assigned.
    pub assign: String,
}

/// Whole-run figures (ab's report).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Requests answered with a complete response (any status).
    pub complete: u64,
    pub failed: FailedCounts,
    pub non_2xx: u64,
    /// Complete responses per second.
    pub rps: f64,
    /// ab's "Time per request (mean)": elapsed × connections / complete.
    pub time_per_request_ms: f64,
    /// ab's "(mean, across all concurrent requests)": elapsed / complete.
    pub time_per_request_all_ms: f64,
    /// Bytes received (heads + bodies as framed).
    pub total_bytes: u64,
    /// Decoded body bytes.
    pub body_bytes: u64,
    pub transfer_kbytes_per_s: f64,
    pub connections_opened: u64,
    /// Latency from sending (the connect included when the request opened a connection). In an open
    /// loop this is the uncorrected latency.
    pub latency: Latency,
    /// Open loop: latency from the time each request was due (coordinated omission corrected).
    pub corrected: Option<Latency>,
    /// Open loop: the rate achieved by the schedule vs the target.
    pub target_rate: Option<f64>,
}

/// Failed requests split as ab does; `timeouts` is part of `exceptions`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct FailedCounts {
    pub total: u64,
    pub connect: u64,
    pub receive: u64,
    pub length: u64,
    pub exceptions: u64,
    pub timeouts: u64,
}

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

/// A latency distribution summary, ms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub max_ms: f64,
    pub percentiles: Vec<Percentile>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Percentile {
    pub p: f64,
    pub ms: f64,
}

impl Latency {
    /// Summarise a µs histogram.
    pub fn from_hist(h: &Histogram<u64>) -> Latency {
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

    /// The value at percentile `p` (one of [`PERCENTILES`]), ms.
    pub fn at(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|x| (x.p - p).abs() < 1e-9)
            .map(|x| x.ms)
    }
}

/// ab's min / mean / [+/-sd] / median / max row, ms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TimeRow {
    pub min_ms: f64,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

impl TimeRow {
    fn from_hist(h: &Histogram<u64>) -> TimeRow {
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
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConnectionTimes {
    pub connect: TimeRow,
    pub processing: TimeRow,
    pub waiting: TimeRow,
    pub total: TimeRow,
}

/// One class's figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClassReport {
    pub name: String,
    /// Share in the mix, normalised to 1.
    pub share: f64,
    /// Realised share of the connections (clients).
    pub client_share: f64,
    /// Realised share of the measured requests (complete + failed).
    pub request_share: f64,
    pub connections: u64,
    pub complete: u64,
    pub failed: FailedCounts,
    pub non_2xx: u64,
    pub rps: f64,
    pub bytes: u64,
    pub latency: Latency,
    pub corrected: Option<Latency>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatusCount {
    pub status: u16,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TimelinePoint {
    /// Seconds since the measured start (this bucket covers [second, second + 1)).
    pub second: u64,
    pub complete: u64,
    pub failed: u64,
    pub bytes: u64,
}

/// The server process during the measured part (from /proc/PID and /proc/PID/task/*).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServerReport {
    pub pid: i32,
    pub threads: u64,
    /// Sampled interval, seconds.
    pub interval_s: f64,
    /// CPU time, seconds (schedstat's precise figure when available, else utime + stime).
    pub cpu_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    /// CPU use as a fraction of one core over the interval.
    pub cpu_cores: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Run-queue wait summed over threads, seconds (None without schedstat).
    pub run_delay_s: Option<f64>,
    pub per_request: PerRequest,
}

/// Server figures divided by the run's complete requests.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PerRequest {
    pub cpu_us: f64,
    pub voluntary_switches: f64,
    pub involuntary_switches: f64,
    pub run_delay_us: Option<f64>,
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
            latency: Latency::from_hist(&c.latency),
            corrected: c.corrected.as_ref().map(Latency::from_hist),
        })
        .collect();
    BenchReport {
        kind: "bench".to_string(),
        version: 1,
        target: inp.target,
        started_unix_ms: inp.started_unix_ms,
        interrupted: inp.interrupted,
        elapsed_s: inp.elapsed_s,
        summary: Summary {
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
            latency: Latency::from_hist(&latency),
            corrected: corrected.as_ref().map(Latency::from_hist),
            target_rate: inp.config.rate,
        },
        connection_times: ConnectionTimes {
            connect: TimeRow::from_hist(&st.connect),
            processing: TimeRow::from_hist(&st.processing),
            waiting: TimeRow::from_hist(&st.waiting),
            total: TimeRow::from_hist(&latency),
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
        fingerprint: Some(ordo_sys::Fingerprint::collect()),
    }
}
