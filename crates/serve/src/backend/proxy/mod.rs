//! The proxy backend: forwards requests to a group of HTTP/1.1 upstreams (chosen by `balance`, skipping those
//! ejected or down, failing over to the next) over a keep-alive connection pool, and maps upstream failures
//! to gateway statuses:
//! - connect refused or unreachable → 502; connect not done within `connect_timeout` → 504;
//! - a read or write stalled for `read_timeout`, or the whole response head (1xx included) not received
//!   within `response_head_timeout` of sending the request → 504;
//! - a malformed response (bad head, bare LF, conflicting lengths, bad chunking, early close) → 502;
//! - a pooled connection that fails before the first response byte → the request is sent again on a new
//!   connection only when that cannot make the upstream act on it twice: an idempotent method, or none of
//!   the request written.
//!
//! The error bodies say what kind of failure it was, never the upstream's address (that goes to the log).
//!
//! Pool hygiene: a connection goes back to the pool only when its response ended exactly at the end of what
//! was read, and is checked again when taken out (anything readable, or closed → discarded), so bytes an
//! upstream sends unasked are never read as another request's response.
//!
//! What is forwarded: the normalised path ordo routed on (after `strip_prefix`) re-encoded, the query as
//! sent; the client's headers with names as spelled and values byte for byte, minus hop-by-hop headers
//! (Connection and those it names — never Host —, Keep-Alive, Proxy-Connection, TE, Trailer,
//! Transfer-Encoding, Upgrade) and names with `_` unless `forward_underscore_headers`; the client's
//! address is appended to X-Forwarded-For. Responses come back the same way (names and bytes as sent).
//!
//! Loops: every proxied request carries `Via: <version> ordo-<random hex>` (RFC 9110 §7.6.3), a pseudonym
//! drawn when the backend is built; a request that arrives already naming it has been here before (a chain
//! of proxies that leads back) and is answered 508 Loop Detected without being forwarded again. An upstream
//! that is the server's own listen address is refused when the config is checked (`points_at_listener`).
//! Responses with a Content-Length up to `buffer_max_bytes` (by default 256 KiB for HTTP/1.x clients, 64 KiB
//! for HTTP/2 ones) are read whole; longer, chunked or close-delimited ones are streamed, read from the
//! upstream a chunk at a time as the client takes them.
//!
//! Classes: the group's weight that still takes requests (`ProxyBackend::capacity`) scales the route's lane
//! of workers, so the requests its survivors cannot take wait in ordo's queue by class; and a retry is
//! taken from the budget by the request's class rank (`retry::budget_allows`).
//!
//! The rooms: `mod.rs` the configuration and the call loop; `pool` each upstream's per-thread idle
//! connections; `connect` upstream addresses, connecting and TLS; `forward` the request head as
//! forwarded and the Via pseudonym; `exchange` one request and response over one connection and the
//! gateway status of each failure; `retry` when a failed exchange is sent again (pure rules with their
//! tables); `balance` which upstream a request goes to; `health` passive ejection and active checks;
//! `tunnel` WebSocket and other HTTP/1.1 upgrades.

mod balance;
mod connect;
mod exchange;
mod forward;
mod health;
mod pool;
mod retry;
mod tunnel;

pub use balance::Balance;
pub use health::{HealthCheckConfig, HealthState};

#[allow(unused_imports)] // each room sees the others through `use super::*`
use self::{connect::*, exchange::*, forward::*, pool::*};
pub(crate) use connect::{parse_upstream_url, points_at_listener};
pub(crate) use tunnel::upgrade_of;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;

use super::BackendError;
use crate::http::duration;

use crate::http::headers::Known;
use crate::http::{Request, Response};
use crate::serving_thread::PerThread;
use crate::tls::UpstreamTls;

/// Status of a request that came back to the proxy it already passed through (RFC 5842 §7.2): a status
/// of its own, so a loop is told apart from an upstream that is down (502) in logs and metrics, and it
/// travels back unchanged through every hop of the loop to the client.
pub const LOOP_STATUS: u16 = 508;

/// `[routes.proxy]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// The group: each `"host:port"`, `"http://host:port"` (port 80 when omitted), `"https://…"`, or
    /// `{ address = "…", weight = N }`.
    pub upstreams: Vec<UpstreamSpec>,
    /// How a request picks its upstream (`round_robin`, weighted).
    pub balance: Balance,
    /// `balance = "hash"`: `"client_ip"`, `"header:NAME"` or `"cookie:NAME"`.
    pub hash_key: Option<String>,
    /// Consecutive failures (connect errors, timeouts, malformed answers, 5xx) that eject an upstream
    /// (0: never eject).
    pub max_fails: u32,
    /// The first ejection's length; each further ejection in a row doubles it, up to `max_eject`.
    #[serde(deserialize_with = "duration::deserialize")]
    pub eject_for: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub max_eject: Duration,
    /// After an ejection, the upstream's share rises from a tenth to its weight over this time.
    #[serde(deserialize_with = "duration::deserialize")]
    pub slow_start: Duration,
    /// Active HTTP checks (none by default).
    pub health_check: Option<HealthCheckConfig>,
    /// Upstreams one request may try, the first included: a request that failed before any of it
    /// reached an upstream goes to the next, whatever its method (1: no failover).
    pub tries: u32,
    /// Also send an idempotent request to the next upstream after these: `"timeout"` (no answer in
    /// time), `"reset"` (the connection failed after the request was written), `"502"`, `"503"`, `"504"`
    /// (statuses the upstream answered).
    pub retry_on: Vec<String>,
    /// Retries allowed, in percent of requests (each serving thread's budget, with a reserve of 10): a
    /// failing group cannot make its load grow by more than this.
    pub retry_budget_percent: u32,
    /// Time to establish an upstream connection; exceeded → 504.
    #[serde(deserialize_with = "duration::deserialize")]
    pub connect_timeout: Duration,
    /// Time allowed for each read from the upstream (and each write to it); exceeded → 504.
    #[serde(deserialize_with = "duration::deserialize")]
    pub read_timeout: Duration,
    /// Idle connections kept per upstream by each serving thread: a cap, not a target. A pool keeps what
    /// was in use within `pool_idle_timeout`; this only bounds it (see [`DEFAULT_POOL_MAX_IDLE`]).
    pub pool_max_idle: usize,
    /// An idle pooled connection older than this is closed instead of reused.
    #[serde(deserialize_with = "duration::deserialize")]
    pub pool_idle_timeout: Duration,
    /// Responses with a Content-Length up to this are read whole; others are streamed, a chunk at a time
    /// as the client takes them. Left out: by the client's protocol (see [`DEFAULT_BUFFER_MAX_BYTES`]).
    pub buffer_max_bytes: Option<u64>,
    /// Largest upstream response head.
    pub max_response_head_bytes: usize,
    /// `https://` upstreams: trust the CA certificates in this PEM file instead of the system's.
    pub ca_file: Option<std::path::PathBuf>,
    /// `https://` upstreams: accept any certificate. For tests against self-signed servers only: anyone
    /// between the proxy and the upstream can read and change the traffic.
    pub danger_accept_invalid_certs: bool,
    /// Time allowed for the whole response head (interim `1xx` heads included), counted from the moment
    /// the request has been sent; exceeded → 504. `read_timeout` still bounds each read.
    #[serde(deserialize_with = "duration::deserialize")]
    pub response_head_timeout: Duration,
    /// Forward request headers whose names contain `_` (nginx's `underscores_in_headers`). Off by default:
    /// `X-Forwarded_For` or `Content_Length` would reach an application that maps `-` and `_` to the same
    /// variable (CGI, WSGI, Rack, PHP) as the header ordo itself controls.
    pub forward_underscore_headers: bool,
    /// While upstreams are ejected or down, the route's lane admits only the share of its workers that the
    /// upstreams still taking requests make up (by weight): the rest wait in ordo's queue, where the class
    /// policy picks who goes first and the queue limits shed the lowest classes, instead of piling onto the
    /// upstreams that are left (docs/serve-http.md, "When capacity drops").
    pub capacity_follows_health: bool,
}

/// The default cap on each serving thread's idle connections to one upstream: generous, so that a pool
/// at its defaults never closes connections it will need again at once. Under steady load a pool holds as
/// many connections as the thread has requests in flight to the upstream, and a cap below that made every
/// request past it connect anew (with the earlier default of 32 and 64 clients on one thread: 0.75× HAProxy's
/// req/s at 1.3× its CPU per request). What a burst leaves behind ages out after `pool_idle_timeout`.
/// HAProxy keeps idle server connections without a cap by default; nginx keeps the `keepalive` it is given.
pub const DEFAULT_POOL_MAX_IDLE: usize = 1024;

/// The default `buffer_max_bytes` by the client's protocol: (HTTP/1.x, HTTP/2). A body read whole is held
/// until the client has taken all of it. An HTTP/1.x connection carries one response at a time, so reading a
/// body whole costs at most one body per connection, and it is the fast path (a 200 kB body streamed in
/// 16 KiB steps cost 1.7× the CPU: 0.58× HAProxy's req/s against 1.14× read whole, quiet machine). An
/// HTTP/2 connection has up to `max_streams_in_progress` responses in the making before its held bytes stop
/// further streams: with 256 KiB, 20 zero-window clients fetching 200 kB through the proxy pinned twice what
/// nginx does (docs/serve-http.md, "Slow readers"), so HTTP/2 clients get bodies over 64 KiB streamed, two
/// 16 KiB chunks ahead of the client at most.
pub const DEFAULT_BUFFER_MAX_BYTES: (u64, u64) = (256 * 1024, 64 * 1024);

/// One upstream of a group: `"host:port"` or `{ address = "host:port", weight = 2 }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamSpec {
    pub address: String,
    /// Its share of the requests (1–1000).
    pub weight: u32,
}

impl From<&str> for UpstreamSpec {
    fn from(address: &str) -> Self {
        UpstreamSpec {
            address: address.to_string(),
            weight: 1,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpstreamTable {
    address: String,
    #[serde(default = "one")]
    weight: u32,
}

fn one() -> u32 {
    1
}

impl<'de> Deserialize<'de> for UpstreamSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = UpstreamSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "an address (\"host:port\") or a table { address = \"host:port\", weight = N }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<UpstreamSpec, E> {
                Ok(UpstreamSpec::from(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                m: A,
            ) -> Result<UpstreamSpec, A::Error> {
                let t =
                    UpstreamTable::deserialize(serde::de::value::MapAccessDeserializer::new(m))?;
                Ok(UpstreamSpec {
                    address: t.address,
                    weight: t.weight,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            upstreams: Vec::new(),
            balance: Balance::RoundRobin,
            hash_key: None,
            max_fails: 3,
            eject_for: Duration::from_secs(10),
            max_eject: Duration::from_secs(300),
            slow_start: Duration::from_secs(10),
            health_check: None,
            tries: 3,
            retry_on: Vec::new(),
            retry_budget_percent: 20,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(30),
            pool_max_idle: DEFAULT_POOL_MAX_IDLE,
            pool_idle_timeout: Duration::from_secs(60),
            buffer_max_bytes: None,
            max_response_head_bytes: 16 * 1024,
            ca_file: None,
            danger_accept_invalid_certs: false,
            response_head_timeout: Duration::from_secs(30),
            forward_underscore_headers: false,
            capacity_follows_health: true,
        }
    }
}

impl ProxyConfig {
    /// Values that would make every proxied request fail are refused: `Err((key, why))`.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        for (key, d) in [
            ("connect_timeout", self.connect_timeout),
            ("read_timeout", self.read_timeout),
            ("response_head_timeout", self.response_head_timeout),
        ] {
            if d.is_zero() {
                return Err((key, "must be > 0".into()));
            }
        }
        if self.max_response_head_bytes == 0 {
            return Err(("max_response_head_bytes", "must be ≥ 1, got 0".into()));
        }
        if let Some(u) = self
            .upstreams
            .iter()
            .find(|u| !(1..=1000).contains(&u.weight))
        {
            return Err((
                "upstreams",
                format!(
                    "{:?}: weight must be 1 to 1000, got {}",
                    u.address, u.weight
                ),
            ));
        }
        if self.upstreams.len() > 1000 {
            return Err((
                "upstreams",
                format!("at most 1000 in a group, got {}", self.upstreams.len()),
            ));
        }
        match (self.balance, &self.hash_key) {
            (Balance::Hash, None) => {
                return Err((
                    "hash_key",
                    "balance = \"hash\" needs hash_key (\"client_ip\", \"header:NAME\" or \"cookie:NAME\")"
                        .into(),
                ));
            }
            (Balance::Hash, Some(k)) => {
                balance::HashKey::parse(k).map_err(|e| ("hash_key", e))?;
            }
            (_, Some(_)) => {
                return Err(("hash_key", "only read with balance = \"hash\"".into()));
            }
            (_, None) => {}
        }
        if self.eject_for.is_zero() {
            return Err(("eject_for", "must be > 0".into()));
        }
        if self.max_eject < self.eject_for {
            return Err((
                "max_eject",
                format!(
                    "must be ≥ eject_for ({:?}), got {:?}",
                    self.eject_for, self.max_eject
                ),
            ));
        }
        if self.tries == 0 {
            return Err(("tries", "must be ≥ 1 (1: no failover), got 0".into()));
        }
        if self.retry_budget_percent > 100 {
            return Err((
                "retry_budget_percent",
                format!("must be 0 to 100, got {}", self.retry_budget_percent),
            ));
        }
        retry::RetryOn::parse(&self.retry_on).map_err(|e| ("retry_on", e))?;
        if let Some(h) = &self.health_check {
            h.check()?;
        }
        Ok(())
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct ProxyBackend {
    upstreams: Vec<Arc<Upstream>>,
    /// The weighted round robin's sequence (indices into `upstreams`).
    sequence: Vec<u16>,
    /// Each serving thread's place in `sequence`, and its retry budget.
    local: PerThread<Local>,
    hash_key: Option<balance::HashKey>,
    passive: health::Passive,
    retry_on: retry::RetryOn,
    /// Held for its drop: the active checks stop when the backend goes (a reload replaced it).
    _alive: Arc<()>,
    /// (boxed: routes keep their backends in an enum, and this is the largest)
    cfg: Box<ProxyConfig>,
    /// This backend's Via pseudonym (`ordo-<16 hex digits>`).
    via_token: String,
}

impl ProxyBackend {
    pub fn new(cfg: &ProxyConfig) -> Result<Self, BackendError> {
        if cfg.upstreams.is_empty() {
            return Err(BackendError::Invalid {
                field: "upstreams",
                msg: "at least one upstream is needed".into(),
            });
        }
        cfg.check()
            .map_err(|(field, msg)| BackendError::Invalid { field, msg })?;
        let mut upstreams = Vec::new();
        let mut client_tls = None;
        for u in &cfg.upstreams {
            let u = u.address.as_str();
            let (addr, tls) = parse_upstream_url(u).map_err(|msg| BackendError::Invalid {
                field: "upstreams",
                msg,
            })?;
            let tls = if tls {
                let config = match &client_tls {
                    Some(c) => Arc::clone(c),
                    None => client_tls.insert(upstream_client_config(cfg)?).clone(),
                };
                let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
                Some(
                    UpstreamTls::new(config, host).map_err(|msg| BackendError::Invalid {
                        field: "upstreams",
                        msg: format!("{u:?}: {msg}"),
                    })?,
                )
            } else {
                None
            };
            let mut up = Upstream::new(addr, tls, cfg.pool_max_idle, cfg.pool_idle_timeout);
            up.weight = cfg.upstreams[upstreams.len()].weight;
            upstreams.push(Arc::new(up));
        }
        let weights: Vec<u32> = upstreams.iter().map(|u| u.weight).collect();
        let hash_key = match &cfg.hash_key {
            Some(k) => Some(
                balance::HashKey::parse(k).map_err(|msg| BackendError::Invalid {
                    field: "hash_key",
                    msg,
                })?,
            ),
            None => None,
        };
        let retry_on =
            retry::RetryOn::parse(&cfg.retry_on).map_err(|msg| BackendError::Invalid {
                field: "retry_on",
                msg,
            })?;
        let alive = Arc::new(());
        if let Some(check) = &cfg.health_check {
            // the checks run on the runtime that built the backend (none when only checking a config)
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(health::run_checks(
                    check.clone(),
                    upstreams.clone(),
                    Arc::downgrade(&alive),
                ));
            }
        }
        Ok(ProxyBackend {
            sequence: balance::smooth_sequence(&weights),
            upstreams,
            local: PerThread::new(),
            hash_key,
            passive: health::Passive {
                max_fails: cfg.max_fails,
                eject_for: cfg.eject_for,
                max_eject: cfg.max_eject,
                slow_start: cfg.slow_start,
            },
            retry_on,
            _alive: alive,
            cfg: Box::new(cfg.clone()),
            via_token: new_via_token(),
        })
    }

    /// The pseudonym this backend adds to `Via` (`ordo-<hex>`).
    pub fn via_token(&self) -> &str {
        &self.via_token
    }

    /// The answer to a request that already passed through this backend (its `Via` names our pseudonym):
    /// 508, without forwarding it again. `call` checks this first; the server may also call it before
    /// queueing the request, so a loop does not wait for a worker.
    pub fn loop_response(&self, req: &Request) -> Option<Response> {
        let looped = req
            .headers
            .known(Known::Via)
            .any(|v| via_names(v, &self.via_token));
        if !looped {
            return None;
        }
        tracing::warn!(
            path = %req.path,
            via = %self.via_token,
            "proxy loop: the request came back to the proxy it already passed through; answering 508"
        );
        Some(Response::text(
            LOOP_STATUS,
            &format!(
                "loop detected: this request already passed through this proxy (Via {})\n",
                self.via_token
            ),
        ))
    }

    /// Forwards `req` as a request of the top class.
    pub async fn call(&self, req: &Request) -> Response {
        self.call_ranked(req, crate::backend::TOP_RANK).await
    }

    /// Forwards `req`, a request of a class of rank `rank` (thousandths; `crate::backend::ClassInfo`):
    /// its retries are taken from the budget by that rank (`retry::budget_allows`).
    pub async fn call_ranked(&self, req: &Request, rank: u32) -> Response {
        if let Some(resp) = self.loop_response(req) {
            return resp;
        }
        let local = self.local.get_or_init(|| Local::new(&self.cfg));
        if let Some(l) = local {
            l.deposit(self.cfg.retry_budget_percent);
        }
        let idempotent = retry::idempotent(&req.method);
        let mut tried: Vec<usize> = Vec::new();
        let mut last: Option<Response> = None;
        // the failure `last` answers, logged at debug when the request moved on: (upstream, status, detail)
        let mut unlogged: Option<(usize, u16, String)> = None;
        loop {
            let Some(i) = self.choose(req, &tried, local) else {
                // nothing (more) to try: every upstream is ejected, down, or was tried. A failure the
                // request ends with is the operator's to see (with one upstream, every failure ends here).
                if let Some((u, status, detail)) = unlogged {
                    tracing::warn!(
                        upstream = %self.upstreams[u].addr,
                        status,
                        "proxy: {detail} (no other upstream to try)"
                    );
                }
                return last.unwrap_or_else(no_upstream);
            };
            let up = &self.upstreams[i];
            let failure = match self.attempt(up, req).await {
                Ok(resp) => {
                    let failed = matches!(resp.status, 502..=504);
                    if failed {
                        self.failed(up);
                    } else {
                        up.health.success(&self.passive);
                    }
                    let again = failed
                        && idempotent
                        && self.retry_on.status(resp.status)
                        && self.may_try_again(&tried, local, rank);
                    if !again {
                        return resp;
                    }
                    tracing::debug!(upstream = %up.addr, status = resp.status, "the upstream answered {}; trying another", resp.status);
                    last = Some(resp);
                    unlogged = None;
                    tried.push(i);
                    continue;
                }
                Err(e) => e,
            };
            self.failed(up);
            let kind = failure.failure();
            // A request that never reached the upstream adds no load anywhere when it goes to another
            // (nothing was served twice): only `tries` bounds it. What an upstream saw (a timeout, a
            // reset, a 5xx) is sent again only within the retry budget.
            let next = retry::next_upstream(kind, idempotent, &self.retry_on)
                && if retry::reached_upstream(kind) {
                    self.may_try_again(&tried, local, rank)
                } else {
                    tried.len() + 1 < self.cfg.tries as usize
                };
            if !next {
                return gateway_error(up, failure);
            }
            // logged at debug only while another upstream may answer, so a dead upstream in a group
            // does not write a warning per request
            let (status, public, detail) = gateway_parts(failure);
            tracing::debug!(upstream = %up.addr, status, "proxy: {detail}; trying another upstream");
            last = Some(gateway_text(status, public));
            unlogged = Some((i, status, detail));
            tried.push(i);
        }
    }

    /// The group's weight that takes requests now, beside its whole weight: each upstream that is not
    /// ejected or down counts its weight times its slow-start ramp. None when `capacity_follows_health` is
    /// off (the route's lane is then never scaled).
    pub fn capacity(&self) -> Option<(f64, f64)> {
        if !self.cfg.capacity_follows_health {
            return None;
        }
        let mut now = None;
        let mut up = 0.0;
        let mut all = 0.0;
        for u in &self.upstreams {
            let w = f64::from(u.weight);
            all += w;
            if u.health.available(&mut now) {
                up += w * u.health.ramp(&self.passive, &mut now);
            }
        }
        Some((up, all))
    }

    /// The upstream for a request (None: none is eligible).
    fn choose(&self, req: &Request, tried: &[usize], local: Option<&Local>) -> Option<usize> {
        let mut now = None;
        let mut pick = balance::Pick {
            upstreams: &self.upstreams,
            passive: &self.passive,
            tried,
            now: &mut now,
        };
        match self.cfg.balance {
            Balance::LeastRequests => pick.least_requests(),
            Balance::P2cEwma => pick.p2c(),
            Balance::Hash => match self.hash_key.as_ref().and_then(|k| pick.hash(k, req)) {
                Some(choice) => choice,
                None => self.round_robin(&mut pick, local),
            },
            Balance::RoundRobin => self.round_robin(&mut pick, local),
        }
    }

    fn round_robin(&self, pick: &mut balance::Pick<'_>, local: Option<&Local>) -> Option<usize> {
        match local {
            Some(l) => {
                let mut pos = l.position.load(Ordering::Relaxed);
                let i = pick.round_robin(&self.sequence, &mut pos);
                l.position.store(pos, Ordering::Relaxed);
                i
            }
            None => pick.round_robin(&self.sequence, &mut 0),
        }
    }

    /// Whether a failed request of class rank `rank` may go to another upstream: tries left, and the
    /// thread's retry budget as that rank may spend it.
    fn may_try_again(&self, tried: &[usize], local: Option<&Local>, rank: u32) -> bool {
        tried.len() + 1 < self.cfg.tries as usize && local.is_some_and(|l| l.withdraw(rank))
    }

    /// A failure counts toward the upstream's ejection.
    fn failed(&self, up: &Upstream) {
        if up.health.failure(&self.passive) {
            tracing::warn!(
                upstream = %up.addr,
                ejections = up.health.total_ejections(),
                "proxy: upstream ejected after {} failures in a row",
                self.passive.max_fails
            );
        }
    }

    /// One upstream's exchange: a pooled connection, or a new one; a pooled connection that went stale is
    /// replaced once when the retry rule allows (the same upstream: it was the connection that failed).
    async fn attempt(&self, up: &Arc<Upstream>, req: &Request) -> Result<Response, ExchangeError> {
        let tracked = self.cfg.balance.tracks_load();
        let started = tracked.then(|| {
            up.load.outstanding.fetch_add(1, Ordering::Relaxed);
            health::now_nanos()
        });
        let result = self.attempt_inner(up, req).await;
        if let Some(t0) = started {
            up.load.outstanding.fetch_sub(1, Ordering::Relaxed);
            let now = health::now_nanos();
            up.load.observe(now.saturating_sub(t0), now);
        }
        result
    }

    async fn attempt_inner(
        &self,
        up: &Arc<Upstream>,
        req: &Request,
    ) -> Result<Response, ExchangeError> {
        let mut retried = false;
        loop {
            let (conn, reused) = match up.checkout_idle() {
                Some(c) => (c, true),
                // boxed: the connect future (a TLS handshake's) is twice the size of everything else a
                // proxied request awaits, and connecting is the rare path (the pool is)
                None => (Box::pin(self.connect(up)).await?, false),
            };
            match self.exchange(conn, req, up).await {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    let attempt = retry::Attempt {
                        reused,
                        retried,
                        idempotent: retry::idempotent(&req.method),
                    };
                    if !retry::resend(e.failure(), attempt) {
                        return Err(e);
                    }
                    tracing::debug!(upstream = %up.addr, method = %req.method, "{e}; retrying on a new connection");
                    retried = true;
                }
            }
        }
    }
}

/// 503 at once when no upstream of the group takes requests (all ejected or down), instead of waiting for
/// connections that cannot succeed.
fn no_upstream() -> Response {
    Response::text(503, "service unavailable: no healthy upstream\n")
        .with_header("Retry-After", "1")
}

/// What one serving thread keeps of a backend: its place in the round robin and its retry budget. Only
/// that thread touches it (`PerThread`), so plain loads and stores suffice.
#[derive(Debug)]
struct Local {
    position: AtomicUsize,
    /// Retries it may still make, in hundredths (a 20% budget earns 20 per request, a retry costs 100).
    budget: AtomicU64,
}

/// The budget's reserve and cap: 10 retries.
const BUDGET_RESERVE: u64 = 1000;

impl Local {
    fn new(cfg: &ProxyConfig) -> Self {
        Local {
            position: AtomicUsize::new(crate::serving_thread::serving_thread()),
            budget: AtomicU64::new(if cfg.retry_budget_percent == 0 {
                0
            } else {
                BUDGET_RESERVE
            }),
        }
    }

    /// Each request earns `percent`/100 of a retry, up to the reserve.
    fn deposit(&self, percent: u32) {
        let b = self.budget.load(Ordering::Relaxed);
        if percent > 0 && b < BUDGET_RESERVE {
            self.budget.store(
                (b + u64::from(percent)).min(BUDGET_RESERVE),
                Ordering::Relaxed,
            );
        }
    }

    /// Takes a retry for a request of class rank `rank`, when the budget allows it that rank.
    fn withdraw(&self, rank: u32) -> bool {
        let b = self.budget.load(Ordering::Relaxed);
        if retry::budget_allows(b, BUDGET_RESERVE, rank) {
            self.budget.store(b - retry::RETRY_COST, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

/// One upstream as `/status` and the metrics show it.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamSnapshot {
    /// `host:port`.
    pub address: String,
    pub weight: u32,
    pub state: HealthState,
    pub consecutive_failures: u32,
    /// Ejections so far.
    pub ejections: u64,
    /// Requests in flight (kept by `least_requests` and `p2c_ewma` only).
    pub in_flight: Option<usize>,
}

impl ProxyBackend {
    /// The upstream addresses in use (`host:port`).
    pub fn upstreams(&self) -> Vec<String> {
        self.upstreams.iter().map(|u| u.addr.clone()).collect()
    }

    /// Each upstream's weight, health and load.
    pub fn snapshot(&self) -> Vec<UpstreamSnapshot> {
        let tracked = self.cfg.balance.tracks_load();
        self.upstreams
            .iter()
            .map(|u| UpstreamSnapshot {
                address: u.addr.clone(),
                weight: u.weight,
                state: u.health.state(),
                consecutive_failures: u.health.consecutive_failures(),
                ejections: u.health.total_ejections(),
                in_flight: tracked.then(|| u.load.outstanding.load(Ordering::Relaxed)),
            })
            .collect()
    }
}
