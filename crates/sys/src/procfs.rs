//! Readers for the /proc files that say how a process was scheduled: pure parsers (text in, typed struct
//! out, errors naming the file and field) plus a `ProcRoot` that reads them from /proc or from a fixture
//! tree in tests. One implementation for `ordo probe`, `ordo bench --server-pid` and `ordo tune`.
//!
//! Fields a kernel may lack are `Option`s; files a kernel may lack give `SysError::Missing`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::SysError;

/// Clock ticks per second for the time fields of /proc/PID/stat (`sysconf(_SC_CLK_TCK)`, 100 almost everywhere).
pub fn clk_tck() -> u64 {
    static TCK: OnceLock<u64> = OnceLock::new();
    *TCK.get_or_init(|| {
        // SAFETY: sysconf only reads a configuration value; it has no memory-safety preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if v > 0 { v as u64 } else { 100 }
    })
}

/// Convert clock ticks to nanoseconds with the given tick rate.
pub(crate) fn ticks_to_ns(ticks: u64, tck: u64) -> u64 {
    let tck = tck.max(1);
    ticks.saturating_mul(1_000_000_000) / tck
}

/// /proc/PID/stat or /proc/PID/task/TID/stat.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStat {
    pub pid: i32,
    /// The command name (between the parentheses; may itself contain spaces and parentheses).
    pub comm: String,
    /// R, S, D, Z, T, ...
    pub state: char,
    pub ppid: i32,
    pub minflt: u64,
    pub majflt: u64,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// User CPU time in ns (ticks × 10⁹ / CLK_TCK; tick resolution).
    pub utime_ns: u64,
    /// System CPU time in ns (tick resolution).
    pub stime_ns: u64,
    /// Kernel priority as shown by the kernel (20 + nice for normal tasks; negative for real-time).
    pub priority: i64,
    pub nice: i64,
    pub num_threads: u64,
    pub starttime_ticks: u64,
    pub vsize_bytes: u64,
    pub rss_pages: u64,
    /// The CPU the task last ran on (field 39; absent on very old kernels).
    pub processor: Option<u32>,
    pub rt_priority: Option<u32>,
    /// Scheduling policy number (0 other, 1 fifo, 2 rr, 3 batch, 5 idle, 6 deadline, 7 ext).
    pub policy: Option<u32>,
    pub delayacct_blkio_ticks: Option<u64>,
}

/// Parse /proc/PID/stat text using this machine's `clk_tck()`.
pub(crate) fn parse_stat(text: &str) -> Result<TaskStat, SysError> {
    parse_stat_with_tck(text, clk_tck())
}

/// Parse /proc/PID/stat text with an explicit tick rate.
pub fn parse_stat_with_tck(text: &str, tck: u64) -> Result<TaskStat, SysError> {
    const FILE: &str = "stat";
    let open = text
        .find('(')
        .ok_or_else(|| SysError::parse(FILE, "comm", "no opening parenthesis"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| SysError::parse(FILE, "comm", "no closing parenthesis"))?;
    if close < open {
        return Err(SysError::parse(FILE, "comm", "parentheses out of order"));
    }
    let pid: i32 = text[..open].trim().parse().map_err(|_| {
        SysError::parse(
            FILE,
            "pid",
            format!("not a number: {:?}", text[..open].trim()),
        )
    })?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // Field n (1-based, as in proc(5)) is rest[n - 3].
    let get = |n: usize, name: &str| -> Result<&str, SysError> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| SysError::parse(FILE, name, format!("missing (field {n})")))
    };
    fn num<T: std::str::FromStr>(s: &str, name: &str) -> Result<T, SysError> {
        s.parse()
            .map_err(|_| SysError::parse("stat", name, format!("not a number: {s:?}")))
    }
    let opt = |n: usize, name: &str| -> Result<Option<u64>, SysError> {
        match rest.get(n - 3) {
            None => Ok(None),
            Some(s) => num::<u64>(s, name).map(Some),
        }
    };
    let state = get(3, "state")?.chars().next().unwrap_or('?');
    let utime_ticks: u64 = num(get(14, "utime")?, "utime")?;
    let stime_ticks: u64 = num(get(15, "stime")?, "stime")?;
    Ok(TaskStat {
        pid,
        comm,
        state,
        ppid: num(get(4, "ppid")?, "ppid")?,
        minflt: num(get(10, "minflt")?, "minflt")?,
        majflt: num(get(12, "majflt")?, "majflt")?,
        utime_ticks,
        stime_ticks,
        utime_ns: ticks_to_ns(utime_ticks, tck),
        stime_ns: ticks_to_ns(stime_ticks, tck),
        priority: num(get(18, "priority")?, "priority")?,
        nice: num(get(19, "nice")?, "nice")?,
        num_threads: num(get(20, "num_threads")?, "num_threads")?,
        starttime_ticks: num(get(22, "starttime")?, "starttime")?,
        vsize_bytes: num(get(23, "vsize")?, "vsize")?,
        rss_pages: num(get(24, "rss")?, "rss")?,
        processor: opt(39, "processor")?.map(|v| v as u32),
        rt_priority: opt(40, "rt_priority")?.map(|v| v as u32),
        policy: opt(41, "policy")?.map(|v| v as u32),
        delayacct_blkio_ticks: opt(42, "delayacct_blkio_ticks")?,
    })
}

/// The parts of /proc/PID/status that matter for scheduling.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub name: String,
    pub state: Option<String>,
    pub tgid: Option<i32>,
    pub pid: Option<i32>,
    pub ppid: Option<i32>,
    pub threads: Option<u64>,
    pub vm_rss_kb: Option<u64>,
    pub vm_hwm_kb: Option<u64>,
    pub voluntary_ctxt_switches: Option<u64>,
    pub nonvoluntary_ctxt_switches: Option<u64>,
    /// As the kernel prints it, e.g. "0-3,6".
    pub cpus_allowed_list: Option<String>,
    /// `cpus_allowed_list` expanded.
    pub cpus_allowed: Option<Vec<usize>>,
}

/// Parse /proc/PID/status text. Only `Name` is required; every other field may be absent.
pub(crate) fn parse_status(text: &str) -> Result<TaskStatus, SysError> {
    const FILE: &str = "status";
    let mut st = TaskStatus::default();
    let mut have_name = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let num = |field: &str| -> Result<u64, SysError> {
            value
                .parse()
                .map_err(|_| SysError::parse(FILE, field, format!("not a number: {value:?}")))
        };
        let kb = |field: &str| -> Result<u64, SysError> {
            let n = value.trim_end_matches("kB").trim();
            n.parse()
                .map_err(|_| SysError::parse(FILE, field, format!("not a size in kB: {value:?}")))
        };
        match key {
            "Name" => {
                st.name = value.to_string();
                have_name = true;
            }
            "State" => st.state = Some(value.to_string()),
            "Tgid" => st.tgid = Some(num(key)? as i32),
            "Pid" => st.pid = Some(num(key)? as i32),
            "PPid" => st.ppid = Some(num(key)? as i32),
            "Threads" => st.threads = Some(num(key)?),
            "VmRSS" => st.vm_rss_kb = Some(kb(key)?),
            "VmHWM" => st.vm_hwm_kb = Some(kb(key)?),
            "voluntary_ctxt_switches" => st.voluntary_ctxt_switches = Some(num(key)?),
            "nonvoluntary_ctxt_switches" => st.nonvoluntary_ctxt_switches = Some(num(key)?),
            "Cpus_allowed_list" => {
                st.cpus_allowed = Some(
                    crate::cpus::parse_list(value).map_err(|m| SysError::parse(FILE, key, m))?,
                );
                st.cpus_allowed_list = Some(value.to_string());
            }
            _ => {}
        }
    }
    if !have_name {
        return Err(SysError::parse(FILE, "Name", "missing"));
    }
    Ok(st)
}

/// /proc/PID/schedstat: time on the CPU, time waiting on a run queue, and the number of timeslices run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedStat {
    /// Time spent running on a CPU, ns.
    pub cpu_ns: u64,
    /// Time spent runnable but waiting for a CPU (run-queue wait), ns.
    pub run_delay_ns: u64,
    /// Number of times the task was scheduled in.
    pub timeslices: u64,
}

/// Parse /proc/PID/schedstat text ("cpu_ns run_delay_ns timeslices").
pub(crate) fn parse_schedstat(text: &str) -> Result<SchedStat, SysError> {
    let mut it = text.split_whitespace();
    let mut next = |field: &str| -> Result<u64, SysError> {
        let s = it
            .next()
            .ok_or_else(|| SysError::parse("schedstat", field, "missing"))?;
        s.parse()
            .map_err(|_| SysError::parse("schedstat", field, format!("not a number: {s:?}")))
    };
    Ok(SchedStat {
        cpu_ns: next("cpu_ns")?,
        run_delay_ns: next("run_delay_ns")?,
        timeslices: next("timeslices")?,
    })
}

/// /proc/PID/sched (CONFIG_SCHED_DEBUG): `key : value` pairs, with typed access to the common ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedDebug {
    /// From the header line "name (pid, #threads: n)".
    pub name: Option<String>,
    pub pid: Option<i32>,
    pub threads: Option<u64>,
    /// Every numeric `key : value` line, as printed (times are in ms with a fraction).
    pub values: BTreeMap<String, f64>,
}

impl SchedDebug {
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.get(key).copied()
    }
    fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).filter(|v| *v >= 0.0).map(|v| v as u64)
    }
    /// Migrations between CPUs (`se.nr_migrations`).
    pub fn nr_migrations(&self) -> Option<u64> {
        self.get_u64("se.nr_migrations")
    }
    pub fn nr_switches(&self) -> Option<u64> {
        self.get_u64("nr_switches")
    }
    pub fn nr_voluntary_switches(&self) -> Option<u64> {
        self.get_u64("nr_voluntary_switches")
    }
    pub fn nr_involuntary_switches(&self) -> Option<u64> {
        self.get_u64("nr_involuntary_switches")
    }
    /// `se.sum_exec_runtime` (printed in ms) in ns.
    pub fn sum_exec_runtime_ns(&self) -> Option<u64> {
        self.get("se.sum_exec_runtime").map(|ms| (ms * 1e6) as u64)
    }
    /// The task's EEVDF slice (`se.slice`, ns; kernels ≥ 6.6).
    pub fn slice_ns(&self) -> Option<u64> {
        self.get_u64("se.slice")
    }
    pub fn policy(&self) -> Option<u32> {
        self.get_u64("policy").map(|v| v as u32)
    }
    pub fn prio(&self) -> Option<i64> {
        self.get("prio").map(|v| v as i64)
    }
}

/// Parse /proc/PID/sched text. Lines that are not `key : number` are skipped (their layout changes between
/// kernels); an empty file is an error.
pub(crate) fn parse_sched(text: &str) -> Result<SchedDebug, SysError> {
    let mut out = SchedDebug::default();
    let mut lines = text.lines();
    let first = lines
        .next()
        .ok_or_else(|| SysError::parse("sched", "header", "empty file"))?;
    if let (Some(open), Some(close)) = (first.rfind(" ("), first.rfind(')')) {
        if open < close {
            out.name = Some(first[..open].to_string());
            let inner = &first[open + 2..close];
            let mut parts = inner.split(',');
            out.pid = parts.next().and_then(|p| p.trim().parse().ok());
            out.threads = parts
                .next()
                .and_then(|p| p.trim().strip_prefix("#threads:"))
                .and_then(|p| p.trim().parse().ok());
        }
    }
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let k = k.trim();
        if k.is_empty() || k.contains(' ') {
            continue;
        }
        if let Ok(v) = v.trim().parse::<f64>() {
            out.values.insert(k.to_string(), v);
        }
    }
    Ok(out)
}

/// One line of a PSI file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiLine {
    /// Percent of wall time some (or all) tasks were stalled, averaged over 10 s, 60 s and 300 s.
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Total stall time, µs since boot.
    pub total_us: u64,
}

/// /proc/pressure/cpu (or memory, io).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    pub some: PsiLine,
    /// The `full` line (CPU pressure has it since 5.13; older kernels print only `some`).
    pub full: Option<PsiLine>,
}

/// Parse a PSI file (`some avg10=... avg60=... avg300=... total=...` and optionally `full ...`).
pub(crate) fn parse_psi(text: &str) -> Result<Psi, SysError> {
    const FILE: &str = "pressure";
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(kind) = words.next() else { continue };
        let mut pl = PsiLine::default();
        let mut seen = 0;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                continue;
            };
            let bad =
                || SysError::parse(FILE, format!("{kind}.{k}"), format!("not a number: {v:?}"));
            match k {
                "avg10" => pl.avg10 = v.parse().map_err(|_| bad())?,
                "avg60" => pl.avg60 = v.parse().map_err(|_| bad())?,
                "avg300" => pl.avg300 = v.parse().map_err(|_| bad())?,
                "total" => pl.total_us = v.parse().map_err(|_| bad())?,
                _ => continue,
            }
            seen += 1;
        }
        if seen < 4 {
            return Err(SysError::parse(
                FILE,
                kind,
                "expected avg10, avg60, avg300 and total",
            ));
        }
        match kind {
            "some" => some = Some(pl),
            "full" => full = Some(pl),
            _ => {}
        }
    }
    Ok(Psi {
        some: some.ok_or_else(|| SysError::parse(FILE, "some", "missing"))?,
        full,
    })
}

/// Where /proc is: "/proc" on the machine, a fixture directory in tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcRoot(pub PathBuf);

impl Default for ProcRoot {
    fn default() -> Self {
        ProcRoot(PathBuf::from("/proc"))
    }
}

impl ProcRoot {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ProcRoot(path.into())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Read a file under the root (`rel` like "pressure/cpu" or "123/task/124/stat").
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<String, SysError> {
        let path = self.0.join(rel);
        std::fs::read_to_string(&path).map_err(|e| SysError::from_io(&path, e))
    }

    fn pid_rel(pid: i32, tid: Option<i32>, file: &str) -> PathBuf {
        match tid {
            Some(t) => PathBuf::from(format!("{pid}/task/{t}/{file}")),
            None => PathBuf::from(format!("{pid}/{file}")),
        }
    }

    /// Read and parse, naming the path in parse errors.
    fn read_parsed<T>(
        &self,
        rel: PathBuf,
        parse: impl FnOnce(&str) -> Result<T, SysError>,
    ) -> Result<T, SysError> {
        let text = self.read(&rel)?;
        parse(&text).map_err(|e| match e {
            SysError::Parse { field, msg, .. } => SysError::Parse {
                file: self.0.join(&rel).display().to_string(),
                field,
                msg,
            },
            other => other,
        })
    }

    /// Does /proc/PID exist?
    pub fn pid_exists(&self, pid: i32) -> bool {
        self.0.join(pid.to_string()).is_dir()
    }

    /// /proc/PID/stat (whole process: CPU times include exited threads).
    pub fn stat(&self, pid: i32) -> Result<TaskStat, SysError> {
        self.read_parsed(Self::pid_rel(pid, None, "stat"), parse_stat)
    }
    /// /proc/PID/task/TID/stat.
    pub fn task_stat(&self, pid: i32, tid: i32) -> Result<TaskStat, SysError> {
        self.read_parsed(Self::pid_rel(pid, Some(tid), "stat"), parse_stat)
    }
    /// /proc/PID/status.
    pub fn status(&self, pid: i32) -> Result<TaskStatus, SysError> {
        self.read_parsed(Self::pid_rel(pid, None, "status"), parse_status)
    }
    /// /proc/PID/task/TID/status.
    pub fn task_status(&self, pid: i32, tid: i32) -> Result<TaskStatus, SysError> {
        self.read_parsed(Self::pid_rel(pid, Some(tid), "status"), parse_status)
    }
    /// /proc/PID/schedstat (`Missing` on kernels without CONFIG_SCHEDSTATS/SCHED_INFO).
    pub fn schedstat(&self, pid: i32) -> Result<SchedStat, SysError> {
        self.read_parsed(Self::pid_rel(pid, None, "schedstat"), parse_schedstat)
    }
    /// /proc/PID/task/TID/schedstat.
    pub fn task_schedstat(&self, pid: i32, tid: i32) -> Result<SchedStat, SysError> {
        self.read_parsed(Self::pid_rel(pid, Some(tid), "schedstat"), parse_schedstat)
    }
    /// /proc/PID/sched (`Missing` without CONFIG_SCHED_DEBUG).
    pub fn sched(&self, pid: i32) -> Result<SchedDebug, SysError> {
        self.read_parsed(Self::pid_rel(pid, None, "sched"), parse_sched)
    }
    /// /proc/PID/task/TID/sched.
    pub fn task_sched(&self, pid: i32, tid: i32) -> Result<SchedDebug, SysError> {
        self.read_parsed(Self::pid_rel(pid, Some(tid), "sched"), parse_sched)
    }
    /// /proc/pressure/cpu (`Missing` without CONFIG_PSI or with psi=0).
    pub fn psi_cpu(&self) -> Result<Psi, SysError> {
        self.read_parsed(PathBuf::from("pressure/cpu"), parse_psi)
    }
    /// The thread ids of a process (/proc/PID/task/*), sorted. `ProcessGone` when the process is not there.
    pub fn tasks(&self, pid: i32) -> Result<Vec<i32>, SysError> {
        let dir = self.0.join(format!("{pid}/task"));
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SysError::ProcessGone(pid));
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                return Err(SysError::ProcessGone(pid));
            }
            Err(e) => return Err(SysError::from_io(&dir, e)),
        };
        let mut out: Vec<i32> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        out.sort_unstable();
        Ok(out)
    }
}

/// The calling thread's schedstat, kept open and re-read with pread: the cheap per-sample read the loop
/// probe does around every timed sample. Must be used on the thread that opened it.
#[derive(Debug)]
pub struct ThreadSchedstat {
    file: std::fs::File,
    path: PathBuf,
}

impl ThreadSchedstat {
    /// Open /proc/thread-self/schedstat (under `root`) for the calling thread.
    pub fn open_current(root: &ProcRoot) -> Result<Self, SysError> {
        let path = root.0.join("thread-self/schedstat");
        let file = std::fs::File::open(&path).map_err(|e| SysError::from_io(&path, e))?;
        Ok(ThreadSchedstat { file, path })
    }

    /// Read it now.
    pub fn read(&mut self) -> Result<SchedStat, SysError> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self
            .file
            .read_at(&mut buf, 0)
            .map_err(|e| SysError::from_io(&self.path, e))?;
        let text = std::str::from_utf8(&buf[..n])
            .map_err(|_| SysError::parse(self.path.display().to_string(), "text", "not UTF-8"))?;
        parse_schedstat(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let s = "42 (a b) c)) S 1 42 42 0 -1 4194560 10 0 2 0 150 25 0 0 20 0 3 0 100 1000 50 \
                 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let st = parse_stat_with_tck(s, 100).unwrap();
        assert_eq!(st.comm, "a b) c)");
        assert_eq!(st.state, 'S');
        assert_eq!(st.utime_ticks, 150);
        assert_eq!(st.utime_ns, 1_500_000_000);
        assert_eq!(st.stime_ns, 250_000_000);
        assert_eq!(st.num_threads, 3);
        assert_eq!(st.processor, Some(1));
        assert_eq!(st.policy, Some(0));
    }

    #[test]
    fn stat_truncated_names_field() {
        let err = parse_stat("1 (x) S 0 1 1").unwrap_err().to_string();
        assert!(err.contains("missing (field"), "{err}");
    }

    #[test]
    fn schedstat_bad() {
        assert!(parse_schedstat("1 2").is_err());
        assert!(
            parse_schedstat("1 x 3")
                .unwrap_err()
                .to_string()
                .contains("run_delay_ns")
        );
        assert_eq!(
            parse_schedstat("5 6 7\n").unwrap(),
            SchedStat {
                cpu_ns: 5,
                run_delay_ns: 6,
                timeslices: 7
            }
        );
    }

    #[test]
    fn thread_schedstat_rereads() {
        let mut r = ThreadSchedstat::open_current(&ProcRoot::default()).unwrap();
        let a = r.read().unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x ^ i);
        }
        let b = r.read().unwrap();
        assert!(b.cpu_ns > a.cpu_ns, "{a:?} {b:?}");
    }

    #[test]
    fn psi_some_only() {
        let p = parse_psi("some avg10=1.50 avg60=0.00 avg300=0.00 total=123\n").unwrap();
        assert_eq!(p.some.avg10, 1.5);
        assert_eq!(p.some.total_us, 123);
        assert!(p.full.is_none());
        assert!(parse_psi("").is_err());
        assert!(parse_psi("some avg10=x avg60=0 avg300=0 total=1").is_err());
    }
}
