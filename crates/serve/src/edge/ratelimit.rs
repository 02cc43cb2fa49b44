//! Per-client rate limiting on this server (no shared store): GCRA — the generic cell rate algorithm, a token
//! bucket kept as one timestamp per key — keyed by the client's address (from `X-Forwarded-For` only when
//! the peer is a trusted proxy), a header, a cookie or the request's class. A request over its key's rate is
//! answered 429 before it is queued, with `Retry-After` and the IETF `RateLimit-Policy` / `RateLimit`
//! headers (draft-ietf-httpapi-ratelimit-headers).
//!
//! The table of keys is bounded: a key whose bucket is full again (its theoretical arrival time has passed)
//! is the same as no entry and is swept out first; when the table is full of live keys, the ones closest to
//! full are evicted (a key rotated per request — an attacker changing addresses — has the least debt and goes
//! first; an evicted key starts again from a full bucket, so eviction can only err towards admitting).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use crate::config::RateLimitTable;

use crate::classify::Cidr;
use crate::http::Request;

/// Shards of the key table (each its own lock, so serving threads seldom meet).
const SHARDS: usize = 16;
/// `max_keys` when the table leaves it out.
pub const DEFAULT_MAX_KEYS: usize = 100_000;

/// What a key is made of.
#[derive(Clone, Debug, PartialEq)]
enum KeyBy {
    Ip,
    Header(String),
    Cookie(String),
    Class,
}

/// The pure rule: GCRA with an emission interval `t` (one request's share of the rate) and a burst. Times
/// are nanoseconds on any monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gcra {
    /// Nanoseconds per request at the sustained rate.
    interval: u64,
    /// How far ahead of `now` a key's theoretical arrival time may run: (burst - 1) × interval.
    tolerance: u64,
}

/// The answer for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Admitted; `remaining` more could be sent at once, the bucket is full again in `reset_ns`.
    Allow { remaining: u64, reset_ns: u64 },
    /// Over the rate: one more is admitted in `retry_ns`.
    Deny { retry_ns: u64 },
}

impl Gcra {
    pub fn new(interval: Duration, burst: u32) -> Gcra {
        let interval = (interval.as_nanos().min(u128::from(u64::MAX)) as u64).max(1);
        Gcra {
            interval,
            tolerance: interval.saturating_mul(u64::from(burst.max(1) - 1)),
        }
    }

    /// The emission interval and the tolerance, in nanoseconds.
    pub fn nanos(&self) -> (u64, u64) {
        (self.interval, self.tolerance)
    }

    /// Decides a request at `now` for a key whose theoretical arrival time is `tat` (None: unknown key);
    /// returns the decision and the key's new time (unchanged when denied).
    pub fn check(&self, tat: Option<u64>, now: u64) -> (Decision, u64) {
        let tat = tat.unwrap_or(now).max(now);
        let allow_at = tat.saturating_sub(self.tolerance);
        if now < allow_at {
            return (
                Decision::Deny {
                    retry_ns: allow_at - now,
                },
                tat,
            );
        }
        // (saturating: a burst of billions at one an hour reaches u64's end, and must not wrap)
        let new = tat.saturating_add(self.interval);
        // what the bucket still holds after this request: requests that fit before `now + tolerance`
        let room = now
            .saturating_add(self.tolerance)
            .saturating_add(self.interval)
            .saturating_sub(new);
        (
            Decision::Allow {
                remaining: room / self.interval,
                reset_ns: new.saturating_sub(now),
            },
            new,
        )
    }
}

/// A bounded table of keys' theoretical arrival times.
struct Table {
    shards: Vec<Mutex<HashMap<u64, u64>>>,
    per_shard: usize,
    hasher: std::collections::hash_map::RandomState,
}

impl Table {
    fn new(max_keys: usize) -> Table {
        Table {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: Default::default(),
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Decides for `key` at `now` by `rule`, remembering the key's new time (evicting to make room).
    fn check(&self, rule: &Gcra, key: &[u8], now: u64) -> Decision {
        let h = self.hash(key);
        let mut shard = self.shards[(h % SHARDS as u64) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let old = shard.get(&h).copied();
        let (d, tat) = rule.check(old, now);
        if old.is_none() && shard.len() >= self.per_shard {
            evict(&mut shard, self.per_shard, now);
        }
        shard.insert(h, tat);
        d
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }
}

/// Makes room in a full shard: drops every key whose bucket is full again (`tat <= now`: the same as no
/// entry); if that frees less than a tenth, also the tenth of keys with the earliest times (the least
/// limited). At most one pass per tenth of the shard's inserts, so the cost per request stays constant.
fn evict(shard: &mut HashMap<u64, u64>, cap: usize, now: u64) {
    shard.retain(|_, tat| *tat > now);
    let target = cap - cap.div_ceil(10);
    if shard.len() <= target {
        return;
    }
    let mut tats: Vec<u64> = shard.values().copied().collect();
    let cut = shard.len() - target;
    let (_, &mut nth, _) = tats.select_nth_unstable(cut - 1);
    let mut removed = 0;
    shard.retain(|_, tat| {
        if removed < cut && *tat <= nth {
            removed += 1;
            false
        } else {
            true
        }
    });
}

/// A compiled limit: the rule, the key, the table.
pub(crate) struct Limiter {
    rule: Gcra,
    /// The rate as configured: requests per `window` seconds (for `RateLimit-Policy`).
    quota: u64,
    window: u64,
    name: String,
    /// See [`Limiter::fleet_id`].
    fleet_id: String,
    key: KeyBy,
    trusted: Vec<Cidr>,
    table: Table,
    epoch: std::time::Instant,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("rule", &self.rule)
            .field("key", &self.key)
            .finish()
    }
}

/// A request over its rate: the headers of the 429 answer.
#[derive(Debug)]
pub(crate) struct Limited {
    pub(crate) headers: Vec<(String, String)>,
}

/// `"10/s"` → (10, 1 s).
fn parse_rate(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("`{s}` is not a rate (expected N/s, N/m or N/h, N ≥ 1)");
    let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
    let n: u64 = n.trim().parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "s" | "sec" | "second" => 1,
        "m" | "min" | "minute" => 60,
        "h" | "hour" => 3600,
        _ => return Err(bad()),
    };
    if n == 0 {
        return Err(bad());
    }
    Ok((n, secs))
}

fn parse_key(s: &str) -> Result<KeyBy, String> {
    let bad = || format!("`{s}` is not a key (expected ip, class, header:NAME or cookie:NAME)");
    match s.trim() {
        "ip" => Ok(KeyBy::Ip),
        "class" => Ok(KeyBy::Class),
        other => match other.split_once(':') {
            Some(("header", n)) if !n.trim().is_empty() => Ok(KeyBy::Header(n.trim().to_string())),
            Some(("cookie", n)) if !n.trim().is_empty() => Ok(KeyBy::Cookie(n.trim().to_string())),
            _ => Err(bad()),
        },
    }
}

impl Limiter {
    /// Compiles a table; `Ok(None)` when it is disabled. An error names its key.
    pub(crate) fn build(t: &RateLimitTable) -> Result<Option<Limiter>, (&'static str, String)> {
        if t.enabled == Some(false) {
            return Ok(None);
        }
        let Some(rate) = &t.rate else {
            return Err(("rate", "is required (e.g. rate = \"10/s\")".to_string()));
        };
        let (n, secs) = parse_rate(rate).map_err(|m| ("rate", m))?;
        let burst = t.burst.unwrap_or(1);
        if burst == 0 {
            return Err(("burst", "must be ≥ 1, got 0".to_string()));
        }
        let key = parse_key(t.key.as_deref().unwrap_or("ip")).map_err(|m| ("key", m))?;
        let trusted = t
            .trusted_proxies
            .iter()
            .map(|c| Cidr::parse(c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| ("trusted_proxies", m))?;
        let max_keys = t.max_keys.unwrap_or(DEFAULT_MAX_KEYS);
        if max_keys == 0 {
            return Err(("max_keys", "must be ≥ 1, got 0".to_string()));
        }
        let name = t.name.clone().unwrap_or_else(|| "default".to_string());
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        {
            return Err((
                "name",
                format!("{name:?} must be printable ASCII without quotes or backslashes"),
            ));
        }
        Ok(Some(Limiter {
            rule: Gcra::new(Duration::from_nanos(secs * 1_000_000_000 / n), burst),
            quota: n,
            window: secs,
            fleet_id: format!("{name}:{n}/{secs}"),
            name,
            key,
            trusted,
            table: Table::new(max_keys),
            epoch: std::time::Instant::now(),
        }))
    }

    /// The client's address (see [`super::client_ip`]).
    pub(crate) fn client_ip(&self, req: &Request) -> IpAddr {
        super::client_ip(req, &self.trusted)
    }

    /// The rule.
    pub(crate) fn rule(&self) -> Gcra {
        self.rule
    }

    /// The limit's name among the fleet's Redis keys: its name and rate (`api:10/1`), so limits that share
    /// both share counters.
    pub(crate) fn fleet_id(&self) -> &str {
        &self.fleet_id
    }

    /// The key of `req` of class `class`, as bytes.
    pub(crate) fn key(&self, req: &Request, class: &str) -> Vec<u8> {
        let mut key = Vec::with_capacity(32);
        self.key_of(req, class, &mut key);
        key
    }

    /// This server's own decision for `key` (the table; fleet mode's fallback).
    pub(crate) fn decide_local(&self, key: &[u8]) -> Decision {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.table.check(&self.rule, key, now)
    }

    /// The key's bytes for `req` of class `class`.
    fn key_of(&self, req: &Request, class: &str, buf: &mut Vec<u8>) {
        let by_ip = |buf: &mut Vec<u8>| match self.client_ip(req) {
            IpAddr::V4(a) => buf.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => buf.extend_from_slice(&v4.octets()),
                None => buf.extend_from_slice(&a.octets()),
            },
        };
        match &self.key {
            KeyBy::Ip => by_ip(buf),
            KeyBy::Class => {
                buf.push(b'c');
                buf.extend_from_slice(class.as_bytes());
            }
            KeyBy::Header(n) => match req.header(n) {
                Some(v) => {
                    buf.push(b'h');
                    buf.extend_from_slice(v.as_bytes());
                }
                None => by_ip(buf),
            },
            KeyBy::Cookie(n) => match req.cookie(n) {
                Some(v) => {
                    buf.push(b'k');
                    buf.extend_from_slice(v.as_bytes());
                }
                None => by_ip(buf),
            },
        }
    }

    fn policy(&self) -> String {
        format!("\"{}\";q={};w={}", self.name, self.quota, self.window)
    }

    /// Decides `req`; `Err` when it is over its rate. `Ok` carries the headers to add to its answer.
    pub(crate) fn check(
        &self,
        req: &Request,
        class: &str,
    ) -> Result<Vec<(String, String)>, Limited> {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.check_at(req, class, now)
    }

    fn check_at(
        &self,
        req: &Request,
        class: &str,
        now: u64,
    ) -> Result<Vec<(String, String)>, Limited> {
        let key = self.key(req, class);
        self.answer(self.table.check(&self.rule, &key, now))
    }

    /// The headers of a decision: `Ok` for an admitted request's answer, `Err` for the 429.
    pub(crate) fn answer(&self, d: Decision) -> Result<Vec<(String, String)>, Limited> {
        let secs = |ns: u64| ns.div_ceil(1_000_000_000).max(1);
        match d {
            Decision::Allow {
                remaining,
                reset_ns,
            } => Ok(vec![
                ("RateLimit-Policy".into(), self.policy()),
                (
                    "RateLimit".into(),
                    format!("\"{}\";r={remaining};t={}", self.name, secs(reset_ns)),
                ),
            ]),
            Decision::Deny { retry_ns } => {
                let retry = secs(retry_ns);
                Err(Limited {
                    headers: vec![
                        ("Retry-After".into(), retry.to_string()),
                        ("RateLimit-Policy".into(), self.policy()),
                        (
                            "RateLimit".into(),
                            format!("\"{}\";r=0;t={retry}", self.name),
                        ),
                    ],
                })
            }
        }
    }

    /// Keys remembered now.
    #[cfg(test)]
    fn keys(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn gcra_admits_the_burst_then_the_rate() {
        // 10/s (one per 100 ms), burst 3
        let g = Gcra::new(Duration::from_millis(100), 3);
        let mut tat = None;
        let mut at = |now: u64| {
            let (d, t) = g.check(tat, now);
            tat = Some(t);
            d
        };
        assert_eq!(
            at(0),
            Decision::Allow {
                remaining: 2,
                reset_ns: 100 * MS
            }
        );
        assert_eq!(
            at(0),
            Decision::Allow {
                remaining: 1,
                reset_ns: 200 * MS
            }
        );
        assert_eq!(
            at(0),
            Decision::Allow {
                remaining: 0,
                reset_ns: 300 * MS
            }
        );
        // the fourth at once is over: one more fits 100 ms later
        assert_eq!(at(0), Decision::Deny { retry_ns: 100 * MS });
        assert_eq!(at(50 * MS), Decision::Deny { retry_ns: 50 * MS });
        assert!(matches!(at(100 * MS), Decision::Allow { remaining: 0, .. }));
        assert!(matches!(at(150 * MS), Decision::Deny { .. }));
        // a key idle long enough is full again, not more than full
        assert!(matches!(
            at(10_000 * MS),
            Decision::Allow { remaining: 2, .. }
        ));
        // the sustained rate over 10 s is 10/s however the requests are spread
        let g = Gcra::new(Duration::from_millis(100), 1);
        let mut tat = None;
        let mut admitted = 0;
        for i in 0..10_000u64 {
            let (d, t) = g.check(tat, i * MS);
            tat = Some(t);
            admitted += matches!(d, Decision::Allow { .. }) as u32;
        }
        assert_eq!(admitted, 100);
        // extreme settings neither wrap nor panic
        let g = Gcra::new(Duration::from_secs(3600), u32::MAX);
        let (d, t) = g.check(None, u64::MAX - 5);
        assert!(matches!(d, Decision::Allow { .. }));
        assert!(matches!(
            g.check(Some(t), u64::MAX).0,
            Decision::Allow { .. }
        ));
    }

    fn limiter(extra: &str) -> Limiter {
        let t: RateLimitTable = toml::from_str(&format!("rate = \"10/s\"\n{extra}")).unwrap();
        Limiter::build(&t).unwrap().unwrap()
    }

    fn req_from(ip: &str) -> Request {
        let mut r = Request::get("/");
        r.peer = std::net::SocketAddr::new(ip.parse().unwrap(), 1000);
        r
    }

    #[test]
    fn the_client_is_taken_from_x_forwarded_for_only_behind_a_trusted_proxy() {
        let l = limiter("trusted_proxies = [\"10.0.0.0/8\", \"fd00::/8\"]");
        let ip = |r: &Request| l.client_ip(r).to_string();
        // an untrusted peer's header is ignored
        let r = req_from("203.0.113.9").with_header("X-Forwarded-For", "1.2.3.4");
        assert_eq!(ip(&r), "203.0.113.9");
        // a trusted peer: the rightmost address that is not a trusted proxy
        let r = req_from("10.0.0.1").with_header("X-Forwarded-For", "6.6.6.6, 1.2.3.4, 10.9.9.9");
        assert_eq!(ip(&r), "1.2.3.4");
        let r = req_from("fd00::1").with_header("X-Forwarded-For", "2001:db8::5");
        assert_eq!(ip(&r), "2001:db8::5");
        // several headers read as one list; a malformed hop stops the walk
        let r = req_from("10.0.0.1")
            .with_header("X-Forwarded-For", "7.7.7.7")
            .with_header("X-Forwarded-For", "junk, 10.1.1.1");
        assert_eq!(ip(&r), "10.1.1.1");
        // no header: the peer
        assert_eq!(ip(&req_from("10.0.0.1")), "10.0.0.1");
    }

    #[test]
    fn keys_and_headers() {
        let l = limiter("burst = 2\nkey = \"header:X-Api-Key\"\nname = \"api\"");
        let a = req_from("1.1.1.1").with_header("X-Api-Key", "alpha");
        let b = req_from("1.1.1.1").with_header("X-Api-Key", "beta");
        let ok = l.check_at(&a, "c", 0).unwrap();
        assert_eq!(
            ok[0],
            ("RateLimit-Policy".into(), "\"api\";q=10;w=1".into())
        );
        assert_eq!(ok[1], ("RateLimit".into(), "\"api\";r=1;t=1".into()));
        assert!(l.check_at(&a, "c", 0).is_ok());
        let denied = l.check_at(&a, "c", 0).unwrap_err();
        assert_eq!(denied.headers[0], ("Retry-After".into(), "1".into()));
        assert_eq!(
            denied.headers[2],
            ("RateLimit".into(), "\"api\";r=0;t=1".into())
        );
        // another key has its own bucket; the same address without the header is keyed by address
        assert!(l.check_at(&b, "c", 0).is_ok());
        assert!(l.check_at(&req_from("1.1.1.1"), "c", 0).is_ok());
        // class keys
        let l = limiter("key = \"class\"");
        assert!(l.check_at(&req_from("1.1.1.1"), "gold", 0).is_ok());
        assert!(l.check_at(&req_from("2.2.2.2"), "gold", 0).is_err());
        assert!(l.check_at(&req_from("2.2.2.2"), "free", 0).is_ok());
        // cookies
        let l = limiter("key = \"cookie:sid\"");
        let c = |v: &str| req_from("1.1.1.1").with_header("Cookie", &format!("sid={v}"));
        assert!(l.check_at(&c("x"), "", 0).is_ok());
        assert!(l.check_at(&c("x"), "", 0).is_err());
        assert!(l.check_at(&c("y"), "", 0).is_ok());
    }

    #[test]
    fn the_table_stays_bounded_under_rotating_addresses() {
        let l = limiter("max_keys = 1000\nburst = 5");
        // a heavy client in debt, then 100 000 one-shot addresses within the same 10 ms
        for _ in 0..5 {
            assert!(l.check_at(&req_from("9.9.9.9"), "", 0).is_ok());
        }
        for i in 0..100_000u32 {
            let ip = std::net::Ipv4Addr::from(0x0b00_0000 + i);
            let _ = l.check_at(&req_from(&ip.to_string()), "", 10 * MS);
            assert!(l.keys() <= 1000 + SHARDS, "{} keys", l.keys());
        }
        // the heavy client's debt survived (it had the latest time): still limited
        assert!(l.check_at(&req_from("9.9.9.9"), "", 10 * MS).is_err());
        // once the buckets are full again, old keys are swept as new ones come
        let _ = l.check_at(&req_from("8.8.8.8"), "", 100_000 * MS);
        assert!(l.keys() <= 1000 + SHARDS);
    }

    #[test]
    fn bad_tables_name_their_key() {
        let err = |s: &str| {
            let t: RateLimitTable = toml::from_str(s).unwrap();
            Limiter::build(&t).unwrap_err()
        };
        assert_eq!(err("burst = 2").0, "rate");
        assert_eq!(err("rate = \"10\"").0, "rate");
        assert_eq!(err("rate = \"0/s\"").0, "rate");
        assert_eq!(err("rate = \"5/day\"").0, "rate");
        assert_eq!(err("rate = \"5/s\"\nburst = 0").0, "burst");
        assert_eq!(err("rate = \"5/s\"\nkey = \"query:x\"").0, "key");
        assert_eq!(err("rate = \"5/s\"\nkey = \"header:\"").0, "key");
        assert_eq!(
            err("rate = \"5/s\"\ntrusted_proxies = [\"10.0.0.0/33\"]").0,
            "trusted_proxies"
        );
        assert_eq!(err("rate = \"5/s\"\nmax_keys = 0").0, "max_keys");
        assert_eq!(err("rate = \"5/s\"\nname = \"a\\\"b\"").0, "name");
        let t: RateLimitTable = toml::from_str("enabled = false").unwrap();
        assert!(Limiter::build(&t).unwrap().is_none());
    }
}
