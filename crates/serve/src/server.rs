//! Server assembly: binds the listeners (plain, TLS, admin) around the shared state, starts the gate's
//! timer, and the handle that reloads, reports and shuts down gracefully (on signals, too).
//! `Server::start` is the API the binary, the demo and the tests use.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use tokio::net::TcpListener;
use tokio::sync::watch;
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
        let main = tokio::spawn(crate::listen::run_listener_with(
            listener,
            app.clone(),
            limits.clone(),
            shutdown_rx.clone(),
            main_tls,
            http2.clone(),
        ));
        let https = extra_tls.map(|(l, tls)| {
            tokio::spawn(crate::listen::run_listener_with(
                l,
                app,
                limits,
                shutdown_rx.clone(),
                tls,
                http2,
            ))
        });
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
