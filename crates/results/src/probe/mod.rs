//! `ordo probe --json`'s results: the timed loop (`"kind": "probe-loop"`, with its settings), the side-by-side
//! comparison (`"probe-compare"`) and the live process view (`"probe-pid"`, one document per interval), as
//! `ordo report` reads them. ordo-probe measures and fills them; the JSON Schema is generated from these
//! types (crates/results/schema/probe-report.schema.json).

pub mod stats;

use crate::machine::{Fingerprint, Policy, ProcessSnapshot};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use stats::{Distribution, Histogram};

/// What to run beside the probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoadSpec {
    None,
    /// N threads spinning in this process.
    Threads(usize),
    /// A shell command (`sh -c`), killed with everything it started at the end.
    Command(String),
}

impl LoadSpec {
    pub fn is_none(&self) -> bool {
        matches!(self, LoadSpec::None | LoadSpec::Threads(0))
    }

    pub fn describe(&self) -> String {
        match self {
            LoadSpec::None | LoadSpec::Threads(0) => "none".into(),
            LoadSpec::Threads(n) => format!("{n} busy thread{}", if *n == 1 { "" } else { "s" }),
            LoadSpec::Command(c) => format!("command `{c}`"),
        }
    }
}

/// How much work one sample does.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// Calibrate the loop to take this long on an idle CPU, ns.
    #[serde(rename = "nominal_ns")]
    Nominal(u64),
    /// A fixed number of loop iterations.
    Iterations(u64),
}

/// A loop run's settings, checked by `validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopConfig {
    pub label: String,
    pub work: Work,
    pub samples: usize,
    /// Samples run and discarded before measuring.
    pub warmup: usize,
    /// MiB held and touched before every sample.
    pub footprint_mb: usize,
    pub load: LoadSpec,
    /// Pin the probe thread and the load to this CPU.
    pub cpu: Option<usize>,
    /// The probe thread's policy, nice value and slice (ns).
    pub policy: Option<Policy>,
    pub nice: Option<i32>,
    pub slice_ns: Option<u64>,
    /// Custom histogram edges, ms.
    pub buckets_ms: Option<Vec<f64>>,
    /// A calibration to reuse (ns per iteration), so runs compared side by side share one nominal time.
    pub ns_per_iteration: Option<f64>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            label: "run".into(),
            work: Work::Nominal(14_000_000),
            samples: 1000,
            warmup: 3,
            footprint_mb: 0,
            load: LoadSpec::None,
            cpu: None,
            policy: None,
            nice: None,
            slice_ns: None,
            buckets_ms: None,
            ns_per_iteration: None,
        }
    }
}

/// One timed sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopSample {
    /// Wall time (CLOCK_MONOTONIC), ns.
    pub elapsed_ns: u64,
    /// The thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: precise, unlike getrusage's split below.
    pub cpu_ns: u64,
    /// getrusage(RUSAGE_THREAD) user and system CPU, ns. The kernel folds a running thread's time into
    /// these only at ticks and switches, so per sample they are quantised to the tick (4 ms at HZ=250).
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    /// Run-queue wait from the thread's schedstat, ns (None without schedstat).
    pub run_delay_ns: Option<u64>,
    /// Times scheduled in during the sample (schedstat).
    pub timeslices: Option<u64>,
    pub minflt: u64,
}

/// Where the elapsed time went, summed over all samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Split {
    pub elapsed_ms: f64,
    pub cpu_ms: f64,
    /// None without schedstat.
    pub run_queue_wait_ms: Option<f64>,
    /// Elapsed minus CPU minus run-queue wait (blocked, interrupts not charged to the thread, rounding).
    pub other_ms: f64,
    pub cpu_fraction: f64,
    pub run_queue_wait_fraction: Option<f64>,
    pub other_fraction: f64,
}

/// Samples grouped by their number of involuntary switches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SwitchGroup {
    pub label: String,
    pub min_switches: u64,
    pub max_switches: Option<u64>,
    pub samples: usize,
    pub median_elapsed_ms: f64,
    /// Median elapsed of the group / median elapsed of all samples.
    pub ratio_to_median: f64,
    pub mean_run_delay_ms: Option<f64>,
}

/// What involuntary switches cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SwitchCost {
    pub groups: Vec<SwitchGroup>,
    /// Mean of (elapsed − CPU) / involuntary switches over samples with at least one.
    pub mean_ms_per_involuntary_switch: Option<f64>,
    /// One sentence: "samples with ≥5 involuntary switches took 3.1× the median".
    pub headline: String,
}

/// The analysis of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopSummary {
    pub samples: usize,
    pub elapsed_ms: Distribution,
    pub cpu_ms: Distribution,
    pub run_delay_ms: Option<Distribution>,
    pub involuntary: Distribution,
    pub voluntary: Distribution,
    /// Elapsed / nominal, with edges 1.1, 1.5, 2, 4.
    pub relative: Histogram,
    /// Elapsed in ms on the custom edges, when given.
    pub buckets: Option<Histogram>,
    pub split: Split,
    pub switch_cost: SwitchCost,
    pub slowest: LoopSample,
}

/// What was actually applied to the probe thread (read back from the kernel).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Applied {
    pub policy: String,
    pub nice: i32,
    pub slice_ns: Option<u64>,
    pub cpus: Vec<usize>,
}

/// `ordo probe loop --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoopReport {
    /// "probe-loop".
    #[schemars(extend("const" = "probe-loop"))]
    pub kind: String,
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub label: String,
    pub config: LoopConfig,
    pub iterations: u64,
    pub nominal_ns: u64,
    pub ns_per_iteration: f64,
    pub applied: Applied,
    pub schedstat: bool,
    /// Stopped early (Ctrl-C / SIGTERM, or a cancel token): the summary and `samples` cover the
    /// `summary.samples` samples completed of the `config.samples` asked for.
    #[serde(default)]
    pub interrupted: bool,
    pub summary: LoopSummary,
    pub samples: Vec<LoopSample>,
    pub warnings: Vec<String>,
    /// Present on a top-level report; omitted inside a compare report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<Fingerprint>,
}

/// Which runs to compare.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareConfig {
    /// Settings shared by every run (its `load` is the "loaded" condition when `quiet_vs_loaded`).
    pub base: LoopConfig,
    /// Run once without load and once with `base.load` (or one busy thread per CPU when that is none).
    pub quiet_vs_loaded: bool,
    /// One run (or one quiet/loaded pair) per footprint, MiB.
    pub footprints: Option<Vec<usize>>,
}

/// One row of the side-by-side table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareRow {
    pub label: String,
    /// One fraction (0..=1) per column.
    pub fractions: Vec<f64>,
}

/// `ordo probe loop --compare --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareReport {
    /// "probe-compare".
    #[schemars(extend("const" = "probe-compare"))]
    pub kind: String,
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub columns: Vec<String>,
    pub nominal_ns: u64,
    /// "relative" or "ms": which histogram the rows come from.
    pub unit: String,
    pub rows: Vec<CompareRow>,
    pub runs: Vec<LoopReport>,
    /// Stopped early (Ctrl-C / SIGTERM): the last of `runs` may be partial (its own `interrupted` says)
    /// and the planned runs in `not_run` never started. With fewer than two runs nothing was compared.
    #[serde(default)]
    pub interrupted: bool,
    /// Labels of planned runs that did not start because of the interruption.
    #[serde(default)]
    pub not_run: Vec<String>,
    pub fingerprint: Option<Fingerprint>,
}

/// Per-second figures over one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rates {
    /// CPU time / wall time × 100 (can exceed 100 for several threads).
    pub cpu_pct: f64,
    /// User and system shares (tick resolution; None per thread when the interval saw no tick).
    pub user_pct: f64,
    pub sys_pct: f64,
    pub voluntary_per_s: f64,
    pub involuntary_per_s: f64,
    /// Run-queue wait, ms per second of wall time (None without schedstat).
    pub run_delay_ms_per_s: Option<f64>,
    /// Run-queue wait per context switch, µs (None without schedstat or without switches).
    pub run_delay_us_per_switch: Option<f64>,
    pub migrations_per_s: Option<f64>,
}

/// One thread's line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadRates {
    pub tid: i32,
    pub name: String,
    pub state: char,
    pub processor: Option<u32>,
    pub policy: Option<String>,
    pub nice: i64,
    #[serde(flatten)]
    pub rates: Rates,
}

/// The system's CPU pressure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PsiRates {
    /// The kernel's 10-second average, %.
    pub some_avg10: f64,
    /// Share of this interval in which some runnable task waited for a CPU, %.
    pub some_pct: f64,
    pub full_avg10: Option<f64>,
    pub full_pct: Option<f64>,
}

/// `ordo probe pid --json`: one per interval (JSON lines).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PidReport {
    /// "probe-pid".
    #[schemars(extend("const" = "probe-pid"))]
    pub kind: String,
    #[schemars(extend("const" = 1))]
    pub version: u32,
    pub pid: i32,
    pub name: String,
    /// 1, 2, ...
    pub seq: u64,
    /// Seconds since the first sample, at the end of this interval.
    pub t_s: f64,
    pub interval_s: f64,
    pub threads: usize,
    pub process: Rates,
    /// Counters over the interval, for callers that want totals rather than rates.
    pub delta: ProcessSnapshot,
    pub per_thread: Vec<ThreadRates>,
    pub psi: Option<PsiRates>,
    /// Figures this kernel or these permissions do not allow, with the reason.
    pub unavailable: Vec<String>,
    /// The last report of a watch stopped by Ctrl-C / SIGTERM: its interval ends at the interruption, so
    /// it is usually shorter than the others (`interval_s` says how long; the rates are per second).
    #[serde(default)]
    pub interrupted: bool,
}
