//! Server assembly: the request path (classify → gate → the route's backend → response → metrics), the
//! listeners, reload and graceful shutdown. `Server::start` is the API the binary, the demo and the tests use.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ordo_sched::{ClassSpec, HeadPicker, Meta, Nanos, PolicyKind, SchedConfig, Scheduler};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::access_log::{RequestLine, Served};
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
    pub(crate) admin: crate::admin::AdminGuard,
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
        let admin = crate::admin::AdminGuard::build(cfg).map_err(loc)?;
        let sched = sched_config(cfg);
        let plan = crate::overload::plan(cfg).map_err(loc)?;
        let mut pickers: Vec<Box<dyn HeadPicker>> = Vec::new();
        if cfg.policy == PolicyName::Lua {
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
                    PolicyName::Srpt | PolicyName::Wfq | PolicyName::Lua
                ),
                lanes: cfg
                    .effective_routes()
                    .iter()
                    .map(|r| (r.prefix.clone(), crate::overload::lane_key(cfg, r)))
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

/// State shared by the request path, the admin listener and the handle.
pub(crate) struct Shared {
    pub(crate) gate: Gate,
    active: RwLock<Arc<Active>>,
    config: Mutex<ServeConfig>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) started: Instant,
    pub(crate) local_addr: SocketAddr,
    pub(crate) admin_addr: Option<SocketAddr>,
    /// The TLS listener's certificates (swapped on reload), when `[tls]` is configured.
    tls: Option<Arc<crate::tls::TlsAcceptor>>,
    /// The address that speaks TLS (the main listener's or `tls.listen`'s).
    tls_addr: Option<SocketAddr>,
    access_log: Option<crate::access_log::AccessLog>,
}

impl Shared {
    pub(crate) fn active(&self) -> Arc<Active> {
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
            let mut restart = Vec::new();
            // before compiling: the TLS configuration's ALPN list follows `http2.enabled`
            if new.http2 != cur.http2 {
                restart.push("http2");
                new.http2 = cur.http2.clone();
            }
            let compiled = Compiled::build(&new, Some(&self.metrics))?;
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
                // the token and allowed host names compiled above do apply
                new.admin.enabled = cur.admin.enabled;
                new.admin.listen = cur.admin.listen;
            }
            // certificates are re-read (below); whether and where TLS is spoken needs a restart
            if new.tls.as_ref().map(|t| t.listen) != cur.tls.as_ref().map(|t| t.listen) {
                restart.push("tls.listen");
                new.tls = cur.tls.clone();
            }
            if new.access_log != cur.access_log {
                restart.push("access_log");
                new.access_log = cur.access_log.clone();
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
            if let (Some(acceptor), Some(tls)) = (&self.tls, compiled.tls) {
                if new.tls.is_some() {
                    acceptor.swap(tls);
                }
            }
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
            let e = ConfigError::new(
                cur.name(),
                "the running configuration did not come from a file; nothing to re-read",
            );
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

    /// The request path. `served` (when the access log is on) learns the class, queue wait and service time.
    async fn serve(&self, mut req: Request, served: Option<&mut Served>) -> Response {
        let active = self.active();
        let c = active.classifier.classify_async(&req).await;
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
        if let Some(s) = served {
            s.class = Some(class.clone());
            s.queue_wait = Some(waited);
            s.service = Some(service);
        }
        if active.headers.class {
            resp = resp.with_header("X-Ordo-Class", class.to_string());
        }
        if active.headers.queue_wait {
            resp = resp.with_header("X-Ordo-Queue-Wait-Us", waited.as_micros().to_string());
        }
        resp
    }
}

/// Remove a route prefix from the (normalised) path, the one routing matched, and rebuild the target from
/// what is left and the query, so every spelling of the prefix (`//p`, `%70`, `/x/../p`, absolute-form) is
/// stripped alike.
fn strip(req: &mut Request, prefix: &str) {
    if let Some(rest) = req.path.strip_prefix(prefix) {
        req.path = if rest.starts_with('/') {
            rest.to_string()
        } else {
            format!("/{rest}")
        };
        let mut target = bytes::BytesMut::new();
        crate::http::parse::origin_form(&req.path, req.query.as_deref(), &mut target);
        req.target = String::from_utf8_lossy(&target).into_owned();
    }
}

/// The main listener's handler.
struct App(Arc<Shared>);

impl Handler for App {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let shared = self.0.clone();
        async move {
            let Some(log) = &shared.access_log else {
                return shared.serve(req, None).await;
            };
            let start = Instant::now();
            let line = RequestLine::of(&req);
            let mut served = Served::default();
            let resp = shared.serve(req, Some(&mut served)).await;
            log.log(&line, &resp, &served, start.elapsed());
            resp
        }
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
        let tls = compiled
            .tls
            .map(|c| Arc::new(crate::tls::TlsAcceptor::new(c)));
        // `tls.listen`: an HTTPS listener beside the plain one; without it the main listener speaks TLS
        let tls_listener = match cfg.tls.as_ref().and_then(|t| t.listen) {
            Some(addr) => {
                Some(
                    TcpListener::bind(addr)
                        .await
                        .map_err(|error| StartError::Bind {
                            key: "tls.listen",
                            addr,
                            error,
                        })?,
                )
            }
            None => None,
        };
        let tls_addr = match &tls_listener {
            Some(l) => l.local_addr().ok(),
            None => tls.as_ref().map(|_| local_addr),
        };
        let access_log = match &cfg.access_log.path {
            Some(p) => Some(
                crate::access_log::AccessLog::start(&cfg.access_log, &cfg.resolve(p))
                    .map_err(|m| cfg.locate(Invalid::new(keypath!["access_log", "path"], m)))?,
            ),
            None => None,
        };
        let limits = Arc::new(cfg.limits.clone());
        let http2 = Arc::new(cfg.http2.clone());
        let shared = Arc::new(Shared {
            gate: gate.clone(),
            active: RwLock::new(Arc::new(compiled.active)),
            config: Mutex::new(cfg),
            metrics,
            started: Instant::now(),
            local_addr,
            admin_addr,
            tls: tls.clone(),
            tls_addr,
            access_log,
        });
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let timer = tokio::spawn(gate.clone().run_timer());
        let app = Arc::new(App(shared.clone()));
        let (main_tls, extra_tls) = match tls_listener {
            Some(l) => (None, Some((l, tls.clone()))),
            None => (tls, None),
        };
        let main = tokio::spawn(crate::http::run_listener_with(
            listener,
            app.clone(),
            limits.clone(),
            shutdown_rx.clone(),
            main_tls,
            http2.clone(),
        ));
        let https = extra_tls.map(|(l, tls)| {
            tokio::spawn(crate::http::run_listener_with(
                l,
                app,
                limits,
                shutdown_rx.clone(),
                tls,
                http2,
            ))
        });
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
            https,
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
    /// The `tls.listen` listener, when there is one.
    https: Option<JoinHandle<std::io::Result<()>>>,
    admin: Option<JoinHandle<std::io::Result<()>>>,
    timer: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the HTTP listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The address that speaks TLS: `tls.listen`'s, or the main listener's when `[tls]` has no `listen`
    /// (None without `[tls]`).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.shared.tls_addr
    }

    /// Reopen the access log file (what SIGUSR1 does).
    pub fn reopen_access_log(&self) {
        if let Some(log) = &self.shared.access_log {
            log.reopen();
        }
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
    /// finish within `shutdown_grace`, then close the connections still open (a body still arriving, a
    /// response still streaming) and return. Returns `Ok` either way; the log says which.
    pub async fn shutdown(self) -> std::io::Result<()> {
        self.shutdown_or(std::future::pending()).await
    }

    /// [`ServerHandle::shutdown`] that also gives up waiting when `cut` resolves (a second signal).
    async fn shutdown_or(
        mut self,
        cut: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        let grace = self.shared.config().shutdown_grace;
        let _ = self.shutdown_tx.send(true);
        self.shared.gate.close();
        let give_up = async {
            tokio::select! {
                _ = tokio::time::sleep(grace) => tracing::warn!(
                    grace = %crate::http::duration::format(grace),
                    "shutdown grace over: closing the connections still open"
                ),
                _ = cut => tracing::warn!("closing the connections still open"),
            }
        };
        let mut give_up = std::pin::pin!(give_up);
        let mut cut_short = false;
        let r = tokio::select! {
            r = &mut self.main => match r {
                Ok(r) => r,
                Err(e) => Err(std::io::Error::other(e)),
            },
            _ = &mut give_up => {
                cut_short = true;
                // dropping the listener task ends every connection task it spawned
                self.main.abort();
                let _ = (&mut self.main).await;
                Ok(())
            }
        };
        // the `tls.listen` listener (when there is one), then the admin listener, likewise
        for mut a in [self.https.take(), self.admin.take()].into_iter().flatten() {
            if !cut_short {
                tokio::select! {
                    _ = &mut a => {}
                    _ = &mut give_up => cut_short = true,
                }
            }
            if cut_short {
                a.abort();
                let _ = a.await;
            }
        }
        let _ = self.timer.await;
        r
    }

    /// Serve until SIGTERM or SIGINT (then shut down gracefully); SIGHUP re-reads the configuration file,
    /// SIGUSR1 reopens the access log. Under systemd (`$NOTIFY_SOCKET`) readiness, reloads and the stop are
    /// announced with sd_notify.
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
        let mut usr1 = signal(SignalKind::user_defined1())?;
        ready(&self);
        crate::sd_notify::notify("READY=1");
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
                _ = int.recv() => { tracing::info!("SIGINT: shutting down"); break; }
                _ = hup.recv() => {
                    tracing::info!("SIGHUP: reloading configuration");
                    crate::sd_notify::notify(&crate::sd_notify::reloading());
                    let _ = self.reload_from_file();
                    crate::sd_notify::notify("READY=1");
                }
                _ = usr1.recv() => {
                    tracing::info!("SIGUSR1: reopening the access log");
                    self.reopen_access_log();
                }
            }
        }
        crate::sd_notify::notify("STOPPING=1");
        // a second SIGTERM or SIGINT ends the grace at once
        let second = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("second SIGTERM"),
                _ = int.recv() => tracing::info!("second SIGINT"),
            }
        };
        self.shutdown_or(second).await
    }
}
