//! The journal: one JSON line per change, written and fsynced *before* the change, so that after a crash or
//! SIGKILL `ordo tune recover` knows every original value.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::KnobError;

/// One change: which knob, on what, the value found and the value written. A `process` entry records a
/// process the run started (target, load generator), so `recover` can stop it after a crash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// `sysctl:vm.swappiness`, `policy`, `cgroup:cpu.weight`, ...
    pub knob: String,
    /// `system`, `tid:1234` or `cgroup:<dir>`.
    pub target: String,
    pub original: String,
    pub applied: String,
    /// The file written, for file-based knobs (sysctl, debugfs, cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub at: u64,
    /// The knob's machine-wide lock file (see `KnobLocks`): `recover` takes it, so it never
    /// restores under a running experiment, and clears the dead run's mark on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<PathBuf>,
    /// `process` entries: the process's start time in clock ticks after boot (`/proc/PID/stat` field 22),
    /// so a reused PID is never signalled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
    /// `process` entries: the boot the process was started in (`/proc/sys/kernel/random/boot_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// An append-only journal file.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Open (create) the journal at `path` for appending. Existing entries are kept: they belong to a run
    /// that did not finish, and [`Journal::entries`] returns them so the caller can recover first.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, KnobError> {
        let path = path.into();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| KnobError::io(dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| KnobError::io(&path, e))?;
        lock_exclusive(&file, &path)?;
        Ok(Journal { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append and fsync one entry.
    pub fn record(&mut self, entry: &JournalEntry) -> Result<(), KnobError> {
        let mut line = serde_json::to_string(entry).map_err(|e| KnobError::Journal {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_all())
            .map_err(|e| KnobError::io(&self.path, e))
    }

    /// Empty the journal (everything in it has been restored) and fsync.
    pub fn clear(&mut self) -> Result<(), KnobError> {
        self.file
            .set_len(0)
            .and_then(|()| self.file.sync_all())
            .map_err(|e| KnobError::io(&self.path, e))
    }

    /// The entries currently in the journal file at `path` (empty when it does not exist). A torn last line
    /// (crash in the middle of a write, before its change was made) is ignored.
    pub fn entries_at(path: &Path) -> Result<Vec<JournalEntry>, KnobError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(KnobError::io(path, e)),
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            match serde_json::from_str::<JournalEntry>(l) {
                Ok(e) => out.push(e),
                Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
                Err(e) => {
                    return Err(KnobError::Journal {
                        path: path.to_path_buf(),
                        reason: format!("line {}: {e}", i + 1),
                    });
                }
            }
        }
        Ok(out)
    }

    pub fn entries(&self) -> Result<Vec<JournalEntry>, KnobError> {
        Self::entries_at(&self.path)
    }
}

/// Takes an exclusive `flock` on the journal for as long as `file` stays open (the lock goes with the last
/// close, so also when the process dies). Two `ordo tune` processes on one journal would each record the
/// other's applied values as "original" and could leave the machine changed; `recover` under a running
/// experiment would restore knobs under its feet. The second one is refused instead.
pub(crate) fn lock_exclusive(file: &File, path: &Path) -> Result<(), KnobError> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor that `file` keeps open for the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        return Err(KnobError::Journal {
            path: path.to_path_buf(),
            reason: "in use by another running `ordo tune` (it holds the journal's lock and restores its own \
                     knobs); wait for it to end, or give this one another --db or --journal"
                .into(),
        });
    }
    Err(KnobError::io(path, e))
}

pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: &str) -> JournalEntry {
        JournalEntry {
            knob: "sysctl:vm.swappiness".into(),
            target: "system".into(),
            original: "60".into(),
            applied: v.into(),
            path: Some("/x".into()),
            at: 1,
            ..JournalEntry::default()
        }
    }

    #[test]
    fn a_journal_in_use_is_refused_until_it_is_closed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("j.jsonl");
        let first = Journal::open(&p).unwrap();
        let e = Journal::open(&p).unwrap_err().to_string();
        assert!(e.contains("in use by another running `ordo tune`"), "{e}");
        assert!(e.contains("j.jsonl"), "{e}");
        drop(first);
        Journal::open(&p).expect("free again once the first is closed");
    }

    #[test]
    fn record_clear_and_torn_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/j.jsonl");
        let mut j = Journal::open(&p).unwrap();
        j.record(&entry("10")).unwrap();
        j.record(&entry("20")).unwrap();
        assert_eq!(j.entries().unwrap(), vec![entry("10"), entry("20")]);
        // A torn final line is ignored; a broken line in the middle is an error.
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"knob\":\"sys");
        std::fs::write(&p, &text).unwrap();
        assert_eq!(Journal::entries_at(&p).unwrap().len(), 2);
        std::fs::write(&p, format!("garbage\n{text}\n")).unwrap();
        assert!(Journal::entries_at(&p).is_err());
        j.clear().unwrap();
        assert!(j.entries().unwrap().is_empty());
        assert!(
            Journal::entries_at(&d.path().join("none"))
                .unwrap()
                .is_empty()
        );
    }
}
