//! Edge duties a front end does for every route before and after its backend: per-client rate limiting
//! ([`ratelimit`]) and access control ([`access`]) before a request is queued, response compression
//! ([`compress`]) as the answer leaves. Each route's settings are compiled once per configuration (a route's
//! own table over the server's); a configuration that uses none of them costs the request path one branch.

pub mod access;
pub mod compress;
mod metrics;
pub mod ratelimit;

pub use metrics::EdgeMetrics;

use std::net::IpAddr;
use std::sync::Arc;

use crate::backend::Backend;
use crate::classify::Cidr;
use crate::config::{Invalid, ServeConfig};
use crate::http::{Request, Response};
use crate::keypath;

/// The client's address: the peer's, or — when the peer is one of `trusted` — the last address in
/// `X-Forwarded-For` that is not itself trusted (read from the right, as each proxy appends; a malformed
/// entry stops the walk, nothing left of it can be believed).
pub(crate) fn client_ip(req: &Request, trusted: &[Cidr]) -> IpAddr {
    let peer = req.peer.ip();
    if !trusted.iter().any(|c| c.contains(peer)) {
        return peer;
    }
    let mut client = peer;
    let hops: Vec<&str> = req
        .headers
        .get_all("x-forwarded-for")
        .flat_map(|v| v.split(','))
        .collect();
    for hop in hops.iter().rev() {
        let Ok(ip) = hop.trim().parse::<IpAddr>() else {
            break;
        };
        client = ip;
        if !trusted.iter().any(|c| c.contains(ip)) {
            break;
        }
    }
    client
}

/// What one route does at the edge.
#[derive(Debug, Default)]
pub(crate) struct EdgeRoute {
    prefix: String,
    rate_limit: Option<Arc<ratelimit::Limiter>>,
    access: Option<access::Access>,
    compression: Option<compress::Compression>,
}

/// Headers an admitted request's answer gets (the rate limit's state).
pub(crate) type Extra = Vec<(String, String)>;

impl EdgeRoute {
    fn is_noop(&self) -> bool {
        self.rate_limit.is_none() && self.access.is_none() && self.compression.is_none()
    }

    /// Before the request is queued: the rate limit (429), then the address rules (403), then basic auth
    /// (401) — nginx's order (limit_req before access), so a flood of guessed passwords is limited before
    /// each costs a bcrypt check. `Ok` carries headers for the answer.
    ///
    /// With fleet mode (`fleet`), the rate limit's decision is the fleet's, taken in Redis; when Redis
    /// does not answer in time, this server's own.
    pub(crate) async fn admit(
        &self,
        req: &Request,
        class: &str,
        metrics: &EdgeMetrics,
        fleet: Option<&crate::fleet::Fleet>,
    ) -> Result<Extra, Response> {
        let mut extra = Vec::new();
        if let Some(l) = &self.rate_limit {
            let decided = match fleet {
                Some(f) => {
                    let key = l.key(req, class);
                    let d = match f.rate_check(l.fleet_id(), l.rule().nanos(), &key).await {
                        Some(crate::fleet::Verdict::Allow {
                            remaining,
                            reset_ns,
                        }) => ratelimit::Decision::Allow {
                            remaining,
                            reset_ns,
                        },
                        Some(crate::fleet::Verdict::Deny { retry_ns }) => {
                            ratelimit::Decision::Deny { retry_ns }
                        }
                        None => l.decide_local(&key),
                    };
                    l.answer(d)
                }
                None => l.check(req, class),
            };
            match decided {
                Ok(h) => extra = h,
                Err(limited) => {
                    metrics.rate_limited(&self.prefix);
                    let mut resp = Response::text(429, "too many requests");
                    resp.headers.extend(limited.headers);
                    return Err(resp);
                }
            }
        }
        if let Some(a) = &self.access {
            if let Err((why, resp)) = a.check(req).await {
                metrics.access_denied(&self.prefix, why.as_str());
                return Err(resp);
            }
        }
        Ok(extra)
    }

    /// The backend's answer to `req`, or — for a static route with precompressed siblings — the sibling's.
    pub(crate) async fn call(
        &self,
        backend: &Backend,
        req: &Request,
        class: crate::backend::ClassInfo,
    ) -> Response {
        if let (Some(c), Backend::Static(s)) = (&self.compression, backend) {
            if let Some(resp) = c.precompressed(s, req).await {
                return resp;
            }
        }
        backend.call_at(req, class).await
    }

    /// The response as it leaves: `extra` headers added, compressed when the route and the request allow.
    pub(crate) fn finish(&self, req: &Request, mut resp: Response, extra: Extra) -> Response {
        resp.headers.extend(extra);
        match &self.compression {
            Some(c) => c.apply(req, resp),
            None => resp,
        }
    }
}

/// The edge settings of every route of a configuration (empty when no route uses any).
#[derive(Debug, Default)]
pub(crate) struct Edge {
    routes: Vec<(String, Arc<EdgeRoute>)>,
}

impl Edge {
    /// Compiles every route's settings; an error names the key in the table that set it.
    pub(crate) fn build(cfg: &ServeConfig) -> Result<Edge, Invalid> {
        let shared_limit = match &cfg.rate_limit {
            Some(t) => ratelimit::Limiter::build(t)
                .map_err(|(k, m)| Invalid::new(keypath!["rate_limit", k], m))?
                .map(Arc::new),
            None => None,
        };
        let mut routes = Vec::new();
        for (i, r) in cfg.effective_routes().iter().enumerate() {
            let compression =
                compress::Compression::build(cfg.compression.as_ref(), r.compression.as_ref())
                    .map(|c| match r.static_files {
                        Some(_) => c.map(compress::Compression::for_static),
                        None => c,
                    })
                    .map_err(|(in_route, (key, msg))| {
                        let path = if in_route {
                            keypath!["routes", i, "compression", key]
                        } else {
                            keypath!["compression", key]
                        };
                        Invalid::new(path, msg)
                    })?;
            let rate_limit = match &r.rate_limit {
                Some(t) => ratelimit::Limiter::build(t)
                    .map_err(|(k, m)| Invalid::new(keypath!["routes", i, "rate_limit", k], m))?
                    .map(Arc::new),
                None => shared_limit.clone(),
            };
            let access = match &r.access {
                Some(t) => Some(
                    access::Access::build(t, &|p| cfg.resolve(p))
                        .map_err(|(k, m)| Invalid::new(keypath!["routes", i, "access", k], m))?,
                ),
                None => None,
            };
            let e = EdgeRoute {
                prefix: r.prefix.clone(),
                rate_limit,
                access,
                compression,
            };
            if !e.is_noop() {
                routes.push((r.prefix.clone(), Arc::new(e)));
            }
        }
        Ok(Edge { routes })
    }

    /// The settings of the route with this prefix; `None` when it has none.
    pub(crate) fn route(&self, prefix: &str) -> Option<&Arc<EdgeRoute>> {
        if self.routes.is_empty() {
            return None;
        }
        self.routes
            .iter()
            .find(|(p, _)| p == prefix)
            .map(|(_, e)| e)
    }
}
