//! What a configuration compiles into: the scheduler's configuration, the lanes of workers, the
//! classifier, the routes with their backends, the admin guard and the TLS setup — built the same way at
//! start-up, on reload and by `ordo serve --check`, so a check refuses exactly what start-up would.

mod overload;

use std::sync::Arc;
use std::time::Duration;

use ordo_sched::{ClassSpec, HeadPicker, Nanos, PolicyKind, SchedConfig, Scheduler};

use crate::admin_guard::AdminGuard;
use crate::backend::Backend;
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
    /// The gate lane of each route prefix (all the same with a fixed number of workers).
    pub(crate) lanes: Vec<(String, Arc<str>)>,
    /// Who may use the admin endpoints (`[admin]` token and allowed host names).
    pub(crate) admin: AdminGuard,
}

impl Active {
    /// The lane a route's requests queue in.
    pub(crate) fn lane_of(&self, prefix: &str) -> Option<&Arc<str>> {
        match self.lanes.as_slice() {
            [(_, only)] => Some(only),
            lanes => lanes.iter().find(|(p, _)| p == prefix).map(|(_, k)| k),
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
    Err(Invalid::new(
        keypath!["routes", i],
        "a route needs exactly one backend table: `static`, `proxy` or `synthetic`",
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
            routes.push(Route::new(
                r.prefix.clone(),
                r.strip_prefix,
                r.size_hint,
                backend,
            ));
        }
        let admin = AdminGuard::build(cfg).map_err(loc)?;
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
                needs_size: matches!(
                    cfg.policy,
                    PolicyKind::Srpt | PolicyKind::Wfq | PolicyKind::Custom
                ),
                lanes: cfg
                    .effective_routes()
                    .iter()
                    .map(|r| (r.prefix.clone(), overload::lane_key(cfg, r)))
                    .collect(),
                admin,
            },
            sched,
            pickers,
            plan,
            tls,
        })
    }
}

impl ServeConfig {
    /// Check every value, compile rules, routes and scripts (then discard them). The server runs the same
    /// compilation when it starts or reloads, so `--check` refuses exactly what start-up would refuse.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Compiled::build(self, None).map(|_| ())
    }
}
