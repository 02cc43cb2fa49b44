//! The checked run configuration: what the engine needs, built in Rust (demo, tune) or from the command line
//! (the URL and header parsers it uses are in `target`).

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

use crate::error::BenchError;
use crate::mix::Mix;
use crate::target::{Header, Target, is_token_byte};

/// Durations in flags and mix files: `250ms`, `2s`, `1.5m`, `500us`, or a bare number of seconds.
pub use ordo_sys::units::parse_duration_or_secs as parse_duration;

/// When the run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Exactly this many measured requests (completed or failed).
    Requests(u64),
    /// Measure for this long (requests in flight at the end are abandoned, as wrk does).
    Duration(Duration),
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Each connection sends its next request as soon as the previous response is in (ab, wrk).
    Closed,
    /// `rate` requests per second in total, spread evenly over the connections; latency is also measured
    /// from the time each request was due (coordinated omission corrected, wrk2).
    Open { rate: f64 },
}

/// `--coalesce` left out: a busy client thread spins this long before it parks (docs/bench.md, "Wakeup
/// coalescing").
pub const DEFAULT_COALESCE: Duration = Duration::from_micros(20);

/// Everything one run needs. Build it with [`BenchConfig::new`] and adjust the public fields, or resolve it
/// from the command line; [`crate::run`] validates it first.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub target: Target,
    /// Concurrent connections (closed loop: concurrent clients).
    pub connections: usize,
    /// Worker threads (each runs a single-threaded runtime with its share of the connections).
    pub threads: usize,
    pub stop: Stop,
    pub pacing: Pacing,
    /// Reuse connections (HTTP/1.1 keep-alive); false opens a new connection per request (ab's default).
    pub keepalive: bool,
    pub method: String,
    /// Extra headers sent with every request (a mix class adds its own).
    pub headers: Vec<Header>,
    pub body: Option<Bytes>,
    /// Per-request limit (connect + send + receive); a request over it counts as an exception.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Wakeup coalescing of the client threads (`--coalesce`, `ordo_sys::coalesce`): a busy client thread
    /// spins this long before it parks, so the server's answers meanwhile are read without waking it — a
    /// wakeup the server pays on a shared machine. Zero: off.
    pub coalesce: Duration,
    /// Run this long first and leave it out of every statistic.
    pub warmup: Duration,
    /// Class mix; `None` means one class named `default` requesting the target.
    pub mix: Option<Mix>,
    /// Count a response whose body length differs from the first one for the same URL as a `length`
    /// failure (ab's rule). Off by default because dynamic responses vary.
    pub strict_length: bool,
    /// Sample this process's threads (CPU, context switches, run-queue wait) during the measured part.
    pub server_pid: Option<i32>,
    /// Seed for random URL choice.
    pub seed: u64,
    /// With a duration: let the requests in flight when it ends finish (within `timeout`) and count them,
    /// so the sample is every request *started* in the measured window; a closed loop keeps its load on,
    /// unmeasured, until they are in, so they finish under the load they started in. Without it they are
    /// abandoned, as wrk does, which leaves out the longest requests and biases means low by about R/T
    /// (`ordo demo`).
    pub drain: bool,
    /// https: verification of the server's certificate, trust roots and session resumption.
    pub tls: TlsOptions,
    /// Speak HTTP/2: over TLS by ALPN for an `https://` target (`--h2`), with prior knowledge (h2c) for an
    /// `http://` one (`--h2c`).
    pub h2: bool,
    /// HTTP/2: concurrent streams per connection, each a client of the loop (h2load's `-m`).
    pub streams: usize,
    /// A wrk-compatible Lua script (`-s`): its hooks build the requests and see the responses.
    pub script: Option<crate::lua_source::Script>,
    /// A ramp (k6's stages): each stage moves the concurrency (closed loop, from 0) or the rate (open loop,
    /// from `rate`) linearly to its target. The run lasts their sum (`stop` must be that duration), a closed
    /// loop needs `connections` ≥ the highest target, and there is no warm-up.
    pub stages: Vec<crate::stage::Stage>,
}

/// How an `https://` target is connected to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Accept any server certificate (curl's `-k`): for test servers with self-signed certificates.
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file instead of the system's.
    pub cacert: Option<PathBuf>,
    /// Resume TLS sessions on new connections (as browsers do); off, every connection makes a full
    /// handshake (as ab and wrk do), which is what a handshake rate measures.
    pub resume: bool,
}

impl BenchConfig {
    /// A closed-loop keep-alive GET of `url` with 1 thread, 10 connections for 10 s.
    pub fn new(url: &str) -> Result<BenchConfig, BenchError> {
        Ok(BenchConfig {
            target: Target::parse(url)?,
            connections: 10,
            threads: 1,
            stop: Stop::Duration(Duration::from_secs(10)),
            pacing: Pacing::Closed,
            keepalive: true,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            coalesce: DEFAULT_COALESCE,
            warmup: Duration::ZERO,
            mix: None,
            strict_length: false,
            server_pid: None,
            seed: 0x5eed,
            drain: false,
            tls: TlsOptions::default(),
            h2: false,
            streams: 1,
            script: None,
            stages: Vec::new(),
        })
    }

    /// Check the combination; every error names the offending setting.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |field: &str, msg: String| BenchError::InvalidConfig {
            field: field.to_string(),
            message: msg,
        };
        if self.connections == 0 {
            return Err(bad("connections", "must be at least 1".into()));
        }
        if self.connections > 100_000 {
            return Err(bad("connections", "at most 100000".into()));
        }
        if self.threads == 0 {
            return Err(bad("threads", "must be at least 1".into()));
        }
        match self.stop {
            Stop::Requests(0) => return Err(bad("requests", "must be at least 1".into())),
            Stop::Duration(d) if d.is_zero() => {
                return Err(bad("duration", "must be longer than 0".into()));
            }
            _ => {}
        }
        if let Pacing::Open { rate } = self.pacing {
            if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
                return Err(bad("rate", format!("must be > 0 and <= 1e7 (got {rate})")));
            }
        }
        if self.method.is_empty() || !self.method.bytes().all(is_token_byte) {
            return Err(bad(
                "method",
                format!("`{}` is not a valid HTTP method", self.method),
            ));
        }
        if self.timeout.is_zero() {
            return Err(bad("timeout", "must be longer than 0".into()));
        }
        if self.connect_timeout.is_zero() {
            return Err(bad("connect-timeout", "must be longer than 0".into()));
        }
        if self.coalesce > ordo_sys::coalesce::MAX_WAIT {
            return Err(bad(
                "coalesce",
                format!(
                    "must be at most 100us (a longer spin costs the client more than the wakeup it saves), got {:?}",
                    self.coalesce
                ),
            ));
        }
        if let Some(mix) = &self.mix {
            mix.validate_against(&self.target)?;
        }
        if self.streams == 0 || self.streams > 10_000 {
            return Err(bad(
                "streams",
                format!("must be 1 – 10000 (got {})", self.streams),
            ));
        }
        if self.streams > 1 && !self.h2 {
            return Err(bad(
                "streams",
                "several streams per connection need HTTP/2 (--h2 or --h2c)".into(),
            ));
        }
        self.validate_stages()?;
        if self.script.is_some() && self.h2 {
            return Err(bad(
                "script",
                "Lua scripts drive HTTP/1.1 (as wrk); drop --h2/--h2c".into(),
            ));
        }
        if self.script.is_some() && self.mix.is_some() {
            return Err(bad(
                "script",
                "a Lua script builds its own requests; it cannot be combined with a mix file"
                    .into(),
            ));
        }
        if self.h2 && !self.keepalive {
            return Err(bad(
                "keepalive",
                "HTTP/2 always reuses its connections; --no-keepalive is for HTTP/1.1".into(),
            ));
        }
        if self.connections.saturating_mul(self.streams) > 1_000_000 {
            return Err(bad(
                "streams",
                "connections × streams must be at most 1000000".into(),
            ));
        }
        Ok(())
    }

    /// The threads actually used (never more than connections).
    /// The stages' total length, when there are stages.
    pub fn stages_duration(&self) -> Option<Duration> {
        // saturating: an absurd total is refused as too long when the run is planned, not a panic here
        (!self.stages.is_empty()).then(|| {
            self.stages
                .iter()
                .fold(Duration::ZERO, |a, s| a.saturating_add(s.duration))
        })
    }

    fn validate_stages(&self) -> Result<(), BenchError> {
        let Some(total) = self.stages_duration() else {
            return Ok(());
        };
        let bad = |field: String, msg: String| BenchError::InvalidConfig {
            field,
            message: msg,
        };
        let open = matches!(self.pacing, Pacing::Open { .. });
        for (i, s) in self.stages.iter().enumerate() {
            let field = format!("stage {} ({}:{})", i + 1, fmt_secs(s.duration), s.target);
            if s.duration.is_zero() {
                return Err(bad(field, "a stage must last longer than 0".into()));
            }
            if !(s.target.is_finite() && s.target >= 0.0) {
                return Err(bad(field, "the target must be a number ≥ 0".into()));
            }
            if open && s.target > 10_000_000.0 {
                return Err(bad(
                    field,
                    "an open loop's target is a rate: at most 1e7 req/s".into(),
                ));
            }
            if !open && s.target.fract() != 0.0 {
                return Err(bad(
                    field,
                    "a closed loop's target is a number of connections: a whole number (with --rate it is a rate)"
                        .into(),
                ));
            }
            if !open && s.target > self.connections as f64 {
                return Err(bad(
                    field,
                    format!(
                        "{} connections exceed the {} the run opens (--connections)",
                        s.target, self.connections
                    ),
                ));
            }
        }
        if self.stop != Stop::Duration(total) {
            return Err(bad(
                "stages".into(),
                format!(
                    "the run lasts the stages' sum ({}); leave out -n and -d",
                    fmt_secs(total)
                ),
            ));
        }
        if !self.warmup.is_zero() {
            return Err(bad(
                "stages".into(),
                "a ramp has no warm-up: make the first stage the warm-up".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn effective_threads(&self) -> usize {
        self.threads.min(self.connections).max(1)
    }
}

fn fmt_secs(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2 weeks").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn validates() {
        let mut c = BenchConfig::new("http://127.0.0.1:1/").unwrap();
        c.validate().unwrap();
        c.connections = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("connections")
        );
        c.connections = 1;
        c.pacing = Pacing::Open { rate: 0.0 };
        assert!(c.validate().unwrap_err().to_string().contains("rate"));
        c.pacing = Pacing::Closed;
        c.method = "G T".into();
        assert!(c.validate().unwrap_err().to_string().contains("method"));
        c.method = "GET".into();
        // wakeup coalescing: 0 (off) to 100 µs
        for ok in [
            Duration::ZERO,
            DEFAULT_COALESCE,
            ordo_sys::coalesce::MAX_WAIT,
        ] {
            c.coalesce = ok;
            c.validate().unwrap();
        }
        c.coalesce = Duration::from_millis(1);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("coalesce") && e.contains("1ms"), "{e}");
    }
}
