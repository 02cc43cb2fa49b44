//! The `ordo serve` configuration file: serde structs with defaults, validation, and errors that name the
//! file, the line and the key (`config.toml:12: classes[1].weight: must be ≥ 1, got 0`) — or, when a
//! command-line override made a valid file invalid, the flag (`--policy lua: needs ...`).

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ordo_sched::PolicyKind;
use ordo_util::keypath;
use ordo_util::located::{Source, line_of, span_of_path};
use serde::Deserialize;

use crate::backend::proxy::ProxyConfig;
use crate::backend::static_files::StaticConfig;
use crate::backend::synthetic::SyntheticConfig;
use crate::http::Limits;

/// Default address of the HTTP listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Default address of the admin listener.
pub const DEFAULT_ADMIN: &str = "127.0.0.1:9090";

/// The longest `coalesce` spin: it is CPU time spent on every park of a busy serving thread, and beyond
/// this it buys no more batching (docs/serve.md, "Wakeup coalescing").
pub const MAX_COALESCE: Duration = Duration::from_micros(100);
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
    #[serde(deserialize_with = "deserialize_policy")]
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

/// How the config file and `--policy` spell each of the scheduler's policies: sched's own names, except that
/// its custom policy (an external picker chooses among the queue heads) is `lua`, the one picker serve has.
pub const fn policy_name(p: PolicyKind) -> &'static str {
    match p {
        PolicyKind::Custom => "lua",
        p => p.as_str(),
    }
}

/// Every name [`policy_name`] gives, in [`PolicyKind::ALL`]'s order: what serde lists on an unknown one and
/// what `--policy` completes to.
pub const POLICY_NAMES: [&str; PolicyKind::ALL.len()] = {
    let mut names = [""; PolicyKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = policy_name(PolicyKind::ALL[i]);
        i += 1;
    }
    names
};

/// The policy spelled `s` (see [`policy_name`]).
fn policy_named(s: &str) -> Option<PolicyKind> {
    PolicyKind::ALL.into_iter().find(|p| policy_name(*p) == s)
}

/// `--policy NAME`: the policy spelled `s`; the error lists the valid names.
pub fn parse_policy(s: &str) -> Result<PolicyKind, String> {
    policy_named(s).ok_or_else(|| {
        let (rest, last) = POLICY_NAMES.split_at(POLICY_NAMES.len() - 1);
        format!(
            "unknown policy `{s}` (expected {} or {})",
            rest.join(", "),
            last.join("")
        )
    })
}

/// `policy = "..."`, read as serde reads a unit-only enum (so a wrong value gets the same message, with the
/// valid names listed): one of [`POLICY_NAMES`].
fn deserialize_policy<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PolicyKind, D::Error> {
    /// The variant's name, refused inside the variant's own place so that the error points at it.
    struct Name(PolicyKind);
    impl<'de> Deserialize<'de> for Name {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            policy_named(&s)
                .map(Name)
                .ok_or_else(|| serde::de::Error::unknown_variant(&s, &POLICY_NAMES))
        }
    }
    struct PolicyVisitor;
    impl<'de> serde::de::Visitor<'de> for PolicyVisitor {
        type Value = PolicyKind;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a policy name")
        }
        fn visit_enum<A: serde::de::EnumAccess<'de>>(
            self,
            data: A,
        ) -> Result<PolicyKind, A::Error> {
            use serde::de::VariantAccess;
            let (Name(p), variant) = data.variant()?;
            variant.unit_variant()?;
            Ok(p)
        }
    }
    d.deserialize_enum("PolicyKind", &POLICY_NAMES, PolicyVisitor)
}

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

/// Values given on the command line; they win over the file and survive reloads. A check that fails
/// because of one of them names the flag, not the file's line.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub workers: Option<crate::overload::Workers>,
    pub policy: Option<PolicyKind>,
    /// `--policy-script PATH`; a relative path is taken as given (the binary makes it absolute against the
    /// current directory, not the file's).
    pub policy_script: Option<PathBuf>,
    pub threads: Option<usize>,
    /// `Some(None)`: admin disabled; `Some(Some(addr))`: admin on addr.
    pub admin: Option<Option<SocketAddr>>,
    /// `--shutdown-grace DURATION`.
    pub shutdown_grace: Option<Duration>,
}

impl Overrides {
    /// The flag (with its value, as a user would type it) that set the top-level key `key`, if any.
    pub fn flag_for(&self, key: &str) -> Option<String> {
        match key {
            "listen" => self.listen.map(|a| format!("--listen {a}")),
            "workers" => self.workers.map(|w| format!("--workers {w}")),
            "threads" => self.threads.map(|t| format!("--threads {t}")),
            "policy" => self.policy.map(|p| format!("--policy {}", policy_name(p))),
            "policy_script" => self
                .policy_script
                .as_ref()
                .map(|p| format!("--policy-script {}", p.display())),
            "admin" => self.admin.map(|a| match a {
                Some(addr) => format!("--admin {addr}"),
                None => "--admin off".to_string(),
            }),
            "shutdown_grace" => self
                .shutdown_grace
                .map(|d| format!("--shutdown-grace {}", crate::http::duration::format(d))),
            _ => None,
        }
    }
}

/// Where a config came from.
pub struct Origin {
    /// Name used in error messages (the path as given).
    pub name: String,
    /// The file to re-read on reload, if any.
    pub path: Option<PathBuf>,
    /// The TOML text, to locate keys in error messages.
    pub text: String,
    /// Directory relative paths in the file are resolved against.
    pub dir: PathBuf,
}

// By hand, without the text: it may hold `[admin] token`.
impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Origin")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("text", &format_args!("<{} bytes>", self.text.len()))
            .field("dir", &self.dir)
            .finish()
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
    /// Read, parse and validate a config file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::from_file_with(path, Overrides::default())
    }

    /// Read and parse a config file, apply command-line overrides, then validate the result once: what is
    /// checked is what would run, so a file that is only complete with its flags (`policy = "lua"` plus
    /// `--policy-script`) is accepted, and a failure at a key a flag set names the flag. Use this (with the
    /// running overrides) to re-read the file on reload, too.
    pub fn from_file_with(
        path: impl AsRef<Path>,
        overrides: Overrides,
    ) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(name.clone(), format!("cannot read: {e}")))?;
        let dir = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    p.to_path_buf()
                }
            })
            .unwrap_or_else(|| PathBuf::from("."));
        let mut cfg = Self::parse_unchecked(text, name, Some(path.to_path_buf()), dir)?;
        cfg.apply_overrides(overrides);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse and validate TOML text; `name` is used in error messages; relative paths resolve against the
    /// current directory.
    pub fn from_toml_str(text: &str, name: &str) -> Result<Self, ConfigError> {
        let cfg =
            Self::parse_unchecked(text.to_string(), name.to_string(), None, PathBuf::from("."))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse only (TOML syntax, types, unknown keys); the caller validates.
    fn parse_unchecked(
        text: String,
        name: String,
        path: Option<PathBuf>,
        dir: PathBuf,
    ) -> Result<Self, ConfigError> {
        let mut cfg: ServeConfig = Source::new(&name, &text).parse()?;
        cfg.origin = Some(Arc::new(Origin {
            name,
            path,
            text,
            dir,
        }));
        Ok(cfg)
    }

    /// Apply command-line overrides (kept in the config so a reload re-applies them).
    pub fn apply_overrides(&mut self, o: Overrides) {
        if let Some(l) = o.listen {
            self.listen = l;
        }
        if let Some(w) = o.workers {
            self.workers = w;
        }
        if let Some(p) = o.policy {
            self.policy = p;
        }
        if let Some(t) = o.threads {
            self.threads = t;
        }
        if let Some(p) = &o.policy_script {
            self.policy_script = Some(p.clone());
        }
        if let Some(g) = o.shutdown_grace {
            self.shutdown_grace = g;
        }
        match o.admin {
            Some(Some(a)) => {
                self.admin.enabled = true;
                self.admin.listen = a;
            }
            Some(None) => self.admin.enabled = false,
            None => {}
        }
        self.overrides = o;
    }

    /// The file name used in messages.
    pub fn name(&self) -> &str {
        self.origin.as_ref().map_or("<config>", |o| o.name.as_str())
    }

    /// Resolve a path from the file against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match &self.origin {
            Some(o) => o.dir.join(p),
            None => p.to_path_buf(),
        }
    }

    /// Turn a not-yet-located failure into an error naming file, line and key — or the command-line flag
    /// behind it: the one the check named, else the override of the failing top-level key (the value in
    /// effect there came from the flag, not the file).
    pub fn locate(&self, inv: Invalid) -> ConfigError {
        let flag = inv.flag.clone().or_else(|| match inv.path.first() {
            Some(Seg::Key(k)) => self.overrides.flag_for(k),
            _ => None,
        });
        if let Some(flag) = flag {
            return ConfigError::new(flag, inv.message);
        }
        match &self.origin {
            Some(o) => Source::new(&o.name, &o.text).at_path(&inv.path, inv.message),
            None => ConfigError {
                key: (!inv.path.is_empty()).then(|| path_to_string(&inv.path)),
                ..ConfigError::new(self.name(), inv.message)
            },
        }
    }

    /// `file:line` of a key path, for messages about a flag that clashes with the file (`file` alone when the
    /// key is not spelled out in it).
    fn file_line(&self, path: Vec<Seg>) -> String {
        let line = self
            .origin
            .as_ref()
            .and_then(|o| span_of_path(&o.text, &path).map(|s| line_of(&o.text, s.start)));
        match line {
            Some(l) => format!("{}:{l}", self.name()),
            None => self.name().to_string(),
        }
    }

    /// The policy / policy_script pair, with the flag named when one caused the mismatch.
    fn check_policy_script(&self) -> Result<(), Invalid> {
        let o = &self.overrides;
        let file = self.origin.as_ref().map(|o| o.name.clone());
        if self.policy == PolicyKind::Custom && self.policy_script.is_none() {
            if o.policy == Some(PolicyKind::Custom) {
                return Err(Invalid::flag(
                    "--policy lua",
                    match file {
                        Some(f) => {
                            format!("needs `policy_script` in {f} (or --policy-script PATH)")
                        }
                        None => {
                            "needs --policy-script PATH (the Lua script defining `pick(heads)`)"
                                .to_string()
                        }
                    },
                ));
            }
            return Err(Invalid::new(
                keypath!["policy"],
                "policy \"lua\" needs `policy_script = \"file.lua\"`",
            ));
        }
        if self.policy != PolicyKind::Custom && self.policy_script.is_some() {
            if let Some(flag) = o.flag_for("policy_script") {
                let whose = match (&o.policy, &file) {
                    (Some(_), _) => " from --policy".to_string(),
                    (None, Some(f)) => format!(" in {f}"),
                    (None, None) => String::new(),
                };
                return Err(Invalid::flag(
                    flag,
                    format!(
                        "only used with policy \"lua\" (policy is \"{}\"{whose}); add --policy lua",
                        policy_name(self.policy)
                    ),
                ));
            }
            if let Some(flag) = o.flag_for("policy") {
                return Err(Invalid::flag(
                    flag,
                    format!(
                        "{} sets `policy_script`, which only policy \"lua\" uses (leave out --policy, or \
                         remove `policy_script` from the file)",
                        self.file_line(keypath!["policy_script"])
                    ),
                ));
            }
            return Err(Invalid::new(
                keypath!["policy_script"],
                format!(
                    "only used with policy = \"lua\" (policy is \"{}\")",
                    policy_name(self.policy)
                ),
            ));
        }
        Ok(())
    }

    /// The admin listener must not share the HTTP listener's address; names `--admin` or `--listen` when
    /// one of them caused the clash.
    fn check_admin_address(&self) -> Result<(), Invalid> {
        if !(self.admin.enabled && self.admin.listen == self.listen && self.listen.port() != 0) {
            return Ok(());
        }
        let o = &self.overrides;
        if let Some(Some(a)) = o.admin {
            return Err(Invalid::flag(
                format!("--admin {a}"),
                format!("same address as the HTTP listener ({})", self.listen),
            ));
        }
        if let Some(l) = o.listen {
            return Err(Invalid::flag(
                format!("--listen {l}"),
                format!(
                    "same address as the admin listener (`admin.listen`, {}); pick another, or move it \
                     with --admin ADDR (--admin off disables it)",
                    self.file_line(keypath!["admin", "listen"])
                ),
            ));
        }
        Err(Invalid::new(
            keypath!["admin", "listen"],
            format!("same address as `listen` ({})", self.listen),
        ))
    }

    /// `tls.listen` must differ from the other listeners' addresses.
    fn check_tls_address(&self) -> Result<(), Invalid> {
        let Some(l) = self.tls.as_ref().and_then(|t| t.listen) else {
            return Ok(());
        };
        if l.port() == 0 {
            return Ok(());
        }
        let clash = if l == self.listen {
            "`listen`"
        } else if self.admin.enabled && l == self.admin.listen {
            "`admin.listen`"
        } else {
            return Ok(());
        };
        Err(Invalid::new(
            keypath!["tls", "listen"],
            format!(
                "same address as {clash} ({l}); leave `tls.listen` out to make the main listener speak TLS"
            ),
        ))
    }

    /// A proxy upstream that is this server's own listen address would send every request back to the
    /// server until it times out; refused (with `--listen` named when the flag made it so). Loops through
    /// other hops are caught at run time by the proxy's Via check.
    fn check_proxy_loops(&self) -> Result<(), Invalid> {
        for (i, r) in self.routes.iter().enumerate() {
            let Some(p) = &r.proxy else { continue };
            for (j, u) in p.upstreams.iter().enumerate() {
                let u = &u.address;
                if !crate::backend::proxy::points_at_listener(u, self.listen) {
                    continue;
                }
                let path = keypath!["routes", i, "proxy", "upstreams", j];
                if let Some(l) = self.overrides.listen {
                    return Err(Invalid::flag(
                        format!("--listen {l}"),
                        format!(
                            "{}: {} upstream `{u}` is this address: every request on prefix `{}` \
                             would be proxied back to this server",
                            self.file_line(path.clone()),
                            path_to_string(&path),
                            r.prefix
                        ),
                    ));
                }
                return Err(Invalid::new(
                    path,
                    format!(
                        "`{u}` is this server's own `listen` address ({}): every request would be \
                         proxied back to this server",
                        self.listen
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[limits]` values that would make the server unusable (every request 431, no connection accepted,
    /// kept-alive connections dropped at once) are refused rather than silently clamped or obeyed.
    fn check_limits(&self) -> Result<(), Invalid> {
        let l = &self.limits;
        if l.max_head_bytes == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_head_bytes"],
                "must be ≥ 1, got 0 (every request would be refused with 431)",
            ));
        }
        if l.max_uri_bytes == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_uri_bytes"],
                "must be ≥ 1, got 0 (every request would be refused with 414)",
            ));
        }
        if l.max_connections == 0 {
            return Err(Invalid::new(
                keypath!["limits", "max_connections"],
                "must be ≥ 1, got 0",
            ));
        }
        if l.head_timeout.is_zero() {
            return Err(Invalid::new(
                keypath!["limits", "head_timeout"],
                "must be > 0",
            ));
        }
        if l.idle_timeout.is_zero() {
            return Err(Invalid::new(
                keypath!["limits", "idle_timeout"],
                "must be > 0",
            ));
        }
        if l.max_requests_per_connection == Some(0) {
            return Err(Invalid::new(
                keypath!["limits", "max_requests_per_connection"],
                "must be ≥ 1, got 0 (leave it out for no limit)",
            ));
        }
        Ok(())
    }

    /// Checks of plain values (everything that needs no compilation).
    pub(crate) fn check_values(&self) -> Result<(), Invalid> {
        if self.workers == crate::overload::Workers::Fixed(0) {
            return Err(Invalid::new(keypath!["workers"], "must be ≥ 1, got 0"));
        }
        if self.threads > crate::serving_thread::MAX_SERVING_THREADS {
            return Err(Invalid::new(
                keypath!["threads"],
                format!("must be ≤ 1024, got {}", self.threads),
            ));
        }
        if self.coalesce > MAX_COALESCE {
            return Err(Invalid::new(
                keypath!["coalesce"],
                format!(
                    "must be ≤ {}, got {}",
                    crate::http::duration::format(MAX_COALESCE),
                    crate::http::duration::format(self.coalesce)
                ),
            ));
        }
        if self.queue_cap == Some(0) {
            return Err(Invalid::new(keypath!["queue_cap"], "must be ≥ 1, got 0"));
        }
        self.check_limits()?;
        if let Some(f) = &self.fleet {
            f.check(self.workers)
                .map_err(|(k, m)| Invalid::new(keypath!["fleet", k], m))?;
        }
        self.http2.check()?;
        self.lua.check()?;
        self.check_policy_script()?;
        let mut seen = std::collections::HashSet::new();
        for (i, c) in self.classes.iter().enumerate() {
            if c.name.trim().is_empty() {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    "every class needs a non-empty name",
                ));
            }
            // names go into log lines and the X-Ordo-Class header, where a line break would split them
            if c.name.chars().any(char::is_control) {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    format!(
                        "{:?} contains a control character (line break, tab, ...)",
                        c.name
                    ),
                ));
            }
            if !seen.insert(c.name.as_str()) {
                return Err(Invalid::new(
                    keypath!["classes", i, "name"],
                    format!("duplicate class name `{}`", c.name),
                ));
            }
            if c.weight == 0 {
                return Err(Invalid::new(
                    keypath!["classes", i, "weight"],
                    "must be ≥ 1, got 0",
                ));
            }
            if c.queue_cap == Some(0) {
                return Err(Invalid::new(
                    keypath!["classes", i, "queue_cap"],
                    "must be ≥ 1, got 0",
                ));
            }
            if c.deadline == Some(Duration::ZERO) {
                return Err(Invalid::new(
                    keypath!["classes", i, "deadline"],
                    "must be > 0",
                ));
            }
        }
        if self.policy == PolicyKind::Edf && !self.classes.iter().any(|c| c.deadline.is_some()) {
            return Err(Invalid::new(
                keypath!["policy"],
                "policy \"edf\" needs at least one class with a `deadline`",
            ));
        }
        if let Some(d) = &self.default_class {
            if !self.class_names().iter().any(|n| n == d) {
                return Err(Invalid::new(
                    keypath!["default_class"],
                    format!(
                        "no class named `{d}` (classes: {})",
                        self.class_names().join(", ")
                    ),
                ));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            if !self.class_names().iter().any(|n| n == &r.class) {
                return Err(Invalid::new(
                    keypath!["rules", i, "class"],
                    format!(
                        "no class named `{}` (classes: {})",
                        r.class,
                        self.class_names().join(", ")
                    ),
                ));
            }
        }
        let mut prefixes = std::collections::HashSet::new();
        for (i, r) in self.routes.iter().enumerate() {
            let host = match &r.host {
                Some(h) => crate::vhost::HostPattern::parse(h)
                    .map_err(|e| Invalid::new(keypath!["routes", i, "host"], e))?,
                None => crate::vhost::HostPattern::Any,
            };
            if !r.prefix.starts_with('/') {
                return Err(Invalid::new(
                    keypath!["routes", i, "prefix"],
                    format!("must start with `/`, got `{}`", r.prefix),
                ));
            }
            let tls = r
                .tls_only()
                .map_err(|e| Invalid::new(keypath!["routes", i, "scheme"], e))?;
            if !prefixes.insert((host.clone(), r.prefix.as_str(), tls)) {
                return Err(Invalid::new(
                    keypath!["routes", i, "prefix"],
                    format!("duplicate route prefix `{}` for host `{host}`", r.prefix),
                ));
            }
            let n = r.static_files.is_some() as u8
                + r.proxy.is_some() as u8
                + r.synthetic.is_some() as u8
                + r.redirect.is_some() as u8;
            if n != 1 {
                return Err(Invalid::new(
                    keypath!["routes", i],
                    "a route needs exactly one backend table: `static`, `proxy`, `synthetic` or `redirect`",
                ));
            }
        }
        self.check_admin_address()?;
        self.check_tls_address()?;
        self.check_proxy_loops()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_sched_kinds_with_custom_spelled_lua() {
        for p in PolicyKind::ALL {
            assert_eq!(parse_policy(policy_name(p)), Ok(p));
            let cfg = ServeConfig::from_toml_str(
                &format!(
                    "policy = \"{}\"\n[[classes]]\nname = \"a\"\ndeadline = \"1s\"\n",
                    policy_name(p)
                ),
                "p.toml",
            );
            // lua also needs its script; every other name is accepted as is
            match p {
                PolicyKind::Custom => {
                    assert!(cfg.unwrap_err().to_string().contains("policy_script"))
                }
                _ => assert_eq!(cfg.unwrap().policy, p),
            }
        }
        assert_eq!(policy_name(PolicyKind::Custom), "lua");
        assert_eq!(
            parse_policy("custom").unwrap_err(),
            "unknown policy `custom` (expected fcfs, priority, lottery, stride, wfq, srpt, edf or lua)"
        );
    }

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

    #[test]
    fn coalesce_is_a_duration_up_to_100us() {
        let ok = |t: &str| ServeConfig::from_toml_str(t, "c.toml").map(|c| c.coalesce);
        assert_eq!(ok(""), Ok(DEFAULT_COALESCE));
        assert_eq!(ok("coalesce = \"0s\"\n"), Ok(Duration::ZERO));
        assert_eq!(ok("coalesce = \"20us\"\n"), Ok(Duration::from_micros(20)));
        assert_eq!(ok("coalesce = \"100us\"\n"), Ok(Duration::from_micros(100)));
        assert_eq!(
            ok("threads = 1\ncoalesce = \"1ms\"\n")
                .unwrap_err()
                .to_string(),
            "c.toml:2: coalesce: must be ≤ 100us, got 1ms"
        );
        let e = ok("coalesce = 20\n").unwrap_err().to_string();
        assert!(e.starts_with("c.toml:1: coalesce:"), "{e}");
        let e = ok("coalesce = \"20 furlongs\"\n").unwrap_err().to_string();
        assert!(e.contains("coalesce") && e.contains("unit"), "{e}");
    }

    #[test]
    fn validation_errors_name_file_line_and_key() {
        let cfg = ServeConfig::from_toml_str("[[classes]]\nname = \"a\"\nweight = 0\n", "c.toml");
        assert_eq!(
            cfg.unwrap_err().to_string(),
            "c.toml:3: classes[0].weight: must be ≥ 1, got 0"
        );
        // a type error inside an inline table names the inner key
        let cfg = ServeConfig::from_toml_str(
            "[[classes]]\nname = \"a\"\n[[rules]]\nclass = \"a\"\nheader = { name = \"x\", regex = 1 }\n",
            "c.toml",
        );
        let e = cfg.unwrap_err().to_string();
        assert!(
            e.starts_with("c.toml:5: rules[0].header.regex: expected a string, found the number 1"),
            "{e}"
        );
    }
}
