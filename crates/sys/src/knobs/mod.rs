//! Scheduler and system knobs behind one interface with a configurable root directory and a journal of
//! original values, so every change can be restored — after each configuration, on error, on signals and
//! after a crash (`ordo tune recover`).
//!
//! Everything that reads or writes a knob goes through this module:
//! - [`SysRoot`] resolves `/proc/sys`, `/sys/kernel/debug/sched`, `/sys/fs/cgroup` and `/proc/PID` under a
//!   root directory (`/` on the machine, a temporary tree in tests);
//! - [`KnobId`] names a knob (`sysctl:vm.swappiness`, `debugfs:base_slice_ns`, `policy`, `nice`, `slice`,
//!   `affinity`, `cgroup:cpu.weight`, `param:threads`);
//! - [`Checker`] decides before anything runs whether a knob exists, is writable, accepts the levels and can
//!   affect the target, and otherwise says why not ([`Refusal`]);
//! - [`Applier`] writes values, journalling each original value (fsync) before the write, and restores them;
//!   [`recover`] restores whatever a crashed run left in its journal and stops the processes it started;
//! - `KnobLocks` makes each knob one experiment's at a time, machine-wide.

mod apply;
mod check;
mod id;
mod journal;
mod lock;
mod root;
mod threads;

pub use apply::{Applier, RestoreNote, Target, recover};
pub use check::{CheckContext, Checker, Refusal, RefusalKind, no_effect_in, rt_only};
pub use id::{KnobId, Scope, ThreadKnob, parse_policy};
pub use journal::{Journal, JournalEntry};
pub use root::{CgroupMemory, SysRoot};
pub use threads::{FakeThreads, RealThreads, ThreadOps};

use std::path::PathBuf;

/// Why a knob could not be read, written, journalled or restored.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    #[error(
        "unknown knob `{0}` (expected sysctl:NAME, debugfs:NAME, policy, nice, slice, affinity, cgroup:FILE or param:NAME)"
    )]
    UnknownKnob(String),
    #[error("invalid value `{value}` for {knob}: {reason}")]
    InvalidValue {
        knob: String,
        value: String,
        reason: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("thread {tid}: {what}: {source}")]
    Thread {
        tid: i32,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("thread {tid}: {source}")]
    ThreadSys {
        tid: i32,
        #[source]
        source: crate::SysError,
    },
    #[error("journal {path}: {reason}")]
    Journal { path: PathBuf, reason: String },
    #[error("{knob} needs a target ({what})")]
    NoTarget { knob: String, what: &'static str },
    #[error("{0}")]
    Refused(Refusal),
    /// Another experiment holds the knob (or left it changed); see `KnobLocks`.
    #[error("{knob} {reason} (lock {})", .lock.display())]
    Locked {
        knob: String,
        reason: String,
        lock: PathBuf,
    },
}

impl KnobError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        KnobError::Io {
            path: path.into(),
            source,
        }
    }
}
