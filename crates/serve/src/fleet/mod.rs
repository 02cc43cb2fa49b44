//! Fleet mode: several `ordo serve` instances behind an L4 balancer share one Redis, so that what must hold
//! at the application holds for the fleet, not for each instance alone (docs/serve.md, "Fleet mode").
//!
//! - **Rate limits** (`crate::edge::ratelimit`): each decision is one GCRA step in a Lua script run with
//!   `EVALSHA` on Redis's clock, over one multiplexed connection that pipelines the calls of every serving
//!   thread; a call has a short deadline (`timeout`). Shared counters need a shared decision: a local bucket
//!   synced every few hundred ms would let every instance spend the whole burst between syncs.
//! - **Class shares**: every `sync_interval` this instance publishes its demand per class (queued + in
//!   flight) with an expiry and reads every live instance's in the same script; from that snapshot it
//!   computes the division of `fleet_workers` ([`lease`]) and applies its row to the gate as a lease
//!   (`Gate::set_lease`), so the class weights hold at the application whatever the balancer sends where.
//!
//! When Redis does not answer, requests keep flowing: rate limits are decided by the local table, and the
//! gate's configured limits apply again. One line is logged when Redis becomes unreachable and one when it
//! answers again (and `ordo_serve_fleet_connected` / `_reconnects_total` say the same).

pub mod lease;
mod metrics;

pub use metrics::FleetMetrics;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;

use crate::gate::Gate;
use metrics::ClassLabel;

/// `key_prefix` when the table leaves it out.
pub const DEFAULT_KEY_PREFIX: &str = "ordo:";
/// `timeout` when the table leaves it out: the longest a request waits for Redis's rate-limit answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// `sync_interval` when the table leaves it out.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(200);
/// `connect_timeout` when the table leaves it out.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// `[fleet]`: see docs/serve.md, "Fleet mode". Changes take effect on restart.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// The Redis server: `redis://[user:password@]host:port/db` (required).
    pub redis: Option<String>,
    /// Prefix of every key ordo writes.
    pub key_prefix: String,
    /// This instance's name among the fleet (default: host name, process id and listening port).
    pub instance: Option<String>,
    /// How long a request waits for a rate-limit answer before it is decided locally.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub timeout: Duration,
    /// How often demand is published and leases recomputed (and Redis retried when it was unreachable).
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub sync_interval: Duration,
    /// How long connecting to Redis may take.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub connect_timeout: Duration,
    /// The application's capacity, leased to the instances by class weight and demand; unset: no class
    /// shares (only the rate limits are shared).
    pub fleet_workers: Option<usize>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            redis: None,
            key_prefix: DEFAULT_KEY_PREFIX.to_string(),
            instance: None,
            timeout: DEFAULT_TIMEOUT,
            sync_interval: DEFAULT_SYNC_INTERVAL,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            fleet_workers: None,
        }
    }
}

/// A name ordo puts into Redis keys: printable ASCII without spaces.
fn plain(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_graphic())
}

impl FleetConfig {
    /// Checks the table (`workers`: the configured workers); an error names its key.
    pub(crate) fn check(
        &self,
        workers: crate::overload::Workers,
    ) -> Result<(), (&'static str, String)> {
        let url = self.redis.as_deref().ok_or((
            "redis",
            "is required (e.g. redis = \"redis://127.0.0.1:6379/\")".to_string(),
        ))?;
        redis::Client::open(url).map_err(|e| {
            (
                "redis",
                format!("`{}` is not a Redis URL: {e}", redacted(url)),
            )
        })?;
        if self.key_prefix.len() > 64 || !plain(&self.key_prefix) {
            return Err((
                "key_prefix",
                format!(
                    "{:?}: at most 64 printable ASCII characters without spaces",
                    self.key_prefix
                ),
            ));
        }
        if let Some(i) = &self.instance {
            if i.is_empty() || i.len() > 128 || !plain(i) {
                return Err((
                    "instance",
                    format!("{i:?}: 1 to 128 printable ASCII characters without spaces"),
                ));
            }
        }
        let within = |key: &'static str, d: Duration, lo: Duration, hi: Duration| {
            if d < lo || d > hi {
                let f = crate::http::duration::format;
                return Err((
                    key,
                    format!("must be between {} and {}, got {}", f(lo), f(hi), f(d)),
                ));
            }
            Ok(())
        };
        within(
            "timeout",
            self.timeout,
            Duration::from_millis(1),
            Duration::from_secs(10),
        )?;
        within(
            "sync_interval",
            self.sync_interval,
            Duration::from_millis(10),
            Duration::from_secs(60),
        )?;
        within(
            "connect_timeout",
            self.connect_timeout,
            Duration::from_millis(1),
            Duration::from_secs(60),
        )?;
        match self.fleet_workers {
            Some(0) => return Err(("fleet_workers", "must be ≥ 1, got 0".to_string())),
            Some(_) if workers == crate::overload::Workers::Auto => {
                return Err((
                    "fleet_workers",
                    "needs a fixed number of `workers` (the lease replaces it; `workers = \"auto\"` \
                     has a limit per route)"
                        .to_string(),
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The URL without its password, for logs and `/status`.
pub fn redacted(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(at)) if at > scheme.len() + 3 => {
            match rest[..at - scheme.len() - 3].split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{}", &url[at + 1..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// One GCRA step on Redis's clock (microseconds); writing after `TIME` needs effects replication, the
/// default since Redis 5 and asked for explicitly before. KEYS[1]: the key's theoretical arrival time; ARGV: the
/// emission interval and the tolerance ((burst - 1) × interval). Returns {1, remaining, reset} when
/// admitted, {0, retry} when not.
const GCRA: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then
  return {0, allow_at - now}
end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil((new - now) / 1000) + 1)
local room = now + tolerance + interval - new
return {1, math.floor(room / interval), new - now}
"#;

/// Publish this instance's demand and read every live instance's. KEYS[1]: members (sorted set, score: the
/// expiry in ms on Redis's clock), KEYS[2]: demands (hash); ARGV: instance, demand, time to live (ms).
/// Returns instance, demand, instance, demand, ...
const SYNC: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, m in ipairs(dead) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('HDEL', KEYS[2], m)
end
redis.call('PEXPIRE', KEYS[1], ttl * 4)
redis.call('PEXPIRE', KEYS[2], ttl * 4)
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = m
  out[#out + 1] = redis.call('HGET', KEYS[2], m) or '{}'
end
return out
"#;

/// The fleet's answer to one rate-limit check (Redis's clock; the caller makes the headers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Admitted; `remaining` more could be sent at once; the bucket is full again in `reset_ns`.
    Allow { remaining: u64, reset_ns: u64 },
    /// Over the rate: one more is admitted in `retry_ns`.
    Deny { retry_ns: u64 },
}

/// What `/status` shows of the last sync.
#[derive(Debug, Default)]
struct View {
    instances: Vec<String>,
    lease: Option<Vec<(Arc<str>, usize)>>,
    last_error: Option<String>,
}

/// The running fleet mode of one server.
pub(crate) struct Fleet {
    cfg: FleetConfig,
    /// `cfg.redis` without its password.
    url: String,
    instance: String,
    client: redis::Client,
    /// The connection while Redis answers (None: down, decide locally).
    conn: ArcSwapOption<MultiplexedConnection>,
    /// An outage was logged and its end not yet.
    reported_down: AtomicBool,
    gcra: redis::Script,
    sync: redis::Script,
    metrics: FleetMetrics,
    view: Mutex<View>,
}

/// `host:pid:port`, unique per process and listener on a host.
fn default_instance(addr: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && plain(h))
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}:{}:{}", std::process::id(), addr.port())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Nanoseconds → whole microseconds (at least 1), Redis's unit in the GCRA script.
fn micros(ns: u64) -> u64 {
    ns.div_ceil(1_000).max(1)
}

impl Fleet {
    /// `cfg` was checked with the configuration; `addr` is the HTTP listener's (for the default name).
    pub(crate) fn new(
        cfg: &FleetConfig,
        addr: SocketAddr,
        metrics: FleetMetrics,
    ) -> Result<Fleet, String> {
        let url = cfg.redis.clone().unwrap_or_default();
        let client = redis::Client::open(url.as_str())
            .map_err(|e| format!("`{}` is not a Redis URL: {e}", redacted(&url)))?;
        Ok(Fleet {
            url: redacted(&url),
            instance: cfg
                .instance
                .clone()
                .unwrap_or_else(|| default_instance(addr)),
            cfg: cfg.clone(),
            client,
            conn: ArcSwapOption::empty(),
            reported_down: AtomicBool::new(false),
            gcra: redis::Script::new(GCRA),
            sync: redis::Script::new(SYNC),
            metrics,
            view: Mutex::new(View::default()),
        })
    }

    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this instance leases workers (`fleet_workers` is set).
    pub(crate) fn leases(&self) -> bool {
        self.cfg.fleet_workers.is_some()
    }

    fn connection(&self) -> Option<MultiplexedConnection> {
        self.conn.load().as_deref().cloned()
    }

    /// A Redis call failed: decide locally until a sync reaches Redis again; the first failure of an
    /// outage is logged.
    fn fail(&self, what: &str, error: String) {
        self.metrics.sync_errors.inc();
        self.conn.store(None);
        self.metrics.connected.set(0);
        if !self.reported_down.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                redis = %self.url,
                error = %error,
                "fleet: Redis unreachable ({what}); rate limits and worker limits fall back to this \
                 instance's own configuration until it answers again"
            );
        }
        self.view().last_error = Some(format!("{what}: {error}"));
    }

    /// A sync reached Redis over `con`.
    fn succeed(&self, con: &MultiplexedConnection) {
        if self.conn.load().is_none() {
            self.conn.store(Some(Arc::new(con.clone())));
            self.metrics.connected.set(1);
            if self.reported_down.swap(false, Ordering::SeqCst) {
                self.metrics.reconnects.inc();
                tracing::info!(
                    redis = %self.url,
                    instance = %self.instance,
                    "fleet: Redis answers again; rate limits and class shares are the fleet's again"
                );
            } else {
                tracing::info!(redis = %self.url, instance = %self.instance, "fleet: connected to Redis");
            }
        }
    }

    /// The fleet's decision for `key` under the limit named `limit` (its GCRA emission interval and
    /// tolerance in nanoseconds); None when Redis did not answer in time (the caller decides locally).
    pub(crate) async fn rate_check(
        &self,
        limit: &str,
        (interval, tolerance): (u64, u64),
        key: &[u8],
    ) -> Option<Verdict> {
        let Some(mut con) = self.connection() else {
            self.metrics.local_decisions.inc();
            return None;
        };
        let mut inv = self
            .gcra
            .key(format!("{}rl:{limit}:{}", self.cfg.key_prefix, hex(key)));
        inv.arg(micros(interval))
            .arg(micros(tolerance).min(u64::MAX / 4));
        let answer =
            tokio::time::timeout(self.cfg.timeout, inv.invoke_async::<Vec<i64>>(&mut con)).await;
        let error = match answer {
            Ok(Ok(v)) => match v.as_slice() {
                [1, remaining, reset, ..] => {
                    return Some(Verdict::Allow {
                        remaining: (*remaining).max(0) as u64,
                        reset_ns: ((*reset).max(0) as u64).saturating_mul(1_000),
                    });
                }
                [0, retry, ..] => {
                    return Some(Verdict::Deny {
                        retry_ns: ((*retry).max(0) as u64).saturating_mul(1_000),
                    });
                }
                other => format!("unexpected answer {other:?}"),
            },
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "no answer within {}",
                crate::http::duration::format(self.cfg.timeout)
            ),
        };
        self.fail("rate limit", error);
        self.metrics.local_decisions.inc();
        None
    }

    /// Publish, read, lease, every `sync_interval`, until `classes` says the server is gone (None); it
    /// gives the running configuration's classes and weights.
    pub(crate) async fn run(
        self: Arc<Self>,
        gate: Gate,
        classes: impl Fn() -> Option<Vec<(Arc<str>, u32)>> + Send + 'static,
    ) {
        let mut tick = tokio::time::interval(self.cfg.sync_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(classes) = classes() else {
                return;
            };
            if let Err(e) = self.sync_once(&gate, &classes).await {
                self.fail("sync", e);
                if self.leases() {
                    gate.set_lease(None);
                    self.metrics.lease.clear();
                }
                self.view().lease = None;
            }
        }
    }

    async fn connect(&self) -> Result<MultiplexedConnection, String> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(self.cfg.connect_timeout)
            .set_response_timeout(self.cfg.connect_timeout.max(self.cfg.sync_interval));
        match tokio::time::timeout(
            self.cfg.connect_timeout,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no connection within {}",
                crate::http::duration::format(self.cfg.connect_timeout)
            )),
        }
    }

    /// One round: publish this instance's demand, read the fleet's, apply the lease.
    async fn sync_once(&self, gate: &Gate, classes: &[(Arc<str>, u32)]) -> Result<(), String> {
        let mut con = match self.connection() {
            Some(c) => c,
            None => self.connect().await?,
        };
        let snap = gate.snapshot();
        let demand: serde_json::Map<String, serde_json::Value> = snap
            .class_names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let d = snap.class_queued.get(i).copied().unwrap_or(0)
                    + snap.class_busy.get(i).copied().unwrap_or(0);
                (n.to_string(), d.into())
            })
            .collect();
        let ttl = (self.cfg.sync_interval * 3 + self.cfg.timeout).as_millis() as u64;
        let p = &self.cfg.key_prefix;
        let mut inv = self.sync.key(format!("{p}fleet:members"));
        inv.key(format!("{p}fleet:demand"))
            .arg(&self.instance)
            .arg(serde_json::Value::Object(demand).to_string())
            .arg(ttl);
        let deadline = self.cfg.sync_interval.max(self.cfg.timeout);
        let flat =
            match tokio::time::timeout(deadline, inv.invoke_async::<Vec<String>>(&mut con)).await {
                Ok(r) => r.map_err(|e| e.to_string())?,
                Err(_) => {
                    return Err(format!(
                        "no answer within {}",
                        crate::http::duration::format(deadline)
                    ));
                }
            };
        self.succeed(&con);
        let mut demands: Vec<lease::Demand> = flat
            .chunks(2)
            .filter_map(|pair| match pair {
                [instance, d] => Some(lease::Demand {
                    instance: instance.clone(),
                    classes: parse_demand(d),
                }),
                _ => None,
            })
            .collect();
        demands.sort_by(|a, b| a.instance.cmp(&b.instance));
        self.metrics.instances.set(demands.len() as i64);
        let mut lease_now = None;
        if let Some(capacity) = self.cfg.fleet_workers {
            let named: Vec<(&str, u32)> = classes.iter().map(|(n, w)| (&**n, *w)).collect();
            let rows = lease::leases(capacity, &named, &demands);
            if let Some(row) = demands
                .iter()
                .position(|d| d.instance == self.instance)
                .and_then(|i| rows.get(i))
            {
                let mine: Vec<(Arc<str>, usize)> = classes
                    .iter()
                    .zip(row)
                    .map(|((n, _), w)| (n.clone(), *w))
                    .collect();
                for (n, w) in &mine {
                    self.metrics
                        .lease
                        .get_or_create(&ClassLabel::new(n))
                        .set(*w as i64);
                }
                gate.set_lease(Some(mine.clone()));
                lease_now = Some(mine);
            }
        }
        let mut v = self.view();
        v.instances = demands.into_iter().map(|d| d.instance).collect();
        v.lease = lease_now;
        Ok(())
    }

    /// `/status`'s `fleet` object.
    pub(crate) fn status(&self) -> serde_json::Value {
        let v = self.view();
        serde_json::json!({
            "redis": self.url,
            "instance": self.instance,
            "connected": self.conn.load().is_some(),
            "instances": v.instances,
            "fleet_workers": self.cfg.fleet_workers,
            "lease": v.lease.as_ref().map(|l| l
                .iter()
                .map(|(n, w)| (n.to_string(), serde_json::Value::from(*w)))
                .collect::<serde_json::Map<_, _>>()),
            "last_error": v.last_error,
        })
    }
}

/// An instance's published demand (`{"gold": 12, ...}`); anything unreadable counts as no demand.
fn parse_demand(s: &str) -> Vec<(String, u64)> {
    match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(s) {
        Ok(m) => m
            .into_iter()
            .filter_map(|(k, v)| v.as_u64().map(|d| (k, d)))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str) -> Result<(), (&'static str, String)> {
        let t: FleetConfig = toml::from_str(toml_text).unwrap();
        t.check(crate::overload::Workers::Fixed(8))
    }

    #[test]
    fn bad_tables_name_their_key() {
        assert!(check("redis = \"redis://127.0.0.1:6379/\"\nfleet_workers = 8").is_ok());
        assert_eq!(check("fleet_workers = 8").unwrap_err().0, "redis");
        assert_eq!(check("redis = \"http://x/\"").unwrap_err().0, "redis");
        let r = "redis = \"redis://h/\"\n";
        assert_eq!(
            check(&format!("{r}key_prefix = \"a b\"")).unwrap_err().0,
            "key_prefix"
        );
        assert_eq!(
            check(&format!("{r}instance = \"\"")).unwrap_err().0,
            "instance"
        );
        assert_eq!(
            check(&format!("{r}timeout = \"0s\"")).unwrap_err().0,
            "timeout"
        );
        assert_eq!(
            check(&format!("{r}sync_interval = \"1ms\"")).unwrap_err().0,
            "sync_interval"
        );
        assert_eq!(
            check(&format!("{r}fleet_workers = 0")).unwrap_err().0,
            "fleet_workers"
        );
        let t: FleetConfig = toml::from_str(&format!("{r}fleet_workers = 4")).unwrap();
        assert_eq!(
            t.check(crate::overload::Workers::Auto).unwrap_err().0,
            "fleet_workers"
        );
    }

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redacted("redis://user:s3cret@db:6379/0"),
            "redis://user:***@db:6379/0"
        );
        assert_eq!(redacted("redis://:s3cret@db/"), "redis://:***@db/");
        assert_eq!(redacted("redis://db:6379/"), "redis://db:6379/");
        assert_eq!(redacted("redis://user@db/"), "redis://user@db/");
    }

    #[test]
    fn demands_parse_and_keys_are_hex() {
        assert_eq!(
            parse_demand("{\"gold\":3,\"x\":\"bad\"}"),
            vec![("gold".to_string(), 3)]
        );
        assert!(parse_demand("nonsense").is_empty());
        assert_eq!(hex(&[0x7f, 0, 1, 0xab]), "7f0001ab");
        assert_eq!(micros(1), 1);
        assert_eq!(micros(100_000_000), 100_000);
    }
}
