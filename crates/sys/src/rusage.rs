//! getrusage(2) as a typed struct: CPU time, context switches, faults and peak RSS of the calling thread,
//! the whole process or its waited-for children. The loop probe reads RUSAGE_THREAD around every sample.

use serde::{Deserialize, Serialize};

use crate::error::SysError;

/// The fields of `struct rusage` Linux fills in, with times in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rusage {
    pub utime_ns: u64,
    pub stime_ns: u64,
    /// Peak resident set size, kB (for RUSAGE_THREAD the process's peak).
    pub maxrss_kb: u64,
    pub minflt: u64,
    pub majflt: u64,
    /// Voluntary context switches (the task blocked or yielded).
    pub nvcsw: u64,
    /// Involuntary context switches (the task was preempted).
    pub nivcsw: u64,
}

impl Rusage {
    /// CPU time (user + system), ns.
    pub fn cpu_ns(&self) -> u64 {
        self.utime_ns + self.stime_ns
    }

    /// Counters accumulated between `earlier` and `self` (saturating; `maxrss_kb` is the later value).
    pub fn delta(&self, earlier: &Self) -> Self {
        Rusage {
            utime_ns: self.utime_ns.saturating_sub(earlier.utime_ns),
            stime_ns: self.stime_ns.saturating_sub(earlier.stime_ns),
            maxrss_kb: self.maxrss_kb,
            minflt: self.minflt.saturating_sub(earlier.minflt),
            majflt: self.majflt.saturating_sub(earlier.majflt),
            nvcsw: self.nvcsw.saturating_sub(earlier.nvcsw),
            nivcsw: self.nivcsw.saturating_sub(earlier.nivcsw),
        }
    }
}

fn tv_ns(tv: libc::timeval) -> u64 {
    (tv.tv_sec.max(0) as u64) * 1_000_000_000 + (tv.tv_usec.max(0) as u64) * 1_000
}

fn get(who: libc::c_int, name: &str) -> Result<Rusage, SysError> {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return Err(SysError::Os {
            call: format!("getrusage({name})"),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(Rusage {
        utime_ns: tv_ns(ru.ru_utime),
        stime_ns: tv_ns(ru.ru_stime),
        maxrss_kb: ru.ru_maxrss.max(0) as u64,
        minflt: ru.ru_minflt.max(0) as u64,
        majflt: ru.ru_majflt.max(0) as u64,
        nvcsw: ru.ru_nvcsw.max(0) as u64,
        nivcsw: ru.ru_nivcsw.max(0) as u64,
    })
}

/// The calling thread (RUSAGE_THREAD).
pub fn thread() -> Result<Rusage, SysError> {
    get(libc::RUSAGE_THREAD, "RUSAGE_THREAD")
}

/// The whole calling process, all threads (RUSAGE_SELF).
pub fn process() -> Result<Rusage, SysError> {
    get(libc::RUSAGE_SELF, "RUSAGE_SELF")
}

/// Children that have terminated and been waited for (RUSAGE_CHILDREN).
pub fn children() -> Result<Rusage, SysError> {
    get(libc::RUSAGE_CHILDREN, "RUSAGE_CHILDREN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_grows_with_work() {
        let a = thread().unwrap();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        // Work until the thread's own CPU time has grown by 5 ms: on a loaded machine 30 ms of wall time
        // can hold less than that (the bound is only there so a broken reader cannot loop forever).
        let mut b = thread().unwrap();
        while b.delta(&a).cpu_ns() <= 5_000_000 && t.elapsed() < std::time::Duration::from_secs(20)
        {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            b = thread().unwrap();
        }
        let d = b.delta(&a);
        assert!(d.cpu_ns() > 5_000_000, "{d:?}");
        assert!(process().unwrap().cpu_ns() >= b.cpu_ns());
        let _ = children().unwrap();
    }
}
