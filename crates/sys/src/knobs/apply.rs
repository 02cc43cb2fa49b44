//! Applying knob values and putting the originals back: every original goes to the journal (fsynced) before
//! the write; [`Applier::restore`] undoes everything in reverse order; [`recover`] does the same from the
//! journal file alone after a crash.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::KnobError;
use super::id::KnobId;
use super::journal::{Journal, JournalEntry, now_unix};
use super::lock::{Holder, KnobLocks};
use super::root::{SysRoot, read_trimmed, write_value};
use super::threads::ThreadOps;

/// What a knob acts on: the target's main pid (for its cgroup) and the selected thread ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    pub pid: Option<i32>,
    pub tids: Vec<i32>,
}

/// What happened to one journalled change when it was restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreNote {
    Restored {
        knob: String,
        target: String,
        value: String,
    },
    /// Nothing to restore (the thread exited, its cgroup is gone).
    Moot {
        knob: String,
        target: String,
        reason: String,
    },
    Failed {
        knob: String,
        target: String,
        error: String,
    },
    /// A process the run had started (journalled as `process`) was still running and was stopped.
    Stopped { target: String, what: String },
}

impl RestoreNote {
    pub fn failed(&self) -> bool {
        matches!(self, RestoreNote::Failed { .. })
    }

    fn failed_on(e: &JournalEntry, error: String) -> Self {
        RestoreNote::Failed {
            knob: e.knob.clone(),
            target: e.target.clone(),
            error,
        }
    }

    fn moot_on(e: &JournalEntry, reason: String) -> Self {
        RestoreNote::Moot {
            knob: e.knob.clone(),
            target: e.target.clone(),
            reason,
        }
    }
}

impl fmt::Display for RestoreNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestoreNote::Restored {
                knob,
                target,
                value,
            } => {
                write!(f, "restored {knob} on {target} to {value}")
            }
            RestoreNote::Moot {
                knob,
                target,
                reason,
            } => {
                write!(f, "{knob} on {target}: restoring is moot ({reason})")
            }
            RestoreNote::Failed {
                knob,
                target,
                error,
            } => {
                write!(f, "FAILED to restore {knob} on {target}: {error}")
            }
            RestoreNote::Stopped { target, what } => {
                write!(f, "stopped {target} (`{what}`), which the run had started")
            }
        }
    }
}

/// Applies knob values through one journal and restores them (also on drop).
pub struct Applier {
    root: SysRoot,
    journal: Journal,
    threads: Arc<dyn ThreadOps>,
    active: Vec<JournalEntry>,
    /// Machine-wide locks of the knobs this run changes, held until it ends.
    locks: KnobLocks,
}

impl fmt::Debug for Applier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Applier")
            .field("root", &self.root)
            .field("journal", &self.journal.path())
            .field("active", &self.active)
            .finish()
    }
}

/// For `debugfs:features`, the state of the named feature (`FOO` or `NO_FOO`) in the current list.
fn feature_state(list: &str, value: &str) -> Option<String> {
    let base = value.trim().trim_start_matches("NO_");
    list.split_whitespace()
        .find(|t| t.trim_start_matches("NO_") == base)
        .map(str::to_string)
}

impl Applier {
    /// An applier journalling to `journal`. Refuses to start while the journal holds entries of an earlier
    /// run: those must be recovered first (`ordo tune recover`).
    pub fn new(
        root: SysRoot,
        journal: impl Into<PathBuf>,
        threads: Arc<dyn ThreadOps>,
    ) -> Result<Self, KnobError> {
        let journal = Journal::open(journal)?;
        let pending = journal.entries()?;
        if !pending.is_empty() {
            return Err(KnobError::Journal {
                path: journal.path().to_path_buf(),
                reason: format!(
                    "holds {} change(s) of an earlier run that were never restored; run `ordo tune recover --journal {}` first",
                    pending.len(),
                    journal.path().display()
                ),
            });
        }
        let locks = KnobLocks::new(root.lock_dir(), Holder::this_process(journal.path()));
        Ok(Applier {
            root,
            journal,
            threads,
            active: Vec::new(),
            locks,
        })
    }

    /// Wait up to `wait` for a knob another experiment holds instead of refusing at once.
    pub fn set_lock_wait(&mut self, wait: std::time::Duration) {
        self.locks.set_wait(wait);
    }

    /// Lock `knob` machine-wide for the rest of this run (before anything is applied, so a second
    /// experiment on the same knob is refused up front rather than part-way). Per-thread knobs lock the
    /// target's process only for targets ordo did not start (`shared`); parameters lock nothing.
    pub fn reserve(
        &mut self,
        knob: &KnobId,
        target: &Target,
        shared: bool,
    ) -> Result<(), KnobError> {
        match knob {
            KnobId::Param(_) => Ok(()),
            KnobId::Thread(_) => match target.pid {
                Some(pid) if shared => self
                    .locks
                    .acquire(&knob.to_string(), &format!("pid-{pid}"))
                    .map(drop),
                _ => Ok(()),
            },
            _ => {
                let path = self.knob_path(knob, target)?.unwrap_or_default();
                self.lock_path(knob, &path).map(drop)
            }
        }
    }

    fn lock_path(&mut self, knob: &KnobId, path: &std::path::Path) -> Result<PathBuf, KnobError> {
        let key = self.root.lock_key(path);
        self.locks.acquire(&knob.to_string(), &key)
    }

    /// Journal a process this run started (`what`: its command line), so that `recover` stops it when the
    /// run dies without doing so; restoring it stops it if it still runs.
    pub fn record_process(&mut self, pid: i32, what: &str) -> Result<(), KnobError> {
        let stat = crate::ProcRoot::default()
            .stat(pid)
            .map_err(|e| KnobError::Journal {
                path: self.journal.path().to_path_buf(),
                reason: format!("cannot read the start time of process {pid}: {e}"),
            })?;
        self.journal_then(JournalEntry {
            knob: "process".into(),
            target: format!("pid:{pid}"),
            applied: what.to_string(),
            at: now_unix(),
            start_ticks: Some(stat.starttime_ticks),
            boot_id: boot_id(),
            ..JournalEntry::default()
        })
    }

    pub fn root(&self) -> &SysRoot {
        &self.root
    }

    pub fn journal_path(&self) -> &std::path::Path {
        self.journal.path()
    }

    /// Changes currently applied (and journalled).
    pub fn active(&self) -> &[JournalEntry] {
        &self.active
    }

    /// The file a file-based knob lives in.
    pub fn knob_path(&self, knob: &KnobId, target: &Target) -> Result<Option<PathBuf>, KnobError> {
        Ok(match knob {
            KnobId::Sysctl(n) => Some(self.root.sysctl_path(n)),
            KnobId::Debugfs(n) => Some(self.root.debugfs_path(n)),
            KnobId::Cgroup(f) => {
                let pid = target.pid.ok_or_else(|| KnobError::NoTarget {
                    knob: knob.to_string(),
                    what: "a process whose cgroup to change",
                })?;
                let dir = self
                    .root
                    .cgroup_dir(pid, f)
                    .map_err(|reason| KnobError::Journal {
                        path: self.root.proc_pid(pid).join("cgroup"),
                        reason,
                    })?;
                Some(dir.join(f))
            }
            KnobId::Thread(_) | KnobId::Param(_) => None,
        })
    }

    /// Read a knob's current value (for thread knobs: of the first target thread).
    pub fn read(&self, knob: &KnobId, target: &Target) -> Result<String, KnobError> {
        match knob {
            KnobId::Thread(t) => {
                let tid = *target.tids.first().ok_or_else(|| KnobError::NoTarget {
                    knob: knob.to_string(),
                    what: "threads",
                })?;
                self.threads.get(tid, *t)
            }
            KnobId::Param(_) => Err(KnobError::NoTarget {
                knob: knob.to_string(),
                what: "a command (parameters live in the target's command, not on the machine)",
            }),
            _ => {
                let path = self.knob_path(knob, target)?.unwrap_or_default();
                read_trimmed(&path)
            }
        }
    }

    fn already(&self, knob: &str, target: &str) -> bool {
        self.active
            .iter()
            .any(|e| e.knob == knob && e.target == target)
    }

    fn journal_then(&mut self, entry: JournalEntry) -> Result<(), KnobError> {
        if !self.already(&entry.knob, &entry.target) {
            self.journal.record(&entry)?;
            self.active.push(entry);
        }
        Ok(())
    }

    /// Set `knob` to `value` on `target`, journalling the original first. Parameters (`param:`) change
    /// nothing on the machine and are ignored here.
    pub fn apply(&mut self, knob: &KnobId, target: &Target, value: &str) -> Result<(), KnobError> {
        let name = knob.to_string();
        match knob {
            KnobId::Param(_) => Ok(()),
            KnobId::Thread(t) => {
                if target.tids.is_empty() {
                    return Err(KnobError::NoTarget {
                        knob: name,
                        what: "threads",
                    });
                }
                for &tid in &target.tids {
                    let original = self.threads.get(tid, *t)?;
                    self.journal_then(JournalEntry {
                        knob: name.clone(),
                        target: format!("tid:{tid}"),
                        original,
                        applied: value.to_string(),
                        path: None,
                        at: now_unix(),
                        ..JournalEntry::default()
                    })?;
                    self.threads.set(tid, *t, value)?;
                }
                Ok(())
            }
            _ => {
                if !self.root.privileged() {
                    return Err(KnobError::Refused(super::Refusal::not_privileged(knob)));
                }
                let path = self.knob_path(knob, target)?.unwrap_or_default();
                let lock = self.lock_path(knob, &path)?;
                let current = read_trimmed(&path)?;
                let is_features = matches!(knob, KnobId::Debugfs(n) if n == "features");
                let original = if is_features {
                    feature_state(&current, value).ok_or_else(|| KnobError::InvalidValue {
                        knob: name.clone(),
                        value: value.into(),
                        reason: "no such scheduler feature".into(),
                    })?
                } else if matches!(knob, KnobId::Debugfs(n) if n == "preempt") {
                    // `none voluntary (full) lazy`: the current mode is the one in parentheses.
                    current
                        .split_whitespace()
                        .find(|t| t.starts_with('('))
                        .map(|t| t.trim_matches(|c| c == '(' || c == ')').to_string())
                        .unwrap_or(current)
                } else {
                    current
                };
                let tgt = match knob {
                    KnobId::Cgroup(_) => format!(
                        "cgroup:{}",
                        path.parent()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    ),
                    _ => "system".to_string(),
                };
                self.journal_then(JournalEntry {
                    knob: name,
                    target: tgt,
                    original,
                    applied: value.to_string(),
                    path: Some(path.clone()),
                    at: now_unix(),
                    lock: Some(lock),
                    ..JournalEntry::default()
                })?;
                write_value(&path, value)
            }
        }
    }

    /// Restore every active change in reverse order; clear the journal when nothing failed.
    pub fn restore(&mut self) -> Vec<RestoreNote> {
        let notes: Vec<RestoreNote> = self
            .active
            .iter()
            .rev()
            .map(|e| restore_entry(self.threads.as_ref(), e))
            .collect();
        if notes.iter().all(|n| !n.failed()) {
            self.active.clear();
            if let Err(e) = self.journal.clear() {
                tracing::warn!("could not clear the journal: {e}");
            }
        } else {
            self.active.retain(|e| {
                notes.iter().any(|n| {
                    matches!(n, RestoreNote::Failed { knob, target, .. } if *knob == e.knob && *target == e.target)
                })
            });
        }
        notes
    }

    /// Restore everything and remove the journal file (end of an experiment).
    pub fn finish(mut self) -> Vec<RestoreNote> {
        let notes = self.restore();
        if self.active.is_empty() {
            let _ = std::fs::remove_file(self.journal.path());
        }
        notes
    }

    /// What a crash leaves: the journal file as it is (entries kept), its lock and the knob locks released
    /// with this run's mark left on them, nothing restored.
    #[doc(hidden)]
    pub fn crash_for_tests(mut self) {
        self.active.clear();
        self.locks.abandon();
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        if !self.active.is_empty() {
            for n in self.restore() {
                if n.failed() {
                    tracing::error!("{n}");
                }
            }
        }
        if self.active.is_empty() {
            self.locks.release_all();
            // Nothing is left to restore: an empty journal (a run refused before it changed anything)
            // is not left behind.
            if self.journal.entries().is_ok_and(|e| e.is_empty()) {
                let _ = std::fs::remove_file(self.journal.path());
            }
        } else {
            // The journal keeps what could not be restored; the mark tells the next run to recover first.
            self.locks.abandon();
        }
    }
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`).
fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Stop a process a run had started (journalled by [`Applier::record_process`]), when it is still that
/// process: same boot, same start time. SIGTERM to its process group (targets run in their own), SIGKILL
/// after 5 s.
fn stop_process(e: &JournalEntry) -> RestoreNote {
    let failed = |error: String| RestoreNote::failed_on(e, error);
    let moot = |reason: String| RestoreNote::moot_on(e, reason);
    let Some(pid) = e
        .target
        .strip_prefix("pid:")
        .and_then(|p| p.parse::<i32>().ok())
        .filter(|p| *p > 1)
    else {
        return failed(format!("bad target `{}`", e.target));
    };
    if crate::process::exited(pid) {
        return moot(format!("process {pid} has exited"));
    }
    let same_boot = match (&e.boot_id, boot_id()) {
        (Some(a), Some(b)) => *a == b,
        _ => true,
    };
    let same = same_boot
        && crate::ProcRoot::default()
            .stat(pid)
            .is_ok_and(|st| Some(st.starttime_ticks) == e.start_ticks);
    if !same {
        return moot(format!(
            "pid {pid} is now another process (started later); it was not signalled"
        ));
    }
    let limit = std::time::Duration::from_secs(5);
    if crate::process::signal_group(pid, crate::process::SIGTERM).is_err() {
        let _ = crate::process::signal(pid, crate::process::SIGTERM);
    }
    if !crate::process::exited_within(pid, limit) {
        if crate::process::kill_group(pid).is_err() {
            let _ = crate::process::signal(pid, crate::process::SIGKILL);
        }
        if !crate::process::exited_within(pid, limit) {
            return failed(format!("process {pid} survived SIGKILL"));
        }
    }
    // Children left in its group (they may have ignored SIGTERM).
    let _ = crate::process::kill_group(pid);
    RestoreNote::Stopped {
        target: e.target.clone(),
        what: e.applied.clone(),
    }
}

fn restore_entry(threads: &dyn ThreadOps, e: &JournalEntry) -> RestoreNote {
    let failed = |error: String| RestoreNote::failed_on(e, error);
    let moot = |reason: String| RestoreNote::moot_on(e, reason);
    if e.knob == "process" {
        return stop_process(e);
    }
    if let Some(tid) = e.target.strip_prefix("tid:") {
        let Ok(tid) = tid.parse::<i32>() else {
            return failed(format!("bad target `{}`", e.target));
        };
        let knob = match e.knob.parse::<KnobId>() {
            Ok(KnobId::Thread(t)) => t,
            _ => return failed(format!("`{}` is not a per-thread knob", e.knob)),
        };
        if !threads.alive(tid) {
            return moot(format!("thread {tid} has exited"));
        }
        return match threads.set(tid, knob, &e.original) {
            Ok(()) => RestoreNote::Restored {
                knob: e.knob.clone(),
                target: e.target.clone(),
                value: e.original.clone(),
            },
            Err(_) if !threads.alive(tid) => moot(format!("thread {tid} has exited")),
            Err(err) => failed(err.to_string()),
        };
    }
    let Some(path) = &e.path else {
        return failed("journal entry has no path".into());
    };
    if e.target.starts_with("cgroup:") && !path.parent().is_some_and(|p| p.exists()) {
        return moot("the cgroup no longer exists".into());
    }
    match write_value(path, &e.original) {
        Ok(()) => RestoreNote::Restored {
            knob: e.knob.clone(),
            target: e.target.clone(),
            value: e.original.clone(),
        },
        Err(err) => failed(err.to_string()),
    }
}

/// Restore every change in the journal at `path` (newest first) and remove the journal when all of them were
/// restored or moot. A missing journal means there is nothing to do.
pub fn recover(
    path: &std::path::Path,
    threads: &dyn ThreadOps,
) -> Result<Vec<RestoreNote>, KnobError> {
    // Not under a running experiment: it restores its own knobs, and holds the journal's lock meanwhile.
    let _lock = match std::fs::File::open(path) {
        Ok(f) => {
            super::journal::lock_exclusive(&f, path)?;
            Some(f)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(KnobError::io(path, e)),
    };
    let entries = Journal::entries_at(path)?;
    // Nor under another experiment that holds one of the knobs (it would have refused to start while this
    // journal held them, but a journal recovered by hand may be stale).
    let mut locks = Vec::new();
    for e in &entries {
        if let Some(lock) = &e.lock
            && !locks.iter().any(|(p, _)| p == lock)
            && let Some(f) = super::lock::lock_for_recover(lock, &e.knob)?
        {
            locks.push((lock.clone(), f));
        }
    }
    let notes: Vec<RestoreNote> = entries
        .iter()
        .rev()
        .map(|e| restore_entry(threads, e))
        .collect();
    if notes.iter().all(|n| !n.failed()) {
        for (_, f) in &locks {
            super::lock::clear_marker(f);
        }
        if path.exists() {
            std::fs::remove_file(path).map_err(|e| KnobError::io(path, e))?;
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::super::id::ThreadKnob;
    use super::super::threads::FakeThreads;
    use super::*;

    fn fake_root() -> (tempfile::TempDir, SysRoot) {
        super::super::root::fake_root(&[
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/kernel/sched_rr_timeslice_ms", "100\n"),
            ("sys/kernel/debug/sched/base_slice_ns", "3000000\n"),
            (
                "sys/kernel/debug/sched/features",
                "PLACE_LAG RUN_TO_PARITY NO_HRTICK\n",
            ),
            ("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            ("proc/42/cgroup", "0::/web\n"),
            ("sys/fs/cgroup/web/cpu.weight", "100\n"),
        ])
    }

    fn read(r: &SysRoot, rel: &str) -> String {
        std::fs::read_to_string(r.join(rel))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn apply_restore_clears_journal() {
        let (d, r) = fake_root();
        let threads = Arc::new(FakeThreads::new());
        threads.insert(100, "0-1");
        threads.insert(101, "0-1");
        let jp = d.path().join("journal.jsonl");
        let mut a = Applier::new(r.clone(), &jp, threads.clone()).unwrap();
        let target = Target {
            pid: Some(42),
            tids: vec![100, 101],
        };
        let k = |s: &str| s.parse::<KnobId>().unwrap();
        a.apply(&k("sysctl:vm.swappiness"), &target, "10").unwrap();
        a.apply(&k("sysctl:vm.swappiness"), &target, "20").unwrap();
        a.apply(&k("debugfs:features"), &target, "NO_PLACE_LAG")
            .unwrap();
        a.apply(&k("cgroup:cpu.weight"), &target, "500").unwrap();
        a.apply(&k("policy"), &target, "rr:5").unwrap();
        a.apply(&k("param:threads"), &target, "8").unwrap();
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "20");
        assert_eq!(read(&r, "sys/fs/cgroup/web/cpu.weight"), "500");
        assert_eq!(threads.get(101, ThreadKnob::Policy).unwrap(), "rr:5");
        // swappiness journalled once (first original), features, cgroup, two threads.
        let entries = Journal::entries_at(&jp).unwrap();
        assert_eq!(entries.len(), 5);
        assert_eq!(entries[0].original, "60");
        assert_eq!(entries[1].original, "PLACE_LAG");
        threads.kill(101);
        let notes = a.restore();
        assert_eq!(notes.len(), 5);
        assert!(
            notes
                .iter()
                .any(|n| matches!(n, RestoreNote::Moot { target, .. } if target == "tid:101"))
        );
        assert!(notes.iter().all(|n| !n.failed()));
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "60");
        assert_eq!(read(&r, "sys/kernel/debug/sched/features"), "PLACE_LAG");
        assert_eq!(read(&r, "sys/fs/cgroup/web/cpu.weight"), "100");
        assert_eq!(threads.get(100, ThreadKnob::Policy).unwrap(), "other");
        assert!(Journal::entries_at(&jp).unwrap().is_empty());
        let _ = a.finish();
        assert!(!jp.exists());
    }

    /// `f()`, retried while it fails for a moment: a child process another test of this binary forks holds
    /// a copy of every open descriptor — so of a journal's flock — until it execs, so a lock just released
    /// can still be held for a few milliseconds (much longer on a loaded machine).
    fn unlocked<T, E: std::fmt::Display>(mut f: impl FnMut() -> Result<T, E>) -> T {
        let t = std::time::Instant::now();
        loop {
            match f() {
                Ok(v) => return v,
                Err(e) if t.elapsed() > std::time::Duration::from_secs(10) => panic!("{e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }

    #[test]
    fn drop_restores_and_stale_journal_blocks_start() {
        let (d, r) = fake_root();
        let threads: Arc<dyn ThreadOps> = Arc::new(FakeThreads::new());
        let jp = d.path().join("j");
        {
            let mut a = Applier::new(r.clone(), &jp, threads.clone()).unwrap();
            a.apply(
                &"sysctl:kernel.sched_rr_timeslice_ms".parse().unwrap(),
                &Target::default(),
                "5",
            )
            .unwrap();
            assert_eq!(read(&r, "proc/sys/kernel/sched_rr_timeslice_ms"), "5");
        }
        assert_eq!(read(&r, "proc/sys/kernel/sched_rr_timeslice_ms"), "100");

        // Simulate a crash: an applier whose restore never ran (forgotten), then recover.
        let mut a = unlocked(|| Applier::new(r.clone(), &jp, threads.clone()));
        a.apply(
            &"sysctl:vm.swappiness".parse().unwrap(),
            &Target::default(),
            "1",
        )
        .unwrap();
        a.apply(
            &"debugfs:base_slice_ns".parse().unwrap(),
            &Target::default(),
            "700000",
        )
        .unwrap();
        a.crash_for_tests();
        assert!(Applier::new(r.clone(), &jp, threads.clone()).is_err());
        // while a live applier holds the journal, recover is refused and changes nothing
        let live = unlocked(|| Journal::open(&jp));
        let e = recover(&jp, threads.as_ref()).unwrap_err().to_string();
        assert!(e.contains("in use by another running `ordo tune`"), "{e}");
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "1");
        drop(live);
        let notes = unlocked(|| recover(&jp, threads.as_ref()));
        assert_eq!(notes.len(), 2);
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "60");
        assert_eq!(read(&r, "sys/kernel/debug/sched/base_slice_ns"), "3000000");
        assert!(!jp.exists());
        assert!(recover(&jp, threads.as_ref()).unwrap().is_empty());
    }

    /// Issue 13 defect 1: two experiments with their own journals on one knob each journalled the
    /// other's applied value as the original, and the knob stayed changed.
    #[test]
    fn a_second_experiment_on_the_same_knob_is_refused_and_recover_restores_the_first_original() {
        let (d, r) = fake_root();
        let threads: Arc<dyn ThreadOps> = Arc::new(FakeThreads::new());
        let swappiness: KnobId = "sysctl:vm.swappiness".parse().unwrap();
        let (ja, jb) = (d.path().join("a.journal"), d.path().join("b.journal"));
        let mut a = Applier::new(r.clone(), &ja, threads.clone()).unwrap();
        a.reserve(&swappiness, &Target::default(), false).unwrap();
        a.apply(&swappiness, &Target::default(), "10").unwrap();
        let mut b = Applier::new(r.clone(), &jb, threads.clone()).unwrap();
        let e = b
            .reserve(&swappiness, &Target::default(), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sysctl:vm.swappiness"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(e.contains("a.journal"), "{e}");
        assert!(b.apply(&swappiness, &Target::default(), "30").is_err());
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "10");
        assert!(Journal::entries_at(&jb).unwrap().is_empty());
        // Another knob is free for the second one.
        b.apply(
            &"debugfs:base_slice_ns".parse().unwrap(),
            &Target::default(),
            "700000",
        )
        .unwrap();
        drop(b);

        // The first dies with the knob changed: until its journal is recovered, nobody else takes it...
        a.crash_for_tests();
        let mut c = Applier::new(r.clone(), &jb, threads.clone()).unwrap();
        let e = c
            .apply(&swappiness, &Target::default(), "30")
            .unwrap_err()
            .to_string();
        assert!(e.contains("left changed"), "{e}");
        assert!(e.contains("ordo tune recover --journal"), "{e}");
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "10");
        drop(c);
        // ...and recover restores the value from before the first run.
        let notes = recover(&ja, threads.as_ref()).unwrap();
        assert!(notes.iter().all(|n| !n.failed()), "{notes:?}");
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "60");
        let mut c = Applier::new(r.clone(), &jb, threads.clone()).unwrap();
        c.apply(&swappiness, &Target::default(), "30").unwrap();
        assert_eq!(Journal::entries_at(&jb).unwrap()[0].original, "60");
        let _ = c.finish();
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "60");
    }

    /// Issue 13 defect 3: a run killed with SIGKILL left its target running; recover stops it, but never
    /// a process that merely reuses its PID.
    #[test]
    fn recover_stops_the_processes_a_dead_run_started_and_only_those() {
        use std::os::unix::process::CommandExt;
        let (d, r) = fake_root();
        let threads: Arc<dyn ThreadOps> = Arc::new(FakeThreads::new());
        let jp = d.path().join("j");
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("30")
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let mut started = spawn();
        let mut other = spawn();
        let mut a = Applier::new(r.clone(), &jp, threads.clone()).unwrap();
        a.record_process(started.id() as i32, "sleep 30").unwrap();
        a.record_process(other.id() as i32, "sleep 30").unwrap();
        a.crash_for_tests();
        // `other` stands for a process that got a recorded PID after the run's process exited.
        let mut entries = Journal::entries_at(&jp).unwrap();
        entries[1].start_ticks = entries[1].start_ticks.map(|t| t + 1);
        std::fs::write(
            &jp,
            entries
                .iter()
                .map(|e| serde_json::to_string(e).unwrap() + "\n")
                .collect::<String>(),
        )
        .unwrap();
        let notes = recover(&jp, threads.as_ref()).unwrap();
        let text: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert!(
            matches!(&notes[1], RestoreNote::Stopped { target, .. } if *target == format!("pid:{}", started.id())),
            "{text:?}"
        );
        assert!(text[0].contains("another process"), "{text:?}");
        assert!(started.wait().is_ok());
        assert!(
            other.try_wait().unwrap().is_none(),
            "a reused PID is not signalled"
        );
        let _ = other.kill();
        let _ = other.wait();
        // Restoring a process that has exited is moot.
        let mut a = Applier::new(r.clone(), &jp, threads.clone()).unwrap();
        let mut gone = spawn();
        a.record_process(gone.id() as i32, "sleep 30").unwrap();
        let _ = gone.kill();
        let _ = gone.wait();
        let notes = a.restore();
        assert!(matches!(&notes[0], RestoreNote::Moot { .. }), "{notes:?}");
    }

    #[test]
    fn unprivileged_system_knob_is_refused_before_any_write() {
        let (d, r) = fake_root();
        let r = r.with_privileged(false);
        let mut a =
            Applier::new(r.clone(), d.path().join("j"), Arc::new(FakeThreads::new())).unwrap();
        assert!(
            a.apply(
                &"sysctl:vm.swappiness".parse().unwrap(),
                &Target::default(),
                "1"
            )
            .is_err()
        );
        assert_eq!(read(&r, "proc/sys/vm/swappiness"), "60");
        assert!(a.active().is_empty());
    }
}

/// The one test that touches the real machine: only as root, only `vm.stat_interval` (how often per-CPU
/// vm statistics are folded; harmless), restored by a guard on every path and verified afterwards.
#[cfg(test)]
mod real_machine {
    use super::super::threads::RealThreads;
    use super::*;

    const KNOB: &str = "/proc/sys/vm/stat_interval";

    struct Guard(String);

    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = write_value(std::path::Path::new(KNOB), &self.0);
        }
    }

    #[test]
    fn harmless_sysctl_is_restored_on_every_path() {
        let root = SysRoot::real();
        let path = std::path::Path::new(KNOB);
        if !root.privileged() || std::fs::OpenOptions::new().write(true).open(path).is_err() {
            eprintln!("skipped: needs root and a writable {KNOB}");
            return;
        }
        let knob: KnobId = "sysctl:vm.stat_interval".parse().unwrap();
        let d = tempfile::tempdir().unwrap();
        let jp = d.path().join("journal");
        let threads: Arc<dyn ThreadOps> = Arc::new(RealThreads);
        // Another worktree's test run may hold the knob's machine-wide lock for a moment: wait for it
        // (and read the original only once this test holds it).
        let mut a = Applier::new(root.clone(), &jp, threads.clone()).unwrap();
        a.set_lock_wait(std::time::Duration::from_secs(60));
        a.reserve(&knob, &Target::default(), false).unwrap();
        let original = read_trimmed(path).unwrap();
        let _guard = Guard(original.clone());
        let other = if original == "2" { "3" } else { "2" };

        // Normal path: apply, restore.
        a.apply(&knob, &Target::default(), other).unwrap();
        assert_eq!(read_trimmed(path).unwrap(), other);
        assert!(a.restore().iter().all(|n| !n.failed()));
        assert_eq!(read_trimmed(path).unwrap(), original);

        // Error path: the applier is dropped mid-configuration.
        a.apply(&knob, &Target::default(), other).unwrap();
        drop(a);
        assert_eq!(read_trimmed(path).unwrap(), original);

        // Crash path: nothing restores but the journal.
        let mut a = Applier::new(root.clone(), &jp, threads.clone()).unwrap();
        a.set_lock_wait(std::time::Duration::from_secs(60));
        a.apply(&knob, &Target::default(), other).unwrap();
        a.crash_for_tests();
        assert_eq!(read_trimmed(path).unwrap(), other);
        let notes = recover(&jp, threads.as_ref()).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(read_trimmed(path).unwrap(), original);
    }
}
