//! Lua hooks (vendored Lua 5.4 through mlua): `classify(request)` for rules the config cannot express, and
//! `pick(heads)` as a scheduling policy. Each state sits behind a lock (a Lua state is not shared between
//! threads) and every call runs under an instruction budget so a runaway script cannot stall a worker.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mlua::{Function, HookTriggers, Lua, String as LuaString, Value, VmState};
use ordo_sched::{ClassId, Head, HeadPicker, Nanos};
use prometheus_client::metrics::counter::Counter;

use crate::http::Request;

/// Instructions between two budget checks.
const HOOK_EVERY: u32 = 10_000;
/// Checks allowed per call: 1000 × 10 000 = 10 million Lua instructions.
const MAX_CHECKS: u32 = 1_000;

/// A fresh Lua state with the script loaded and an instruction budget armed; the counter is reset before
/// every call.
fn load_state(path: &Path) -> Result<(Lua, Arc<AtomicU32>), String> {
    let code = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read Lua script {}: {e}", path.display()))?;
    let lua = Lua::new();
    let budget = Arc::new(AtomicU32::new(0));
    let b = budget.clone();
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(HOOK_EVERY),
        move |_lua, _debug| {
            if b.fetch_add(1, Ordering::Relaxed) >= MAX_CHECKS {
                Err(mlua::Error::runtime(
                    "script exceeded its instruction budget (10 million instructions per call)",
                ))
            } else {
                Ok(VmState::Continue)
            }
        },
    );
    lua.load(code.as_str())
        .set_name(format!("@{}", path.display()))
        .exec()
        .map_err(|e| {
            format!(
                "Lua script {}: {}",
                path.display(),
                one_line(&e.to_string())
            )
        })?;
    Ok((lua, budget))
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
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

/// What `classify` returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LuaVerdict {
    pub class: Option<String>,
    pub size: Option<u64>,
    pub deadline: Option<Duration>,
}

/// Builds the request table inside Lua from flat arguments and flattens the hints, so a classification is a
/// single call from Rust.
const CLASSIFY_WRAPPER: &str = r#"
local select, type, tonumber = select, type, tonumber
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

/// The `[classify] script` hook.
pub struct LuaClassifier {
    state: Mutex<ClassifyState>,
}

struct ClassifyState {
    budget: Arc<AtomicU32>,
    wrapper: Function,
    // Keeps the state alive (the wrapper holds a reference into it).
    _lua: Lua,
}

impl LuaClassifier {
    /// Load a script that defines `classify(request)`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let (lua, budget) = load_state(path)?;
        require_function(&lua, "classify", path)?;
        let wrapper: Function = lua
            .load(CLASSIFY_WRAPPER)
            .set_name("=ordo-classify-wrapper")
            .eval()
            .map_err(|e| one_line(&e.to_string()))?;
        Ok(LuaClassifier {
            state: Mutex::new(ClassifyState {
                budget,
                wrapper,
                _lua: lua,
            }),
        })
    }

    /// Call `classify(request)`; the request is a table {method, path, query, headers, cookies, peer}.
    pub fn classify(&self, req: &Request) -> Result<LuaVerdict, String> {
        let mut flat: Vec<&str> = Vec::with_capacity(2 * req.headers.len() + 8);
        for (k, v) in &req.headers {
            flat.push(k);
            flat.push(v);
        }
        let nh = req.headers.len();
        for (k, v) in &req.headers {
            if k == "cookie" {
                for pair in v.split(';') {
                    if let Some((ck, cv)) = pair.split_once('=') {
                        flat.push(ck.trim());
                        flat.push(cv.trim());
                    }
                }
            }
        }
        let nc = (flat.len() - 2 * nh) / 2;
        let peer = req.peer.ip().to_string();
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        guard.budget.store(0, Ordering::Relaxed);
        let (class, size, deadline_ms) = guard
            .wrapper
            .call::<(Option<String>, Value, Value)>((
                req.method.as_str(),
                req.path.as_str(),
                req.query.as_deref().unwrap_or(""),
                peer.as_str(),
                nh,
                nc,
                mlua::Variadic::from_iter(flat),
            ))
            .map_err(|e| one_line(&e.to_string()))?;
        drop(guard);
        Ok(LuaVerdict {
            class,
            size: hint_size(&size)?,
            deadline: hint_deadline(&deadline_ms)?,
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
/// what they keep), class names are interned once, and each dispatch is a single call into Lua.
pub struct LuaPicker {
    lua: Lua,
    budget: Arc<AtomicU32>,
    errors: Counter,
    wrapper: Function,
    names: HashMap<String, LuaString>,
    args: Vec<Value>,
}

impl LuaPicker {
    /// Load a script that defines `pick(heads)`. `errors` counts failed calls (the metrics read it).
    pub fn load(path: &Path, errors: Counter) -> Result<Self, String> {
        let (lua, budget) = load_state(path)?;
        require_function(&lua, "pick", path)?;
        let wrapper: Function = lua
            .load(PICK_WRAPPER)
            .set_name("=ordo-pick-wrapper")
            .eval()
            .map_err(|e| one_line(&e.to_string()))?;
        Ok(LuaPicker {
            lua,
            budget,
            errors,
            wrapper,
            names: HashMap::new(),
            args: Vec::new(),
        })
    }

    fn call(&mut self, heads: &[Head<'_>], now: Nanos) -> mlua::Result<Option<LuaString>> {
        self.budget.store(0, Ordering::Relaxed);
        let mut args = std::mem::take(&mut self.args);
        args.clear();
        args.push(Value::Integer(heads.len() as i64));
        for h in heads {
            let name = match self.names.get(h.class_name) {
                Some(n) => n.clone(),
                None => {
                    let n = self.lua.create_string(h.class_name)?;
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
        let r = self
            .wrapper
            .call::<Option<LuaString>>(mlua::Variadic::from_iter(args.drain(..)));
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
        match self.call(heads, now) {
            Ok(Some(name)) => match heads
                .iter()
                .find(|h| h.class_name.as_bytes() == &name.as_bytes()[..])
            {
                Some(h) => Some(h.class),
                None => {
                    self.errors.inc();
                    tracing::warn!(class = %name.to_string_lossy(), "lua pick returned a class with nothing queued; serving the oldest head");
                    fallback()
                }
            },
            Ok(None) => fallback(),
            Err(e) => {
                self.errors.inc();
                tracing::warn!(error = %one_line(&e.to_string()), "lua pick failed; serving the oldest head");
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
        req.headers.push(("x-k".into(), "v".into()));
        req.headers.push(("cookie".into(), "e=f; c=d".into()));
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
        let p = script(
            &dir,
            "function classify(r) return \"gold\", { size = 2.9, deadline_ms = 86400000 } end",
        );
        let v = LuaClassifier::load(&p)
            .unwrap()
            .classify(&Request::get("/"))
            .unwrap();
        assert_eq!(v.size, Some(2));
        assert_eq!(v.deadline, Some(Duration::from_secs(86_400)));
        let p = script(
            &dir,
            "function classify(r) return \"gold\", { size = 0, deadline_ms = 0.5 } end",
        );
        let v = LuaClassifier::load(&p)
            .unwrap()
            .classify(&Request::get("/"))
            .unwrap();
        assert_eq!(v.size, Some(0));
        assert_eq!(v.deadline, Some(Duration::from_micros(500)));
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
        assert!(e.contains("instruction budget"), "{e}");
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
        let errors = Counter::default();
        let mut picker = LuaPicker::load(&p, errors.clone()).unwrap();
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
        let mut picker = LuaPicker::load(&p, errors.clone()).unwrap();
        assert_eq!(picker.pick(&heads, 0), Some(1));
        assert_eq!(picker.pick(&heads[..1], 0), Some(0));
        assert_eq!(errors.get(), 0);
    }
}
