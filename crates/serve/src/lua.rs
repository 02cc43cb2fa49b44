//! Lua hooks (vendored Lua 5.4 through mlua): `classify(request)` for rules the config cannot express, and
//! `pick(heads)` as a scheduling policy. Scripts run in a sandbox (safe libraries, a memory limit per state, a
//! wall-time limit per call: see the `sandbox` module); a call that fails or hits a limit falls back (the rules, the
//! oldest head) and is counted, and a script that keeps hitting limits is disabled for a while (a circuit
//! breaker). Classification takes a state from a pool, one per thread calling at once, so requests are not
//! serialised behind one lock; `pick` runs under the scheduler's lock with its own, shorter limit.

mod pattern;
mod sandbox;

use crate::log_limit::LogLimit;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mlua::{Function, Lua, String as LuaString, Value};
use ordo_sched::{ClassId, Head, HeadPicker, Nanos};
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;

use crate::http::Request;
use crate::http::duration;
use crate::invalid::Invalid;
use crate::keypath;
use sandbox::{Failure, Script, one_line};

/// `[lua]`: the limits every script runs under.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LuaLimits {
    /// Bytes one Lua state may use, the script's own data included (each thread classifying at once has a
    /// state of its own).
    pub memory_limit: usize,
    /// Wall time one `classify` call may take.
    #[serde(deserialize_with = "duration::deserialize")]
    pub classify_time_limit: Duration,
    /// Wall time one `pick` call may take (it holds the scheduler's lock meanwhile).
    #[serde(deserialize_with = "duration::deserialize")]
    pub pick_time_limit: Duration,
    /// Limit overruns within `breaker_window` that disable a script for `breaker_cooldown`; 0: never.
    pub breaker_overruns: u32,
    #[serde(deserialize_with = "duration::deserialize")]
    pub breaker_window: Duration,
    #[serde(deserialize_with = "duration::deserialize")]
    pub breaker_cooldown: Duration,
}

impl Default for LuaLimits {
    fn default() -> Self {
        LuaLimits {
            memory_limit: 16 << 20,
            classify_time_limit: Duration::from_millis(50),
            pick_time_limit: Duration::from_millis(5),
            breaker_overruns: 5,
            breaker_window: Duration::from_secs(10),
            breaker_cooldown: Duration::from_secs(30),
        }
    }
}

impl LuaLimits {
    /// Smallest `memory_limit` accepted: a state with the libraries loaded needs about 100 KiB.
    pub const MIN_MEMORY: usize = 1 << 20;

    /// Refuses values that would make every call fail or never stop one.
    pub fn check(&self) -> Result<(), Invalid> {
        if self.memory_limit < Self::MIN_MEMORY {
            return Err(Invalid::new(
                keypath!["lua", "memory_limit"],
                format!(
                    "must be ≥ {} (1 MiB), got {}",
                    Self::MIN_MEMORY,
                    self.memory_limit
                ),
            ));
        }
        for (key, d) in [
            ("classify_time_limit", self.classify_time_limit),
            ("pick_time_limit", self.pick_time_limit),
        ] {
            if d.is_zero() {
                return Err(Invalid::new(keypath!["lua", key], "must be > 0"));
            }
            if d > Duration::from_secs(10) {
                return Err(Invalid::new(
                    keypath!["lua", key],
                    format!("must be ≤ 10s, got {}", duration::format(d)),
                ));
            }
        }
        for (key, d) in [
            ("breaker_window", self.breaker_window),
            ("breaker_cooldown", self.breaker_cooldown),
        ] {
            if d.is_zero() {
                return Err(Invalid::new(keypath!["lua", key], "must be > 0"));
            }
        }
        Ok(())
    }
}

/// Counters of one hook's limits (the metrics own them; `Default` gives throwaway ones).
#[derive(Clone, Debug, Default)]
pub struct LuaCounters {
    /// Failed `pick` calls, limits included (`classify` failures are counted by the request path).
    pub errors: Counter,
    /// Calls stopped by the time limit.
    pub time: Counter,
    /// Calls stopped by the memory limit.
    pub memory: Counter,
    /// Calls not made because the script was disabled.
    pub skipped: Counter,
    /// Times the script was disabled (for everyone) after repeated overruns.
    pub disabled: Counter,
    /// Times one client was benched (the script skipped for its requests) after its repeated overruns.
    pub clients_benched: Counter,
}

/// Clients whose overruns are tracked at most (a full table forgets those whose window has passed first;
/// beyond that, a new client's overruns count only towards the global breaker).
const CLIENTS_MAX: usize = 10_000;

/// Disables a script after `max` limit overruns within `window`, for `cooldown`.
///
/// Without a client (`pick`): any `max` overruns disable it, and once back one more overrun within `window`
/// disables it again. With one (`classify`, keyed by the peer's address, IPv6 by its /64), one client
/// cannot turn the operator's script off for everyone: a client with `max` overruns within `window` is
/// *benched* alone — its own requests skip the script (the rules decide) for `cooldown` — and the script is
/// disabled for everyone only when `max` distinct clients overran within one `window` (a script that is
/// broken for every request gets there at once; one hostile client never does).
struct Breaker {
    hook: &'static str,
    max: u32,
    window: Duration,
    cooldown: Duration,
    epoch: Instant,
    /// Nanoseconds since `epoch` until which the script is disabled (0: enabled).
    open_until: AtomicU64,
    /// Clients benched now (0: `allows` looks nothing up).
    benched: AtomicUsize,
    state: Mutex<BreakerState>,
}

struct BreakerState {
    /// Start of the global window and the keyless overruns in it.
    since: Instant,
    count: u32,
    /// Distinct clients that overran in the global window.
    clients_seen: Vec<IpAddr>,
    clients: HashMap<IpAddr, ClientRecord>,
}

struct ClientRecord {
    since: Instant,
    count: u32,
    benched_until: Option<Instant>,
}

/// The key a client is counted under: its address, an IPv6 one by its /64 (one host gets a whole /64).
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(
                seg[0], seg[1], seg[2], seg[3], 0, 0, 0, 0,
            ))
        }
        v4 => v4,
    }
}

impl Breaker {
    fn new(hook: &'static str, limits: &LuaLimits) -> Self {
        let now = Instant::now();
        Breaker {
            hook,
            max: limits.breaker_overruns,
            window: limits.breaker_window,
            cooldown: limits.breaker_cooldown,
            epoch: now,
            open_until: AtomicU64::new(0),
            benched: AtomicUsize::new(0),
            state: Mutex::new(BreakerState {
                since: now,
                count: 0,
                clients_seen: Vec::new(),
                clients: HashMap::new(),
            }),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos().min(u64::MAX as u128) as u64
    }

    /// Whether the script may be called now (for `client`, when the call is made for one).
    fn allows(&self, client: Option<IpAddr>) -> Result<(), &'static str> {
        let until = self.open_until.load(Ordering::Relaxed);
        if until != 0 && self.now_ns() < until {
            return Err("script disabled after repeated limit overruns");
        }
        let Some(ip) = client else { return Ok(()) };
        if self.benched.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rec) = st.clients.get_mut(&client_key(ip)) else {
            return Ok(());
        };
        match rec.benched_until {
            Some(t) if Instant::now() < t => {
                Err("script bypassed for this client after its repeated limit overruns")
            }
            Some(_) => {
                rec.benched_until = None;
                rec.count = 0;
                self.benched.fetch_sub(1, Ordering::Relaxed);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Records an overrun (of a call made for `client`); true when it disabled the script for everyone.
    fn overrun(&self, client: Option<IpAddr>, counters: &LuaCounters) -> bool {
        if self.max == 0 {
            return false;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let until = self.open_until.load(Ordering::Relaxed);
        let back = until != 0;
        if back {
            self.open_until.store(0, Ordering::Relaxed);
        }
        let trip = match client {
            None => {
                if back {
                    // back from a cooldown: on probation for one window
                    st.since = self.epoch + Duration::from_nanos(until);
                    st.count = self.max.saturating_sub(1);
                }
                if now.duration_since(st.since) > self.window {
                    st.since = now;
                    st.count = 0;
                }
                st.count += 1;
                st.count >= self.max
            }
            Some(ip) => {
                let key = client_key(ip);
                self.client_overrun(&mut st, key, now, counters);
                if back || now.duration_since(st.since) > self.window {
                    st.since = now;
                    st.clients_seen.clear();
                }
                if !st.clients_seen.contains(&key) {
                    st.clients_seen.push(key);
                }
                st.clients_seen.len() >= self.max as usize
            }
        };
        if !trip {
            return false;
        }
        st.count = 0;
        st.clients_seen.clear();
        let until = (now + self.cooldown).duration_since(self.epoch).as_nanos();
        self.open_until
            .store(until.min(u64::MAX as u128) as u64, Ordering::Relaxed);
        counters.disabled.inc();
        tracing::warn!(
            hook = self.hook,
            overruns = self.max,
            window = %duration::format(self.window),
            "lua script disabled for {} after repeated limit overruns{}; the fallback decides meanwhile",
            duration::format(self.cooldown),
            if client.is_some() { " by distinct clients" } else { "" }
        );
        true
    }

    /// Counts one client's overrun; benches it after `max` within `window`.
    fn client_overrun(
        &self,
        st: &mut BreakerState,
        key: IpAddr,
        now: Instant,
        counters: &LuaCounters,
    ) {
        if !st.clients.contains_key(&key) && st.clients.len() >= CLIENTS_MAX {
            let window = self.window;
            st.clients.retain(|_, r| {
                r.benched_until.is_some_and(|t| now < t) || now.duration_since(r.since) <= window
            });
            let benched = st
                .clients
                .values()
                .filter(|r| r.benched_until.is_some())
                .count();
            self.benched.store(benched, Ordering::Relaxed);
            if st.clients.len() >= CLIENTS_MAX {
                return;
            }
        }
        let rec = st.clients.entry(key).or_insert(ClientRecord {
            since: now,
            count: 0,
            benched_until: None,
        });
        if rec.benched_until.is_some() {
            // a call already under way when it was benched
            return;
        }
        if now.duration_since(rec.since) > self.window {
            rec.since = now;
            rec.count = 0;
        }
        rec.count += 1;
        if rec.count < self.max {
            return;
        }
        rec.benched_until = Some(now + self.cooldown);
        self.benched.fetch_add(1, Ordering::Relaxed);
        counters.clients_benched.inc();
        static LIMIT: LogLimit = LogLimit::per_site();
        if let Some(more) = LIMIT.line() {
            tracing::warn!(
                hook = self.hook,
                client = %key,
                overruns = self.max,
                window = %duration::format(self.window),
                "lua script bypassed for one client for {} after its repeated limit overruns; the rules \
                 decide its requests meanwhile{more}",
                duration::format(self.cooldown)
            );
        }
    }
}

/// Counts a failed call by its cause and feeds the breaker.
fn record(failure: &Failure, client: Option<IpAddr>, breaker: &Breaker, counters: &LuaCounters) {
    match failure {
        Failure::Time => counters.time.inc(),
        Failure::Memory => counters.memory.inc(),
        Failure::Error(_) => return,
    };
    breaker.overrun(client, counters);
}

fn require_function(lua: &Lua, name: &str, path: &Path) -> Result<(), String> {
    match lua.globals().get::<Value>(name) {
        Ok(Value::Function(_)) => Ok(()),
        _ => Err(format!(
            "Lua script {} does not define a global function `{name}`",
            path.display()
        )),
    }
}

fn read_script(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read Lua script {}: {e}", path.display()))
}

/// What `classify` returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LuaVerdict {
    pub class: Option<String>,
    pub size: Option<u64>,
    pub deadline: Option<Duration>,
}

/// Builds the request table inside Lua from flat arguments and returns the hints' fields, so a
/// classification is a single call from Rust.
const CLASSIFY_WRAPPER: &str = r#"
local select, type = select, type
return function(method, path, query, peer, nh, nc, ...)
  local headers, cookies = {}, {}
  local i = 1
  for _ = 1, nh do
    local k, v = select(i, ...)
    headers[k] = v
    i = i + 2
  end
  for _ = 1, nc do
    local k, v = select(i, ...)
    cookies[k] = v
    i = i + 2
  end
  local class, hints = classify({ method = method, path = path, query = query, headers = headers,
                                  cookies = cookies, peer = peer })
  if type(hints) == "table" then
    return class, hints.size, hints.deadline_ms
  end
  return class
end
"#;

/// One sandboxed state with the script and the wrapper loaded.
struct ClassifyState {
    script: Script,
    wrapper: Function,
}

/// Idle states kept at most (more exist only while that many threads classify at once).
const POOL_MAX: usize = 64;

/// The `[classify] script` hook.
pub struct LuaClassifier {
    path: PathBuf,
    code: String,
    limits: LuaLimits,
    idle: Mutex<Vec<ClassifyState>>,
    breaker: Breaker,
    counters: LuaCounters,
}

impl LuaClassifier {
    /// Load a script that defines `classify(request)`, with the default limits.
    pub fn load(path: &Path) -> Result<Self, String> {
        Self::load_with(path, &LuaLimits::default(), LuaCounters::default())
    }

    /// Load a script that defines `classify(request)`; `counters` count its overruns.
    pub fn load_with(
        path: &Path,
        limits: &LuaLimits,
        counters: LuaCounters,
    ) -> Result<Self, String> {
        let code = read_script(path)?;
        let c = LuaClassifier {
            path: path.to_path_buf(),
            code,
            limits: limits.clone(),
            idle: Mutex::new(Vec::new()),
            breaker: Breaker::new("classify", limits),
            counters,
        };
        // the first state checks the script now, not on the first request
        let first = c.new_state()?;
        c.idle.lock().unwrap_or_else(|p| p.into_inner()).push(first);
        Ok(c)
    }

    fn new_state(&self) -> Result<ClassifyState, String> {
        let script = Script::load(&self.path, &self.code, self.limits.memory_limit)?;
        require_function(script.lua(), "classify", &self.path)?;
        let wrapper: Function = script
            .lua()
            .load(CLASSIFY_WRAPPER)
            .set_name("=ordo-classify-wrapper")
            .eval()
            .map_err(|e| one_line(&e.to_string()))?;
        Ok(ClassifyState { script, wrapper })
    }

    /// Call `classify(request)`; the request is a table {method, path, query, headers, cookies, peer}.
    /// Runs on the calling thread for up to `classify_time_limit`.
    pub fn classify(&self, req: &Request) -> Result<LuaVerdict, String> {
        self.classify_within(req, self.limits.classify_time_limit, false)
            .unwrap_or_else(|| Err(Failure::Time.to_string()))
    }

    /// `classify_time_limit`.
    pub fn time_limit(&self) -> Duration {
        self.limits.classify_time_limit
    }

    /// Counts a call not made (`why` is the error to report).
    pub fn skip(&self, why: &str) -> String {
        self.counters.skipped.inc();
        why.to_string()
    }

    /// Like [`LuaClassifier::classify`] within `limit`. With `slice`, a call that runs past `limit` gives
    /// None and is not counted (the caller runs it again elsewhere, for the rest of its limit).
    pub fn classify_within(
        &self,
        req: &Request,
        limit: Duration,
        slice: bool,
    ) -> Option<Result<LuaVerdict, String>> {
        if let Err(why) = self.breaker.allows(Some(req.peer.ip())) {
            return Some(Err(self.skip(why)));
        }
        // the script sees lower-cased names (`r.headers["x-k"]`); names are kept as sent
        let names: Vec<std::borrow::Cow<'_, str>> = req
            .headers
            .iter()
            .map(|(k, _)| {
                if k.bytes().any(|b| b.is_ascii_uppercase()) {
                    std::borrow::Cow::Owned(k.to_ascii_lowercase())
                } else {
                    std::borrow::Cow::Borrowed(k)
                }
            })
            .collect();
        let mut flat: Vec<&str> = Vec::with_capacity(2 * req.headers.len() + 8);
        for (k, (_, v)) in names.iter().zip(req.headers.iter()) {
            flat.push(k);
            flat.push(v);
        }
        let nh = req.headers.len();
        for v in req.headers.known(crate::http::headers::Known::Cookie) {
            for pair in v.split(';') {
                if let Some((ck, cv)) = pair.split_once('=') {
                    flat.push(ck.trim());
                    flat.push(cv.trim());
                }
            }
        }
        let nc = (flat.len() - 2 * nh) / 2;
        let peer = req.peer.ip().to_string();
        let popped = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let state = match popped {
            Some(s) => Ok(s),
            None => self.new_state(),
        };
        let state = match state {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        let r = state.script.call(limit, |_| {
            state.wrapper.call::<(Option<String>, Value, Value)>((
                &*req.method,
                req.path.as_str(),
                req.query.as_deref().unwrap_or(""),
                peer.as_str(),
                nh,
                nc,
                mlua::Variadic::from_iter(flat),
            ))
        });
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < POOL_MAX {
            idle.push(state);
        }
        drop(idle);
        Some(match r {
            Ok((class, size, deadline_ms)) => (|| {
                Ok(LuaVerdict {
                    class,
                    size: hint_size(&size)?,
                    deadline: hint_deadline(&deadline_ms)?,
                })
            })(),
            Err(Failure::Time) if slice => return None,
            Err(f) => {
                record(&f, Some(req.peer.ip()), &self.breaker, &self.counters);
                Err(f.to_string())
            }
        })
    }
}

/// Longest `deadline_ms` a script may give: a day. (Longer is no deadline an HTTP request could have, and an
/// unchecked 1e300 made `Duration::from_secs_f64` panic.)
pub const MAX_DEADLINE_MS: f64 = 86_400_000.0;

/// A Lua number as f64 (integers included); None for anything else (a numeric string is not a number).
fn lua_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// `hints.size`: nil, or a finite number ≥ 0 (fractions are rounded down).
fn hint_size(v: &Value) -> Result<Option<u64>, String> {
    if v.is_nil() {
        return Ok(None);
    }
    match lua_number(v) {
        // 2^63: beyond it `as u64` would only saturate
        Some(n) if n.is_finite() && (0.0..9.223_372_036_854_776e18).contains(&n) => {
            Ok(Some(n as u64))
        }
        _ => Err(format!(
            "classify returned hints.size = {}: must be a number ≥ 0",
            describe(v)
        )),
    }
}

/// `hints.deadline_ms`: nil, or a finite number of milliseconds in (0, MAX_DEADLINE_MS].
fn hint_deadline(v: &Value) -> Result<Option<Duration>, String> {
    if v.is_nil() {
        return Ok(None);
    }
    match lua_number(v) {
        Some(ms) if ms > 0.0 && ms <= MAX_DEADLINE_MS => {
            Ok(Some(Duration::from_secs_f64(ms / 1e3)))
        }
        _ => Err(format!(
            "classify returned hints.deadline_ms = {}: must be a number of milliseconds in (0, {MAX_DEADLINE_MS}]",
            describe(v)
        )),
    }
}

/// A returned value for an error message (numbers as Lua prints them, other types by name).
fn describe(v: &Value) -> String {
    match v {
        Value::Integer(i) => i.to_string(),
        Value::Number(n) if n.is_nan() => "nan".into(),
        Value::Number(n) if n.is_infinite() => if *n > 0.0 { "inf" } else { "-inf" }.into(),
        Value::Number(n) if (1e-4..1e15).contains(&n.abs()) => n.to_string(),
        Value::Number(n) => format!("{n:e}"),
        Value::String(s) => format!("{:?} (a string)", s.to_string_lossy()),
        other => format!("a {}", other.type_name()),
    }
}

/// Builds the `heads` array inside Lua from flat arguments (7 per head), reusing its tables, then calls the
/// script's `pick`. One call from Rust per dispatch keeps the cost low.
const PICK_WRAPPER: &str = r#"
local slots, heads, last = {}, {}, 0
local select = select
return function(n, ...)
  for i = 1, n do
    local c, q, s, w, wt, p, d = select((i - 1) * 7 + 1, ...)
    local t = slots[i]
    if t == nil then t = {}; slots[i] = t end
    t.class = c; t.queued = q; t.size = s; t.waited_us = w; t.weight = wt; t.priority = p
    t.deadline_in_us = d
    heads[i] = t
  end
  for i = n + 1, last do heads[i] = nil end
  last = n
  return pick(heads)
end
"#;

/// `policy = "lua"`: the script's `pick(heads)` chooses which class's head is served next.
///
/// Dispatch is on the hot path: the heads tables live in Lua and are reused between calls (scripts must copy
/// what they keep), class names are interned once, and each dispatch is a single call into Lua. It runs
/// under the scheduler's lock, bounded by `pick_time_limit`.
pub struct LuaPicker {
    script: Script,
    limit: Duration,
    breaker: Breaker,
    counters: LuaCounters,
    wrapper: Function,
    names: HashMap<String, LuaString>,
    args: Vec<Value>,
}

impl LuaPicker {
    /// Load a script that defines `pick(heads)` with the default limits; `counters.errors` counts failed
    /// calls (the metrics read it).
    pub fn load(path: &Path, counters: LuaCounters) -> Result<Self, String> {
        Self::load_with(path, &LuaLimits::default(), counters)
    }

    /// Load a script that defines `pick(heads)` under `limits`.
    pub fn load_with(
        path: &Path,
        limits: &LuaLimits,
        counters: LuaCounters,
    ) -> Result<Self, String> {
        let code = read_script(path)?;
        let script = Script::load(path, &code, limits.memory_limit)?;
        require_function(script.lua(), "pick", path)?;
        let wrapper: Function = script
            .lua()
            .load(PICK_WRAPPER)
            .set_name("=ordo-pick-wrapper")
            .eval()
            .map_err(|e| one_line(&e.to_string()))?;
        Ok(LuaPicker {
            script,
            limit: limits.pick_time_limit,
            breaker: Breaker::new("pick", limits),
            counters,
            wrapper,
            names: HashMap::new(),
            args: Vec::new(),
        })
    }

    fn call(&mut self, heads: &[Head<'_>], now: Nanos) -> Result<Option<LuaString>, Failure> {
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        args.push(Value::Integer(heads.len() as i64));
        let lua = self.script.lua();
        for h in heads {
            let name = match self.names.get(h.class_name) {
                Some(n) => n.clone(),
                None => {
                    let n = lua
                        .create_string(h.class_name)
                        .map_err(|e| Failure::Error(one_line(&e.to_string())))?;
                    self.names.insert(h.class_name.to_string(), n.clone());
                    n
                }
            };
            args.push(Value::String(name));
            args.push(Value::Integer(h.queued as i64));
            args.push(Value::Integer(h.size_hint.min(i64::MAX as u64) as i64));
            args.push(Value::Integer((h.waited / 1_000) as i64));
            args.push(Value::Integer(i64::from(h.weight)));
            args.push(Value::Integer(i64::from(h.priority)));
            args.push(match h.deadline {
                Some(d) => Value::Integer((d as i64 - now as i64) / 1_000),
                None => Value::Nil,
            });
        }
        let wrapper = &self.wrapper;
        let r = self.script.call(self.limit, |_| {
            wrapper.call::<Option<LuaString>>(mlua::Variadic::from_iter(args.drain(..)))
        });
        self.args = args;
        r
    }
}

impl HeadPicker for LuaPicker {
    fn pick(&mut self, heads: &[Head<'_>], now: Nanos) -> Option<ClassId> {
        if heads.is_empty() {
            return None;
        }
        let fallback = || {
            // The head that waited longest: FCFS across classes.
            heads.iter().max_by_key(|h| h.waited).map(|h| h.class)
        };
        if self.breaker.allows(None).is_err() {
            self.counters.skipped.inc();
            return fallback();
        }
        match self.call(heads, now) {
            Ok(Some(name)) => match heads
                .iter()
                .find(|h| h.class_name.as_bytes() == &name.as_bytes()[..])
            {
                Some(h) => Some(h.class),
                None => {
                    self.counters.errors.inc();
                    static LIMIT: LogLimit = LogLimit::per_site();
                    if let Some(more) = LIMIT.line() {
                        tracing::warn!(class = ?name.to_string_lossy(), "lua pick returned a class with nothing queued; serving the oldest head{more}");
                    }
                    fallback()
                }
            },
            Ok(None) => fallback(),
            Err(f) => {
                self.counters.errors.inc();
                record(&f, None, &self.breaker, &self.counters);
                static LIMIT: LogLimit = LogLimit::per_site();
                if let Some(more) = LIMIT.line() {
                    tracing::warn!(error = %f, "lua pick failed; serving the oldest head{more}");
                }
                fallback()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
        let p = dir.path().join("s.lua");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn classify_sees_the_request_and_returns_hints() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            r#"
function classify(r)
  if r.method == "GET" and r.path == "/x" and r.query == "a=1" and r.headers["x-k"] == "v"
     and r.cookies["c"] == "d" and r.peer == "127.0.0.1" then
    return "gold", { size = 42, deadline_ms = 250 }
  end
  return "wrong"
end
"#,
        );
        let c = LuaClassifier::load(&p).unwrap();
        let mut req = Request::get("/x?a=1");
        req.headers.push("x-k", "v");
        req.headers.push("cookie", "e=f; c=d");
        let v = c.classify(&req).unwrap();
        assert_eq!(
            v,
            LuaVerdict {
                class: Some("gold".into()),
                size: Some(42),
                deadline: Some(Duration::from_millis(250)),
            }
        );
    }

    /// Issue 10 defect 8a: `deadline_ms = 1e300` panicked in `Duration::from_secs_f64`; NaN, infinities,
    /// negative and non-numeric hints were dropped silently or turned into nonsense. Each is now a script
    /// error (the rules decide).
    #[test]
    fn issue10_hints_out_of_range_are_script_errors() {
        let dir = tempfile::tempdir().unwrap();
        for (hint, what) in [
            ("deadline_ms = 1e300", "deadline_ms = 1e300"),
            ("deadline_ms = math.huge", "deadline_ms = inf"),
            ("deadline_ms = -math.huge", "deadline_ms = -inf"),
            ("deadline_ms = 0/0", "deadline_ms = nan"),
            ("deadline_ms = -5", "deadline_ms = -5"),
            ("deadline_ms = 0", "deadline_ms = 0"),
            ("deadline_ms = 86400001", "deadline_ms = 86400001"),
            ("deadline_ms = '250'", "deadline_ms = \"250\" (a string)"),
            ("deadline_ms = {}", "deadline_ms = a table"),
            ("size = -1", "size = -1"),
            ("size = 0/0", "size = nan"),
            ("size = math.huge", "size = inf"),
            ("size = 1e19", "size = 1e19"),
            ("size = true", "size = a boolean"),
        ] {
            let p = script(
                &dir,
                &format!("function classify(r) return \"gold\", {{ {hint} }} end"),
            );
            let c = LuaClassifier::load(&p).unwrap();
            let e = c.classify(&Request::get("/")).unwrap_err();
            assert!(e.contains(&format!("hints.{what}")), "{hint}: {e}");
        }
        // the edges of what is accepted
        let accepted = |hints: &str| {
            let code = format!("function classify(r) return \"gold\", {{ {hints} }} end");
            let v = LuaClassifier::load(&script(&dir, &code))
                .unwrap()
                .classify(&Request::get("/"))
                .unwrap();
            (v.size, v.deadline)
        };
        assert_eq!(
            accepted("size = 2.9, deadline_ms = 86400000"),
            (Some(2), Some(Duration::from_secs(86_400)))
        );
        assert_eq!(
            accepted("size = 0, deadline_ms = 0.5"),
            (Some(0), Some(Duration::from_micros(500)))
        );
    }

    #[test]
    fn classify_errors_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let c =
            LuaClassifier::load(&script(&dir, "function classify(r) error('nope') end")).unwrap();
        let e = c.classify(&Request::get("/")).unwrap_err();
        assert!(e.contains("nope"), "{e}");
        let c = LuaClassifier::load(&script(&dir, "function classify(r) while true do end end"))
            .unwrap();
        let e = c.classify(&Request::get("/")).unwrap_err();
        assert!(e.contains("time limit"), "{e}");
    }

    #[test]
    fn pick_sees_the_heads() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            r#"
function pick(heads)
  assert(#heads == 2)
  local h = heads[2]
  assert(h.class == "b" and h.queued == 3 and h.size == 7 and h.waited_us == 5 and h.weight == 2
         and h.priority == -1 and h.deadline_in_us == 10)
  assert(heads[1].deadline_in_us == nil)
  return "b"
end
"#,
        );
        let counters = LuaCounters::default();
        let errors = counters.errors.clone();
        let mut picker = LuaPicker::load(&p, counters.clone()).unwrap();
        let heads = [
            Head {
                class: 0,
                class_name: "a",
                queued: 1,
                size_hint: 0,
                waited: 0,
                deadline: None,
                weight: 1,
                priority: 0,
            },
            Head {
                class: 1,
                class_name: "b",
                queued: 3,
                size_hint: 7,
                waited: 5_000,
                deadline: Some(20_000),
                weight: 2,
                priority: -1,
            },
        ];
        for _ in 0..3 {
            assert_eq!(picker.pick(&heads, 10_000), Some(1));
        }
        assert_eq!(errors.get(), 0);
        // Fewer heads on the next call: the reused array must not show stale entries (a stale `b` would be
        // an unknown class here and count as an error).
        let p = script(&dir, "function pick(heads) return heads[#heads].class end");
        let mut picker = LuaPicker::load(&p, counters.clone()).unwrap();
        assert_eq!(picker.pick(&heads, 0), Some(1));
        assert_eq!(picker.pick(&heads[..1], 0), Some(0));
        assert_eq!(errors.get(), 0);
    }

    fn limits(time: Duration) -> LuaLimits {
        LuaLimits {
            classify_time_limit: time,
            pick_time_limit: time,
            ..LuaLimits::default()
        }
    }

    /// Issue 10 defect 8d: every classification waited on one Lua lock, so one slow call held up all the
    /// others. While one call runs for a second on one thread, another thread's calls answer at once.
    #[test]
    fn issue10_classify_does_not_serialise_behind_one_state() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            r#"
function classify(r)
  if r.path == "/slow" then
    local t = os.clock() + 1.0
    while os.clock() < t do end
  end
  return "gold"
end
"#,
        );
        let c = std::sync::Arc::new(
            // a time limit far above the slow call's second of CPU: on a loaded machine that second of
            // the process's CPU time takes many seconds of wall time (the limit's clock), and this test is
            // about the other calls, not the limit
            LuaClassifier::load_with(&p, &limits(Duration::from_secs(60)), LuaCounters::default())
                .unwrap(),
        );
        let slow = {
            let c = c.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                let v = c.classify(&Request::get("/slow")).unwrap();
                (v, t.elapsed())
            })
        };
        // wait until the slow call holds its state (it took the only one loaded so far)
        let start = Instant::now();
        while !c.idle.lock().unwrap().is_empty() {
            assert!(start.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..5 {
            let t = Instant::now();
            assert_eq!(
                c.classify(&Request::get("/fast")).unwrap().class.as_deref(),
                Some("gold")
            );
            assert!(
                t.elapsed() < Duration::from_millis(700),
                "{:?}",
                t.elapsed()
            );
        }
        assert!(
            !slow.is_finished(),
            "the fast calls were answered while the slow one ran"
        );
        // (how long the slow call took is not checked: `os.clock` is the process's CPU time, which runs
        // faster than the wall clock while other threads of the test binary are busy)
        let (v, _took) = slow.join().unwrap();
        assert_eq!(v.class.as_deref(), Some("gold"));
        // two states now: one per thread that classified at once
        assert_eq!(c.idle.lock().unwrap().len(), 2);
    }

    /// `path` from `peer` (an address, no port).
    fn from(path: &str, peer: &str) -> Request {
        let mut r = Request::get(path);
        r.peer = std::net::SocketAddr::new(peer.parse().unwrap(), 40000);
        r
    }

    /// A script that keeps hitting its limits for many clients is disabled for `breaker_cooldown` (its
    /// calls answered by the fallback at once and counted), then tried again.
    #[test]
    fn repeated_overruns_disable_a_script_for_a_while() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            "function classify(r) if r.path == '/loop' then while true do end end return 'gold' end",
        );
        let l = LuaLimits {
            breaker_overruns: 3,
            breaker_cooldown: Duration::from_millis(400),
            ..limits(Duration::from_millis(30))
        };
        let counters = LuaCounters::default();
        let c = LuaClassifier::load_with(&p, &l, counters.clone()).unwrap();
        for peer in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
            let e = c.classify(&from("/loop", peer)).unwrap_err();
            assert!(e.contains("time limit"), "{e}");
        }
        assert_eq!((counters.time.get(), counters.disabled.get()), (3, 1));
        // disabled: even a harmless request from another client is not run (answered by the fallback and
        // counted as skipped; not timed, which a busy machine makes flaky)
        let e = c.classify(&from("/ok", "10.0.0.9")).unwrap_err();
        assert!(e.contains("disabled"), "{e}");
        assert_eq!(counters.skipped.get(), 1);
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(
            c.classify(&from("/ok", "10.0.0.9"))
                .unwrap()
                .class
                .as_deref(),
            Some("gold")
        );
        // back, and it takes `breaker_overruns` distinct clients again
        for peer in ["10.0.0.4", "10.0.0.5"] {
            assert!(c.classify(&from("/loop", peer)).is_err());
        }
        assert_eq!(counters.disabled.get(), 1);
        assert!(c.classify(&from("/loop", "10.0.0.6")).is_err());
        assert_eq!(counters.disabled.get(), 2);
        assert!(
            c.classify(&from("/ok", "10.0.0.9"))
                .unwrap_err()
                .contains("disabled")
        );
    }

    /// Issue 20: one client whose requests make the script overrun its limit, again and again, cannot turn
    /// the script off for everyone: it is benched alone (its requests skip the script, counted), and
    /// another client's requests are still classified by the script; an IPv6 client is one /64.
    #[test]
    fn one_client_cannot_disable_the_script_for_everyone() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(
            &dir,
            "function classify(r) if r.headers['x-spin'] then while true do end end return 'gold' end",
        );
        let l = LuaLimits {
            breaker_overruns: 3,
            breaker_cooldown: Duration::from_secs(30),
            ..limits(Duration::from_millis(20))
        };
        let counters = LuaCounters::default();
        let c = LuaClassifier::load_with(&p, &l, counters.clone()).unwrap();
        let spin = |peer: &str| {
            let mut r = from("/", peer);
            r.headers.push("X-Spin", "1");
            r
        };
        for _ in 0..3 {
            let e = c.classify(&spin("192.0.2.7")).unwrap_err();
            assert!(e.contains("time limit"), "{e}");
        }
        assert_eq!(counters.clients_benched.get(), 1);
        assert_eq!(counters.disabled.get(), 0);
        // the hostile client keeps trying: skipped at once (not run, so not timed), never disabling
        for _ in 0..20 {
            let e = c.classify(&spin("192.0.2.7")).unwrap_err();
            assert!(e.contains("this client"), "{e}");
        }
        assert_eq!(counters.skipped.get(), 20);
        assert_eq!(counters.time.get(), 3);
        assert_eq!(counters.disabled.get(), 0);
        // everyone else still gets the script's verdict
        for peer in ["192.0.2.8", "2001:db8::1"] {
            assert_eq!(
                c.classify(&from("/", peer)).unwrap().class.as_deref(),
                Some("gold"),
                "{peer}"
            );
        }
        // an IPv6 host rotating addresses in its /64 is one client
        for i in 1..=3 {
            assert!(c.classify(&spin(&format!("2001:db8:0:1::{i}"))).is_err());
        }
        assert_eq!(counters.clients_benched.get(), 2);
        assert!(
            c.classify(&spin("2001:db8:0:1::99"))
                .unwrap_err()
                .contains("this client")
        );
        assert_eq!(counters.disabled.get(), 0);
        assert_eq!(
            c.classify(&from("/", "2001:db8::1"))
                .unwrap()
                .class
                .as_deref(),
            Some("gold")
        );
    }

    fn heads() -> [Head<'static>; 2] {
        [
            Head {
                class: 0,
                class_name: "a",
                queued: 1,
                size_hint: 0,
                waited: 9_000,
                deadline: None,
                weight: 1,
                priority: 0,
            },
            Head {
                class: 1,
                class_name: "b",
                queued: 1,
                size_hint: 0,
                waited: 5_000,
                deadline: None,
                weight: 1,
                priority: 0,
            },
        ]
    }

    /// Issue 10 defect 8: `pick` runs under the scheduler's lock: its loops, patterns and allocations are
    /// bounded by `pick_time_limit` and the memory limit, and the oldest head is served instead.
    #[test]
    fn issue10_pick_is_bounded_too() {
        let dir = tempfile::tempdir().unwrap();
        for (body, time) in [
            ("while true do end", Some(true)),
            (
                "return string.find(string.rep('a', 40), string.rep('a*', 30) .. 'b')",
                Some(true),
            ),
            ("return string.rep('x', 1e9)", Some(false)),
            // whichever limit comes first
            ("local t = {} for i = 1, 1e9 do t[i] = i end", None),
        ] {
            let p = script(&dir, &format!("function pick(heads) {body} end"));
            let counters = LuaCounters::default();
            let mut picker =
                LuaPicker::load_with(&p, &limits(Duration::from_millis(20)), counters.clone())
                    .unwrap();
            let t = Instant::now();
            assert_eq!(picker.pick(&heads(), 0), Some(0), "{body}: the oldest head");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{body}: {:?}",
                t.elapsed()
            );
            assert_eq!(counters.errors.get(), 1, "{body}");
            let (tc, mc) = (counters.time.get(), counters.memory.get());
            match time {
                Some(true) => assert_eq!((tc, mc), (1, 0), "{body}"),
                Some(false) => assert_eq!((tc, mc), (0, 1), "{body}"),
                None => assert_eq!(tc + mc, 1, "{body}"),
            }
        }
        let p = script(&dir, "function pick(heads) os.exit(1) end");
        let mut picker = LuaPicker::load(&p, LuaCounters::default()).unwrap();
        assert_eq!(picker.pick(&heads(), 0), Some(0));
    }

    #[test]
    fn limits_are_checked() {
        let ok = LuaLimits::default();
        assert!(ok.check().is_ok());
        let e = LuaLimits {
            memory_limit: 1000,
            ..ok.clone()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.message, "must be ≥ 1048576 (1 MiB), got 1000");
        let e = LuaLimits {
            pick_time_limit: Duration::ZERO,
            ..ok.clone()
        }
        .check()
        .unwrap_err();
        assert_eq!(
            ordo_util::located::path_to_string(&e.path),
            "lua.pick_time_limit"
        );
        assert!(
            LuaLimits {
                classify_time_limit: Duration::from_secs(11),
                ..ok.clone()
            }
            .check()
            .is_err()
        );
        assert!(
            LuaLimits {
                breaker_window: Duration::ZERO,
                ..ok
            }
            .check()
            .is_err()
        );
    }
}
