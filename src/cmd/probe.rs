//! `ordo probe`: command-line arguments and glue to ordo-probe — `loop` (seed 004's timed loop, with
//! `--compare` and `--footprints`) and `pid` (a live scheduling view of a running process) — and their
//! Ctrl-C handling: the first SIGINT/SIGTERM stops the probe and prints what it measured (exit 130), a
//! second one exits at once.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;
use ordo_probe::{
    CancelToken, CompareConfig, LoadSpec, LoopConfig, PidConfig, PidEnd, ProbeError, Work, render,
    run_compare_until, run_loop_until, watch_until,
};
use ordo_sys::Policy;

use crate::exit::UsageError;
use crate::interrupt::{INTERRUPTED, stop_on_signals};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: ProbeCommand,
}

#[derive(Debug, Subcommand)]
pub enum ProbeCommand {
    /// Time a fixed CPU loop many times and show what context switches and run-queue wait did to it.
    Loop(LoopArgs),
    /// Watch a running process and its threads: CPU%, switches/s, run-queue wait, migrations, CPU pressure.
    Pid(PidArgs),
}

#[derive(Debug, clap::Args)]
pub struct LoopArgs {
    /// Nominal duration of one sample's work, calibrated on this machine (e.g. 14ms, 500us).
    #[arg(long, value_parser = parse_duration, default_value = "14ms", conflicts_with = "iterations")]
    pub work: Duration,
    /// A fixed number of loop iterations per sample instead of --work.
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Number of timed samples.
    #[arg(long, default_value_t = 1000)]
    pub samples: usize,
    /// Samples run and discarded first.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// MiB of memory to hold and touch before every sample.
    #[arg(long, default_value_t = 0, value_name = "MB")]
    pub footprint: usize,
    /// Busy threads to run beside the probe (pinned to --cpu when given).
    #[arg(long, value_name = "N", conflicts_with = "load_cmd")]
    pub load: Option<usize>,
    /// A shell command to run beside the probe as load (killed at the end).
    #[arg(long, value_name = "CMD")]
    pub load_cmd: Option<String>,
    /// Pin the probe thread and the load to this CPU.
    #[arg(long, value_name = "K")]
    pub cpu: Option<usize>,
    /// The probe thread's policy: other, batch, idle, fifo:P or rr:P.
    #[arg(long, hide_possible_values = true, value_parser = crate::values::Suggesting {
        names: &crate::values::THREAD_POLICY_NAMES,
        parse: parse_policy,
    })]
    pub policy: Option<Policy>,
    /// The probe thread's nice value (-20..19; negative needs privileges).
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
    /// The probe thread's slice (SCHED_OTHER/BATCH, Linux ≥ 6.12), e.g. 3ms.
    #[arg(long, value_parser = parse_duration)]
    pub slice: Option<Duration>,
    /// Histogram bucket edges in ms, e.g. 11,18,24,50,75.
    #[arg(long, value_parser = parse_ms_list)]
    pub buckets: Option<MsList>,
    /// Run quiet, then under load (--load/--load-cmd, default one busy thread per CPU), side by side.
    #[arg(long)]
    pub compare: bool,
    /// Run once per memory footprint (MiB), side by side, e.g. 1,500,900.
    #[arg(long, value_parser = parse_mb_list, value_name = "MB,MB,...")]
    pub footprints: Option<MbList>,
    /// Print a JSON report (kind "probe-loop" or "probe-compare") instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct PidArgs {
    /// The process to watch.
    pub pid: i32,
    /// Time between reports.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub interval: Duration,
    /// Stop after this long (default: until the process exits or Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Threads shown per interval in text mode (busiest first).
    #[arg(long, default_value_t = 10)]
    pub threads: usize,
    /// One JSON object per interval (kind "probe-pid"), one per line.
    #[arg(long)]
    pub json: bool,
}

/// "14ms", "1.5s", "500us", "250ns", "2m": positive and at most a day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = ordo_sys::units::parse_duration(s)?;
    if d.is_zero() || d > Duration::from_secs(86_400) {
        return Err(format!("{s:?}: must be positive and at most a day"));
    }
    Ok(d)
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse()
        .map_err(|e: ordo_sys::thread::ParsePolicyError| e.to_string())
}

/// Bucket edges in ms (a newtype so clap takes the list as one value).
#[derive(Clone, Debug, PartialEq)]
pub struct MsList(pub Vec<f64>);

/// Footprints in MiB.
#[derive(Clone, Debug, PartialEq)]
pub struct MbList(pub Vec<usize>);

fn parse_ms_list(s: &str) -> Result<MsList, String> {
    let v: Vec<f64> = s
        .split(',')
        .map(|p| {
            p.trim()
                .trim_end_matches("ms")
                .parse::<f64>()
                .map_err(|_| format!("{p:?} is not a number of ms"))
        })
        .collect::<Result<_, _>>()?;
    ordo_probe::stats::check_edges(&v)?;
    Ok(MsList(v))
}

fn parse_mb_list(s: &str) -> Result<MbList, String> {
    s.split(',')
        .map(|p| {
            p.trim()
                .trim_end_matches("MB")
                .parse::<usize>()
                .map_err(|_| format!("{p:?} is not a whole number of MB"))
        })
        .collect::<Result<_, _>>()
        .map(MbList)
}

fn probe_err(e: ProbeError) -> anyhow::Error {
    if e.is_usage() {
        anyhow::Error::new(UsageError(e.to_string()))
    } else {
        anyhow::Error::new(e)
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        ProbeCommand::Loop(a) => run_loop_cmd(a),
        ProbeCommand::Pid(a) => run_pid_cmd(a),
    }
}

fn run_loop_cmd(a: LoopArgs) -> anyhow::Result<ExitCode> {
    let load = match (a.load, a.load_cmd) {
        (Some(n), _) => LoadSpec::Threads(n),
        (None, Some(c)) => LoadSpec::Command(c),
        (None, None) => LoadSpec::None,
    };
    let cfg = LoopConfig {
        label: "run".into(),
        work: match a.iterations {
            Some(n) => Work::Iterations(n),
            None => Work::Nominal(a.work.as_nanos().min(u64::MAX as u128) as u64),
        },
        samples: a.samples,
        warmup: a.warmup,
        footprint_mb: a.footprint,
        load,
        cpu: a.cpu,
        policy: a.policy,
        nice: a.nice,
        slice_ns: a.slice.map(|d| d.as_nanos() as u64),
        buckets_ms: a.buckets.map(|b| b.0),
        ns_per_iteration: None,
    };
    let cancel = CancelToken::new();
    stop_on_signals(
        "ordo probe",
        "\nordo probe: stopping; the sample in progress is dropped (Ctrl-C again to quit at once without a report)",
        {
            let cancel = cancel.clone();
            move || cancel.cancel()
        },
        ordo_probe::load::kill_running_commands,
    )?;
    let mut stdout = std::io::stdout().lock();
    let interrupted;
    if a.compare || a.footprints.is_some() {
        let cc = CompareConfig {
            base: cfg,
            quiet_vs_loaded: a.compare,
            footprints: a.footprints.map(|f| f.0),
        };
        let mut report = run_compare_until(&cc, &cancel, |label| {
            eprintln!("ordo probe: running {label} ...")
        })
        .map_err(probe_err)?;
        interrupted = report.interrupted;
        if interrupted {
            eprintln!(
                "ordo probe: interrupted; {} of {} runs reported{}",
                report.runs.len(),
                report.runs.len() + report.not_run.len(),
                if report.runs.len() < 2 {
                    ", so the comparison did not run"
                } else {
                    ""
                }
            );
        }
        if a.json {
            report.fingerprint = Some(ordo_sys::fingerprint::collect());
            serde_json::to_writer(&mut stdout, &report).context("writing the JSON report")?;
            writeln!(stdout)?;
        } else {
            write!(stdout, "{}", render::compare_text(&report))?;
        }
    } else {
        let mut report = run_loop_until(&cfg, &cancel).map_err(probe_err)?;
        interrupted = report.interrupted;
        if interrupted {
            eprintln!("ordo probe: {}", render::interrupted_line(&report));
        }
        if a.json {
            report.fingerprint = Some(ordo_sys::fingerprint::collect());
            serde_json::to_writer(&mut stdout, &report).context("writing the JSON report")?;
            writeln!(stdout)?;
        } else {
            write!(stdout, "{}", render::loop_text(&report))?;
        }
    }
    stdout.flush()?;
    Ok(if interrupted {
        ExitCode::from(INTERRUPTED)
    } else {
        ExitCode::SUCCESS
    })
}

fn run_pid_cmd(a: PidArgs) -> anyhow::Result<ExitCode> {
    let cfg = PidConfig {
        pid: a.pid,
        interval: a.interval,
        duration: a.duration,
        root: Default::default(),
    };
    let cancel = CancelToken::new();
    stop_on_signals(
        "ordo probe",
        "\nordo probe: stopping (Ctrl-C again to quit at once)",
        {
            let cancel = cancel.clone();
            move || cancel.cancel()
        },
        || {},
    )?;
    let mut stdout = std::io::stdout().lock();
    let mut write_err = None;
    let end = watch_until(&cfg, &cancel, |r| {
        let res = if a.json {
            serde_json::to_string(r)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(stdout, "{line}"))
        } else {
            let mut text = render::pid_text(r, a.threads);
            if r.interrupted {
                text.push_str(&format!(
                    "  (last interval cut short by the interruption: {:.2} s; rates are per second)\n",
                    r.interval_s
                ));
            }
            if r.seq == 1 {
                for u in &r.unavailable {
                    text.push_str(&format!("  unavailable: {u}\n"));
                }
            }
            write!(stdout, "{text}")
        };
        match res.and_then(|_| stdout.flush()) {
            Ok(()) => true,
            Err(e) => {
                write_err = Some(e);
                false
            }
        }
    })
    .map_err(|e| match e {
        ProbeError::Sys(ordo_sys::SysError::ProcessGone(p)) => {
            anyhow::Error::new(UsageError(format!("no process with PID {p}")))
        }
        e => probe_err(e),
    })?;
    if let Some(e) = write_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing the report");
        }
    }
    match end {
        PidEnd::Exited { after_s } => eprintln!(
            "ordo probe: process {} exited after {after_s:.1} s; stopping",
            a.pid
        ),
        PidEnd::Interrupted { after_s } => {
            eprintln!("ordo probe: interrupted after {after_s:.1} s");
            return Ok(ExitCode::from(INTERRUPTED));
        }
        PidEnd::Duration | PidEnd::Stopped => {}
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("14ms").unwrap(), Duration::from_millis(14));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert!(parse_duration("14").is_err());
        assert!(parse_duration("0ms").is_err());
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn lists() {
        assert_eq!(parse_ms_list("11,18,24").unwrap().0, vec![11.0, 18.0, 24.0]);
        assert!(parse_ms_list("18,11").is_err());
        assert_eq!(parse_mb_list("1,500,900").unwrap().0, vec![1, 500, 900]);
        assert!(parse_mb_list("1,x").is_err());
    }
}
