//! `ordo bench --json`'s result (`"kind": "bench"`): what one run measured, as `ordo report`, `ordo demo` and
//! `ordo tune` read it. ordo-bench builds it from its merged statistics; its JSON Schema is generated from
//! these types (crates/results/schema/bench-report.schema.json).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The percentiles every latency summary carries.
pub const PERCENTILES: [f64; 11] = [
    50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 99.9, 99.99, 100.0,
];

/// One run's result. Times are milliseconds unless a field name says otherwise.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct BenchReport {
    /// Always "bench".
    #[schemars(extend("const" = "bench"))]
    pub kind: String,
    /// Always 1.
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub target: String,
    pub config: RunConfig,
    /// Wall-clock start of the measured part, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// The run was ended early (Ctrl-C or a cancel token); figures cover what completed.
    pub interrupted: bool,
    /// Measured time (warm-up excluded), seconds.
    pub elapsed_s: f64,
    pub summary: RunSummary,
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
    pub fingerprint: Option<crate::machine::Fingerprint>,
    /// ab's header block: what was asked of whom and what came back first. Absent in reports written
    /// before it was recorded.
    #[serde(default)]
    pub document: Option<Document>,
    /// A ramp's stages (`--stage`, a mix file's `[[stages]]`), each with the requests that ended in it.
    /// Empty without stages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageReport>,
    /// The run's HDR histograms, serialised, so results from several machines merge into exact
    /// percentiles (`ordo report merge`). Absent in reports written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<Histograms>,
    /// A merged report (`ordo report merge`): the runs it merges, one per generator machine, in the order
    /// given. Empty for one run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedRun>,
    /// What every output of this report must repeat (`WARNING: …` lines): a merge forced over differences
    /// (`--force`) says what differed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// HdrHistograms of a run in microseconds (1 µs to 100 s, 3 significant figures), each in HdrHistogram's
/// V2 serialisation (uncompressed, the format every HdrHistogram implementation reads), base64-encoded
/// (standard alphabet, padded).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Histograms {
    /// All classes' latency from when each request was sent.
    pub latency: String,
    /// Open loop: all classes' latency from when each request was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<String>,
    /// ab's Connection Times: connect, waiting (time to first byte) and processing.
    pub connect: String,
    pub waiting: String,
    pub processing: String,
    /// Per class, in the order of `classes`.
    pub classes: Vec<ClassHistograms>,
    /// Per stage, in the order of `stages`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<ClassHistograms>,
}

/// One stage of a ramp: the load moved linearly from `from` to `target` (connections in a closed loop,
/// requests per second in an open one) over `duration_s`, starting `start_s` after the measured start;
/// the figures are of the requests that ended within it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct StageReport {
    /// 1-based.
    pub stage: u64,
    pub start_s: f64,
    pub duration_s: f64,
    pub from: f64,
    pub target: f64,
    /// "connections" or "req/s".
    pub unit: String,
    pub complete: u64,
    pub failed: u64,
    /// Complete requests per second of the stage.
    pub rps: f64,
    pub latency: Latency,
    /// Open loop: latency from when each request was due.
    pub corrected: Option<Latency>,
}

/// One class's histograms (see [`Histograms`]).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ClassHistograms {
    pub latency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<String>,
}

/// One run of a merged report: where it came from and what it measured alone.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct MergedRun {
    /// The file it was read from.
    pub source: String,
    /// The machine it ran on.
    #[serde(default)]
    pub fingerprint: Option<crate::machine::Fingerprint>,
    pub started_unix_ms: u64,
    pub elapsed_s: f64,
    pub connections: u64,
    pub threads: u64,
    pub complete: u64,
    /// Failed requests (ab's sense).
    pub failed: u64,
    pub rps: f64,
    /// Latency p50 and p99 of this run alone, ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// ab's "Server Software / Hostname / Port, Document Path / Length" block.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Document {
    /// The `Server` header of the first response that had one.
    pub server_software: Option<String>,
    pub hostname: String,
    pub port: u16,
    /// The target URL's path (a mix requests its classes' own paths).
    pub path: String,
    /// Decoded body length of the first complete response, bytes.
    pub length: Option<u64>,
}

/// The settings that shaped the run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
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
    /// "h2" (HTTP/2 over TLS) or "h2c" (cleartext, prior knowledge); absent for HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// HTTP/2: concurrent streams per connection (each a client of the closed or open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    /// Wakeup coalescing of the client threads (`--coalesce`), in microseconds (0: off); absent in reports
    /// written before the option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesce_us: Option<f64>,
}

/// Whole-run figures (ab's report).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct RunSummary {
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
    /// Why connections were failed by the client (an HTTP/2 server that broke the protocol or flooded
    /// it), each reason with how often; the requests they carried are among `failed`. At most 16 reasons.
    /// Absent in reports written before it was recorded.
    #[serde(default)]
    pub connection_errors: Vec<ErrorCount>,
}

/// One reason a connection failed and how many connections it failed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct ErrorCount {
    pub reason: String,
    pub count: u64,
}

/// Failed requests split as ab does; `timeouts` is part of `exceptions`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default, JsonSchema)]
pub struct FailedCounts {
    pub total: u64,
    pub connect: u64,
    pub receive: u64,
    pub length: u64,
    pub exceptions: u64,
    pub timeouts: u64,
}

/// A latency distribution summary, ms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Latency {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub max_ms: f64,
    pub percentiles: Vec<Percentile>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Percentile {
    pub p: f64,
    pub ms: f64,
}

impl Latency {
    /// The value at percentile `p` (one of [`PERCENTILES`]), ms.
    pub fn at(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|x| (x.p - p).abs() < 1e-9)
            .map(|x| x.ms)
    }
}

/// ab's min / mean / [+/-sd] / median / max row, ms.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TimeRow {
    pub min_ms: f64,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ConnectionTimes {
    pub connect: TimeRow,
    pub processing: TimeRow,
    pub waiting: TimeRow,
    pub total: TimeRow,
}

/// One class's figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
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

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct StatusCount {
    pub status: u16,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TimelinePoint {
    /// Seconds since the measured start (this bucket covers [second, second + 1)).
    pub second: u64,
    pub complete: u64,
    pub failed: u64,
    pub bytes: u64,
}

/// One second of the timeline as rates, for charts ([`BenchReport::timeline_rates`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineRate {
    /// Seconds since the measured start (the bucket's start).
    pub second: u64,
    pub complete_per_s: f64,
    pub failed_per_s: f64,
}

/// A last bucket covering less of a second than this is left out of [`BenchReport::timeline_rates`]: too
/// few requests to make a rate of.
pub const MIN_PARTIAL_S: f64 = 0.25;

impl BenchReport {
    /// The timeline as requests per second, as a chart should draw it. Every bucket but the last covers a
    /// whole second of the measured run; the last covers only what was left of `elapsed_s` (a run of
    /// 2.4 s has 0.4 s in its third bucket), so its counts are divided by that part instead of read as a
    /// drop in throughput — or it is left out when that part is under [`MIN_PARTIAL_S`] (unless it is the
    /// only bucket). Buckets at or past `elapsed_s` (requests finished after the end with `--drain`) are
    /// left out.
    pub fn timeline_rates(&self) -> Vec<TimelineRate> {
        let elapsed = self.elapsed_s;
        let mut out = Vec::with_capacity(self.timeline.len());
        for t in &self.timeline {
            let start = t.second as f64;
            let covered = (elapsed - start).min(1.0);
            if covered <= 0.0 || (covered < MIN_PARTIAL_S && t.second > 0) {
                continue;
            }
            out.push(TimelineRate {
                second: t.second,
                complete_per_s: t.complete as f64 / covered,
                failed_per_s: t.failed as f64 / covered,
            });
        }
        out
    }
}

/// The server process during the measured part (from /proc/PID and /proc/PID/task/*).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
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
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PerRequest {
    pub cpu_us: f64,
    pub voluntary_switches: f64,
    pub involuntary_switches: f64,
    pub run_delay_us: Option<f64>,
}

/// A run that measured nothing (closed loop, one connection, one second, every figure 0): the one fixture the
/// tests of this crate and of ordo-bench (feature `fixtures`) set the fields they look at on.
#[cfg(any(test, feature = "fixtures"))]
impl BenchReport {
    pub fn fixture() -> BenchReport {
        let row = TimeRow {
            min_ms: 0.0,
            mean_ms: 0.0,
            sd_ms: 0.0,
            median_ms: 0.0,
            max_ms: 0.0,
        };
        BenchReport {
            kind: "bench".into(),
            version: 1,
            target: "http://x/".into(),
            config: RunConfig {
                mode: "closed".into(),
                connections: 1,
                threads: 1,
                requests: None,
                duration_s: None,
                rate: None,
                keepalive: true,
                method: "GET".into(),
                warmup_s: 0.0,
                timeout_s: 1.0,
                connect_timeout_s: 1.0,
                mix: None,
                assign: "clients".into(),
                protocol: None,
                streams: None,
                coalesce_us: None,
            },
            started_unix_ms: 0,
            interrupted: false,
            elapsed_s: 1.0,
            summary: RunSummary {
                complete: 0,
                failed: FailedCounts::default(),
                non_2xx: 0,
                rps: 0.0,
                time_per_request_ms: 0.0,
                time_per_request_all_ms: 0.0,
                total_bytes: 0,
                body_bytes: 0,
                transfer_kbytes_per_s: 0.0,
                connections_opened: 1,
                latency: Latency {
                    count: 0,
                    min_ms: 0.0,
                    mean_ms: 0.0,
                    stdev_ms: 0.0,
                    max_ms: 0.0,
                    percentiles: Vec::new(),
                },
                corrected: None,
                target_rate: None,
                connection_errors: Vec::new(),
            },
            connection_times: ConnectionTimes {
                connect: row.clone(),
                processing: row.clone(),
                waiting: row.clone(),
                total: row,
            },
            classes: Vec::new(),
            status_counts: Vec::new(),
            timeline: Vec::new(),
            server: None,
            fingerprint: None,
            document: None,
            stages: Vec::new(),
            histograms: None,
            merged: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(elapsed_s: f64, counts: &[u64]) -> BenchReport {
        let mut r = BenchReport::fixture();
        r.elapsed_s = elapsed_s;
        r.summary.complete = counts.iter().sum();
        r.timeline = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| TimelinePoint {
                second: i as u64,
                complete: c,
                failed: c / 10,
                bytes: 0,
            })
            .collect();
        r
    }

    fn rates(r: &BenchReport) -> Vec<(u64, f64, f64)> {
        r.timeline_rates()
            .iter()
            .map(|t| (t.second, t.complete_per_s, t.failed_per_s))
            .collect()
    }

    #[test]
    fn the_last_partial_second_is_a_rate_not_a_drop() {
        // 2.5 s at 1000/s: the third bucket holds half a second's requests
        let r = report(2.5, &[1000, 1000, 500]);
        assert_eq!(
            rates(&r),
            vec![(0, 1000.0, 100.0), (1, 1000.0, 100.0), (2, 1000.0, 100.0)]
        );
        // 2.1 s: the 0.1 s bucket is too short to be a rate and is left out
        let r = report(2.1, &[1000, 1000, 100]);
        assert_eq!(rates(&r).len(), 2);
        // whole seconds: nothing changes
        let r = report(2.0, &[1000, 900]);
        assert_eq!(rates(&r), vec![(0, 1000.0, 100.0), (1, 900.0, 90.0)]);
        // requests finished after the end (--drain) are not plotted
        let r = report(2.0, &[1000, 900, 30]);
        assert_eq!(rates(&r).len(), 2);
        // a run shorter than a second keeps its one bucket, as a rate
        let r = report(0.05, &[50]);
        assert_eq!(rates(&r), vec![(0, 1000.0, 100.0)]);
        assert!(report(0.0, &[]).timeline_rates().is_empty());
    }
}
