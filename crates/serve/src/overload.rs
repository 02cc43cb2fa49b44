//! Overload control in the serve configuration: `workers = "auto"` (a concurrency limit per route that
//! adapts to the backend's latency), the `[limiter]` table and its per-route overrides, workers reserved to
//! a class, and a class's CoDel detector with adaptive LIFO — the tables parsed and checked here, with
//! errors naming the key; compile/overload.rs resolves them into the gate's plan and ordo-sched's types.
//! docs/overload.md is the guide.

use std::fmt;
use std::time::Duration;

use ordo_sched::limit::{Algorithm, LimiterConfig};
use serde::Deserialize;

/// `workers = 64` (one pool of that many shared by every route) or `workers = "auto"` (each route, or
/// group of routes, gets its own concurrency limit that follows its backend's latency); left out, one pool
/// of `DEFAULT_WORKERS_PER_THREAD` per serving thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    Fixed(usize),
    Auto,
    /// The default (no file or flag writes it): one pool of this many per serving thread, so the pool
    /// grows with the threads that fill it. A fixed 64 on 4 threads with 64 connections each kept three
    /// requests in four waiting in the gate and woke another thread for each (docs/serve.md, "Many cores").
    PerThread(usize),
}

/// The default `workers`, per serving thread (the seed's MaxClients-sized pool on one thread).
pub const DEFAULT_WORKERS_PER_THREAD: usize = 64;

impl Workers {
    /// The pool's size on `threads` serving threads (None: `auto`, limits per route).
    pub fn fixed(self, threads: usize) -> Option<usize> {
        match self {
            Workers::Fixed(n) => Some(n),
            Workers::PerThread(n) => Some(n.saturating_mul(threads.max(1))),
            Workers::Auto => None,
        }
    }
}

impl Default for Workers {
    fn default() -> Self {
        Workers::PerThread(DEFAULT_WORKERS_PER_THREAD)
    }
}

impl From<usize> for Workers {
    fn from(n: usize) -> Self {
        Workers::Fixed(n)
    }
}

impl PartialEq<usize> for Workers {
    fn eq(&self, n: &usize) -> bool {
        *self == Workers::Fixed(*n)
    }
}

impl fmt::Display for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workers::Fixed(n) => write!(f, "{n}"),
            Workers::Auto => f.write_str("auto"),
            Workers::PerThread(n) => write!(f, "{n} per serving thread"),
        }
    }
}

impl std::str::FromStr for Workers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Workers::Auto);
        }
        match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Workers::Fixed(n)),
            _ => Err(format!("expected a number ≥ 1 or `auto`, got `{s}`")),
        }
    }
}

impl<'de> Deserialize<'de> for Workers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Workers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of workers or \"auto\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Workers, E> {
                usize::try_from(v)
                    .map(Workers::Fixed)
                    .map_err(|_| E::custom(format!("must be ≥ 1 or \"auto\", got {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Workers, E> {
                usize::try_from(v)
                    .map(Workers::Fixed)
                    .map_err(|_| E::custom(format!("too large: {v}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Workers, E> {
                if v == "auto" {
                    Ok(Workers::Auto)
                } else {
                    Err(E::custom(format!(
                        "expected a number or \"auto\", got \"{v}\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The limiter's algorithm as written in the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlgorithmName {
    Gradient,
    Aimd,
    Fixed,
}

impl From<AlgorithmName> for Algorithm {
    fn from(a: AlgorithmName) -> Algorithm {
        match a {
            AlgorithmName::Gradient => Algorithm::Gradient,
            AlgorithmName::Aimd => Algorithm::Aimd,
            AlgorithmName::Fixed => Algorithm::Fixed,
        }
    }
}

/// `[limiter]` (defaults for every route when `workers = "auto"`) and `[routes.limiter]` (one route's
/// overrides). Every key is optional; see docs/overload.md for the meaning and the defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimiterTable {
    pub algorithm: Option<AlgorithmName>,
    pub min: Option<usize>,
    pub max: Option<usize>,
    pub initial: Option<usize>,
    /// A constant limit: `algorithm = "fixed"` with min = max = initial = limit.
    pub limit: Option<usize>,
    pub tolerance: Option<f64>,
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub window: Option<Duration>,
    pub min_samples: Option<u32>,
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub probe_interval: Option<Duration>,
    pub smoothing: Option<f64>,
    pub increase: Option<f64>,
    pub backoff: Option<f64>,
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub latency_target: Option<Duration>,
    /// Routes with the same group share one limit and one queue (route tables only).
    pub group: Option<String>,
}

pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl LimiterTable {
    /// Whether this table sets `field` (so an error there is this table's).
    pub(crate) fn sets(&self, field: &str) -> bool {
        match field {
            "algorithm" => self.algorithm.is_some() || self.limit.is_some(),
            "min" => self.min.is_some() || self.limit.is_some(),
            "max" => self.max.is_some() || self.limit.is_some(),
            "initial" => self.initial.is_some() || self.limit.is_some(),
            "tolerance" => self.tolerance.is_some(),
            "window" => self.window.is_some(),
            "min_samples" => self.min_samples.is_some(),
            "probe_interval" => self.probe_interval.is_some(),
            "smoothing" => self.smoothing.is_some(),
            "increase" => self.increase.is_some(),
            "backoff" => self.backoff.is_some(),
            "latency_target" => self.latency_target.is_some(),
            _ => false,
        }
    }

    /// Only `group` is set.
    pub(crate) fn only_group(&self) -> bool {
        LimiterTable {
            group: None,
            ..self.clone()
        } == LimiterTable::default()
    }

    pub(crate) fn apply(&self, c: &mut LimiterConfig) -> Result<(), (&'static str, String)> {
        if let Some(a) = self.algorithm {
            c.algorithm = a.into();
        }
        if let Some(v) = self.min {
            c.min = v;
        }
        if let Some(v) = self.max {
            c.max = v;
        }
        if let Some(v) = self.initial {
            c.initial = v;
        }
        if let Some(l) = self.limit {
            if self.algorithm.is_some_and(|a| a != AlgorithmName::Fixed) {
                return Err((
                    "limit",
                    "a constant `limit` goes with algorithm = \"fixed\" (or no algorithm)".into(),
                ));
            }
            if self.min.is_some() || self.max.is_some() || self.initial.is_some() {
                return Err((
                    "limit",
                    "a constant `limit` replaces min, max and initial: leave them out".into(),
                ));
            }
            c.algorithm = Algorithm::Fixed;
            c.min = l;
            c.max = l;
            c.initial = l;
        }
        if let Some(v) = self.tolerance {
            c.tolerance = v;
        }
        if let Some(v) = self.window {
            c.window = nanos(v);
        }
        if let Some(v) = self.min_samples {
            c.min_samples = v;
        }
        if let Some(v) = self.probe_interval {
            c.probe_interval = nanos(v);
        }
        if let Some(v) = self.smoothing {
            c.smoothing = v;
        }
        if let Some(v) = self.increase {
            c.increase = v;
        }
        if let Some(v) = self.backoff {
            c.backoff = v;
        }
        if let Some(v) = self.latency_target {
            c.latency_target = Some(nanos(v));
        }
        Ok(())
    }
}

/// `codel = { target = "20ms", interval = "100ms", drop = true }` on a class.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CodelTable {
    /// Acceptable standing queue delay of the class.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub target: Duration,
    /// How long above target counts as standing; the drop spacing's base. Default 100 ms.
    #[serde(
        default = "default_interval",
        deserialize_with = "crate::http::duration::deserialize"
    )]
    pub interval: Duration,
    /// Answer the oldest request 503 (`standing_queue`) at CoDel's pace while standing. Default true.
    #[serde(default = "yes")]
    pub drop: bool,
}

fn default_interval() -> Duration {
    Duration::from_millis(100)
}

fn yes() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;

    #[test]
    fn workers_parse_as_number_or_auto() {
        assert_eq!("auto".parse::<Workers>(), Ok(Workers::Auto));
        assert_eq!("12".parse::<Workers>(), Ok(Workers::Fixed(12)));
        assert!("0".parse::<Workers>().is_err());
        assert!("many".parse::<Workers>().is_err());
        let e = toml::from_str::<ServeConfig>("workers = \"lots\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a number or \"auto\""), "{e}");
        let e = toml::from_str::<ServeConfig>("workers = -3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be ≥ 1"), "{e}");
    }
}
