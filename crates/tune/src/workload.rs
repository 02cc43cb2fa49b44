//! Running one workload against the target and returning its metrics: the built-in load generator
//! (ordo-bench, in process) or an external command (ab, wrk, sysbench, anything with a regex), both
//! cancellable when a signal arrives.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ordo_bench::{BenchConfig, CancelToken, Header, Mix, Pacing, Stop};

use crate::parsers::{self, Metrics};
use crate::spec::{BenchSpec, WorkloadKind, WorkloadSpec};
use crate::target::substitute;

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("workload `{0}`: {1}")]
    Bench(String, #[source] ordo_bench::BenchError),
    #[error("workload `{name}`: cannot run `{cmd}`: {source}")]
    Spawn {
        name: String,
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("workload `{name}`: `{cmd}` failed ({status}){}", tail(.stderr))]
    Failed {
        name: String,
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("workload `{name}`: `{cmd}` did not finish within {timeout:?}")]
    Timeout {
        name: String,
        cmd: String,
        timeout: Duration,
    },
    #[error("workload `{0}`: {1}")]
    Parse(String, #[source] parsers::ParseError),
    #[error("interrupted")]
    Interrupted,
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.trim().lines().collect();
    if lines.is_empty() {
        String::new()
    } else {
        format!(": {}", lines[lines.len().saturating_sub(4)..].join(" | "))
    }
}

/// The bench configuration for one run (placeholders substituted).
pub(crate) fn bench_config(
    b: &BenchSpec,
    vars: &BTreeMap<String, String>,
) -> Result<BenchConfig, ordo_bench::BenchError> {
    let mut cfg = BenchConfig::new(&substitute(&b.url, vars))?;
    cfg.connections = b.connections;
    cfg.threads = b.threads;
    cfg.stop = match (b.requests, b.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(Duration::from_secs(5)),
    };
    cfg.pacing = match b.rate {
        Some(rate) => Pacing::Open { rate },
        None => Pacing::Closed,
    };
    cfg.keepalive = b.keepalive;
    cfg.method = b.method.clone();
    cfg.headers = b
        .headers
        .iter()
        .map(|h| Header::parse(&substitute(h, vars)))
        .collect::<Result<_, _>>()?;
    cfg.body = b.body.clone().map(bytes::Bytes::from);
    cfg.timeout = b.timeout;
    cfg.warmup = b.warmup;
    cfg.mix = b.mix.as_deref().map(Mix::from_file).transpose()?;
    cfg.seed = b.seed;
    cfg.validate()?;
    Ok(cfg)
}

/// Metrics of a bench report.
pub(crate) fn bench_metrics(r: &ordo_bench::BenchReport) -> Metrics {
    let s = &r.summary;
    let mut m = Metrics::new();
    m.insert("throughput".into(), s.rps);
    m.insert("requests".into(), s.complete as f64);
    m.insert("errors".into(), (s.failed.total + s.non_2xx) as f64);
    m.insert("elapsed_s".into(), r.elapsed_s);
    m.insert("mean_ms".into(), s.latency.mean_ms);
    m.insert("min_ms".into(), s.latency.min_ms);
    m.insert("max_ms".into(), s.latency.max_ms);
    m.insert("time_per_request_ms".into(), s.time_per_request_ms);
    for p in [50.0, 90.0, 95.0, 99.0] {
        if let Some(v) = s.latency.at(p) {
            m.insert(format!("p{}_ms", p as u32), v);
        }
    }
    if let Some(c) = &s.corrected {
        for p in [50.0, 99.0] {
            if let Some(v) = c.at(p) {
                m.insert(format!("p{}_corrected_ms", p as u32), v);
            }
        }
    }
    if r.classes.len() > 1 {
        for c in &r.classes {
            m.insert(format!("class.{}.throughput", c.name), c.rps);
            m.insert(format!("class.{}.mean_ms", c.name), c.latency.mean_ms);
            if let Some(v) = c.latency.at(99.0) {
                m.insert(format!("class.{}.p99_ms", c.name), v);
            }
        }
    }
    m
}

/// Whether the workload does a fixed amount of work (so its elapsed time is a runtime).
pub(crate) fn fixed_work(w: &WorkloadSpec) -> bool {
    match &w.kind {
        WorkloadKind::Bench(b) => b.requests.is_some(),
        WorkloadKind::Command { .. } => true,
    }
}

/// Estimated wall time of one run of the workload (for the plan).
pub(crate) fn estimate(w: &WorkloadSpec) -> Duration {
    match &w.kind {
        WorkloadKind::Bench(b) => b.warmup + b.duration.unwrap_or(Duration::from_secs(5)),
        WorkloadKind::Command { timeout, .. } => (*timeout).min(Duration::from_secs(30)),
    }
}

/// The command a workload runs, for the plan.
pub(crate) fn describe(w: &WorkloadSpec, vars: &BTreeMap<String, String>) -> String {
    match &w.kind {
        WorkloadKind::Bench(b) => {
            let mut s = format!(
                "ordo bench {} -c {} -t {}",
                substitute(&b.url, vars),
                b.connections,
                b.threads
            );
            match (b.requests, b.duration) {
                (Some(n), _) => s.push_str(&format!(" -n {n}")),
                (None, Some(d)) => s.push_str(&format!(" -d {}s", d.as_secs_f64())),
                _ => {}
            }
            if let Some(r) = b.rate {
                s.push_str(&format!(" --rate {r}"));
            }
            if !b.keepalive {
                s.push_str(" --no-keepalive");
            }
            if let Some(m) = &b.mix {
                s.push_str(&format!(" --mix {}", m.display()));
            }
            s
        }
        WorkloadKind::Command { argv, .. } => argv
            .iter()
            .map(|a| substitute(a, vars))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Run the workload once. `stop` is polled; when it is set the run is cancelled.
pub(crate) fn run(
    w: &WorkloadSpec,
    vars: &BTreeMap<String, String>,
    stop: &Arc<AtomicBool>,
) -> Result<Metrics, WorkloadError> {
    match &w.kind {
        WorkloadKind::Bench(b) => {
            let cfg = bench_config(b, vars).map_err(|e| WorkloadError::Bench(w.name.clone(), e))?;
            let cancel = CancelToken::new();
            let report = ordo_bench::run_observed(cfg, cancel.clone(), |_| {
                if stop.load(Ordering::SeqCst) {
                    cancel.cancel();
                }
            })
            .map_err(|e| WorkloadError::Bench(w.name.clone(), e))?;
            if stop.load(Ordering::SeqCst) || report.interrupted {
                return Err(WorkloadError::Interrupted);
            }
            Ok(bench_metrics(&report))
        }
        WorkloadKind::Command {
            argv,
            parser,
            timeout,
        } => {
            let argv: Vec<String> = argv.iter().map(|a| substitute(a, vars)).collect();
            let cmd = argv.join(" ");
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            let started = Instant::now();
            let mut child = c.spawn().map_err(|source| WorkloadError::Spawn {
                name: w.name.clone(),
                cmd: cmd.clone(),
                source,
            })?;
            let pid = child.id() as i32;
            let mut out = child.stdout.take();
            let mut err = child.stderr.take();
            let out_t = std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(o) = out.as_mut() {
                    let _ = o.read_to_string(&mut s);
                }
                s
            });
            let err_t = std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(e) = err.as_mut() {
                    let _ = e.read_to_string(&mut s);
                }
                s
            });
            let status = loop {
                if let Ok(Some(s)) = child.try_wait() {
                    break Some(s);
                }
                if stop.load(Ordering::SeqCst) || started.elapsed() > *timeout {
                    let _ = ordo_sys::process::kill_group(pid);
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            let elapsed = started.elapsed().as_secs_f64();
            let stdout = out_t.join().unwrap_or_default();
            let stderr = err_t.join().unwrap_or_default();
            let Some(status) = status else {
                if stop.load(Ordering::SeqCst) {
                    return Err(WorkloadError::Interrupted);
                }
                return Err(WorkloadError::Timeout {
                    name: w.name.clone(),
                    cmd,
                    timeout: *timeout,
                });
            };
            if !status.success() {
                return Err(WorkloadError::Failed {
                    name: w.name.clone(),
                    cmd,
                    status: status.to_string(),
                    stderr,
                });
            }
            let mut m = parsers::parse(parser, &format!("{stdout}\n{stderr}"))
                .map_err(|e| WorkloadError::Parse(w.name.clone(), e))?;
            m.entry("elapsed_s".into()).or_insert(elapsed);
            Ok(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ParserKind;

    #[test]
    fn external_command_with_regex_parser() {
        let w = WorkloadSpec {
            name: "php".into(),
            kind: WorkloadKind::Command {
                argv: vec!["echo".into(), "score {n}".into()],
                parser: ParserKind::Regex(regex::Regex::new(r"score (?P<score>[0-9]+)").unwrap()),
                timeout: Duration::from_secs(5),
            },
        };
        let vars: BTreeMap<String, String> = [("n".to_string(), "42".to_string())].into();
        let stop = Arc::new(AtomicBool::new(false));
        let m = run(&w, &vars, &stop).unwrap();
        assert_eq!(m["score"], 42.0);
        assert!(m["elapsed_s"] >= 0.0);
        let bad = WorkloadSpec {
            kind: WorkloadKind::Command {
                argv: vec!["false".into()],
                parser: ParserKind::Ab,
                timeout: Duration::from_secs(5),
            },
            ..w.clone()
        };
        assert!(matches!(
            run(&bad, &vars, &stop),
            Err(WorkloadError::Failed { .. })
        ));
        let slow = WorkloadSpec {
            kind: WorkloadKind::Command {
                argv: vec!["sleep".into(), "5".into()],
                parser: ParserKind::Ab,
                timeout: Duration::from_millis(200),
            },
            ..w
        };
        assert!(matches!(
            run(&slow, &vars, &stop),
            Err(WorkloadError::Timeout { .. })
        ));
    }
}
