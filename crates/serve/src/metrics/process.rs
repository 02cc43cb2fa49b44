//! The families every Prometheus exporter has — `process_*` (CPU, memory, file descriptors, start time),
//! read from /proc/self at each scrape — and `ordo_build_info`, so the usual dashboards and alerts (memory
//! growth, fd exhaustion, restarts, which version runs) work on ordo without anything else installed.
//! Nothing here is on the request path.

use ordo_sys::ProcRoot;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What /proc says about this process now (a field it could not read is left out of the scrape).
#[derive(Debug, Default, PartialEq)]
pub(super) struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessSample {
    /// Reads /proc/self (and /proc/stat's boot time, for the start time).
    pub(super) fn read() -> Self {
        let proc = ProcRoot::new("/proc");
        let pid = std::process::id() as i32;
        let mut s = ProcessSample::default();
        if let Ok(st) = proc.stat(pid) {
            s.cpu_seconds = Some((st.utime_ns + st.stime_ns) as f64 / 1e9);
            s.virtual_bytes = Some(st.vsize_bytes);
            let boot = proc.read("stat").ok().and_then(|t| boot_time(&t));
            s.start_time_seconds = boot
                .map(|b| b as f64 + st.starttime_ticks as f64 / ordo_sys::procfs::clk_tck() as f64);
        }
        if let Ok(status) = proc.status(pid) {
            s.resident_bytes = status.vm_rss_kb.map(|kb| kb * 1024);
        }
        s.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        s.max_fds = proc
            .read("self/limits")
            .ok()
            .and_then(|t| max_open_files(&t));
        s
    }
}

/// `btime` (boot time, seconds since the epoch) from /proc/stat.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` from /proc/PID/limits (None when unlimited or unreadable).
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

/// Writes the `process_*` families and `ordo_build_info` at each scrape (registered without a prefix).
#[derive(Debug)]
pub(super) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = ProcessSample::read();
        if let Some(v) = s.cpu_seconds {
            let m = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(v).encode(m)?;
        }
        let gauges: [(&str, &str, Option<f64>); 5] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes.map(|v| v as f64),
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes.map(|v| v as f64),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds.map(|v| v as f64),
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds.map(|v| v as f64),
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                s.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(v).encode(m)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "ordo_build_info",
            "The running ordo's version (always 1)",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(1i64).encode(family.encode_family(&VersionLabel {
            version: env!("CARGO_PKG_VERSION").to_string(),
        })?)?;
        Ok(())
    }
}

/// Seconds since the epoch now (for tests that compare the start time with the clock).
#[cfg(test)]
fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_text_is_parsed() {
        assert_eq!(
            boot_time("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            20000                20000                files     \n";
        assert_eq!(max_open_files(limits), Some(20_000));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
    }

    #[test]
    fn this_process_is_read() {
        let s = ProcessSample::read();
        assert!(s.resident_bytes.is_some_and(|b| b > 1 << 20), "{s:?}");
        assert!(s.open_fds.is_some_and(|n| n >= 3), "{s:?}");
        assert!(s.cpu_seconds.is_some_and(|c| c >= 0.0), "{s:?}");
        let start = s.start_time_seconds.expect("start time");
        let now = now_seconds();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start} vs {now}"
        );
    }
}
