//! The machine a measurement ran on: kernel, timer frequency, preemption model, CPU, memory, sched_ext
//! state, clocksource and governor — stored with every result so runs from different kernels and machines
//! can be compared (seeds 001 and 002 compare kernels). Each figure that can come from more than one
//! place says which source it came from.

use std::io::Read;
use std::path::{Path, PathBuf};

pub use ordo_results::machine::Fingerprint;

/// Where the fingerprint reads from: the real machine by default, a fixture tree in tests.
#[derive(Clone, Debug)]
pub struct Sources {
    pub proc: PathBuf,
    pub sys: PathBuf,
    pub boot: PathBuf,
    /// Sample /proc/timer_list twice (200 ms apart) to estimate CONFIG_HZ when no kernel config is found.
    pub estimate_hz: bool,
}

impl Default for Sources {
    fn default() -> Self {
        Sources {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            boot: PathBuf::from("/boot"),
            estimate_hz: true,
        }
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Find `CONFIG_<key>=value` in kernel config text.
pub(crate) fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix('='))
            .map(|v| v.trim().trim_matches('"'))
    })
}

/// The preemption model a kernel config selects: (model, dynamic).
pub(crate) fn config_preemption(config: &str) -> (Option<String>, bool) {
    let y = |k: &str| config_value(config, k) == Some("y");
    let dynamic = y("CONFIG_PREEMPT_DYNAMIC");
    let model = if y("CONFIG_PREEMPT_RT") {
        Some("rt")
    } else if y("CONFIG_PREEMPT_LAZY") {
        Some("lazy")
    } else if y("CONFIG_PREEMPT") {
        Some("full")
    } else if y("CONFIG_PREEMPT_VOLUNTARY") {
        Some("voluntary")
    } else if y("CONFIG_PREEMPT_NONE") {
        Some("none")
    } else {
        None
    };
    (model.map(String::from), dynamic)
}

/// The mode in /sys/kernel/debug/sched/preempt: "none voluntary (full) lazy" → "full".
pub(crate) fn parse_debugfs_preempt(text: &str) -> Option<String> {
    let open = text.find('(')?;
    let close = text[open..].find(')')? + open;
    Some(text[open + 1..close].trim().to_string()).filter(|s| !s.is_empty())
}

/// The preemption model from `uname -v`: PREEMPT_RT → "rt", PREEMPT_DYNAMIC → "dynamic", PREEMPT → "full".
pub(crate) fn uname_preemption(version: &str) -> Option<String> {
    let words: Vec<&str> = version.split_whitespace().collect();
    if words.contains(&"PREEMPT_RT") {
        Some("rt".into())
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        Some("dynamic".into())
    } else if words.contains(&"PREEMPT_LAZY") {
        Some("lazy".into())
    } else if words.contains(&"PREEMPT") {
        Some("full".into())
    } else {
        None
    }
}

/// Estimate HZ from two /proc/timer_list readings: Δjiffies / Δ"now at" — snapped to 100, 250, 300 or
/// 1000 when within 10%.
pub fn estimate_hz(first: &str, second: &str) -> Option<u32> {
    fn read(t: &str) -> Option<(u64, u64)> {
        let now = t.lines().find_map(|l| {
            l.strip_prefix("now at ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        })?;
        let jiffies = t.lines().find_map(|l| {
            l.trim()
                .strip_prefix("jiffies:")
                .and_then(|n| n.trim().parse::<u64>().ok())
        })?;
        Some((now, jiffies))
    }
    let (n1, j1) = read(first)?;
    let (n2, j2) = read(second)?;
    if n2 <= n1 || j2 <= j1 {
        return None;
    }
    let hz = (j2 - j1) as f64 / ((n2 - n1) as f64 / 1e9);
    [100u32, 250, 300, 1000]
        .into_iter()
        .find(|&c| (hz - c as f64).abs() <= c as f64 * 0.1)
}

fn read_kernel_config(src: &Sources, release: &str) -> Option<(String, String)> {
    let gz = src.proc.join("config.gz");
    if let Ok(f) = std::fs::File::open(&gz) {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(f)
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some((text, "/proc/config.gz".into()));
        }
    }
    let boot = src.boot.join(format!("config-{release}"));
    if let Ok(text) = std::fs::read_to_string(&boot) {
        return Some((text, format!("/boot/config-{release}")));
    }
    None
}

/// Collect from the running machine.
pub fn collect() -> Fingerprint {
    collect_from(&Sources::default())
}

/// Collect from the given trees. Never fails: what cannot be read is left empty or None.
pub fn collect_from(src: &Sources) -> Fingerprint {
    let kernel = src.proc.join("sys/kernel");
    let mut fp = Fingerprint {
        hostname: read_trim(&kernel.join("hostname")).unwrap_or_default(),
        kernel_release: read_trim(&kernel.join("osrelease")).unwrap_or_default(),
        kernel_version: read_trim(&kernel.join("version")).unwrap_or_default(),
        arch: std::env::consts::ARCH.to_string(),
        config_hz_source: "unknown".into(),
        preemption_source: "unknown".into(),
        ..Default::default()
    };
    let config = read_kernel_config(src, &fp.kernel_release);
    if let Some((text, source)) = &config {
        if let Some(hz) = config_value(text, "CONFIG_HZ").and_then(|v| v.parse().ok()) {
            fp.config_hz = Some(hz);
            fp.config_hz_source = source.clone();
        }
    }
    if fp.config_hz.is_none() && src.estimate_hz {
        let tl = src.proc.join("timer_list");
        if let Some(a) = read_trim(&tl) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            if let Some(hz) = read_trim(&tl).and_then(|b| estimate_hz(&a, &b)) {
                fp.config_hz = Some(hz);
                fp.config_hz_source = "estimated from /proc/timer_list".into();
            }
        }
    }
    // Preemption: the mode in force (debugfs), then the boot parameter, then the config's default,
    // then what uname -v says.
    let (cfg_model, cfg_dynamic) = config
        .as_ref()
        .map(|(t, _)| config_preemption(t))
        .unwrap_or((None, false));
    let uname_model = uname_preemption(&fp.kernel_version);
    let dynamic = cfg_dynamic || uname_model.as_deref() == Some("dynamic");
    fp.preempt_dynamic = if config.is_some() || uname_model.is_some() {
        Some(dynamic)
    } else {
        None
    };
    let cmdline_mode = read_trim(&src.proc.join("cmdline")).and_then(|c| {
        c.split_whitespace()
            .find_map(|w| w.strip_prefix("preempt=").map(String::from))
    });
    if let Some(m) = read_trim(&src.sys.join("kernel/debug/sched/preempt"))
        .as_deref()
        .and_then(parse_debugfs_preempt)
    {
        fp.preemption = Some(m);
        fp.preemption_source = "/sys/kernel/debug/sched/preempt".into();
    } else if let (true, Some(m)) = (dynamic, cmdline_mode) {
        fp.preemption = Some(m);
        fp.preemption_source = "/proc/cmdline preempt=".into();
    } else if let (Some(m), Some((_, source))) = (cfg_model, &config) {
        fp.preemption = Some(m);
        fp.preemption_source = source.clone();
    } else if let Some(m) = uname_model {
        fp.preemption = Some(m);
        fp.preemption_source = "uname -v".into();
    }
    // CPU and memory.
    let cpuinfo = std::fs::read_to_string(src.proc.join("cpuinfo")).unwrap_or_default();
    fp.cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "model name" | "Hardware" | "cpu model" | "Model")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let online = read_trim(&src.sys.join("devices/system/cpu/online"))
        .and_then(|s| crate::cpus::parse_list(&s).ok())
        .map(|v| v.len())
        .unwrap_or(0);
    let listed = cpuinfo
        .lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count();
    fp.cores = if online > 0 { online } else { listed };
    fp.memory_bytes = std::fs::read_to_string(src.proc.join("meminfo"))
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0);
    // Scheduler extras.
    let sx = src.sys.join("kernel/sched_ext");
    fp.sched_ext = match read_trim(&sx.join("state")) {
        Some(state) => match read_trim(&sx.join("root/ops")) {
            Some(ops) if state == "enabled" => format!("enabled ({ops})"),
            _ => state,
        },
        None => "absent".into(),
    };
    fp.clocksource = read_trim(
        &src.sys
            .join("devices/system/clocksource/clocksource0/current_clocksource"),
    );
    fp.governor = read_trim(
        &src.sys
            .join("devices/system/cpu/cpu0/cpufreq/scaling_governor"),
    );
    fp.base_slice_ns =
        read_trim(&src.sys.join("kernel/debug/sched/base_slice_ns")).and_then(|s| s.parse().ok());
    fp.schedstat =
        src.proc.join("self/schedstat").exists() || src.proc.join("1/schedstat").exists();
    fp.psi = std::fs::read_to_string(src.proc.join("pressure/cpu")).is_ok();
    fp.collected_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    fp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preemption_sources() {
        assert_eq!(
            parse_debugfs_preempt("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        assert_eq!(parse_debugfs_preempt("none"), None);
        assert_eq!(
            uname_preemption("#1 SMP PREEMPT_DYNAMIC Mon").as_deref(),
            Some("dynamic")
        );
        assert_eq!(
            uname_preemption("#1 SMP PREEMPT Mon").as_deref(),
            Some("full")
        );
        assert_eq!(
            uname_preemption("#1 SMP PREEMPT_RT Mon").as_deref(),
            Some("rt")
        );
        assert_eq!(uname_preemption("#1 SMP Mon"), None);
        let cfg = "CONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_DYNAMIC=y\n";
        assert_eq!(config_value(cfg, "CONFIG_HZ"), Some("250"));
        assert_eq!(config_preemption(cfg), (Some("none".into()), true));
    }

    #[test]
    fn hz_estimate() {
        let a = "now at 1000000000 nsecs\n  jiffies: 5000\n";
        let b = "now at 2000000000 nsecs\n  jiffies: 5249\n";
        assert_eq!(estimate_hz(a, b), Some(250));
        let c = "now at 2000000000 nsecs\n  jiffies: 5600\n";
        assert_eq!(estimate_hz(a, c), None);
        assert_eq!(estimate_hz(a, a), None);
    }

    #[test]
    fn real_machine_has_basics() {
        let fp = collect_from(&Sources {
            estimate_hz: false,
            ..Default::default()
        });
        assert!(!fp.kernel_release.is_empty());
        assert!(fp.cores >= 1);
        assert!(fp.memory_bytes > 0);
        let j = serde_json::to_string(&fp).unwrap();
        assert_eq!(serde_json::from_str::<Fingerprint>(&j).unwrap(), fp);
    }
}
