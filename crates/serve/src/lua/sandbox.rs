//! The Lua sandbox every script runs in: a chosen library set, a memory limit per state, a wall-time limit
//! per call, and replacements for the library functions whose C loops a script could make run for minutes.
//!
//! Why each piece (docs/serve.md "Lua sandbox" says the same for users):
//! - **Libraries**: `string`, `table`, `math`, `utf8`, the base functions, and `os.time`/`clock`/`date`/
//!   `difftime`. No `io`, `os.exit`/`execute`/`remove`/`rename`/`getenv`/`tmpname`/`setlocale`, `load`,
//!   `loadfile`, `dofile`, `require`, `debug`, `coroutine`, `collectgarbage`, `string.dump`; `print` and
//!   `warn` go to the log.
//! - **Time**: a count hook reads the clock every [`HOOK_EVERY`] VM instructions and stops the call once its
//!   limit has passed. C functions run no VM instructions, so the hook alone cannot stop them: the ones whose
//!   work a script can make unbounded without using memory are replaced — the pattern functions
//!   (`string.find`/`match`/`gmatch`/`gsub`, backtracking: see [`super::pattern`]) by a matcher that checks
//!   the clock as it goes; `string.rep` by one that refuses results over the memory limit (the C one loops
//!   `n` times even for an empty string); `table.insert`/`remove`/`move` by Lua versions (their C loops run
//!   to a length a `__len` metamethod or an argument can make 2^62). `table.sort` refuses more than
//!   [`SORT_MAX`] elements. What remains (`string.format`, `table.concat`, `..`, `utf8`, ...) is linear in
//!   data the memory limit bounds. So a call is stopped within about its limit, on the thread it runs on,
//!   and no thread is left spinning: no need to run calls on other threads (a hand-off per request) or to
//!   abandon states.
//! - **Memory**: mlua's allocator limit per state; what Rust builds for a script (gsub's and rep's results)
//!   is checked against the same limit.
//! - **No escape**: after a limit stopped a call, `pcall`/`xpcall` rethrow instead of catching (a script
//!   could otherwise catch the stop and loop on), and metatables with `__gc` are refused (finalizers run
//!   with hooks off, outside any call's limit).

use crate::log_limit::LogLimit;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mlua::{
    ChunkMode, Error, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib,
    String as LuaString, Table, Value, VmState,
};

use super::pattern::{Cap, Matcher, mem_find, no_specials, start_pos};

/// VM instructions between two clock reads.
pub(crate) const HOOK_EVERY: u32 = 1_000;
/// Time the script's top-level code may take when a state is created.
pub(crate) const LOAD_TIME_LIMIT: Duration = Duration::from_secs(1);
/// Largest array `table.sort` takes (its C loop cannot be stopped; 2^17 numbers sort in a few ms).
pub(crate) const SORT_MAX: i64 = 1 << 17;

const FREE: u8 = 0;
const TIME: u8 = 1;
const MEMORY: u8 = 2;

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The script raised an error or returned something unusable.
    Error(String),
    /// The call ran past its time limit.
    Time,
    /// The state ran out of its memory limit.
    Memory,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Error(e) => f.write_str(e),
            Failure::Time => f.write_str("script exceeded its time limit"),
            Failure::Memory => f.write_str("script exceeded its memory limit"),
        }
    }
}

/// One state's limits while a call runs: the deadline the hook and the replaced functions check, and which
/// limit (if any) stopped the call.
pub(crate) struct Guard {
    epoch: Instant,
    /// Nanoseconds since `epoch`; `u64::MAX`: no call running.
    deadline: AtomicU64,
    tripped: AtomicU8,
    /// The state's memory limit, also applied to what Rust builds for the script.
    pub(crate) max_bytes: usize,
}

fn time_error() -> Error {
    Error::runtime("script exceeded its time limit")
}

fn memory_error() -> Error {
    Error::MemoryError("not enough memory".into())
}

/// Whether `e` (or the error it wraps) is Lua running out of memory.
fn is_memory(e: &Error) -> bool {
    match e {
        Error::MemoryError(_) => true,
        Error::CallbackError { cause, .. } => is_memory(cause),
        _ => false,
    }
}

impl Guard {
    fn new(max_bytes: usize) -> Self {
        Guard {
            epoch: Instant::now(),
            deadline: AtomicU64::new(u64::MAX),
            tripped: AtomicU8::new(FREE),
            max_bytes,
        }
    }

    fn arm(&self, limit: Duration) {
        let now = self.epoch.elapsed();
        let at = now
            .saturating_add(limit)
            .as_nanos()
            .min(u64::MAX as u128 - 1) as u64;
        self.tripped.store(FREE, Ordering::Relaxed);
        self.deadline.store(at, Ordering::Relaxed);
    }

    fn disarm(&self) -> u8 {
        self.deadline.store(u64::MAX, Ordering::Relaxed);
        self.tripped.swap(FREE, Ordering::Relaxed)
    }

    /// Err once the call's time is up or a limit has stopped it (and from then on, so nothing the script
    /// catches lets it go on).
    pub(crate) fn check(&self) -> mlua::Result<()> {
        match self.tripped.load(Ordering::Relaxed) {
            TIME => return Err(time_error()),
            MEMORY => return Err(memory_error()),
            _ => {}
        }
        let d = self.deadline.load(Ordering::Relaxed);
        if d != u64::MAX && self.epoch.elapsed().as_nanos() as u64 > d {
            self.tripped.store(TIME, Ordering::Relaxed);
            return Err(time_error());
        }
        Ok(())
    }

    /// Refuses a buffer of `n` bytes built outside Lua's allocator when it is over the memory limit.
    fn reserve(&self, n: usize) -> mlua::Result<()> {
        if n > self.max_bytes {
            self.tripped.store(MEMORY, Ordering::Relaxed);
            return Err(memory_error());
        }
        Ok(())
    }
}

/// A Lua state with the sandbox installed and a script loaded.
pub(crate) struct Script {
    lua: Lua,
    guard: Arc<Guard>,
}

/// Replacements written in Lua (their loops run VM instructions, so the hook bounds them) and the wrappers
/// of `pcall`, `xpcall` and `setmetatable`. Receives the `stopped(err)` check.
const PRELUDE: &str = r##"
local stopped = ...
local error, type, select, rawget, tonumber = error, type, select, rawget, tonumber
local tointeger, maxinteger, format = math.tointeger, math.maxinteger, string.format
local raw_pcall, raw_xpcall, raw_setmetatable, raw_sort = pcall, xpcall, setmetatable, table.sort

local function pass(ok, ...)
  if not ok and stopped((...)) then error((...), 0) end
  return ok, ...
end
function pcall(f, ...) return pass(raw_pcall(f, ...)) end
function xpcall(f, h, ...) return pass(raw_xpcall(f, h, ...)) end

function setmetatable(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: __gc metamethods are not available to ordo scripts", 2)
  end
  return raw_setmetatable(t, mt)
end

local function argerror(n, fname, msg)
  error(format("bad argument #%d to '%s' (%s)", n, fname, msg), 3)
end
local function int(x, n, fname)
  local i = tointeger(x)
  if i == nil and type(x) == "string" then i = tointeger(tonumber(x)) end
  if i == nil then
    if type(x) == "number" or tonumber(x) then argerror(n, fname, "number has no integer representation") end
    argerror(n, fname, "number expected, got " .. type(x))
  end
  return i
end

function table.insert(t, ...)
  local n = select("#", ...)
  local e = #t + 1
  if n == 1 then
    t[e] = ...
  elseif n == 2 then
    local pos, v = ...
    pos = int(pos, 2, "insert")
    if pos < 1 or pos > e then argerror(2, "insert", "position out of bounds") end
    for i = e, pos + 1, -1 do t[i] = t[i - 1] end
    t[pos] = v
  else
    error("wrong number of arguments to 'insert'", 2)
  end
end

function table.remove(t, pos)
  local size = #t
  if pos == nil then
    pos = size
  else
    pos = int(pos, 2, "remove")
    if pos ~= size and (pos < 1 or pos > size + 1) then argerror(2, "remove", "position out of bounds") end
  end
  local v = t[pos]
  while pos < size do
    t[pos] = t[pos + 1]
    pos = pos + 1
  end
  t[pos] = nil
  return v
end

function table.move(a1, f, e, t, a2)
  f, e, t = int(f, 2, "move"), int(e, 3, "move"), int(t, 4, "move")
  local tt = a2
  if tt == nil then tt = a1 end
  if e >= f then
    if not (f > 0 or e < maxinteger + f) then argerror(3, "move", "too many elements to move") end
    local n = e - f + 1
    if t > maxinteger - n + 1 then argerror(4, "move", "destination wrap around") end
    if t > e or t <= f or (a2 ~= nil and a1 ~= a2) then
      for i = 0, n - 1 do tt[t + i] = a1[f + i] end
    else
      for i = n - 1, 0, -1 do tt[t + i] = a1[f + i] end
    end
  end
  return tt
end

local sort_max = SORT_MAX
function table.sort(t, cmp)
  if #t > sort_max then
    error(format("table.sort: more than %d elements (ordo's limit for one call)", sort_max), 2)
  end
  return raw_sort(t, cmp)
end
"##;

impl Script {
    /// A sandboxed state with `code` (the script at `path`) loaded, its top level run within
    /// [`LOAD_TIME_LIMIT`] and `memory` bytes.
    pub(crate) fn load(path: &Path, code: &str, memory: usize) -> Result<Script, String> {
        let name = path.display();
        let lua = Lua::new_with(
            StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8 | StdLib::OS,
            LuaOptions::new(),
        )
        .map_err(|e| format!("cannot create a Lua state: {e}"))?;
        let guard = Arc::new(Guard::new(memory));
        install(&lua, &guard, &name.to_string()).map_err(|e| {
            format!(
                "cannot set up the Lua sandbox: {}",
                one_line(&e.to_string())
            )
        })?;
        lua.set_memory_limit(memory)
            .map_err(|e| format!("cannot limit Lua's memory: {e}"))?;
        let g = guard.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_lua, _debug| g.check().map(|()| VmState::Continue),
        );
        let script = Script { lua, guard };
        script
            .call(LOAD_TIME_LIMIT, |lua| {
                lua.load(code)
                    .set_name(format!("@{name}"))
                    .set_mode(ChunkMode::Text)
                    .exec()
            })
            .map_err(|f| match f {
                Failure::Error(e) => format!("Lua script {name}: {e}"),
                f => format!("Lua script {name}: {f} while loading"),
            })?;
        Ok(script)
    }

    pub(crate) fn lua(&self) -> &Lua {
        &self.lua
    }

    /// Runs `f` within `limit`; a failure says which limit stopped it, if one did.
    pub(crate) fn call<R>(
        &self,
        limit: Duration,
        f: impl FnOnce(&Lua) -> mlua::Result<R>,
    ) -> Result<R, Failure> {
        self.guard.arm(limit);
        let r = f(&self.lua);
        let tripped = self.guard.disarm();
        match r {
            Ok(v) if tripped == FREE => Ok(v),
            // a limit tripped inside and the script swallowed the error some other way: still a stop
            Ok(_) if tripped == TIME => Err(Failure::Time),
            Ok(_) => Err(self.after_memory()),
            Err(_) if tripped == TIME => Err(Failure::Time),
            Err(e) if tripped == MEMORY || is_memory(&e) => Err(self.after_memory()),
            Err(e) => Err(Failure::Error(one_line(&e.to_string()))),
        }
    }

    /// Frees what the stopped call left, so the state is usable for the next one.
    fn after_memory(&self) -> Failure {
        let _ = self.lua.gc_collect();
        Failure::Memory
    }
}

/// The first line of an error, trimmed (Lua tracebacks follow it).
pub(crate) fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// Lua values for captures.
fn push_caps(lua: &Lua, caps: Vec<Cap<'_>>, out: &mut Vec<Value>) -> mlua::Result<()> {
    for c in caps {
        out.push(match c {
            Cap::Str(b) => Value::String(lua.create_string(b)?),
            Cap::Pos(n) => Value::Integer(n as i64),
        });
    }
    Ok(())
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Boolean(false))
}

/// `string.find` (`find` = true) and `string.match`.
fn find_aux(
    lua: &Lua,
    g: &Guard,
    s: &LuaString,
    p: &LuaString,
    init: Option<i64>,
    plain: bool,
    find: bool,
) -> mlua::Result<MultiValue> {
    g.check()?;
    let src = s.as_bytes();
    let pat = p.as_bytes();
    let ls = src.len();
    let init = start_pos(init.unwrap_or(1), ls) - 1;
    let mut out = Vec::new();
    if init > ls {
        return Ok(MultiValue::from_iter([Value::Nil]));
    }
    let mut tick = || g.check();
    if find && (plain || no_specials(&pat)) {
        if let Some(i) = mem_find(&src[init..], &pat, &mut tick)? {
            let start = init + i;
            out.push(Value::Integer(start as i64 + 1));
            out.push(Value::Integer((start + pat.len()) as i64));
            return Ok(MultiValue::from_iter(out));
        }
        return Ok(MultiValue::from_iter([Value::Nil]));
    }
    let anchor = pat.first() == Some(&b'^');
    let body = if anchor { &pat[1..] } else { &pat[..] };
    let mut m = Matcher::new(&src, body, &mut tick);
    let mut s1 = init;
    loop {
        if let Some(e) = m.try_at(s1, 0)? {
            if find {
                out.push(Value::Integer(s1 as i64 + 1));
                out.push(Value::Integer(e as i64));
                push_caps(lua, m.captures(s1, e, false)?, &mut out)?;
            } else {
                push_caps(lua, m.captures(s1, e, true)?, &mut out)?;
            }
            return Ok(MultiValue::from_iter(out));
        }
        if anchor || s1 >= ls {
            break;
        }
        s1 += 1;
    }
    Ok(MultiValue::from_iter([Value::Nil]))
}

/// `string.gsub`.
fn gsub(
    lua: &Lua,
    g: &Guard,
    s: LuaString,
    p: &LuaString,
    repl: &Value,
    max_n: Option<i64>,
) -> mlua::Result<(Value, i64)> {
    g.check()?;
    let repl_text = match repl {
        Value::String(r) => Some(r.clone()),
        Value::Integer(_) | Value::Number(_) => lua.coerce_string(repl.clone())?,
        Value::Function(_) | Value::Table(_) => None,
        other => {
            return Err(Error::runtime(format!(
                "bad argument #3 to 'gsub' (string/function/table expected, got {})",
                other.type_name()
            )));
        }
    };
    let src = s.as_bytes();
    let pat = p.as_bytes();
    let max_n = max_n.unwrap_or(src.len() as i64 + 1);
    let anchor = pat.first() == Some(&b'^');
    let body = if anchor { &pat[1..] } else { &pat[..] };
    let mut tick = || g.check();
    let mut m = Matcher::new(&src, body, &mut tick);
    let (mut pos, mut last, mut n, mut changed) = (0usize, None, 0i64, false);
    let mut out: Vec<u8> = Vec::new();
    while n < max_n {
        match m.try_at(pos, 0)? {
            Some(e) if Some(e) != last => {
                n += 1;
                changed |= add_value(lua, &m, pos, e, repl, repl_text.as_ref(), &mut out)?;
                pos = e;
                last = Some(e);
            }
            _ if pos < src.len() => {
                out.push(src[pos]);
                pos += 1;
            }
            _ => break,
        }
        g.reserve(out.len())?;
        if anchor {
            break;
        }
    }
    if !changed {
        drop(src);
        return Ok((Value::String(s), n));
    }
    out.extend_from_slice(&src[pos..]);
    g.reserve(out.len())?;
    Ok((Value::String(lua.create_string(&out)?), n))
}

/// Appends the replacement of the match `s..e`; whether it changed the text (nil or false keeps it).
fn add_value(
    lua: &Lua,
    m: &Matcher<'_, '_>,
    s: usize,
    e: usize,
    repl: &Value,
    text: Option<&LuaString>,
    out: &mut Vec<u8>,
) -> mlua::Result<bool> {
    if let Some(t) = text {
        m.expand(&t.as_bytes(), s, e, out)?;
        return Ok(true);
    }
    let mut args = Vec::new();
    let v: Value = match repl {
        Value::Function(f) => {
            push_caps(lua, m.captures(s, e, true)?, &mut args)?;
            f.call(MultiValue::from_iter(args))?
        }
        Value::Table(t) => {
            push_caps(lua, vec![m.capture(0, s, e)?], &mut args)?;
            t.get(args.pop().unwrap_or(Value::Nil))?
        }
        _ => Value::Nil,
    };
    match v {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(m.whole(s, e));
            Ok(false)
        }
        Value::String(r) => {
            out.extend_from_slice(&r.as_bytes());
            Ok(true)
        }
        Value::Integer(_) | Value::Number(_) => {
            if let Some(r) = lua.coerce_string(v)? {
                out.extend_from_slice(&r.as_bytes());
            }
            Ok(true)
        }
        other => Err(Error::runtime(format!(
            "invalid replacement value (a {})",
            other.type_name()
        ))),
    }
}

/// Installs the sandbox into a fresh state (before the memory limit and the hook).
fn install(lua: &Lua, guard: &Arc<Guard>, script: &str) -> mlua::Result<()> {
    let globals = lua.globals();
    for name in ["dofile", "loadfile", "load", "require", "collectgarbage"] {
        globals.raw_set(name, Value::Nil)?;
    }
    // print and warn: to the log, not to the server's stdout/stderr
    let who = script.to_string();
    globals.raw_set(
        "print",
        lua.create_function(move |_, args: MultiValue| {
            let line: Vec<String> = args
                .iter()
                .map(|v| v.to_string().unwrap_or_else(|_| v.type_name().to_string()))
                .collect();
            tracing::info!(script = %who, "lua print: {}", line.join("\t"));
            Ok(())
        })?,
    )?;
    let who = script.to_string();
    globals.raw_set(
        "warn",
        lua.create_function(move |_, args: MultiValue| {
            static LIMIT: LogLimit = LogLimit::per_site();
            if let Some(more) = LIMIT.line() {
                let text: Vec<String> = args.iter().filter_map(|v| v.to_string().ok()).collect();
                tracing::warn!(script = %who, "lua warn: {}{more}", text.concat());
            }
            Ok(())
        })?,
    )?;
    // os: only what reads the clock
    let os: Table = globals.get("os")?;
    let safe_os = lua.create_table()?;
    for name in ["time", "clock", "date", "difftime"] {
        safe_os.raw_set(name, os.get::<Value>(name)?)?;
    }
    globals.raw_set("os", safe_os)?;

    let string: Table = globals.get("string")?;
    string.raw_set("dump", Value::Nil)?;
    let g = guard.clone();
    string.raw_set(
        "find",
        lua.create_function(
            move |lua, (s, p, init, plain): (LuaString, LuaString, Option<i64>, Value)| {
                find_aux(lua, &g, &s, &p, init, truthy(&plain), true)
            },
        )?,
    )?;
    let g = guard.clone();
    string.raw_set(
        "match",
        lua.create_function(
            move |lua, (s, p, init): (LuaString, LuaString, Option<i64>)| {
                find_aux(lua, &g, &s, &p, init, false, false)
            },
        )?,
    )?;
    let g = guard.clone();
    string.raw_set(
        "gmatch",
        lua.create_function(
            move |lua, (s, p, init): (LuaString, LuaString, Option<i64>)| {
                g.check()?;
                let ls = s.as_bytes().len();
                let mut pos = (start_pos(init.unwrap_or(1), ls) - 1).min(ls + 1);
                let mut last: Option<usize> = None;
                let g = g.clone();
                lua.create_function_mut(move |lua, ()| {
                    g.check()?;
                    let src = s.as_bytes();
                    let pat = p.as_bytes();
                    let mut tick = || g.check();
                    let mut m = Matcher::new(&src, &pat, &mut tick);
                    while pos <= src.len() {
                        if let Some(e) = m.try_at(pos, 0)? {
                            if Some(e) != last {
                                let mut out = Vec::new();
                                push_caps(lua, m.captures(pos, e, true)?, &mut out)?;
                                pos = e;
                                last = Some(e);
                                return Ok(MultiValue::from_iter(out));
                            }
                        }
                        pos += 1;
                    }
                    Ok(MultiValue::new())
                })
            },
        )?,
    )?;
    let g = guard.clone();
    string.raw_set(
        "gsub",
        lua.create_function(
            move |lua, (s, p, repl, n): (LuaString, LuaString, Value, Option<i64>)| {
                gsub(lua, &g, s, &p, &repl, n)
            },
        )?,
    )?;
    let g = guard.clone();
    string.raw_set(
        "rep",
        lua.create_function(
            move |lua, (s, n, sep): (LuaString, i64, Option<LuaString>)| {
                g.check()?;
                let s = s.as_bytes();
                let sep = sep.as_ref().map(|x| x.as_bytes());
                let sep: &[u8] = sep.as_deref().unwrap_or(&[]);
                if n <= 0 || (s.is_empty() && sep.is_empty()) {
                    return lua.create_string("");
                }
                let total = (s.len() as u128) * (n as u128) + (sep.len() as u128) * (n as u128 - 1);
                g.reserve(total.min(usize::MAX as u128) as usize)?;
                let mut out = Vec::with_capacity(total as usize);
                for i in 0..n {
                    if i > 0 {
                        out.extend_from_slice(sep);
                    }
                    out.extend_from_slice(&s);
                }
                lua.create_string(&out)
            },
        )?,
    )?;

    let g = guard.clone();
    let stopped = lua.create_function(move |_, err: Value| {
        if g.tripped.load(Ordering::Relaxed) != FREE {
            return Ok(true);
        }
        let memory = match &err {
            Value::Error(e) => is_memory(e),
            Value::String(s) => s.as_bytes().as_ref() == b"not enough memory",
            _ => false,
        };
        if memory {
            g.tripped.store(MEMORY, Ordering::Relaxed);
        }
        Ok(memory)
    })?;
    let prelude = PRELUDE.replace("SORT_MAX", &SORT_MAX.to_string());
    let f: Function = lua
        .load(prelude)
        .set_name("=ordo-sandbox")
        .set_mode(ChunkMode::Text)
        .into_function()?;
    f.call::<()>(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serialises what an expression returns, or its error, the same way in both states.
    const HARNESS: &str = r##"
local select, type, tostring, format, concat = select, type, tostring, string.format, table.concat
local function ser(...)
  local t = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    t[i] = type(v) == "string" and format("%q", v) or tostring(v)
  end
  return concat(t, ",")
end
return function(f)
  local r = table.pack(pcall(f))
  if r[1] then return "ok:" .. ser(table.unpack(r, 2, r.n)) end
  return "err:" .. tostring(r[2])
end
"##;

    fn run(lua: &Lua, harness: &Function, code: &str) -> String {
        let f: Function = lua.load(code).set_name("case").into_function().expect(code);
        let out = harness.call::<LuaString>(f).expect(code);
        out.as_bytes().escape_ascii().to_string()
    }

    /// The part of an error message both implementations must share: without the `err:` tag, the chunk
    /// position and the `bad argument #n to 'f' (...)` wrapping.
    fn core(msg: &str) -> &str {
        let m = msg.trim_start_matches("err:");
        let m = match m
            .strip_prefix("[string \\\"case\\\"]:")
            .or_else(|| m.strip_prefix("[string \"case\"]:"))
        {
            Some(rest) => rest.split_once(": ").map_or(rest, |(_, r)| r),
            None => m,
        };
        let m = m.split("\\n").next().unwrap_or(m);
        match m.split_once("' (") {
            Some((_, inner)) if m.starts_with("bad argument") => inner.trim_end_matches(')'),
            _ => m,
        }
    }

    fn agree(want: &str, got: &str, code: &str) {
        if want.starts_with("err:") {
            assert!(
                got.starts_with("err:") && got.contains(core(want)),
                "{code}\n real: {want}\n ours: {got}"
            );
        } else {
            assert_eq!(got, want, "{code}");
        }
    }

    fn sandboxed() -> Script {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.lua");
        Script::load(&p, "", 16 << 20).unwrap()
    }

    /// The replaced functions give what Lua 5.4's own give, errors included, over a set of subjects,
    /// patterns and argument shapes.
    #[test]
    fn replacements_agree_with_lua() {
        let real = Lua::new();
        let real_h: Function = real.load(HARNESS).eval().unwrap();
        let ours = sandboxed();
        let ours_h: Function = ours.lua().load(HARNESS).eval().unwrap();
        let subjects = [
            "hello world",
            "",
            "aaa",
            "  key = value  ",
            "THE (quick) fox",
            "f(a(b)c)d",
            "abc123def",
            "x=1&y=2&z=",
            "a\0b\0c",
            "αβγ",
            "[]^$%.-",
            "\t\x0b\r\n end",
        ];
        let patterns = [
            "o",
            "l+",
            "l*",
            "l-",
            "l?",
            "^h",
            "d$",
            "^$",
            "(o)",
            "()",
            "(h)(e)",
            "%a+",
            "%d+",
            "%s*(%S+)%s*=%s*(%S+)",
            "%b()",
            "%f[%a]%a+",
            "(a)%1",
            "[%w_]+",
            "[^%s]+",
            ".-",
            "",
            "^",
            "$",
            "[]]",
            "[a-c]+",
            "[%a-]",
            "%",
            "[a",
            "(",
            ")",
            "%b",
            "%fa",
            "%1",
            "%g+",
            "%p",
            "%x+",
            "%u",
            "%l",
            "%c",
            "%z",
            "((a)(b))",
            "(()a)",
            "a-b",
            "[^]",
            "%s$",
            "^(%a+)",
            ".",
            "%.",
            "[%]]",
            "\0",
            "(.-)%s",
            "[α]",
            "%f[%z]",
            "%f[%w]%w+%f[%W]",
            "(%w+)=(%w*)",
        ];
        let mut cases = 0;
        for s in subjects {
            for p in patterns {
                let (s, p) = (format!("{s:?}"), format!("{p:?}"));
                for call in [
                    format!("return string.find({s}, {p})"),
                    format!("return string.find({s}, {p}, 3)"),
                    format!("return string.find({s}, {p}, -4)"),
                    format!("return string.find({s}, {p}, 100)"),
                    format!("return string.find({s}, {p}, 1, true)"),
                    format!("return ({s}):match({p})"),
                    format!("return string.match({s}, {p}, 2)"),
                    format!("return string.gsub({s}, {p}, '<%0>')"),
                    format!("return string.gsub({s}, {p}, '%1')"),
                    format!("return string.gsub({s}, {p}, '%2%%')"),
                    format!("return string.gsub({s}, {p}, '%')"),
                    format!("return string.gsub({s}, {p}, 7, 2)"),
                    format!("return string.gsub({s}, {p}, {{ a = 'A', hello = false, o = 1 }})"),
                    format!(
                        "return string.gsub({s}, {p}, function(...) return select('#', ...) .. '' end)"
                    ),
                    format!(
                        "return string.gsub({s}, {p}, function(x) if x == 'l' then return {{}} end end)"
                    ),
                    format!(
                        "local t = {{}} for a, b in string.gmatch({s}, {p}) do t[#t + 1] = tostring(a) .. '|' .. tostring(b) end return table.concat(t, ';')"
                    ),
                    format!(
                        "local t = {{}} for a in ({s}):gmatch({p}, 3) do t[#t + 1] = tostring(a) end return table.concat(t, ';')"
                    ),
                ] {
                    let want = run(&real, &real_h, &call);
                    let got = run(ours.lua(), &ours_h, &call);
                    agree(&want, &got, &call);
                    cases += 1;
                }
            }
        }
        assert!(cases > 10_000, "{cases}");
        for code in [
            "return string.rep('ab', 3), string.rep('ab', 3, ','), string.rep('x', 0), string.rep('x', -1), string.rep('', 5, '')",
            "local t = {1, 2, 3} table.insert(t, 9) table.insert(t, 1, 0) return table.concat(t, ',')",
            "local t = {1, 2, 3} table.insert(t, 4, 'e') return table.concat(t, ',')",
            "local t = {1, 2, 3} table.insert(t, 5, 'x')",
            "local t = {1, 2, 3} table.insert(t, 0, 'x')",
            "local t = {1, 2, 3} table.insert(t, 1.5, 'x')",
            "local t = {} table.insert(t, 1, 2, 3)",
            "local t = {1, 2, 3} return table.remove(t), table.remove(t, 1), table.concat(t, ',')",
            "local t = {} return table.remove(t), table.remove(t, 0), #t",
            "local t = {1, 2} return table.remove(t, 3), #t",
            "local t = {1, 2} table.remove(t, 5)",
            "local t = {1, 2, 3, 4, 5} table.move(t, 2, 4, 1) return table.concat(t, ',')",
            "local t = {1, 2, 3, 4, 5} table.move(t, 1, 3, 3) return table.concat(t, ',')",
            "local a, b = {1, 2, 3}, {} return table.concat(table.move(a, 1, 3, 2, b), ',', 2, 4)",
            "return table.move({}, 1, math.maxinteger, 2)",
            "return table.move({}, -1, math.maxinteger, 2)",
            "local t = {3, 1, 2} table.sort(t) return table.concat(t, ',')",
            "local t = {3, 1, 2} table.sort(t, function(a, b) return a > b end) return table.concat(t, ',')",
        ] {
            let want = run(&real, &real_h, code);
            let got = run(ours.lua(), &ours_h, code);
            agree(&want, &got, code);
        }
    }

    /// The pieces of Lua patterns: classes, sets, anchors, quantifiers, captures, back-references,
    /// `%b`, `%f` and malformed ones.
    const PATTERN: &[&str] = &[
        "a", "b", ".", "%a", "%d", "%s", "%w", "%p", "%x", "%z", "%.", "%%", "%b()", "%bab",
        "%f[%a]", "%f[^a]", "[a-c]", "[^a]", "[%]]", "[]", "(", ")", "()", "*", "+", "-", "?", "^",
        "$", "%1", "%2", "%", "[", "]", "\0", "%g",
    ];
    const SUBJECT: &[&str] = &[
        "a", "b", "(", ")", " ", "1", "x", ".", "%", "\0", "é", "]", "aa",
    ];

    thread_local! {
        /// Lua's own library and the sandbox, each with the harness loaded: made once per test thread.
        static PATTERN_STATES: (Lua, Function, Script, Function) = {
            let real = Lua::new();
            let real_h: Function = real.load(HARNESS).eval().unwrap();
            let ours = Script::load(Path::new("fuzz.lua"), "", 16 << 20).unwrap();
            let ours_h: Function = ours.lua().load(HARNESS).eval().unwrap();
            (real, real_h, ours, ours_h)
        };
    }

    proptest::proptest! {
        #![proptest_config(ordo_testkit::fuzz::config(0.5))]

        /// Fuzz target (docs/design.md, "Fuzzing"): the replaced pattern functions give what Lua 5.4's
        /// own give, errors included, for random patterns on random subjects through find, match, gmatch
        /// and gsub. (Subjects are short so Lua's own matcher, which cannot be stopped, stays fast.)
        #[test]
        fn fuzz_lua_patterns_agree_with_lua(
            pattern in ordo_testkit::fuzz::tokens(PATTERN, 8),
            subject in ordo_testkit::fuzz::tokens(SUBJECT, 10),
            init in -4i64..8,
        ) {
            let (p, s) = (String::from_utf8_lossy(&pattern), String::from_utf8_lossy(&subject));
            let (p, s) = (format!("{p:?}"), format!("{s:?}"));
            PATTERN_STATES.with(|(real, real_h, ours, ours_h)| {
                for call in [
                    format!("return string.find({s}, {p}, {init})"),
                    format!("return string.match({s}, {p})"),
                    format!("return string.gsub({s}, {p}, '<%0>')"),
                    format!("return string.gsub({s}, {p}, '%1')"),
                    format!(
                        "local t = {{}} for a, b in string.gmatch({s}, {p}) do t[#t + 1] = tostring(a) .. '|' .. tostring(b) end return table.concat(t, ';')"
                    ),
                ] {
                    let want = run(real, real_h, &call);
                    let got = run(ours.lua(), ours_h, &call);
                    agree(&want, &got, &call);
                }
            });
        }
    }
}

/// What a script can and cannot do, and that every way to run long or grow big is stopped.
#[cfg(test)]
mod limits {
    use super::*;

    fn script(code: &str) -> Script {
        let dir = tempfile::tempdir().unwrap();
        Script::load(&dir.path().join("s.lua"), code, 8 << 20).unwrap()
    }

    /// Runs `code` as one call with `limit`; what it returned (as a string) or why it failed, and how long
    /// it took.
    fn call(s: &Script, code: &str, limit: Duration) -> (Result<String, Failure>, Duration) {
        let f: Function = s.lua().load(code).into_function().unwrap();
        let t = Instant::now();
        let r = s.call(limit, |_| {
            f.call::<Value>(())
                .map(|v| v.to_string().unwrap_or_else(|_| v.type_name().to_string()))
        });
        (r, t.elapsed())
    }

    /// Issue 10 defect 8b: `os.exit()` killed the server; io, process and file access were all there.
    #[test]
    fn issue10_only_safe_libraries_are_there() {
        let s = script("");
        for name in [
            "io",
            "debug",
            "coroutine",
            "package",
            "require",
            "load",
            "loadfile",
            "dofile",
            "collectgarbage",
            "loadstring",
            "os.exit",
            "os.execute",
            "os.remove",
            "os.rename",
            "os.getenv",
            "os.tmpname",
            "os.setlocale",
            "string.dump",
        ] {
            let (r, _) = call(&s, &format!("return {name} == nil"), Duration::from_secs(1));
            assert_eq!(r, Ok("true".into()), "{name} is reachable");
        }
        for name in [
            "string.find",
            "string.format",
            "table.concat",
            "math.floor",
            "utf8.char",
            "os.time",
            "os.clock",
            "os.date",
            "os.difftime",
            "pcall",
            "xpcall",
            "setmetatable",
            "print",
            "tostring",
            "pairs",
            "select",
            "string.rep",
        ] {
            let (r, _) = call(&s, &format!("return type({name})"), Duration::from_secs(1));
            assert_eq!(r, Ok("function".into()), "{name} is missing");
        }
        let (r, _) = call(
            &s,
            "print('from a test', 1) warn('w') return 1",
            Duration::from_secs(1),
        );
        assert_eq!(r, Ok("1".into()));
        let (r, _) = call(&s, "return os.exit(3)", Duration::from_secs(1));
        assert!(
            matches!(&r, Err(Failure::Error(e)) if e.contains("exit")),
            "{r:?}"
        );
        let (r, _) = call(
            &s,
            "return setmetatable({}, { __gc = function() end })",
            Duration::from_secs(1),
        );
        assert!(
            matches!(&r, Err(Failure::Error(e)) if e.contains("__gc")),
            "{r:?}"
        );
    }

    fn assert_stopped_by(r: &Result<String, Failure>, took: Duration, want: Failure, code: &str) {
        assert_eq!(r.as_ref().err(), Some(&want), "{code}: {r:?}");
        assert!(
            took < Duration::from_secs(3),
            "{code}: stopped only after {took:?}"
        );
    }

    /// Issue 10 defect 8c: the instruction budget bounded neither time nor memory: one `string.find` on a
    /// long header took 10 s (C functions run no instructions), `string.rep` added 300 MB. Every way below
    /// is stopped within about the call's limit (200 ms here; the assertion allows 3 s for a loaded
    /// machine), and the state serves the next call.
    #[test]
    fn issue10_time_and_memory_are_bounded() {
        let s = script("");
        let limit = Duration::from_millis(200);
        for code in [
            "while true do end",
            // backtracking that would run for years
            "return string.find(string.rep('a', 40), string.rep('a*', 30) .. 'b')",
            "return ('x'):rep(30):match(('.-'):rep(25) .. 'y')",
            "return string.gsub(string.rep('a', 30), string.rep('a-', 25) .. 'b', '')",
            "for _ in string.gmatch(string.rep('a', 30), string.rep('a*', 25) .. 'b') do end",
            "return string.find(string.rep('a', 1e6), string.rep('a', 5e5) .. 'b', 1, true)",
            // catching the stop does not help
            "while true do pcall(function() while true do end end) end",
            "while true do xpcall(function() while true do end end, function(e) return e end) end",
            // C loops driven by a length or a count that needs no memory
            "local t = setmetatable({}, { __len = function() return math.maxinteger - 1 end }) table.insert(t, 1, 1)",
            "local t = setmetatable({}, { __len = function() return math.maxinteger - 1 end }) table.remove(t, 1)",
            "return table.move({}, 1, math.maxinteger - 1, 2)",
            "return #string.rep('', 1e15, '') .. #string.rep('x', 1e9, '') ",
        ] {
            let (r, took) = call(&s, code, limit);
            if code.contains("rep('x', 1e9") {
                assert_stopped_by(&r, took, Failure::Memory, code);
            } else {
                assert_stopped_by(&r, took, Failure::Time, code);
            }
            let (r, _) = call(&s, "return 1 + 1", limit);
            assert_eq!(r, Ok("2".into()), "after {code}");
        }
        for code in [
            "return #string.rep('x', 3e8)",
            "local t = {} for i = 1, 1e9 do t[i] = i end",
            "local s = 'x' while true do s = s .. s end",
            "return string.gsub(string.rep('x', 1e6), '.', string.rep('y', 100))",
            "while true do pcall(string.rep, 'x', 1e9) end",
            "local t = {} while true do local ok = pcall(function() t[#t + 1] = string.rep('x', 1e5) end) end",
        ] {
            // The wall-time limit is far away here: on a loaded machine the allocations can take longer than
            // a tight limit, and what is checked is that the memory limit stops them.
            let (r, took) = call(&s, code, Duration::from_secs(20));
            assert_eq!(
                r.as_ref().err(),
                Some(&Failure::Memory),
                "{code}: {r:?} after {took:?}"
            );
            let (r, _) = call(&s, "return #string.rep('x', 1e6)", limit);
            assert_eq!(r, Ok("1000000".into()), "the memory is back after {code}");
        }
        let (r, _) = call(
            &s,
            "local t = {} for i = 1, 200000 do t[i] = -i end table.sort(t)",
            limit,
        );
        assert!(
            matches!(&r, Err(Failure::Error(e)) if e.contains("table.sort")),
            "{r:?}"
        );
        // an ordinary script stays well within both
        let (r, _) = call(
            &s,
            "local n = 0 for w in ('a b c'):rep(1000):gmatch('%a') do n = n + 1 end return n",
            limit,
        );
        assert_eq!(r, Ok("3000".into()));
    }

    /// The script's top level is bounded too (at start-up and reload).
    #[test]
    fn loading_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.lua");
        let t = Instant::now();
        let e = Script::load(&p, "while true do end", 8 << 20)
            .err()
            .unwrap();
        assert!(e.contains("time limit while loading"), "{e}");
        assert!(t.elapsed() < LOAD_TIME_LIMIT + Duration::from_secs(3));
        let e = Script::load(&p, "x = string.rep('x', 1e9)", 8 << 20)
            .err()
            .unwrap();
        assert!(e.contains("memory limit while loading"), "{e}");
    }
}
