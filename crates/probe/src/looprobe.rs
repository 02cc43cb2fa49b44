//! `ordo probe loop`: seed 004's experiment. A fixed piece of CPU work is timed many times on one thread;
//! around every sample the thread reads getrusage(RUSAGE_THREAD) and its own schedstat, so each sample
//! says how long it took, how much of that was CPU, how much was spent waiting on a run queue, and how many
//! times the thread was switched out. The report adds a histogram relative to the nominal time (and on
//! custom ms edges), percentiles, the split of elapsed time into CPU and waiting, and the cost of
//! involuntary switches.

use std::sync::mpsc;

use ordo_sys::procfs::{ProcRoot, ThreadSchedstat};
use ordo_sys::{SysError, clock, rusage, thread};

use crate::error::ProbeError;
use crate::load::BackgroundLoad;
use crate::stats::{Distribution, Histogram, RELATIVE_EDGES, check_edges};
use crate::work::{Calibration, Footprint, spin_cancellable};
use ordo_results::probe::{
    Applied, LoadSpec, LoopConfig, LoopReport, LoopSample, LoopSummary, Split, SwitchCost,
    SwitchGroup, Work,
};
use ordo_sys::CancelToken;

/// The most samples one run takes (they are all kept in the report).
pub(crate) const MAX_SAMPLES: usize = 100_000;

/// Check every setting of a loop run before any work starts.
pub(crate) fn validate(cfg: &LoopConfig) -> Result<(), ProbeError> {
    let bad = |m: String| Err(ProbeError::Config(m));
    if cfg.samples == 0 || cfg.samples > MAX_SAMPLES {
        return bad(format!(
            "--samples {}: must be 1..={MAX_SAMPLES}",
            cfg.samples
        ));
    }
    match cfg.work {
        Work::Nominal(ns) if !(10_000..=10_000_000_000).contains(&ns) => {
            return bad(format!(
                "--work {:.3} ms: must be between 0.01 ms and 10 s",
                ns as f64 / 1e6
            ));
        }
        Work::Iterations(0) => return bad("--iterations must be at least 1".into()),
        _ => {}
    }
    if let Some(cpu) = cfg.cpu {
        let allowed = thread::get_affinity(0)?;
        if !allowed.contains(&cpu) {
            return bad(format!(
                "--cpu {cpu}: this process may only run on CPUs {allowed:?}"
            ));
        }
    }
    if let Some(n) = cfg.nice {
        if !(-20..=19).contains(&n) {
            return bad(format!("--nice {n}: must be in -20..=19"));
        }
    }
    if cfg.slice_ns.is_some() {
        if let Some(p) = cfg.policy {
            if !p.is_fair() {
                return bad(format!(
                    "--slice applies to the other and batch policies, not {p}"
                ));
            }
        }
        if !thread::per_task_slice_supported() {
            return bad(
                "--slice needs Linux 6.12 or later (per-task slice via sched_setattr)".into(),
            );
        }
    }
    if let LoadSpec::Threads(n) = cfg.load {
        if n > 256 {
            return bad(format!("--load {n}: at most 256 threads"));
        }
    }
    if let Some(b) = &cfg.buckets_ms {
        check_edges(b).map_err(|m| ProbeError::Config(format!("--buckets: {m}")))?;
    }
    if cfg.footprint_mb > 1 << 20 {
        return bad(format!("--footprint {} MB is too large", cfg.footprint_mb));
    }
    check_footprint(
        cfg.footprint_mb,
        mem_available_mb(&ProcRoot::default()),
        own_cgroup_memory(&ordo_sys::knobs::SysRoot::real()),
    )
    .map_err(ProbeError::Config)?;
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, MB.
fn mem_available_mb(proc: &ProcRoot) -> Option<u64> {
    let text = std::fs::read_to_string(proc.path().join("meminfo")).ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb / 1024)
}

/// The memory limit of this process's cgroup (or an ancestor's), read under `root`.
fn own_cgroup_memory(root: &ordo_sys::knobs::SysRoot) -> Option<ordo_sys::knobs::CgroupMemory> {
    root.cgroup_memory(std::process::id() as i32)
}

/// A footprint the machine cannot hold without paging was accepted, and the probe then measured swap and
/// reclaim instead of scheduling (issue 13): at most 90% of the memory available now (`MemAvailable`).
/// The machine may have it while the probe's cgroup may not (a container, a systemd unit with MemoryMax):
/// then the kernel reclaims inside the cgroup or OOM-kills the probe (exit 137), so at most 90% of the
/// cgroup's headroom too (issue 24).
fn check_footprint(
    mb: usize,
    available_mb: Option<u64>,
    cgroup: Option<ordo_sys::knobs::CgroupMemory>,
) -> Result<(), String> {
    if let Some(avail) = available_mb
        && mb as u64 > avail / 10 * 9
    {
        return Err(format!(
            "--footprint {mb} MB is more than 90% of the memory available now ({avail} MB MemAvailable): touching it would page, and the samples would time swapping and reclaim, not scheduling"
        ));
    }
    if let Some(c) = cgroup {
        let room = c.headroom() >> 20;
        if mb as u64 > room / 10 * 9 {
            return Err(format!(
                "--footprint {mb} MB is more than 90% of what this process's cgroup may still use ({room} MB: limit {} MB in {}, {} MB in use besides page cache): touching it would make the kernel reclaim inside the cgroup or kill the probe (OOM, exit 137)",
                c.limit >> 20,
                c.file.display(),
                c.used >> 20
            ));
        }
    }
    Ok(())
}

struct Raw {
    samples: Vec<LoopSample>,
    iterations: u64,
    ns_per_iteration: f64,
    applied: Applied,
    schedstat: bool,
    warnings: Vec<String>,
    interrupted: bool,
}

fn apply_settings(cfg: &LoopConfig) -> Result<Applied, ProbeError> {
    if let Some(cpu) = cfg.cpu {
        thread::pin_current_thread(cpu)?;
    }
    if let Some(p) = cfg.policy {
        thread::set_policy(0, p).map_err(|e| match e {
            SysError::Permission { .. } => ProbeError::Config(format!(
                "--policy {p}: permission denied (real-time policies need root or CAP_SYS_NICE)"
            )),
            e => e.into(),
        })?;
    }
    if let Some(n) = cfg.nice {
        thread::set_nice(0, n).map_err(|e| match e {
            SysError::Permission { .. } => ProbeError::Config(format!(
                "--nice {n}: permission denied (lowering nice needs root or CAP_SYS_NICE)"
            )),
            e => e.into(),
        })?;
    }
    if let Some(s) = cfg.slice_ns {
        thread::set_slice(0, s)?;
    }
    let now = thread::get_sched(0)?;
    Ok(Applied {
        policy: now.policy.to_string(),
        nice: now.nice,
        slice_ns: now.slice_ns,
        cpus: thread::get_affinity(0)?,
    })
}

/// Messages from the probe thread to the thread that runs `run_loop`.
enum FromProbe {
    /// Settings applied and calibrated: start the load now.
    Ready,
    Done(Result<Raw, ProbeError>),
}

/// Runs on the probe thread. The load is started by the controlling thread between `Ready` and `go`, so
/// load threads and commands never inherit the probe thread's policy, nice value, slice or pinning.
/// `go` = false (the load failed to start, or the run was cancelled first) ends it with no samples.
/// `cancel` is looked at before every sample and every `SPIN_CHECK_EVERY` iterations of the work; a sample
/// cut short is dropped.
fn measure(
    cfg: &LoopConfig,
    ready: &mpsc::Sender<FromProbe>,
    go: &mpsc::Receiver<bool>,
    cancel: &CancelToken,
) -> Result<Raw, ProbeError> {
    let applied = apply_settings(cfg)?;
    let mut warnings = Vec::new();
    let mut footprint = Footprint::new(cfg.footprint_mb);
    let (iterations, ns_per_iteration) = match (cfg.work, cfg.ns_per_iteration) {
        (Work::Iterations(n), Some(c)) => (n, c),
        (Work::Nominal(ns), Some(c)) => (
            Calibration {
                ns_per_iteration: c,
            }
            .iterations_for(ns),
            c,
        ),
        (work, None) => {
            let c = Calibration::measure();
            let n = match work {
                Work::Iterations(n) => n,
                Work::Nominal(ns) => c.iterations_for(ns),
            };
            (n, c.ns_per_iteration)
        }
    };
    let mut schedstat = match ThreadSchedstat::open_current(&ProcRoot::default()) {
        Ok(s) => Some(s),
        Err(e) => {
            warnings.push(format!("run-queue wait unavailable: {e}"));
            None
        }
    };
    let started = ready.send(FromProbe::Ready).is_ok() && go.recv().unwrap_or(false);
    let mut interrupted = !started;
    let mut samples = Vec::with_capacity(if started { cfg.samples } else { 0 });
    for i in 0..cfg.warmup + cfg.samples {
        if interrupted || cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        footprint.touch();
        // The wall clock brackets every read, so the window the schedstat and getrusage deltas cover lies
        // inside the elapsed time (the reads' own cost, a few µs, is inside it too; see docs/probe.md).
        let t0 = clock::monotonic_ns();
        let s0 = match schedstat.as_mut().map(|s| s.read()).transpose() {
            Ok(v) => v,
            Err(e) => {
                warnings.push(format!("run-queue wait unavailable: {e}"));
                schedstat = None;
                None
            }
        };
        let r0 = rusage::thread()?;
        let c0 = clock::thread_cpu_ns();
        let done = std::hint::black_box(spin_cancellable(iterations, cancel.flag()));
        let c1 = clock::thread_cpu_ns();
        let r1 = rusage::thread()?;
        let s1 = schedstat.as_mut().and_then(|s| s.read().ok());
        let t1 = clock::monotonic_ns();
        if done.is_none() {
            interrupted = true;
            break;
        }
        if i < cfg.warmup {
            continue;
        }
        let d = r1.delta(&r0);
        let (run_delay_ns, timeslices) = match (s0, s1) {
            (Some(a), Some(b)) => (
                Some(b.run_delay_ns.saturating_sub(a.run_delay_ns)),
                Some(b.timeslices.saturating_sub(a.timeslices)),
            ),
            _ => (None, None),
        };
        samples.push(LoopSample {
            elapsed_ns: t1.saturating_sub(t0),
            cpu_ns: c1.saturating_sub(c0),
            user_ns: d.utime_ns,
            sys_ns: d.stime_ns,
            voluntary: d.nvcsw,
            involuntary: d.nivcsw,
            run_delay_ns,
            timeslices,
            minflt: d.minflt,
        });
    }
    let schedstat = schedstat.is_some() && samples.iter().all(|s| s.run_delay_ns.is_some());
    Ok(Raw {
        samples,
        iterations,
        ns_per_iteration,
        applied,
        schedstat,
        warnings,
        interrupted,
    })
}

const MS: f64 = 1e6;

/// Analyse samples against a nominal time.
pub fn analyze(samples: &[LoopSample], nominal_ns: u64, buckets_ms: Option<&[f64]>) -> LoopSummary {
    let ms = |f: &dyn Fn(&LoopSample) -> u64| -> Vec<f64> {
        samples.iter().map(|s| f(s) as f64 / MS).collect()
    };
    let elapsed = ms(&|s| s.elapsed_ns);
    let cpu = ms(&|s| s.cpu_ns);
    let have_rd = !samples.is_empty() && samples.iter().all(|s| s.run_delay_ns.is_some());
    let run_delay = have_rd.then(|| ms(&|s| s.run_delay_ns.unwrap_or(0)));
    let nominal_ms = (nominal_ns.max(1)) as f64 / MS;
    let rel: Vec<f64> = elapsed.iter().map(|e| e / nominal_ms).collect();
    let elapsed_s = Distribution::of(&elapsed);

    let total_el: f64 = elapsed.iter().sum();
    let total_cpu: f64 = cpu.iter().sum();
    let total_rd: Option<f64> = run_delay.as_ref().map(|v| v.iter().sum());
    let other = (total_el - total_cpu - total_rd.unwrap_or(0.0)).max(0.0);
    let frac = |x: f64| if total_el > 0.0 { x / total_el } else { 0.0 };
    let split = Split {
        elapsed_ms: total_el,
        cpu_ms: total_cpu,
        run_queue_wait_ms: total_rd,
        other_ms: other,
        cpu_fraction: frac(total_cpu),
        run_queue_wait_fraction: total_rd.map(frac),
        other_fraction: frac(other),
    };

    // Cost of involuntary switches.
    let groups_def: [(&str, u64, Option<u64>); 4] = [
        ("0", 0, Some(0)),
        ("1", 1, Some(1)),
        ("2–4", 2, Some(4)),
        ("≥5", 5, None),
    ];
    let median_all = elapsed_s.p50.max(f64::MIN_POSITIVE);
    let mut groups = Vec::new();
    for (label, lo, hi) in groups_def {
        let idx: Vec<usize> = (0..samples.len())
            .filter(|&i| {
                samples[i].involuntary >= lo && hi.is_none_or(|h| samples[i].involuntary <= h)
            })
            .collect();
        if idx.is_empty() {
            continue;
        }
        let el: Vec<f64> = idx.iter().map(|&i| elapsed[i]).collect();
        let med = Distribution::of(&el).p50;
        groups.push(SwitchGroup {
            label: label.to_string(),
            min_switches: lo,
            max_switches: hi,
            samples: idx.len(),
            median_elapsed_ms: med,
            ratio_to_median: med / median_all,
            mean_run_delay_ms: run_delay
                .as_ref()
                .map(|rd| idx.iter().map(|&i| rd[i]).sum::<f64>() / idx.len() as f64),
        });
    }
    let per_switch: Vec<f64> = samples
        .iter()
        .zip(elapsed.iter().zip(&cpu))
        .filter(|(s, _)| s.involuntary > 0)
        .map(|(s, (e, c))| (e - c).max(0.0) / s.involuntary as f64)
        .collect();
    let mean_per_switch =
        (!per_switch.is_empty()).then(|| per_switch.iter().sum::<f64>() / per_switch.len() as f64);
    let headline = match groups.iter().rev().find(|g| g.min_switches > 0) {
        Some(g) => {
            let what = match g.max_switches {
                None => format!("≥{}", g.min_switches),
                Some(h) if h == g.min_switches => format!("{h}"),
                Some(h) => format!("{}–{h}", g.min_switches),
            };
            let mut h = format!(
                "samples with {what} involuntary switch{} ({} of {}) took {:.1}× the median",
                if g.max_switches == Some(1) { "" } else { "es" },
                g.samples,
                samples.len(),
                g.ratio_to_median
            );
            if let Some(none) = groups.first().filter(|z| z.min_switches == 0) {
                h.push_str(&format!(
                    " and {:.1}× the samples with none",
                    g.median_elapsed_ms / none.median_elapsed_ms.max(f64::MIN_POSITIVE)
                ));
            }
            h
        }
        None if samples.is_empty() => "no samples".to_string(),
        None => format!(
            "no sample was switched out involuntarily ({} samples)",
            samples.len()
        ),
    };
    let slowest = samples
        .iter()
        .copied()
        .max_by_key(|s| s.elapsed_ns)
        .unwrap_or_default();
    LoopSummary {
        samples: samples.len(),
        elapsed_ms: elapsed_s,
        cpu_ms: Distribution::of(&cpu),
        run_delay_ms: run_delay.as_ref().map(|v| Distribution::of(v)),
        involuntary: Distribution::of(
            &samples
                .iter()
                .map(|s| s.involuntary as f64)
                .collect::<Vec<_>>(),
        ),
        voluntary: Distribution::of(
            &samples
                .iter()
                .map(|s| s.voluntary as f64)
                .collect::<Vec<_>>(),
        ),
        relative: Histogram::build("relative", &RELATIVE_EDGES, &rel),
        buckets: buckets_ms.map(|b| Histogram::build("ms", b, &elapsed)),
        split,
        switch_cost: SwitchCost {
            groups,
            mean_ms_per_involuntary_switch: mean_per_switch,
            headline,
        },
        slowest,
    }
}

/// Run the loop probe on a dedicated thread (so its policy, nice, slice and pinning touch nothing else).
pub fn run_loop(cfg: &LoopConfig) -> Result<LoopReport, ProbeError> {
    run_loop_until(cfg, &CancelToken::new())
}

/// `run_loop` that stops early when `cancel` is set: the probe thread stops within one chunk of work
/// (`work::SPIN_CHECK_EVERY` iterations) or one footprint pass, the load is stopped and reaped, and the
/// report covers the samples completed, with `interrupted` set. The probe thread's policy, nice value,
/// slice and pinning end with the thread; the calling thread's own settings are never changed.
pub fn run_loop_until(cfg: &LoopConfig, cancel: &CancelToken) -> Result<LoopReport, ProbeError> {
    validate(cfg)?;
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let c = cfg.clone();
    let cancel_probe = cancel.clone();
    let h = std::thread::Builder::new()
        .name("ordo-probe".into())
        .spawn(move || {
            let r = measure(&c, &tx, &go_rx, &cancel_probe);
            let _ = tx.send(FromProbe::Done(r));
        })
        .map_err(|e| ProbeError::Config(format!("cannot start the probe thread: {e}")))?;
    let lost = || ProbeError::Config("the probe thread stopped without a result".into());
    match rx.recv().map_err(|_| lost())? {
        FromProbe::Ready => {}
        FromProbe::Done(r) => {
            let _ = h.join();
            r?;
            return Err(lost());
        }
    }
    // Cancelled during calibration: no load is started and no sample taken.
    let mut load = None;
    if !cancel.is_cancelled() {
        match BackgroundLoad::start(&cfg.load, cfg.cpu) {
            Ok(l) => load = Some(l),
            Err(e) => {
                let _ = go_tx.send(false);
                let _ = h.join();
                return Err(e);
            }
        }
    }
    let _ = go_tx.send(load.is_some());
    let done = rx.recv();
    let load_status = load.as_mut().and_then(|l| l.command_status());
    // Stops the load threads, or kills the load command and everything it started, and reaps them.
    drop(load);
    let _ = h.join();
    let mut raw = match done {
        Ok(FromProbe::Done(r)) => r?,
        _ => return Err(lost()),
    };
    if load_status.is_some() {
        raw.warnings.push(
            "the load command exited before the run ended; later samples ran without it".into(),
        );
    }
    let nominal_ns = Calibration {
        ns_per_iteration: raw.ns_per_iteration,
    }
    .nominal_ns(raw.iterations);
    let summary = analyze(&raw.samples, nominal_ns, cfg.buckets_ms.as_deref());
    Ok(LoopReport {
        kind: "probe-loop".into(),
        version: 1,
        label: cfg.label.clone(),
        config: cfg.clone(),
        iterations: raw.iterations,
        nominal_ns,
        ns_per_iteration: raw.ns_per_iteration,
        applied: raw.applied,
        schedstat: raw.schedstat,
        interrupted: raw.interrupted,
        summary,
        samples: raw.samples,
        warnings: raw.warnings,
        fingerprint: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(elapsed_ms: f64, cpu_ms: f64, inv: u64, rd_ms: f64) -> LoopSample {
        LoopSample {
            elapsed_ns: (elapsed_ms * MS) as u64,
            cpu_ns: (cpu_ms * MS) as u64,
            user_ns: (cpu_ms * MS) as u64,
            sys_ns: 0,
            voluntary: 0,
            involuntary: inv,
            run_delay_ns: Some((rd_ms * MS) as u64),
            timeslices: Some(inv + 1),
            minflt: 0,
        }
    }

    #[test]
    fn seed_like_analysis() {
        let mut v: Vec<LoopSample> = (0..90).map(|_| s(14.0, 14.0, 0, 0.0)).collect();
        v.extend((0..9).map(|_| s(20.0, 14.0, 1, 6.0)));
        v.push(s(65.0, 19.0, 7, 46.0));
        let a = analyze(&v, 14_000_000, Some(&[11.0, 18.0, 24.0, 50.0, 75.0]));
        assert_eq!(a.samples, 100);
        assert_eq!(a.elapsed_ms.p50, 14.0);
        assert_eq!(a.relative.buckets[0].count, 90);
        assert_eq!(a.relative.buckets[1].count, 9); // 20/14 = 1.43
        assert_eq!(a.relative.buckets[4].count, 1); // 65/14 = 4.6
        let b = a.buckets.unwrap();
        assert_eq!(
            b.buckets.iter().map(|b| b.count).collect::<Vec<_>>(),
            vec![0, 90, 9, 0, 1, 0]
        );
        assert_eq!(a.slowest.involuntary, 7);
        assert!(
            a.switch_cost.headline.contains("≥5"),
            "{}",
            a.switch_cost.headline
        );
        assert!(
            a.switch_cost.headline.contains("4.6×"),
            "{}",
            a.switch_cost.headline
        );
        let rd = a.split.run_queue_wait_ms.unwrap();
        assert!((rd - (54.0 + 46.0)).abs() < 1e-6);
        assert!(
            (a.split.cpu_fraction
                + a.split.run_queue_wait_fraction.unwrap()
                + a.split.other_fraction
                - 1.0)
                .abs()
                < 1e-9
        );
        assert_eq!(a.switch_cost.groups.len(), 3);
    }

    #[test]
    fn no_samples_analyse_to_zeros() {
        let a = analyze(&[], 1_000_000, Some(&[1.0]));
        assert_eq!(a.samples, 0);
        assert_eq!(a.switch_cost.headline, "no samples");
        assert!(a.switch_cost.groups.is_empty());
        assert_eq!(a.relative.buckets.iter().map(|b| b.count).sum::<usize>(), 0);
    }

    #[test]
    fn quiet_headline() {
        let v: Vec<LoopSample> = (0..10).map(|_| s(1.0, 1.0, 0, 0.0)).collect();
        let a = analyze(&v, 1_000_000, None);
        assert!(a.switch_cost.headline.starts_with("no sample"));
        assert!(a.switch_cost.mean_ms_per_involuntary_switch.is_none());
    }

    /// Issue 13: --footprint was not checked against the memory available.
    #[test]
    fn a_footprint_beyond_the_available_memory_is_refused() {
        assert!(check_footprint(64, Some(4096), None).is_ok());
        assert!(check_footprint(3600, Some(4096), None).is_ok());
        let e = check_footprint(3700, Some(4096), None).unwrap_err();
        assert!(
            e.contains("--footprint 3700 MB") && e.contains("4096 MB"),
            "{e}"
        );
        assert!(
            check_footprint(1 << 19, None, None).is_ok(),
            "unknown: not refused"
        );
        // Against this machine: more than all of its memory is refused, naming the option.
        let avail = mem_available_mb(&ProcRoot::default()).expect("/proc/meminfo");
        let e = validate(&LoopConfig {
            footprint_mb: (avail + 1) as usize,
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--footprint"), "{e}");
    }

    /// Issue 24: --footprint was checked against MemAvailable only; in a cgroup with a smaller memory.max
    /// the probe was OOM-killed (exit 137).
    #[test]
    fn a_footprint_beyond_the_cgroup_limit_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        for (rel, v) in [
            (
                "proc/mounts".to_string(),
                "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n".to_string(),
            ),
            (format!("proc/{pid}/cgroup"), "0::/box\n".to_string()),
            (
                "sys/fs/cgroup/box/memory.max".to_string(),
                format!("{}\n", 1024u64 << 20),
            ),
            (
                "sys/fs/cgroup/box/memory.current".to_string(),
                format!("{}\n", 24u64 << 20),
            ),
            (
                "sys/fs/cgroup/box/memory.stat".to_string(),
                "file 0\n".to_string(),
            ),
        ] {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        }
        let cgroup = own_cgroup_memory(&ordo_sys::knobs::SysRoot::at(d.path()));
        assert!(cgroup.is_some());
        // 1000 MB of headroom: 900 MB is fine, 901 MB is not, though the machine has 64 GB available.
        assert!(check_footprint(900, Some(64 << 10), cgroup.clone()).is_ok());
        let e = check_footprint(901, Some(64 << 10), cgroup).unwrap_err();
        assert!(
            e.contains("--footprint 901 MB")
                && e.contains("1000 MB")
                && e.contains("box/memory.max")
                && e.contains("137"),
            "{e}"
        );
    }

    #[test]
    fn validation_names_the_option() {
        let bad = |c: LoopConfig| validate(&c).unwrap_err().to_string();
        assert!(
            bad(LoopConfig {
                samples: 0,
                ..Default::default()
            })
            .contains("--samples")
        );
        assert!(
            bad(LoopConfig {
                work: Work::Nominal(1),
                ..Default::default()
            })
            .contains("--work")
        );
        assert!(
            bad(LoopConfig {
                nice: Some(30),
                ..Default::default()
            })
            .contains("--nice")
        );
        assert!(
            bad(LoopConfig {
                cpu: Some(100_000),
                ..Default::default()
            })
            .contains("--cpu")
        );
        assert!(
            bad(LoopConfig {
                buckets_ms: Some(vec![5.0, 2.0]),
                ..Default::default()
            })
            .contains("--buckets")
        );
    }
}
