//! `ordo bench`: command-line arguments, resolved into an `ordo_bench::BenchConfig`, plus the glue around a
//! run (Ctrl-C, progress bar on a terminal, text / JSON / CSV output). See docs/bench.md.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ordo_bench::{
    BenchConfig, BenchError, CancelToken, Header, Mix, Pacing, Stop, Target, Threshold,
};

use crate::exit::{THRESHOLDS_FAILED, UsageError};
use crate::interrupt::{INTERRUPTED, stop_on_signals};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  ordo bench -c 100 -d 10s http://127.0.0.1:8080/\n  \
    ordo bench -c 100 -n 10000 --no-keepalive http://127.0.0.1:8080/\n  \
    ordo bench -c 50 -d 10s --cacert ca.pem https://localhost:8443/\n  \
    ordo bench --h2 -c 4 --streams 100 -d 10s -k https://127.0.0.1:8443/\n  \
    ordo bench -c 32 --rate 5000 -d 30s http://127.0.0.1:8080/\n  \
    ordo bench --stage 10s:50 --stage 20s:200 --stage 10s:0 http://127.0.0.1:8080/\n  \
    ordo bench -c 64 --rate 100 --stage 30s:5000 --stage 30s:5000 http://127.0.0.1:8080/\n  \
    ordo bench -t 2 -c 10 -d 10s -s examples/bench/wrk/counter.lua http://127.0.0.1:8080/ -- arg1\n  \
    ordo bench -c 50 -d 10s --brief --fail-if 'p99>50ms' --fail-if 'errors>0.1%' http://127.0.0.1:8080/\n  \
    ordo bench -c 99 -d 30s --mix examples/bench/seed003-mix.toml http://127.0.0.1:8080/"
)]
pub struct Args {
    /// Target URL (http:// or https://); paths in a mix file are resolved against it.
    #[arg(value_name = "URL", value_parser = parse_url)]
    pub url: Target,
    /// Concurrent connections (closed loop: concurrent clients).
    #[arg(short = 'c', long, default_value_t = 10, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub connections: u64,
    /// Total measured requests (exact); conflicts with --duration.
    #[arg(short = 'n', long, value_name = "N", conflicts_with = "duration",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Measured duration, e.g. 10s, 500ms, 2m (default 10s when -n is not given).
    #[arg(short = 'd', long, value_name = "TIME", value_parser = parse_dur)]
    pub duration: Option<Duration>,
    /// Worker threads, each with its share of the connections.
    #[arg(short = 't', long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,
    /// Open loop: this many requests per second in total, spread over the connections; latency is also
    /// reported from when each request was due (coordinated omission corrected).
    #[arg(short = 'r', long, value_name = "REQ/S", value_parser = parse_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Open a new connection for every request (ab's default) instead of keep-alive.
    #[arg(long)]
    pub no_keepalive: bool,
    /// HTTP method.
    #[arg(short = 'm', long, default_value = "GET", value_name = "METHOD")]
    pub method: String,
    /// Extra request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = parse_header)]
    pub headers: Vec<Header>,
    /// Request body.
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Per-request time limit (connect + send + receive); over it counts as an exception.
    #[arg(long, default_value = "30s", value_name = "TIME", value_parser = parse_dur)]
    pub timeout: Duration,
    /// Connect time limit; also how long an unreachable target takes to be reported.
    #[arg(long, default_value = "5s", value_name = "TIME", value_parser = parse_dur)]
    pub connect_timeout: Duration,
    /// Wakeup coalescing: a busy client thread spins this long before it waits for the server's answers,
    /// which then arrive without a wakeup the server would pay for on a shared machine (0s: off; at most
    /// 100us).
    #[arg(long, default_value = "20us", value_name = "TIME", value_parser = parse_dur)]
    pub coalesce: Duration,
    /// Run this long first and leave it out of every statistic.
    #[arg(long, default_value = "0s", value_name = "TIME", value_parser = parse_dur)]
    pub warmup: Duration,
    /// Class mix (TOML; see docs/bench.md).
    #[arg(long, value_name = "FILE")]
    pub mix: Option<PathBuf>,
    /// Sample this process's threads during the run (CPU, context switches, run-queue wait).
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
    pub server_pid: Option<i32>,
    /// With --duration: let requests in flight at the end finish (within --timeout) and count them, keeping
    /// a closed loop's load on (unmeasured) meanwhile, instead of abandoning them as wrk does.
    #[arg(long)]
    pub drain: bool,
    /// Count responses whose body length differs from the first one for the same URL as failures (ab).
    #[arg(long)]
    pub strict_length: bool,
    /// Seed for random URL choice in a mix.
    #[arg(long, default_value_t = 0x5eed, value_name = "N")]
    pub seed: u64,
    /// Print the report as JSON (schema: crates/results/schema/bench-report.schema.json).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the report as CSV (one row per class and latency kind).
    #[arg(long, conflicts_with = "brief")]
    pub csv: bool,
    /// Print a short wrk-style summary (req/s, latency avg/p50/p99/max, errors, transfer) instead of the
    /// full report.
    #[arg(long, conflicts_with = "json")]
    pub brief: bool,
    /// Also write the JSON report to FILE (e.g. for `ordo report`, or `ordo report merge` with the results
    /// of other generator machines: it carries the run's HDR histograms), whatever is printed.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Fail the run (exit 3) when this holds afterwards, e.g. `p99>50ms`, `errors>0.1%`, `errors>0`,
    /// `rps<1000` (repeatable; metrics p50 … p99.99, min, mean, max in us/ms/s; errors, failed, non2xx as
    /// a count or %; rps). Checked before the run; one line per threshold after it.
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = parse_threshold)]
    pub fail_if: Vec<Threshold>,
    /// Never show the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// https: accept any server certificate (like curl -k), for test servers with self-signed ones.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// https: trust the CA certificates in FILE (PEM) instead of the system's.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// https: resume TLS sessions on new connections (as browsers do). Without it every connection makes
    /// a full handshake (as ab and wrk do).
    #[arg(long)]
    pub tls_resume: bool,
    /// HTTP/2 over TLS (ALPN `h2`) to an https:// URL; many streams per connection with --streams.
    #[arg(long, conflicts_with_all = ["h2c", "no_keepalive"])]
    pub h2: bool,
    /// HTTP/2 in cleartext with prior knowledge (h2c) to an http:// URL.
    #[arg(long, conflicts_with = "no_keepalive")]
    pub h2c: bool,
    /// A stage of a ramp, `DURATION:TARGET` (repeatable, in order; k6's stages): over DURATION the load
    /// moves linearly to TARGET — the number of connections (from 0), or with --rate the rate in req/s (from
    /// --rate). The run lasts the stages' sum; a closed loop opens as many connections as the highest
    /// target. Reported per stage. A mix file's `[[stages]]` are used when no `--stage` is given.
    #[arg(long = "stage", value_name = "DURATION:TARGET", value_parser = parse_stage,
          conflicts_with_all = ["requests", "duration"])]
    pub stages: Vec<ordo_bench::Stage>,
    /// A wrk Lua script (wrk's -s; wrk's own scripts run unchanged): its setup, init, delay, request,
    /// response and done hooks, one Lua state per thread (Lua 5.4; see docs/bench.md). HTTP/1.1 only.
    #[arg(short = 's', long, value_name = "FILE", conflicts_with_all = ["mix", "h2", "h2c"])]
    pub script: Option<PathBuf>,
    /// Arguments for the script's `init(args)` (`args[1]`, …; `args[0]` is the URL), after `--`.
    #[arg(last = true, value_name = "SCRIPT ARGS")]
    pub script_args: Vec<String>,
    /// HTTP/2: concurrent streams per connection, each a client (h2load's -m; -m is the method here, as in
    /// ab). Total concurrency is connections × streams.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub streams: u64,
}

fn parse_url(s: &str) -> Result<Target, String> {
    Target::parse(s).map_err(|e| e.to_string())
}

fn parse_header(s: &str) -> Result<Header, String> {
    Header::parse(s).map_err(|e| e.to_string())
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    ordo_bench::parse_duration(s)
}

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    Threshold::parse(s).map_err(|e| e.to_string())
}

fn parse_stage(s: &str) -> Result<ordo_bench::Stage, String> {
    ordo_bench::Stage::parse(s)
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "expected a positive number of requests per second, got `{s}`"
        )),
    }
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

fn bench_err(e: BenchError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

/// Raw arguments → a checked config.
fn resolve(args: &Args) -> anyhow::Result<BenchConfig> {
    let mut cfg = BenchConfig::new(&args.url.url).map_err(bench_err)?;
    cfg.connections = args.connections as usize;
    cfg.threads = args.threads as usize;
    cfg.stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    cfg.pacing = match args.rate {
        Some(rate) => Pacing::Open { rate },
        None => Pacing::Closed,
    };
    cfg.keepalive = !args.no_keepalive;
    cfg.method = args.method.clone();
    cfg.headers = args.headers.clone();
    cfg.body = match (&args.body, &args.body_file) {
        (Some(b), _) => Some(b.clone().into_bytes().into()),
        (None, Some(f)) => Some(
            std::fs::read(f)
                .with_context(|| format!("reading --body-file {}", f.display()))
                .map_err(|e| usage(format!("{e:#}")))?
                .into(),
        ),
        (None, None) => None,
    };
    cfg.timeout = args.timeout;
    cfg.connect_timeout = args.connect_timeout;
    cfg.coalesce = args.coalesce;
    cfg.warmup = args.warmup;
    cfg.mix = match &args.mix {
        Some(p) => Some(Mix::from_file(p).map_err(bench_err)?),
        None => None,
    };
    cfg.server_pid = args.server_pid;
    cfg.strict_length = args.strict_length;
    cfg.drain = args.drain;
    cfg.seed = args.seed;
    cfg.tls = ordo_bench::TlsOptions {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
        resume: args.tls_resume,
    };
    if args.h2 && !args.url.tls {
        return Err(usage(
            "--h2 is HTTP/2 over TLS: give an https:// URL, or use --h2c for cleartext",
        ));
    }
    if args.h2c && args.url.tls {
        return Err(usage(
            "--h2c is cleartext HTTP/2: give an http:// URL, or use --h2 for https://",
        ));
    }
    if args.streams > 1 && !(args.h2 || args.h2c) {
        return Err(usage(
            "--streams needs HTTP/2: add --h2 (https://) or --h2c (http://)",
        ));
    }
    cfg.script = match &args.script {
        Some(p) => Some(ordo_bench::Script::load(p, args.script_args.clone()).map_err(bench_err)?),
        None if !args.script_args.is_empty() => {
            return Err(usage(
                "arguments after `--` are for a Lua script's init(args): add -s FILE",
            ));
        }
        None => None,
    };
    cfg.stages = if args.stages.is_empty() {
        cfg.mix
            .as_ref()
            .map(|m| m.stages.clone())
            .unwrap_or_default()
    } else {
        args.stages.clone()
    };
    if let Some(total) = cfg.stages_duration() {
        if args.requests.is_some() || args.duration.is_some() {
            return Err(usage(format!(
                "the mix file's [[stages]] set the run's length (their sum, {}s): leave out -n and -d",
                total.as_secs_f64()
            )));
        }
        cfg.stop = Stop::Duration(total);
        if cfg.pacing == Pacing::Closed {
            // the pool: as many connections as the highest target
            let max = cfg.stages.iter().map(|s| s.target).fold(0.0, f64::max);
            cfg.connections = (max.ceil() as usize).max(1);
        }
    }
    cfg.h2 = args.h2 || args.h2c;
    cfg.streams = args.streams as usize;
    cfg.validate().map_err(bench_err)?;
    Ok(cfg)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = resolve(&args)?;
    // the command line's thresholds, then the mix file's
    let thresholds: Vec<Threshold> = args
        .fail_if
        .iter()
        .chain(cfg.mix.iter().flat_map(|m| m.fail_if.iter()))
        .cloned()
        .collect();
    // Open --save before the run: a path that cannot be written is bad input, not a run thrown away.
    let mut save = match &args.save {
        Some(path) => Some(
            std::fs::File::create(path)
                .map_err(|e| usage(format!("--save {}: cannot write: {e}", path.display())))?,
        ),
        None => None,
    };
    let cancel = CancelToken::new();
    // Ctrl-C (or SIGTERM) ends the run; the report covers what completed and the exit code says it is partial.
    stop_on_signals(
        "ordo bench",
        "\nordo bench: stopping; reporting what completed (Ctrl-C again to quit at once)",
        {
            let cancel = cancel.clone();
            move || cancel.cancel()
        },
        || {},
    )?;
    let (report, done) = if args.no_progress {
        ordo_bench::run_scripted(cfg, cancel, |_| {})
    } else {
        let mut bar = ordo_bench::progress::ProgressBar::stderr_if_terminal();
        let r = ordo_bench::run_scripted(cfg, cancel, |p| bar.update(p));
        bar.finish();
        r
    }
    .map_err(bench_err)?;
    if let (Some(file), Some(path)) = (save.as_mut(), &args.save) {
        let mut s = serde_json::to_string_pretty(&report).context("serialising the report")?;
        s.push('\n');
        file.write_all(s.as_bytes())
            .and_then(|()| file.flush())
            .with_context(|| format!("writing --save {}", path.display()))?;
    }
    let out = if args.json {
        let mut s = serde_json::to_string_pretty(&report).context("serialising the report")?;
        s.push('\n');
        s
    } else if args.csv {
        ordo_bench::print::csv(&report)
    } else if args.brief {
        ordo_bench::print::brief(&report)
    } else {
        ordo_bench::print::text(&report)
    };
    // One line per threshold: after a text report on stdout; on stderr when stdout is JSON or CSV.
    let (lines, failed) = ordo_bench::judge(&thresholds, &report);
    let mut verdict = String::new();
    if !lines.is_empty() {
        if !(args.json || args.csv || args.brief) {
            verdict.push('\n');
        }
        for l in &lines {
            verdict.push_str(l);
            verdict.push('\n');
        }
    }
    let (out, err) = if args.json || args.csv {
        (out, verdict)
    } else {
        (out + &verdict, String::new())
    };
    if !err.is_empty() {
        eprint!("{err}");
    }
    // A closed pipe (`ordo bench ... | head`) is not an error worth a panic.
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush());
    drop(stdout);
    // a script's done() prints after the report, as wrk's does
    if let Some(d) = done {
        d.call(&report).map_err(bench_err)?;
    }
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing the report"))
        }
        _ if report.interrupted => Ok(ExitCode::from(INTERRUPTED)),
        _ if failed => Ok(ExitCode::from(THRESHOLDS_FAILED)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        crate::cmd::parse_args("bench", args)
    }

    #[test]
    fn resolves_defaults_and_flags() {
        let a = parse(&["http://127.0.0.1:1/x"]).unwrap();
        let c = resolve(&a).unwrap();
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(10)));
        assert!(c.keepalive);
        let a = parse(&[
            "-c",
            "5",
            "-n",
            "100",
            "--no-keepalive",
            "-r",
            "50",
            "-H",
            "X-A: 1",
            "http://127.0.0.1:1/",
        ])
        .unwrap();
        let c = resolve(&a).unwrap();
        assert_eq!(c.stop, Stop::Requests(100));
        assert_eq!(c.pacing, Pacing::Open { rate: 50.0 });
        assert!(!c.keepalive);
        assert_eq!(c.headers[0].name, "X-A");
    }

    #[test]
    fn refuses_bad_input() {
        assert!(parse(&["ftp://x/"]).is_err());
        assert!(parse(&["-H", "nocolon", "http://x/"]).is_err());
        assert!(parse(&["-d", "soon", "http://x/"]).is_err());
        // a negative rate is named as a bad rate, not taken for an unknown flag
        let e = parse(&["-r", "-3", "http://x/"]).unwrap_err().to_string();
        assert!(
            e.contains("expected a positive number of requests per second, got `-3`"),
            "{e}"
        );
        assert!(parse(&["-n", "5", "-d", "1s", "http://x/"]).is_err());
        assert!(parse(&["--brief", "--json", "http://x/"]).is_err());
        assert!(parse(&["--brief", "--csv", "http://x/"]).is_err());
        assert!(parse(&["--brief", "http://x/"]).unwrap().brief);
        let e = parse(&["--fail-if", "p99>50", "http://x/"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid threshold `p99>50`: a latency needs a unit"),
            "{e}"
        );
        let a = parse(&["--fail-if", "p99>50ms", "--fail-if", "rps<10", "http://x/"]).unwrap();
        assert_eq!(a.fail_if.len(), 2);
        // stages: the run's length and the pool
        let a = parse(&["--stage", "2s:5", "--stage", "1s:20", "http://127.0.0.1:1/"]).unwrap();
        let c = resolve(&a).unwrap();
        assert_eq!(c.stop, Stop::Duration(Duration::from_secs(3)));
        assert_eq!(c.connections, 20);
        assert_eq!(c.stages.len(), 2);
        let a = parse(&[
            "-c",
            "8",
            "-r",
            "10",
            "--stage",
            "2s:500",
            "http://127.0.0.1:1/",
        ])
        .unwrap();
        let c = resolve(&a).unwrap();
        assert_eq!(c.connections, 8);
        assert!(parse(&["--stage", "2s:5", "-d", "3s", "http://x/"]).is_err());
        let e = parse(&["--stage", "2s", "http://x/"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected DURATION:TARGET"), "{e}");
        let a = parse(&["--stage", "2s:2.5", "http://127.0.0.1:1/"]).unwrap();
        let e = resolve(&a).unwrap_err();
        assert_eq!(crate::exit::exit_code_for(&e), 2, "{e:#}");
        assert!(format!("{e:#}").contains("a whole number"), "{e:#}");
        // a Lua script: arguments after `--`, never with a mix or HTTP/2, and `--` needs a script
        let a = parse(&["-s", "x.lua", "http://x/", "--", "a", "-b"]).unwrap();
        assert_eq!(a.script_args, ["a", "-b"]);
        assert!(parse(&["-s", "x.lua", "--h2c", "http://x/"]).is_err());
        assert!(parse(&["-s", "x.lua", "--mix", "m.toml", "http://x/"]).is_err());
        let a = parse(&["http://127.0.0.1:1/", "--", "a"]).unwrap();
        let e = resolve(&a).unwrap_err();
        assert_eq!(crate::exit::exit_code_for(&e), 2, "{e:#}");
        assert!(format!("{e:#}").contains("add -s FILE"), "{e:#}");
        let a = parse(&["-s", "/nonexistent/x.lua", "http://127.0.0.1:1/"]).unwrap();
        let e = resolve(&a).unwrap_err();
        assert_eq!(crate::exit::exit_code_for(&e), 2, "{e:#}");
        assert!(
            format!("{e:#}").contains("script /nonexistent/x.lua: cannot read"),
            "{e:#}"
        );
        let a = parse(&["-m", "G T", "http://127.0.0.1:1/"]).unwrap();
        let e = resolve(&a).unwrap_err();
        assert_eq!(crate::exit::exit_code_for(&e), 2, "{e:#}");
    }
}
