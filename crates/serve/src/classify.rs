//! Classification and routing: ordered rules (path prefix/glob/regex, method, header, cookie, query parameter,
//! client CIDR) give each request a class; the longest route prefix gives its backend; and each request gets a
//! size hint and a deadline for the scheduler.

use crate::log_limit::LogLimit;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use regex::Regex;

use crate::backend::Backend;
use crate::config::{Invalid, KvMatch, RuleConfig, ServeConfig};
use crate::http::Request;
use crate::keypath;
use crate::lua::{LuaClassifier, LuaCounters, LuaVerdict};

/// How long a Lua `classify` call may run on an I/O thread before it is moved off it.
pub const INLINE_SLICE: Duration = Duration::from_millis(2);
/// Lua calls moved off the I/O threads that may run at once (per configuration).
pub const OFFLOAD_MAX: usize = 4;

pub use crate::cidr::Cidr;

/// Segment-aware prefix: "/api" matches "/api" and "/api/x", not "/apix"; "/" and "/api/" match by prefix.
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    if !path.starts_with(prefix) {
        return false;
    }
    prefix.ends_with('/') || path.len() == prefix.len() || path.as_bytes()[prefix.len()] == b'/'
}

enum PathMatch {
    Prefix(String),
    Glob(globset::GlobMatcher),
    Regex(Regex),
}

impl PathMatch {
    fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Prefix(p) => prefix_matches(p, path),
            PathMatch::Glob(g) => g.is_match(path),
            PathMatch::Regex(r) => r.is_match(path),
        }
    }
}

struct KvMatcher {
    name: String,
    value: Option<String>,
    regex: Option<Regex>,
}

impl KvMatcher {
    fn compile(m: &KvMatch, path: Vec<crate::config::Seg>, lower: bool) -> Result<Self, Invalid> {
        if m.name.is_empty() {
            let mut p = path;
            p.push(crate::config::Seg::Key("name".into()));
            return Err(Invalid::new(p, "needs a non-empty `name`"));
        }
        let regex = match &m.regex {
            Some(r) => Some(Regex::new(r).map_err(|e| {
                let mut p = path.clone();
                p.push(crate::config::Seg::Key("regex".into()));
                Invalid::new(p, format!("invalid regex: {}", one_line(&e.to_string())))
            })?),
            None => None,
        };
        Ok(KvMatcher {
            name: if lower {
                m.name.to_ascii_lowercase()
            } else {
                m.name.clone()
            },
            value: m.value.clone(),
            regex,
        })
    }

    fn matches(&self, v: Option<&str>) -> bool {
        let Some(v) = v else { return false };
        if let Some(want) = &self.value {
            if v != want {
                return false;
            }
        }
        if let Some(r) = &self.regex {
            if !r.is_match(v) {
                return false;
            }
        }
        true
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct CompiledRule {
    class: usize,
    path: Option<PathMatch>,
    method: Option<String>,
    header: Option<KvMatcher>,
    cookie: Option<KvMatcher>,
    query: Option<KvMatcher>,
    client: Option<Cidr>,
    size_hint: Option<u64>,
}

impl CompiledRule {
    fn compile(i: usize, r: &RuleConfig, class: usize) -> Result<Self, Invalid> {
        let n = r.path_prefix.is_some() as u8
            + r.path_glob.is_some() as u8
            + r.path_regex.is_some() as u8;
        if n > 1 {
            return Err(Invalid::new(
                keypath!["rules", i],
                "give at most one of `path_prefix`, `path_glob`, `path_regex`",
            ));
        }
        let path = if let Some(p) = &r.path_prefix {
            if !p.starts_with('/') {
                return Err(Invalid::new(
                    keypath!["rules", i, "path_prefix"],
                    format!("must start with `/`, got `{p}`"),
                ));
            }
            Some(PathMatch::Prefix(p.clone()))
        } else if let Some(g) = &r.path_glob {
            let glob = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map_err(|e| {
                    Invalid::new(
                        keypath!["rules", i, "path_glob"],
                        format!("invalid glob: {}", one_line(&e.to_string())),
                    )
                })?;
            Some(PathMatch::Glob(glob.compile_matcher()))
        } else if let Some(re) = &r.path_regex {
            Some(PathMatch::Regex(Regex::new(re).map_err(|e| {
                Invalid::new(
                    keypath!["rules", i, "path_regex"],
                    format!("invalid regex: {}", one_line(&e.to_string())),
                )
            })?))
        } else {
            None
        };
        if let Some(m) = &r.method {
            if m.is_empty()
                || !m
                    .bytes()
                    .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
            {
                return Err(Invalid::new(
                    keypath!["rules", i, "method"],
                    format!("invalid method `{m}`"),
                ));
            }
        }
        let client = match &r.client {
            Some(c) => {
                Some(Cidr::parse(c).map_err(|e| Invalid::new(keypath!["rules", i, "client"], e))?)
            }
            None => None,
        };
        Ok(CompiledRule {
            class,
            path,
            method: r.method.as_ref().map(|m| m.to_ascii_uppercase()),
            header: r
                .header
                .as_ref()
                .map(|m| KvMatcher::compile(m, keypath!["rules", i, "header"], true))
                .transpose()?,
            cookie: r
                .cookie
                .as_ref()
                .map(|m| KvMatcher::compile(m, keypath!["rules", i, "cookie"], false))
                .transpose()?,
            query: r
                .query
                .as_ref()
                .map(|m| KvMatcher::compile(m, keypath!["rules", i, "query"], false))
                .transpose()?,
            client,
            size_hint: r.size_hint,
        })
    }

    fn matches(&self, req: &Request) -> bool {
        if let Some(p) = &self.path {
            if !p.matches(&req.path) {
                return false;
            }
        }
        if let Some(m) = &self.method {
            if !req.method.eq_ignore_ascii_case(m) {
                return false;
            }
        }
        if let Some(h) = &self.header {
            if !h.matches(req.header(&h.name)) {
                return false;
            }
        }
        if let Some(c) = &self.cookie {
            if !c.matches(req.cookie(&c.name)) {
                return false;
            }
        }
        if let Some(q) = &self.query {
            if !q.matches(req.query_param(&q.name).as_deref()) {
                return false;
            }
        }
        if let Some(c) = &self.client {
            if !c.contains(req.peer.ip()) {
                return false;
            }
        }
        true
    }
}

/// Per-class facts the classifier needs.
#[derive(Clone, Debug)]
pub struct ClassInfo {
    pub name: Arc<str>,
    pub size_hint: Option<u64>,
    pub deadline: Option<Duration>,
}

/// The outcome of classification. The class name is borrowed from the classifier: a clone would write the
/// name's reference count, which every thread shares, on every request.
#[derive(Clone, Debug)]
pub struct Classification<'a> {
    pub class: usize,
    pub class_name: &'a Arc<str>,
    /// A hint given by the Lua hook (wins over everything).
    pub lua_size: Option<u64>,
    /// The matching rule's hint.
    pub rule_size: Option<u64>,
    /// Relative deadline (Lua's `deadline_ms`, else the class's `deadline`).
    pub deadline: Option<Duration>,
    /// Whether the Lua hook failed on this request (the rules decided instead).
    pub lua_error: bool,
}

/// Compiled classification rules plus the optional Lua hook.
pub struct Classifier {
    rules: Vec<CompiledRule>,
    default_class: usize,
    classes: Vec<ClassInfo>,
    lua: Option<Arc<LuaClassifier>>,
    offload: Arc<tokio::sync::Semaphore>,
}

impl Classifier {
    /// Compile the rules of `cfg`; Lua is loaded from `[classify] script` when given.
    pub fn build(cfg: &ServeConfig) -> Result<Self, Invalid> {
        Self::build_with(cfg, LuaCounters::default())
    }

    /// [`Classifier::build`] with the counters the Lua script's limit overruns go to.
    pub fn build_with(cfg: &ServeConfig, lua_counters: LuaCounters) -> Result<Self, Invalid> {
        let classes: Vec<ClassInfo> = cfg
            .effective_classes()
            .iter()
            .map(|c| ClassInfo {
                name: Arc::from(c.name.as_str()),
                size_hint: c.size_hint,
                deadline: c.deadline,
            })
            .collect();
        let find = |name: &str| classes.iter().position(|c| &*c.name == name);
        let default_class = match &cfg.default_class {
            Some(d) => find(d).ok_or_else(|| {
                Invalid::new(keypath!["default_class"], format!("no class named `{d}`"))
            })?,
            None => 0,
        };
        let mut rules = Vec::with_capacity(cfg.rules.len());
        for (i, r) in cfg.rules.iter().enumerate() {
            let class = find(&r.class).ok_or_else(|| {
                Invalid::new(
                    keypath!["rules", i, "class"],
                    format!("no class named `{}`", r.class),
                )
            })?;
            rules.push(CompiledRule::compile(i, r, class)?);
        }
        let lua = match &cfg.classify.script {
            Some(p) => Some(Arc::new(
                LuaClassifier::load_with(&cfg.resolve(p), &cfg.lua, lua_counters)
                    .map_err(|e| Invalid::new(keypath!["classify", "script"], e))?,
            )),
            None => None,
        };
        Ok(Classifier {
            rules,
            default_class,
            classes,
            lua,
            offload: Arc::new(tokio::sync::Semaphore::new(OFFLOAD_MAX)),
        })
    }

    /// Class facts in config order.
    pub fn classes(&self) -> &[ClassInfo] {
        &self.classes
    }

    /// Classify one request: the Lua hook first (when configured and it names a class), then the rules in
    /// order, then the default class.
    /// The Lua call runs here, on the calling thread, for as long as its limit allows (see
    /// [`Classifier::classify_async`] for the request path).
    pub fn classify(&self, req: &Request) -> Classification<'_> {
        let lua = self.lua.as_ref().map(|l| l.classify(req));
        self.decide(req, lua)
    }

    /// [`Classifier::classify`] for the request path: the Lua call runs inline for at most
    /// [`INLINE_SLICE`]; one that needs longer is stopped and run again from the start on tokio's blocking
    /// pool for the rest of its limit, so a slow script holds no I/O thread (a blocked runtime thread stops
    /// the others from noticing new connections, too). At most [`OFFLOAD_MAX`] such calls run at once;
    /// beyond that the rules decide at once.
    pub async fn classify_async(&self, req: &Request) -> Classification<'_> {
        let Some(lua) = &self.lua else {
            return self.decide(req, None);
        };
        let slice = INLINE_SLICE < lua.time_limit();
        let outcome = match lua.classify_within(req, INLINE_SLICE.min(lua.time_limit()), slice) {
            Some(done) => done,
            None => match self.offload.clone().try_acquire_owned() {
                Ok(permit) => {
                    let (lua, owned) = (lua.clone(), req.clone());
                    let rest = lua.time_limit().saturating_sub(INLINE_SLICE);
                    tokio::task::spawn_blocking(move || {
                        let r =
                            lua.classify_within(&owned, rest.max(Duration::from_millis(1)), false);
                        drop(permit);
                        r.unwrap_or_else(|| Err("script exceeded its time limit".into()))
                    })
                    .await
                    .unwrap_or_else(|e| Err(format!("lua classify task failed: {e}")))
                }
                Err(_) => Err(lua.skip("too many slow Lua calls at once")),
            },
        };
        self.decide(req, Some(outcome))
    }

    /// The class from Lua's verdict (when there is a script) and the rules.
    fn decide(&self, req: &Request, lua: Option<Result<LuaVerdict, String>>) -> Classification<'_> {
        let mut lua_error = false;
        let mut lua_size = None;
        let mut lua_deadline = None;
        let mut lua_class = None;
        if let Some(outcome) = lua {
            match outcome {
                Ok(v) => {
                    lua_size = v.size;
                    lua_deadline = v.deadline;
                    if let Some(name) = v.class {
                        match self.classes.iter().position(|c| *c.name == *name) {
                            Some(i) => lua_class = Some(i),
                            None => {
                                static LIMIT: LogLimit = LogLimit::per_site();
                                if let Some(more) = LIMIT.line() {
                                    tracing::warn!(class = ?name, "lua classify returned an unknown class; using the rules{more}");
                                }
                                lua_error = true;
                            }
                        }
                    }
                }
                Err(e) => {
                    static LIMIT: LogLimit = LogLimit::per_site();
                    if let Some(more) = LIMIT.line() {
                        tracing::warn!(error = %e, "lua classify failed; using the rules{more}");
                    }
                    lua_error = true;
                }
            }
        }
        let (class, rule_size) = match lua_class {
            Some(c) => (c, None),
            None => match self.rules.iter().find(|r| r.matches(req)) {
                Some(r) => (r.class, r.size_hint),
                None => (self.default_class, None),
            },
        };
        let info = &self.classes[class];
        Classification {
            class,
            class_name: &info.name,
            lua_size,
            rule_size,
            deadline: lua_deadline.or(info.deadline),
            lua_error,
        }
    }
}

pub use crate::vhost::{HostPattern, request_host};

/// One route: a prefix, its backend and what it has learned about service times.
pub struct Route {
    pub prefix: String,
    /// The host names it serves (`host` in the configuration).
    pub host: HostPattern,
    /// Its identity among the routes (`RouteConfig::key`: the prefix, after the host when it names one).
    pub key: String,
    /// `scheme`: Some(true) for requests over TLS only, Some(false) for plain ones only, None for both.
    pub tls: Option<bool>,
    pub strip_prefix: bool,
    pub size_hint: Option<u64>,
    pub backend: Backend,
    /// Exponentially weighted moving average of service time in µs (0 = nothing learned yet).
    ewma_us: AtomicU64,
}

impl Route {
    pub fn new(
        prefix: String,
        strip_prefix: bool,
        size_hint: Option<u64>,
        backend: Backend,
    ) -> Self {
        Route {
            key: prefix.clone(),
            tls: None,
            prefix,
            host: HostPattern::Any,
            strip_prefix,
            size_hint,
            backend,
            ewma_us: AtomicU64::new(0),
        }
    }

    /// The learned mean service time in µs (0 before the first completion).
    pub fn learned_us(&self) -> u64 {
        self.ewma_us.load(Ordering::Relaxed)
    }

    /// Feed one service time into the moving average (α = 1/8).
    pub fn learn(&self, service: Duration) {
        let sample = service.as_micros().min(u64::MAX as u128) as u64;
        let old = self.ewma_us.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample.max(1)
        } else {
            (old - old / 8 + sample / 8).max(1)
        };
        self.ewma_us.store(new, Ordering::Relaxed);
    }
}

/// Routes by host, then longest matching prefix.
pub struct Router {
    routes: Vec<Route>,
    /// Whether any route names a host or a scheme (else only the path is looked at).
    by_host: bool,
}

/// What routing found for a request.
pub enum Found<'a> {
    Route(&'a Route),
    /// No route of the chosen host matches the path.
    NoRoute,
    /// Over TLS, the Host names another virtual host than the SNI name did (answered 421).
    Misdirected,
}

impl Router {
    pub fn new(routes: Vec<Route>) -> Self {
        let by_host = routes
            .iter()
            .any(|r| r.host != HostPattern::Any || r.tls.is_some());
        Router { routes, by_host }
    }

    /// The route whose prefix is the longest match for `path` (ties: the first configured), ignoring hosts.
    pub fn find(&self, path: &str) -> Option<&Route> {
        self.longest(path, |_| true)
    }

    fn longest(&self, path: &str, mut of_host: impl FnMut(&Route) -> bool) -> Option<&Route> {
        let mut best: Option<&Route> = None;
        for r in &self.routes {
            // (ties: a route for the request's scheme over one for both)
            if prefix_matches(&r.prefix, path)
                && best.is_none_or(|b| {
                    r.prefix.len() > b.prefix.len()
                        || (r.prefix.len() == b.prefix.len() && r.tls.is_some() && b.tls.is_none())
                })
                && of_host(r)
            {
                best = Some(r);
            }
        }
        best
    }

    /// The virtual host `host` falls in: the most specific pattern that matches it (None: no route serves
    /// that host).
    fn host_of(&self, host: Option<&str>) -> Option<&HostPattern> {
        let mut best: Option<(&HostPattern, (u8, usize))> = None;
        for r in &self.routes {
            if let Some(rank) = r.host.rank(host) {
                if best.is_none_or(|(_, b)| rank > b) {
                    best = Some((&r.host, rank));
                }
            }
        }
        best.map(|(p, _)| p)
    }

    /// [`Router::route`] for `req` (its Host, TLS server name and scheme are looked at only when a route
    /// names a host or a scheme).
    pub fn route_request(&self, req: &Request) -> Found<'_> {
        if !self.by_host {
            return self.find(&req.path).map_or(Found::NoRoute, Found::Route);
        }
        let sni = req.tls.as_ref().and_then(|t| t.sni.as_deref());
        self.route(req.header("host"), sni, req.tls.is_some(), &req.path)
    }

    /// The route for a request: the virtual host its Host picks (exact name, else the longest matching
    /// wildcard, else the routes without `host`), then the longest prefix among that host's routes for the
    /// request's scheme (`tls`: it came over TLS). `sni` is the TLS server name: a Host of another virtual
    /// host than the SNI name's is misdirected.
    pub fn route(&self, host: Option<&str>, sni: Option<&str>, tls: bool, path: &str) -> Found<'_> {
        if !self.by_host {
            return self.find(path).map_or(Found::NoRoute, Found::Route);
        }
        let host = host.map(request_host);
        let Some(vhost) = self.host_of(host.as_deref()) else {
            return Found::NoRoute;
        };
        if let Some(sni) = sni {
            if host.as_deref() != Some(sni) && self.host_of(Some(sni)) != Some(vhost) {
                return Found::Misdirected;
            }
        }
        self.longest(path, |r| &r.host == vhost && r.tls.is_none_or(|t| t == tls))
            .map_or(Found::NoRoute, Found::Route)
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

/// The request's size hint: Lua's hint, else the backend's (a static file's size, a synthetic request's
/// work), else the rule's, the route's or the class's configured hint, else the route's learned mean
/// service time in µs.
pub fn size_hint(c: &Classification, classes: &[ClassInfo], route: &Route, req: &Request) -> u64 {
    c.lua_size
        .or_else(|| route.backend.size_hint(req))
        .or(c.rule_size)
        .or(route.size_hint)
        .or(classes[c.class].size_hint)
        .unwrap_or_else(|| route.learned_us())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_learns_a_moving_average_of_service_times() {
        use crate::backend::synthetic::{SyntheticBackend, SyntheticConfig};
        let backend = SyntheticBackend::new(&SyntheticConfig::default()).unwrap();
        let route = Route::new("/".into(), false, None, Backend::Synthetic(backend));
        assert_eq!(route.learned_us(), 0, "nothing learned yet");
        route.learn(Duration::from_micros(800));
        assert_eq!(route.learned_us(), 800, "the first sample is taken whole");
        route.learn(Duration::from_micros(1600));
        assert_eq!(route.learned_us(), 800 - 100 + 200, "α = 1/8");
        for _ in 0..200 {
            route.learn(Duration::from_micros(1600));
        }
        assert!(
            route.learned_us().abs_diff(1600) <= 8,
            "{}",
            route.learned_us()
        );
        route.learn(Duration::ZERO);
        assert!(
            route.learned_us() >= 1,
            "never falls back to 'nothing learned'"
        );
    }

    #[test]
    fn size_hint_precedence_lua_backend_rule_route_class_learned() {
        use crate::backend::synthetic::{SyntheticBackend, SyntheticConfig};
        let synth =
            || Backend::Synthetic(SyntheticBackend::new(&SyntheticConfig::default()).unwrap());
        let classes = vec![ClassInfo {
            name: Arc::from("c"),
            size_hint: Some(5),
            deadline: None,
        }];
        let name: Arc<str> = Arc::from("c");
        let mut c = Classification {
            class: 0,
            class_name: &name,
            lua_size: Some(1),
            rule_size: Some(3),
            deadline: None,
            lua_error: false,
        };
        let route = Route::new("/".into(), false, Some(4), synth());
        route.learn(Duration::from_micros(6));
        let work = Request::get("/sleep?ms=2"); // the synthetic backend's own hint: 2000 µs
        let plain = Request::get("/bytes?n=10"); // no work asked: the backend has no hint
        assert_eq!(size_hint(&c, &classes, &route, &work), 1, "Lua wins");
        c.lua_size = None;
        assert_eq!(
            size_hint(&c, &classes, &route, &work),
            2000,
            "then the backend"
        );
        assert_eq!(size_hint(&c, &classes, &route, &plain), 3, "then the rule");
        c.rule_size = None;
        assert_eq!(size_hint(&c, &classes, &route, &plain), 4, "then the route");
        let bare = Route::new("/".into(), false, None, synth());
        bare.learn(Duration::from_micros(6));
        assert_eq!(size_hint(&c, &classes, &bare, &plain), 5, "then the class");
        let no_class = vec![ClassInfo {
            size_hint: None,
            ..classes[0].clone()
        }];
        assert_eq!(
            size_hint(&c, &no_class, &bare, &plain),
            6,
            "then the learned mean"
        );
    }

    #[test]
    fn routes_are_chosen_by_host_then_prefix() {
        use crate::backend::synthetic::{SyntheticBackend, SyntheticConfig};
        let route = |host: &str, prefix: &str| {
            let b = Backend::Synthetic(SyntheticBackend::new(&SyntheticConfig::default()).unwrap());
            let mut r = Route::new(prefix.into(), false, None, b);
            r.host = HostPattern::parse(host).unwrap();
            r.key = format!("{host}{prefix}");
            r
        };
        let router = Router::new(vec![
            route("*", "/"),
            route("*", "/any-only"),
            route("api.example.com", "/"),
            route("api.example.com", "/v1"),
            route("*.example.com", "/"),
            route("*.eu.example.com", "/"),
        ]);
        let key = |host: Option<&str>, sni: Option<&str>, path: &str| match router.route(
            host,
            sni,
            sni.is_some(),
            path,
        ) {
            Found::Route(r) => r.key.clone(),
            Found::NoRoute => "404".into(),
            Found::Misdirected => "421".into(),
        };
        assert_eq!(
            key(Some("API.example.com:443"), None, "/v1/x"),
            "api.example.com/v1"
        );
        assert_eq!(
            key(Some("api.example.com"), None, "/other"),
            "api.example.com/"
        );
        assert_eq!(
            key(Some("api.example.com"), None, "/any-only"),
            "api.example.com/",
            "a virtual host's routes only: no fallback to the hostless ones"
        );
        assert_eq!(key(Some("www.example.com"), None, "/v1"), "*.example.com/");
        assert_eq!(
            key(Some("x.eu.example.com"), None, "/"),
            "*.eu.example.com/"
        );
        assert_eq!(key(Some("other.test"), None, "/any-only/a"), "*/any-only");
        assert_eq!(key(None, None, "/"), "*/");
        // TLS: a Host of another virtual host than the SNI name's is misdirected; the same one is not
        assert_eq!(
            key(Some("api.example.com"), Some("www.example.com"), "/"),
            "421"
        );
        assert_eq!(
            key(Some("a.example.com"), Some("b.example.com"), "/"),
            "*.example.com/"
        );
        assert_eq!(
            key(Some("api.example.com"), Some("api.example.com"), "/"),
            "api.example.com/"
        );
        // a route for one scheme: only its requests, and over a route for both
        let mut http_only = route("*", "/");
        http_only.tls = Some(false);
        let schemes = Router::new(vec![route("*", "/"), http_only, route("*", "/x")]);
        let tls_of = |tls: bool, path: &str| match schemes.route(None, None, tls, path) {
            Found::Route(r) => r.tls,
            _ => panic!("no route"),
        };
        assert_eq!(tls_of(false, "/"), Some(false));
        assert_eq!(tls_of(true, "/"), None);
        assert_eq!(tls_of(false, "/x"), None, "a longer prefix still wins");
        // without routes for a host, nothing to 404 but the path
        let plain = Router::new(vec![route("*", "/a")]);
        assert!(matches!(
            plain.route(Some("x"), Some("y"), true, "/a"),
            Found::Route(_)
        ));
        assert!(matches!(
            plain.route(None, None, false, "/b"),
            Found::NoRoute
        ));
        // only hosted routes: an unknown host gets 404
        let hosted = Router::new(vec![route("a.test", "/")]);
        assert!(matches!(
            hosted.route(Some("b.test"), None, false, "/"),
            Found::NoRoute
        ));
    }

    #[test]
    fn prefixes_are_segment_aware() {
        assert!(prefix_matches("/api", "/api"));
        assert!(prefix_matches("/api", "/api/x"));
        assert!(!prefix_matches("/api", "/apix"));
        assert!(prefix_matches("/", "/anything"));
        assert!(prefix_matches("/api/", "/api/x"));
    }
}
