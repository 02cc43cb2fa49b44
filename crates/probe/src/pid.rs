//! `ordo probe pid PID`: a live view of a running process and its threads, like top for scheduling — CPU%,
//! voluntary and involuntary switches per second, run-queue wait per second and per switch, migrations and
//! the system's CPU pressure, one report per interval. What the kernel cannot give (no schedstat, no
//! sched_debug, no PSI) is named in `unavailable` and the rest is still reported.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ordo_sys::procfs::{ProcRoot, Psi};
use ordo_sys::{ProcessSampler, SysError, ThreadSnapshot};

use crate::error::ProbeError;
use ordo_results::probe::{PidReport, PsiRates, Rates, ThreadRates};
use ordo_sys::CancelToken;

/// What to watch and for how long.
#[derive(Clone, Debug)]
pub struct PidConfig {
    pub pid: i32,
    pub interval: Duration,
    /// Stop after this long (None = until the process exits or the caller stops).
    pub duration: Option<Duration>,
    pub root: ProcRoot,
}

impl PidConfig {
    pub fn new(pid: i32) -> Self {
        PidConfig {
            pid,
            interval: Duration::from_secs(1),
            duration: None,
            root: ProcRoot::default(),
        }
    }
}

#[allow(clippy::too_many_arguments)] // one call per figure set; a struct would only rename them
fn rates(
    interval_s: f64,
    cpu_ns: u64,
    user_ns: u64,
    sys_ns: u64,
    vol: u64,
    invol: u64,
    run_delay_ns: Option<u64>,
    migrations: Option<u64>,
) -> Rates {
    let per_s = |x: f64| {
        if interval_s > 0.0 {
            x / interval_s
        } else {
            0.0
        }
    };
    let switches = vol + invol;
    Rates {
        cpu_pct: per_s(cpu_ns as f64 / 1e9) * 100.0,
        user_pct: per_s(user_ns as f64 / 1e9) * 100.0,
        sys_pct: per_s(sys_ns as f64 / 1e9) * 100.0,
        voluntary_per_s: per_s(vol as f64),
        involuntary_per_s: per_s(invol as f64),
        run_delay_ms_per_s: run_delay_ns.map(|r| per_s(r as f64 / 1e6)),
        run_delay_us_per_switch: run_delay_ns
            .filter(|_| switches > 0)
            .map(|r| r as f64 / 1e3 / switches as f64),
        migrations_per_s: migrations.map(|m| per_s(m as f64)),
    }
}

/// Why watching ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PidEnd {
    /// `duration` passed.
    Duration,
    /// The process exited; `after_s` seconds after the first sample.
    Exited { after_s: f64 },
    /// The callback asked to stop.
    Stopped,
    /// The cancel token was set (Ctrl-C); `after_s` seconds after the first sample.
    Interrupted { after_s: f64 },
}

fn psi_rates(now: &Psi, before: &Psi, interval_s: f64) -> PsiRates {
    let pct = |a: u64, b: u64| {
        if interval_s > 0.0 {
            (a.saturating_sub(b) as f64 / 1e6 / interval_s * 100.0).min(100.0)
        } else {
            0.0
        }
    };
    PsiRates {
        some_avg10: now.some.avg10,
        some_pct: pct(now.some.total_us, before.some.total_us),
        full_avg10: now.full.map(|f| f.avg10),
        full_pct: match (now.full, before.full) {
            (Some(a), Some(b)) => Some(pct(a.total_us, b.total_us)),
            _ => None,
        },
    }
}

fn thread_rates(
    now: &ThreadSnapshot,
    before: Option<&ThreadSnapshot>,
    interval_s: f64,
) -> ThreadRates {
    let d = match before {
        Some(b) => now.delta(b),
        // Born during the interval: everything it did happened in it.
        None => now.clone(),
    };
    let cpu = d.cpu_ns.unwrap_or(d.utime_ns + d.stime_ns);
    ThreadRates {
        tid: now.tid,
        name: now.name.clone(),
        state: now.state,
        processor: now.processor,
        policy: now.policy.map(|p| p.to_string()),
        nice: now.nice,
        rates: rates(
            interval_s,
            cpu,
            d.utime_ns,
            d.stime_ns,
            d.voluntary_switches,
            d.involuntary_switches,
            d.run_delay_ns,
            d.migrations,
        ),
    }
}

/// Watch `cfg.pid`, calling `on` with each interval's report; `on` returns false to stop.
/// `ProcessGone` at the start means there is no such process; an exit later ends with `PidEnd::Exited`.
pub fn watch(cfg: &PidConfig, on: impl FnMut(&PidReport) -> bool) -> Result<PidEnd, ProbeError> {
    watch_until(cfg, &CancelToken::new(), on)
}

/// A final interval shorter than this is not reported when interrupted (too short for a rate).
const MIN_FINAL_INTERVAL: Duration = Duration::from_millis(10);

/// `watch` that also ends when `cancel` is set: the sleep between samples ends at once, the interval
/// so far is reported (marked `interrupted`, unless it is under 10 ms old) and the watch ends with
/// `PidEnd::Interrupted`.
pub fn watch_until(
    cfg: &PidConfig,
    cancel: &CancelToken,
    mut on: impl FnMut(&PidReport) -> bool,
) -> Result<PidEnd, ProbeError> {
    if cfg.interval < Duration::from_millis(10) {
        return Err(ProbeError::Config(
            "--interval must be at least 10ms".into(),
        ));
    }
    let mut sampler = ProcessSampler::with_root(cfg.root.clone(), cfg.pid)?;
    let start = Instant::now();
    let mut prev = sampler.sample_detailed()?;
    let mut prev_at = Instant::now();
    let mut prev_psi = cfg.root.psi_cpu();
    let mut seq = 0;
    loop {
        let elapsed = start.elapsed();
        let mut wait = cfg.interval;
        if let Some(d) = cfg.duration {
            if elapsed >= d {
                return Ok(PidEnd::Duration);
            }
            wait = wait.min(d - elapsed);
        }
        let interrupted = cancel.wait_timeout(wait);
        if interrupted && prev_at.elapsed() < MIN_FINAL_INTERVAL {
            return Ok(PidEnd::Interrupted {
                after_s: start.elapsed().as_secs_f64(),
            });
        }
        let now = match sampler.sample_detailed() {
            Ok(n) => n,
            Err(SysError::ProcessGone(_)) => {
                return Ok(PidEnd::Exited {
                    after_s: start.elapsed().as_secs_f64(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let psi = cfg.root.psi_cpu();
        seq += 1;
        let d = now.process.delta(&prev.process);
        let interval_s = d.at_ns as f64 / 1e9;
        let mut unavailable = Vec::new();
        if !sampler.schedstat_available() {
            unavailable.push(format!(
                "run-queue wait: /proc/{}/task/*/schedstat is not available (kernel without CONFIG_SCHED_INFO)",
                cfg.pid
            ));
        }
        if !sampler.migrations_available() {
            unavailable.push(format!(
                "migrations: /proc/{}/task/*/sched is not available (kernel without CONFIG_SCHED_DEBUG)",
                cfg.pid
            ));
        }
        let psi_r = match (&psi, &prev_psi) {
            (Ok(a), Ok(b)) => Some(psi_rates(a, b, interval_s)),
            (Err(e), _) | (_, Err(e)) => {
                unavailable.push(format!("CPU pressure: {e}"));
                None
            }
        };
        let before: HashMap<i32, &ThreadSnapshot> =
            prev.threads.iter().map(|t| (t.tid, t)).collect();
        let mut per_thread: Vec<ThreadRates> = now
            .threads
            .iter()
            .map(|t| thread_rates(t, before.get(&t.tid).copied(), interval_s))
            .collect();
        per_thread.sort_by(|a, b| {
            b.rates
                .cpu_pct
                .total_cmp(&a.rates.cpu_pct)
                .then(a.tid.cmp(&b.tid))
        });
        let report = PidReport {
            kind: "probe-pid".into(),
            version: 1,
            pid: cfg.pid,
            name: now.name.clone(),
            seq,
            t_s: start.elapsed().as_secs_f64(),
            interval_s,
            threads: now.process.threads,
            process: rates(
                interval_s,
                d.best_cpu_ns(),
                d.utime_ns,
                d.stime_ns,
                d.voluntary_switches,
                d.involuntary_switches,
                d.schedstat.then_some(d.run_delay_ns),
                d.migrations,
            ),
            delta: d,
            per_thread,
            psi: psi_r,
            unavailable,
            interrupted,
        };
        if !on(&report) {
            return Ok(PidEnd::Stopped);
        }
        if interrupted {
            return Ok(PidEnd::Interrupted {
                after_s: start.elapsed().as_secs_f64(),
            });
        }
        prev = now;
        prev_at = Instant::now();
        prev_psi = psi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_per_second() {
        let r = rates(
            2.0,
            1_000_000_000,
            600_000_000,
            400_000_000,
            10,
            4,
            Some(7_000_000),
            Some(2),
        );
        assert_eq!(r.cpu_pct, 50.0);
        assert_eq!(r.user_pct, 30.0);
        assert_eq!(r.voluntary_per_s, 5.0);
        assert_eq!(r.involuntary_per_s, 2.0);
        assert_eq!(r.run_delay_ms_per_s, Some(3.5));
        assert_eq!(r.run_delay_us_per_switch, Some(500.0));
        assert_eq!(r.migrations_per_s, Some(1.0));
        let r = rates(1.0, 0, 0, 0, 0, 0, Some(5), None);
        assert_eq!(r.run_delay_us_per_switch, None);
    }

    #[test]
    fn unknown_pid() {
        let cfg = PidConfig::new(99_999_999);
        assert!(matches!(
            watch(&cfg, |_| true),
            Err(ProbeError::Sys(SysError::ProcessGone(99_999_999)))
        ));
    }

    #[test]
    fn watches_self_for_two_intervals() {
        let mut cfg = PidConfig::new(std::process::id() as i32);
        cfg.interval = Duration::from_millis(50);
        let mut seen = Vec::new();
        let end = watch(&cfg, |r| {
            seen.push(r.clone());
            seen.len() < 2
        })
        .unwrap();
        assert_eq!(end, PidEnd::Stopped);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].seq, 2);
        assert!(seen[0].interval_s > 0.03);
        assert!(!seen[0].per_thread.is_empty());
        assert_eq!(seen[0].kind, "probe-pid");
        assert!(!seen[1].interrupted);
    }

    #[test]
    fn a_cancel_ends_the_wait_with_a_last_partial_interval() {
        let mut cfg = PidConfig::new(std::process::id() as i32);
        cfg.interval = Duration::from_secs(30);
        let cancel = CancelToken::new();
        let c = cancel.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            c.cancel();
        });
        let t = Instant::now();
        let mut seen = Vec::new();
        let end = watch_until(&cfg, &cancel, |r| {
            seen.push(r.clone());
            true
        })
        .unwrap();
        h.join().unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(matches!(end, PidEnd::Interrupted { .. }), "{end:?}");
        assert_eq!(seen.len(), 1);
        assert!(seen[0].interrupted);
        assert!(seen[0].interval_s > 0.1 && seen[0].interval_s < 10.0);
        // Cancelled before the first sleep: it ends at once, with no report (or, when this thread was
        // preempted for over 10 ms after the first sample, one interrupted report).
        let mut late = Vec::new();
        let t = Instant::now();
        let end = watch_until(&cfg, &cancel, |r| {
            late.push(r.interrupted);
            true
        })
        .unwrap();
        assert!(matches!(end, PidEnd::Interrupted { .. }));
        assert!(t.elapsed() < Duration::from_secs(10));
        assert!(late.len() <= 1 && late.iter().all(|&i| i), "{late:?}");
    }
}
