//! The static backend: files under one root directory with correct validators and ranges, small files kept
//! in memory with their headers rendered once, large files streamed.
//!
//! - Content-Type from the extension ([`super::mime`]), Content-Length, Last-Modified and a strong ETag
//!   (`"<mtime secs>.<mtime nanos>-<size>"` in hex); `If-None-Match` (takes precedence) or
//!   `If-Modified-Since` → 304; one `Range: bytes=` range → 206, an unsatisfiable one → 416 with
//!   `Content-Range: bytes */<size>`, several ranges or a malformed header → the whole file (200); `If-Range`
//!   that does not match → the whole file.
//! - A directory is served through its index file (default `index.html`); asked without its trailing slash it
//!   is redirected (301) to it; without an index it is 404 (no listings).
//! - Refused: a path with a `..`, `.` or NUL segment that reaches the backend → 403 (the HTTP layer already
//!   answers 400 to a `..`, plain or percent-encoded, that would climb above `/`); a path that resolves — through
//!   symlinks — outside the root → 403; anything that is not a regular file (devices, FIFOs, sockets) → 403;
//!   a missing file → 404.
//! - Files up to `cache_max_file_bytes` (default 1 MiB) and `sendfile_min_bytes` (default 64 KiB) are cached,
//!   within `cache_max_total_bytes` (default 64 MiB) overall; a cached file is checked against the disk (path,
//!   size, mtime) at most once a second. Larger files are never loaded whole: their metadata is cached (and
//!   checked the same way), the file is opened per request and sent by the HTTP layer — with sendfile(2) on a
//!   plain TCP connection, in chunks through TLS.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Deserialize;

use super::BackendError;
use super::mime::content_type;
use crate::http::{Body, Request, Response};

/// How long a cached entry is trusted before its file is checked again.
const REVALIDATE_MS: u64 = 1000;
/// Most entries kept in the cache.
const MAX_ENTRIES: usize = 100_000;

fn default_cache_max_file_bytes() -> u64 {
    1024 * 1024
}
fn default_cache_max_total_bytes() -> u64 {
    64 * 1024 * 1024
}
fn default_sendfile_min_bytes() -> u64 {
    64 * 1024
}
fn default_index() -> Option<String> {
    Some("index.html".to_string())
}

/// `[routes.static]`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StaticConfig {
    /// The directory served (relative paths are resolved against the config file's directory by the caller).
    pub root: PathBuf,
    /// Files up to this size are cached in memory.
    #[serde(default = "default_cache_max_file_bytes")]
    pub cache_max_file_bytes: u64,
    /// Total bytes of cached file bodies at most.
    #[serde(default = "default_cache_max_total_bytes")]
    pub cache_max_total_bytes: u64,
    /// Files larger than this are sent from the file (sendfile(2) on plain TCP) instead of kept in memory.
    #[serde(default = "default_sendfile_min_bytes")]
    pub sendfile_min_bytes: u64,
    /// File served for a directory; `""` for none.
    #[serde(default = "default_index")]
    pub index: Option<String>,
}

impl StaticConfig {
    /// A config for `root` with every other field at its default.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StaticConfig {
            root: root.into(),
            cache_max_file_bytes: default_cache_max_file_bytes(),
            cache_max_total_bytes: default_cache_max_total_bytes(),
            sendfile_min_bytes: default_sendfile_min_bytes(),
            index: default_index(),
        }
    }
}

/// One file as served: its validators, its pre-rendered header lines, and its bytes when cached.
#[derive(Debug)]
struct Entry {
    file: PathBuf,
    len: u64,
    mtime: SystemTime,
    etag: String,
    last_modified: String,
    content_type: &'static str,
    head: Bytes,
    data: Option<Bytes>,
    checked_ms: AtomicU64,
}

impl Entry {
    /// Bytes of file contents the entry holds in memory.
    fn cached_len(&self) -> u64 {
        self.data.as_ref().map_or(0, |d| d.len() as u64)
    }
}

/// See the module documentation.
pub struct StaticBackend {
    root: PathBuf,
    prefix: String,
    cfg: StaticConfig,
    cache: RwLock<HashMap<String, Arc<Entry>>>,
    cached_bytes: AtomicU64,
    epoch: std::time::Instant,
}

impl std::fmt::Debug for StaticBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticBackend")
            .field("root", &self.root)
            .field("prefix", &self.prefix)
            .field("cached_bytes", &self.cached_bytes.load(Ordering::Relaxed))
            .finish()
    }
}

enum Range {
    Whole,
    Part(u64, u64),
    Unsatisfiable,
}

impl StaticBackend {
    /// Serves `cfg.root`; `strip_prefix` (e.g. "/static") is removed from request paths first (paths outside
    /// it are 404); `""` or `"/"` strips nothing.
    pub fn new(cfg: &StaticConfig, strip_prefix: &str) -> Result<Self, BackendError> {
        let root = std::fs::canonicalize(&cfg.root).map_err(|source| BackendError::Root {
            path: cfg.root.clone(),
            source,
        })?;
        if !root.is_dir() {
            return Err(BackendError::NotADirectory(cfg.root.clone()));
        }
        if let Some(ix) = cfg.index.as_deref() {
            if ix.contains('/') || ix == ".." || ix == "." {
                return Err(BackendError::Invalid {
                    field: "index",
                    msg: format!("{ix:?} must be a plain file name"),
                });
            }
        }
        Ok(StaticBackend {
            root,
            prefix: strip_prefix.trim_end_matches('/').to_string(),
            cfg: cfg.clone(),
            cache: RwLock::new(HashMap::new()),
            cached_bytes: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The path below the root ("" for the root itself), or `None` when the request is outside the prefix.
    fn relative<'a>(&self, path: &'a str) -> Option<&'a str> {
        let rest = if self.prefix.is_empty() {
            path
        } else {
            let r = path.strip_prefix(self.prefix.as_str())?;
            if !(r.is_empty() || r.starts_with('/')) {
                return None;
            }
            r
        };
        Some(rest.trim_start_matches('/'))
    }

    pub async fn call(&self, req: &Request) -> Response {
        let get = req.method == "GET";
        if !get && req.method != "HEAD" {
            return Response::text(405, "method not allowed").with_header("Allow", "GET, HEAD");
        }
        let (entry, file) = match self.lookup_open(&req.path) {
            Ok(x) => x,
            Err(resp) => return resp,
        };
        if not_modified(req, &entry) {
            return Response::new(304)
                .with_header("ETag", entry.etag.clone())
                .with_header("Last-Modified", entry.last_modified.clone());
        }
        let range = match req.header("range") {
            Some(r) if get && if_range_ok(req, &entry) => parse_range(r, entry.len),
            _ => Range::Whole,
        };
        let (status, start, len) = match range {
            Range::Whole => (200, 0, entry.len),
            Range::Part(a, b) => (206, a, b - a + 1),
            Range::Unsatisfiable => {
                return Response::text(416, "range not satisfiable")
                    .with_header("Content-Range", format!("bytes */{}", entry.len));
            }
        };
        let mut resp = match &entry.data {
            Some(data) => Response {
                status,
                headers: Vec::new(),
                body: Body::Prerendered {
                    head: entry.head.clone(),
                    body: if status == 200 {
                        data.clone()
                    } else {
                        data.slice(start as usize..(start + len) as usize)
                    },
                },
            },
            None => match file {
                Some(file) => Response {
                    status,
                    headers: vec![
                        ("Content-Type".to_string(), entry.content_type.to_string()),
                        ("ETag".to_string(), entry.etag.clone()),
                        ("Last-Modified".to_string(), entry.last_modified.clone()),
                        ("Accept-Ranges".to_string(), "bytes".to_string()),
                    ],
                    body: Body::File {
                        file,
                        offset: start,
                        len,
                    },
                },
                None => return Response::text(404, "not found"),
            },
        };
        if status == 206 {
            resp.headers.push((
                "Content-Range".to_string(),
                format!("bytes {}-{}/{}", start, start + len - 1, entry.len),
            ));
        }
        resp
    }

    /// The size in bytes of the file the request would get.
    pub fn size_hint(&self, req: &Request) -> Option<u64> {
        self.lookup(&req.path).ok().map(|e| e.len)
    }

    /// The entry for a request path: from the cache while fresh, else resolved (and cached when small).
    fn lookup(&self, path: &str) -> Result<Arc<Entry>, Response> {
        let Some(rel) = self.relative(path) else {
            return Err(Response::text(404, "not found"));
        };
        let now = self.now_ms();
        let cached = self.read_cache().get(rel).cloned();
        if let Some(e) = cached {
            if now.saturating_sub(e.checked_ms.load(Ordering::Relaxed)) < REVALIDATE_MS {
                return Ok(e);
            }
            if let Ok((file, meta)) = self.resolve(rel, path) {
                if file == e.file && meta.len() == e.len && meta.modified().ok() == Some(e.mtime) {
                    e.checked_ms.store(now, Ordering::Relaxed);
                    return Ok(e);
                }
            }
            self.evict(rel);
        }
        let (file, meta) = self.resolve(rel, path)?;
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let mut len = meta.len();
        let data = if len
            <= self
                .cfg
                .cache_max_file_bytes
                .min(self.cfg.sendfile_min_bytes)
        {
            match std::fs::read(&file) {
                Ok(d) => {
                    len = d.len() as u64;
                    Some(Bytes::from(d))
                }
                Err(_) => return Err(Response::text(404, "not found")),
            }
        } else {
            None
        };
        let entry = Arc::new(make_entry(file, len, mtime, data, now));
        self.insert(rel, entry.clone());
        Ok(entry)
    }

    fn read_cache(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Entry>>> {
        self.cache.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry for a request path and, when its bytes are not cached, its file opened. A file that no longer
    /// matches its entry (changed within the revalidation interval) drops the entry, and the path is looked up
    /// once more.
    fn lookup_open(&self, path: &str) -> Result<(Arc<Entry>, Option<std::fs::File>), Response> {
        for _ in 0..2 {
            let e = self.lookup(path)?;
            if e.data.is_some() {
                return Ok((e, None));
            }
            if let Some(f) = open_same(&e) {
                return Ok((e, Some(f)));
            }
            if let Some(rel) = self.relative(path) {
                self.evict(rel);
            }
        }
        Err(Response::text(404, "not found"))
    }

    fn insert(&self, rel: &str, e: Arc<Entry>) {
        let len = e.cached_len();
        let mut map = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_ENTRIES
            || self
                .cached_bytes
                .load(Ordering::Relaxed)
                .saturating_add(len)
                > self.cfg.cache_max_total_bytes
        {
            return;
        }
        if let Some(old) = map.insert(rel.to_string(), e) {
            self.cached_bytes
                .fetch_sub(old.cached_len(), Ordering::Relaxed);
        }
        self.cached_bytes.fetch_add(len, Ordering::Relaxed);
    }

    fn evict(&self, rel: &str) {
        let mut map = self.cache.write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = map.remove(rel) {
            self.cached_bytes
                .fetch_sub(old.cached_len(), Ordering::Relaxed);
        }
    }

    /// Maps a relative path to a regular file inside the root (following symlinks, refusing escapes).
    fn resolve(&self, rel: &str, req_path: &str) -> Result<(PathBuf, std::fs::Metadata), Response> {
        if rel
            .split('/')
            .any(|s| s == ".." || s == "." || s.contains('\0') || s.contains('\\'))
        {
            return Err(Response::text(403, "forbidden"));
        }
        let joined = self.root.join(rel);
        let canon = self.inside_root(&joined)?;
        let meta = std::fs::metadata(&canon).map_err(io_status)?;
        if meta.is_dir() {
            if !rel.is_empty() && !rel.ends_with('/') {
                // relative ("name/"), so it stays right when a route prefix was stripped before we saw the path
                let last = req_path.rsplit('/').next().unwrap_or("");
                let loc = format!("{}/", encode_segment(last));
                return Err(Response::text(301, "moved").with_header("Location", loc));
            }
            let Some(ix) = self.cfg.index.as_deref().filter(|i| !i.is_empty()) else {
                return Err(Response::text(404, "not found"));
            };
            let index = self.inside_root(&canon.join(ix))?;
            let meta = std::fs::metadata(&index).map_err(io_status)?;
            if !meta.is_file() {
                return Err(Response::text(404, "not found"));
            }
            return Ok((index, meta));
        }
        if !meta.is_file() {
            return Err(Response::text(403, "forbidden"));
        }
        Ok((canon, meta))
    }

    fn inside_root(&self, p: &Path) -> Result<PathBuf, Response> {
        let canon = std::fs::canonicalize(p).map_err(io_status)?;
        if !canon.starts_with(&self.root) {
            return Err(Response::text(403, "forbidden"));
        }
        Ok(canon)
    }
}

/// Percent-encodes what may not appear raw in a path segment of a Location header.
fn encode_segment(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    for b in seg.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn io_status(e: std::io::Error) -> Response {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => Response::text(403, "forbidden"),
        _ => Response::text(404, "not found"),
    }
}

/// Opens an uncached entry's file and checks it is still the file the entry describes.
fn open_same(e: &Entry) -> Option<std::fs::File> {
    let f = std::fs::File::open(&e.file).ok()?;
    let m = f.metadata().ok()?;
    (m.is_file() && m.len() == e.len && m.modified().ok() == Some(e.mtime)).then_some(f)
}

fn make_entry(file: PathBuf, len: u64, mtime: SystemTime, data: Option<Bytes>, now: u64) -> Entry {
    let d = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
    let etag = format!("\"{:x}.{:x}-{:x}\"", d.as_secs(), d.subsec_nanos(), len);
    let last_modified = httpdate::fmt_http_date(mtime);
    let ct = content_type(&file.to_string_lossy());
    let head = format!(
        "Content-Type: {ct}\r\nETag: {etag}\r\nLast-Modified: {last_modified}\r\nAccept-Ranges: bytes\r\n"
    );
    Entry {
        file,
        len,
        mtime,
        etag,
        last_modified,
        content_type: ct,
        head: Bytes::from(head),
        data,
        checked_ms: AtomicU64::new(now),
    }
}

fn not_modified(req: &Request, e: &Entry) -> bool {
    if let Some(inm) = req.header("if-none-match") {
        let inm = inm.trim();
        return inm == "*"
            || inm
                .split(',')
                .any(|t| t.trim().trim_start_matches("W/") == e.etag.as_str());
    }
    if let Some(ims) = req.header("if-modified-since") {
        if let Ok(t) = httpdate::parse_http_date(ims) {
            let m = e
                .mtime
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            let t = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
            return m <= t;
        }
    }
    false
}

fn if_range_ok(req: &Request, e: &Entry) -> bool {
    match req.header("if-range") {
        None => true,
        Some(v) => {
            let v = v.trim();
            v == e.etag || v == e.last_modified
        }
    }
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_range(h: &str, len: u64) -> Range {
    let h = h.trim();
    let Some(spec) = h
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("bytes="))
        .map(|_| &h[6..])
    else {
        return Range::Whole;
    };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Range::Whole;
    };
    if a.is_empty() {
        let Some(n) = digits(b) else {
            return Range::Whole;
        };
        if n == 0 || len == 0 {
            return Range::Unsatisfiable;
        }
        return Range::Part(len.saturating_sub(n), len - 1);
    }
    let Some(start) = digits(a) else {
        return Range::Whole;
    };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match digits(b) {
            Some(e) if e >= start => e,
            _ => return Range::Whole,
        }
    };
    if start >= len {
        return Range::Unsatisfiable;
    }
    Range::Part(start, end.min(len - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(h: &str, len: u64) -> Option<(u64, u64)> {
        match parse_range(h, len) {
            Range::Part(a, b) => Some((a, b)),
            Range::Whole => None,
            Range::Unsatisfiable => Some((u64::MAX, u64::MAX)),
        }
    }

    proptest::proptest! {
        #![proptest_config(ordo_testkit::fuzz::config(1.0))]

        /// Fuzz target (docs/design.md, "Fuzzing"): any `Range` value, for any file length, gives the
        /// whole file, 416, or a part inside the file (first ≤ last < length).
        #[test]
        fn fuzz_range_header_stays_in_the_file(
            h in ordo_testkit::fuzz::tokens(
                &["bytes=", "BYTES=", "items=", "0", "1", "9", "18446744073709551615", "99999999999999999999",
                  "-", ",", " ", "\t", "é", "="],
                8,
            ),
            len in proptest::prop_oneof![0u64..3, 0u64..1000, proptest::prelude::any::<u64>()],
        ) {
            let h = String::from_utf8_lossy(&h);
            if let Range::Part(a, b) = parse_range(&h, len) {
                proptest::prop_assert!(a <= b && b < len, "{:?} of {}: {}-{}", h, len, a, b);
            }
        }
    }

    #[test]
    fn ranges() {
        assert_eq!(part("bytes=0-9", 100), Some((0, 9)));
        assert_eq!(part("bytes=90-", 100), Some((90, 99)));
        assert_eq!(part("bytes=90-500", 100), Some((90, 99)));
        assert_eq!(part("bytes=-10", 100), Some((90, 99)));
        assert_eq!(part("bytes=-500", 100), Some((0, 99)));
        assert_eq!(part("BYTES=1-1", 100), Some((1, 1)));
        assert_eq!(part("bytes=100-", 100), Some((u64::MAX, u64::MAX)));
        assert_eq!(part("bytes=-0", 100), Some((u64::MAX, u64::MAX)));
        assert_eq!(part("bytes=0-1,5-6", 100), None);
        assert_eq!(part("bytes=5-1", 100), None);
        assert_eq!(part("bytes=a-b", 100), None);
        assert_eq!(part("items=0-1", 100), None);
        assert_eq!(part("bytes=+1-2", 100), None);
    }
}
