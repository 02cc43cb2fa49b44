//! The proxy backend: forwards requests to HTTP/1.1 upstreams (round-robin over the list) over a keep-alive
//! connection pool, and maps upstream failures to gateway statuses:
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
//! Responses with a Content-Length up to `buffer_max_bytes` are read whole; longer, chunked or
//! close-delimited ones are streamed to the client as they arrive.
//!
//! The rooms: `mod.rs` the configuration and the call loop; [`pool`] each upstream's per-thread idle
//! connections; [`connect`] upstream addresses, connecting and TLS; [`forward`] the request head as
//! forwarded and the Via pseudonym; [`exchange`] one request and response over one connection and the
//! gateway status of each failure; [`retry`] when a failed exchange is sent again (one pure rule).

mod connect;
mod exchange;
mod forward;
mod pool;
mod retry;

#[allow(unused_imports)] // each room sees the others through `use super::*`
use self::{connect::*, exchange::*, forward::*, pool::*};
pub(crate) use connect::{parse_upstream_url, points_at_listener};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// `host:port` or `http://host:port` (port 80 when omitted); used round-robin.
    pub upstreams: Vec<String>,
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
    /// Responses with a Content-Length up to this are buffered; others are streamed.
    pub buffer_max_bytes: u64,
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
}

/// The default cap on each serving thread's idle connections to one upstream: generous, so that a pool
/// at its defaults never closes connections it will need again at once. Under steady load a pool holds as
/// many connections as the thread has requests in flight to the upstream, and a cap below that made every
/// request past it connect anew (with the earlier default of 32 and 64 clients on one thread: 0.75× HAProxy's
/// req/s at 1.3× its CPU per request). What a burst leaves behind ages out after `pool_idle_timeout`.
/// HAProxy keeps idle server connections without a cap by default; nginx keeps the `keepalive` it is given.
pub const DEFAULT_POOL_MAX_IDLE: usize = 1024;

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            upstreams: Vec::new(),
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(30),
            pool_max_idle: DEFAULT_POOL_MAX_IDLE,
            pool_idle_timeout: Duration::from_secs(60),
            buffer_max_bytes: 256 * 1024,
            max_response_head_bytes: 16 * 1024,
            ca_file: None,
            danger_accept_invalid_certs: false,
            response_head_timeout: Duration::from_secs(30),
            forward_underscore_headers: false,
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
        Ok(())
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct ProxyBackend {
    upstreams: Vec<Arc<Upstream>>,
    /// Each serving thread's next upstream.
    next: PerThread<AtomicUsize>,
    cfg: ProxyConfig,
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
            upstreams.push(Arc::new(Upstream::new(
                addr,
                tls,
                cfg.pool_max_idle,
                cfg.pool_idle_timeout,
            )));
        }
        Ok(ProxyBackend {
            upstreams,
            next: PerThread::new(),
            cfg: cfg.clone(),
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

    pub async fn call(&self, req: &Request) -> Response {
        if let Some(resp) = self.loop_response(req) {
            return resp;
        }
        // each thread its own round robin, started at its own place (a shared counter is a cache line
        // every thread writes)
        let i = match self
            .next
            .get_or_init(|| AtomicUsize::new(crate::serving_thread::serving_thread()))
        {
            // (only this thread writes it: a load and a store, no locked instruction)
            Some(n) => {
                let i = n.load(Ordering::Relaxed);
                n.store(i.wrapping_add(1), Ordering::Relaxed);
                i
            }
            None => 0,
        } % self.upstreams.len();
        let up = &self.upstreams[i];
        let mut retried = false;
        loop {
            let (conn, reused) = match up.checkout_idle() {
                Some(c) => (c, true),
                // boxed: the connect future (a TLS handshake's) is twice the size of everything else a
                // proxied request awaits, and connecting is the rare path (the pool is)
                None => match Box::pin(self.connect(up)).await {
                    Ok(c) => (c, false),
                    Err(e) => return gateway_error(up, e),
                },
            };
            match self.exchange(conn, req, up).await {
                Ok(resp) => return resp,
                Err(e) => {
                    let attempt = retry::Attempt {
                        reused,
                        retried,
                        idempotent: retry::idempotent(&req.method),
                    };
                    if retry::resend(e.failure(), attempt) {
                        tracing::debug!(upstream = %up.addr, method = %req.method, "{e}; retrying on a new connection");
                        retried = true;
                        continue;
                    }
                    return gateway_error(up, e);
                }
            }
        }
    }
}

impl ProxyBackend {
    /// The upstream addresses in use (`host:port`).
    pub fn upstreams(&self) -> Vec<String> {
        self.upstreams.iter().map(|u| u.addr.clone()).collect()
    }
}
