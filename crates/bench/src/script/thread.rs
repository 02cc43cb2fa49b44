//! The userdata wrk's scripts see: the `thread` object (`setup(thread)`, `wrk.thread`: `addr`, `get`,
//! `set`, `stop`), whose values cross between states by copy as wrk does, and the statistics objects
//! `done` receives (`min`, `max`, `mean`, `stdev`, `percentile(p)`, `stats(i)`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use hdrhistogram::Histogram;
use mlua::{Lua, MetaMethod, UserData, UserDataFields, UserDataMethods, Value, WeakLua};

/// What a worker thread and the scripts share about it.
#[derive(Debug)]
pub(crate) struct ThreadShared {
    index: usize,
    addr: Mutex<SocketAddr>,
    stop: AtomicBool,
}

impl ThreadShared {
    pub(crate) fn new(index: usize, addr: SocketAddr) -> ThreadShared {
        ThreadShared {
            index,
            addr: Mutex::new(addr),
            stop: AtomicBool::new(false),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        *self.addr.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A thread as a script sees it; it refers to the thread's state weakly (the run holds it).
pub(crate) struct ThreadHandle {
    lua: WeakLua,
    shared: Arc<ThreadShared>,
}

impl ThreadHandle {
    pub(crate) fn new(thread_state: &Lua, shared: Arc<ThreadShared>) -> ThreadHandle {
        ThreadHandle {
            lua: thread_state.weak(),
            shared,
        }
    }

    fn state(&self) -> mlua::Result<Lua> {
        self.lua
            .try_upgrade()
            .ok_or_else(|| mlua::Error::runtime("the thread's state is gone"))
    }
}

/// Deepest table nesting copied between states.
const MAX_DEPTH: usize = 32;

/// Copies `v` into state `to`: only nil, booleans, numbers, strings and tables of them cross, as in wrk.
pub(crate) fn copy_value(v: &Value, to: &Lua, depth: usize) -> mlua::Result<Value> {
    Ok(match v {
        Value::Nil => Value::Nil,
        Value::Boolean(b) => Value::Boolean(*b),
        Value::Integer(i) => Value::Integer(*i),
        Value::Number(n) => Value::Number(*n),
        Value::String(s) => Value::String(to.create_string(s.as_bytes())?),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(mlua::Error::runtime(format!(
                    "thread:get/set: tables nested deeper than {MAX_DEPTH} cannot be copied"
                )));
            }
            let out = to.create_table()?;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                out.raw_set(
                    copy_value(&k, to, depth + 1)?,
                    copy_value(&v, to, depth + 1)?,
                )?;
            }
            Value::Table(out)
        }
        other => {
            return Err(mlua::Error::runtime(format!(
                "thread:get/set: a {} cannot cross between threads (only nil, boolean, number, string \
                 and tables of them)",
                other.type_name()
            )));
        }
    })
}

impl UserData for ThreadHandle {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("addr", |_, this| Ok(this.shared.addr().to_string()));
        fields.add_field_method_set("addr", |_, this, v: Value| {
            let s = match &v {
                Value::String(s) => s.to_str()?.to_string(),
                other => {
                    return Err(mlua::Error::runtime(format!(
                        "thread.addr: expected an address string such as \"127.0.0.1:8080\", got a {}",
                        other.type_name()
                    )));
                }
            };
            let a: SocketAddr = s.parse().map_err(|_| {
                mlua::Error::runtime(format!(
                    "thread.addr: `{s}` is not an address (ip:port, as wrk.lookup returns)"
                ))
            })?;
            *this.shared.addr.lock().unwrap_or_else(|p| p.into_inner()) = a;
            Ok(())
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("get", |lua, this, name: String| {
            let t = this.state()?;
            let v: Value = t.globals().get(name.as_str())?;
            copy_value(&v, lua, 0)
        });
        methods.add_method("set", |_, this, (name, v): (String, Value)| {
            let t = this.state()?;
            let v = copy_value(&v, &t, 0)?;
            t.globals().set(name.as_str(), v)
        });
        methods.add_method("stop", |_, this, ()| {
            this.shared.stop.store(true, Ordering::Relaxed);
            Ok(())
        });
        methods.add_meta_method(MetaMethod::ToString, |_, this, ()| {
            Ok(format!("thread {}", this.shared.index))
        });
    }
}

/// A statistics object of `done`: a histogram in µs (latency) or of per-second request rates.
pub(crate) struct StatsObject {
    h: Histogram<u64>,
}

impl StatsObject {
    pub(crate) fn new(h: Histogram<u64>) -> StatsObject {
        StatsObject { h }
    }

    fn distinct(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
    }
}

impl UserData for StatsObject {
    fn add_fields<F: UserDataFields<Self>>(fields: &mut F) {
        fields.add_field_method_get("min", |_, this| {
            Ok(if this.h.is_empty() { 0 } else { this.h.min() })
        });
        fields.add_field_method_get("max", |_, this| {
            Ok(if this.h.is_empty() { 0 } else { this.h.max() })
        });
        fields.add_field_method_get("mean", |_, this| {
            Ok(if this.h.is_empty() {
                0.0
            } else {
                this.h.mean()
            })
        });
        fields.add_field_method_get("stdev", |_, this| {
            Ok(if this.h.is_empty() {
                0.0
            } else {
                this.h.stdev()
            })
        });
    }

    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("percentile", |_, this, p: f64| {
            if !(0.0..=100.0).contains(&p) {
                return Err(mlua::Error::runtime(format!(
                    "percentile: {p} is not between 0 and 100"
                )));
            }
            Ok(if this.h.is_empty() {
                0
            } else {
                this.h.value_at_percentile(p)
            })
        });
        // stats(i): the i-th distinct value recorded (1-based) and its count, as wrk's raw access
        methods.add_meta_method(MetaMethod::Call, |_, this, i: i64| {
            let found = usize::try_from(i - 1)
                .ok()
                .and_then(|i| this.distinct().nth(i));
            Ok(match found {
                Some((v, n)) => (Some(v), Some(n)),
                None => (None, None),
            })
        });
        methods.add_meta_method(MetaMethod::Len, |_, this, ()| Ok(this.distinct().count()));
    }
}
