//! The machine a result came from, read leniently from the ordo-sys fingerprint stored with it (any missing
//! field is simply not shown), and the short "kernel @ host" label that names inputs in comparisons.

use serde_json::Value;

/// The parts of a fingerprint the report shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub config_hz: Option<u64>,
    pub preemption: Option<String>,
    pub cpu_model: Option<String>,
    pub cores: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub sched_ext: Option<String>,
}

impl Machine {
    /// Read a fingerprint object (unknown fields ignored, wrong types treated as absent).
    pub fn from_value(v: Option<&Value>) -> Machine {
        let Some(v) = v else {
            return Machine::default();
        };
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .filter(|s| !s.is_empty())
        };
        let n = |k: &str| v.get(k).and_then(Value::as_u64);
        Machine {
            hostname: s("hostname").or_else(|| s("host")),
            kernel_release: s("kernel_release").or_else(|| s("kernel")),
            config_hz: n("config_hz"),
            preemption: s("preemption"),
            cpu_model: s("cpu_model"),
            cores: n("cores"),
            memory_bytes: n("memory_bytes"),
            sched_ext: s("sched_ext"),
        }
    }

    /// "6.8.0-45-generic @ web1", or whichever half is known; None when neither is.
    pub fn label(&self) -> Option<String> {
        match (&self.kernel_release, &self.hostname) {
            (Some(k), Some(h)) => Some(format!("{k} @ {h}")),
            (Some(k), None) => Some(k.clone()),
            (None, Some(h)) => Some(h.clone()),
            (None, None) => None,
        }
    }

    /// Key/value pairs for the page header.
    pub fn facts(&self) -> Vec<(String, String)> {
        let mut f = Vec::new();
        if let Some(h) = &self.hostname {
            f.push(("host".into(), h.clone()));
        }
        if let Some(k) = &self.kernel_release {
            f.push(("kernel".into(), k.clone()));
        }
        if let Some(hz) = self.config_hz {
            f.push(("HZ".into(), hz.to_string()));
        }
        if let Some(p) = &self.preemption {
            f.push(("preempt".into(), p.clone()));
        }
        if let Some(c) = &self.cpu_model {
            f.push(("cpu".into(), c.clone()));
        }
        if let Some(c) = self.cores {
            f.push(("cores".into(), c.to_string()));
        }
        if let Some(m) = self.memory_bytes {
            f.push((
                "memory".into(),
                format!("{:.1} GiB", m as f64 / (1u64 << 30) as f64),
            ));
        }
        if let Some(s) = &self.sched_ext {
            f.push(("sched_ext".into(), s.clone()));
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_is_there() {
        let v: Value = serde_json::json!({"hostname": "web1", "kernel_release": "6.8.0", "cores": 2,
            "config_hz": "not a number", "extra": [1]});
        let m = Machine::from_value(Some(&v));
        assert_eq!(m.label().as_deref(), Some("6.8.0 @ web1"));
        assert_eq!(m.cores, Some(2));
        assert_eq!(m.config_hz, None);
        assert_eq!(Machine::from_value(None).label(), None);
    }
}
