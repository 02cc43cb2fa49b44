//! Per-thread scheduling controls: policy (other, batch, idle, fifo:P, rr:P) and the per-task slice through
//! the sched_setattr/sched_getattr system calls, nice through setpriority, CPU affinity, pinning, and the
//! thread list of a process. Errors say whether the kernel refused for permission (EPERM), because the task
//! is gone (ESRCH) or because the value is not supported (EINVAL/ENOSYS).

use serde::{Deserialize, Serialize};

pub use ordo_results::machine::{ParsePolicyError, Policy};

use crate::error::SysError;
use crate::procfs::ProcRoot;

const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// `struct sched_attr` (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER1 = 56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

const ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

fn getattr(tid: i32) -> Result<SchedAttr, SysError> {
    let mut attr = SchedAttr {
        size: ATTR_SIZE,
        ..Default::default()
    };
    // SAFETY: `attr` is a valid, writable repr(C) sched_attr of ATTR_SIZE bytes; the kernel writes at most
    // that many bytes into it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::c_long,
            &mut attr as *mut SchedAttr,
            ATTR_SIZE as libc::c_long,
            0 as libc::c_long,
        )
    };
    if rc != 0 {
        return Err(SysError::from_errno(
            "sched_getattr",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(attr)
}

fn setattr(tid: i32, attr: &SchedAttr) -> Result<(), SysError> {
    let mut attr = *attr;
    attr.size = ATTR_SIZE;
    // SAFETY: `attr` is a valid repr(C) sched_attr whose `size` field is its true size; the kernel only
    // reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::c_long,
            &attr as *const SchedAttr,
            0 as libc::c_long,
        )
    };
    if rc != 0 {
        return Err(SysError::from_errno(
            "sched_setattr",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// A task's scheduling settings as the kernel reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSched {
    pub policy: Policy,
    pub nice: i32,
    /// The task's slice in ns for SCHED_OTHER/BATCH on kernels ≥ 6.12 (None where the kernel reports 0).
    pub slice_ns: Option<u64>,
    pub reset_on_fork: bool,
}

/// The calling thread's id (gettid).
pub fn current_tid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Policy, nice and slice of task `tid` (0 = the calling thread).
pub fn get_sched(tid: i32) -> Result<TaskSched, SysError> {
    let a = getattr(tid)?;
    let policy = Policy::from_raw(a.sched_policy, a.sched_priority);
    Ok(TaskSched {
        policy,
        nice: a.sched_nice,
        slice_ns: if policy.is_fair() && a.sched_runtime > 0 {
            Some(a.sched_runtime)
        } else {
            None
        },
        reset_on_fork: a.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0,
    })
}

/// The scheduling policy of task `tid` (0 = the calling thread).
pub(crate) fn get_policy(tid: i32) -> Result<Policy, SysError> {
    Ok(get_sched(tid)?.policy)
}

/// Set task `tid`'s policy, keeping its nice value (and its slice when staying fair).
/// Real-time policies need CAP_SYS_NICE (or RLIMIT_RTPRIO).
pub fn set_policy(tid: i32, policy: Policy) -> Result<(), SysError> {
    let (raw, prio) = policy.to_raw();
    if !(policy.is_fair() || policy.is_realtime() || policy == Policy::Idle) {
        return Err(SysError::Unsupported(format!("setting policy {policy}")));
    }
    let cur = getattr(tid)?;
    let cur_policy = Policy::from_raw(cur.sched_policy, cur.sched_priority);
    let attr = SchedAttr {
        sched_policy: raw,
        sched_priority: prio,
        sched_flags: cur.sched_flags & SCHED_FLAG_RESET_ON_FORK,
        sched_nice: cur.sched_nice,
        // Keep a custom slice only between fair policies (0 = the default slice).
        sched_runtime: if policy.is_fair() && cur_policy.is_fair() {
            cur.sched_runtime
        } else {
            0
        },
        ..Default::default()
    };
    setattr(tid, &attr)?;
    Ok(())
}

/// The nice value of task `tid` (0 = the calling thread).
pub fn get_nice(tid: i32) -> Result<i32, SysError> {
    Ok(getattr(tid)?.sched_nice)
}

/// Set the nice value (-20..=19) of task `tid` (per thread on Linux; 0 = the calling thread).
pub fn set_nice(tid: i32, nice: i32) -> Result<(), SysError> {
    if !(-20..=19).contains(&nice) {
        return Err(SysError::Unsupported(format!(
            "nice {nice}: must be in -20..=19"
        )));
    }
    // SAFETY: setpriority takes plain integers and has no memory-safety preconditions.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc != 0 {
        return Err(SysError::from_errno(
            "setpriority",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// The lowest nice value this process may give its threads: -20 with CAP_SYS_NICE in its effective set,
/// else `20 - RLIMIT_NICE` (the soft limit; 0 by default, so 20: no thread may go below its nice of today,
/// nor leave SCHED_IDLE). Lowering a priority (a higher nice) is always allowed; raising it again is not,
/// which is what a per-request priority that is restored afterwards needs.
pub fn nice_floor() -> i32 {
    let cap_sys_nice = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0);
    if cap_sys_nice {
        return -20;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit; getrlimit writes only into it.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut lim) };
    if rc != 0 {
        return 20;
    }
    nice_floor_of(false, lim.rlim_cur)
}

const CAP_SYS_NICE: u32 = 23;

/// The `CapEff:` bit mask of a /proc/PID/status text.
fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// [`nice_floor`] from its inputs: RLIMIT_NICE's soft limit r allows nice values down to 20 - r.
fn nice_floor_of(cap_sys_nice: bool, rlimit_nice: u64) -> i32 {
    if cap_sys_nice {
        return -20;
    }
    20 - rlimit_nice.min(40) as i32
}

/// A thread priority to run a piece of work at: a policy among other, batch and idle, and/or a nice value
/// (which SCHED_IDLE has none of: the kernel ignores it there), and/or the CPUs it may run on. `None` keeps
/// the thread's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkPriority {
    pub policy: Option<Policy>,
    pub nice: Option<i32>,
    pub cpus: Option<crate::CpuSet>,
}

impl WorkPriority {
    /// Neither a policy, a nice value nor CPUs: running at it changes nothing.
    pub fn is_default(&self) -> bool {
        self.policy.is_none() && self.nice.is_none() && self.cpus.is_none()
    }

    /// Give the calling thread this priority until the returned guard is dropped (on this thread), which
    /// puts back the policy, nice value and CPUs it had. With nothing to change no system call is made.
    /// The guard restores on every path, panics included; a failed restore is logged.
    pub fn enter(&self) -> Result<PriorityGuard, SysError> {
        if self.is_default() {
            return Ok(PriorityGuard::noop());
        }
        let mut guard = self.enter_sched()?;
        if let Some(cpus) = self.cpus {
            if cpus.is_empty() {
                return Err(SysError::Unsupported("an empty CPU set".into()));
            }
            let own = crate::CpuSet::from_cpus(&get_affinity(0)?).map_err(SysError::Unsupported)?;
            if own != cpus {
                // on failure `guard` is dropped here and puts the policy back
                set_affinity(0, &cpus.to_vec())?;
                guard.saved_cpus = Some(own);
            }
        }
        Ok(guard)
    }

    /// The policy and nice part of [`WorkPriority::enter`].
    fn enter_sched(&self) -> Result<PriorityGuard, SysError> {
        if self.policy.is_none() && self.nice.is_none() {
            return Ok(PriorityGuard::noop());
        }
        if let Some(p) = self.policy {
            if !matches!(p, Policy::Other | Policy::Batch | Policy::Idle) {
                return Err(SysError::Unsupported(format!(
                    "running work at policy {p}: only other, batch and idle"
                )));
            }
        }
        if let Some(n) = self.nice {
            if !(-20..=19).contains(&n) {
                return Err(SysError::Unsupported(format!(
                    "nice {n}: must be in -20..=19"
                )));
            }
        }
        let saved = getattr(0)?;
        let saved_policy = Policy::from_raw(saved.sched_policy, saved.sched_priority);
        let policy = self.policy.unwrap_or(saved_policy);
        let nice = self.nice.unwrap_or(saved.sched_nice);
        if policy == saved_policy && nice == saved.sched_nice {
            return Ok(PriorityGuard::noop());
        }
        let nice_only = policy == saved_policy && policy.is_fair();
        if nice_only {
            // only the nice value changes: setpriority leaves the slice as it is
            set_nice(0, nice)?;
        } else {
            let (raw, prio) = policy.to_raw();
            setattr(
                0,
                &SchedAttr {
                    sched_policy: raw,
                    sched_priority: prio,
                    sched_flags: saved.sched_flags & SCHED_FLAG_RESET_ON_FORK,
                    sched_nice: nice,
                    ..Default::default()
                },
            )?;
        }
        Ok(PriorityGuard {
            saved: Some(saved),
            nice_only,
            saved_cpus: None,
            _thread_bound: std::marker::PhantomData,
        })
    }
}

/// Puts the calling thread's policy and nice value back when dropped (see [`WorkPriority::enter`]). Not
/// `Send`: it must be dropped on the thread it changed.
#[must_use = "dropping the guard restores the thread's priority at once"]
pub struct PriorityGuard {
    saved: Option<SchedAttr>,
    /// Only the nice value was changed (and is all there is to put back).
    nice_only: bool,
    /// The CPUs the thread had, when they were changed.
    saved_cpus: Option<crate::CpuSet>,
    _thread_bound: std::marker::PhantomData<*const ()>,
}

impl PriorityGuard {
    fn noop() -> Self {
        PriorityGuard {
            saved: None,
            nice_only: true,
            saved_cpus: None,
            _thread_bound: std::marker::PhantomData,
        }
    }
}

impl Drop for PriorityGuard {
    fn drop(&mut self) {
        if let Some(cpus) = self.saved_cpus.take() {
            if let Err(e) = set_affinity(0, &cpus.to_vec()) {
                tracing::warn!(error = %e, "could not restore a worker thread's CPUs");
            }
        }
        let Some(saved) = self.saved.take() else {
            return;
        };
        let result = if self.nice_only {
            set_nice(0, saved.sched_nice)
        } else {
            // the policy changed, so the slice went back to the default; it stays the default
            setattr(
                0,
                &SchedAttr {
                    sched_policy: saved.sched_policy,
                    sched_priority: saved.sched_priority,
                    sched_flags: saved.sched_flags & SCHED_FLAG_RESET_ON_FORK,
                    sched_nice: saved.sched_nice,
                    ..Default::default()
                },
            )
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not restore a worker thread's scheduling priority");
        }
    }
}

/// Kernel release as (major, minor), from uname.
pub fn kernel_version() -> Option<(u32, u32)> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_release(&rel)
}

/// "6.12.3-foo" → (6, 12).
pub(crate) fn parse_release(rel: &str) -> Option<(u32, u32)> {
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Does the running kernel honour a per-task slice (`sched_runtime` for SCHED_OTHER/BATCH, Linux ≥ 6.12)?
pub fn per_task_slice_supported() -> bool {
    kernel_version().is_some_and(|v| v >= (6, 12))
}

/// Set task `tid`'s slice (SCHED_OTHER/BATCH only; 0 restores the default). Returns the slice the kernel
/// reports afterwards (it clamps requests to 0.1–100 ms). `Unsupported` when the task is not fair-class or
/// the kernel ignores the value (before 6.12 the read-back is 0).
pub fn set_slice(tid: i32, slice_ns: u64) -> Result<u64, SysError> {
    let cur = getattr(tid)?;
    let policy = Policy::from_raw(cur.sched_policy, cur.sched_priority);
    if !policy.is_fair() {
        return Err(SysError::Unsupported(format!(
            "a per-task slice applies to SCHED_OTHER/BATCH tasks; task {tid} runs {policy}"
        )));
    }
    let attr = SchedAttr {
        sched_runtime: slice_ns,
        ..cur
    };
    setattr(tid, &attr)?;
    let after = getattr(tid)?.sched_runtime;
    if slice_ns > 0 && after == 0 {
        return Err(SysError::Unsupported(
            "per-task slice: this kernel ignores sched_runtime for SCHED_OTHER (needs Linux 6.12 or later)"
                .into(),
        ));
    }
    Ok(after)
}

/// The task's current slice, ns (None before 6.12 or for non-fair policies).
pub(crate) fn get_slice(tid: i32) -> Result<Option<u64>, SysError> {
    Ok(get_sched(tid)?.slice_ns)
}

/// The CPUs task `tid` may run on (0 = the calling thread).
pub fn get_affinity(tid: i32) -> Result<Vec<usize>, SysError> {
    // SAFETY: an all-zero cpu_set_t is the empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid writable cpu_set_t and the size passed is its size.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(SysError::from_errno(
            "sched_getaffinity",
            tid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE, so the bit index is inside `set`.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Restrict task `tid` (0 = the calling thread) to `cpus`.
pub fn set_affinity(tid: i32, cpus: &[usize]) -> Result<(), SysError> {
    if cpus.is_empty() {
        return Err(SysError::Unsupported("an empty CPU set".into()));
    }
    // SAFETY: an all-zero cpu_set_t is the empty set, a valid value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(SysError::Unsupported(format!(
                "CPU {c} is beyond CPU_SETSIZE"
            )));
        }
        // SAFETY: `c` was checked to be below CPU_SETSIZE, so the bit index is inside `set`.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t and the size passed is its size; the kernel only reads it.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) {
            return Err(SysError::Unsupported(format!(
                "CPU set {cpus:?} for task {tid}: no online CPU allowed in it"
            )));
        }
        return Err(SysError::from_errno("sched_setaffinity", tid, err));
    }
    Ok(())
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    set_affinity(0, &[cpu])
}

/// Online CPUs (sysconf(_SC_NPROCESSORS_ONLN)), at least 1.
pub fn cpu_count() -> usize {
    // SAFETY: sysconf only reads a configuration value.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

/// The thread ids of process `pid`, from /proc/PID/task.
pub fn list_threads(pid: i32) -> Result<Vec<i32>, SysError> {
    ProcRoot::default().tasks(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release() {
        assert_eq!(parse_release("6.12.3-arch1"), Some((6, 12)));
        assert_eq!(parse_release("5.4.0"), Some((5, 4)));
        assert_eq!(parse_release("x"), None);
    }

    #[test]
    fn attr_is_56_bytes() {
        assert_eq!(ATTR_SIZE, 56);
    }

    #[test]
    fn own_thread_round_trips() {
        // Runs on a spawned thread so the test harness's threads are untouched.
        std::thread::spawn(|| {
            let tid = current_tid();
            let s = get_sched(0).unwrap();
            assert_eq!(s.policy, Policy::Other);
            // Raising nice never needs privileges.
            set_nice(tid, s.nice.clamp(5, 19)).unwrap();
            assert_eq!(get_nice(0).unwrap(), s.nice.clamp(5, 19));
            set_policy(0, Policy::Batch).unwrap();
            assert_eq!(get_policy(tid).unwrap(), Policy::Batch);
            assert_eq!(
                get_nice(0).unwrap(),
                s.nice.clamp(5, 19),
                "nice kept across policy change"
            );
            set_policy(0, Policy::Other).unwrap();
            let cpus = get_affinity(0).unwrap();
            assert!(!cpus.is_empty());
            pin_current_thread(cpus[0]).unwrap();
            assert_eq!(get_affinity(0).unwrap(), vec![cpus[0]]);
            if per_task_slice_supported() {
                let got = set_slice(0, 3_000_000).unwrap();
                assert_eq!(got, 3_000_000);
                assert_eq!(get_slice(0).unwrap(), Some(3_000_000));
            }
            assert!(set_nice(0, 40).is_err());
            assert!(set_affinity(0, &[]).is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn nice_floor_from_capability_and_rlimit() {
        assert_eq!(nice_floor_of(true, 0), -20);
        assert_eq!(nice_floor_of(false, 0), 20);
        assert_eq!(nice_floor_of(false, 20), 0);
        assert_eq!(nice_floor_of(false, 40), -20);
        assert_eq!(nice_floor_of(false, u64::MAX), -20);
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001fffeffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1fffeffffff));
        assert!(parse_cap_eff(status).unwrap() & (1 << CAP_SYS_NICE) != 0);
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
        assert!((-20..=20).contains(&nice_floor()));
    }

    /// A priority entered on a thread is in effect until its guard drops, then the thread's own is back —
    /// on a spawned thread, so the harness's threads are untouched. Going back up needs CAP_SYS_NICE (or
    /// RLIMIT_NICE); without it only the refusal is checked.
    #[test]
    fn work_cpus_are_entered_and_restored() {
        std::thread::spawn(|| {
            let before = get_affinity(0).unwrap();
            let one = crate::CpuSet::from_cpus(&before[..1]).unwrap();
            {
                let _g = WorkPriority {
                    cpus: Some(one),
                    ..Default::default()
                }
                .enter()
                .unwrap();
                assert_eq!(get_affinity(0).unwrap(), vec![before[0]]);
            }
            assert_eq!(
                get_affinity(0).unwrap(),
                before,
                "the guard puts the CPUs back"
            );
            // a set of CPUs the machine does not have: refused, and nothing changed
            let none = crate::CpuSet::from_cpus(&[1023]).unwrap();
            let err = WorkPriority {
                cpus: Some(none),
                nice: get_sched(0).ok().map(|s| s.nice),
                policy: None,
            }
            .enter();
            assert!(err.is_err());
            assert_eq!(get_affinity(0).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn work_priority_is_entered_and_restored() {
        std::thread::spawn(|| {
            let before = get_sched(0).unwrap();
            assert!(WorkPriority::default().enter().is_ok());
            assert!(
                WorkPriority {
                    policy: Some(Policy::Fifo(5)),
                    nice: None,
                    cpus: None
                }
                .enter()
                .is_err()
            );
            assert!(
                WorkPriority {
                    policy: None,
                    nice: Some(20),
                    cpus: None
                }
                .enter()
                .is_err()
            );
            assert_eq!(get_sched(0).unwrap(), before, "refusals change nothing");
            if nice_floor() > before.nice {
                return;
            }
            let nice = if before.nice == 7 { 8 } else { 7 };
            {
                let _g = WorkPriority {
                    policy: None,
                    nice: Some(nice),
                    cpus: None,
                }
                .enter()
                .unwrap();
                assert_eq!(get_nice(0).unwrap(), nice);
            }
            assert_eq!(get_sched(0).unwrap(), before);
            {
                // (SCHED_IDLE has no nice value: the kernel keeps the one the thread had)
                let _g = WorkPriority {
                    policy: Some(Policy::Idle),
                    nice: None,
                    cpus: None,
                }
                .enter()
                .unwrap();
                assert_eq!(get_sched(0).unwrap().policy, Policy::Idle);
            }
            let after = get_sched(0).unwrap();
            assert_eq!((after.policy, after.nice), (before.policy, before.nice));
            // restored on a panic's unwinding too
            let r = std::panic::catch_unwind(|| {
                let _g = WorkPriority {
                    policy: Some(Policy::Batch),
                    nice: None,
                    cpus: None,
                }
                .enter()
                .unwrap();
                panic!("work failed");
            });
            assert!(r.is_err());
            let after = get_sched(0).unwrap();
            assert_eq!((after.policy, after.nice), (before.policy, before.nice));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn gone_task_is_named() {
        // PID numbers above pid_max (4194304 at most) never exist.
        match get_sched(99_999_999) {
            Err(SysError::ProcessGone(99_999_999)) => {}
            other => panic!("{other:?}"),
        }
    }
}
