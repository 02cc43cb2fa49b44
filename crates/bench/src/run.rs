//! The coordinator of a run: check the settings and that the target answers, plan the run (the engine's
//! shared `Plan`: every class's requests pre-serialised, the protocol picked, the warm-up, measured part and
//! end placed in time), start one worker thread per share of the clients, watch them (progress, the server
//! sampled at the measured start and at the end), merge their statistics and build the report. The workers
//! themselves are the engine's (`engine::run_thread`). It picks the protocol (HTTP/1.1, HTTP/2, a Lua
//! script) and uses every other module; none imports it (lib.rs re-exports its entry points), so the
//! coordinator sits above the engine without a cycle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{BenchConfig, Pacing, Stop};
use crate::engine::{self, ClassPlan, Live, Plan};
use crate::error::BenchError;
use crate::mix::{self, Assign, Mix, MixClass};
use crate::progress::Progress;
use crate::report::{self, BenchReport, ServerReport};
use crate::script::{self, ScriptDone};
use crate::stats::Stats;
use crate::target::Header;
use crate::{h2, http, stage, tls};
use ordo_sys::CancelToken;

/// [`run`](crate::run), calling `on_progress` about every 100 ms from the calling thread.
///
/// The phases, in order: check the settings and that the target answers (`preflight`); plan the run
/// (`plan_run`: pre-serialise every class's requests, pick the protocol, place the warm-up, the measured
/// part and the end in time); start the workers; watch them until they finish, sampling the server at the
/// measured start and at the end (`watch`); merge their statistics (`join_workers`) and build the report.
pub fn run_observed(
    config: BenchConfig,
    cancel: CancelToken,
    on_progress: impl FnMut(&Progress),
) -> Result<BenchReport, BenchError> {
    let (report, done) = run_scripted(config, cancel, on_progress)?;
    if let Some(d) = done {
        d.call(&report)?;
    }
    Ok(report)
}

/// [`run_observed`], leaving a Lua script's `done` hook to the caller (to call after printing the
/// report, as wrk does); `None` without a script.
pub fn run_scripted(
    config: BenchConfig,
    cancel: CancelToken,
    on_progress: impl FnMut(&Progress),
) -> Result<(BenchReport, Option<ScriptDone>), BenchError> {
    let (addr, mut sampler) = preflight(&config)?;
    let tls = if config.target.tls {
        Some(tls::prepare(
            &config.target,
            &config.tls,
            addr,
            config.connect_timeout,
            config.h2,
        )?)
    } else {
        None
    };
    let threads = config.effective_threads();
    // wrk's setup phase runs before any worker starts
    let script = match &config.script {
        Some(s) => Some(script::start(s, &config, addr, threads)?),
        None => None,
    };
    let run = plan_run(
        &config,
        addr,
        tls,
        threads,
        script
            .as_ref()
            .map(|(p, _)| p.clone() as Arc<dyn engine::Protocol>),
    )?;
    let plan = run.plan.clone();

    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let plan = plan.clone();
        let rx = cancel.subscribe();
        handles.push(
            std::thread::Builder::new()
                .name(format!("ordo-bench-{t}"))
                .spawn(move || engine::run_thread(plan, t, threads, rx))?,
        );
    }
    let watched = watch(&config, &plan, &handles, sampler.as_mut(), on_progress);
    let stats = join_workers(handles, plan.classes.len(), run.open)?;

    let interrupted = cancel.is_cancelled();
    let elapsed = measured_elapsed(&config, interrupted, &stats, &run.sched, &watched);
    let complete: u64 = stats.classes.iter().map(|c| c.completed).sum();
    let server = match (config.server_pid, watched.first_sample, watched.last_sample) {
        (Some(pid), Some(a), Some(b)) => Some(server_report(pid, &b.delta(&a), complete)),
        _ => None,
    };
    let done = match script {
        Some((protocol, main)) => Some(protocol.finish(main, stats.total_latency())?),
        None => None,
    };
    let report = report::build(report::BuildInput {
        config: run_config(&config, threads, run.open, run.assign_requests),
        target: config.target.url.clone(),
        started_unix_ms: watched.started_unix_ms.unwrap_or_else(unix_ms),
        interrupted,
        elapsed_s: elapsed.as_secs_f64(),
        class_names: run.mix.classes.iter().map(|c| c.name.clone()).collect(),
        shares: run.shares,
        class_connections: run.class_connections,
        connections: run.clients as u64,
        stats: &stats,
        server,
        hostname: config.target.host.clone(),
        port: config.target.port,
        path: config.target.path.clone(),
        stages: plan
            .ramp
            .as_ref()
            .map(|r| {
                r.segments
                    .iter()
                    .map(|s| report::StagePlan {
                        start_s: s.t0,
                        duration_s: s.len,
                        from: s.from,
                        target: s.to,
                        unit: r.unit.as_str().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    });
    Ok((report, done))
}

/// What a run is, decided before its workers start: the engine's shared plan and the figures the report
/// needs about it.
struct PlannedRun {
    plan: Arc<Plan>,
    sched: Schedule,
    mix: Mix,
    shares: Vec<f64>,
    /// Connections (clients) per class when classes are assigned by connection; zeros otherwise.
    class_connections: Vec<u64>,
    /// The clients of the loop: a connection each (HTTP/1.1), or a stream each (HTTP/2).
    clients: usize,
    open: bool,
    assign_requests: bool,
}

/// The classes (a mix, or one default class requesting the target), the protocol, the clients' classes
/// and the schedule in time, as the engine's [`Plan`].
fn plan_run(
    config: &BenchConfig,
    addr: std::net::SocketAddr,
    tls: Option<tls::Tls>,
    threads: usize,
    scripted: Option<Arc<dyn engine::Protocol>>,
) -> Result<PlannedRun, BenchError> {
    let mix = config.mix.clone().unwrap_or_else(|| {
        Mix::new(
            Assign::Clients,
            vec![MixClass::new("default", 1.0, &config.target.path)],
        )
    });
    let shares = mix.normalised_shares();
    let classes = class_plans(config, &mix)?;
    // the one place that picks the protocol: the engine runs either
    let protocol: Arc<dyn engine::Protocol> = if let Some(p) = scripted {
        p
    } else if config.h2 {
        Arc::new(h2::H2Plan::new(h2_requests(config, &mix)?, config.streams))
    } else {
        Arc::new(engine::Http1Protocol)
    };
    let clients = config.connections * if config.h2 { config.streams } else { 1 };
    let open = matches!(config.pacing, Pacing::Open { .. });
    let assign_requests = open || mix.assign == Assign::Requests;
    let conn_class = mix::swrr_sequence(&shares, clients);
    let slot_table = mix::swrr_sequence(&shares, slot_table_len(&mix));
    let mut class_connections = vec![0u64; shares.len()];
    if !assign_requests {
        for &c in &conn_class {
            class_connections[c] += 1;
        }
    }
    let start = Instant::now();
    let sched = Schedule::new(config, start)?;
    let ramp = (!config.stages.is_empty()).then(|| match config.pacing {
        Pacing::Open { rate } => stage::Ramp::new(stage::Unit::Rate, rate, &config.stages),
        Pacing::Closed => stage::Ramp::new(stage::Unit::Clients, 0.0, &config.stages),
    });
    let plan = Arc::new(Plan {
        ramp,
        addr,
        tls,
        classes,
        slot_table,
        conn_class,
        assign_requests,
        keepalive: config.keepalive,
        head_request: config.method.eq_ignore_ascii_case("HEAD"),
        strict_length: config.strict_length,
        timeout: config.timeout,
        connect_timeout: config.connect_timeout,
        coalesce: config.coalesce,
        pacing: config.pacing,
        connections: config.connections,
        protocol,
        clients,
        limit: sched.limit,
        warm_slots: sched.warm_slots,
        start,
        measure_start: sched.measure_start,
        end: sched.end,
        issued: AtomicU64::new(0),
        warm_issued: AtomicU64::new(0),
        live: (0..threads).map(|_| Live::default()).collect(),
        seed: config.seed,
        drain: config.drain,
        measured_in_flight: AtomicU64::new(0),
    });
    Ok(PlannedRun {
        plan,
        sched,
        mix,
        shares,
        class_connections,
        clients,
        open,
        assign_requests,
    })
}

/// Every worker's statistics merged (a worker's I/O error or panic fails the run).
fn join_workers(
    handles: Vec<std::thread::JoinHandle<std::io::Result<Stats>>>,
    classes: usize,
    open: bool,
) -> Result<Stats, BenchError> {
    let mut stats = Stats::new(classes, open);
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => stats.merge(&s),
            Ok(Err(e)) => return Err(BenchError::Io(e)),
            Err(_) => {
                return Err(BenchError::Io(std::io::Error::other(
                    "a worker thread panicked",
                )));
            }
        }
    }
    Ok(stats)
}

/// The measured part's length: the configured duration, the time the last of `n` requests completed, or
/// (interrupted, or a request count never reached) from the measured start until the workers finished.
fn measured_elapsed(
    config: &BenchConfig,
    interrupted: bool,
    stats: &Stats,
    sched: &Schedule,
    watched: &Watched,
) -> Duration {
    match (config.stop, interrupted) {
        (Stop::Duration(d), false) => d,
        (Stop::Requests(_), false) if stats.last_done_us > 0 => {
            Duration::from_micros(stats.last_done_us)
        }
        _ => {
            let until = sched
                .end
                .map_or(watched.finished, |e| e.min(watched.finished));
            until.saturating_duration_since(sched.measure_start)
        }
    }
}

/// Check what can be checked before any worker starts: the settings, the open-file limit, that the target
/// answers (within the connect timeout; the first address that answers is used, as `localhost` may
/// resolve to ::1 first while the server listens on 127.0.0.1 only) and that the server process can be
/// sampled.
fn preflight(
    config: &BenchConfig,
) -> Result<(SocketAddr, Option<ordo_sys::ProcessSampler>), BenchError> {
    config.validate()?;
    if let Some(limit) = open_file_limit() {
        // Each connection is a descriptor; leave room for the runtime's own.
        if config.connections as u64 + 64 > limit {
            return Err(BenchError::InvalidConfig {
                field: "connections".into(),
                message: format!(
                    "{} connections exceed this process's open-file limit of {limit} (raise `ulimit -n`)",
                    config.connections
                ),
            });
        }
    }
    let mut addr = None;
    let mut errors = Vec::new();
    for a in config.target.resolve()? {
        match std::net::TcpStream::connect_timeout(&a, config.connect_timeout) {
            Ok(_) => {
                addr = Some(a);
                break;
            }
            Err(e) => errors.push(format!("connect to {a}: {e}")),
        }
    }
    let addr = addr.ok_or_else(|| BenchError::Unreachable {
        target: config.target.url.clone(),
        reason: errors.join("; "),
    })?;
    let sampler = match config.server_pid {
        Some(pid) => {
            Some(
                ordo_sys::ProcessSampler::new(pid).map_err(|e| BenchError::ServerPid {
                    pid,
                    reason: e.to_string(),
                })?,
            )
        }
        None => None,
    };
    Ok((addr, sampler))
}

/// Every class's requests, pre-serialised; a class's header replaces a command-line header of the same name.
fn class_plans(config: &BenchConfig, mix: &Mix) -> Result<Vec<ClassPlan>, BenchError> {
    let mut classes = Vec::with_capacity(mix.classes.len());
    for c in &mix.classes {
        let headers = class_headers(config, c);
        let mut requests = Vec::with_capacity(c.urls.len());
        for u in &c.urls {
            let t = config.target.join(u)?;
            requests.push(http::build_request(
                &config.method,
                &t,
                &headers,
                &c.cookies,
                config.body.as_ref(),
                config.keepalive,
            ));
        }
        classes.push(ClassPlan {
            requests,
            order: c.order,
            think: c.think,
        });
    }
    Ok(classes)
}

/// A class's headers: the command line's, a class header replacing one of the same name.
fn class_headers(config: &BenchConfig, c: &MixClass) -> Vec<Header> {
    let mut headers: Vec<Header> = config
        .headers
        .iter()
        .filter(|h| {
            !c.headers
                .iter()
                .any(|k| k.name.eq_ignore_ascii_case(&h.name))
        })
        .cloned()
        .collect();
    headers.extend(c.headers.iter().cloned());
    headers
}

/// Every class's requests as HTTP/2 streams (the same headers as [`class_plans`] gives HTTP/1.1).
fn h2_requests(config: &BenchConfig, mix: &Mix) -> Result<Vec<Vec<h2::H2Request>>, BenchError> {
    let mut out = Vec::with_capacity(mix.classes.len());
    for c in &mix.classes {
        let headers = class_headers(config, c);
        let mut requests = Vec::with_capacity(c.urls.len());
        for u in &c.urls {
            let t = config.target.join(u)?;
            let r = h2::H2Request::new(
                &config.method,
                &t,
                &headers,
                &c.cookies,
                config.body.as_ref(),
            )
            .map_err(|reason| BenchError::InvalidUrl {
                url: t.url.clone(),
                reason: format!("cannot be sent over HTTP/2: {reason}"),
            })?;
            requests.push(r);
        }
        out.push(requests);
    }
    Ok(out)
}

/// Where a run's parts fall in time.
struct Schedule {
    /// Open loop: the request slots of the warm-up (0 in a closed loop, whose warm-up is a duration).
    warm_slots: u64,
    /// The measured part begins.
    measure_start: Instant,
    /// The request count to stop at (warm-up slots included in an open loop), when the run has one.
    limit: Option<u64>,
    /// The measured part ends, when the run is a duration.
    end: Option<Instant>,
}

impl Schedule {
    fn new(config: &BenchConfig, start: Instant) -> Result<Schedule, BenchError> {
        let (warm_slots, measure_start, limit) = match (config.pacing, config.stop) {
            (Pacing::Open { rate }, stop) => {
                let w = (config.warmup.as_secs_f64() * rate).ceil() as u64;
                let ms = start
                    .checked_add(Duration::from_secs_f64(w as f64 / rate))
                    .ok_or_else(|| too_long("warmup"))?;
                let limit = match stop {
                    Stop::Requests(n) => Some(w + n),
                    Stop::Duration(_) => None,
                };
                (w, ms, limit)
            }
            (Pacing::Closed, stop) => (
                0,
                start
                    .checked_add(config.warmup)
                    .ok_or_else(|| too_long("warmup"))?,
                match stop {
                    Stop::Requests(n) => Some(n),
                    Stop::Duration(_) => None,
                },
            ),
        };
        let end = match config.stop {
            Stop::Duration(d) => Some(
                measure_start
                    .checked_add(d)
                    .ok_or_else(|| too_long("duration"))?,
            ),
            Stop::Requests(_) => None,
        };
        Ok(Schedule {
            warm_slots,
            measure_start,
            limit,
            end,
        })
    }
}

/// What the coordinator saw while the workers ran.
struct Watched {
    started_unix_ms: Option<u64>,
    first_sample: Option<ordo_sys::ProcessSnapshot>,
    finished: Instant,
    last_sample: Option<ordo_sys::ProcessSnapshot>,
}

/// Coordinate until every worker has finished: report progress about every 100 ms, and sample the server
/// at the measured start and at the end.
fn watch<T>(
    config: &BenchConfig,
    plan: &Plan,
    handles: &[std::thread::JoinHandle<T>],
    mut sampler: Option<&mut ordo_sys::ProcessSampler>,
    mut on_progress: impl FnMut(&Progress),
) -> Watched {
    let mut first_sample = None;
    let mut started_unix_ms = None;
    loop {
        let now = Instant::now();
        if now >= plan.measure_start && started_unix_ms.is_none() {
            started_unix_ms = Some(unix_ms());
            if let Some(s) = sampler.as_deref_mut() {
                first_sample = s.sample().ok();
            }
        }
        let (complete, failed) = plan.live.iter().fold((0, 0), |(c, f), l| {
            (
                c + l.completed.load(Ordering::Relaxed),
                f + l.failed.load(Ordering::Relaxed),
            )
        });
        on_progress(&Progress {
            elapsed: now.saturating_duration_since(plan.measure_start),
            warming_up: now < plan.measure_start,
            complete,
            failed,
            duration: match config.stop {
                Stop::Duration(d) => Some(d),
                Stop::Requests(_) => None,
            },
            requests: match config.stop {
                Stop::Requests(n) => Some(n),
                Stop::Duration(_) => None,
            },
        });
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        let mut wait = Duration::from_millis(100);
        if now < plan.measure_start {
            wait = wait.min(plan.measure_start - now);
        }
        std::thread::sleep(wait.max(Duration::from_millis(1)));
    }
    let finished = Instant::now();
    let last_sample = sampler.and_then(|s| s.sample().ok());
    Watched {
        started_unix_ms,
        first_sample,
        finished,
        last_sample,
    }
}

/// The settings that shaped the run, as the report records them.
fn run_config(
    config: &BenchConfig,
    threads: usize,
    open: bool,
    assign_requests: bool,
) -> report::RunConfig {
    report::RunConfig {
        mode: if open { "open" } else { "closed" }.to_string(),
        connections: config.connections as u64,
        threads: threads as u64,
        requests: match config.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration(_) => None,
        },
        duration_s: match config.stop {
            Stop::Duration(d) => Some(d.as_secs_f64()),
            Stop::Requests(_) => None,
        },
        rate: match config.pacing {
            Pacing::Open { rate } => Some(rate),
            Pacing::Closed => None,
        },
        keepalive: config.keepalive,
        method: config.method.clone(),
        warmup_s: config.warmup.as_secs_f64(),
        timeout_s: config.timeout.as_secs_f64(),
        connect_timeout_s: config.connect_timeout.as_secs_f64(),
        coalesce_us: Some(config.coalesce.as_secs_f64() * 1e6),
        mix: config.mix.as_ref().map(|m| mix::display_path(&m.source)),
        assign: if assign_requests {
            "requests"
        } else {
            "clients"
        }
        .to_string(),
        protocol: config
            .h2
            .then(|| if config.target.tls { "h2" } else { "h2c" }.to_string()),
        streams: config.h2.then_some(config.streams as u64),
    }
}

/// Length of the request-slot table: the sum of the shares when they are small whole numbers (an exact
/// period), else 10 000 slots (realised shares within 0.01 percentage points per period).
fn slot_table_len(mix: &Mix) -> usize {
    let whole = mix
        .classes
        .iter()
        .all(|c| c.share.fract() == 0.0 && c.share <= 10_000.0);
    let sum: f64 = mix.classes.iter().map(|c| c.share).sum();
    if whole && sum <= 10_000.0 {
        sum as usize
    } else {
        10_000
    }
}

fn too_long(field: &str) -> BenchError {
    BenchError::InvalidConfig {
        field: field.to_string(),
        message: "too long".to_string(),
    }
}

/// The soft RLIMIT_NOFILE from /proc/self/limits (None when unreadable or unlimited).
fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn server_report(pid: i32, d: &ordo_sys::ProcessSnapshot, complete: u64) -> ServerReport {
    let per = |x: f64| {
        if complete == 0 {
            0.0
        } else {
            x / complete as f64
        }
    };
    let interval_s = d.at_ns as f64 / 1e9;
    let cpu_s = d.best_cpu_ns() as f64 / 1e9;
    let run_delay = d.schedstat.then_some(d.run_delay_ns as f64 / 1e9);
    ServerReport {
        pid,
        threads: d.threads as u64,
        interval_s,
        cpu_s,
        user_s: d.utime_ns as f64 / 1e9,
        system_s: d.stime_ns as f64 / 1e9,
        cpu_cores: if interval_s > 0.0 {
            cpu_s / interval_s
        } else {
            0.0
        },
        voluntary_switches: d.voluntary_switches,
        involuntary_switches: d.involuntary_switches,
        run_delay_s: run_delay,
        per_request: report::PerRequest {
            cpu_us: per(cpu_s * 1e6),
            voluntary_switches: per(d.voluntary_switches as f64),
            involuntary_switches: per(d.involuntary_switches as f64),
            run_delay_us: run_delay.map(|r| per(r * 1e6)),
        },
    }
}
