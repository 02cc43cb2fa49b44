//! Overload control in the serve configuration: `workers = "auto"` (a concurrency limit per route that
//! adapts to the backend's latency), the `[limiter]` table and its per-route overrides, workers reserved to
//! a class, and a class's CoDel detector with adaptive LIFO — parsed here, checked with errors naming the
//! key, and resolved into the gate's [`PoolPlan`] and ordo-sched's types. docs/overload.md is the guide.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ordo_sched::CodelSpec;
use ordo_sched::limit::{Algorithm, LimiterConfig};
use serde::Deserialize;

use crate::config::{ClassConfig, Invalid, ServeConfig};
use crate::gate::{LaneLimit, LanePlan, PoolPlan};
use crate::keypath;

/// `workers = 64` (one pool of that many shared by every route) or `workers = "auto"` (each route, or
/// group of routes, gets its own concurrency limit that follows its backend's latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    Fixed(usize),
    Auto,
}

impl Workers {
    /// The fixed number, if any.
    pub fn fixed(self) -> Option<usize> {
        match self {
            Workers::Fixed(n) => Some(n),
            Workers::Auto => None,
        }
    }
}

impl Default for Workers {
    fn default() -> Self {
        Workers::Fixed(64)
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

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl LimiterTable {
    /// Whether this table sets `field` (so an error there is this table's).
    fn sets(&self, field: &str) -> bool {
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
    fn only_group(&self) -> bool {
        LimiterTable {
            group: None,
            ..self.clone()
        } == LimiterTable::default()
    }

    fn apply(&self, c: &mut LimiterConfig) -> Result<(), (&'static str, String)> {
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

/// The ordo-sched overload spec of a class (None without `codel`).
pub(crate) fn codel_spec(c: &ClassConfig) -> Option<CodelSpec> {
    let t = c.codel.as_ref()?;
    Some(CodelSpec {
        target: nanos(t.target),
        interval: nanos(t.interval),
        drop: t.drop,
        lifo: c.lifo,
    })
}

/// The lane a route's requests queue in: its `limiter.group`, else its prefix (auto); the one shared pool
/// ("*") with a fixed number of workers.
pub(crate) fn lane_key(cfg: &ServeConfig, route: &crate::config::RouteConfig) -> Arc<str> {
    if cfg.workers == Workers::Auto {
        let group = route.limiter.as_ref().and_then(|l| l.group.as_deref());
        Arc::from(group.unwrap_or(route.prefix.as_str()))
    } else {
        Arc::from(SHARED_LANE)
    }
}

/// The key of the one pool when `workers` is a number.
pub const SHARED_LANE: &str = "*";

/// Check the overload keys and build the gate's plan (lanes in route order, workers reserved per class).
pub(crate) fn plan(cfg: &ServeConfig) -> Result<PoolPlan, Invalid> {
    let classes = cfg.effective_classes();
    let reserved: Vec<usize> = classes.iter().map(|c| c.reserved_workers).collect();
    for (i, c) in cfg.classes.iter().enumerate() {
        if let Some(t) = &c.codel {
            if t.target.is_zero() {
                return Err(Invalid::new(
                    keypath!["classes", i, "codel", "target"],
                    "must be > 0",
                ));
            }
            if t.interval.is_zero() {
                return Err(Invalid::new(
                    keypath!["classes", i, "codel", "interval"],
                    "must be > 0",
                ));
            }
        } else if c.lifo {
            return Err(Invalid::new(
                keypath!["classes", i, "lifo"],
                "adaptive LIFO needs the class's standing-queue detector: add \
                 `codel = { target = \"...\" }` (with `drop = false` to only switch to LIFO)",
            ));
        }
    }
    let total_reserved: usize = reserved.iter().sum();
    let last_reserving = cfg.classes.iter().rposition(|c| c.reserved_workers > 0);
    let reserved_err = |limit: usize, what: String| {
        Invalid::new(
            keypath!["classes", last_reserving.unwrap_or(0), "reserved_workers"],
            format!(
                "classes reserve {total_reserved} workers in all, which leaves none of the {limit} \
                 {what} for the other classes; reserve fewer"
            ),
        )
    };
    match cfg.workers {
        Workers::Fixed(n) => {
            if let Some(i) = cfg.routes.iter().position(|r| r.limiter.is_some()) {
                return Err(Invalid::new(
                    keypath!["routes", i, "limiter"],
                    format!(
                        "per-route limits need workers = \"auto\" (workers is {n}: one pool shared by \
                         every route)"
                    ),
                ));
            }
            if cfg.limiter.is_some() {
                return Err(Invalid::new(
                    keypath!["limiter"],
                    format!("`[limiter]` needs workers = \"auto\" (workers is {n})"),
                ));
            }
            if total_reserved > 0 && total_reserved >= n {
                return Err(reserved_err(n, "workers".into()));
            }
            Ok(PoolPlan {
                lanes: vec![LanePlan {
                    key: Arc::from(SHARED_LANE),
                    limit: LaneLimit::Fixed(n),
                }],
                reserved,
            })
        }
        Workers::Auto => {
            let global = cfg.limiter.clone().unwrap_or_default();
            if global.group.is_some() {
                return Err(Invalid::new(
                    keypath!["limiter", "group"],
                    "`group` belongs in a route's limiter (`[routes.limiter] group = \"...\"`)",
                ));
            }
            let mut base = LimiterConfig::default();
            global
                .apply(&mut base)
                .map_err(|(f, m)| Invalid::new(keypath!["limiter", f], m))?;
            let mut lanes: Vec<LanePlan> = Vec::new();
            let mut first_of_group: Vec<(Arc<str>, usize)> = Vec::new();
            for (i, r) in cfg.effective_routes().iter().enumerate() {
                let key = lane_key(cfg, r);
                let table = r.limiter.clone().unwrap_or_default();
                if let Some((_, j)) = first_of_group.iter().find(|(k, _)| *k == key) {
                    if !table.only_group() {
                        return Err(Invalid::new(
                            keypath!["routes", i, "limiter"],
                            format!(
                                "group `{key}` is configured by routes[{j}].limiter; the other routes \
                                 of a group give only `group`"
                            ),
                        ));
                    }
                    continue;
                }
                first_of_group.push((key.clone(), i));
                let mut c = base.clone();
                let route_key = |f: &str| keypath!["routes", i, "limiter", f];
                table
                    .apply(&mut c)
                    .map_err(|(f, m)| Invalid::new(route_key(f), m))?;
                if let Err(e) = c.validate() {
                    let path = if table.sets(e.field) {
                        route_key(e.field)
                    } else {
                        keypath!["limiter", e.field]
                    };
                    return Err(Invalid::new(path, e.reason));
                }
                if total_reserved > 0 && total_reserved >= c.min {
                    return Err(reserved_err(
                        c.min,
                        format!("(`min` of route `{}`'s limit)", r.prefix),
                    ));
                }
                lanes.push(LanePlan {
                    key,
                    limit: LaneLimit::Adaptive(c),
                });
            }
            Ok(PoolPlan { lanes, reserved })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<PoolPlan, String> {
        let cfg: ServeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        plan(&cfg).map_err(|e| format!("{}: {}", crate::config::path_to_string(&e.path), e.message))
    }

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

    #[test]
    fn fixed_workers_make_one_shared_lane() {
        let p = check("workers = 8\n[[routes]]\nprefix = \"/a\"\nsynthetic = {}\n").unwrap();
        assert_eq!(p.lanes.len(), 1);
        assert_eq!(&*p.lanes[0].key, SHARED_LANE);
        assert_eq!(p.lanes[0].limit, LaneLimit::Fixed(8));
    }

    #[test]
    fn auto_makes_a_lane_per_route_or_group_with_merged_settings() {
        let p = check(
            r#"
workers = "auto"
[limiter]
algorithm = "aimd"
max = 300
[[routes]]
prefix = "/a"
synthetic = {}
limiter = { group = "app", min = 4 }
[[routes]]
prefix = "/b"
synthetic = {}
limiter = { group = "app" }
[[routes]]
prefix = "/static"
synthetic = {}
limiter = { limit = 8 }
"#,
        )
        .unwrap();
        let keys: Vec<&str> = p.lanes.iter().map(|l| &*l.key).collect();
        assert_eq!(keys, vec!["app", "/static"]);
        let LaneLimit::Adaptive(a) = &p.lanes[0].limit else {
            panic!()
        };
        assert_eq!((a.algorithm, a.min, a.max), (Algorithm::Aimd, 4, 300));
        let LaneLimit::Adaptive(s) = &p.lanes[1].limit else {
            panic!()
        };
        assert_eq!((s.algorithm, s.min, s.max), (Algorithm::Fixed, 8, 8));
    }

    #[test]
    fn errors_name_the_key_that_caused_them() {
        let e = check("workers = \"auto\"\n[limiter]\nmin = 50\n").unwrap_err();
        assert!(
            e.starts_with("limiter.initial: must be between min (50)"),
            "{e}"
        );
        let e = check(
            "workers = \"auto\"\n[[routes]]\nprefix = \"/\"\nsynthetic = {}\nlimiter = { backoff = 2.0 }\n",
        )
        .unwrap_err();
        assert!(e.starts_with("routes[0].limiter.backoff:"), "{e}");
        let e = check("workers = 4\n[limiter]\nmin = 2\n").unwrap_err();
        assert!(
            e.starts_with("limiter: `[limiter]` needs workers = \"auto\""),
            "{e}"
        );
        let e = check(
            "workers = 4\n[[classes]]\nname = \"a\"\nreserved_workers = 2\n[[classes]]\nname = \"b\"\nreserved_workers = 2\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("classes[1].reserved_workers: classes reserve 4"),
            "{e}"
        );
        let e = check("[[classes]]\nname = \"a\"\nlifo = true\n").unwrap_err();
        assert!(e.starts_with("classes[0].lifo: adaptive LIFO needs"), "{e}");
        let e = check("[[classes]]\nname = \"a\"\ncodel = { target = \"0ms\" }\n").unwrap_err();
        assert!(e.starts_with("classes[0].codel.target: must be > 0"), "{e}");
        let e = check(
            "workers = \"auto\"\n[[routes]]\nprefix = \"/a\"\nsynthetic = {}\nlimiter = { group = \"g\" }\n[[routes]]\nprefix = \"/b\"\nsynthetic = {}\nlimiter = { group = \"g\", max = 5 }\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("routes[1].limiter: group `g` is configured by routes[0]"),
            "{e}"
        );
    }
}
