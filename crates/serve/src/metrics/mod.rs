//! The server's Prometheus metric families, registered once. What every request counts (per class:
//! arrivals, dispatches, completions, rejections, queue wait and service time) is striped per thread and
//! summed at scrape time ([`striped`]); a configuration resolves its classes' handles when it is compiled,
//! so a request finds them without a lock or a label set.

mod process;
mod striped;
mod upstream;

pub use striped::{ClassMetrics, RouteResponses};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::gate::GateSnapshot;
use crate::label::Escaped;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: Escaped,
}

impl ClassLabel {
    fn new(name: &str) -> Self {
        ClassLabel {
            class: Escaped(name.to_string()),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectLabel {
    class: Escaped,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    route: Escaped,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LuaLimitLabel {
    hook: String,
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabel {
    hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

/// A gate lane: a route prefix, a group of routes, or `*` (the one pool of a fixed `workers`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabel {
    route: Escaped,
}

/// The `route` label of responses to requests no route matched (404).
pub const NO_ROUTE: &str = "(none)";

/// All families of `ordo serve`.
pub struct Metrics {
    registry: Registry,
    /// The families without the `ordo_serve_` prefix: `process_*` and `ordo_build_info`.
    process: Registry,
    queue_depth: Family<ClassLabel, Gauge>,
    workers_busy: Gauge,
    workers_capacity: Gauge,
    abandoned: Counter,
    abandoned_seen: AtomicU64,
    coalesce_spins: Family<ResultLabel, Counter>,
    coalesce_seen: [AtomicU64; 2],
    /// Failed Lua calls (classify or pick).
    pub lua_errors: Counter,
    reloads: Family<ResultLabel, Counter>,
    not_found: Counter,
    /// Every class's striped counters (also read by the collector that writes them at a scrape).
    classes: Arc<striped::ClassTable>,
    /// Every route's striped response counters.
    routes: Arc<striped::RouteTable>,
    lua_limits: Family<LuaLimitLabel, Counter>,
    lua_skipped: Family<HookLabel, Counter>,
    lua_disabled: Family<HookLabel, Counter>,
    lua_clients_benched: Family<HookLabel, Counter>,
    concurrency: ConcurrencyMetrics,
    upstreams: upstream::UpstreamMetrics,
    /// Rate limiting, access control and access-log families (`crate::edge`).
    pub(crate) edge: crate::edge::EdgeMetrics,
    /// Fleet mode's families (`crate::fleet`).
    pub(crate) fleet: crate::fleet::FleetMetrics,
}

/// The lanes' limits (adaptive or fixed) and what they serve, refreshed from the gate at each scrape.
struct ConcurrencyMetrics {
    limit: Family<RouteLabel, Gauge>,
    inflight: Family<RouteLabel, Gauge>,
    queued: Family<RouteLabel, Gauge>,
    baseline: Family<RouteLabel, Gauge<f64, AtomicU64>>,
    standing: Family<ClassLabel, Gauge>,
    /// Lanes seen at earlier scrapes (zeroed once gone).
    seen: RwLock<Vec<String>>,
}

impl ConcurrencyMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = ConcurrencyMetrics {
            limit: Family::default(),
            inflight: Family::default(),
            queued: Family::default(),
            baseline: Family::default(),
            standing: Family::default(),
            seen: RwLock::new(Vec::new()),
        };
        registry.register(
            "concurrency_limit",
            "Requests the route (or group, or the shared pool `*`) may have in flight now",
            m.limit.clone(),
        );
        registry.register(
            "concurrency_inflight",
            "Requests of the route in flight now",
            m.inflight.clone(),
        );
        registry.register(
            "concurrency_queued",
            "Requests queued for the route now",
            m.queued.clone(),
        );
        registry.register(
            "concurrency_baseline_rtt_seconds",
            "The adaptive limiter's round trip without queueing (0 until measured)",
            m.baseline.clone(),
        );
        registry.register(
            "class_standing_queue",
            "1 while the class's queue stands above its CoDel target",
            m.standing.clone(),
        );
        m
    }

    fn refresh(&self, snap: &GateSnapshot) {
        let label = |k: &str| RouteLabel {
            route: Escaped(k.to_string()),
        };
        let mut seen = self.seen.write().unwrap_or_else(|p| p.into_inner());
        for gone in seen
            .iter()
            .filter(|k| !snap.lanes.iter().any(|l| *l.key == ***k))
        {
            self.limit.get_or_create(&label(gone)).set(0);
            self.inflight.get_or_create(&label(gone)).set(0);
            self.queued.get_or_create(&label(gone)).set(0);
        }
        seen.clear();
        for l in &snap.lanes {
            let k = label(&l.key);
            self.limit
                .get_or_create(&k)
                .set(if l.retired { 0 } else { l.limit as i64 });
            self.inflight.get_or_create(&k).set(l.busy as i64);
            self.queued.get_or_create(&k).set(l.queued as i64);
            if let Some(lim) = &l.limiter {
                let b = lim.baseline.map_or(0.0, |n| n as f64 / 1e9);
                self.baseline.get_or_create(&k).set(b);
            }
            seen.push(l.key.to_string());
        }
        for (name, standing) in snap.class_names.iter().zip(&snap.class_standing) {
            self.standing
                .get_or_create(&ClassLabel {
                    class: Escaped(name.to_string()),
                })
                .set(i64::from(*standing));
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ordo_serve");
        let queue_depth = Family::<ClassLabel, Gauge>::default();
        let workers_busy = Gauge::default();
        let workers_capacity = Gauge::default();
        let abandoned = Counter::default();
        let lua_errors = Counter::default();
        let reloads = Family::<ResultLabel, Counter>::default();
        let not_found = Counter::default();
        let classes: Arc<striped::ClassTable> = Arc::default();
        // arrivals, dispatched, completed, rejected, queue_wait_seconds, service_seconds
        registry.register_collector(Box::new(striped::ClassCollector(classes.clone())));
        let routes: Arc<striped::RouteTable> = Arc::default();
        registry.register_collector(Box::new(striped::ResponsesCollector(routes.clone())));
        let mut process = Registry::default();
        process.register_collector(Box::new(process::ProcessCollector));
        registry.register(
            "queue_depth",
            "Requests waiting in the class's queue",
            queue_depth.clone(),
        );
        registry.register(
            "workers_busy",
            "Workers serving a request now",
            workers_busy.clone(),
        );
        registry.register(
            "workers_capacity",
            "Workers now: `workers`, or with workers = \"auto\" the sum of the routes' current limits",
            workers_capacity.clone(),
        );
        registry.register(
            "abandoned",
            "Queued requests whose client went away before dispatch",
            abandoned.clone(),
        );
        registry.register(
            "lua_errors",
            "Failed Lua classify/pick calls",
            lua_errors.clone(),
        );
        registry.register(
            "reloads",
            "Configuration reloads by result",
            reloads.clone(),
        );
        registry.register(
            "not_found",
            "Requests no route matched (404)",
            not_found.clone(),
        );
        let lua_limits = Family::<LuaLimitLabel, Counter>::default();
        let lua_skipped = Family::<HookLabel, Counter>::default();
        let lua_disabled = Family::<HookLabel, Counter>::default();
        let lua_clients_benched = Family::<HookLabel, Counter>::default();
        registry.register(
            "lua_limit",
            "Lua calls stopped by a limit (time or memory), by hook",
            lua_limits.clone(),
        );
        registry.register(
            "lua_skipped",
            "Lua calls not made because the script was disabled after repeated limit overruns",
            lua_skipped.clone(),
        );
        registry.register(
            "lua_disabled",
            "Times a Lua script was disabled after repeated limit overruns",
            lua_disabled.clone(),
        );
        registry.register(
            "lua_clients_benched",
            "Times one client's requests were made to skip a Lua script (the rules decide them) after that \
             client's repeated limit overruns",
            lua_clients_benched.clone(),
        );
        let coalesce_spins = Family::<ResultLabel, Counter>::default();
        registry.register(
            "coalesce_spins",
            "Spins of busy serving threads before they wait (`coalesce`), process-wide, by whether the \
             wait after found work at once (paid_off) or slept (missed)",
            coalesce_spins.clone(),
        );
        let concurrency = ConcurrencyMetrics::register(&mut registry);
        let upstreams = upstream::UpstreamMetrics::register(&mut registry);
        let edge = crate::edge::EdgeMetrics::register(&mut registry);
        let fleet = crate::fleet::FleetMetrics::register(&mut registry);
        let m = Metrics {
            registry,
            process,
            routes,
            queue_depth,
            workers_busy,
            workers_capacity,
            abandoned,
            abandoned_seen: AtomicU64::new(0),
            coalesce_spins,
            coalesce_seen: [AtomicU64::new(0), AtomicU64::new(0)],
            lua_errors,
            reloads,
            not_found,
            classes,
            concurrency,
            upstreams,
            lua_limits,
            lua_skipped,
            lua_disabled,
            edge,
            fleet,
            lua_clients_benched,
        };
        // every series exists from the start (a scrape shows 0, not nothing)
        for hook in ["classify", "pick"] {
            m.lua_counters(hook);
        }
        m
    }

    /// The counters of a Lua hook (`classify` or `pick`); `errors` is `lua_errors`.
    pub fn lua_counters(&self, hook: &str) -> crate::lua::LuaCounters {
        let limit = |limit: &str| {
            self.lua_limits
                .get_or_create(&LuaLimitLabel {
                    hook: hook.to_string(),
                    limit: limit.to_string(),
                })
                .clone()
        };
        let label = HookLabel {
            hook: hook.to_string(),
        };
        crate::lua::LuaCounters {
            errors: self.lua_errors.clone(),
            time: limit("time"),
            memory: limit("memory"),
            skipped: self.lua_skipped.get_or_create(&label).clone(),
            disabled: self.lua_disabled.get_or_create(&label).clone(),
            clients_benched: self.lua_clients_benched.get_or_create(&label).clone(),
        }
    }

    /// The counters of class `name` (created on first use). The request path looks them up once per
    /// configuration (`Active::class_metrics`), not per request.
    pub fn class(&self, name: &Arc<str>) -> Arc<ClassMetrics> {
        if let Some(m) = self
            .classes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
        {
            return m.clone();
        }
        self.classes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.clone())
            .or_insert_with(|| Arc::new(ClassMetrics::new()))
            .clone()
    }

    /// The proxy routes' upstreams as of now (before an `encode`): `(route prefix, upstreams)`.
    pub fn set_upstreams(&self, routes: &[(String, Vec<crate::backend::proxy::UpstreamSnapshot>)]) {
        self.upstreams.refresh(routes);
    }

    /// The response counters of a route, by its label: its prefix, or [`NO_ROUTE`] (created on first use;
    /// the request path looks them up once per configuration, as the classes').
    pub fn route(&self, label: &str) -> Arc<RouteResponses> {
        if let Some(m) = self
            .routes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(label)
        {
            return m.clone();
        }
        self.routes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(Arc::from(label))
            .or_insert_with(|| Arc::new(RouteResponses::new()))
            .clone()
    }

    /// Count a reload.
    pub fn reload(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "error" }.to_string(),
            })
            .inc();
    }

    /// Reloads counted so far with this result.
    pub fn reloads(&self, ok: bool) -> u64 {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "error" }.to_string(),
            })
            .get()
    }

    /// Count a request no route matched.
    pub fn not_found(&self) {
        self.not_found.inc();
    }

    /// The exposition in `format`, with gauges refreshed from `snap`.
    pub fn encode_as(&self, snap: &GateSnapshot, format: Format) -> String {
        let om = self.encode(snap);
        match format {
            Format::OpenMetrics => om,
            Format::Prometheus => openmetrics_to_prometheus(&om),
        }
    }

    /// The OpenMetrics text exposition, with gauges refreshed from `snap`.
    pub fn encode(&self, snap: &GateSnapshot) -> String {
        // Classes removed by a reload keep their counters but no longer queue anything.
        let known: Vec<Arc<str>> = self
            .classes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect();
        for name in known.iter().filter(|n| !snap.class_names.contains(n)) {
            self.queue_depth
                .get_or_create(&ClassLabel::new(name))
                .set(0);
        }
        for (name, q) in snap.class_names.iter().zip(&snap.class_queued) {
            self.class(name);
            self.queue_depth
                .get_or_create(&ClassLabel::new(name))
                .set(*q as i64);
        }
        self.workers_busy.set(snap.busy as i64);
        self.workers_capacity.set(snap.workers as i64);
        self.concurrency.refresh(snap);
        let seen = self.abandoned_seen.swap(snap.abandoned, Ordering::Relaxed);
        self.abandoned.inc_by(snap.abandoned.saturating_sub(seen));
        let (paid, missed) = ordo_sys::coalesce::coalesce_spins();
        for (i, (now, result)) in [(paid, "paid_off"), (missed, "missed")]
            .into_iter()
            .enumerate()
        {
            let seen = self.coalesce_seen[i].swap(now, Ordering::Relaxed);
            self.coalesce_spins
                .get_or_create(&ResultLabel {
                    result: result.to_string(),
                })
                .inc_by(now.saturating_sub(seen));
        }
        let mut out = String::new();
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        if encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.process))
            .and_then(|()| encode_eof(&mut out))
            .is_err()
        {
            out.clear();
        }
        out
    }
}

/// The two text formats `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 (`application/openmetrics-text`): what prometheus-client writes, and what Prometheus
    /// asks for first.
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4 (`text/plain`): what older scrapers and agents read.
    Prometheus,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when `application/openmetrics-text` is accepted
    /// at least as much as `text/plain` (Prometheus sends
    /// `application/openmetrics-text;version=1.0.0;q=0.5,...,text/plain;version=0.0.4;q=0.3,*/*;q=0.2`);
    /// the classic format otherwise, also without an `Accept` header or when neither is named.
    pub fn from_accept(accept: Option<&str>) -> Format {
        let (mut om, mut text) = (0.0f32, 0.0f32);
        for range in accept.unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok())
                .filter(|q| q.is_finite())
                .unwrap_or(0.0);
            match media.as_str() {
                "application/openmetrics-text" => om = om.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > 0.0 && om >= text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The response's Content-Type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Rewrites prometheus-client's OpenMetrics text as the classic format: a counter family is named after its
/// samples (`# TYPE x_total counter`, where OpenMetrics says `# TYPE x counter`), `unknown` is `untyped`,
/// and the `# EOF` and `# UNIT` lines go. Samples (histograms' `_bucket`/`_sum`/`_count` included) are the
/// same in both formats; label values are escaped the same way.
fn openmetrics_to_prometheus(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    // HELP comes before TYPE; it is held until TYPE says whether the name takes `_total`
    let mut help: Option<&str> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (name.to_string(), kind),
                _ => (name.to_string(), "untyped"),
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_picks_the_format() {
        use Format::*;
        for (accept, want) in [
            (None, Prometheus),
            (Some(""), Prometheus),
            (Some("*/*"), Prometheus),
            (Some("text/plain; version=0.0.4"), Prometheus),
            (Some("application/openmetrics-text"), OpenMetrics),
            (
                Some("Application/OpenMetrics-Text; Version=1.0.0"),
                OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;q=0.5,text/plain;q=0.3"),
                OpenMetrics,
            ),
            (
                Some("text/plain;q=0.9, application/openmetrics-text;q=0.5"),
                Prometheus,
            ),
            (Some("application/openmetrics-text;q=0"), Prometheus),
            (Some("application/openmetrics-text;q=nonsense"), Prometheus),
            (
                Some("application/openmetrics-text, text/plain"),
                OpenMetrics,
            ),
        ] {
            assert_eq!(Format::from_accept(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn classic_format_names_counters_by_their_samples() {
        let om = "# HELP ordo_x Things.\n# TYPE ordo_x counter\nordo_x_total{class=\"a\"} 3\n\
                  # HELP ordo_h Times.\n# TYPE ordo_h histogram\nordo_h_sum 0.5\nordo_h_count 1\n\
                  ordo_h_bucket{le=\"+Inf\"} 1\n# TYPE ordo_u unknown\nordo_u 1\n# UNIT ordo_h seconds\n# EOF\n";
        assert_eq!(
            openmetrics_to_prometheus(om),
            "# HELP ordo_x_total Things.\n# TYPE ordo_x_total counter\nordo_x_total{class=\"a\"} 3\n\
             # HELP ordo_h Times.\n# TYPE ordo_h histogram\nordo_h_sum 0.5\nordo_h_count 1\n\
             ordo_h_bucket{le=\"+Inf\"} 1\n# TYPE ordo_u untyped\nordo_u 1\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        m.class(&Arc::from("a\"b\\c\nd")).arrive();
        let cfg = crate::compile::sched_config(&crate::ServeConfig::default());
        let gate = crate::gate::Gate::new(cfg, None, 1).unwrap();
        let text = m.encode(&gate.snapshot());
        assert!(
            text.contains("ordo_serve_arrivals_total{class=\"a\\\"b\\\\c\\nd\"} 1\n"),
            "{text}"
        );
    }
}
