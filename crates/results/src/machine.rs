//! The machine and process data every result embeds — the machine fingerprint, a scheduling policy, a
//! process's counters — as plain data. ordo-sys gathers them from /proc, /sys and system calls; the
//! results, and the readers of results, need only these types, never the Linux layer.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A description of the machine and kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Fingerprint {
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v` (build number, flags such as PREEMPT_DYNAMIC, build date).
    pub kernel_version: String,
    pub arch: String,
    /// The timer interrupt frequency (CONFIG_HZ).
    pub config_hz: Option<u32>,
    /// "/proc/config.gz", "/boot/config-RELEASE", "estimated from /proc/timer_list" or "unknown".
    pub config_hz_source: String,
    /// "none", "voluntary", "full", "lazy" or "rt"; with PREEMPT_DYNAMIC, the mode in force if known.
    pub preemption: Option<String>,
    /// Where `preemption` came from (debugfs, boot command line, kernel config, uname -v) or "unknown".
    pub preemption_source: String,
    /// Whether the preemption model can be changed at boot or run time (CONFIG_PREEMPT_DYNAMIC).
    pub preempt_dynamic: Option<bool>,
    pub cpu_model: String,
    /// Logical CPUs online.
    pub cores: usize,
    pub memory_bytes: u64,
    /// /sys/kernel/sched_ext/state ("enabled", "disabled", ...) plus the loaded scheduler, or "absent".
    pub sched_ext: String,
    pub clocksource: Option<String>,
    /// cpufreq scaling governor of CPU 0, if the machine has cpufreq.
    pub governor: Option<String>,
    /// EEVDF base slice from debugfs, when readable.
    pub base_slice_ns: Option<u64>,
    /// Whether /proc/PID/schedstat exists (run-queue wait is measurable).
    pub schedstat: bool,
    /// Whether /proc/pressure/cpu is readable.
    pub psi: bool,
    /// Seconds since the Unix epoch when collected.
    pub collected_unix_s: u64,
}

/// The kernel's policy numbers (include/uapi/linux/sched.h), as `/proc/PID/stat` field 41 and
/// sched_getattr write them.
const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const SCHED_DEADLINE: u32 = 6;
const SCHED_EXT: u32 = 7;

/// A thread's scheduling policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// SCHED_OTHER (EEVDF / CFS), the default.
    Other,
    /// SCHED_BATCH: CPU-bound, never preempts on wake-up.
    Batch,
    /// SCHED_IDLE: runs only when nothing else wants the CPU.
    Idle,
    /// SCHED_FIFO with a real-time priority 1..=99.
    Fifo(u32),
    /// SCHED_RR with a real-time priority 1..=99.
    Rr(u32),
    /// SCHED_DEADLINE (read only here).
    Deadline,
    /// SCHED_EXT (a BPF scheduler; read only here).
    Ext,
    /// A policy number this crate does not know.
    Unknown(u32),
}

impl Policy {
    /// The kernel's policy number and real-time priority.
    pub fn to_raw(self) -> (u32, u32) {
        match self {
            Policy::Other => (SCHED_OTHER, 0),
            Policy::Batch => (SCHED_BATCH, 0),
            Policy::Idle => (SCHED_IDLE, 0),
            Policy::Fifo(p) => (SCHED_FIFO, p),
            Policy::Rr(p) => (SCHED_RR, p),
            Policy::Deadline => (SCHED_DEADLINE, 0),
            Policy::Ext => (SCHED_EXT, 0),
            Policy::Unknown(n) => (n, 0),
        }
    }

    /// From the kernel's policy number (as in /proc/PID/stat field 41) and real-time priority.
    pub fn from_raw(policy: u32, rt_priority: u32) -> Self {
        match policy {
            SCHED_OTHER => Policy::Other,
            SCHED_BATCH => Policy::Batch,
            SCHED_IDLE => Policy::Idle,
            SCHED_FIFO => Policy::Fifo(rt_priority),
            SCHED_RR => Policy::Rr(rt_priority),
            SCHED_DEADLINE => Policy::Deadline,
            SCHED_EXT => Policy::Ext,
            n => Policy::Unknown(n),
        }
    }

    /// SCHED_OTHER or SCHED_BATCH: the policies a per-task slice and nice apply to.
    pub fn is_fair(self) -> bool {
        matches!(self, Policy::Other | Policy::Batch)
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo(_) | Policy::Rr(_))
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Other => f.write_str("other"),
            Policy::Batch => f.write_str("batch"),
            Policy::Idle => f.write_str("idle"),
            Policy::Fifo(p) => write!(f, "fifo:{p}"),
            Policy::Rr(p) => write!(f, "rr:{p}"),
            Policy::Deadline => f.write_str("deadline"),
            Policy::Ext => f.write_str("ext"),
            Policy::Unknown(n) => write!(f, "policy{n}"),
        }
    }
}

/// The error of parsing a policy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid scheduling policy {0:?}: expected other, batch, idle, fifo:P or rr:P with P in 1..=99"
)]
pub struct ParsePolicyError(pub String);

impl FromStr for Policy {
    type Err = ParsePolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParsePolicyError(s.to_string());
        let lower = s.trim().to_ascii_lowercase();
        let (name, prio) = match lower.split_once(':') {
            Some((n, p)) => (
                n.to_string(),
                Some(p.trim().parse::<u32>().map_err(|_| err())?),
            ),
            None => (lower.clone(), None),
        };
        let rt = |p: Option<u32>| match p {
            Some(p) if (1..=99).contains(&p) => Ok(p),
            _ => Err(err()),
        };
        match (name.as_str(), prio) {
            ("other" | "normal" | "sched_other", None) => Ok(Policy::Other),
            ("batch" | "sched_batch", None) => Ok(Policy::Batch),
            ("idle" | "sched_idle", None) => Ok(Policy::Idle),
            ("fifo" | "sched_fifo", p) => Ok(Policy::Fifo(rt(p)?)),
            ("rr" | "sched_rr", p) => Ok(Policy::Rr(rt(p)?)),
            _ => Err(err()),
        }
    }
}

impl Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Written as its [`Display`](fmt::Display) text: other, batch, idle, fifo:P, rr:P, deadline, ext or policyN.
impl schemars::JsonSchema for Policy {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Policy".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A scheduling policy: other, batch, idle, fifo:P, rr:P (P in 1..=99), deadline, ext or policyN."
        })
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "deadline" => Ok(Policy::Deadline),
            "ext" => Ok(Policy::Ext),
            _ => match s.strip_prefix("policy").and_then(|n| n.parse().ok()) {
                Some(n) => Ok(Policy::Unknown(n)),
                None => s.parse().map_err(serde::de::Error::custom),
            },
        }
    }
}

/// A process's counters at one moment (or, after `delta`, over an interval).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessSnapshot {
    /// CLOCK_MONOTONIC when the sample was taken, ns; after `delta`, the interval's length.
    pub at_ns: u64,
    /// Live threads in this sample.
    pub threads: usize,
    /// User and system CPU of the whole process (tick resolution; includes exited threads).
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Sum of the threads' run-queue wait, ns (0 when `schedstat` is false).
    pub run_delay_ns: u64,
    /// Sum of the threads' schedstat timeslices.
    pub timeslices: u64,
    /// Sum of the threads' schedstat CPU time, ns (precise; 0 when `schedstat` is false).
    pub cpu_ns: u64,
    /// Sum of the threads' migrations; None without /proc/PID/task/TID/sched.
    pub migrations: Option<u64>,
    /// Resident set size, kB.
    pub rss_kb: Option<u64>,
    /// Whether schedstat was readable (else run_delay_ns, timeslices and cpu_ns are 0).
    pub schedstat: bool,
}

impl ProcessSnapshot {
    /// Counters accumulated between `earlier` and `self`; `at_ns` becomes the interval length, `threads`
    /// and `rss_kb` are the later values.
    pub fn delta(&self, earlier: &Self) -> Self {
        ProcessSnapshot {
            at_ns: self.at_ns.saturating_sub(earlier.at_ns),
            threads: self.threads,
            utime_ns: self.utime_ns.saturating_sub(earlier.utime_ns),
            stime_ns: self.stime_ns.saturating_sub(earlier.stime_ns),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
            run_delay_ns: self.run_delay_ns.saturating_sub(earlier.run_delay_ns),
            timeslices: self.timeslices.saturating_sub(earlier.timeslices),
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            migrations: match (self.migrations, earlier.migrations) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            },
            rss_kb: self.rss_kb,
            schedstat: self.schedstat && earlier.schedstat,
        }
    }

    /// Total switches.
    pub fn switches(&self) -> u64 {
        self.voluntary_switches + self.involuntary_switches
    }

    /// CPU time: schedstat's precise figure when present, else utime + stime.
    pub fn best_cpu_ns(&self) -> u64 {
        if self.schedstat && self.cpu_ns > 0 {
            self.cpu_ns
        } else {
            self.utime_ns + self.stime_ns
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_parse_and_display() {
        for s in ["other", "batch", "idle", "fifo:10", "rr:99"] {
            let p: Policy = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
            let j = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Policy>(&j).unwrap(), p);
        }
        assert_eq!("FIFO:5".parse::<Policy>().unwrap(), Policy::Fifo(5));
        for bad in ["fifo", "fifo:0", "rr:100", "other:3", "deadline", "x"] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }
}
