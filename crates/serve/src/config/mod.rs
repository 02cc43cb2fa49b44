//! The `ordo serve` configuration file: serde structs with defaults, validation, and errors that name the
//! file, the line and the key (`config.toml:12: classes[1].weight: must be ≥ 1, got 0`) — or, when a
//! command-line override made a valid file invalid, the flag (`--policy lua: needs ...`). This file holds the
//! top level of the file model ([`ServeConfig`]); its tables, the policy names, loading and checking each
//! have a file of their own below.

mod check;
mod load;
mod policy;
mod sections;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ordo_sched::PolicyKind;
use serde::Deserialize;

use crate::backend::synthetic::SyntheticConfig;
use crate::http::Limits;

pub use load::{Origin, Overrides};
pub use policy::{POLICY_NAMES, parse_policy, policy_name};
pub use sections::{
    AccessTable, AdminConfig, ClassConfig, ClassifyConfig, CompressionTable, HeadersConfig,
    KvMatch, RateLimitTable, RouteConfig, RuleConfig, Secret,
};

/// Default address of the HTTP listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default address of the admin listener.
pub const DEFAULT_ADMIN: &str = "127.0.0.1:9090";

/// The longest `coalesce` spin: it is CPU time spent on every park of a busy serving thread, and beyond
/// this it buys no more batching (docs/serve.md, "Wakeup coalescing"). The mechanism's own cap, which
/// `ordo bench --coalesce` shares.
pub const MAX_COALESCE: Duration = ordo_sys::coalesce::MAX_WAIT;
/// `coalesce` when the file leaves it out: on, since a thread spins only while it works most of the time.
pub const DEFAULT_COALESCE: Duration = Duration::from_micros(2);

/// The whole configuration file. Every key is optional; see docs/serve.md for the reference.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address of the HTTP listener (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Tokio worker threads; 0 means one per available CPU.
    pub threads: usize,
    /// A serving thread that has been working most of the time spins this long before it waits on its
    /// sockets, so data that arrives meanwhile is taken without a wakeup its senders (clients, upstreams)
    /// would pay for ([`DEFAULT_COALESCE`]; "0s": off; at most [`MAX_COALESCE`]). Spins that do not pay off
    /// back off. See docs/serve.md, "Wakeup coalescing". Takes effect on restart.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub coalesce: Duration,
    /// At most this many requests are served at once (the seed's MaxClients), or `"auto"`: a concurrency
    /// limit per route that follows the backend's latency (docs/overload.md).
    pub workers: crate::overload::Workers,
    /// The dispatch policy.
    #[serde(deserialize_with = "policy::deserialize_policy")]
    pub policy: PolicyKind,
    /// Lua script defining `pick(heads)`; required by `policy = "lua"`.
    pub policy_script: Option<PathBuf>,
    /// Seed of the lottery policy's random numbers.
    pub seed: u64,
    /// Global cap on queued requests (all classes together); None = unbounded.
    pub queue_cap: Option<usize>,
    /// How long a request may wait in the queue before it is answered 503; "0s" disables.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub queue_timeout: Duration,
    /// Value of the Retry-After header on 503 answers (rounded up to whole seconds, at least 1).
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub retry_after: Duration,
    /// After SIGTERM/SIGINT (or `ServerHandle::shutdown`), how long in-flight requests and their
    /// connections may take to finish; then the ones still open are closed and the server stops.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub shutdown_grace: Duration,
    /// HTTP limits (head size, timeouts, body size, connections).
    pub limits: Limits,
    /// Request classes; none configured means one class named "default".
    pub classes: Vec<ClassConfig>,
    /// Class of requests no rule matches; defaults to the first class.
    pub default_class: Option<String>,
    /// Ordered classification rules: the first that matches gives the class.
    pub rules: Vec<RuleConfig>,
    /// Routes: the longest matching path prefix picks the backend.
    pub routes: Vec<RouteConfig>,
    /// Optional Lua classification hook.
    pub classify: ClassifyConfig,
    /// Limits of the Lua scripts (classify and pick).
    pub lua: crate::lua::LuaLimits,
    /// The admin listener (metrics, status, reload).
    pub admin: AdminConfig,
    /// Optional response headers for experiments.
    pub headers: HeadersConfig,
    /// `[limiter]`: the adaptive limits' settings for every route (with `workers = "auto"`).
    pub limiter: Option<crate::overload::LimiterTable>,
    /// TLS: certificates, and optionally an HTTPS listener of its own (see `crate::tls`).
    pub tls: Option<crate::tls::TlsConfig>,
    /// The access log (off unless `path` is set).
    pub access_log: crate::access_log::AccessLogConfig,
    /// `[forwarded]`: trusted proxies and request ids (see `crate::forwarded`).
    pub forwarded: crate::forwarded::ForwardedConfig,
    /// HTTP/2: ALPN on TLS listeners, h2c on the plain one, and its limits (see `crate::http2`).
    pub http2: crate::http2::Http2Config,
    /// `[compression]`: response compression for every route (a route's own table wins key by key).
    pub compression: Option<CompressionTable>,
    /// `[rate_limit]`: one per-client limit shared by every route without its own.
    pub rate_limit: Option<RateLimitTable>,
    /// `[fleet]`: rate limits and class shares shared with other instances through Redis (see
    /// `crate::fleet`).
    pub fleet: Option<crate::fleet::FleetConfig>,
    /// Where the config came from (file name, text, directory for relative paths); not a TOML key.
    #[serde(skip)]
    pub origin: Option<Arc<Origin>>,
    /// Command-line overrides, re-applied when the file is re-read on reload; not a TOML key.
    #[serde(skip)]
    pub overrides: Overrides,
    /// The serving threads the running server started with (set by `Server::start_threads`, kept on
    /// reload): what the default `workers` (per serving thread) multiplies. Not a TOML key.
    #[serde(skip)]
    pub started_threads: Option<usize>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: DEFAULT_LISTEN.parse().expect("constant address"),
            threads: 0,
            coalesce: DEFAULT_COALESCE,
            workers: crate::overload::Workers::default(),
            policy: PolicyKind::Fcfs,
            policy_script: None,
            seed: 1,
            queue_cap: Some(10_000),
            queue_timeout: Duration::from_secs(30),
            retry_after: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(30),
            limits: Limits::default(),
            classes: Vec::new(),
            default_class: None,
            rules: Vec::new(),
            routes: Vec::new(),
            classify: ClassifyConfig::default(),
            lua: crate::lua::LuaLimits::default(),
            admin: AdminConfig::default(),
            headers: HeadersConfig::default(),
            limiter: None,
            tls: None,
            access_log: crate::access_log::AccessLogConfig::default(),
            forwarded: crate::forwarded::ForwardedConfig::default(),
            http2: crate::http2::Http2Config::default(),
            compression: None,
            rate_limit: None,
            fleet: None,
            origin: None,
            overrides: Overrides::default(),
            started_threads: None,
        }
    }
}

/// A refused configuration: which file, which line, which key, and why — the workspace's one located
/// error (`file:line: key: message`). When a command-line flag made the configuration invalid, `file` is
/// the flag with its value (`--policy lua`) and line and key are `None`.
pub type ConfigError = ordo_util::located::Located;

/// Key paths and their spelling, shared with the other TOML files ordo reads.
pub use ordo_util::located::{IntoSeg, Seg, path_to_string};

pub use crate::invalid::Invalid;

impl ServeConfig {
    /// Serving threads: those the server started with, else `threads` (0: one per CPU this process may
    /// run on, as `ordo serve` starts them).
    pub fn serving_threads(&self) -> usize {
        match (self.started_threads, self.threads) {
            (Some(n), _) => n.max(1),
            (None, 0) => std::thread::available_parallelism().map_or(1, |n| n.get()),
            (None, n) => n,
        }
    }

    /// The pool's size in force: `workers`, or the default's per-thread share times
    /// [`serving_threads`](Self::serving_threads); None with `workers = "auto"`.
    pub fn workers_limit(&self) -> Option<usize> {
        self.workers.fixed(self.serving_threads())
    }

    /// Class names in order ("default" when none is configured).
    pub fn class_names(&self) -> Vec<String> {
        if self.classes.is_empty() {
            vec!["default".to_string()]
        } else {
            self.classes.iter().map(|c| c.name.clone()).collect()
        }
    }

    /// The classes in effect ("default" with weight 1 when none is configured).
    pub fn effective_classes(&self) -> Vec<ClassConfig> {
        if self.classes.is_empty() {
            vec![ClassConfig {
                name: "default".into(),
                ..ClassConfig::default()
            }]
        } else {
            self.classes.clone()
        }
    }

    /// The routes in effect (one synthetic route on "/" when none is configured).
    pub fn effective_routes(&self) -> Vec<RouteConfig> {
        if self.routes.is_empty() {
            vec![RouteConfig {
                synthetic: Some(SyntheticConfig::default()),
                ..RouteConfig::default()
            }]
        } else {
            self.routes.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_workers_are_64_per_serving_thread() {
        use crate::overload::Workers;
        let cfg = |t: &str| ServeConfig::from_toml_str(t, "c.toml").unwrap();
        let mut c = cfg("threads = 3\n");
        assert_eq!(c.workers, Workers::PerThread(64));
        assert_eq!(c.workers_limit(), Some(192));
        // what the server started with counts, not the file (reload keeps it)
        c.started_threads = Some(4);
        assert_eq!(c.workers_limit(), Some(256));
        assert_eq!(c.workers.to_string(), "64 per serving thread");
        // a number written in the file is the pool, whatever the threads
        let mut c = cfg("threads = 8\nworkers = 10\n");
        c.started_threads = Some(8);
        assert_eq!(c.workers_limit(), Some(10));
        assert_eq!(cfg("workers = \"auto\"\n").workers_limit(), None);
        // threads = 0: one per CPU this process may run on
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(cfg("").workers_limit(), Some(64 * cpus));
        // reserved workers are checked against the pool in force
        let err = ServeConfig::from_toml_str(
            "threads = 1\n[[classes]]\nname = \"a\"\nreserved_workers = 64\n[[classes]]\nname = \"b\"\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("which leaves none of the 64 workers"), "{err}");
    }
}
