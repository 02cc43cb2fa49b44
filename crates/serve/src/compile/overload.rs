//! The overload part of compiling a configuration: each class's CoDel spec for ordo-sched, and the gate's
//! [`PoolPlan`] — the lanes of workers (one shared pool, or a limit per route or group with
//! `workers = "auto"`) and the workers reserved per class — checked with errors naming the key.

use std::sync::Arc;

use ordo_sched::CodelSpec;
use ordo_sched::limit::LimiterConfig;

use crate::config::{ClassConfig, Invalid, RouteConfig, ServeConfig};
use crate::gate::{LaneLimit, LanePlan, PoolPlan, SHARED_LANE};
use crate::keypath;
use crate::overload::{Workers, nanos};

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
pub(crate) fn lane_key(cfg: &ServeConfig, route: &RouteConfig) -> Arc<str> {
    if cfg.workers == Workers::Auto {
        let group = route.limiter.as_ref().and_then(|l| l.group.as_deref());
        match group {
            Some(g) => Arc::from(g),
            None => Arc::from(route.key()),
        }
    } else {
        Arc::from(SHARED_LANE)
    }
}

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
    match cfg.workers_limit() {
        Some(n) => {
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
        None => {
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
    use ordo_sched::limit::Algorithm;

    fn check(text: &str) -> Result<PoolPlan, String> {
        let cfg: ServeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        plan(&cfg).map_err(|e| format!("{}: {}", crate::config::path_to_string(&e.path), e.message))
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
