//! What a configuration compiles into: the scheduler's configuration, the lanes of workers, the
//! classifier, the routes with their backends, the admin guard and the TLS setup — built the same way at
//! start-up, on reload and by `ordo serve --check`, so a check refuses exactly what start-up would.

mod overload;

use std::sync::Arc;
use std::time::Duration;

use ordo_sched::{ClassSpec, HeadPicker, Nanos, PolicyKind, SchedConfig, Scheduler};
use ordo_sys::Policy;
use ordo_sys::thread::WorkPriority;

use crate::admin_guard::AdminGuard;
use crate::backend::{Backend, ClassInfo, TOP_RANK};
use crate::classify::{Classifier, Route, Router};
use crate::config::{ConfigError, HeadersConfig, Invalid, ServeConfig};
use crate::keypath;
use crate::lua::LuaPicker;
use crate::metrics::Metrics;

pub(crate) fn nanos(d: Duration) -> Nanos {
    d.as_nanos().min(u64::MAX as u128) as Nanos
}

/// Everything a configuration compiles into.
pub(crate) struct Compiled {
    pub(crate) active: Active,
    pub(crate) sched: SchedConfig,
    /// With `policy = "lua"`: one picker per lane of `plan`.
    pub(crate) pickers: Vec<Box<dyn HeadPicker>>,
    /// The lanes of workers and the reservations (crate::overload).
    pub(crate) plan: crate::gate::PoolPlan,
    /// The TLS server configuration (certificates loaded and checked), when `[tls]` is present.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

/// The part of the configuration the request path reads (swapped whole on reload).
pub(crate) struct Active {
    pub(crate) classifier: Classifier,
    pub(crate) router: Router,
    pub(crate) headers: HeadersConfig,
    pub(crate) retry_after_secs: u64,
    /// Whether the policy looks at size hints (srpt, wfq, lua); the others skip computing them.
    pub(crate) needs_size: bool,
    /// The gate lane of each route (by `RouteConfig::key`) (all the same with a fixed number of workers).
    pub(crate) lanes: Vec<(String, Arc<str>)>,
    /// Who may use the admin endpoints (`[admin]` token and allowed host names).
    pub(crate) admin: AdminGuard,
    /// `[forwarded]`: trusted proxies and request ids.
    pub(crate) forwarding: crate::forwarded::Forwarding,
    /// The kernel priority of each class that has one (`nice`, `thread_policy`); the others run at the
    /// thread's own.
    pub(crate) priorities: Vec<(Arc<str>, WorkPriority)>,
    /// Each class's rank (`class_ranks`), for the backends.
    pub(crate) ranks: Vec<(Arc<str>, u32)>,
    /// Each class's counters, by the classifier's class index (empty when compiled without metrics).
    pub(crate) class_metrics: Vec<Arc<crate::metrics::ClassMetrics>>,
    /// Each route's edge duties (rate limit, access control, compression).
    pub(crate) edge: crate::edge::Edge,
    /// Each route's response counters by its prefix, then [`crate::metrics::NO_ROUTE`]'s (empty when
    /// compiled without metrics).
    pub(crate) responses: Vec<(String, Arc<crate::metrics::RouteResponses>)>,
}

impl Active {
    /// The kernel priority a class's CPU work runs at (the thread's own when the class sets none).
    pub(crate) fn priority_of(&self, class: &str) -> WorkPriority {
        self.priorities
            .iter()
            .find(|(n, _)| &**n == class)
            .map(|(_, p)| *p)
            .unwrap_or_default()
    }

    /// What a backend is told of a class: its kernel priority and its rank (a class no longer configured
    /// ranks top: it is served as before).
    pub(crate) fn class_info(&self, class: &str) -> ClassInfo {
        ClassInfo {
            priority: self.priority_of(class),
            rank: self
                .ranks
                .iter()
                .find(|(n, _)| &**n == class)
                .map_or(TOP_RANK, |(_, r)| *r),
        }
    }

    /// The response counters of the route with `prefix` (or [`crate::metrics::NO_ROUTE`]).
    pub(crate) fn responses_of(&self, prefix: &str) -> Option<&crate::metrics::RouteResponses> {
        self.responses
            .iter()
            .find(|(p, _)| p == prefix)
            .map(|(_, r)| &**r)
    }

    /// The lane a route's requests queue in (`key`: the route's `RouteConfig::key`).
    pub(crate) fn lane_of(&self, key: &str) -> Option<&Arc<str>> {
        match self.lanes.as_slice() {
            [(_, only)] => Some(only),
            lanes => lanes.iter().find(|(p, _)| p == key).map(|(_, k)| k),
        }
    }
}

/// A picker used only to check that a custom-policy configuration is accepted by the scheduler.
struct NoPicker;
impl HeadPicker for NoPicker {
    fn pick(&mut self, heads: &[ordo_sched::Head<'_>], _now: Nanos) -> Option<ordo_sched::ClassId> {
        heads.first().map(|h| h.class)
    }
}

/// The scheduler configuration of `cfg`.
pub fn sched_config(cfg: &ServeConfig) -> SchedConfig {
    let classes = cfg
        .effective_classes()
        .iter()
        .map(|c| ClassSpec {
            name: c.name.clone(),
            weight: c.weight,
            priority: c.priority,
            age_after: c.age_after.map(nanos),
            deadline: c.deadline.map(nanos),
            queue_cap: c.queue_cap,
            queue_timeout: c.queue_timeout.filter(|d| !d.is_zero()).map(nanos),
            codel: overload::codel_spec(c),
        })
        .collect();
    SchedConfig {
        classes,
        policy: cfg.policy,
        global_queue_cap: cfg.queue_cap,
        queue_timeout: Some(cfg.queue_timeout).filter(|d| !d.is_zero()).map(nanos),
        seed: cfg.seed,
    }
}

fn build_backend(
    cfg: &ServeConfig,
    i: usize,
    r: &crate::config::RouteConfig,
) -> Result<Backend, Invalid> {
    use crate::backend::{BackendError, proxy, static_files, synthetic};
    if let Some(s) = &r.static_files {
        let mut s = s.clone();
        s.root = cfg.resolve(&s.root);
        let b = static_files::StaticBackend::new(&s, "")
            .map_err(|e| Invalid::new(keypath!["routes", i, "static"], e.to_string()))?;
        return Ok(Backend::Static(b));
    }
    if let Some(p) = &r.proxy {
        let mut p = p.clone();
        p.ca_file = p.ca_file.map(|f| cfg.resolve(&f));
        let b = proxy::ProxyBackend::new(&p).map_err(|e| match e {
            BackendError::Invalid { field, msg } => {
                Invalid::new(keypath!["routes", i, "proxy", field], msg)
            }
            e => Invalid::new(keypath!["routes", i, "proxy"], e.to_string()),
        })?;
        return Ok(Backend::Proxy(b));
    }
    if let Some(s) = &r.synthetic {
        let b = synthetic::SyntheticBackend::new(s)
            .map_err(|e| Invalid::new(keypath!["routes", i, "synthetic"], e.to_string()))?;
        return Ok(Backend::Synthetic(b));
    }
    if let Some(d) = &r.redirect {
        let b = crate::backend::redirect::RedirectBackend::new(d).map_err(|e| match e {
            BackendError::Invalid { field, msg } => {
                Invalid::new(keypath!["routes", i, "redirect", field], msg)
            }
            e => Invalid::new(keypath!["routes", i, "redirect"], e.to_string()),
        })?;
        return Ok(Backend::Redirect(b));
    }
    Err(Invalid::new(
        keypath!["routes", i],
        "a route needs exactly one backend table: `static`, `proxy`, `synthetic` or `redirect`",
    ))
}

impl Compiled {
    /// Check and compile `cfg`. `metrics` receives the Lua policy's error counter (None: a throwaway one).
    pub(crate) fn build(
        cfg: &ServeConfig,
        metrics: Option<&Metrics>,
    ) -> Result<Compiled, ConfigError> {
        let loc = |i: Invalid| cfg.locate(i);
        cfg.check_values().map_err(loc)?;
        let classifier = Classifier::build_with(
            cfg,
            metrics
                .map(|m| m.lua_counters("classify"))
                .unwrap_or_default(),
        )
        .map_err(loc)?;
        let mut routes = Vec::new();
        for (i, r) in cfg.effective_routes().iter().enumerate() {
            let backend = build_backend(cfg, i, r).map_err(loc)?;
            let mut route = Route::new(r.prefix.clone(), r.strip_prefix, r.size_hint, backend);
            if let Some(h) = &r.host {
                route.host = crate::classify::HostPattern::parse(h)
                    .map_err(|e| loc(Invalid::new(keypath!["routes", i, "host"], e)))?;
            }
            route.key = r.key();
            route.tls = r
                .tls_only()
                .map_err(|e| loc(Invalid::new(keypath!["routes", i, "scheme"], e)))?;
            routes.push(route);
        }
        let admin = AdminGuard::build(cfg).map_err(loc)?;
        let edge = crate::edge::Edge::build(cfg).map_err(loc)?;
        let forwarding = crate::forwarded::Forwarding::build(&cfg.forwarded).map_err(loc)?;
        let priorities = class_priorities(cfg, &KernelPriority::of_this_process()).map_err(loc)?;
        let sched = sched_config(cfg);
        let plan = overload::plan(cfg).map_err(loc)?;
        let mut pickers: Vec<Box<dyn HeadPicker>> = Vec::new();
        if cfg.policy == PolicyKind::Custom {
            let path = cfg
                .policy_script
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            let counters = metrics.map(|m| m.lua_counters("pick")).unwrap_or_default();
            // Each lane has its own scheduler, so its own Lua state.
            for _ in 0..plan.lanes.len() {
                let p = LuaPicker::load_with(&cfg.resolve(path), &cfg.lua, counters.clone())
                    .map_err(|e| loc(Invalid::new(keypath!["policy_script"], e)))?;
                pickers.push(Box::new(p));
            }
        }
        let check = if !pickers.is_empty() {
            Scheduler::<()>::with_picker(sched.clone(), Box::new(NoPicker)).map(|_| ())
        } else {
            Scheduler::<()>::new(sched.clone()).map(|_| ())
        };
        check.map_err(|e| loc(Invalid::new(keypath!["classes"], e.to_string())))?;
        let tls = match &cfg.tls {
            Some(t) => Some(
                crate::tls::server_config(t, &|p| cfg.resolve(p), cfg.http2.enabled)
                    .map_err(loc)?,
            ),
            None => None,
        };
        if let Some(p) = &cfg.access_log.path {
            let p = cfg.resolve(p);
            let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
            if dir.is_some_and(|d| !d.is_dir()) {
                return Err(loc(Invalid::new(
                    keypath!["access_log", "path"],
                    format!("{}: its directory does not exist", p.display()),
                )));
            }
        }
        Ok(Compiled {
            active: Active {
                classifier,
                router: Router::new(routes),
                headers: cfg.headers.clone(),
                retry_after_secs: cfg.retry_after.as_secs_f64().ceil().max(1.0) as u64,
                needs_size: cfg.policy.uses_size_hint(),
                lanes: cfg
                    .effective_routes()
                    .iter()
                    .map(|r| (r.key(), overload::lane_key(cfg, r)))
                    .collect(),
                admin,
                forwarding,
                priorities,
                ranks: class_ranks(cfg),
                class_metrics: metrics.map_or_else(Vec::new, |m| {
                    cfg.effective_classes()
                        .iter()
                        .map(|c| m.class(&Arc::from(c.name.as_str())))
                        .collect()
                }),
                edge,
                responses: metrics.map_or_else(Vec::new, |m| {
                    cfg.effective_routes()
                        .iter()
                        .map(|r| r.prefix.as_str())
                        .chain([crate::metrics::NO_ROUTE])
                        .map(|p| (p.to_string(), m.route(p)))
                        .collect()
                }),
            },
            sched,
            pickers,
            plan,
            tls,
        })
    }
}

/// Each class's rank among the classes, in thousandths ([`TOP_RANK`] the top, 0 the lowest): classes are
/// ordered by `priority`, then by `weight` (a priority policy orders them by the first, a share policy
/// by the second), and the distinct places spread evenly from 0 to the top; classes that tie share a
/// rank, and a class alone (or all tied) is the top.
pub(crate) fn class_ranks(cfg: &ServeConfig) -> Vec<(Arc<str>, u32)> {
    let classes = cfg.effective_classes();
    let mut keys: Vec<(i32, u32)> = classes.iter().map(|c| (c.priority, c.weight)).collect();
    keys.sort_unstable();
    keys.dedup();
    let places = keys.len().saturating_sub(1) as u64;
    classes
        .iter()
        .map(|c| {
            let place = keys
                .iter()
                .position(|k| *k == (c.priority, c.weight))
                .unwrap_or(0) as u64;
            // (all tied: no places to spread over, everyone is the top)
            let rank = (place * u64::from(TOP_RANK))
                .checked_div(places)
                .map_or(TOP_RANK, |r| r as u32);
            (Arc::from(c.name.as_str()), rank)
        })
        .collect()
}

/// What the kernel lets this process do with its threads' priorities.
pub(crate) struct KernelPriority {
    /// The lowest nice value it may set (`ordo_sys::thread::nice_floor`).
    pub(crate) floor: i32,
    /// The nice value its threads run at (and are put back to after a class's request).
    pub(crate) own_nice: i32,
    /// The CPUs its threads may run on (a class's `cpus` must be among them).
    pub(crate) cpus: ordo_sys::CpuSet,
}

impl KernelPriority {
    fn of_this_process() -> Self {
        KernelPriority {
            floor: ordo_sys::thread::nice_floor(),
            own_nice: ordo_sys::thread::get_nice(0).unwrap_or(0),
            cpus: ordo_sys::thread::get_affinity(0)
                .ok()
                .and_then(|c| ordo_sys::CpuSet::from_cpus(&c).ok())
                .unwrap_or_else(|| {
                    let all: Vec<usize> = (0..ordo_sys::thread::cpu_count()).collect();
                    ordo_sys::CpuSet::from_cpus(&all).unwrap_or(ordo_sys::CpuSet::empty())
                }),
        }
    }
}

/// Check each class's `nice`, `thread_policy` and `cpus` and what the kernel permits: the worker thread gets
/// the class's priority (and CPUs) for the request and its own back afterwards, and going back up (to a
/// lower nice, or out of SCHED_IDLE) needs CAP_SYS_NICE or RLIMIT_NICE — refused here rather than failing
/// per request; so are CPUs this process may not run on.
pub(crate) fn class_priorities(
    cfg: &ServeConfig,
    kernel: &KernelPriority,
) -> Result<Vec<(Arc<str>, WorkPriority)>, Invalid> {
    let mut out = Vec::new();
    for (i, c) in cfg.classes.iter().enumerate() {
        let prio = WorkPriority {
            policy: c.thread_policy,
            nice: c.nice,
            cpus: c.cpus,
        };
        if prio.is_default() {
            continue;
        }
        if let Some(set) = c.cpus {
            let outside = set.minus(&kernel.cpus);
            if !outside.is_empty() {
                return Err(Invalid::new(
                    keypath!["classes", i, "cpus"],
                    format!(
                        "\"{set}\": CPU {outside} is not one this process may run on (it may use {}: \
                         the machine's online CPUs less what taskset or a cpuset cgroup took away)",
                        kernel.cpus
                    ),
                ));
            }
        }
        if let Some(p) = c.thread_policy {
            if !matches!(p, Policy::Other | Policy::Batch | Policy::Idle) {
                return Err(Invalid::new(
                    keypath!["classes", i, "thread_policy"],
                    format!(
                        "\"{p}\": only \"other\", \"batch\" or \"idle\" (a real-time or deadline class \
                         would starve everything else on the machine, ordo's own I/O threads included)"
                    ),
                ));
            }
        }
        if let Some(n) = c.nice {
            if !(-20..=19).contains(&n) {
                return Err(Invalid::new(
                    keypath!["classes", i, "nice"],
                    format!("{n}: must be in -20..=19"),
                ));
            }
            if c.thread_policy == Some(Policy::Idle) {
                return Err(Invalid::new(
                    keypath!["classes", i, "nice"],
                    format!(
                        "{n}: has no effect with thread_policy = \"idle\" (SCHED_IDLE threads have no \
                         nice value); remove one of the two"
                    ),
                ));
            }
        }
        // the lowest nice value the thread passes through: the class's, or its own when it goes back
        let lowest = match (c.nice, c.thread_policy) {
            (Some(n), _) if n != kernel.own_nice => Some(n.min(kernel.own_nice)),
            (_, Some(Policy::Idle)) => Some(kernel.own_nice),
            _ => None,
        };
        if let Some(lowest) = lowest.filter(|&l| l < kernel.floor) {
            let (key, value) = match c.nice {
                Some(n) if n != kernel.own_nice => ("nice", n.to_string()),
                _ => ("thread_policy", "\"idle\"".to_string()),
            };
            return Err(Invalid::new(
                keypath!["classes", i, key],
                format!(
                    "{value}: the thread running a request of class `{}` gets this for the request and \
                     its own nice ({}) back afterwards, which needs nice {lowest}; this process may go no \
                     lower than nice {} (it lacks CAP_SYS_NICE and `ulimit -e` is {}). Run ordo with \
                     CAP_SYS_NICE (systemd: AmbientCapabilities=CAP_SYS_NICE) or RLIMIT_NICE ≥ {}, or \
                     remove the key",
                    c.name,
                    kernel.own_nice,
                    kernel.floor,
                    20 - kernel.floor,
                    20 - lowest
                ),
            ));
        }
        out.push((Arc::from(c.name.as_str()), prio));
    }
    Ok(out)
}

impl ServeConfig {
    /// Check every value, compile rules, routes and scripts (then discard them). The server runs the same
    /// compilation when it starts or reloads, so `--check` refuses exactly what start-up would refuse.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Compiled::build(self, None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Origin;

    /// `text` parsed with its origin (so errors are located) and its classes' priorities checked against
    /// a kernel that permits down to nice `floor`, threads running at `own_nice`.
    fn priorities(
        text: &str,
        floor: i32,
        own_nice: i32,
    ) -> Result<Vec<(Arc<str>, WorkPriority)>, String> {
        let mut cfg: ServeConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.origin = Some(Arc::new(Origin {
            name: "ordo.toml".into(),
            path: None,
            text: text.into(),
            dir: ".".into(),
        }));
        let cpus = "0-3".parse().unwrap();
        class_priorities(
            &cfg,
            &KernelPriority {
                floor,
                own_nice,
                cpus,
            },
        )
        .map_err(|e| cfg.locate(e).to_string())
    }

    const CLASSES: &str = "[[classes]]\nname = \"top\"\n[[classes]]\nname = \"low\"\n";

    #[test]
    fn classes_rank_by_priority_then_weight() {
        let ranks = |text: &str| {
            let cfg = ServeConfig::from_toml_str(text, "t.toml").unwrap();
            class_ranks(&cfg)
                .into_iter()
                .map(|(n, r)| (n.to_string(), r))
                .collect::<Vec<_>>()
        };
        let named = |v: &[(&str, u32)]| {
            v.iter()
                .map(|(n, r)| (n.to_string(), *r))
                .collect::<Vec<_>>()
        };
        // priority
        let three = "policy = \"priority\"\n[[classes]]\nname = \"top\"\npriority = 10\n[[classes]]\nname = \"mid\"\npriority = 5\n[[classes]]\nname = \"low\"\n";
        assert_eq!(
            ranks(three),
            named(&[("top", TOP_RANK), ("mid", 500), ("low", 0)])
        );
        // shares: the larger weight ranks higher; a tie shares its rank
        let stride = "policy = \"stride\"\n[[classes]]\nname = \"a\"\nweight = 3\n[[classes]]\nname = \"b\"\n[[classes]]\nname = \"c\"\n";
        assert_eq!(ranks(stride), named(&[("a", TOP_RANK), ("b", 0), ("c", 0)]));
        // classes that all tie (and the one default class) are the top
        assert_eq!(
            ranks(CLASSES),
            named(&[("top", TOP_RANK), ("low", TOP_RANK)])
        );
        assert!(ranks("").iter().all(|(_, r)| *r == TOP_RANK));
    }

    #[test]
    fn class_priorities_are_read_and_checked() {
        let text = format!("{CLASSES}nice = 10\n");
        assert_eq!(
            priorities(&text, -20, 0).unwrap(),
            vec![(
                Arc::from("low"),
                WorkPriority {
                    policy: None,
                    nice: Some(10),
                    cpus: None,
                }
            )]
        );
        // CPUs: kept as a set; those this process may not run on (the test's kernel allows 0-3) refused
        let p = priorities(&format!("{CLASSES}cpus = \"1,3\"\n"), 20, 0).unwrap();
        assert_eq!(p[0].1.cpus.map(|c| c.to_string()), Some("1,3".into()));
        let e = priorities(&format!("{CLASSES}cpus = \"2-5\"\n"), 20, 0).unwrap_err();
        assert!(
            e.starts_with("ordo.toml:5: classes[1].cpus: \"2-5\": CPU 4-5 is not one this process may run on (it may use 0-3"),
            "{e}"
        );
        let e = priorities(&format!("{CLASSES}cpus = \"3-1\"\n"), 20, 0).unwrap_err();
        assert!(e.contains("bad CPU range `3-1`"), "{e}");
        let text = format!("{CLASSES}thread_policy = \"idle\"\n");
        let p = priorities(&text, -20, 0).unwrap();
        assert_eq!(p[0].1.policy, Some(Policy::Idle));
        assert_eq!(priorities(CLASSES, 20, 0).unwrap(), vec![]);

        let bad = [
            (
                "nice = 20\n",
                "ordo.toml:5: classes[1].nice: 20: must be in -20..=19",
            ),
            (
                "nice = -21\n",
                "ordo.toml:5: classes[1].nice: -21: must be in -20..=19",
            ),
            (
                "thread_policy = \"fifo:10\"\n",
                "ordo.toml:5: classes[1].thread_policy: \"fifo:10\": only \"other\", \"batch\" or \"idle\"",
            ),
            (
                "thread_policy = \"idle\"\nnice = 5\n",
                "ordo.toml:6: classes[1].nice: 5: has no effect with thread_policy = \"idle\"",
            ),
        ];
        for (extra, want) in bad {
            let e = priorities(&format!("{CLASSES}{extra}"), -20, 0).unwrap_err();
            assert!(e.starts_with(want), "{extra}: {e}");
        }
        // a policy name the parser does not know is refused at parse time, naming the value
        let e =
            priorities(&format!("{CLASSES}thread_policy = \"sometimes\"\n"), -20, 0).unwrap_err();
        assert!(e.contains("sometimes"), "{e}");
    }

    /// Without CAP_SYS_NICE (floor 20: RLIMIT_NICE 0) a thread may lower its priority but never get its
    /// own back, so every per-request change but SCHED_BATCH is refused, naming the key, value and fix.
    #[test]
    fn priorities_the_kernel_would_not_restore_are_refused() {
        for (extra, key) in [
            ("nice = 10\n", "classes[1].nice: 10:"),
            ("nice = -5\n", "classes[1].nice: -5:"),
            (
                "thread_policy = \"idle\"\n",
                "classes[1].thread_policy: \"idle\":",
            ),
        ] {
            let e = priorities(&format!("{CLASSES}{extra}"), 20, 0).unwrap_err();
            assert!(e.starts_with(&format!("ordo.toml:5: {key}")), "{e}");
            assert!(e.contains("CAP_SYS_NICE"), "{e}");
            assert!(e.contains("may go no lower than nice 20"), "{e}");
        }
        // SCHED_BATCH and back, and a nice equal to the thread's own, need no privilege
        let text = format!("{CLASSES}thread_policy = \"batch\"\nnice = 0\n");
        assert_eq!(priorities(&text, 20, 0).unwrap().len(), 1);
        // RLIMIT_NICE 25 (floor -5): nice -5 and back to 0 are allowed, -6 is not
        assert!(priorities(&format!("{CLASSES}nice = -5\n"), -5, 0).is_ok());
        let e = priorities(&format!("{CLASSES}nice = -6\n"), -5, 0).unwrap_err();
        assert!(e.contains("RLIMIT_NICE ≥ 26"), "{e}");
        // threads at nice 5 (the server started under `nice -n 5`) may go to 10 and back with floor 5
        assert!(priorities(&format!("{CLASSES}nice = 10\n"), 5, 5).is_ok());
    }
}
