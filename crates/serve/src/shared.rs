//! The running server's shared state and its request path: the active configuration (swapped whole on
//! reload), the gate, metrics and access log; `serve` takes a request through classify → gate → the route's
//! backend → response and records it. The listeners, the admin endpoints and the handle all hold it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ordo_sched::Meta;

use crate::access_log::{RequestLine, Served};
use crate::classify::{Found, size_hint};
use crate::compile::{Active, Compiled, nanos};
use crate::config::{ConfigError, Invalid, ServeConfig};
use crate::gate::{FULL_SHARE, Gate, Overloaded};
use crate::http::{Handler, Request, Response};
use crate::keypath;
use crate::metrics::{ClassMetrics, Metrics};

/// State shared by the request path, the admin listener and the handle.
pub(crate) struct Shared {
    pub(crate) gate: Gate,
    /// Read by every request without a lock (see `active`), swapped whole on reload.
    pub(crate) active: arc_swap::ArcSwap<Active>,
    pub(crate) config: Mutex<ServeConfig>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) started: Instant,
    pub(crate) local_addr: SocketAddr,
    pub(crate) admin_addr: Option<SocketAddr>,
    /// The TLS listener's certificates (swapped on reload), when `[tls]` is configured.
    pub(crate) tls: Option<Arc<crate::tls::TlsAcceptor>>,
    /// The address that speaks TLS (the main listener's or `tls.listen`'s).
    pub(crate) tls_addr: Option<SocketAddr>,
    pub(crate) access_log: Option<crate::access_log::AccessLog>,
    /// Connections accepted by each serving thread's listeners (`/status`'s `accepted_per_thread`).
    pub(crate) accepted: Vec<Arc<std::sync::atomic::AtomicU64>>,
    /// Fleet mode (`[fleet]`): the Redis link, shared rate limits and this instance's lease.
    pub(crate) fleet: Option<Arc<crate::fleet::Fleet>>,
}

impl Shared {
    /// The configuration the request path reads. A guard, not a clone: it pins the configuration in a
    /// slot of the calling thread's own, where a clone (or a lock) would write a reference count every
    /// thread shares (arc-swap falls back to the count past a few guards held at once on one thread).
    pub(crate) fn active(&self) -> arc_swap::Guard<Arc<Active>> {
        self.active.load()
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
            // the default `workers` (per serving thread) counts the threads the server runs
            new.started_threads = cur.started_threads;
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
            if new.coalesce != cur.coalesce {
                restart.push("coalesce");
                new.coalesce = cur.coalesce;
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
            if new.fleet != cur.fleet {
                restart.push("fleet");
                new.fleet = cur.fleet.clone();
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
            self.active.store(Arc::new(compiled.active));
            if let (Some(acceptor), Some(tls)) = (&self.tls, compiled.tls) {
                if new.tls.is_some() {
                    acceptor.swap(tls);
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => {
                tracing::info!(config = %new.name(), policy = %crate::config::policy_name(new.policy), workers = %new.workers, "configuration reloaded");
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

    /// Scales each lane of workers to what its proxy routes' upstreams can still take
    /// (`capacity_follows_health`): the healthy share of their weight (a lane shared by several routes
    /// sums them; a lane without such a route, or whose upstreams are all out — answered 503 at once
    /// anyway — keeps its whole limit). Called every [`CAPACITY_EVERY`] by the server.
    pub(crate) fn follow_capacity(&self) {
        let active = self.active();
        let mut per_lane: Vec<(&Arc<str>, f64, f64)> = Vec::new();
        for route in active.router.routes() {
            let (Some((up, all)), Some(lane)) =
                (route.backend.capacity(), active.lane_of(&route.key))
            else {
                continue;
            };
            match per_lane.iter_mut().find(|(k, ..)| ***k == **lane) {
                Some(e) => {
                    e.1 += up;
                    e.2 += all;
                }
                None => per_lane.push((lane, up, all)),
            }
        }
        for (_, lane) in &active.lanes {
            let share = per_lane
                .iter()
                .find(|(k, ..)| ***k == **lane)
                .map_or(FULL_SHARE, |(_, up, all)| lane_share(*up, *all));
            self.gate.set_share(lane, share);
        }
    }

    /// The request path. `served` (when the access log is on) learns the class, queue wait and service time.
    async fn serve(
        &self,
        active: arc_swap::Guard<Arc<Active>>,
        mut req: Request,
        served: Option<&mut Served>,
    ) -> Response {
        let c = active.classifier.classify_async(&req).await;
        if c.lua_error {
            self.metrics.lua_errors.inc();
        }
        // the class's counters, resolved when the configuration was compiled (no lock, no clone)
        let looked_up;
        let cm: &ClassMetrics = match active.class_metrics.get(c.class) {
            Some(m) => m,
            None => {
                looked_up = self.metrics.class(c.class_name);
                &looked_up
            }
        };
        cm.arrive();
        let route = match active.router.route_request(&req) {
            Found::Route(r) => r,
            Found::NoRoute => {
                self.metrics.not_found();
                if let Some(r) = active.responses_of(crate::metrics::NO_ROUTE) {
                    r.count(404);
                }
                return Response::text(404, "no route for this path\n");
            }
            Found::Misdirected => {
                if let Some(r) = active.responses_of(crate::metrics::NO_ROUTE) {
                    r.count(421);
                }
                return Response::text(
                    421,
                    "misdirected request: Host does not match the TLS server name\n",
                );
            }
        };
        // responses by status class, striped per thread like the class counters
        let count = |status: u16| {
            if let Some(r) = active.responses_of(&route.prefix) {
                r.count(status);
            }
        };
        if route.strip_prefix && route.prefix != "/" {
            strip(&mut req, route.prefix.trim_end_matches('/'));
        }
        // a proxy loop is answered without taking a worker (its first pass may hold the only one)
        if let Some(resp) = route.backend.answer_before_scheduling(&req) {
            count(resp.status);
            return resp;
        }
        // rate limit and access control (crate::edge), before the request takes a place in the queue
        let edge = active.edge.route(&route.prefix);
        let extra = match edge {
            Some(e) => match e
                .admit(
                    &req,
                    c.class_name,
                    &self.metrics.edge,
                    self.fleet.as_deref(),
                )
                .await
            {
                Ok(extra) => extra,
                Err(resp) => return resp,
            },
            None => Vec::new(),
        };
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
        let acquired = match active.lane_of(&route.key) {
            Some(lane) => self.gate.acquire_on(meta, c.class_name, lane).await,
            None => self.gate.acquire(meta, c.class_name).await,
        };
        let mut permit = match acquired {
            Ok(p) => p,
            Err(Overloaded { reason }) => {
                cm.reject(reason);
                let mut resp = Response::text(503, &format!("overloaded: {}\n", reason.as_str()))
                    .with_header("Retry-After", active.retry_after_secs.to_string());
                if active.headers.class {
                    resp = resp.with_header("X-Ordo-Class", c.class_name.to_string());
                }
                count(resp.status);
                return resp;
            }
        };
        // the class a queue dispatch chose (after a reload it can differ from the classified one)
        let requeued = permit.class_name().filter(|n| *n != c.class_name).cloned();
        let class = requeued.as_ref().unwrap_or(c.class_name);
        let other;
        let dm = match &requeued {
            None => cm,
            Some(n) => {
                other = self.metrics.class(n);
                &other
            }
        };
        dm.dispatch(permit.waited());
        let info = active.class_info(class);
        let mut resp = match edge {
            Some(e) => e.call(&route.backend, &req, info).await,
            None => route.backend.call_at(&req, info).await,
        };
        // from dispatch to the backend's answer, on the gate's clock: the figure the scheduler learns too
        let service = permit.finish(matches!(resp.status, 502..=504));
        if active.needs_size {
            // (only srpt, wfq and lua read what a route learned: the others skip the shared write)
            route.learn(service);
        }
        dm.complete(service);
        let waited = permit.waited();
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
        let resp = match edge {
            Some(e) => e.finish(&req, resp, extra),
            None => resp,
        };
        count(resp.status);
        resp
    }
}

/// How often the lanes follow their upstreams' health ([`Shared::follow_capacity`]).
pub(crate) const CAPACITY_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A lane's share of its limit, in thousandths, when its upstreams' weight `up` of `all` takes requests:
/// the whole when all of it or none of it does (with none, every request is answered 503 at once: there
/// is nothing to hold back).
pub(crate) fn lane_share(up: f64, all: f64) -> u32 {
    if !(up > 0.0 && up < all) {
        return FULL_SHARE;
    }
    ((up / all * f64::from(FULL_SHARE)).round() as u32).clamp(1, FULL_SHARE)
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
        req.set_target(String::from_utf8_lossy(&target).into_owned());
    }
}

/// The main listener's handler, one per serving thread. The server state is reached through an `Arc` of the
/// thread's own (an `Arc` of the shared `Arc`): each request's future holds a clone, and cloning the
/// shared `Arc` itself would write a reference count every thread's requests share — a cache line that
/// would move between cores on every request.
#[allow(clippy::redundant_allocation)] // the second allocation is the point: a reference count per thread
pub(crate) struct App(Arc<Arc<Shared>>);

impl App {
    /// The handler of one serving thread.
    pub(crate) fn for_thread(shared: &Arc<Shared>) -> Self {
        App(Arc::new(Arc::clone(shared)))
    }
}

impl Handler for App {
    fn handle(
        &self,
        mut req: Request,
    ) -> impl std::future::Future<Output = Response> + Send + 'static {
        let shared = self.0.clone();
        async move {
            // (one configuration for the whole request: its forwarding settings and its route)
            let active = shared.active();
            let id = active.forwarding.prepare(&mut req);
            let with_id = |resp: Response| match id {
                Some(id) => resp.with_header("X-Request-Id", id.into_string()),
                None => resp,
            };
            let Some(log) = &shared.access_log else {
                return with_id(shared.serve(active, req, None).await);
            };
            let start = Instant::now();
            let line = RequestLine::of(&req);
            let mut served = Served::default();
            let resp = shared.serve(active, req, Some(&mut served)).await;
            log.log(&line, &resp, &served, start.elapsed());
            with_id(resp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_takes_the_healthy_share_of_its_upstreams_weight() {
        // (healthy weight, whole weight) → share in thousandths
        for (up, all, want) in [
            (3.0, 3.0, FULL_SHARE),
            (1.0, 3.0, 333),
            (2.0, 3.0, 667),
            (0.1, 3.0, 33), // one upstream back from an ejection, at the start of its slow start
            (0.0, 3.0, FULL_SHARE), // all out: answered 503 at once, nothing to hold back
            (0.0001, 1000.0, 1),
            (0.0, 0.0, FULL_SHARE),
        ] {
            assert_eq!(lane_share(up, all), want, "{up} of {all}");
        }
    }
}
