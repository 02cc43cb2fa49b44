//! wrk-compatible Lua scripts (`ordo bench -s script.lua [URL] -- args`), so wrk users keep their scripts:
//! the same `wrk` table (`scheme`, `host`, `port`, `method`, `path`, `headers`, `body`, `format`, `lookup`,
//! `connect`, `thread`) and the same hooks (`setup`, `init`, `delay`, `request`, `response`, `done`), in the
//! same order and with the same states as wrk: one main state for `setup` and `done`, and one state per
//! worker thread, shared by that thread's connections. A script without `request` sends one static request
//! per thread; a request string holding several requests is pipelined (as wrk counts them once, from the
//! first thread's first request); `response` is only called, and the response head and body only kept,
//! when the script defines it.
//!
//! Lua is 5.4 (vendored, through mlua), not wrk's LuaJIT (5.1): `unpack` and `loadstring` are aliased, but
//! 5.1-only features (`setfenv`, `bit`, `ffi`, `%d` of a non-integral number) are not there
//! (docs/bench.md, "Lua scripts").

mod thread;

use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use mlua::{Function, Lua, Table, Value};
use tokio::io::{AsyncRead, ReadBuf};

use crate::config::BenchConfig;
use crate::engine::{self, Conn, Ctx, Exchanged, Plan, Protocol, Slot};
use crate::error::BenchError;
use crate::http::{ReadError, ResponseInfo, read_response};
use crate::report::BenchReport;
use crate::stats::FailKind;

pub use crate::lua_source::Script;
pub(crate) use thread::{StatsObject, ThreadHandle, ThreadShared};

/// What every state's `wrk` table starts from.
struct Env {
    scheme: &'static str,
    host: String,
    port: Option<String>,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Bytes>,
}

impl Env {
    fn new(config: &BenchConfig) -> Env {
        let t = &config.target;
        let explicit_port = t.host_header() != t.host;
        Env {
            scheme: t.scheme(),
            host: t.host.trim_start_matches('[').trim_end_matches(']').into(),
            port: explicit_port.then(|| t.port.to_string()),
            method: config.method.clone(),
            path: t.path.clone(),
            headers: config
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
            body: config.body.clone(),
        }
    }
}

/// A fresh state with the `wrk` table and the script loaded (its top level run).
fn new_state(script: &Script, env: &Env, connect_timeout: Duration) -> mlua::Result<Lua> {
    let lua = Lua::new();
    let wrk: Table = lua
        .load(include_str!("prelude.lua"))
        .set_name("=wrk")
        .eval()?;
    wrk.set("scheme", env.scheme)?;
    wrk.set("host", env.host.as_str())?;
    wrk.set("port", env.port.as_deref())?;
    wrk.set("method", env.method.as_str())?;
    wrk.set("path", env.path.as_str())?;
    let headers = lua.create_table()?;
    for (k, v) in &env.headers {
        headers.set(k.as_str(), v.as_str())?;
    }
    wrk.set("headers", headers)?;
    if let Some(b) = &env.body {
        wrk.set("body", lua.create_string(b)?)?;
    }
    wrk.set(
        "lookup",
        lua.create_function(|lua, (host, service): (String, Option<String>)| {
            let port = match service.as_deref() {
                None | Some("http") => 80,
                Some("https") => 443,
                Some(s) => s.parse::<u16>().map_err(|_| {
                    mlua::Error::runtime(format!("wrk.lookup: unknown service `{s}`"))
                })?,
            };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let addrs = (host.as_str(), port).to_socket_addrs().map_err(|e| {
                mlua::Error::runtime(format!("unable to resolve {host}:{port}: {e}"))
            })?;
            let t = lua.create_table()?;
            for (i, a) in addrs.enumerate() {
                t.set(i + 1, a.to_string())?;
            }
            Ok(t)
        })?,
    )?;
    wrk.set(
        "connect",
        lua.create_function(move |_, addr: String| {
            Ok(addr
                .parse::<SocketAddr>()
                .is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, connect_timeout).is_ok()))
        })?,
    )?;
    lua.globals().set("wrk", wrk)?;
    lua.load(&*script.source)
        .set_name(script.chunk_name())
        .exec()?;
    Ok(lua)
}

/// One worker thread's state and the hooks it defines.
pub(crate) struct ThreadScript {
    /// Keeps the state alive while the hooks run (they hold it weakly otherwise).
    lua: Lua,
    request: Option<Function>,
    response: Option<Function>,
    delay: Option<Function>,
    /// No `request` hook: the request `wrk.init` built, sent every time.
    static_req: Option<Bytes>,
    shared: Arc<ThreadShared>,
}

fn hook(lua: &Lua, name: &str) -> mlua::Result<Option<Function>> {
    Ok(match lua.globals().get::<Value>(name)? {
        Value::Function(f) => Some(f),
        _ => None,
    })
}

/// A script's run: the main state (`setup`, `done`) and each worker thread's state; the engine's
/// protocol for a scripted run.
#[derive(Debug)]
pub(crate) struct LuaProtocol {
    script: Script,
    threads: Vec<ThreadScript>,
    /// Requests per request string (pipelining).
    depth: usize,
    /// The first error a hook raised during the run (it stops every thread).
    failed: Mutex<Option<String>>,
    any_failed: AtomicBool,
}

impl std::fmt::Debug for ThreadScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadScript")
            .field("static", &self.static_req.is_some())
            .finish_non_exhaustive()
    }
}

/// After a scripted run: the main state, for `done(summary, latency, requests)`.
pub struct ScriptDone {
    script: Script,
    main: Lua,
    protocol: Arc<LuaProtocol>,
    latency: Histogram<u64>,
}

impl std::fmt::Debug for ScriptDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptDone")
            .field("script", &self.script.path)
            .finish_non_exhaustive()
    }
}

/// Counts the requests in a request string (HTTP/1.1 heads, each with a Content-Length body or none);
/// an incomplete or malformed one is an error naming where.
pub(crate) fn count_requests(mut s: &[u8]) -> Result<usize, String> {
    let mut n = 0;
    while !s.is_empty() {
        let mut h = [httparse::EMPTY_HEADER; 100];
        let mut req = httparse::Request::new(&mut h);
        let len = match req.parse(s) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => {
                return Err(format!(
                    "incomplete request (request {} of the string)",
                    n + 1
                ));
            }
            Err(e) => return Err(format!("request {} of the string: {e}", n + 1)),
        };
        let mut body = 0usize;
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                body = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| format!("request {}: invalid Content-Length", n + 1))?;
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(format!(
                    "request {}: chunked request bodies are not supported; send a Content-Length",
                    n + 1
                ));
            }
        }
        if s.len() < len + body {
            return Err(format!(
                "request {}: body shorter than its Content-Length",
                n + 1
            ));
        }
        s = &s[len + body..];
        n += 1;
    }
    if n == 0 {
        return Err("empty request".into());
    }
    Ok(n)
}

/// Runs wrk's setup phase: the main state, then for each thread its state, `setup(thread)` in the main
/// state and `wrk.init(args)` in the thread's; then reads the first thread's request to count its
/// pipelined requests. `addr` is every thread's address until `setup` sets `thread.addr`.
pub(crate) fn start(
    script: &Script,
    config: &BenchConfig,
    addr: SocketAddr,
    threads: usize,
) -> Result<(Arc<LuaProtocol>, Lua), BenchError> {
    let env = Env::new(config);
    let err = |e: mlua::Error| script.error(e);
    let main = new_state(script, &env, config.connect_timeout).map_err(err)?;
    let setup = hook(&main, "setup").map_err(err)?;
    let mut states = Vec::with_capacity(threads);
    for index in 0..threads {
        let lua = new_state(script, &env, config.connect_timeout).map_err(err)?;
        let shared = Arc::new(ThreadShared::new(index, addr));
        let wrk: Table = lua.globals().get("wrk").map_err(err)?;
        wrk.set("thread", ThreadHandle::new(&lua, shared.clone()))
            .map_err(err)?;
        if let Some(f) = &setup {
            f.call::<()>(ThreadHandle::new(&lua, shared.clone()))
                .map_err(err)?;
        }
        let args = lua.create_table().map_err(err)?;
        args.raw_set(0, config.target.url.as_str()).map_err(err)?;
        for (i, a) in script.args.iter().enumerate() {
            args.raw_set(i + 1, a.as_str()).map_err(err)?;
        }
        let init: Function = wrk.get("init").map_err(err)?;
        init.call::<()>(args).map_err(err)?;
        states.push((lua, shared));
    }
    let mut depth = 1;
    let mut out = Vec::with_capacity(threads);
    for (i, (lua, shared)) in states.into_iter().enumerate() {
        let request = hook(&lua, "request").map_err(err)?;
        let call_request = |lua: &Lua| -> mlua::Result<Bytes> {
            let f = match &request {
                Some(f) => f.clone(),
                None => lua
                    .globals()
                    .get::<Table>("wrk")?
                    .get::<Function>("request")?,
            };
            let s: mlua::String = f.call(())?;
            Ok(Bytes::copy_from_slice(&s.as_bytes()))
        };
        if i == 0 {
            // as wrk: the first thread's request, read once, fixes the pipelining depth
            let req = call_request(&lua).map_err(err)?;
            depth = count_requests(&req).map_err(|m| {
                script.error(format!("request() did not return valid HTTP/1.1: {m}"))
            })?;
        }
        let static_req = match &request {
            Some(_) => None,
            None => Some(call_request(&lua).map_err(err)?),
        };
        out.push(ThreadScript {
            response: hook(&lua, "response").map_err(err)?,
            delay: hook(&lua, "delay").map_err(err)?,
            request,
            static_req,
            shared,
            lua,
        });
    }
    Ok((
        Arc::new(LuaProtocol {
            script: script.clone(),
            threads: out,
            depth,
            failed: Mutex::new(None),
            any_failed: AtomicBool::new(false),
        }),
        main,
    ))
}

impl LuaProtocol {
    /// A hook failed: remember the first error and stop every thread.
    fn fail(&self, e: mlua::Error) {
        let mut f = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(e.to_string());
        }
        self.any_failed.store(true, Ordering::Relaxed);
    }

    /// The run's end: the first hook error, if any, as the run's error; else what `done` needs.
    pub(crate) fn finish(
        self: Arc<Self>,
        main: Lua,
        latency: Histogram<u64>,
    ) -> Result<ScriptDone, BenchError> {
        let f = self.failed.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(m) = f {
            return Err(self.script.error(m));
        }
        Ok(ScriptDone {
            script: self.script.clone(),
            main,
            protocol: self,
            latency,
        })
    }
}

impl ScriptDone {
    /// Calls the script's `done(summary, latency, requests)` (if it has one) in the main state, where
    /// `thread:get` still reads each thread's globals. `latency` is per request in µs; `requests` is the
    /// run's per-second request rate (wrk samples each thread's every 100 ms).
    pub fn call(self, report: &BenchReport) -> Result<(), BenchError> {
        let err = |e: mlua::Error| self.script.error(e);
        let Some(done) = hook(&self.main, "done").map_err(err)? else {
            return Ok(());
        };
        let lua = &self.main;
        let s = &report.summary;
        let summary = lua.create_table().map_err(err)?;
        let errors = lua.create_table().map_err(err)?;
        let status: u64 = report
            .status_counts
            .iter()
            .filter(|c| c.status > 399)
            .map(|c| c.count)
            .sum();
        let fields: [(&str, u64); 5] = [
            ("connect", s.failed.connect),
            ("read", s.failed.receive + s.failed.length),
            ("write", s.failed.exceptions - s.failed.timeouts),
            ("status", status),
            ("timeout", s.failed.timeouts),
        ];
        for (k, v) in fields {
            errors.set(k, v).map_err(err)?;
        }
        summary
            .set("duration", (report.elapsed_s * 1e6).round() as u64)
            .map_err(err)?;
        summary.set("requests", s.complete).map_err(err)?;
        summary.set("bytes", s.total_bytes).map_err(err)?;
        summary.set("errors", errors).map_err(err)?;
        let mut rates = crate::stats::new_hist();
        let full = report.timeline.len().saturating_sub(1).max(1);
        for p in report.timeline.iter().take(full) {
            rates.saturating_record(p.complete);
        }
        done.call::<()>((
            summary,
            StatsObject::new(self.latency.clone()),
            StatsObject::new(rates),
        ))
        .map_err(err)?;
        drop(self.protocol);
        Ok(())
    }
}

/// Reads one response like [`read_response`], also keeping what was read (`rec`: the bytes carried in
/// from the previous response, then each read's), so the head and body can be handed to `response`.
struct Tee<'a, S> {
    inner: &'a mut S,
    rec: Vec<u8>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tee<'_, S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let r = Pin::new(&mut *this.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = r {
            this.rec.extend_from_slice(&buf.filled()[before..]);
        }
        r
    }
}

/// A response as `response(status, headers, body)` gets it.
pub(crate) struct FullResponse {
    pub status: u16,
    pub headers: Vec<(String, Bytes)>,
    pub body: Vec<u8>,
}

/// Splits what [`Tee`] recorded into the final response's headers and decoded body (interim 1xx heads
/// skipped; `info` says where the response ends).
pub(crate) fn split_response(
    rec: &mut [u8],
    info: &ResponseInfo,
    head_request: bool,
) -> Result<FullResponse, String> {
    let mut off = 0;
    loop {
        let mut h = [const { std::mem::MaybeUninit::uninit() }; 100];
        let (status, len, framing, headers) =
            match ordo_http1::parse_response(&mut rec[off..], &mut h, head_request) {
                Ok(Some(head)) => (
                    head.status,
                    head.len,
                    head.framing,
                    head.headers
                        .iter()
                        .map(|h| (h.name.to_string(), Bytes::copy_from_slice(h.value)))
                        .collect::<Vec<_>>(),
                ),
                Ok(None) => return Err("incomplete response head".into()),
                Err(e) => return Err(format!("bad response head: {e}")),
            };
        if (100..200).contains(&status) && status != 101 {
            off += len;
            continue;
        }
        let start = off + len;
        let end = (start as u64 + info.body_bytes).min(rec.len() as u64) as usize;
        let raw = &rec[start..end];
        let body = if framing == ordo_http1::ResponseFraming::Chunked {
            let mut out = Vec::with_capacity(info.content_bytes as usize);
            ordo_http1::ChunkedDecoder::new(u64::MAX)
                .feed(raw, |c| out.extend_from_slice(c))
                .map_err(|e| format!("bad chunked body: {e}"))?;
            out
        } else {
            raw.to_vec()
        };
        return Ok(FullResponse {
            status,
            headers,
            body,
        });
    }
}

impl Protocol for LuaProtocol {
    fn connection(
        self: Arc<Self>,
        ctx: Ctx,
        j: usize,
    ) -> Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move { client(&self, &ctx, j).await })
    }
}

/// One connection's reused buffers.
struct Connection {
    conn: Option<Conn>,
    buf: Vec<u8>,
    carry: usize,
    server: Option<String>,
}

/// One connection of a scripted run: wrk's request cycle (`delay`, `request`, send, each response with
/// `response`), paced and counted by the engine's client pieces.
async fn client(p: &LuaProtocol, ctx: &Ctx, j: usize) {
    let plan = &*ctx.plan;
    let t = &p.threads[ctx.thread()];
    let mut state = engine::ClientState::new(plan, j);
    let mut c = Connection {
        conn: None,
        buf: vec![0u8; 8 * 1024],
        carry: 0,
        server: None,
    };
    loop {
        if t.shared.stopped() || p.any_failed.load(Ordering::Relaxed) {
            break;
        }
        let Some(taken) = state.take(plan, Instant::now()) else {
            break;
        };
        if let Some(f) = &t.delay {
            match f.call::<Option<f64>>(()) {
                Ok(Some(ms)) if ms.is_finite() && ms > 0.0 => {
                    tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
                }
                Ok(_) => {}
                Err(e) => {
                    p.fail(e);
                    break;
                }
            }
        }
        if let Some(due) = taken.wait_until {
            tokio::time::sleep_until(due.into()).await;
        }
        let req = match (&t.static_req, &t.request) {
            (Some(b), _) => b.clone(),
            (None, Some(f)) => match f.call::<mlua::String>(()) {
                Ok(s) => Bytes::copy_from_slice(&s.as_bytes()),
                Err(e) => {
                    p.fail(e);
                    break;
                }
            },
            (None, None) => break,
        };
        let slot = taken.slot;
        for _ in 0..p.depth {
            engine::begin(plan, &slot);
        }
        let t_start = Instant::now();
        let mut opened = 0u64;
        let mut done: Vec<(Exchanged, Instant)> = Vec::with_capacity(p.depth);
        let res = tokio::time::timeout(
            plan.timeout,
            batch(p, t, plan, &mut c, &req, &mut opened, &mut done),
        )
        .await;
        let end = match res {
            Ok(Ok(())) => None,
            Ok(Err(kind)) => Some(kind),
            Err(_) => {
                c.conn = None;
                Some(FailKind::Timeout)
            }
        };
        record_batch(ctx, &slot, p.depth, done, end, opened, t_start, &c.server);
    }
}

/// Records a batch: each response read, then the rest (not answered) as `end`'s failure.
#[allow(clippy::too_many_arguments)]
fn record_batch(
    ctx: &Ctx,
    slot: &Slot,
    depth: usize,
    done: Vec<(Exchanged, Instant)>,
    end: Option<FailKind>,
    mut opened: u64,
    t_start: Instant,
    server: &Option<String>,
) {
    let n = done.len();
    for (x, t_done) in done {
        engine::record(
            ctx,
            slot,
            Ok(x),
            std::mem::take(&mut opened),
            (t_start, t_done),
            server.as_deref(),
        );
    }
    let now = Instant::now();
    for _ in n..depth {
        engine::record(
            ctx,
            slot,
            Err(end.unwrap_or(FailKind::Receive)),
            std::mem::take(&mut opened),
            (t_start, now),
            server.as_deref(),
        );
    }
}

/// Sends one request string and reads its `depth` responses (calling `response` for each when the script
/// has it), opening a connection first if there is none; a reused connection the server closed before
/// answering is retried once on a fresh one, as the engine's HTTP/1.1 client does.
async fn batch(
    p: &LuaProtocol,
    t: &ThreadScript,
    plan: &Plan,
    c: &mut Connection,
    req: &Bytes,
    opened: &mut u64,
    done: &mut Vec<(Exchanged, Instant)>,
) -> Result<(), FailKind> {
    let mut retried = false;
    'attempt: loop {
        let mut connected = None;
        let s = match &mut c.conn {
            Some(s) => s,
            None => {
                let t0 = Instant::now();
                let Some(s) = engine::open_to(plan, t.shared.addr(), plan.connect_timeout).await
                else {
                    return Err(FailKind::Connect);
                };
                *opened += 1;
                c.carry = 0;
                connected = Some((t0, Instant::now()));
                c.conn.insert(s)
            }
        };
        let reused = connected.is_none();
        if engine::send(s, req).await.is_err() {
            c.conn = None;
            if reused && !retried {
                retried = true;
                continue;
            }
            return Err(FailKind::Exception);
        }
        let sent = Instant::now();
        for i in 0..p.depth {
            let mut first_byte = None;
            let r = match &t.response {
                None => {
                    read_response(
                        s,
                        &mut c.buf,
                        &mut c.carry,
                        plan.head_request,
                        &mut first_byte,
                        &mut c.server,
                    )
                    .await
                }
                Some(f) => {
                    let mut tee = Tee {
                        rec: c.buf[..c.carry.min(c.buf.len())].to_vec(),
                        inner: s,
                    };
                    let r = read_response(
                        &mut tee,
                        &mut c.buf,
                        &mut c.carry,
                        plan.head_request,
                        &mut first_byte,
                        &mut c.server,
                    )
                    .await;
                    let mut rec = tee.rec;
                    match r {
                        Ok(info) => {
                            let full = split_response(&mut rec, &info, plan.head_request)
                                .map_err(|_| FailKind::Exception)?;
                            if let Err(e) = call_response(&t.lua, f, full) {
                                p.fail(e);
                            }
                            Ok(info)
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match r {
                Ok(info) => {
                    done.push((
                        Exchanged {
                            info,
                            connected: if i == 0 { connected } else { None },
                            sent,
                            first_byte,
                        },
                        Instant::now(),
                    ));
                    if info.close || !plan.keepalive {
                        c.conn = None;
                        if i + 1 < p.depth {
                            return Err(FailKind::Receive);
                        }
                        return Ok(());
                    }
                }
                Err(ReadError::Receive { received: 0, .. }) if i == 0 && reused && !retried => {
                    c.conn = None;
                    retried = true;
                    continue 'attempt;
                }
                Err(e) => {
                    c.conn = None;
                    return Err(match e {
                        ReadError::Receive { .. } => FailKind::Receive,
                        ReadError::Length { .. } => FailKind::Length,
                        ReadError::Malformed(_) => FailKind::Exception,
                    });
                }
            }
        }
        return Ok(());
    }
}

/// `response(status, headers, body)` in the thread's state.
fn call_response(lua: &Lua, f: &Function, r: FullResponse) -> mlua::Result<()> {
    let headers = lua.create_table()?;
    for (k, v) in &r.headers {
        headers.set(k.as_str(), lua.create_string(v)?)?;
    }
    f.call::<()>((r.status, headers, lua.create_string(&r.body)?))
}

#[cfg(test)]
mod tests;
