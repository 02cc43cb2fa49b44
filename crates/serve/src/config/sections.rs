//! The tables of the config file below its top level — classes, classification rules, routes and their
//! per-route tables (compression, rate limit, access), `[classify]`, `[admin]`, `[headers]` — each a serde
//! struct with its defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::DEFAULT_ADMIN;
use crate::backend::proxy::ProxyConfig;
use crate::backend::static_files::StaticConfig;
use crate::backend::synthetic::SyntheticConfig;

/// One request class.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassConfig {
    pub name: String,
    /// Share for lottery, stride and wfq (≥ 1).
    pub weight: u32,
    /// Priority policy: higher is served first.
    pub priority: i32,
    /// Priority/srpt aging: a request waiting longer than this moves up.
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub age_after: Option<Duration>,
    /// Relative deadline (edf).
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub deadline: Option<Duration>,
    /// Cap on this class's queue.
    pub queue_cap: Option<usize>,
    /// Overrides the global queue timeout for this class.
    #[serde(deserialize_with = "crate::http::duration::deserialize_opt")]
    pub queue_timeout: Option<Duration>,
    /// Size hint of this class's requests when nothing more specific is known.
    pub size_hint: Option<u64>,
    /// Workers (of each route's limit, with `workers = "auto"`) that only this class may use.
    pub reserved_workers: usize,
    /// CoDel-style standing-queue detector: 503 `standing_queue` for the oldest requests while the class's
    /// queue stays above `target` (docs/overload.md).
    pub codel: Option<crate::overload::CodelTable>,
    /// Serve the newest request first while the class's queue is standing (needs `codel`).
    pub lifo: bool,
    /// The nice value (-20..=19) of the thread running this class's CPU work, for the request's
    /// duration; the thread's own is put back after (docs/overload.md, "Kernel priority per class").
    pub nice: Option<i32>,
    /// The kernel policy (other, batch or idle) of the thread running this class's CPU work, for the
    /// request's duration.
    pub thread_policy: Option<ordo_sys::Policy>,
    /// The CPUs (a cpulist, `"4-7,12-15"`) the thread running this class's CPU work may run on, for the
    /// request's duration: keeps a CPU-bound class off cores (and their SMT siblings) that another needs.
    pub cpus: Option<ordo_sys::CpuSet>,
}

impl Default for ClassConfig {
    fn default() -> Self {
        ClassConfig {
            name: String::new(),
            weight: 1,
            priority: 0,
            age_after: None,
            deadline: None,
            queue_cap: None,
            queue_timeout: None,
            size_hint: None,
            reserved_workers: 0,
            codel: None,
            lifo: false,
            nice: None,
            thread_policy: None,
            cpus: None,
        }
    }
}

/// A name (and optionally a value) to match in headers, cookies or query parameters.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KvMatch {
    pub name: String,
    /// Exact value; with neither `value` nor `regex`, presence is enough.
    pub value: Option<String>,
    /// Regular expression the value must match (searched, anchor it yourself).
    pub regex: Option<String>,
}

/// One classification rule: every condition given must hold; the first matching rule wins.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleConfig {
    /// The class this rule gives.
    pub class: String,
    /// Path prefix, segment-aware: "/api" matches "/api" and "/api/x", not "/apix".
    pub path_prefix: Option<String>,
    /// Shell-style glob on the path ("/img/**/*.png").
    pub path_glob: Option<String>,
    /// Regular expression on the path.
    pub path_regex: Option<String>,
    /// Request method (case-insensitive).
    pub method: Option<String>,
    pub header: Option<KvMatch>,
    pub cookie: Option<KvMatch>,
    pub query: Option<KvMatch>,
    /// Client address range in CIDR notation ("10.0.0.0/8", "::1/128") or a single address.
    pub client: Option<String>,
    /// Size hint for requests this rule classifies.
    pub size_hint: Option<u64>,
}

/// A route: a path prefix served by one backend.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouteConfig {
    pub prefix: String,
    /// The virtual host: `api.example.com`, `*.example.com`; left out (or `*`): any host.
    pub host: Option<String>,
    /// `"http"` or `"https"`: only requests that came over plain TCP, or over TLS; left out: both.
    pub scheme: Option<String>,
    /// Remove the prefix from the path before the backend sees it.
    pub strip_prefix: bool,
    /// Size hint for requests on this route.
    pub size_hint: Option<u64>,
    #[serde(rename = "static")]
    pub static_files: Option<StaticConfig>,
    pub proxy: Option<ProxyConfig>,
    pub synthetic: Option<SyntheticConfig>,
    /// `redirect = { to = "https://{host}{uri}", status = 301 }`: answer with a redirect.
    pub redirect: Option<crate::backend::redirect::RedirectConfig>,
    /// This route's limit settings over `[limiter]` (with `workers = "auto"`); `group` shares one limit.
    pub limiter: Option<crate::overload::LimiterTable>,
    /// This route's compression settings over `[compression]`.
    pub compression: Option<CompressionTable>,
    /// This route's own per-client rate limit (instead of `[rate_limit]`; `enabled = false`: none).
    pub rate_limit: Option<RateLimitTable>,
    /// Address allow/deny rules and basic auth for this route.
    pub access: Option<AccessTable>,
}

impl RouteConfig {
    /// The route's identity among the routes: its prefix, after its host when it names one
    /// (`api.example.com/v1`); what its gate lane is keyed by.
    pub fn key(&self) -> String {
        let base = match &self.host {
            Some(h) => match crate::vhost::HostPattern::parse(h) {
                Ok(crate::vhost::HostPattern::Any) => self.prefix.clone(),
                Ok(p) => format!("{p}{}", self.prefix),
                Err(_) => format!("{h}{}", self.prefix),
            },
            None => self.prefix.clone(),
        };
        match &self.scheme {
            Some(s) => format!("{s}://{base}"),
            None => base,
        }
    }

    /// `scheme` as the router reads it: Some(true) over TLS only, Some(false) plain only, None both.
    pub fn tls_only(&self) -> Result<Option<bool>, String> {
        match self.scheme.as_deref() {
            None => Ok(None),
            Some("https") => Ok(Some(true)),
            Some("http") => Ok(Some(false)),
            Some(other) => Err(format!("`{other}`: expected \"http\" or \"https\"")),
        }
    }
}

impl Default for RouteConfig {
    fn default() -> Self {
        RouteConfig {
            prefix: "/".into(),
            host: None,
            scheme: None,
            strip_prefix: false,
            size_hint: None,
            static_files: None,
            proxy: None,
            synthetic: None,
            redirect: None,
            limiter: None,
            compression: None,
            rate_limit: None,
            access: None,
        }
    }
}

/// `[compression]` (server-wide) and `[routes.compression]` (one route; each key it sets wins over the
/// server's).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionTable {
    pub enabled: Option<bool>,
    /// Effort, 1 (fastest) to 9 (smallest), given to each library on its own scale (gzip 1–9, brotli quality
    /// 1–9 of 0–11, zstd 1–9 of 1–22).
    pub level: Option<u32>,
    /// Bodies known to be shorter than this many bytes are sent as they are.
    pub min_size: Option<u64>,
    /// Media types compressed (`text/html`, or `text/*` for a whole top-level type); parameters ignored.
    pub types: Option<Vec<String>>,
    /// Codings offered, in order of preference when the client's q-values tie.
    pub algorithms: Option<Vec<String>>,
    /// Static routes: serve `path.br` / `path.zst` / `path.gz` when present and accepted.
    pub precompressed: Option<bool>,
}

/// `[rate_limit]` (one limit shared by every route without its own) and `[routes.rate_limit]` (the route's
/// own).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitTable {
    /// `false` in a route's table: this route is not limited (not even by `[rate_limit]`).
    pub enabled: Option<bool>,
    /// Sustained rate per key: `"10/s"`, `"600/m"`, `"1000/h"`.
    pub rate: Option<String>,
    /// Requests a key may send at once after being idle (≥ 1; default 1).
    pub burst: Option<u32>,
    /// What a key is: `"ip"` (default), `"header:NAME"`, `"cookie:NAME"` or `"class"`. A request without the
    /// header or cookie is keyed by its address.
    pub key: Option<String>,
    /// Peers (CIDR) whose `X-Forwarded-For` names the client; other peers are the client themselves.
    pub trusted_proxies: Vec<String>,
    /// Keys remembered at most (memory: about 40 bytes each).
    pub max_keys: Option<usize>,
    /// Name of the policy in the `RateLimit-Policy` / `RateLimit` headers.
    pub name: Option<String>,
}

/// `[routes.access]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AccessTable {
    /// Ordered rules, `"allow CIDR"` / `"deny CIDR"` (`all` for every address); the first that matches
    /// decides, none matching allows.
    pub ip: Vec<String>,
    /// Peers (CIDR) whose `X-Forwarded-For` names the client for the `ip` rules.
    pub trusted_proxies: Vec<String>,
    /// Basic auth realm (shown by browsers); needs users.
    pub realm: Option<String>,
    /// An htpasswd file (`user:hash` lines, bcrypt only: `htpasswd -B`); relative to the config file.
    pub users_file: Option<PathBuf>,
    /// Users and their bcrypt hashes, inline.
    pub users: std::collections::HashMap<String, String>,
}

/// `[classify]`: the Lua classification hook.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClassifyConfig {
    /// Lua script defining `classify(request)`.
    pub script: Option<PathBuf>,
}

/// `[admin]`: the admin listener.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    pub enabled: bool,
    pub listen: SocketAddr,
    /// Bearer token every admin request must carry (`Authorization: Bearer <token>`).
    pub token: Option<Secret>,
    /// File whose first line is the token (instead of `token`); relative to the config file.
    pub token_file: Option<PathBuf>,
    /// Host names the admin answers to besides its own address (and `localhost` on loopback).
    pub allowed_hosts: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            listen: DEFAULT_ADMIN.parse().expect("constant address"),
            token: None,
            token_file: None,
            allowed_hosts: Vec::new(),
        }
    }
}

/// `[headers]`: response headers exposing scheduling decisions.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeadersConfig {
    /// Add `X-Ordo-Class: <class>`.
    pub class: bool,
    /// Add `X-Ordo-Queue-Wait-Us: <µs waited in the queue>`.
    pub queue_wait: bool,
}

/// A secret from the configuration (`[admin] token`): never printed, compared in constant time.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret itself, for the constant-time comparison and the token check.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}
