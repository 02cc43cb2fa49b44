//! Server assembly: the request path (classify → gate → the route's backend → response → metrics), the
//! listeners, reload and graceful shutdown. `Server::start` is the API the binary, the demo and the tests use.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ordo_sched::{ClassSpec, HeadPicker, Meta, Nanos, PolicyKind, SchedConfig, Scheduler};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::classify::{Classifier, Route, Router, size_hint};
use crate::config::{ConfigError, HeadersConfig, Invalid, PolicyName, ServeConfig};
use crate::gate::{Gate, Overloaded, reason_str};
use crate::http::{Handler, Request, Response};
use crate::keypath;
use crate::lua::LuaPicker;
use crate::metrics::Metrics;

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `key` is the config key the address came from (`listen` or `admin.listen`). The I/O error is part of
    /// the message (not a `source`), so an error chain printed with `{:#}` names it once.
    #[error("cannot listen on {addr} (`{key}`): {error}")]
    Bind {
        key: &'static str,
        addr: SocketAddr,
        error: std::io::Error,
    },
}

fn nanos(d: Duration) -> Nanos {
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
}

impl Active {
    /// The lane a route's requests queue in.
    fn lane_of(&self, prefix: &str) -> Option<&Arc<str>> {
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

fn policy_kind(p: PolicyName) -> PolicyKind {
    match p {
        PolicyName::Fcfs => PolicyKind::Fcfs,
        PolicyName::Priority => PolicyKind::Priority,
        PolicyName::Lottery => PolicyKind::Lottery,
        PolicyName::Stride => PolicyKind::Stride,
        PolicyName::Wfq => PolicyKind::Wfq,
        PolicyName::Srpt => PolicyKind::Srpt,
        PolicyName::Edf => PolicyKind::Edf,
        PolicyName::Lua => PolicyKind::Custom,
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
            codel: crate::overload::codel_spec(c),
        })
        .collect();
    SchedConfig {
        classes,
        policy: policy_kind(cfg.policy),
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
    use crate::backend::{proxy, static_files, synthetic};
    if let Some(s) = &r.static_files {
        let mut s = s.clone();
        s.root = cfg.resolve(&s.root);
        let b = static_files::StaticBackend::new(&s, "")
            .map_err(|e| Invalid::new(keypath!["routes", i, "static"], e.to_string()))?;
        return Ok(Backend::Static(b));
    }
    if let Some(p) = &r.proxy {
        let b = proxy::ProxyBackend::new(p)
            .map_err(|e| Invalid::new(keypath!["routes", i, "proxy"], e.to_string()))?;
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
        let classifier = Classifier::build(cfg).map_err(loc)?;
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
        let sched = sched_config(cfg);
        let plan = crate::overload::plan(cfg).map_err(loc)?;
        let mut pickers: Vec<Box<dyn HeadPicker>> = Vec::new();
        if cfg.policy == PolicyName::Lua {
            let path = cfg
                .policy_script
                .as_deref()
                .unwrap_or(std::path::Path::new(""));
            let errors = metrics.map(|m| m.lua_errors.clone()).unwrap_or_default();
            // Each lane has its own scheduler, so its own Lua state.
            for _ in 0..plan.lanes.len() {
                let p = LuaPicker::load(&cfg.resolve(path), errors.clone())
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
        Ok(Compiled {
            active: Active {
                classifier,
                router: Router::new(routes),
                headers: cfg.headers.clone(),
                retry_after_secs: cfg.retry_after.as_secs_f64().ceil().max(1.0) as u64,
                needs_size: matches!(
                    cfg.policy,
                    PolicyName::Srpt | PolicyName::Wfq | PolicyName::Lua
                ),
                lanes: cfg
                    .effective_routes()
                    .iter()
                    .map(|r| (r.prefix.clone(), crate::overload::lane_key(cfg, r)))
                    .collect(),
            },
            sched,
            pickers,
            plan,
        })
    }
}

/// State shared by the request path, the admin listener and the handle.
pub(crate) struct Shared {
    pub(crate) gate: Gate,
    active: RwLock<Arc<Active>>,
    config: Mutex<ServeConfig>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) started: Instant,
    pub(crate) local_addr: SocketAddr,
    pub(crate) admin_addr: Option<SocketAddr>,
}

impl Shared {
    fn active(&self) -> Arc<Active> {
        self.active
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The running configuration.
    pub(crate) fn config(&self) -> ServeConfig {
        self.config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Apply a new configuration to the running server; refused whole if anything is wrong.
    pub(crate) fn reload(&self, mut new: ServeConfig) -> Result<(), ConfigError> {
        let mut cur = self.config.lock().unwrap_or_else(|p| p.into_inner());
        let result = (|| {
            let compiled = Compiled::build(&new, Some(&self.metrics))?;
            let mut restart = Vec::new();
            if new.listen != cur.listen {
                restart.push("listen");
                new.listen = cur.listen;
            }
            if new.threads != cur.threads {
                restart.push("threads");
                new.threads = cur.threads;
            }
            if new.limits != cur.limits {
                restart.push("limits");
                new.limits = cur.limits.clone();
            }
            if new.admin.enabled != cur.admin.enabled || new.admin.listen != cur.admin.listen {
                restart.push("admin");
                new.admin = cur.admin.clone();
            }
            if !restart.is_empty() {
                tracing::warn!(
                    keys = %restart.join(", "),
                    "reload: these settings change only on restart; the running values stay"
                );
            }
            self.gate
                .reconfigure_plan(compiled.sched, compiled.pickers, compiled.plan)
                .map_err(|e| new.locate(Invalid::new(keypath!["classes"], e.0)))?;
            *self.active.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(compiled.active);
            Ok(())
        })();
        match result {
            Ok(()) => {
                tracing::info!(config = %new.name(), policy = %new.policy, workers = %new.workers, "configuration reloaded");
                *cur = new;
                self.metrics.reload(true);
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "reload refused; the running configuration stays");
                self.metrics.reload(false);
                Err(e)
            }
        }
    }

    /// Re-read the file the running configuration came from (with the command-line overrides).
    pub(crate) fn reload_from_file(&self) -> Result<(), ConfigError> {
        let cur = self.config();
        let Some(path) = cur.origin.as_ref().and_then(|o| o.path.clone()) else {
            self.metrics.reload(false);
            let e = ConfigError {
                file: cur.name().to_string(),
                line: None,
                key: None,
                message: "the running configuration did not come from a file; nothing to re-read"
                    .into(),
            };
            tracing::error!(error = %e, "reload refused");
            return Err(e);
        };
        // checked with the command-line overrides applied, as at start-up
        let new = match ServeConfig::from_file_with(&path, cur.overrides.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "reload refused; the running configuration stays");
                self.metrics.reload(false);
                return Err(e);
            }
        };
        self.reload(new)
    }

    /// The request path.
    async fn serve(&self, mut req: Request) -> Response {
        let active = self.active();
        let c = active.classifier.classify(&req);
        if c.lua_error {
            self.metrics.lua_errors.inc();
        }
        let cm = self.metrics.class(&c.class_name);
        cm.arrivals.inc();
        let Some(route) = active.router.find(&req.path) else {
            self.metrics.not_found();
            return Response::text(404, "no route for this path\n");
        };
        if route.strip_prefix && route.prefix != "/" {
            strip(&mut req, route.prefix.trim_end_matches('/'));
        }
        // a proxy loop is answered without taking a worker (its first pass may hold the only one)
        if let Some(resp) = route.backend.answer_before_scheduling(&req) {
            return resp;
        }
        let hint = if active.needs_size {
            size_hint(&c, active.classifier.classes(), route, &req)
        } else {
            0
        };
        let now = self.gate.now();
        let meta = Meta {
            class: c.class,
            size_hint: hint,
            deadline: c.deadline.map(|d| now.saturating_add(nanos(d))),
            arrival: now,
        };
        let acquired = match active.lane_of(&route.prefix) {
            Some(lane) => self.gate.acquire_on(meta, &c.class_name, lane).await,
            None => self.gate.acquire(meta, &c.class_name).await,
        };
        let mut permit = match acquired {
            Ok(p) => p,
            Err(Overloaded { reason }) => {
                cm.rejected(reason).inc();
                let mut resp =
                    Response::text(503, &format!("overloaded: {}\n", reason_str(reason)))
                        .with_header("Retry-After", active.retry_after_secs.to_string());
                if active.headers.class {
                    resp = resp.with_header("X-Ordo-Class", c.class_name.to_string());
                }
                return resp;
            }
        };
        let dm = if *permit.class_name() == c.class_name {
            cm
        } else {
            self.metrics.class(permit.class_name())
        };
        dm.dispatched.inc();
        dm.queue_wait.observe(permit.waited().as_secs_f64());
        let start = Instant::now();
        let mut resp = route.backend.call(&req).await;
        let service = start.elapsed();
        permit.finish(matches!(resp.status, 502..=504));
        route.learn(service);
        dm.service.observe(service.as_secs_f64());
        dm.completed.inc();
        let waited = permit.waited();
        let class = permit.class_name().clone();
        drop(permit);
        if active.headers.class {
            resp = resp.with_header("X-Ordo-Class", class.to_string());
        }
        if active.headers.queue_wait {
            resp = resp.with_header("X-Ordo-Queue-Wait-Us", waited.as_micros().to_string());
        }
        resp
    }
}

/// Remove a route prefix from the path and the raw target.
fn strip(req: &mut Request, prefix: &str) {
    if let Some(rest) = req.path.strip_prefix(prefix) {
        req.path = if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        };
    }
    if let Some(rest) = req.target.strip_prefix(prefix) {
        req.target = if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        };
    }
}

/// The main listener's handler.
struct App(Arc<Shared>);

impl Handler for App {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let shared = self.0.clone();
        async move { shared.serve(req).await }
    }
}

/// Entry point: `Server::start(config).await`.
pub struct Server;

impl Server {
    /// Compile the configuration, bind the listener (and the admin listener unless disabled) and start
    /// serving on the current tokio runtime.
    pub async fn start(cfg: ServeConfig) -> Result<ServerHandle, StartError> {
        let metrics = Arc::new(Metrics::new());
        let compiled = Compiled::build(&cfg, Some(&metrics))?;
        let gate = Gate::with_plan(compiled.sched, compiled.pickers, compiled.plan)
            .map_err(|e| cfg.locate(Invalid::new(keypath!["classes"], e.0)))?;
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|error| StartError::Bind {
                key: "listen",
                addr: cfg.listen,
                error,
            })?;
        let local_addr = listener.local_addr().map_err(|error| StartError::Bind {
            key: "listen",
            addr: cfg.listen,
            error,
        })?;
        let admin_listener = if cfg.admin.enabled {
            let l =
                TcpListener::bind(cfg.admin.listen)
                    .await
                    .map_err(|error| StartError::Bind {
                        key: "admin.listen",
                        addr: cfg.admin.listen,
                        error,
                    })?;
            Some(l)
        } else {
            None
        };
        let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
        let limits = Arc::new(cfg.limits.clone());
        let shared = Arc::new(Shared {
            gate: gate.clone(),
            active: RwLock::new(Arc::new(compiled.active)),
            config: Mutex::new(cfg),
            metrics,
            started: Instant::now(),
            local_addr,
            admin_addr,
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let timer = tokio::spawn(gate.clone().run_timer());
        let main = tokio::spawn(crate::http::run_listener(
            listener,
            Arc::new(App(shared.clone())),
            limits,
            shutdown_rx.clone(),
        ));
        let admin = admin_listener.map(|l| {
            tokio::spawn(crate::http::run_listener(
                l,
                Arc::new(crate::admin::AdminApp::new(shared.clone())),
                Arc::new(crate::http::Limits::default()),
                shutdown_rx.clone(),
            ))
        });
        Ok(ServerHandle {
            shared,
            shutdown_tx,
            main,
            admin,
            timer,
        })
    }
}

/// A running server.
pub struct ServerHandle {
    shared: Arc<Shared>,
    shutdown_tx: watch::Sender<bool>,
    main: JoinHandle<std::io::Result<()>>,
    admin: Option<JoinHandle<std::io::Result<()>>>,
    timer: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the HTTP listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The admin listener's address (None when disabled).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.shared.admin_addr
    }

    /// Apply a new configuration (policy, weights, classes, rules, routes, workers); queued and in-flight
    /// requests are kept. A bad configuration is refused and the running one stays. `listen`, `threads`,
    /// `limits` and `admin` need a restart (a warning is logged and the running values stay).
    pub fn reload(&self, cfg: ServeConfig) -> Result<(), ConfigError> {
        self.shared.reload(cfg)
    }

    /// Re-read the configuration file (what SIGHUP and `POST /reload` do).
    pub fn reload_from_file(&self) -> Result<(), ConfigError> {
        self.shared.reload_from_file()
    }

    /// The running configuration.
    pub fn config(&self) -> ServeConfig {
        self.shared.config()
    }

    /// The `/status` document.
    pub fn status(&self) -> serde_json::Value {
        crate::admin::status(&self.shared)
    }

    /// The `/metrics` text.
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.encode(&self.shared.gate.snapshot())
    }

    /// Graceful shutdown: stop accepting, answer everything still queued with 503, let in-flight requests
    /// finish, then return.
    pub async fn shutdown(self) -> std::io::Result<()> {
        let _ = self.shutdown_tx.send(true);
        self.shared.gate.close();
        let r = match self.main.await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        };
        if let Some(a) = self.admin {
            let _ = a.await;
        }
        let _ = self.timer.await;
        r
    }

    /// Serve until SIGTERM or SIGINT (then shut down gracefully); SIGHUP re-reads the configuration file.
    pub async fn run_until_signalled(self) -> std::io::Result<()> {
        self.run_until_signalled_with(|_| {}).await
    }

    /// Like [`ServerHandle::run_until_signalled`], calling `ready` once the signal handlers are installed
    /// (so a signal sent by whoever sees what `ready` prints is never lost).
    pub async fn run_until_signalled_with(
        self,
        ready: impl FnOnce(&ServerHandle),
    ) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let mut hup = signal(SignalKind::hangup())?;
        ready(&self);
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reloading configuration");
                    let _ = self.reload_from_file();
                }
            }
        }
        self.shutdown().await
    }
}
