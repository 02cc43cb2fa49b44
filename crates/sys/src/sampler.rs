//! Per-process scheduling counters sampled from /proc: CPU time, voluntary and involuntary context switches,
//! run-queue wait, timeslices and migrations, summed over /proc/PID/task/*. Used by `ordo probe pid`,
//! `ordo bench --server-pid` and `ordo tune`.
//!
//! Threads come and go between samples: a thread that vanishes while it is read is skipped, and the last
//! counters seen for a thread that has exited are kept ("retired"), so a snapshot's counters never go
//! backwards and `delta()` between two snapshots of one sampler is the activity in between (minus the
//! unseen last moments of a thread that exited, and threads born and gone between two samples). CPU time comes from /proc/PID/stat, which the kernel
//! keeps for the whole thread group including exited threads.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::clock::monotonic_ns;
use crate::error::SysError;
use crate::procfs::ProcRoot;
use crate::thread::Policy;
pub use ordo_results::machine::ProcessSnapshot;

/// One thread's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadSnapshot {
    pub tid: i32,
    pub name: String,
    /// R (running/runnable), S (sleeping), D, ...
    pub state: char,
    /// User CPU, ns (tick resolution, /proc/PID/task/TID/stat).
    pub utime_ns: u64,
    pub stime_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// CPU time from schedstat, ns (precise); None without schedstat.
    pub cpu_ns: Option<u64>,
    /// Run-queue wait, ns; None without schedstat.
    pub run_delay_ns: Option<u64>,
    pub timeslices: Option<u64>,
    /// CPU migrations (/proc/PID/task/TID/sched); None without CONFIG_SCHED_DEBUG.
    pub migrations: Option<u64>,
    /// The CPU the thread last ran on.
    pub processor: Option<u32>,
    pub policy: Option<Policy>,
    pub nice: i64,
}

impl ThreadSnapshot {
    /// Counters accumulated between `earlier` and `self` (same thread); identity fields from `self`.
    pub fn delta(&self, earlier: &Self) -> Self {
        let d = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.saturating_sub(b)),
            (a, None) => a,
            (None, Some(_)) => None,
        };
        ThreadSnapshot {
            utime_ns: self.utime_ns.saturating_sub(earlier.utime_ns),
            stime_ns: self.stime_ns.saturating_sub(earlier.stime_ns),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
            cpu_ns: d(self.cpu_ns, earlier.cpu_ns),
            run_delay_ns: d(self.run_delay_ns, earlier.run_delay_ns),
            timeslices: d(self.timeslices, earlier.timeslices),
            migrations: d(self.migrations, earlier.migrations),
            ..self.clone()
        }
    }
}

/// A process snapshot with its threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DetailedSnapshot {
    pub process: ProcessSnapshot,
    pub name: String,
    pub threads: Vec<ThreadSnapshot>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    vol: u64,
    invol: u64,
    run_delay: u64,
    slices: u64,
    cpu: u64,
    migrations: u64,
}

impl Counters {
    fn of(t: &ThreadSnapshot) -> Self {
        Counters {
            vol: t.voluntary_switches,
            invol: t.involuntary_switches,
            run_delay: t.run_delay_ns.unwrap_or(0),
            slices: t.timeslices.unwrap_or(0),
            cpu: t.cpu_ns.unwrap_or(0),
            migrations: t.migrations.unwrap_or(0),
        }
    }
    fn add(&mut self, o: &Counters) {
        self.vol += o.vol;
        self.invol += o.invol;
        self.run_delay += o.run_delay;
        self.slices += o.slices;
        self.cpu += o.cpu;
        self.migrations += o.migrations;
    }
}

/// Samples one process's threads from /proc.
#[derive(Debug)]
pub struct ProcessSampler {
    root: ProcRoot,
    pid: i32,
    read_sched: bool,
    schedstat_ok: bool,
    sched_ok: bool,
    last: HashMap<i32, Counters>,
    retired: Counters,
}

/// Errors that mean "this thread went away while we read it".
fn thread_vanished(e: &SysError) -> bool {
    matches!(e, SysError::Missing { .. } | SysError::ProcessGone(_))
}

impl ProcessSampler {
    /// A sampler for `pid` on the real /proc. `ProcessGone` when there is no such process.
    pub fn new(pid: i32) -> Result<Self, SysError> {
        Self::with_root(ProcRoot::default(), pid)
    }

    /// A sampler reading from another /proc tree (tests).
    pub fn with_root(root: ProcRoot, pid: i32) -> Result<Self, SysError> {
        if pid <= 0 || !root.pid_exists(pid) {
            return Err(SysError::ProcessGone(pid));
        }
        let stat = match root.stat(pid) {
            Ok(s) => s,
            Err(SysError::Missing { .. }) => return Err(SysError::ProcessGone(pid)),
            Err(e) => return Err(e),
        };
        if matches!(stat.state, 'Z' | 'X') {
            return Err(SysError::ProcessGone(pid));
        }
        Ok(ProcessSampler {
            root,
            pid,
            read_sched: true,
            schedstat_ok: true,
            sched_ok: true,
            last: HashMap::new(),
            retired: Counters::default(),
        })
    }

    /// Read /proc/PID/task/TID/sched for migrations (default on; it is the most expensive file to read).
    pub fn read_migrations(mut self, on: bool) -> Self {
        self.read_sched = on;
        self
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the last sample could read schedstat (run-queue wait) and sched (migrations).
    pub fn schedstat_available(&self) -> bool {
        self.schedstat_ok
    }
    pub fn migrations_available(&self) -> bool {
        self.read_sched && self.sched_ok
    }

    fn read_thread(&mut self, tid: i32) -> Result<ThreadSnapshot, SysError> {
        let pid = self.pid;
        let stat = self.root.task_stat(pid, tid)?;
        let mut t = ThreadSnapshot {
            tid,
            name: stat.comm.clone(),
            state: stat.state,
            utime_ns: stat.utime_ns,
            stime_ns: stat.stime_ns,
            processor: stat.processor,
            policy: stat
                .policy
                .map(|p| Policy::from_raw(p, stat.rt_priority.unwrap_or(0))),
            nice: stat.nice,
            ..Default::default()
        };
        if self.schedstat_ok {
            match self.root.task_schedstat(pid, tid) {
                Ok(s) => {
                    t.cpu_ns = Some(s.cpu_ns);
                    t.run_delay_ns = Some(s.run_delay_ns);
                    t.timeslices = Some(s.timeslices);
                }
                Err(SysError::Missing { .. }) | Err(SysError::Permission { .. }) => {
                    // The kernel lacks schedstat, or the thread vanished: tell them apart.
                    if self.root.task_stat(pid, tid).is_ok() {
                        self.schedstat_ok = false;
                    } else {
                        return Err(SysError::ProcessGone(tid));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        // /proc/PID/task/TID/sched carries the switch counts too, so when it is read, status is not.
        let mut have_switches = false;
        if self.read_sched && self.sched_ok {
            match self.root.task_sched(pid, tid) {
                Ok(s) => {
                    t.migrations = s.nr_migrations();
                    if let (Some(v), Some(i)) =
                        (s.nr_voluntary_switches(), s.nr_involuntary_switches())
                    {
                        t.voluntary_switches = v;
                        t.involuntary_switches = i;
                        have_switches = true;
                    }
                }
                Err(SysError::Missing { .. }) | Err(SysError::Permission { .. }) => {
                    if self.root.task_stat(pid, tid).is_ok() {
                        self.sched_ok = false;
                    } else {
                        return Err(SysError::ProcessGone(tid));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if !have_switches {
            let status = self.root.task_status(pid, tid)?;
            t.voluntary_switches = status.voluntary_ctxt_switches.unwrap_or(0);
            t.involuntary_switches = status.nonvoluntary_ctxt_switches.unwrap_or(0);
        }
        Ok(t)
    }

    fn gone_or(&self, e: SysError) -> SysError {
        if !self.root.pid_exists(self.pid) {
            SysError::ProcessGone(self.pid)
        } else {
            e
        }
    }

    /// The process's counters now, summed over its threads.
    pub fn sample(&mut self) -> Result<ProcessSnapshot, SysError> {
        Ok(self.sample_detailed()?.process)
    }

    /// The process's counters now, with each live thread's.
    pub fn sample_detailed(&mut self) -> Result<DetailedSnapshot, SysError> {
        let pid = self.pid;
        let at_ns = monotonic_ns();
        let stat = match self.root.stat(pid) {
            Ok(s) => s,
            Err(SysError::Missing { .. }) => return Err(SysError::ProcessGone(pid)),
            Err(e) => return Err(self.gone_or(e)),
        };
        if matches!(stat.state, 'Z' | 'X') {
            return Err(SysError::ProcessGone(pid));
        }
        let tids = self.root.tasks(pid)?;
        let mut threads = Vec::with_capacity(tids.len());
        for tid in tids {
            match self.read_thread(tid) {
                Ok(t) => threads.push(t),
                Err(e) if thread_vanished(&e) => continue,
                Err(e) => return Err(self.gone_or(e)),
            }
        }
        if threads.is_empty() {
            return Err(SysError::ProcessGone(pid));
        }
        let rss_kb = self.root.status(pid).ok().and_then(|s| s.vm_rss_kb);
        // Threads seen last time but not now have exited: keep their last counters.
        let mut now: HashMap<i32, Counters> = HashMap::with_capacity(threads.len());
        for t in &threads {
            now.insert(t.tid, Counters::of(t));
        }
        for (tid, c) in &self.last {
            if !now.contains_key(tid) {
                self.retired.add(c);
            }
        }
        let mut sum = self.retired;
        for c in now.values() {
            sum.add(c);
        }
        self.last = now;
        let schedstat = self.schedstat_ok;
        let migrations = self.migrations_available().then_some(sum.migrations);
        Ok(DetailedSnapshot {
            name: stat.comm.clone(),
            process: ProcessSnapshot {
                at_ns,
                threads: threads.len(),
                utime_ns: stat.utime_ns,
                stime_ns: stat.stime_ns,
                voluntary_switches: sum.vol,
                involuntary_switches: sum.invol,
                run_delay_ns: if schedstat { sum.run_delay } else { 0 },
                timeslices: if schedstat { sum.slices } else { 0 },
                cpu_ns: if schedstat { sum.cpu } else { 0 },
                migrations,
                rss_kb,
                schedstat,
            },
            threads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_self_and_counts_a_sleep() {
        let pid = std::process::id() as i32;
        let mut s = ProcessSampler::new(pid).unwrap();
        let a = s.sample().unwrap();
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let b = s.sample().unwrap();
        let d = b.delta(&a);
        assert!(d.at_ns > 0);
        // This thread slept five times.
        assert!(d.voluntary_switches >= 5, "{d:?}");
        assert!(b.threads >= 1);
    }

    #[test]
    fn unknown_pid_is_gone() {
        assert!(matches!(
            ProcessSampler::new(99_999_999),
            Err(SysError::ProcessGone(99_999_999))
        ));
        assert!(matches!(
            ProcessSampler::new(0),
            Err(SysError::ProcessGone(0))
        ));
    }
}
