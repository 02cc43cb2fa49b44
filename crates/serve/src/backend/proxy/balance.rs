//! Which upstream of a group a request goes to: weighted round robin (each serving thread walks its own
//! smooth weighted sequence, so no counter is shared), least outstanding requests per weight, the better
//! of two random choices by latency (peak EWMA × outstanding, as Linkerd and Finagle do), and consistent
//! (rendezvous) hashing on the client's address, a header or a cookie, so a client stays on one upstream
//! and only the keys of an upstream that goes away move. Upstreams that are ejected or down are skipped,
//! and so are those a failed request already tried.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::Deserialize;

use crate::http::Request;

use super::health::Passive;
use super::pool::Upstream;

/// `balance`: how a request picks its upstream.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Weighted round robin (nginx's smooth weighted sequence).
    #[default]
    RoundRobin,
    /// The fewest requests in flight per unit of weight (HAProxy's `leastconn`, Envoy's least request).
    LeastRequests,
    /// Of two upstreams drawn at random, the one with the lower latency × (in flight + 1) / weight.
    P2cEwma,
    /// Rendezvous hashing on `hash_key` (sticky sessions).
    Hash,
}

impl Balance {
    /// Whether requests in flight and latencies are counted per upstream (shared writes, paid only by the
    /// policies that read them).
    pub(super) fn tracks_load(self) -> bool {
        matches!(self, Balance::LeastRequests | Balance::P2cEwma)
    }
}

/// What `balance = "hash"` hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum HashKey {
    ClientIp,
    Header(String),
    Cookie(String),
}

impl HashKey {
    /// `"client_ip"`, `"header:NAME"` or `"cookie:NAME"`.
    pub(super) fn parse(s: &str) -> Result<HashKey, String> {
        let s = s.trim();
        if s == "client_ip" {
            return Ok(HashKey::ClientIp);
        }
        let bad =
            || format!("expected \"client_ip\", \"header:NAME\" or \"cookie:NAME\", got {s:?}");
        let (kind, name) = s.split_once(':').ok_or_else(bad)?;
        let name = name.trim();
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(bad());
        }
        match kind.trim() {
            "header" => Ok(HashKey::Header(name.to_string())),
            "cookie" => Ok(HashKey::Cookie(name.to_string())),
            _ => Err(bad()),
        }
    }

    /// The request's key (None: it has none — a missing header or cookie; round robin then).
    fn of<'r>(&self, req: &'r Request, ip: &'r mut [u8; 16]) -> Option<&'r [u8]> {
        match self {
            HashKey::ClientIp => {
                *ip = match req.peer.ip() {
                    std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                    std::net::IpAddr::V6(a) => a.octets(),
                };
                Some(&ip[..])
            }
            HashKey::Header(n) => req.headers.get(n).map(str::as_bytes),
            HashKey::Cookie(n) => req.cookie(n).map(str::as_bytes),
        }
    }
}

/// Load figures of one upstream, kept only when the policy reads them.
#[derive(Debug, Default)]
pub(super) struct Load {
    /// Requests in flight.
    pub(super) outstanding: AtomicUsize,
    /// Peak EWMA of response times, in nanoseconds (0: none measured yet).
    ewma_ns: AtomicU64,
    /// When `ewma_ns` was last updated (`health::now_nanos`).
    stamp: AtomicU64,
}

/// The EWMA's time constant: a sample's weight halves about every 7 s.
const TAU_NS: f64 = 10e9;

impl Load {
    /// A response time: taken at once when higher than the average (peak), decayed towards it otherwise.
    pub(super) fn observe(&self, rtt_ns: u64, now: u64) {
        let old = self.ewma_ns.load(Ordering::Relaxed);
        let then = self.stamp.swap(now, Ordering::Relaxed);
        let new = if old == 0 || rtt_ns > old {
            rtt_ns
        } else {
            let w = (-((now.saturating_sub(then)) as f64) / TAU_NS).exp();
            (old as f64 * w + rtt_ns as f64 * (1.0 - w)) as u64
        };
        self.ewma_ns.store(new.max(1), Ordering::Relaxed);
    }

    fn cost(&self, weight: u32) -> f64 {
        let ewma = self.ewma_ns.load(Ordering::Relaxed).max(1) as f64;
        let busy = self.outstanding.load(Ordering::Relaxed) as f64 + 1.0;
        ewma * busy / f64::from(weight.max(1))
    }
}

thread_local! {
    /// A per-thread xorshift state for the random draws (seeded from the thread's stripe of the hasher).
    static RNG: Cell<u64> = const { Cell::new(0) };
}

fn random() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        if x == 0 {
            x = std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
                | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.set(x);
        x
    })
}

/// The smooth weighted round-robin sequence of a group (nginx's): each upstream appears `weight` times,
/// spread out. Built once per backend; each serving thread walks it from its own position.
pub(super) fn smooth_sequence(weights: &[u32]) -> Vec<u16> {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut seq = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (i, w) in weights.iter().enumerate() {
            current[i] += i64::from(*w);
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        seq.push(best as u16);
    }
    seq
}

/// The choice's inputs.
pub(super) struct Pick<'a> {
    pub(super) upstreams: &'a [std::sync::Arc<Upstream>],
    pub(super) passive: &'a Passive,
    /// Indices a failed request already tried.
    pub(super) tried: &'a [usize],
    pub(super) now: &'a mut Option<u64>,
}

impl Pick<'_> {
    fn eligible(&mut self, i: usize) -> bool {
        !self.tried.contains(&i) && self.upstreams[i].health.available(self.now)
    }

    /// The upstream's weight now (its share rising after an ejection).
    fn weight(&mut self, i: usize) -> f64 {
        let u = &self.upstreams[i];
        f64::from(u.weight) * u.health.ramp(self.passive, self.now)
    }

    /// Weighted round robin from position `pos` of `seq` (advanced past the choice). An upstream coming
    /// back from an ejection is skipped with the probability of the share it does not have yet.
    pub(super) fn round_robin(&mut self, seq: &[u16], pos: &mut usize) -> Option<usize> {
        for _ in 0..seq.len() {
            let i = usize::from(seq[*pos % seq.len()]);
            *pos = pos.wrapping_add(1);
            if !self.eligible(i) {
                continue;
            }
            let share = self.weight(i) / f64::from(self.upstreams[i].weight.max(1));
            if share < 1.0 && (random() % 1000) as f64 >= share * 1000.0 {
                continue;
            }
            return Some(i);
        }
        // everything eligible was skipped by the ramp, or nothing is eligible
        (0..self.upstreams.len()).find(|&i| self.eligible(i))
    }

    /// The fewest requests in flight per weight; ties go to the first from a random start.
    pub(super) fn least_requests(&mut self) -> Option<usize> {
        let n = self.upstreams.len();
        let start = (random() as usize) % n;
        let mut best: Option<(f64, usize)> = None;
        for k in 0..n {
            let i = (start + k) % n;
            if !self.eligible(i) {
                continue;
            }
            let busy = self.upstreams[i].load.outstanding.load(Ordering::Relaxed) as f64 + 1.0;
            let cost = busy / self.weight(i).max(0.01);
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Two eligible upstreams at random; the cheaper by latency × load / weight.
    pub(super) fn p2c(&mut self) -> Option<usize> {
        let eligible: Vec<usize> = (0..self.upstreams.len())
            .filter(|&i| self.eligible(i))
            .collect();
        match eligible.len() {
            0 => None,
            1 => Some(eligible[0]),
            n => {
                let a = eligible[(random() as usize) % n];
                let mut b = eligible[(random() as usize) % (n - 1)];
                if b == a {
                    b = eligible[n - 1];
                }
                let cost = |s: &mut Self, i: usize| {
                    let w = s.weight(i);
                    s.upstreams[i].load.cost(1) / w.max(0.01)
                };
                if cost(self, a) <= cost(self, b) {
                    Some(a)
                } else {
                    Some(b)
                }
            }
        }
    }

    /// Rendezvous hashing: the eligible upstream with the highest weighted score for the key
    /// (`-weight / ln(h)`, h uniform in (0, 1)), so removing one moves only its own keys.
    pub(super) fn hash(&mut self, key: &HashKey, req: &Request) -> Option<Option<usize>> {
        let mut ip = [0u8; 16];
        let k = key.of(req, &mut ip)?;
        let mut best: Option<(f64, usize)> = None;
        for i in 0..self.upstreams.len() {
            if !self.eligible(i) {
                continue;
            }
            let h = fnv1a(k, &self.upstreams[i].addr);
            let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let score = -f64::from(self.upstreams[i].weight.max(1)) / u.ln();
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, i));
            }
        }
        Some(best.map(|(_, i)| i))
    }
}

/// FNV-1a over the key and the upstream's address, finished with a 64-bit mix (stable across processes
/// and restarts, so a fleet of instances sends a key to the same upstream).
fn fnv1a(key: &[u8], addr: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.iter().chain([0xffu8].iter()).chain(addr.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // splitmix64's finaliser
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn group(weights: &[u32]) -> Vec<Arc<Upstream>> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut u =
                    Upstream::new(format!("10.0.0.{i}:80"), None, 1, Duration::from_secs(60));
                u.weight = *w;
                Arc::new(u)
            })
            .collect()
    }

    fn picker<'a>(
        upstreams: &'a [Arc<Upstream>],
        passive: &'a Passive,
        tried: &'a [usize],
        now: &'a mut Option<u64>,
    ) -> Pick<'a> {
        Pick {
            upstreams,
            passive,
            tried,
            now,
        }
    }

    fn passive() -> Passive {
        Passive {
            max_fails: 1,
            eject_for: Duration::from_secs(60),
            max_eject: Duration::from_secs(60),
            slow_start: Duration::ZERO,
        }
    }

    #[test]
    fn the_smooth_sequence_spreads_by_weight() {
        assert_eq!(smooth_sequence(&[5, 1, 1]), vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(smooth_sequence(&[1, 1]), vec![0, 1]);
        let seq = smooth_sequence(&[3, 2, 1]);
        let count = |i| seq.iter().filter(|&&x| x == i).count();
        assert_eq!((count(0), count(1), count(2)), (3, 2, 1));
    }

    #[test]
    fn round_robin_follows_the_weights_and_skips_the_ejected() {
        let ups = group(&[2, 1, 1]);
        let p = passive();
        let seq = smooth_sequence(&[2, 1, 1]);
        let mut pos = 0;
        let mut counts = [0; 3];
        for _ in 0..400 {
            let mut now = None;
            let mut pick = picker(&ups, &p, &[], &mut now);
            counts[pick.round_robin(&seq, &mut pos).unwrap()] += 1;
        }
        assert_eq!(counts, [200, 100, 100]);
        assert!(ups[0].health.failure(&p), "ejected");
        let mut counts = [0; 3];
        for _ in 0..400 {
            let mut now = None;
            let mut pick = picker(&ups, &p, &[], &mut now);
            counts[pick.round_robin(&seq, &mut pos).unwrap()] += 1;
        }
        assert_eq!(counts, [0, 200, 200]);
        // what a failed request tried is skipped; nothing left → None
        let mut now = None;
        let mut pick = picker(&ups, &p, &[1, 2], &mut now);
        assert_eq!(pick.round_robin(&seq, &mut pos), None);
    }

    #[test]
    fn least_requests_takes_the_least_busy_per_weight() {
        let ups = group(&[1, 1, 2]);
        let p = passive();
        ups[0].load.outstanding.store(3, Ordering::Relaxed);
        ups[1].load.outstanding.store(1, Ordering::Relaxed);
        ups[2].load.outstanding.store(3, Ordering::Relaxed); // (3+1)/2 = 2 = (1+1)/1: a tie
        for _ in 0..50 {
            let mut now = None;
            let mut pick = picker(&ups, &p, &[], &mut now);
            let i = pick.least_requests().unwrap();
            assert!(i == 1 || i == 2, "{i}");
        }
        ups[1].load.outstanding.store(5, Ordering::Relaxed);
        let mut now = None;
        let mut pick = picker(&ups, &p, &[], &mut now);
        assert_eq!(pick.least_requests(), Some(2));
    }

    #[test]
    fn p2c_prefers_the_faster_upstream() {
        let ups = group(&[1, 1]);
        let p = passive();
        let now = super::super::health::now_nanos();
        ups[0].load.observe(50_000_000, now); // 50 ms
        ups[1].load.observe(1_000_000, now); // 1 ms
        let mut counts = [0; 2];
        for _ in 0..200 {
            let mut n = None;
            let mut pick = picker(&ups, &p, &[], &mut n);
            counts[pick.p2c().unwrap()] += 1;
        }
        assert_eq!(
            counts,
            [0, 200],
            "with two upstreams both are drawn: the faster wins"
        );
        // a peak is taken at once, a lower sample decays in
        ups[1].load.observe(80_000_000, now + 1);
        assert_eq!(ups[1].load.ewma_ns.load(Ordering::Relaxed), 80_000_000);
        ups[1].load.observe(1_000_000, now + 10_000_000_000);
        let e = ups[1].load.ewma_ns.load(Ordering::Relaxed);
        assert!(e < 80_000_000 && e > 1_000_000, "{e}");
    }

    #[test]
    fn hashing_is_sticky_and_moves_only_the_lost_upstreams_keys() {
        let ups = group(&[1, 1, 1, 1]);
        let p = passive();
        let key = HashKey::parse("header:X-User").unwrap();
        let pick_for = |user: &str, tried: &[usize]| {
            let req = Request::get("/").with_header("X-User", user);
            let mut now = None;
            let mut pick = picker(&ups, &p, tried, &mut now);
            pick.hash(&key, &req).unwrap().unwrap()
        };
        let before: Vec<usize> = (0..400).map(|u| pick_for(&u.to_string(), &[])).collect();
        let again: Vec<usize> = (0..400).map(|u| pick_for(&u.to_string(), &[])).collect();
        assert_eq!(before, again, "the same key, the same upstream");
        let mut counts = [0; 4];
        for i in &before {
            counts[*i] += 1;
        }
        assert!(
            counts.iter().all(|c| (60..=140).contains(c)),
            "spread: {counts:?}"
        );
        // upstream 2 goes away: its keys move, no other key does
        let after: Vec<usize> = (0..400).map(|u| pick_for(&u.to_string(), &[2])).collect();
        for (b, a) in before.iter().zip(&after) {
            if *b != 2 {
                assert_eq!(a, b);
            } else {
                assert_ne!(*a, 2);
            }
        }
        // no key: no choice by hash
        let req = Request::get("/");
        let mut now = None;
        let mut pick = picker(&ups, &p, &[], &mut now);
        assert_eq!(pick.hash(&key, &req), None);
    }

    #[test]
    fn hash_keys_parse() {
        assert_eq!(HashKey::parse("client_ip"), Ok(HashKey::ClientIp));
        assert_eq!(
            HashKey::parse("header:X-User"),
            Ok(HashKey::Header("X-User".into()))
        );
        assert_eq!(
            HashKey::parse("cookie:session"),
            Ok(HashKey::Cookie("session".into()))
        );
        for bad in ["", "ip", "header:", "query:x", "header:a b", "cookie"] {
            assert!(HashKey::parse(bad).is_err(), "{bad:?}");
        }
    }
}
