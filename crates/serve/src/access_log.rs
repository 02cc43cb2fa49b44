//! The access log: one line per request, in the combined format (Apache/nginx, plus class, queue wait and
//! service time) or as JSON lines. The request path never touches the disk: it appends the line to a bounded
//! in-memory buffer; a writer thread empties the buffer every `flush_interval` (or sooner when it is half
//! full) and reopens the file when asked (SIGUSR1, for logrotate).
//!
//! When the buffer is full (the disk is slower than the requests), `overflow` decides: `"block"` (the
//! default) makes the serving thread wait until the writer has taken the buffer — no line is ever lost, and
//! a disk slower than the request rate slows the serving down to its pace, as nginx's synchronous log writes
//! do; `"drop"` never waits and drops the line instead, counted in `ordo_serve_access_log_dropped_lines` and
//! in a warning. The writer swaps the whole buffer out under the lock and writes outside it, so a wait
//! lasts at most one write of the previous buffer.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::http::{Request, Response};

/// `[access_log]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogConfig {
    /// The log file (appended to, created if missing). Left out: no access log.
    pub path: Option<PathBuf>,
    pub format: LogFormat,
    /// Bytes of log lines held in memory at most (twice this while the writer writes one buffer out).
    pub buffer_bytes: usize,
    /// How often the buffer is written out.
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub flush_interval: Duration,
    /// What a full buffer does: `"block"` (wait for the writer, lose nothing) or `"drop"` (drop the line).
    pub overflow: Overflow,
}

/// `access_log.overflow`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Overflow {
    /// The serving thread waits until the writer has room: no line is lost.
    #[default]
    Block,
    /// The line is dropped (and counted): the serving thread never waits for the disk.
    Drop,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            path: None,
            format: LogFormat::Combined,
            buffer_bytes: 1024 * 1024,
            flush_interval: Duration::from_secs(1),
            overflow: Overflow::Block,
        }
    }
}

/// The line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `host - - [time] "request" status bytes "referer" "user-agent" class=.. queue_wait_us=.. service_us=.. request_us=..`
    #[default]
    Combined,
    /// One JSON object per line.
    Json,
}

/// What the request path learnt about a request that only it knows (filled in by `Shared::serve`).
#[derive(Debug, Default)]
pub(crate) struct Served {
    pub class: Option<Arc<str>>,
    pub queue_wait: Option<Duration>,
    pub service: Option<Duration>,
}

/// The parts of a request a log line needs, kept before the request is handed to the backend.
#[derive(Debug)]
pub(crate) struct RequestLine {
    peer: SocketAddr,
    method: String,
    target: String,
    version: &'static str,
    referer: Option<String>,
    user_agent: Option<String>,
    request_id: Option<Box<str>>,
    time: SystemTime,
}

impl RequestLine {
    pub(crate) fn of(req: &Request) -> Self {
        RequestLine {
            peer: req.peer,
            method: req.method.to_string(),
            target: req.target().to_string(),
            version: req.version.as_str(),
            referer: req.header("referer").map(str::to_string),
            user_agent: req.header("user-agent").map(str::to_string),
            request_id: req.request_id.clone(),
            time: SystemTime::now(),
        }
    }
}

struct State {
    buf: Vec<u8>,
    dropped: u64,
    reopen: bool,
    stop: bool,
}

struct Inner {
    state: Mutex<State>,
    /// Wakes the writer.
    wake: Condvar,
    /// Wakes request threads waiting for room (`Overflow::Block`).
    room: Condvar,
    cap: usize,
    format: LogFormat,
    overflow: Overflow,
    dropped: prometheus_client::metrics::counter::Counter,
}

/// A running access log (its writer thread stops, after a last flush, when this is dropped).
pub struct AccessLog {
    inner: Arc<Inner>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccessLog")
    }
}

fn open(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

impl AccessLog {
    /// Opens the file (an error names it) and starts the writer thread; `dropped` counts lines dropped.
    pub fn start(
        cfg: &AccessLogConfig,
        path: &Path,
        dropped: prometheus_client::metrics::counter::Counter,
    ) -> Result<AccessLog, String> {
        let file = open(path).map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
        Self::start_sink(cfg, Box::new(file), Some(path.to_path_buf()), dropped)
    }

    /// [`AccessLog::start`] writing to any sink (`path`: where to reopen it, if it can be).
    fn start_sink(
        cfg: &AccessLogConfig,
        sink: Box<dyn Write + Send>,
        path: Option<PathBuf>,
        dropped: prometheus_client::metrics::counter::Counter,
    ) -> Result<AccessLog, String> {
        let cap = cfg.buffer_bytes.max(4096);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                buf: Vec::with_capacity(cap),
                dropped: 0,
                reopen: false,
                stop: false,
            }),
            wake: Condvar::new(),
            room: Condvar::new(),
            cap,
            format: cfg.format,
            overflow: cfg.overflow,
            dropped,
        });
        let w = inner.clone();
        let every = cfg.flush_interval.max(Duration::from_millis(10));
        let writer = std::thread::Builder::new()
            .name("ordo-access-log".into())
            .spawn(move || write_loop(&w, sink, path.as_deref(), every))
            .map_err(|e| format!("cannot start the access-log writer: {e}"))?;
        Ok(AccessLog {
            inner,
            writer: Some(writer),
        })
    }

    /// Reopen the file at its path (after logrotate moved it away).
    pub fn reopen(&self) {
        self.inner.lock().reopen = true;
        self.inner.wake.notify_one();
    }

    /// Appends one request's line; when the buffer is full, waits for the writer (`Overflow::Block`) or
    /// drops the line (counted, `Overflow::Drop`).
    pub(crate) fn log(
        &self,
        line: &RequestLine,
        resp: &Response,
        served: &Served,
        total: Duration,
    ) {
        LINE.with(|l| {
            let mut l = l.borrow_mut();
            l.clear();
            match self.inner.format {
                LogFormat::Combined => combined(&mut l, line, resp, served, total),
                LogFormat::Json => json(&mut l, line, resp, served, total),
            }
            let mut st = self.inner.lock();
            // (a line longer than the whole buffer goes into an empty one)
            while st.buf.len() + l.len() > self.inner.cap && !st.buf.is_empty() && !st.stop {
                match self.inner.overflow {
                    Overflow::Drop => {
                        st.dropped += 1;
                        self.inner.dropped.inc();
                        return;
                    }
                    Overflow::Block => {
                        self.inner.wake.notify_one();
                        st = self.inner.room.wait(st).unwrap_or_else(|p| p.into_inner());
                    }
                }
            }
            st.buf.extend_from_slice(&l);
            if st.buf.len() >= self.inner.cap / 2 {
                self.inner.wake.notify_one();
            }
        });
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.wake.notify_one();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

thread_local! {
    static LINE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(512));
}

fn write_loop(
    inner: &Inner,
    mut file: Box<dyn Write + Send>,
    path: Option<&Path>,
    every: Duration,
) {
    let mut out: Vec<u8> = Vec::with_capacity(inner.cap);
    let mut failing = false;
    loop {
        let (reopen, stop, dropped) = {
            let mut st = inner.lock();
            if !(st.stop || st.reopen || st.buf.len() >= inner.cap / 2) {
                st = inner
                    .wake
                    .wait_timeout(st, every)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            std::mem::swap(&mut st.buf, &mut out);
            inner.room.notify_all();
            let r = (st.reopen, st.stop, st.dropped);
            st.reopen = false;
            st.dropped = 0;
            r
        };
        if dropped > 0 {
            tracing::warn!(
                lines = dropped,
                "access log: buffer full, lines dropped (overflow = \"drop\"; raise access_log.buffer_bytes, or \
                 overflow = \"block\" to wait instead)"
            );
        }
        if !out.is_empty() {
            match file.write_all(&out) {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    let path = path.map(|p| p.display().to_string()).unwrap_or_default();
                    tracing::error!(path = %path, error = %e, "access log: write failed; lines lost");
                }
                Err(_) => {}
            }
            out.clear();
        }
        if let (true, Some(path)) = (reopen, path) {
            match open(path) {
                Ok(f) => {
                    file = Box::new(f);
                    tracing::info!(path = %path.display(), "access log reopened");
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "access log: cannot reopen; writing on to the old file")
                }
            }
        }
        if stop {
            let _ = file.flush();
            inner.room.notify_all();
            return;
        }
    }
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

struct Utc {
    y: i64,
    mo: u32,
    d: u32,
    h: u64,
    mi: u64,
    s: u64,
    ms: u32,
}

fn utc(t: SystemTime) -> Utc {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, mo, day) = civil((secs / 86_400) as i64);
    let sod = secs % 86_400;
    Utc {
        y,
        mo,
        d: day,
        h: sod / 3600,
        mi: sod / 60 % 60,
        s: sod % 60,
        ms: d.subsec_millis(),
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A field of the combined format: `"` and `\` and bytes outside printable ASCII as `\xHH` (as nginx does).
fn escaped(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b);
        }
    }
}

fn micros(d: Option<Duration>) -> Option<u128> {
    d.map(|d| d.as_micros())
}

fn combined(out: &mut Vec<u8>, l: &RequestLine, resp: &Response, s: &Served, total: Duration) {
    let t = utc(l.time);
    let _ = write!(
        out,
        "{} - - [{:02}/{}/{}:{:02}:{:02}:{:02} +0000] \"",
        l.peer.ip(),
        t.d,
        MONTHS[(t.mo - 1) as usize],
        t.y,
        t.h,
        t.mi,
        t.s
    );
    escaped(out, &l.method);
    out.push(b' ');
    escaped(out, &l.target);
    let _ = write!(out, " {}\" {} ", l.version, resp.status);
    match resp.body.len() {
        Some(n) => {
            let _ = write!(out, "{n}");
        }
        None => out.push(b'-'),
    }
    for v in [&l.referer, &l.user_agent] {
        out.extend_from_slice(b" \"");
        match v {
            Some(v) => escaped(out, v),
            None => out.push(b'-'),
        }
        out.push(b'"');
    }
    out.extend_from_slice(b" class=");
    escaped(out, s.class.as_deref().unwrap_or("-"));
    for (k, v) in [
        ("queue_wait_us", micros(s.queue_wait)),
        ("service_us", micros(s.service)),
    ] {
        let _ = match v {
            Some(v) => write!(out, " {k}={v}"),
            None => write!(out, " {k}=-"),
        };
    }
    let _ = write!(out, " request_us={}", total.as_micros());
    if let Some(id) = &l.request_id {
        out.extend_from_slice(b" request_id=");
        escaped(out, id);
    }
    out.push(b'\n');
}

fn json_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

fn json(out: &mut Vec<u8>, l: &RequestLine, resp: &Response, s: &Served, total: Duration) {
    let t = utc(l.time);
    let _ = write!(
        out,
        "{{\"time\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"remote\":\"{}\",\"method\":",
        t.y,
        t.mo,
        t.d,
        t.h,
        t.mi,
        t.s,
        t.ms,
        l.peer.ip()
    );
    json_str(out, &l.method);
    out.extend_from_slice(b",\"target\":");
    json_str(out, &l.target);
    let _ = write!(
        out,
        ",\"version\":\"{}\",\"status\":{},\"bytes\":",
        l.version, resp.status
    );
    let _ = match resp.body.len() {
        Some(n) => write!(out, "{n}"),
        None => write!(out, "null"),
    };
    for (k, v) in [("referer", &l.referer), ("user_agent", &l.user_agent)] {
        let _ = write!(out, ",\"{k}\":");
        match v {
            Some(v) => json_str(out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b",\"class\":");
    match &s.class {
        Some(c) => json_str(out, c),
        None => out.extend_from_slice(b"null"),
    }
    for (k, v) in [
        ("queue_wait_us", micros(s.queue_wait)),
        ("service_us", micros(s.service)),
    ] {
        let _ = match v {
            Some(v) => write!(out, ",\"{k}\":{v}"),
            None => write!(out, ",\"{k}\":null"),
        };
    }
    let _ = write!(out, ",\"request_us\":{}", total.as_micros());
    if let Some(id) = &l.request_id {
        out.extend_from_slice(b",\"request_id\":");
        json_str(out, id);
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (RequestLine, Response, Served) {
        let mut req = Request::get("/a?b=\"c\"");
        req.headers.push("user-agent", "curl/8");
        let mut line = RequestLine::of(&req);
        // 2024-02-29 13:05:09.250 UTC
        line.time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_709_211_909_250);
        let resp = Response::text(200, "hello");
        let served = Served {
            class: Some(Arc::from("api")),
            queue_wait: Some(Duration::from_micros(12)),
            service: Some(Duration::from_micros(345)),
        };
        (line, resp, served)
    }

    #[test]
    fn combined_line() {
        let (l, r, s) = sample();
        let mut out = Vec::new();
        combined(&mut out, &l, &r, &s, Duration::from_micros(400));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "127.0.0.1 - - [29/Feb/2024:13:05:09 +0000] \"GET /a?b=\\x22c\\x22 HTTP/1.1\" 200 6 \"-\" \
             \"curl/8\" class=api queue_wait_us=12 service_us=345 request_us=400\n"
        );
        // a request answered before scheduling (404, 503): no class, wait or service
        let mut out = Vec::new();
        combined(&mut out, &l, &r, &Served::default(), Duration::ZERO);
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.ends_with("class=- queue_wait_us=- service_us=- request_us=0\n"),
            "{s}"
        );
    }

    #[test]
    fn json_line() {
        let (l, r, s) = sample();
        let mut out = Vec::new();
        json(&mut out, &l, &r, &s, Duration::from_micros(400));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["time"], "2024-02-29T13:05:09.250Z");
        assert_eq!(v["target"], "/a?b=\"c\"");
        assert_eq!(v["status"], 200);
        assert_eq!(v["bytes"], 6);
        assert_eq!(v["referer"], serde_json::Value::Null);
        assert_eq!(v["class"], "api");
        assert_eq!(v["queue_wait_us"], 12);
        assert_eq!(v["service_us"], 345);
        assert_eq!(v["request_us"], 400);
        assert!(out.ends_with(b"}\n"));
        assert_eq!(v["request_id"], serde_json::Value::Null);
    }

    #[test]
    fn the_request_id_is_logged() {
        let (mut l, r, s) = sample();
        l.request_id = Some("abc\"1".into());
        let mut out = Vec::new();
        combined(&mut out, &l, &r, &s, Duration::from_micros(400));
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.ends_with(" request_us=400 request_id=abc\\x221\n"),
            "{line}"
        );
        let mut out = Vec::new();
        json(&mut out, &l, &r, &s, Duration::from_micros(400));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["request_id"], "abc\"1");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(civil(-1), (1969, 12, 31));
    }

    #[test]
    fn writes_flushes_drops_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let cfg = AccessLogConfig {
            path: Some(path.clone()),
            format: LogFormat::Combined,
            buffer_bytes: 4096,
            flush_interval: Duration::from_millis(20),
            overflow: Overflow::Drop,
        };
        let dropped = prometheus_client::metrics::counter::Counter::default();
        let log = AccessLog::start(&cfg, &path, dropped.clone()).unwrap();
        let (l, r, s) = sample();
        log.log(&l, &r, &s, Duration::ZERO);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&path).unwrap().lines().count() < 1 {
            assert!(std::time::Instant::now() < deadline, "not flushed");
            std::thread::sleep(Duration::from_millis(5));
        }
        // logrotate: move the file away, then SIGUSR1 → reopen; new lines go to a new file at the path
        let rotated = dir.path().join("access.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        log.reopen();
        while !path.exists() {
            assert!(std::time::Instant::now() < deadline, "not reopened");
            std::thread::sleep(Duration::from_millis(5));
        }
        log.log(&l, &r, &s, Duration::ZERO);
        // far more than the buffer holds at once, faster than it is flushed: some are dropped, none block
        for _ in 0..10_000 {
            log.log(&l, &r, &s, Duration::ZERO);
        }
        drop(log); // the last flush
        let old = std::fs::read_to_string(&rotated).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert_eq!(old.lines().count(), 1);
        let n = new.lines().count();
        assert!((1..10_001).contains(&n), "{n} lines");
        assert_eq!(
            n as u64 + dropped.get(),
            10_001,
            "every line written or counted"
        );
        assert!(new.lines().all(|l| l.ends_with("request_us=0")));
    }

    /// A sink that takes 1 ms per write and keeps what it was given.
    struct Slow(Arc<Mutex<Vec<u8>>>);
    impl Write for Slow {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(1));
            let n = b.len().min(8192);
            self.0.lock().unwrap().extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Four threads log 20 000 lines as fast as they can into a 4 KiB buffer in front of a sink that
    /// takes 1 ms per 8 KiB: by default every line arrives; with `overflow = "drop"` lines are lost and
    /// each one is counted.
    #[test]
    fn a_slow_sink_loses_nothing_by_default() {
        for overflow in [Overflow::Block, Overflow::Drop] {
            let got = Arc::new(Mutex::new(Vec::new()));
            let cfg = AccessLogConfig {
                buffer_bytes: 4096,
                overflow,
                ..AccessLogConfig::default()
            };
            let dropped = prometheus_client::metrics::counter::Counter::default();
            let log = Arc::new(
                AccessLog::start_sink(&cfg, Box::new(Slow(got.clone())), None, dropped.clone())
                    .unwrap(),
            );
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let log = log.clone();
                    std::thread::spawn(move || {
                        let (l, r, s) = sample();
                        for _ in 0..5000 {
                            log.log(&l, &r, &s, Duration::ZERO);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            drop(Arc::into_inner(log).expect("the only handle")); // the last flush
            let lines = got
                .lock()
                .unwrap()
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count() as u64;
            println!(
                "{overflow:?}: {lines} lines written, {} dropped",
                dropped.get()
            );
            match overflow {
                Overflow::Block => assert_eq!((lines, dropped.get()), (20_000, 0)),
                Overflow::Drop => {
                    assert!(dropped.get() > 0, "a 4 KiB buffer before a slow sink drops");
                    assert_eq!(lines + dropped.get(), 20_000);
                }
            }
        }
    }
}
