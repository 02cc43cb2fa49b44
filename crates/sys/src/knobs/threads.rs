//! Per-thread knobs (policy, nice, per-task slice, affinity) behind a trait, so the applier and its
//! journal are tested against an in-memory fake while the real implementation makes the system calls.

use std::collections::HashMap;
use std::sync::Mutex;

use super::KnobError;
use super::id::{ThreadKnob, format_cpu_list, format_policy, parse_cpu_list, parse_policy};

/// Reads and writes per-thread scheduling settings; values use the experiment-file syntax
/// (`rr:10`, `5`, `3000000`, `0-1`).
pub trait ThreadOps: Send + Sync {
    fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError>;
    fn set(&self, tid: i32, knob: ThreadKnob, value: &str) -> Result<(), KnobError>;
    /// Whether the thread still exists (restoring an exited thread's settings is moot).
    fn alive(&self, tid: i32) -> bool;
}

/// The machine's threads, through sched_{get,set}attr, setpriority and sched_{get,set}affinity.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealThreads;

/// `struct sched_attr`, SCHED_ATTR_SIZE_VER0 (48 bytes).
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

fn last_err(tid: i32, what: &'static str) -> KnobError {
    KnobError::Thread {
        tid,
        what,
        source: std::io::Error::last_os_error(),
    }
}

fn getattr(tid: i32) -> Result<SchedAttr, KnobError> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a valid, writable sched_attr of the size we pass; the kernel writes at most that.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    if rc != 0 {
        return Err(last_err(tid, "sched_getattr"));
    }
    Ok(attr)
}

fn setattr(tid: i32, mut attr: SchedAttr) -> Result<(), KnobError> {
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: `attr` is a valid sched_attr whose size field matches its layout; the kernel only reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid,
            &attr as *const SchedAttr,
            0u32,
        )
    };
    if rc != 0 {
        return Err(last_err(tid, "sched_setattr"));
    }
    Ok(())
}

fn invalid(knob: ThreadKnob, value: &str, reason: impl Into<String>) -> KnobError {
    KnobError::InvalidValue {
        knob: knob.name().into(),
        value: value.into(),
        reason: reason.into(),
    }
}

impl ThreadOps for RealThreads {
    fn get(&self, tid: i32, knob: ThreadKnob) -> Result<String, KnobError> {
        match knob {
            ThreadKnob::Policy => {
                let a = getattr(tid)?;
                Ok(format_policy(
                    a.sched_policy as i32,
                    a.sched_priority as i32,
                ))
            }
            ThreadKnob::Nice => Ok(getattr(tid)?.sched_nice.to_string()),
            ThreadKnob::Slice => Ok(getattr(tid)?.sched_runtime.to_string()),
            ThreadKnob::Affinity => {
                // SAFETY: an all-zero cpu_set_t is a valid empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                // SAFETY: `set` is a valid cpu_set_t and we pass its exact size.
                let rc = unsafe {
                    libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
                };
                if rc != 0 {
                    return Err(last_err(tid, "sched_getaffinity"));
                }
                let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                    // SAFETY: i < CPU_SETSIZE, so CPU_ISSET stays inside the set.
                    .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
                    .collect();
                Ok(format_cpu_list(&cpus))
            }
        }
    }

    fn set(&self, tid: i32, knob: ThreadKnob, value: &str) -> Result<(), KnobError> {
        match knob {
            ThreadKnob::Policy => {
                let (policy, prio) = parse_policy(value).map_err(|r| invalid(knob, value, r))?;
                let mut a = getattr(tid)?;
                a.sched_policy = policy as u32;
                a.sched_priority = prio as u32;
                a.sched_flags = 0;
                setattr(tid, a)
            }
            ThreadKnob::Nice => {
                let nice: i32 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(knob, value, "not an integer"))?;
                let mut a = getattr(tid)?;
                a.sched_nice = nice;
                a.sched_flags = 0;
                setattr(tid, a)
            }
            ThreadKnob::Slice => {
                let ns: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(knob, value, "not a number of nanoseconds"))?;
                let mut a = getattr(tid)?;
                a.sched_runtime = ns;
                a.sched_flags = 0;
                setattr(tid, a)
            }
            ThreadKnob::Affinity => {
                let cpus = parse_cpu_list(value).map_err(|r| invalid(knob, value, r))?;
                // SAFETY: an all-zero cpu_set_t is a valid empty set.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                for c in cpus {
                    if c >= libc::CPU_SETSIZE as usize {
                        return Err(invalid(knob, value, "CPU number too large"));
                    }
                    // SAFETY: c < CPU_SETSIZE (checked above).
                    unsafe { libc::CPU_SET(c, &mut set) };
                }
                // SAFETY: `set` is a valid cpu_set_t and we pass its exact size.
                let rc = unsafe {
                    libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
                };
                if rc != 0 {
                    return Err(last_err(tid, "sched_setaffinity"));
                }
                Ok(())
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
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
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
