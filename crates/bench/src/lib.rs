//! ordo-bench: the load generator behind `ordo bench`, `ordo demo` and `ordo tune`.
//!
//! One engine, parameterised: a closed loop (each connection sends its next request when the previous
//! response is in, like ab and wrk) or an open loop (a fixed total rate; latency is also measured from the
//! time each request was *due*, which corrects coordinated omission as wrk2 does), stopping after an exact
//! request count or a duration, with or without keep-alive, optionally driving a class mix. Workers record
//! into per-thread HdrHistograms (constant memory); the coordinator merges them into one [`BenchReport`];
//! the printers in [`print`](mod@print) only read that report.
//!
//! This file is the facade: the public names and [`run`]. Each concept has its module: the options
//! (`config`), the error (`error`), the coordinator (`run`: preflight, plan, workers, watch, report), the
//! workers' loop (`engine`), the protocols (`http` for HTTP/1.1, `h2` for the I/O around the sans-IO
//! HTTP/2 client of ordo-h2client, `script` for wrk's Lua), TLS (`tls`), mixes, stages, statistics and
//! the report.
//!
//! In-process use (demo, tune):
//! ```no_run
//! use std::time::Duration;
//! use ordo_bench::{BenchConfig, CancelToken, Pacing, Stop};
//!
//! let mut cfg = BenchConfig::new("http://127.0.0.1:8080/bytes?n=1024")?;
//! cfg.connections = 50;
//! cfg.stop = Stop::Duration(Duration::from_secs(5));
//! cfg.pacing = Pacing::Closed; // or Pacing::Open { rate: 2000.0 }
//! cfg.warmup = Duration::from_secs(1);
//! // cfg.mix = Some(ordo_bench::Mix::from_file("examples/bench/seed003-mix.toml".as_ref())?);
//! let report = ordo_bench::run(cfg, CancelToken::new())?; // blocking: spawns its own threads
//! println!("{} req/s, p99 {:?} ms", report.summary.rps, report.summary.latency.at(99.0));
//! for class in &report.classes {
//!     println!("{}: mean {} ms", class.name, class.latency.mean_ms);
//! }
//! # Ok::<(), ordo_bench::BenchError>(())
//! ```
//! `run` blocks the calling thread (from async code call it inside `spawn_blocking`); it creates one
//! OS thread per worker, each with its own single-threaded tokio runtime.

mod config;
mod engine;
mod error;
#[cfg(test)]
mod fuzz;
mod h2;
mod http;
mod lua_source;
mod merge;
mod mix;
pub mod print;
pub mod progress;
mod report;
mod run;
mod script;
mod stage;
mod stats;
mod target;
mod threshold;
mod tls;

pub use config::{BenchConfig, Pacing, Stop, TlsOptions, parse_duration};
pub use error::BenchError;
pub use merge::{MergeError, differences, merge};
pub use mix::{Assign, Mix, MixClass, UrlOrder};
/// Ends a run early from another thread (Ctrl-C, a caller's deadline): the workspace's one cancel token.
pub use ordo_sys::CancelToken;
pub use progress::Progress;
pub use report::{BenchReport, ClassReport, Latency, RunSummary, ServerReport};
pub use run::{run_observed, run_scripted};
pub use script::{Script, ScriptDone};
pub use stage::Stage;
pub use target::{Header, Target};
pub use threshold::{Metric, Op, Threshold, ThresholdError, Unit, Verdict, judge};

/// Run a benchmark to the end (or until `cancel`), blocking the calling thread.
pub fn run(config: BenchConfig, cancel: CancelToken) -> Result<BenchReport, BenchError> {
    run_observed(config, cancel, |_| {})
}
