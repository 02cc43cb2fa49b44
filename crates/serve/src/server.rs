//! Server assembly: binds the listeners (plain, TLS, admin) around the shared state, starts the gate's
//! timer and the serving threads (each with its own runtime and SO_REUSEPORT listener), and the handle
//! that reloads, reports and shuts down gracefully (on signals, too). `Server::start` is the API the
//! binary, the demo and the tests use.

use crate::serving_thread::set_serving_thread;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::compile::Compiled;
use crate::config::{ConfigError, Invalid, ServeConfig};
use crate::gate::Gate;
use crate::keypath;
use crate::metrics::Metrics;
use crate::shared::{App, Shared};

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
    /// A serving thread (or its runtime) could not be started.
    #[error("cannot start serving thread {index}: {error}")]
    Thread { index: usize, error: std::io::Error },
}

/// The listening sockets for `addr`, one per serving thread. One thread: an ordinary listener. Several:
/// SO_REUSEPORT listeners, the kernel spreading connections over them — after a bind without SO_REUSEPORT
/// has shown the address is free (so a second server on the same address still fails with "address in
/// use" instead of sharing its connections); an address with port 0 gets its port from the first.
async fn bind_listeners(
    key: &'static str,
    addr: SocketAddr,
    n: usize,
) -> Result<Vec<std::net::TcpListener>, StartError> {
    let err = |error| StartError::Bind { key, addr, error };
    if n <= 1 {
        let l = TcpListener::bind(addr).await.map_err(err)?;
        return Ok(vec![l.into_std().map_err(err)?]);
    }
    /// What tokio's `TcpListener::bind` queues.
    const BACKLOG: i32 = 1024;
    let mut at = addr;
    let mut out = Vec::with_capacity(n);
    if addr.port() != 0 {
        drop(std::net::TcpListener::bind(addr).map_err(err)?);
    }
    for _ in 0..n {
        let l = ordo_sys::net::bind_reuseport(at, BACKLOG).map_err(err)?;
        at = l.local_addr().map_err(err)?;
        out.push(l);
    }
    Ok(out)
}

/// A serving thread beyond the caller's: its current-thread runtime runs until `stop` is sent or dropped.
struct Worker {
    stop: Option<oneshot::Sender<()>>,
    thread: std::thread::JoinHandle<()>,
}

/// Starts serving thread `index`: a current-thread runtime on a thread of its own, returned with its handle
/// (to spawn its listeners on).
fn start_worker(
    index: usize,
    coalesce: std::time::Duration,
) -> Result<(Worker, tokio::runtime::Handle), StartError> {
    let err = |error| StartError::Thread { index, error };
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder
        .enable_all()
        .on_thread_start(move || set_serving_thread(index));
    let rt = ordo_sys::coalesce::coalesce_wakeups(&mut builder, coalesce)
        .build()
        .map_err(err)?;
    let handle = rt.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("ordo-serve-{index}"))
        .spawn(move || {
            set_serving_thread(index);
            rt.block_on(async {
                let _ = stopped.await;
            });
            // its listeners have ended (or were aborted) by now: nothing left to wait for
            rt.shutdown_background();
        })
        .map_err(err)?;
    Ok((
        Worker {
            stop: Some(stop),
            thread,
        },
        handle,
    ))
}

/// Entry point: `Server::start(config).await`.
pub struct Server;

impl Server {
    /// Compile the configuration, bind the listener (and the admin listener unless disabled) and start
    /// serving on the current tokio runtime (whatever `threads` says: see [`Server::start_threads`]).
    pub async fn start(cfg: ServeConfig) -> Result<ServerHandle, StartError> {
        Self::start_threads(cfg, 1).await
    }

    /// [`Server::start`] on `threads` serving threads (at least 1), nginx-style: the caller's runtime and
    /// `threads - 1` more threads, each with a current-thread runtime of its own and its own listener on
    /// `listen` (and on `tls.listen`) with SO_REUSEPORT, so the kernel spreads connections over the threads
    /// and each serves its connections start to end — on a current-thread runtime, a connection's first
    /// request inline in the accept loop. The queue, the workers, the configuration, the metrics and
    /// `limits.max_connections` are the server's, shared by all threads; the admin listener and the gate's
    /// timer run on the caller's runtime.
    pub async fn start_threads(
        cfg: ServeConfig,
        threads: usize,
    ) -> Result<ServerHandle, StartError> {
        let threads = threads.max(1);
        let mut cfg = cfg;
        cfg.started_threads = Some(threads);
        let metrics = Arc::new(Metrics::new());
        let compiled = Compiled::build(&cfg, Some(&metrics))?;
        let gate = Gate::with_plan(compiled.sched, compiled.pickers, compiled.plan)
            .map_err(|e| cfg.locate(Invalid::new(keypath!["classes"], e.0)))?;
        let listeners = bind_listeners("listen", cfg.listen, threads).await?;
        let local_addr = listeners[0]
            .local_addr()
            .map_err(|error| StartError::Bind {
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
        // `tls.listen`: an HTTPS listener beside the plain one (one per thread); without it the main listener
        // speaks TLS
        let tls_listeners = match cfg.tls.as_ref().and_then(|t| t.listen) {
            Some(addr) => Some(bind_listeners("tls.listen", addr, threads).await?),
            None => None,
        };
        let tls_addr = match &tls_listeners {
            Some(l) => l[0].local_addr().ok(),
            None => tls.as_ref().map(|_| local_addr),
        };
        let access_log = match &cfg.access_log.path {
            Some(p) => Some(
                crate::access_log::AccessLog::start(
                    &cfg.access_log,
                    &cfg.resolve(p),
                    metrics.edge.access_log_dropped.clone(),
                )
                .map_err(|m| cfg.locate(Invalid::new(keypath!["access_log", "path"], m)))?,
            ),
            None => None,
        };
        let mut limits = cfg.limits.clone();
        // (checked when the configuration was compiled)
        limits.proxy_protocol_from = cfg
            .forwarded
            .trusted_proxies
            .iter()
            .filter_map(|s| crate::cidr::Cidr::parse(s).ok())
            .collect();
        let limits = Arc::new(limits);
        let http2 = Arc::new(cfg.http2.clone());
        let accepted: Vec<Arc<AtomicU64>> =
            (0..threads).map(|_| Arc::new(AtomicU64::new(0))).collect();
        let coalesce = cfg.coalesce;
        let fleet = match &cfg.fleet {
            Some(f) => {
                let fleet = crate::fleet::Fleet::new(f, local_addr, metrics.fleet.clone())
                    .map_err(|m| cfg.locate(Invalid::new(keypath!["fleet", "redis"], m)))?;
                if fleet.leases() {
                    // the demand it publishes, and the bookkeeping of the lease to come
                    gate.count_classes();
                }
                Some(Arc::new(fleet))
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            gate: gate.clone(),
            active: arc_swap::ArcSwap::from_pointee(compiled.active),
            config: Mutex::new(cfg),
            metrics,
            started: Instant::now(),
            local_addr,
            admin_addr,
            tls: tls.clone(),
            tls_addr,
            access_log,
            accepted: accepted.clone(),
            fleet: fleet.clone(),
        });
        // the serving threads beyond this one (all started before anything is spawned, so a failure leaves
        // nothing running: dropping a Worker stops its thread)
        let mut workers = Vec::with_capacity(threads - 1);
        let mut handles = vec![tokio::runtime::Handle::current()];
        for index in 1..threads {
            let (w, h) = start_worker(index, coalesce)?;
            workers.push(w);
            handles.push(h);
        }
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let timer = tokio::spawn(gate.clone().run_timer());
        // the lanes follow their upstreams' health (a weak reference: it ends with the server)
        let weak = Arc::downgrade(&shared);
        let capacity = crate::listen::AbortOnDrop(tokio::spawn(async move {
            let mut every = tokio::time::interval(crate::shared::CAPACITY_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                shared.follow_capacity();
            }
        }));
        let fleet_sync = fleet.map(|f| {
            // the running configuration's classes, while the server lives
            let running = Arc::downgrade(&shared);
            let classes = move || {
                running.upgrade().map(|s| {
                    s.config()
                        .effective_classes()
                        .iter()
                        .map(|c| (Arc::from(c.name.as_str()), c.weight))
                        .collect()
                })
            };
            crate::listen::AbortOnDrop(tokio::spawn(f.run(gate.clone(), classes)))
        });
        let slots = crate::listen::Slots::new(limits.max_connections);
        let release = crate::listen::AbortOnDrop(tokio::spawn(
            crate::listen::release_after_closes(slots.clone()),
        ));
        let (main_tls, extra_tls) = match &tls_listeners {
            Some(_) => (None, tls.clone()),
            None => (tls, None),
        };
        let mut tls_listeners = tls_listeners.map(Vec::into_iter);
        let mut main = Vec::with_capacity(threads);
        let mut https = Vec::new();
        for ((listener, rt), accepted) in listeners.into_iter().zip(&handles).zip(&accepted) {
            let app = Arc::new(App::for_thread(&shared));
            main.push(rt.spawn(crate::listen::run_listener_shared(
                listener,
                app.clone(),
                limits.clone(),
                shutdown_rx.clone(),
                main_tls.clone(),
                http2.clone(),
                slots.clone(),
                accepted.clone(),
            )));
            if let Some(l) = tls_listeners.as_mut().and_then(Iterator::next) {
                https.push(rt.spawn(crate::listen::run_listener_shared(
                    l,
                    app.clone(),
                    limits.clone(),
                    shutdown_rx.clone(),
                    extra_tls.clone(),
                    http2.clone(),
                    slots.clone(),
                    accepted.clone(),
                )));
            }
        }
        let admin = admin_listener.map(|l| {
            tokio::spawn(crate::listen::run_listener(
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
            workers,
            _release: release,
            _capacity: capacity,
            _fleet_sync: fleet_sync,
        })
    }
}

/// A running server.
pub struct ServerHandle {
    shared: Arc<Shared>,
    shutdown_tx: watch::Sender<bool>,
    /// The `listen` listeners, one per serving thread (the first on the caller's runtime).
    main: Vec<JoinHandle<std::io::Result<()>>>,
    /// The `tls.listen` listeners, when there are.
    https: Vec<JoinHandle<std::io::Result<()>>>,
    admin: Option<JoinHandle<std::io::Result<()>>>,
    timer: JoinHandle<()>,
    /// The serving threads beyond the caller's.
    workers: Vec<Worker>,
    _release: crate::listen::AbortOnDrop,
    /// The task that scales the lanes to their upstreams' health (`Shared::follow_capacity`).
    _capacity: crate::listen::AbortOnDrop,
    /// Fleet mode's sync task (publish demand, read leases), ended with the handle.
    _fleet_sync: Option<crate::listen::AbortOnDrop>,
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
        // the `listen` listeners (their result is the shutdown's), then the `tls.listen` ones, then the admin
        // listener: each ends once its connections have; when the grace runs out, the rest are aborted
        // (dropping a listener's task ends every connection task it spawned)
        let mains = std::mem::take(&mut self.main)
            .into_iter()
            .map(|h| (h, true));
        let others = std::mem::take(&mut self.https)
            .into_iter()
            .chain(self.admin.take())
            .map(|h| (h, false));
        let mut r = Ok(());
        for (mut a, is_main) in mains.chain(others) {
            let mut result = None;
            if !cut_short {
                tokio::select! {
                    j = &mut a => result = Some(j),
                    _ = &mut give_up => cut_short = true,
                }
            }
            if cut_short && result.is_none() {
                a.abort();
                let _ = a.await;
            }
            if let (true, Some(j), true) = (is_main, result, r.is_ok()) {
                r = match j {
                    Ok(x) => x,
                    Err(e) => Err(std::io::Error::other(e)),
                };
            }
        }
        let _ = (&mut self.timer).await;
        // the other serving threads have nothing left to run: stop them and wait for them to end
        let workers = std::mem::take(&mut self.workers);
        if !workers.is_empty() {
            let joined = tokio::task::spawn_blocking(move || {
                for mut w in workers {
                    drop(w.stop.take());
                    let _ = w.thread.join();
                }
            });
            let _ = joined.await;
        }
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
