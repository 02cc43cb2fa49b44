//! Per-thread knobs (policy, nice, per-task slice, affinity) behind a trait, so the applier and its
//! journal are tested against an in-memory fake while the real implementation makes the system calls.

use std::collections::HashMap;
use std::sync::Mutex;

use super::KnobError;
use super::id::{ThreadKnob, format_cpu_list, parse_cpu_list, parse_policy};

/// Reads and writes per-thread scheduling settings; values use the experiment-file syntax
/// (`rr:10`, `5`, `3000000`, `0-1`).
pub trait ThreadOps: Send + Sync {
    fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError>;
    fn set(&self, tid: i32, knob: ThreadKnob, value: &str) -> Result<(), KnobError>;
    /// Whether the thread still exists (restoring an exited thread's settings is moot).
    fn alive(&self, tid: i32) -> bool;
}

/// The machine's threads, through [`crate::thread`] (sched_{get,set}attr, setpriority,
/// sched_{get,set}affinity).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealThreads;

fn invalid(knob: ThreadKnob, value: &str, reason: impl Into<String>) -> KnobError {
    KnobError::InvalidValue {
        knob: knob.name().into(),
        value: value.into(),
        reason: reason.into(),
    }
}

fn sys(tid: i32) -> impl Fn(crate::SysError) -> KnobError {
    move |source| KnobError::ThreadSys { tid, source }
}

impl ThreadOps for RealThreads {
    fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError> {
        use crate::thread;
        match knob {
            ThreadKnob::Policy => Ok(thread::get_policy(tid).map_err(sys(tid))?.to_string()),
            ThreadKnob::Nice => Ok(thread::get_nice(tid).map_err(sys(tid))?.to_string()),
            // 0 = no custom slice (the task follows base_slice_ns); restoring 0 resets it so.
            ThreadKnob::Slice => Ok(thread::get_slice(tid)
                .map_err(sys(tid))?
                .unwrap_or(0)
                .to_string()),
            ThreadKnob::Affinity => Ok(format_cpu_list(
                &thread::get_affinity(tid).map_err(sys(tid))?,
            )),
        }
    }

    fn set(&self, tid: i32, knob: ThreadKnob, value: &str) -> Result<(), KnobError> {
        use crate::thread;
        match knob {
            ThreadKnob::Policy => {
                parse_policy(value).map_err(|r| invalid(knob, value, r))?;
                let p: crate::thread::Policy =
                    value
                        .parse()
                        .map_err(|e: crate::thread::ParsePolicyError| {
                            invalid(knob, value, e.to_string())
                        })?;
                thread::set_policy(tid, p).map_err(sys(tid))
            }
            ThreadKnob::Nice => {
                let nice: i32 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(knob, value, "not an integer"))?;
                thread::set_nice(tid, nice).map_err(sys(tid))
            }
            ThreadKnob::Slice => {
                let ns: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(knob, value, "not a number of nanoseconds"))?;
                thread::set_slice(tid, ns).map(drop).map_err(sys(tid))
            }
            ThreadKnob::Affinity => {
                let cpus = parse_cpu_list(value).map_err(|r| invalid(knob, value, r))?;
                thread::set_affinity(tid, &cpus).map_err(sys(tid))
            }
        }
    }

    fn alive(&self, tid: i32) -> bool {
        std::path::Path::new(&format!("/proc/{tid}")).exists()
    }
}

/// In-memory threads for tests: `insert` threads with settings, `kill` them to test the "exited" path.
#[derive(Debug, Default)]
pub struct FakeThreads {
    state: Mutex<HashMap<(i32, ThreadKnob), String>>,
    dead: Mutex<Vec<i32>>,
}

impl FakeThreads {
    pub fn new() -> Self {
        Self::default()
    }

    /// A thread with default settings: other, nice 0, slice 3000000, affinity `cpus`.
    pub fn insert(&self, tid: i32, cpus: &str) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.insert((tid, ThreadKnob::Policy), "other".into());
        s.insert((tid, ThreadKnob::Nice), "0".into());
        s.insert((tid, ThreadKnob::Slice), "3000000".into());
        s.insert((tid, ThreadKnob::Affinity), cpus.into());
    }

    pub fn kill(&self, tid: i32) {
        self.dead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tid);
    }
}

impl ThreadOps for FakeThreads {
    fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError> {
        if !self.alive(tid) {
            return Err(KnobError::Thread {
                tid,
                what: "get",
                source: std::io::Error::from_raw_os_error(libc::ESRCH),
            });
        }
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.get(&(tid, knob)).cloned().ok_or(KnobError::Thread {
            tid,
            what: "get",
            source: std::io::Error::from_raw_os_error(libc::ESRCH),
        })
    }

    fn set(&self, tid: i32, knob: ThreadKnob, value: &str) -> Result<(), KnobError> {
        if !self.alive(tid) {
            return Err(KnobError::Thread {
                tid,
                what: "set",
                source: std::io::Error::from_raw_os_error(libc::ESRCH),
            });
        }
        if knob == ThreadKnob::Policy {
            parse_policy(value).map_err(|r| invalid(knob, value, r))?;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.insert((tid, knob), value.trim().to_string());
        Ok(())
    }

    fn alive(&self, tid: i32) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.contains_key(&(tid, ThreadKnob::Policy))
            && !self
                .dead
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gettid() -> i32 {
        crate::thread::current_tid()
    }

    #[test]
    fn real_thread_nice_and_affinity_round_trip() {
        // Runs on a thread of our own that nobody else uses; raising nice needs no privilege.
        std::thread::spawn(|| {
            let t = RealThreads;
            let tid = gettid();
            assert_eq!(t.get(tid, ThreadKnob::Policy).unwrap(), "other");
            let nice = t.get(tid, ThreadKnob::Nice).unwrap();
            t.set(tid, ThreadKnob::Nice, "5").unwrap();
            assert_eq!(t.get(tid, ThreadKnob::Nice).unwrap(), "5");
            let aff = t.get(tid, ThreadKnob::Affinity).unwrap();
            let first = parse_cpu_list(&aff).unwrap()[0];
            t.set(tid, ThreadKnob::Affinity, &first.to_string())
                .unwrap();
            assert_eq!(t.get(tid, ThreadKnob::Affinity).unwrap(), first.to_string());
            t.set(tid, ThreadKnob::Affinity, &aff).unwrap();
            assert_eq!(t.get(tid, ThreadKnob::Affinity).unwrap(), aff);
            let _ = t.set(tid, ThreadKnob::Nice, &nice);
            assert!(t.alive(tid));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn fake_threads_die() {
        let f = FakeThreads::new();
        f.insert(5, "0-1");
        f.set(5, ThreadKnob::Policy, "rr:3").unwrap();
        assert_eq!(f.get(5, ThreadKnob::Policy).unwrap(), "rr:3");
        assert!(f.set(5, ThreadKnob::Policy, "rr").is_err());
        f.kill(5);
        assert!(!f.alive(5));
        assert!(f.get(5, ThreadKnob::Nice).is_err());
    }
}
