//! Checks made before anything runs: a knob exists, is writable, accepts every level, and can affect the
//! target. Each refusal carries a kind and a reason so no knob is ever swept silently without effect.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use super::apply::Target;
use super::id::{KnobId, ThreadKnob, parse_cpu_list, parse_policy};
use super::root::{SysRoot, kernel_at_least, read_trimmed};
use super::threads::ThreadOps;

/// Why a knob cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The knob was removed from the kernel; the reason names the replacement.
    Removed,
    /// No such file / knob on this machine.
    Missing,
    /// It exists but cannot be written (read-only mount, permissions, lockdown).
    NotWritable,
    /// Not root: system-wide knobs are skipped, never half-applied.
    NotPrivileged,
    /// A level is outside the knob's range or format.
    OutOfRange,
    /// The knob cannot affect the target (e.g. `sched_rr_timeslice_ms` without SCHED_RR threads).
    NoEffect,
    /// The kernel is too old for this knob.
    Unsupported,
}

/// A knob that will not be used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub knob: String,
    pub kind: RefusalKind,
    pub reason: String,
}

impl Refusal {
    pub fn new(knob: &KnobId, kind: RefusalKind, reason: impl Into<String>) -> Self {
        Refusal {
            knob: knob.to_string(),
            kind,
            reason: reason.into(),
        }
    }

    pub fn not_privileged(knob: &KnobId) -> Self {
        Refusal::new(
            knob,
            RefusalKind::NotPrivileged,
            "changing a system-wide knob needs root; skipped (nothing was changed)",
        )
    }

    /// Skipped with a message rather than failing the experiment.
    pub fn is_skip(&self) -> bool {
        self.kind == RefusalKind::NotPrivileged
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            RefusalKind::Removed => "removed",
            RefusalKind::Missing => "missing",
            RefusalKind::NotWritable => "not writable",
            RefusalKind::NotPrivileged => "skipped",
            RefusalKind::OutOfRange => "out of range",
            RefusalKind::NoEffect => "no effect",
            RefusalKind::Unsupported => "unsupported",
        };
        write!(f, "{} refused ({kind}): {}", self.knob, self.reason)
    }
}

impl std::error::Error for Refusal {}

/// Knobs that no longer exist on current kernels, with what replaced them.
pub(crate) fn removed_knob(knob: &KnobId) -> Option<&'static str> {
    match knob {
        KnobId::Sysctl(n) => match n.as_str() {
            "kernel.sched_latency_ns" => Some(
                "moved to debugfs (latency_ns) in Linux 5.13 and removed with EEVDF in 6.6; use the per-task `slice` knob (kernel >= 6.12) or debugfs:base_slice_ns",
            ),
            "kernel.sched_min_granularity_ns" => Some(
                "moved to debugfs in Linux 5.13 and renamed base_slice_ns with EEVDF in 6.6; use debugfs:base_slice_ns or the per-task `slice` knob",
            ),
            "kernel.sched_wakeup_granularity_ns" => Some(
                "moved to debugfs in Linux 5.13 and removed with EEVDF in 6.6 (wake-up preemption follows the slice); use the per-task `slice` knob or debugfs:base_slice_ns",
            ),
            "kernel.sched_migration_cost_ns" => {
                Some("moved to debugfs in Linux 5.13; use debugfs:migration_cost_ns")
            }
            "kernel.sched_nr_migrate" => {
                Some("moved to debugfs in Linux 5.13; use debugfs:nr_migrate")
            }
            "kernel.sched_tunable_scaling" => {
                Some("moved to debugfs in Linux 5.13; use debugfs:tunable_scaling")
            }
            "kernel.sched_compat_yield" => Some("removed in Linux 2.6.39"),
            _ => None,
        },
        KnobId::Debugfs(n) => match n.as_str() {
            "latency_ns" | "wakeup_granularity_ns" => Some(
                "removed with EEVDF in Linux 6.6; use debugfs:base_slice_ns or the per-task `slice` knob (kernel >= 6.12)",
            ),
            "min_granularity_ns" => {
                Some("renamed base_slice_ns with EEVDF in Linux 6.6; use debugfs:base_slice_ns")
            }
            _ => None,
        },
        _ => None,
    }
}

/// The policies a real-time-only sysctl acts on, and their name for messages.
pub fn rt_only(knob: &KnobId) -> Option<(&'static [i32], &'static str)> {
    match knob {
        KnobId::Sysctl(n) => match n.as_str() {
            "kernel.sched_rr_timeslice_ms" => Some((&[libc::SCHED_RR], "SCHED_RR")),
            "kernel.sched_rt_runtime_us" | "kernel.sched_rt_period_us" => {
                Some((&[libc::SCHED_RR, libc::SCHED_FIFO], "SCHED_FIFO/SCHED_RR"))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The knobs one configuration sets that could not act in it, each with why: a real-time-only sysctl
/// while no target thread is real-time there (the configuration's `policy`, else the policies the target's
/// threads were found with — `found`, empty when unknown, which counts as SCHED_OTHER), or the per-task
/// slice under a real-time policy. A check of knob levels alone missed these: in a one-factor-at-a-time or
/// list design `sched_rr_timeslice_ms` ran in configurations whose threads were all SCHED_OTHER.
pub fn no_effect_in(values: &BTreeMap<String, String>, found: &[String]) -> Vec<(String, String)> {
    let policies: Vec<i32> = match values.get("policy") {
        Some(p) => parse_policy(p).map(|(p, _)| vec![p]).unwrap_or_default(),
        None => found
            .iter()
            .filter_map(|p| parse_policy(p).ok().map(|(p, _)| p))
            .collect(),
    };
    let described = match values.get("policy") {
        Some(p) => format!("policy {p}"),
        None if found.is_empty() => "the target's own policy (SCHED_OTHER)".into(),
        None => {
            let mut f = found.to_vec();
            f.sort();
            f.dedup();
            format!("the target's own policy ({})", f.join(", "))
        }
    };
    let mut out = Vec::new();
    for k in values.keys() {
        let Ok(id) = k.parse::<KnobId>() else {
            continue;
        };
        if let Some((needs, label)) = rt_only(&id)
            && !policies.iter().any(|p| needs.contains(p))
        {
            out.push((
                k.clone(),
                format!(
                    "only affects {label} tasks, and no target thread runs {label} with {described}"
                ),
            ));
        }
        if id == KnobId::Thread(ThreadKnob::Slice)
            && !policies.is_empty()
            && policies
                .iter()
                .all(|p| *p == libc::SCHED_FIFO || *p == libc::SCHED_RR)
        {
            out.push((
                k.clone(),
                format!("the per-task slice applies to fair (other/batch) tasks only, not with {described}"),
            ));
        }
    }
    out
}

/// Known ranges of common integer sysctls.
fn sysctl_range(name: &str) -> Option<(i64, i64)> {
    Some(match name {
        "vm.swappiness" => (0, 200),
        "kernel.sched_rr_timeslice_ms" => (1, 1_000_000),
        "kernel.sched_rt_runtime_us" => (-1, i32::MAX as i64),
        "kernel.sched_rt_period_us" => (1, i32::MAX as i64),
        "kernel.sched_autogroup_enabled" | "kernel.sched_schedstats" => (0, 1),
        "kernel.numa_balancing" => (0, 3),
        "kernel.sched_cfs_bandwidth_slice_us" => (1, i32::MAX as i64),
        "vm.stat_interval" => (1, 3600),
        "vm.dirty_ratio" | "vm.dirty_background_ratio" => (0, 100),
        "vm.dirty_expire_centisecs" | "vm.dirty_writeback_centisecs" => (0, i32::MAX as i64),
        "net.core.somaxconn" => (1, i32::MAX as i64),
        "net.core.busy_read" | "net.core.busy_poll" => (0, i32::MAX as i64),
        "net.ipv4.tcp_fastopen" => (0, 0x7ff),
        _ => return None,
    })
}

/// What the checker needs to know about the experiment.
#[derive(Clone, Debug, Default)]
pub struct CheckContext {
    /// The target's pid and selected threads (empty before the target runs, e.g. for `--dry-run`).
    pub target: Target,
    /// The levels of the `policy` knob when the experiment sets it (all configurations use one of them).
    pub policy_levels: Vec<String>,
}

/// Runs the checks against a root and a thread interface.
pub struct Checker<'a> {
    pub root: &'a SysRoot,
    pub threads: &'a dyn ThreadOps,
}

fn ints(s: &str) -> Option<Vec<i64>> {
    s.split_whitespace().map(|x| x.parse().ok()).collect()
}

fn writable(path: &Path) -> Result<(), std::io::Error> {
    std::fs::OpenOptions::new().write(true).open(path).map(drop)
}

impl Checker<'_> {
    /// `Ok(current value)` (empty for parameters and for thread knobs before the target runs), or why not.
    pub fn check(
        &self,
        knob: &KnobId,
        levels: &[String],
        ctx: &CheckContext,
    ) -> Result<String, Refusal> {
        let refuse = |kind, reason: String| Refusal::new(knob, kind, reason);
        match knob {
            KnobId::Param(_) => Ok(String::new()),
            KnobId::Sysctl(name) => {
                let path = self.root.sysctl_path(name);
                let current = self.file_checks(knob, &path)?;
                if let Some((lo, hi)) = sysctl_range(name) {
                    for l in levels {
                        match l.trim().parse::<i64>() {
                            Ok(v) if (lo..=hi).contains(&v) => {}
                            _ => {
                                return Err(refuse(
                                    RefusalKind::OutOfRange,
                                    format!("level `{l}` is outside {lo}..={hi}"),
                                ));
                            }
                        }
                    }
                } else {
                    self.same_format(knob, &current, levels)?;
                }
                self.rt_effect(knob, ctx)?;
                Ok(current)
            }
            KnobId::Debugfs(name) => {
                let debugfs = self.root.join("sys/kernel/debug");
                let path = self.root.debugfs_path(name);
                if !path.exists() {
                    if let Some(why) = removed_knob(knob) {
                        return Err(refuse(RefusalKind::Removed, why.into()));
                    }
                    if !self.root.debugfs_sched_dir().exists() {
                        return Err(refuse(
                            RefusalKind::Missing,
                            format!(
                                "{} does not exist: debugfs is not mounted (mount -t debugfs none {}) or the kernel has no scheduler debugfs",
                                self.root.debugfs_sched_dir().display(),
                                debugfs.display()
                            ),
                        ));
                    }
                }
                let current = self.file_checks(knob, &path)?;
                match name.as_str() {
                    "features" => {
                        for l in levels {
                            let base = l.trim().trim_start_matches("NO_");
                            if !current
                                .split_whitespace()
                                .any(|t| t.trim_start_matches("NO_") == base)
                            {
                                return Err(refuse(
                                    RefusalKind::OutOfRange,
                                    format!(
                                        "`{l}` is not a scheduler feature of this kernel (have: {current})"
                                    ),
                                ));
                            }
                        }
                    }
                    "preempt" => {
                        let modes: Vec<&str> = current
                            .split_whitespace()
                            .map(|t| t.trim_matches(|c| c == '(' || c == ')'))
                            .collect();
                        for l in levels {
                            if !modes.contains(&l.trim()) {
                                return Err(refuse(
                                    RefusalKind::OutOfRange,
                                    format!(
                                        "`{l}` is not a preemption mode here (have: {})",
                                        modes.join(", ")
                                    ),
                                ));
                            }
                        }
                    }
                    "base_slice_ns" => self.int_range(knob, levels, 100_000, 100_000_000)?,
                    _ => self.same_format(knob, &current, levels)?,
                }
                Ok(current)
            }
            KnobId::Cgroup(file) => {
                let Some(pid) = ctx.target.pid else {
                    return Ok(String::new());
                };
                let dir = self
                    .root
                    .cgroup_dir(pid, file)
                    .map_err(|r| refuse(RefusalKind::Missing, r))?;
                let path = dir.join(file);
                if !path.exists() {
                    return Err(refuse(
                        RefusalKind::Missing,
                        format!(
                            "{} does not exist (a process in the root cgroup has no {file}; start the target in its own cgroup, e.g. systemd-run --scope)",
                            path.display()
                        ),
                    ));
                }
                let current = self.file_checks(knob, &path)?;
                match file.as_str() {
                    "cpu.weight" => self.int_range(knob, levels, 1, 10_000)?,
                    "cpu.shares" => self.int_range(knob, levels, 2, 262_144)?,
                    "cpu.cfs_quota_us" => {
                        for l in levels {
                            match l.trim().parse::<i64>() {
                                Ok(-1) => {}
                                Ok(v) if v >= 1000 => {}
                                _ => {
                                    return Err(refuse(
                                        RefusalKind::OutOfRange,
                                        format!("level `{l}`: quota is -1 or >= 1000 us"),
                                    ));
                                }
                            }
                        }
                    }
                    "cpu.max" => {
                        for l in levels {
                            let mut it = l.split_whitespace();
                            let quota_ok = match it.next() {
                                Some("max") => true,
                                Some(q) => q.parse::<u64>().is_ok_and(|q| q >= 1000),
                                None => false,
                            };
                            let period_ok = it.next().is_none_or(|p| {
                                p.parse::<u64>()
                                    .is_ok_and(|p| (1000..=1_000_000).contains(&p))
                            });
                            if !quota_ok || !period_ok || it.next().is_some() {
                                return Err(refuse(
                                    RefusalKind::OutOfRange,
                                    format!(
                                        "level `{l}`: expected `max` or `QUOTA [PERIOD]` in us (quota >= 1000, period 1000..=1000000)"
                                    ),
                                ));
                            }
                        }
                    }
                    _ => self.same_format(knob, &current, levels)?,
                }
                Ok(current)
            }
            KnobId::Thread(t) => self.thread_checks(knob, *t, levels, ctx),
        }
    }

    fn file_checks(&self, knob: &KnobId, path: &Path) -> Result<String, Refusal> {
        let refuse = |kind, reason: String| Refusal::new(knob, kind, reason);
        if !path.exists() {
            if let Some(why) = removed_knob(knob) {
                return Err(refuse(RefusalKind::Removed, why.into()));
            }
            return Err(refuse(
                RefusalKind::Missing,
                format!("{} does not exist on this kernel", path.display()),
            ));
        }
        let current = read_trimmed(path).map_err(|e| {
            let locked = std::fs::read_to_string(path)
                .err()
                .is_some_and(|e| e.raw_os_error() == Some(libc::EPERM));
            if locked {
                refuse(
                    RefusalKind::NotWritable,
                    format!(
                        "reading {} is not permitted (kernel lockdown restricts debugfs): {e}",
                        path.display()
                    ),
                )
            } else {
                refuse(RefusalKind::Missing, e.to_string())
            }
        })?;
        if !self.root.privileged() && !matches!(knob, KnobId::Cgroup(_)) {
            return Err(Refusal::not_privileged(knob));
        }
        writable(path).map_err(|e| {
            refuse(
                RefusalKind::NotWritable,
                format!("{} cannot be opened for writing: {e}", path.display()),
            )
        })?;
        Ok(current)
    }

    fn int_range(&self, knob: &KnobId, levels: &[String], lo: i64, hi: i64) -> Result<(), Refusal> {
        for l in levels {
            match l.trim().parse::<i64>() {
                Ok(v) if (lo..=hi).contains(&v) => {}
                _ => {
                    return Err(Refusal::new(
                        knob,
                        RefusalKind::OutOfRange,
                        format!("level `{l}` is outside {lo}..={hi}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Levels must look like the current value: as many integers when it is numeric.
    fn same_format(&self, knob: &KnobId, current: &str, levels: &[String]) -> Result<(), Refusal> {
        if let Some(cur) = ints(current) {
            for l in levels {
                if ints(l).is_none_or(|v| v.len() != cur.len()) {
                    return Err(Refusal::new(
                        knob,
                        RefusalKind::OutOfRange,
                        format!(
                            "level `{l}` does not match the knob's format (current value `{current}`: {} integer(s))",
                            cur.len()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Real-time-only sysctls must have real-time target threads.
    fn rt_effect(&self, knob: &KnobId, ctx: &CheckContext) -> Result<(), Refusal> {
        let Some((needs, label)) = rt_only(knob) else {
            return Ok(());
        };
        let is_rt = |v: &str| parse_policy(v).is_ok_and(|(p, _)| needs.contains(&p));
        if !ctx.policy_levels.is_empty() {
            let bad: Vec<&String> = ctx.policy_levels.iter().filter(|l| !is_rt(l)).collect();
            if bad.is_empty() {
                return Ok(());
            }
            return Err(Refusal::new(
                knob,
                RefusalKind::NoEffect,
                format!(
                    "only affects {label} tasks, but the experiment's policy levels include {}; in those configurations it would be a silent no-op (set policy to rr:P only)",
                    bad.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let any_rt = ctx.target.tids.iter().any(|&tid| {
            self.threads
                .get(tid, ThreadKnob::Policy)
                .is_ok_and(|v| is_rt(&v))
        });
        if any_rt {
            return Ok(());
        }
        Err(Refusal::new(
            knob,
            RefusalKind::NoEffect,
            format!(
                "only affects {label} tasks and no target thread runs {label}; add `policy = [\"rr:10\"]` to the experiment (or run the target under chrt -r)"
            ),
        ))
    }

    fn thread_checks(
        &self,
        knob: &KnobId,
        t: ThreadKnob,
        levels: &[String],
        ctx: &CheckContext,
    ) -> Result<String, Refusal> {
        let refuse = |kind, reason: String| Refusal::new(knob, kind, reason);
        match t {
            ThreadKnob::Policy => {
                for l in levels {
                    let (p, _) = parse_policy(l).map_err(|r| {
                        refuse(RefusalKind::OutOfRange, format!("level `{l}`: {r}"))
                    })?;
                    if (p == libc::SCHED_FIFO || p == libc::SCHED_RR) && !self.root.privileged() {
                        return Err(refuse(
                            RefusalKind::NotWritable,
                            format!("level `{l}`: real-time policies need root (CAP_SYS_NICE)"),
                        ));
                    }
                }
            }
            ThreadKnob::Nice => {
                self.int_range(knob, levels, -20, 19)?;
                if !self.root.privileged() && levels.iter().any(|l| l.trim().starts_with('-')) {
                    return Err(refuse(
                        RefusalKind::NotWritable,
                        "negative nice values need root (CAP_SYS_NICE)".into(),
                    ));
                }
            }
            ThreadKnob::Slice => {
                if !kernel_at_least(self.root, 6, 12) {
                    return Err(refuse(
                        RefusalKind::Unsupported,
                        format!(
                            "the per-task slice (sched_setattr sched_runtime for fair tasks) needs Linux >= 6.12; this kernel is {}",
                            self.root
                                .kernel_release()
                                .unwrap_or_else(|| "unknown".into())
                        ),
                    ));
                }
                self.int_range(knob, levels, 100_000, 100_000_000)?;
                if let Some(bad) = ctx.policy_levels.iter().find(|l| {
                    parse_policy(l).is_ok_and(|(p, _)| p == libc::SCHED_FIFO || p == libc::SCHED_RR)
                }) {
                    return Err(refuse(
                        RefusalKind::NoEffect,
                        format!(
                            "the per-task slice applies to fair (other/batch) tasks only, but policy level `{bad}` is real-time"
                        ),
                    ));
                }
            }
            ThreadKnob::Affinity => {
                let online = self.root.online_cpus();
                for l in levels {
                    let cpus = parse_cpu_list(l).map_err(|r| {
                        refuse(RefusalKind::OutOfRange, format!("level `{l}`: {r}"))
                    })?;
                    if let Some(online) = &online
                        && let Some(c) = cpus.iter().find(|c| !online.contains(c))
                    {
                        return Err(refuse(
                            RefusalKind::OutOfRange,
                            format!("level `{l}`: CPU {c} is not online"),
                        ));
                    }
                }
            }
        }
        match ctx.target.tids.first() {
            None => Ok(String::new()),
            Some(&tid) => self.threads.get(tid, t).map_err(|e| {
                refuse(
                    RefusalKind::Missing,
                    format!("cannot read it from thread {tid}: {e}"),
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::threads::FakeThreads;
    use super::*;

    fn root() -> (tempfile::TempDir, SysRoot) {
        super::super::root::fake_root(&[
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/kernel/sched_rr_timeslice_ms", "100\n"),
            ("proc/sys/kernel/osrelease", "6.18.4\n"),
            ("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n"),
            ("sys/kernel/debug/sched/base_slice_ns", "3000000\n"),
            (
                "sys/kernel/debug/sched/preempt",
                "none voluntary (full) lazy\n",
            ),
            ("sys/devices/system/cpu/online", "0-1\n"),
        ])
    }

    fn lv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn check(
        r: &SysRoot,
        t: &FakeThreads,
        knob: &str,
        levels: &[&str],
        ctx: &CheckContext,
    ) -> Result<String, Refusal> {
        Checker {
            root: r,
            threads: t,
        }
        .check(&knob.parse().unwrap(), &lv(levels), ctx)
    }

    #[test]
    fn refusals_with_reasons() {
        let (_d, r) = root();
        let t = FakeThreads::new();
        t.insert(10, "0-1");
        let ctx = CheckContext {
            target: Target {
                pid: Some(1),
                tids: vec![10],
            },
            policy_levels: vec![],
        };
        assert_eq!(
            check(&r, &t, "sysctl:vm.swappiness", &["0", "60", "100"], &ctx).unwrap(),
            "60"
        );
        let e = check(&r, &t, "sysctl:vm.swappiness", &["300"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::OutOfRange);
        let e = check(&r, &t, "sysctl:kernel.sched_latency_ns", &["1"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Removed);
        assert!(e.reason.contains("slice"), "{e}");
        let e = check(&r, &t, "debugfs:latency_ns", &["1"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Removed);
        let e = check(&r, &t, "sysctl:kernel.nope", &["1"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Missing);
        // rr timeslice: no RR thread -> no effect; with policy rr levels, or an RR thread -> fine.
        let e = check(&r, &t, "sysctl:kernel.sched_rr_timeslice_ms", &["5"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::NoEffect);
        let mixed = CheckContext {
            policy_levels: lv(&["rr:10", "other"]),
            ..ctx.clone()
        };
        let e = check(
            &r,
            &t,
            "sysctl:kernel.sched_rr_timeslice_ms",
            &["5"],
            &mixed,
        )
        .unwrap_err();
        assert!(e.reason.contains("other"), "{e}");
        let rr = CheckContext {
            policy_levels: lv(&["rr:10"]),
            ..ctx.clone()
        };
        assert!(check(&r, &t, "sysctl:kernel.sched_rr_timeslice_ms", &["5"], &rr).is_ok());
        t.set(10, ThreadKnob::Policy, "rr:3").unwrap();
        assert!(check(&r, &t, "sysctl:kernel.sched_rr_timeslice_ms", &["5"], &ctx).is_ok());
        // Format of multi-value sysctls.
        assert!(
            check(
                &r,
                &t,
                "sysctl:net.ipv4.tcp_rmem",
                &["4096 87380 6291456"],
                &ctx
            )
            .is_ok()
        );
        assert!(check(&r, &t, "sysctl:net.ipv4.tcp_rmem", &["4096"], &ctx).is_err());
        // debugfs.
        assert!(check(&r, &t, "debugfs:base_slice_ns", &["750000"], &ctx).is_ok());
        assert!(check(&r, &t, "debugfs:base_slice_ns", &["10"], &ctx).is_err());
        assert!(check(&r, &t, "debugfs:preempt", &["none", "full"], &ctx).is_ok());
        assert!(check(&r, &t, "debugfs:preempt", &["rt"], &ctx).is_err());
        // Thread knobs.
        assert_eq!(check(&r, &t, "nice", &["-5", "5"], &ctx).unwrap(), "0");
        assert!(check(&r, &t, "nice", &["20"], &ctx).is_err());
        assert!(check(&r, &t, "slice", &["1000000"], &ctx).is_ok());
        assert!(check(&r, &t, "affinity", &["0", "0-1"], &ctx).is_ok());
        assert!(check(&r, &t, "affinity", &["3"], &ctx).is_err());
        assert!(check(&r, &t, "policy", &["fifo"], &ctx).is_err());
        // Unprivileged: system knobs are skipped.
        let unpriv = r.clone().with_privileged(false);
        let e = check(&unpriv, &t, "sysctl:vm.swappiness", &["10"], &ctx).unwrap_err();
        assert!(e.is_skip());
        assert!(check(&unpriv, &t, "nice", &["-1"], &ctx).is_err());
    }

    /// Issue 13 defect 2: the level check passed `ofat`/`list` designs whose configurations set
    /// `sched_rr_timeslice_ms` while every target thread was SCHED_OTHER.
    #[test]
    fn each_configuration_is_checked_for_knobs_without_effect() {
        let cfg = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let rr = "sysctl:kernel.sched_rr_timeslice_ms";
        // ofat with policy = ["rr:10"]: the rr_timeslice configurations keep the machine's policy.
        let bad = no_effect_in(&cfg(&[(rr, "5")]), &lv(&["other", "other"]));
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].1.contains("SCHED_RR"), "{bad:?}");
        assert!(bad[0].1.contains("other"), "{bad:?}");
        assert_eq!(no_effect_in(&cfg(&[(rr, "5")]), &[]).len(), 1);
        assert!(no_effect_in(&cfg(&[(rr, "5"), ("policy", "rr:10")]), &[]).is_empty());
        assert!(no_effect_in(&cfg(&[(rr, "5")]), &lv(&["rr:3"])).is_empty());
        assert_eq!(
            no_effect_in(&cfg(&[(rr, "5"), ("policy", "batch")]), &lv(&["rr:3"])).len(),
            1
        );
        // rt_runtime acts on FIFO too; slice only on fair tasks.
        assert!(
            no_effect_in(
                &cfg(&[
                    ("sysctl:kernel.sched_rt_runtime_us", "900000"),
                    ("policy", "fifo:5")
                ]),
                &[]
            )
            .is_empty()
        );
        assert_eq!(
            no_effect_in(&cfg(&[("slice", "1000000"), ("policy", "rr:5")]), &[]).len(),
            1
        );
        assert!(no_effect_in(&cfg(&[("slice", "1000000")]), &[]).is_empty());
        assert!(no_effect_in(&cfg(&[("sysctl:vm.swappiness", "10")]), &[]).is_empty());
    }

    #[test]
    fn old_kernel_has_no_per_task_slice_and_no_debugfs() {
        let (d, r) = root();
        std::fs::write(d.path().join("proc/sys/kernel/osrelease"), "6.6.0\n").unwrap();
        std::fs::remove_dir_all(d.path().join("sys/kernel/debug")).unwrap();
        let t = FakeThreads::new();
        let ctx = CheckContext::default();
        let e = check(&r, &t, "slice", &["1000000"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Unsupported);
        let e = check(&r, &t, "debugfs:base_slice_ns", &["1000000"], &ctx).unwrap_err();
        assert_eq!(e.kind, RefusalKind::Missing);
        assert!(e.reason.contains("debugfs is not mounted"), "{e}");
    }
}
