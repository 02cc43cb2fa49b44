//! Whether an upstream takes requests: passive outlier ejection (consecutive failures eject it for a time
//! that doubles with each further ejection, and it returns with a share that rises over `slow_start`) and
//! active HTTP checks (a path polled every `interval`; `fall` failures in a row mark it down, `rise`
//! successes up again). The healthy path reads these atomics and writes nothing: only failures, ejections
//! and checks write.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::duration;

use super::pool::Upstream;

/// Nanoseconds since the first call (the health state's clock; 0 is never a deadline).
pub(super) fn now_nanos() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let e = EPOCH.get_or_init(Instant::now);
    u64::try_from(e.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The passive rule's settings (from `[routes.proxy]`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Passive {
    /// Consecutive failures that eject (0: never).
    pub(super) max_fails: u32,
    pub(super) eject_for: Duration,
    pub(super) max_eject: Duration,
    pub(super) slow_start: Duration,
}

/// `[routes.proxy.health_check]`: active checks.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckConfig {
    /// The path requested (`GET`, `Connection: close`).
    pub path: String,
    #[serde(deserialize_with = "duration::deserialize")]
    pub interval: Duration,
    /// Time for the whole check (connect, request, status line).
    #[serde(deserialize_with = "duration::deserialize")]
    pub timeout: Duration,
    /// The status that means healthy: a code (`200`) or a class (`"2xx"`, `"3xx"`).
    pub expect: String,
    /// Successes in a row that mark a down upstream up.
    pub rise: u32,
    /// Failures in a row that mark an up upstream down.
    pub fall: u32,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        HealthCheckConfig {
            path: "/".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            expect: "2xx".into(),
            rise: 2,
            fall: 3,
        }
    }
}

impl HealthCheckConfig {
    /// Refuses what could never work: `Err((key, why))`.
    pub(super) fn check(&self) -> Result<(), (&'static str, String)> {
        if !self.path.starts_with('/') || self.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err((
                "health_check.path",
                format!(
                    "must start with / and hold no spaces or control bytes, got {:?}",
                    self.path
                ),
            ));
        }
        if self.interval.is_zero() || self.timeout.is_zero() {
            return Err((
                "health_check.interval",
                "interval and timeout must be > 0".into(),
            ));
        }
        if self.rise == 0 || self.fall == 0 {
            return Err(("health_check.rise", "rise and fall must be ≥ 1".into()));
        }
        if Expect::parse(&self.expect).is_none() {
            return Err((
                "health_check.expect",
                format!(
                    "expected a status (200) or a class (\"2xx\"), got {:?}",
                    self.expect
                ),
            ));
        }
        Ok(())
    }
}

/// What status a check wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Code(u16),
    Class(u16),
}

impl Expect {
    fn parse(s: &str) -> Option<Expect> {
        let s = s.trim();
        if let Some(c) = s.strip_suffix("xx").or_else(|| s.strip_suffix("XX")) {
            return match c.parse::<u16>() {
                Ok(d @ 1..=5) if c.len() == 1 => Some(Expect::Class(d)),
                _ => None,
            };
        }
        match s.parse::<u16>() {
            Ok(code @ 100..=599) => Some(Expect::Code(code)),
            _ => None,
        }
    }

    fn matches(self, status: u16) -> bool {
        match self {
            Expect::Code(c) => status == c,
            Expect::Class(d) => status / 100 == d,
        }
    }
}

/// One upstream's health. Written on failures, ejections and checks only.
#[derive(Debug, Default)]
pub(super) struct Health {
    /// Consecutive failed requests.
    fails: AtomicU32,
    /// While ejected: when it ends (`now_nanos`); 0 when not ejected.
    ejected_until: AtomicU64,
    /// Ejections in a row (the back-off's exponent); back to 0 after a success past the slow start.
    ejections: AtomicU32,
    /// When the last ejection ended (the slow start counts from it); 0: never ejected.
    returned_at: AtomicU64,
    /// Active checks say it is down.
    down: AtomicBool,
    /// Every ejection so far (for metrics and `/status`).
    total_ejections: AtomicU64,
}

/// What `/status` and the metrics show of an upstream's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthState {
    Up,
    /// Ejected by the passive rule, for this much longer.
    Ejected(Duration),
    /// Marked down by active checks.
    Down,
}

impl HealthState {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Up => "up",
            HealthState::Ejected(_) => "ejected",
            HealthState::Down => "down",
        }
    }
}

impl Health {
    /// Whether it takes requests at `now` (computed only when an ejection is on).
    pub(super) fn available(&self, now: &mut Option<u64>) -> bool {
        if self.down.load(Ordering::Relaxed) {
            return false;
        }
        let until = self.ejected_until.load(Ordering::Relaxed);
        until == 0 || *now.get_or_insert_with(now_nanos) >= until
    }

    /// The share of its weight it gets now: rising from 1/10 to 1 over `slow_start` after an ejection
    /// ended (a returning upstream is not handed its whole share at once).
    pub(super) fn ramp(&self, p: &Passive, now: &mut Option<u64>) -> f64 {
        let back = self.returned_at.load(Ordering::Relaxed);
        if back == 0 || p.slow_start.is_zero() {
            return 1.0;
        }
        let t = *now.get_or_insert_with(now_nanos);
        if t <= back {
            return 0.1;
        }
        let f = (t - back) as f64 / nanos(p.slow_start) as f64;
        f.clamp(0.1, 1.0)
    }

    pub(super) fn state(&self) -> HealthState {
        if self.down.load(Ordering::Relaxed) {
            return HealthState::Down;
        }
        let until = self.ejected_until.load(Ordering::Relaxed);
        let now = now_nanos();
        if until > now {
            HealthState::Ejected(Duration::from_nanos(until - now))
        } else {
            HealthState::Up
        }
    }

    pub(super) fn consecutive_failures(&self) -> u32 {
        self.fails.load(Ordering::Relaxed)
    }

    pub(super) fn total_ejections(&self) -> u64 {
        self.total_ejections.load(Ordering::Relaxed)
    }

    /// A request it answered (its status not a failure): clears the failure count (a read first, so the
    /// healthy path writes nothing), and the back-off once past the slow start.
    pub(super) fn success(&self, p: &Passive) {
        if self.fails.load(Ordering::Relaxed) != 0 {
            self.fails.store(0, Ordering::Relaxed);
        }
        if self.ejections.load(Ordering::Relaxed) != 0 {
            let back = self.returned_at.load(Ordering::Relaxed);
            if now_nanos() >= back.saturating_add(nanos(p.slow_start.max(p.eject_for))) {
                self.ejections.store(0, Ordering::Relaxed);
            }
        }
    }

    /// A failed request (connect error, timeout, malformed answer, a 5xx it sent): `max_fails` in a row
    /// eject it for `eject_for`, doubled for each ejection in a row up to `max_eject`. Returns whether
    /// this failure ejected it.
    pub(super) fn failure(&self, p: &Passive) -> bool {
        if p.max_fails == 0 {
            return false;
        }
        let fails = self.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if fails < p.max_fails {
            return false;
        }
        let now = now_nanos();
        if self.ejected_until.load(Ordering::Relaxed) > now {
            return false; // already ejected (requests that were under way when it was)
        }
        let n = self.ejections.fetch_add(1, Ordering::Relaxed).min(30);
        let d = p
            .eject_for
            .checked_mul(1u32 << n)
            .unwrap_or(p.max_eject)
            .min(p.max_eject);
        let until = now.saturating_add(nanos(d));
        self.ejected_until.store(until, Ordering::Relaxed);
        self.returned_at.store(until, Ordering::Relaxed);
        // back from the ejection, one more failure ejects it again (for twice as long)
        self.fails.store(p.max_fails - 1, Ordering::Relaxed);
        self.total_ejections.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Active checks: mark down, or up (which also ends a passive ejection: the check says it is back).
    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::Relaxed);
        if !down {
            self.ejected_until.store(0, Ordering::Relaxed);
            self.fails.store(0, Ordering::Relaxed);
        }
    }
}

/// Runs the active checks of `upstreams` every `cfg.interval` until `alive` is gone (the backend was
/// replaced by a reload or the server stopped).
pub(super) async fn run_checks(
    cfg: HealthCheckConfig,
    upstreams: Vec<Arc<Upstream>>,
    alive: Weak<()>,
) {
    let Some(expect) = Expect::parse(&cfg.expect) else {
        return;
    };
    let mut streaks: Vec<(bool, u32)> = vec![(true, 0); upstreams.len()];
    let mut tick = tokio::time::interval(cfg.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if alive.strong_count() == 0 {
            return;
        }
        // every upstream at once: a hung one costs the round its timeout, not the others' turns
        let mut round = tokio::task::JoinSet::new();
        for (i, u) in upstreams.iter().enumerate() {
            let (u, path, timeout) = (u.clone(), cfg.path.clone(), cfg.timeout);
            round.spawn(async move {
                let status = tokio::time::timeout(timeout, check_once(&u, &path)).await;
                (i, matches!(status, Ok(Some(s)) if expect.matches(s)))
            });
        }
        let mut results = vec![false; upstreams.len()];
        while let Some(r) = round.join_next().await {
            if let Ok((i, ok)) = r {
                results[i] = ok;
            }
        }
        for ((u, ok), (was_up, streak)) in upstreams.iter().zip(results).zip(streaks.iter_mut()) {
            if ok == *was_up {
                *streak = 0;
                continue;
            }
            *streak += 1;
            let needed = if *was_up { cfg.fall } else { cfg.rise };
            if *streak >= needed {
                *was_up = ok;
                *streak = 0;
                u.health.set_down(!ok);
                if ok {
                    tracing::info!(upstream = %u.addr, "health check: up again");
                } else {
                    tracing::warn!(upstream = %u.addr, "health check: down after {} failed checks", cfg.fall);
                }
            }
        }
    }
}

/// One check: connect (TLS for an `https://` upstream), `GET path`, read the status line.
async fn check_once(u: &Upstream, path: &str) -> Option<u16> {
    let tcp = tokio::net::TcpStream::connect(u.addr.as_str()).await.ok()?;
    let host = u.addr.as_str();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: ordo-health-check\r\nConnection: close\r\n\r\n"
    );
    let mut buf = Vec::with_capacity(256);
    match &u.tls {
        None => {
            let mut s = tcp;
            s.write_all(req.as_bytes()).await.ok()?;
            read_status(&mut s, &mut buf).await
        }
        Some(tls) => {
            let mut s = tls.connect(tcp).await.ok()?;
            s.write_all(req.as_bytes()).await.ok()?;
            read_status(&mut s, &mut buf).await
        }
    }
}

/// The status code of the first line (`HTTP/1.x NNN ...`), reading at most 1 KiB.
async fn read_status(
    s: &mut (impl tokio::io::AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> Option<u16> {
    let mut chunk = [0u8; 256];
    while !buf.contains(&b'\n') && buf.len() < 1024 {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_ascii_whitespace();
    if !words.next()?.starts_with("HTTP/1.") {
        return None;
    }
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passive() -> Passive {
        Passive {
            max_fails: 3,
            eject_for: Duration::from_millis(200),
            max_eject: Duration::from_millis(700),
            slow_start: Duration::ZERO,
        }
    }

    #[test]
    fn consecutive_failures_eject_with_a_doubling_back_off() {
        let p = passive();
        let h = Health::default();
        let mut now = None;
        assert!(h.available(&mut now));
        assert!(!h.failure(&p));
        assert!(!h.failure(&p));
        h.success(&p); // not consecutive
        assert!(!h.failure(&p));
        assert!(!h.failure(&p));
        assert!(h.failure(&p), "the third in a row ejects");
        assert!(!h.available(&mut None));
        let HealthState::Ejected(left) = h.state() else {
            panic!("{:?}", h.state())
        };
        assert!(left <= Duration::from_millis(200) && left > Duration::from_millis(100));
        // a request under way when it was ejected fails too: not a second ejection
        assert!(!h.failure(&p));
        assert_eq!(h.total_ejections(), 1);
        // force the end of the ejection, then one more failure ejects again for twice as long
        h.ejected_until.store(1, Ordering::Relaxed);
        assert!(h.available(&mut None));
        assert!(
            h.failure(&p),
            "back from an ejection, one failure ejects again"
        );
        let HealthState::Ejected(left) = h.state() else {
            panic!()
        };
        assert!(
            left > Duration::from_millis(300) && left <= Duration::from_millis(400),
            "{left:?}"
        );
        // capped by max_eject
        h.ejected_until.store(1, Ordering::Relaxed);
        assert!(h.failure(&p));
        let HealthState::Ejected(left) = h.state() else {
            panic!()
        };
        assert!(
            left <= Duration::from_millis(700) && left > Duration::from_millis(600),
            "{left:?}"
        );
        assert_eq!(h.total_ejections(), 3);
    }

    #[test]
    fn max_fails_zero_never_ejects() {
        let p = Passive {
            max_fails: 0,
            ..passive()
        };
        let h = Health::default();
        for _ in 0..100 {
            assert!(!h.failure(&p));
        }
        assert!(h.available(&mut None));
    }

    #[test]
    fn a_returning_upstream_ramps_up() {
        let p = Passive {
            slow_start: Duration::from_secs(10),
            ..passive()
        };
        let h = Health::default();
        assert_eq!(h.ramp(&p, &mut None), 1.0, "never ejected: full share");
        let now = now_nanos();
        h.returned_at.store(now + 1_000_000_000, Ordering::Relaxed);
        assert_eq!(h.ramp(&p, &mut Some(now)), 0.1, "still ejected");
        let half = now + 1_000_000_000 + 5_000_000_000;
        assert!((h.ramp(&p, &mut Some(half)) - 0.5).abs() < 1e-9);
        let after = now + 1_000_000_000 + 20_000_000_000;
        assert_eq!(h.ramp(&p, &mut Some(after)), 1.0);
    }

    #[test]
    fn checks_say_down_and_back_up() {
        let h = Health::default();
        h.set_down(true);
        assert_eq!(h.state(), HealthState::Down);
        assert!(!h.available(&mut None));
        h.ejected_until.store(u64::MAX, Ordering::Relaxed);
        h.set_down(false);
        assert_eq!(
            h.state(),
            HealthState::Up,
            "a passing check also ends an ejection"
        );
    }

    #[test]
    fn expected_statuses() {
        assert_eq!(Expect::parse("200"), Some(Expect::Code(200)));
        assert_eq!(Expect::parse("2xx"), Some(Expect::Class(2)));
        assert_eq!(Expect::parse("3XX"), Some(Expect::Class(3)));
        for bad in ["", "2x", "20x", "6xx", "99", "600", "ok", "22xx"] {
            assert_eq!(Expect::parse(bad), None, "{bad:?}");
        }
        assert!(Expect::Class(2).matches(204));
        assert!(!Expect::Class(2).matches(301));
        assert!(Expect::Code(204).matches(204));
        assert!(!Expect::Code(204).matches(200));
    }

    #[test]
    fn check_settings_are_validated() {
        assert!(HealthCheckConfig::default().check().is_ok());
        let bad = |f: fn(&mut HealthCheckConfig)| {
            let mut c = HealthCheckConfig::default();
            f(&mut c);
            c.check().unwrap_err().0
        };
        assert_eq!(bad(|c| c.path = "health".into()), "health_check.path");
        assert_eq!(bad(|c| c.path = "/a b".into()), "health_check.path");
        assert_eq!(
            bad(|c| c.interval = Duration::ZERO),
            "health_check.interval"
        );
        assert_eq!(bad(|c| c.rise = 0), "health_check.rise");
        assert_eq!(bad(|c| c.expect = "7xx".into()), "health_check.expect");
    }
}
