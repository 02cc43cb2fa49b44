//! Machine-wide locks on knobs, so two experiments never change the same knob at once. The journal's own
//! lock only stops two processes sharing one journal; two runs with their own `--db` each journalled the
//! other's applied value as the original, and the knob stayed changed. Each knob a run changes is locked
//! here (an `flock` on a file under the knob root's `run/ordo/knobs/`, released when the run ends or dies)
//! and the file names its holder, so a second run is refused with who holds it, or waits. A holder that
//! died leaves its description behind: while its journal still holds a change of that knob, the knob is
//! not at its original value and a new run is refused until `ordo tune recover` has restored it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::KnobError;
use super::journal::{Journal, now_unix};

/// Who holds a knob: written into its lock file while held.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// The holder's journal (absolute), where the knob's original value is recorded.
    pub journal: PathBuf,
    /// Seconds since the Unix epoch.
    pub since: u64,
    /// The holder's command line, for the message.
    #[serde(default)]
    pub command: String,
}

impl Holder {
    /// This process, journalling to `journal`.
    pub fn this_process(journal: &Path) -> Holder {
        Holder {
            pid: std::process::id(),
            journal: std::path::absolute(journal).unwrap_or_else(|_| journal.to_path_buf()),
            since: now_unix(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    fn describe(&self) -> String {
        let cmd = if self.command.is_empty() {
            String::new()
        } else {
            format!(" `{}`", self.command)
        };
        format!(
            "ordo tune (pid {}{cmd}, journal {}, since {})",
            self.pid,
            self.journal.display(),
            self.since
        )
    }
}

/// The lock file of a knob key (a path relative to the knob root, or `pid-N`): characters outside
/// `[A-Za-z0-9._-]` become `+`.
pub fn lock_file(dir: &Path, key: &str) -> PathBuf {
    let name: String = key
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '+'
            }
        })
        .collect();
    dir.join(format!("{name}.lock"))
}

/// The locks one run holds, by lock file.
#[derive(Debug)]
pub struct KnobLocks {
    dir: PathBuf,
    holder: Holder,
    wait: Duration,
    held: BTreeMap<PathBuf, File>,
}

fn try_flock(file: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor that `file` keeps open for the duration of the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Whether the journal at `journal` still records a change made under the lock file `lock`.
fn journal_holds(journal: &Path, lock: &Path) -> bool {
    Journal::entries_at(journal)
        .map(|es| es.iter().any(|e| e.lock.as_deref() == Some(lock)))
        .unwrap_or(false)
}

impl KnobLocks {
    /// Locks under `dir` (created when the first one is taken), held by `holder`.
    pub fn new(dir: impl Into<PathBuf>, holder: Holder) -> KnobLocks {
        KnobLocks {
            dir: dir.into(),
            holder,
            wait: Duration::ZERO,
            held: BTreeMap::new(),
        }
    }

    /// Wait up to `wait` for a knob another run holds instead of refusing at once.
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    /// Whether this run holds `key`.
    #[cfg(test)]
    fn holds(&self, key: &str) -> bool {
        self.held.contains_key(&lock_file(&self.dir, key))
    }

    /// Lock `key` for `knob` (the knob's name, for messages) and return its lock file. Already held: a
    /// no-op. Held by another live run: refused naming it (after waiting, when a wait is set). Left by a
    /// run that died while its journal still records a change of the knob: refused naming that journal.
    pub fn acquire(&mut self, knob: &str, key: &str) -> Result<PathBuf, KnobError> {
        let path = lock_file(&self.dir, key);
        if self.held.contains_key(&path) {
            return Ok(path);
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| KnobError::io(&self.dir, e))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| KnobError::io(&path, e))?;
        let deadline = Instant::now() + self.wait;
        loop {
            if try_flock(&file).map_err(|e| KnobError::io(&path, e))? {
                break;
            }
            if Instant::now() >= deadline {
                let who = read_holder(&mut file)
                    .map(|h| h.describe())
                    .unwrap_or_else(|| "another ordo tune".into());
                return Err(KnobError::Locked {
                    knob: knob.to_string(),
                    reason: format!(
                        "in use by {who}, which changes it and restores it when it ends; two experiments on one knob would each record the other's value as the original. Wait for it to end{}, or leave the knob out",
                        if self.wait.is_zero() {
                            " (or pass --wait-lock)"
                        } else {
                            ""
                        }
                    ),
                    lock: path,
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(dead) = read_holder(&mut file)
            && dead.journal != self.holder.journal
            && journal_holds(&dead.journal, &path)
        {
            // Dropping `file` unlocks: the knob stays as the dead run left it until recovered.
            return Err(KnobError::Locked {
                knob: knob.to_string(),
                reason: format!(
                    "was left changed by {}, which ended without restoring it; its journal has the original value: run `ordo tune recover --journal {}` first",
                    dead.describe(),
                    dead.journal.display()
                ),
                lock: path,
            });
        }
        let text = serde_json::to_string(&self.holder).unwrap_or_default() + "\n";
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(|e| KnobError::io(&path, e))?;
        self.held.insert(path.clone(), file);
        Ok(path)
    }

    /// Release every lock: the holder's description is removed first (nothing of this run is left to
    /// restore), then the lock goes with the file.
    pub fn release_all(&mut self) {
        for (_, f) in std::mem::take(&mut self.held) {
            let _ = f.set_len(0);
        }
    }

    /// Let go of every lock but leave the holder's description: some change could not be restored and the
    /// journal keeps it, so the next run must be told to recover first.
    pub fn abandon(&mut self) {
        self.held.clear();
    }
}

/// Take the lock file `lock` for `recover`: refused while a running experiment holds it. The returned file
/// keeps the lock; [`clear_marker`] removes the dead holder's description once its changes are restored.
pub fn lock_for_recover(lock: &Path, knob: &str) -> Result<Option<File>, KnobError> {
    let mut file = match OpenOptions::new().read(true).write(true).open(lock) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(KnobError::io(lock, e)),
    };
    if try_flock(&file).map_err(|e| KnobError::io(lock, e))? {
        return Ok(Some(file));
    }
    let who = read_holder(&mut file)
        .map(|h| h.describe())
        .unwrap_or_else(|| "another ordo tune".into());
    Err(KnobError::Locked {
        knob: knob.to_string(),
        reason: format!("in use by {who}; recover when it has ended"),
        lock: lock.to_path_buf(),
    })
}

/// Remove the holder's description from a lock file taken with [`lock_for_recover`].
pub fn clear_marker(file: &File) {
    let _ = file.set_len(0);
}

#[cfg(test)]
mod tests {
    use super::super::journal::JournalEntry;
    use super::*;

    fn holder(dir: &Path, name: &str) -> Holder {
        Holder {
            pid: 4242,
            journal: dir.join(name),
            since: 1,
            command: format!("ordo tune run {name}"),
        }
    }

    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_gets_it_once_released() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("locks");
        let mut a = KnobLocks::new(&dir, holder(d.path(), "a.journal"));
        let mut b = KnobLocks::new(&dir, holder(d.path(), "b.journal"));
        let la = a
            .acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap();
        assert_eq!(la, dir.join("proc+sys+vm+swappiness.lock"));
        assert!(a.holds("proc/sys/vm/swappiness"));
        a.acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .expect("held already: a no-op");
        let e = b
            .acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sysctl:vm.swappiness"), "{e}");
        assert!(e.contains("pid 4242"), "{e}");
        assert!(e.contains("a.journal"), "{e}");
        // Another knob is free.
        b.acquire("sysctl:vm.dirty_ratio", "proc/sys/vm/dirty_ratio")
            .unwrap();
        a.release_all();
        // Released; but a process another test of this binary forks meanwhile holds a copy of `a`'s
        // descriptor (and so its flock) until it execs, so "at once" can be a few milliseconds late: wait
        // for it (a lock that was never released fails after the whole wait).
        b.set_wait(Duration::from_secs(5));
        b.acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap();
    }

    #[test]
    fn waiting_gets_the_lock_when_the_holder_lets_go() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("locks");
        let mut a = KnobLocks::new(&dir, holder(d.path(), "a.journal"));
        a.acquire("k", "k").unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            a.release_all();
        });
        let mut b = KnobLocks::new(&dir, holder(d.path(), "b.journal"));
        b.set_wait(Duration::from_secs(10));
        b.acquire("k", "k").unwrap();
        t.join().unwrap();
    }

    #[test]
    fn a_dead_holder_whose_journal_keeps_the_change_blocks_until_recovered() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("locks");
        let ja = d.path().join("a.journal");
        let mut a = KnobLocks::new(&dir, holder(d.path(), "a.journal"));
        let lock = a
            .acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap();
        let mut j = Journal::open(&ja).unwrap();
        j.record(&JournalEntry {
            knob: "sysctl:vm.swappiness".into(),
            target: "system".into(),
            original: "60".into(),
            applied: "10".into(),
            path: Some(d.path().join("swappiness")),
            at: 1,
            lock: Some(lock.clone()),
            ..JournalEntry::default()
        })
        .unwrap();
        drop(j);
        a.abandon(); // dies: the description stays, the flock goes
        let mut b = KnobLocks::new(&dir, holder(d.path(), "b.journal"));
        let e = b
            .acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap_err()
            .to_string();
        assert!(e.contains("left changed"), "{e}");
        assert!(e.contains("ordo tune recover --journal"), "{e}");
        assert!(e.contains("a.journal"), "{e}");
        // Recovered (the journal is gone): the description is stale and the knob free.
        std::fs::remove_file(&ja).unwrap();
        b.acquire("sysctl:vm.swappiness", "proc/sys/vm/swappiness")
            .unwrap();
        // recover is refused while a run holds the lock.
        let e = lock_for_recover(&lock, "sysctl:vm.swappiness")
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.journal"), "{e}");
    }
}
