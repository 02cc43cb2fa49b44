//! `[forwarded]`: what a proxy route tells its upstream about the client (which peers' own forwarding
//! headers are believed) and the request id every request carries (`X-Request-Id`, kept when the client's
//! is sane, else generated; forwarded, logged and returned to the client).

use std::cell::RefCell;
use std::net::IpAddr;

use ordo_util::SplitMix64;
use serde::Deserialize;

use crate::cidr::Cidr;
use crate::http::Request;
use crate::http::headers::Known;
use crate::invalid::Invalid;
use crate::keypath;

/// The longest client-sent `X-Request-Id` kept (longer ones are replaced).
pub const MAX_REQUEST_ID: usize = 128;

/// `[forwarded]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardedConfig {
    /// Peers (CIDR ranges or addresses) whose X-Forwarded-For/-Proto/-Host and Forwarded headers a proxy
    /// route keeps and appends to; from any other peer they are replaced. Empty: nobody is trusted.
    pub trusted_proxies: Vec<String>,
    /// Give every request an `X-Request-Id` (the client's when sane, else 128 random bits in hex): sent
    /// upstream, written in the access log and returned in the response. Off by default, as in nginx and
    /// HAProxy: it cost a proxied request about 3 300 more user-space instructions (+15%; docs/serve-http.md).
    pub request_id: bool,
}

/// `[forwarded]` compiled: what the request path reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct Forwarding {
    trusted: Vec<Cidr>,
    request_id: bool,
}

impl Forwarding {
    pub(crate) fn build(cfg: &ForwardedConfig) -> Result<Forwarding, Invalid> {
        let trusted = cfg
            .trusted_proxies
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Cidr::parse(s)
                    .map_err(|e| Invalid::new(keypath!["forwarded", "trusted_proxies", i], e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Forwarding {
            trusted,
            request_id: cfg.request_id,
        })
    }

    /// Whether `ip` is a trusted proxy.
    pub(crate) fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|c| c.contains(ip))
    }

    /// Marks the request as from a trusted peer or not and gives it its request id; returns the id (for the
    /// response) when ids are on.
    pub(crate) fn prepare(&self, req: &mut Request) -> Option<Box<str>> {
        req.trusted_peer = !self.trusted.is_empty() && self.trusts(req.peer.ip());
        if !self.request_id {
            return None;
        }
        let id: Box<str> = match req.headers.known(Known::XRequestId).next() {
            Some(v) if sane_request_id(v) => v.into(),
            _ => new_request_id().into(),
        };
        req.request_id = Some(id.clone());
        Some(id)
    }
}

/// A client's request id is kept when it is 1..=[`MAX_REQUEST_ID`] bytes of visible ASCII.
pub fn sane_request_id(v: &str) -> bool {
    !v.is_empty() && v.len() <= MAX_REQUEST_ID && v.bytes().all(|b| b.is_ascii_graphic())
}

thread_local! {
    /// Per thread, seeded from the standard library's random hash keys and the time: no shared state.
    static RNG: RefCell<SplitMix64> = RefCell::new(SplitMix64::new(seed()));
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

/// 128 fresh random bits (per-thread generator: no shared state; not for secrets).
pub(crate) fn random_bits() -> u128 {
    let (a, b) = RNG.with(|r| {
        let mut r = r.borrow_mut();
        (r.next_u64(), r.next_u64())
    });
    (u128::from(a) << 64) | u128::from(b)
}

/// A fresh request id: 128 bits in 32 lower-case hex digits (per-thread generator: no shared state).
pub fn new_request_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits = random_bits();
    let mut out = [0u8; 32];
    for (i, d) in out.iter_mut().enumerate() {
        *d = HEX[((bits >> (124 - 4 * i)) & 0xf) as usize];
    }
    // (hex digits are ASCII)
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_fresh_hex() {
        let a = new_request_id();
        let b = new_request_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b);
        let other = std::thread::spawn(new_request_id).join().unwrap();
        assert_ne!(a, other);
        assert_ne!(b, other);
    }

    #[test]
    fn client_request_ids_are_kept_only_when_sane() {
        assert!(sane_request_id("abc-123"));
        assert!(sane_request_id(&"x".repeat(MAX_REQUEST_ID)));
        assert!(!sane_request_id(&"x".repeat(MAX_REQUEST_ID + 1)));
        assert!(!sane_request_id(""));
        assert!(!sane_request_id("a b"));
        assert!(!sane_request_id("é"));
        assert!(
            !ForwardedConfig::default().request_id,
            "off unless asked for"
        );
        let on = ForwardedConfig {
            request_id: true,
            ..ForwardedConfig::default()
        };
        let f = Forwarding::build(&on).unwrap();
        let mut req = Request::get("/").with_header("X-Request-Id", "given-1");
        assert_eq!(f.prepare(&mut req).as_deref(), Some("given-1"));
        let mut req = Request::get("/").with_header("X-Request-Id", "has space");
        let id = f.prepare(&mut req).unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(req.request_id.as_deref(), Some(&*id));
    }

    #[test]
    fn trust_follows_the_ranges() {
        let cfg = ForwardedConfig {
            trusted_proxies: vec!["10.0.0.0/8".into(), "::1".into()],
            request_id: false,
        };
        let f = Forwarding::build(&cfg).unwrap();
        let mut req = Request::get("/");
        req.peer = "10.1.2.3:5".parse().unwrap();
        assert_eq!(f.prepare(&mut req), None);
        assert!(req.trusted_peer);
        req.peer = "[::1]:5".parse().unwrap();
        f.prepare(&mut req);
        assert!(req.trusted_peer);
        req.peer = "11.1.2.3:5".parse().unwrap();
        f.prepare(&mut req);
        assert!(!req.trusted_peer);
        let bad = ForwardedConfig {
            trusted_proxies: vec!["10.0.0.0/99".into()],
            request_id: true,
        };
        let e = Forwarding::build(&bad).unwrap_err();
        assert!(e.message.contains("10.0.0.0/99"), "{}", e.message);
        assert_eq!(e.path, keypath!["forwarded", "trusted_proxies", 0]);
    }
}
