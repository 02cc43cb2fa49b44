//! The admin listener: Prometheus `/metrics`, `/status` as JSON and `POST /reload`, served on its own address
//! through the same HTTP layer as the main listener — and only to whom may use it (`admin_guard` refuses
//! requests naming another host, coming from another web origin or without the configured token before any
//! endpoint runs).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

use crate::admin_guard::refuse;
use crate::http::{Handler, Request, Response};
use crate::metrics::Format;
use crate::shared::Shared;
use ordo_sched::RejectReason;
/// Content types a browser may send cross-origin without asking first (a CORS "simple" request): `POST
/// /reload` carrying one is refused, so no form anywhere can trigger a reload.
fn cors_simple_body(req: &Request) -> bool {
    req.header("content-type").is_some_and(|ct| {
        let media = ct.split(';').next().unwrap_or("").trim();
        [
            "application/x-www-form-urlencoded",
            "multipart/form-data",
            "text/plain",
        ]
        .iter()
        .any(|m| media.eq_ignore_ascii_case(m))
    })
}

/// The admin handler.
pub(crate) struct AdminApp(Arc<Shared>);

impl AdminApp {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        AdminApp(shared)
    }
}

impl Handler for AdminApp {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let shared = self.0.clone();
        async move {
            let active = shared.active();
            match refuse(&active.admin, shared.admin_addr, &req) {
                Some(resp) => resp,
                None => route(&shared, &req),
            }
        }
    }
}

fn route(shared: &Shared, req: &Request) -> Response {
    let get = req.method == "GET" || req.method == "HEAD";
    match (req.path.as_str(), get, req.method == "POST") {
        ("/metrics", true, _) => {
            let format = Format::from_accept(req.header("accept"));
            shared.metrics.set_upstreams(&upstream_snapshots(shared));
            let text = shared.metrics.encode_as(&shared.gate.snapshot(), format);
            Response::bytes(200, format.content_type(), Bytes::from(text))
                .with_header("Vary", "Accept")
        }
        ("/status", true, _) => {
            let body = serde_json::to_vec_pretty(&status(shared)).unwrap_or_default();
            Response::bytes(200, "application/json", Bytes::from(body))
        }
        ("/reload", _, true) if cors_simple_body(req) => Response::text(
            415,
            "reload takes no form or text body (send a bare POST: curl -X POST .../reload)",
        ),
        ("/reload", _, true) => match shared.reload_from_file() {
            Ok(()) => Response::text(200, "reloaded\n"),
            Err(e) => Response::text(400, &format!("reload refused: {e}\n")),
        },
        ("/metrics" | "/status", false, _) => {
            Response::text(405, "use GET\n").with_header("Allow", "GET, HEAD")
        }
        ("/reload", _, false) => Response::text(405, "use POST\n").with_header("Allow", "POST"),
        _ => Response::text(
            404,
            "admin endpoints: GET /metrics, GET /status, POST /reload\n",
        ),
    }
}

/// The `/status` document: configuration summary, per-class queue depth and counters, uptime.
pub(crate) fn status(shared: &Shared) -> serde_json::Value {
    let cfg = shared.config();
    let snap = shared.gate.snapshot();
    let classes_cfg = cfg.effective_classes();
    let classes: Vec<_> = snap
        .class_names
        .iter()
        .zip(&snap.class_queued)
        .enumerate()
        .map(|(i, (name, queued))| {
            let m = shared.metrics.class(name);
            let c = classes_cfg.iter().find(|c| *c.name == **name);
            let rejected: serde_json::Map<String, serde_json::Value> = RejectReason::ALL
                .iter()
                .map(|r| (r.as_str().to_string(), json!(m.rejected(*r))))
                .collect();
            json!({
                "name": &**name,
                "weight": c.map(|c| c.weight),
                "priority": c.map(|c| c.priority),
                "deadline_ms": c.and_then(|c| c.deadline).map(|d| d.as_secs_f64() * 1e3),
                "queued": queued,
                "arrivals": m.arrivals(),
                "dispatched": m.dispatched(),
                "completed": m.completed(),
                "rejected": rejected,
                "reserved_workers": snap.class_reserved.get(i).copied().unwrap_or(0),
                "standing": snap.class_standing.get(i).copied().unwrap_or(false),
                "codel_target_ms": c.and_then(|c| c.codel.as_ref()).map(|t| t.target.as_secs_f64() * 1e3),
                "lifo": c.is_some_and(|c| c.lifo),
                "nice": c.and_then(|c| c.nice),
                "thread_policy": c.and_then(|c| c.thread_policy).map(|p| p.to_string()),
                "cpus": c.and_then(|c| c.cpus).map(|s| s.to_string()),
            })
        })
        .collect();
    let routes: Vec<_> = cfg
        .effective_routes()
        .iter()
        .map(|r| {
            let backend = if r.static_files.is_some() {
                "static"
            } else if r.proxy.is_some() {
                "proxy"
            } else if r.redirect.is_some() {
                "redirect"
            } else {
                "synthetic"
            };
            json!({ "prefix": r.prefix, "host": r.host, "backend": backend, "strip_prefix": r.strip_prefix })
        })
        .collect();
    let spins = ordo_sys::coalesce::coalesce_spins();
    json!({
        "config": cfg.name(),
        "listen": shared.local_addr.to_string(),
        "admin": shared.admin_addr.map(|a| a.to_string()),
        "policy": crate::config::policy_name(cfg.policy),
        "workers": snap.workers,
        "busy": snap.busy,
        "queued": snap.queued,
        "threads": cfg.threads,
        "accepted_per_thread": shared
            .accepted
            .iter()
            .map(|a| a.load(std::sync::atomic::Ordering::Relaxed))
            .collect::<Vec<_>>(),
        "coalesce": {
            "wait": crate::http::duration::format(cfg.coalesce),
            "spins_paid_off": spins.0,
            "spins_missed": spins.1,
        },
        "shutting_down": snap.closed,
        "uptime_s": shared.started.elapsed().as_secs_f64(),
        "reloads": { "ok": shared.metrics.reloads(true), "error": shared.metrics.reloads(false) },
        "abandoned": snap.abandoned,
        "lua_errors": shared.metrics.lua_errors.get(),
        "classes": classes,
        "routes": routes,
        "workers_setting": match cfg.workers {
            crate::overload::Workers::Fixed(n) => json!(n),
            crate::overload::Workers::Auto => json!("auto"),
            w @ crate::overload::Workers::PerThread(_) => json!(w.to_string()),
        },
        "lanes": lanes(&snap),
        "upstreams": upstreams(shared),
        "fleet": shared.fleet.as_ref().map(|f| f.status()),
    })
}

/// `(route prefix, upstreams)` of each proxy route of the running configuration.
fn upstream_snapshots(
    shared: &Shared,
) -> Vec<(String, Vec<crate::backend::proxy::UpstreamSnapshot>)> {
    shared
        .active()
        .router
        .routes()
        .iter()
        .filter_map(|r| match &r.backend {
            crate::backend::Backend::Proxy(p) => Some((r.prefix.clone(), p.snapshot())),
            _ => None,
        })
        .collect()
}

/// Each proxy route's upstreams: health, ejections, load.
fn upstreams(shared: &Shared) -> Vec<serde_json::Value> {
    upstream_snapshots(shared)
        .into_iter()
        .map(|(r, ups)| {
            json!({
                "route": r,
                "upstreams": ups.iter().map(|u| json!({
                    "address": u.address,
                    "weight": u.weight,
                    "state": u.state.as_str(),
                    "ejected_for_s": match u.state {
                        crate::backend::proxy::HealthState::Ejected(d) => Some(d.as_secs_f64()),
                        _ => None,
                    },
                    "consecutive_failures": u.consecutive_failures,
                    "ejections": u.ejections,
                    "in_flight": u.in_flight,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

/// Each lane of workers: its limit now and, when adaptive, what its limiter measured.
fn lanes(snap: &crate::gate::GateSnapshot) -> Vec<serde_json::Value> {
    let ms = |n: u64| n as f64 / 1e6;
    snap.lanes
        .iter()
        .map(|l| {
            let lim = l.limiter.as_ref();
            json!({
                "route": &*l.key,
                "algorithm": lim.map_or("fixed", |s| s.algorithm.as_str()),
                "limit": l.limit,
                "inflight": l.busy,
                "queued": l.queued,
                "baseline_ms": lim.and_then(|s| s.baseline).map(ms),
                "last_rtt_ms": lim.and_then(|s| s.last_rtt).map(ms),
                "probing": lim.is_some_and(|s| s.probing),
                "retired": l.retired,
                "share": f64::from(l.share) / 1000.0,
            })
        })
        .collect()
}
