//! Lua hooks (vendored Lua 5.4 through mlua): `classify(request)` for rules the config cannot express, and
//! `pick(heads)` as a scheduling policy. Each state sits behind a lock (a Lua state is not shared between
//! threads) and every call runs under an instruction budget so a runaway script cannot stall a worker.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mlua::{Function, HookTriggers, Lua, String as LuaString, Table, Value, VmState};
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

/// The `[classify] script` hook.
pub struct LuaClassifier {
    state: Mutex<(Lua, Arc<AtomicU32>)>,
}

impl LuaClassifier {
    /// Load a script that defines `classify(request)`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let (lua, budget) = load_state(path)?;
        require_function(&lua, "classify", path)?;
        Ok(LuaClassifier {
            state: Mutex::new((lua, budget)),
        })
    }

    /// Call `classify(request)`; the request is a table {method, path, query, headers, cookies, peer}.
    pub fn classify(&self, req: &Request) -> Result<LuaVerdict, String> {
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (lua, budget) = &*guard;
        budget.store(0, Ordering::Relaxed);
        let run = || -> mlua::Result<LuaVerdict> {
            let t = lua.create_table()?;
            t.set("method", req.method.as_str())?;
            t.set("path", req.path.as_str())?;
            t.set("query", req.query.as_deref().unwrap_or(""))?;
            let headers = lua.create_table()?;
            let cookies = lua.create_table()?;
            for (k, v) in &req.headers {
                headers.set(k.as_str(), v.as_str())?;
                if k == "cookie" {
                    for pair in v.split(';') {
                        if let Some((ck, cv)) = pair.split_once('=') {
                            cookies.set(ck.trim(), cv.trim())?;
                        }
                    }
                }
            }
            t.set("headers", headers)?;
            t.set("cookies", cookies)?;
            t.set("peer", req.peer.ip().to_string())?;
            let f: Function = lua.globals().get("classify")?;
            let (class, hints): (Option<String>, Option<Table>) = f.call(t)?;
            let mut v = LuaVerdict {
                class,
                ..LuaVerdict::default()
            };
            if let Some(h) = hints {
                if let Some(size) = h.get::<Option<f64>>("size")? {
                    if size.is_finite() && size >= 0.0 {
                        v.size = Some(size as u64);
                    }
                }
                if let Some(ms) = h.get::<Option<f64>>("deadline_ms")? {
                    if ms.is_finite() && ms > 0.0 {
                        v.deadline = Some(Duration::from_secs_f64(ms / 1e3));
                    }
                }
            }
            Ok(v)
        };
        run().map_err(|e| one_line(&e.to_string()))
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
