//! Knob names as written in experiment files (`sysctl:vm.swappiness`, `policy`, `cgroup:cpu.weight`, ...)
//! and the value syntaxes of the per-thread knobs (policies, CPU lists).

use std::fmt;
use std::str::FromStr;

use super::KnobError;

/// A per-thread scheduling knob of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadKnob {
    /// other, batch, idle, fifo:P, rr:P
    Policy,
    /// -20..=19
    Nice,
    /// per-task EEVDF slice in ns (sched_setattr's sched_runtime; kernel >= 6.12)
    Slice,
    /// CPU list such as `0-1,3`
    Affinity,
}

impl ThreadKnob {
    pub fn name(self) -> &'static str {
        match self {
            ThreadKnob::Policy => "policy",
            ThreadKnob::Nice => "nice",
            ThreadKnob::Slice => "slice",
            ThreadKnob::Affinity => "affinity",
        }
    }
}

/// Where a knob acts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole machine (sysctl, debugfs): needs root.
    System,
    /// The target's cgroup.
    Cgroup,
    /// Each selected thread of the target.
    Thread,
    /// Substituted into the target's command; nothing on the machine changes.
    Param,
}

/// One knob.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KnobId {
    Sysctl(String),
    Debugfs(String),
    Thread(ThreadKnob),
    Cgroup(String),
    Param(String),
}

impl KnobId {
    pub fn scope(&self) -> Scope {
        match self {
            KnobId::Sysctl(_) | KnobId::Debugfs(_) => Scope::System,
            KnobId::Cgroup(_) => Scope::Cgroup,
            KnobId::Thread(_) => Scope::Thread,
            KnobId::Param(_) => Scope::Param,
        }
    }
}

impl fmt::Display for KnobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobId::Sysctl(n) => write!(f, "sysctl:{n}"),
            KnobId::Debugfs(n) => write!(f, "debugfs:{n}"),
            KnobId::Thread(t) => f.write_str(t.name()),
            KnobId::Cgroup(n) => write!(f, "cgroup:{n}"),
            KnobId::Param(n) => write!(f, "param:{n}"),
        }
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && !s.contains("..")
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

impl FromStr for KnobId {
    type Err = KnobError;

    fn from_str(s: &str) -> Result<Self, KnobError> {
        let bad = || KnobError::UnknownKnob(s.to_string());
        let s = s.trim();
        let thread = |t: &str| match t {
            "policy" => Some(ThreadKnob::Policy),
            "nice" => Some(ThreadKnob::Nice),
            "slice" => Some(ThreadKnob::Slice),
            "affinity" => Some(ThreadKnob::Affinity),
            _ => None,
        };
        if let Some(t) = thread(s) {
            return Ok(KnobId::Thread(t));
        }
        let Some((kind, name)) = s.split_once(':') else {
            if matches!(
                s,
                "cpu.weight" | "cpu.max" | "cpu.shares" | "cpu.cfs_quota_us" | "cpu.cfs_period_us"
            ) {
                return Ok(KnobId::Cgroup(s.to_string()));
            }
            return Err(bad());
        };
        match kind {
            "thread" => thread(name).map(KnobId::Thread).ok_or_else(bad),
            "sysctl" if valid_name(name) => Ok(KnobId::Sysctl(name.to_string())),
            "debugfs" if valid_name(name) && !name.contains('.') => {
                Ok(KnobId::Debugfs(name.to_string()))
            }
            "cgroup" if valid_name(name) && name.starts_with("cpu.") => {
                Ok(KnobId::Cgroup(name.to_string()))
            }
            "param" if valid_name(name) => Ok(KnobId::Param(name.to_string())),
            _ => Err(bad()),
        }
    }
}

/// A scheduling policy value: `other`, `batch`, `idle`, `fifo:P` or `rr:P` (P in 1..=99). Returns the libc
/// policy constant and priority.
pub fn parse_policy(s: &str) -> Result<(i32, i32), String> {
    let s = s.trim().to_ascii_lowercase();
    let (name, prio) = match s.split_once(':') {
        Some((n, p)) => (
            n.to_string(),
            Some(
                p.parse::<i32>()
                    .map_err(|_| format!("priority `{p}` is not a number"))?,
            ),
        ),
        None => (s.clone(), None),
    };
    let policy = match name.as_str() {
        "other" | "normal" => libc::SCHED_OTHER,
        "batch" => libc::SCHED_BATCH,
        "idle" => libc::SCHED_IDLE,
        "fifo" => libc::SCHED_FIFO,
        "rr" => libc::SCHED_RR,
        _ => {
            return Err(format!(
                "unknown policy `{name}` (other, batch, idle, fifo:P, rr:P)"
            ));
        }
    };
    let realtime = policy == libc::SCHED_FIFO || policy == libc::SCHED_RR;
    match (realtime, prio) {
        (true, Some(p)) if (1..=99).contains(&p) => Ok((policy, p)),
        (true, Some(p)) => Err(format!("real-time priority {p} is outside 1..=99")),
        (true, None) => Err(format!(
            "{name} needs a priority: {name}:P with P in 1..=99"
        )),
        (false, None) | (false, Some(0)) => Ok((policy, 0)),
        (false, Some(p)) => Err(format!("{name} takes no priority (got {p})")),
    }
}

pub(crate) use crate::cpus::{format_list as format_cpu_list, parse_list as parse_cpu_list};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_names_round_trip() {
        for s in [
            "sysctl:vm.swappiness",
            "debugfs:base_slice_ns",
            "policy",
            "nice",
            "slice",
            "affinity",
            "cgroup:cpu.weight",
            "param:threads",
        ] {
            let k: KnobId = s.parse().unwrap();
            assert_eq!(k.to_string(), s);
        }
        assert_eq!(
            "cpu.max".parse::<KnobId>().unwrap(),
            KnobId::Cgroup("cpu.max".into())
        );
        assert_eq!(
            "thread:nice".parse::<KnobId>().unwrap(),
            KnobId::Thread(ThreadKnob::Nice)
        );
        for bad in [
            "sysctl:../etc/passwd",
            "sysctl:",
            "swappiness",
            "debugfs:a/b",
            "cgroup:memory.max",
        ] {
            assert!(bad.parse::<KnobId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn policies() {
        assert_eq!(parse_policy("rr:10").unwrap(), (libc::SCHED_RR, 10));
        assert_eq!(parse_policy("other").unwrap(), (libc::SCHED_OTHER, 0));
        assert!(parse_policy("fifo").is_err());
        assert!(parse_policy("fifo:100").is_err());
        assert!(parse_policy("batch:3").is_err());
        assert!(parse_policy("deadline").is_err());
    }
}
