//! Response compression: gzip, brotli and zstd chosen by the request's `Accept-Encoding` (q-values,
//! `identity`, `*`, `q=0` refusals), applied to static and proxied responses alike as they stream — a body
//! is never gathered whole to be compressed (small in-memory bodies are compressed at once, everything else
//! chunk by chunk in a task feeding the body's stream) — and, for static files, `file.br`/`file.gz`/`file.zst`
//! siblings served instead when present and accepted (`precompressed`).
//!
//! Left alone: answers to HEAD, requests with `Range` and 206 answers (byte offsets are the identity
//! representation's), 1xx/204/304, bodies that already carry `Content-Encoding`, `Cache-Control:
//! no-transform`, types outside `types`, bodies known to be shorter than `min_size`. A response that could be
//! compressed gets `Vary: Accept-Encoding` whether or not this client accepted a coding, so caches keep the
//! representations apart; a compressed one loses `Content-Length` (the HTTP layer frames it) and
//! `Accept-Ranges`, and a strong `ETag` becomes weak (as nginx does: the bytes differ from the identity ones).

use std::io::{self, Write};

use crate::config::CompressionTable;
use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use crate::backend::static_files::StaticBackend;
use crate::http::{Body, Request, Response};

/// In-memory bodies up to this size are compressed at once (the answer keeps a Content-Length); larger ones
/// and files and streams are compressed chunk by chunk.
const INLINE_MAX: usize = 64 * 1024;
/// Bytes of input compressed between two sends of a streamed body.
const CHUNK: usize = 64 * 1024;
/// Compressed chunks waiting for the client, at most (the rest waits in the source: back-pressure).
const CHANNEL: usize = 2;
/// Brotli's window (log2 of bytes): 1 MiB, nginx's brotli module uses 512 KiB; brotli's own default (4 MiB)
/// costs memory per stream for little gain on web responses.
const BROTLI_LGWIN: u32 = 20;

/// `enabled` when no table sets it: off, as nginx's `gzip` is (see docs/serve.md, "Compression").
pub const DEFAULT_ENABLED: bool = false;
/// `level` when no table sets it.
pub const DEFAULT_LEVEL: u32 = 5;
/// `min_size` when no table sets it (bytes): below about a packet, compression saves nothing worth its CPU.
pub const DEFAULT_MIN_SIZE: u64 = 1024;

/// `types` when no table sets it: text and the text-like formats browsers fetch.
pub const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/json",
    "application/javascript",
    "application/x-javascript",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/ld+json",
    "application/manifest+json",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "font/ttf",
    "font/otf",
];

/// A content coding ordo produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    Br,
    Zstd,
}

impl Coding {
    pub const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    /// The token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The extension of a precompressed sibling file.
    fn extension(self) -> &'static str {
        match self {
            Coding::Gzip => ".gz",
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
        }
    }

    fn index(self) -> usize {
        match self {
            Coding::Br => 0,
            Coding::Zstd => 1,
            Coding::Gzip => 2,
        }
    }

    fn named(s: &str) -> Option<Coding> {
        Coding::ALL.into_iter().find(|c| c.token() == s)
    }
}

/// One entry of `types`.
#[derive(Clone, Debug, PartialEq)]
enum TypePattern {
    Exact(String),
    /// `text/*`: the top-level type, with its slash.
    Top(String),
}

/// A route's compression settings, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Compression {
    level: u32,
    min_size: u64,
    types: Vec<TypePattern>,
    algorithms: Vec<Coding>,
    precompressed: bool,
    /// Static routes: compressed copies of cached files (see [`Variants`]).
    variants: Option<Variants>,
}

/// Compressed copies of a static route's in-memory files, keyed by path, strong ETag (which changes with
/// the file) and coding, so a cached file is compressed once per coding, not per request. Bounded by
/// [`VARIANTS_MAX_BYTES`]; when full it is emptied and refills with what is asked for.
#[derive(Clone, Default)]
struct Variants(std::sync::Arc<std::sync::Mutex<VariantMap>>);

#[derive(Default)]
struct VariantMap {
    map: std::collections::HashMap<(String, String, Coding), Bytes>,
    bytes: usize,
}

/// Compressed bytes the variant cache of one route holds at most.
const VARIANTS_MAX_BYTES: usize = 32 * 1024 * 1024;

impl std::fmt::Debug for Variants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Variants")
    }
}

impl PartialEq for Variants {
    fn eq(&self, _: &Variants) -> bool {
        true
    }
}

impl Variants {
    fn lock(&self) -> std::sync::MutexGuard<'_, VariantMap> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Which key of which table was wrong.
pub(crate) type TableError = (&'static str, String);

impl Compression {
    /// The settings of a route from the server's table and the route's (the route's keys win); `None` when
    /// compression is off there. An error names the key.
    pub(crate) fn build(
        server: Option<&CompressionTable>,
        route: Option<&CompressionTable>,
    ) -> Result<Option<Compression>, (bool, TableError)> {
        // (true: the route's table holds the bad key)
        macro_rules! pick {
            ($f:ident) => {
                match route.and_then(|r| r.$f.clone()) {
                    Some(v) => Some((true, v)),
                    None => server.and_then(|s| s.$f.clone()).map(|v| (false, v)),
                }
            };
        }
        let enabled = pick!(enabled).map_or(DEFAULT_ENABLED, |(_, v)| v);
        let level = pick!(level);
        if let Some((r, l)) = level {
            if !(1..=9).contains(&l) {
                return Err((r, ("level", format!("must be 1 to 9, got {l}"))));
            }
        }
        let mut types = Vec::new();
        let type_list = pick!(types);
        let (types_in_route, names) = match type_list {
            Some((r, t)) => (r, t),
            None => (false, DEFAULT_TYPES.iter().map(|s| s.to_string()).collect()),
        };
        for t in &names {
            types.push(parse_type(t).map_err(|m| (types_in_route, ("types", m)))?);
        }
        let mut algorithms = Vec::new();
        if let Some((r, names)) = pick!(algorithms) {
            for n in &names {
                let c = Coding::named(&n.to_ascii_lowercase()).ok_or_else(|| {
                    (
                        r,
                        (
                            "algorithms",
                            format!("unknown coding `{n}` (expected br, zstd or gzip)"),
                        ),
                    )
                })?;
                if algorithms.contains(&c) {
                    return Err((r, ("algorithms", format!("`{n}` is listed twice"))));
                }
                algorithms.push(c);
            }
            if algorithms.is_empty() {
                return Err((
                    r,
                    (
                        "algorithms",
                        "is empty (set `enabled = false` to turn compression off)".to_string(),
                    ),
                ));
            }
        } else {
            algorithms = Coding::ALL.to_vec();
        }
        if !enabled {
            return Ok(None);
        }
        Ok(Some(Compression {
            level: level.map_or(DEFAULT_LEVEL, |(_, l)| l),
            min_size: pick!(min_size).map_or(DEFAULT_MIN_SIZE, |(_, v)| v),
            types,
            algorithms,
            precompressed: pick!(precompressed).is_some_and(|(_, v)| v),
            variants: None,
        }))
    }

    /// These settings for a static route: cached files' compressed copies are kept.
    pub(crate) fn for_static(mut self) -> Compression {
        self.variants = Some(Variants::default());
        self
    }

    /// The coding to answer `req` with, if any: the accepted coding with the highest q-value, ties going to
    /// the earlier in `algorithms`.
    fn choose(&self, req: &Request) -> Option<Coding> {
        negotiate(req.headers.get_all("accept-encoding"), &self.algorithms)
    }

    /// Whether the response to `req` may be compressed at all (method and range).
    fn request_allows(req: &Request) -> bool {
        req.method != "HEAD" && req.header("range").is_none()
    }

    /// A precompressed sibling of a static file, when `precompressed` is on, the client accepts its coding
    /// and it exists: the answer to `req` with the sibling's bytes, the original's Content-Type and the
    /// coding in Content-Encoding. `None`: serve as usual.
    pub(crate) async fn precompressed(
        &self,
        backend: &StaticBackend,
        req: &Request,
    ) -> Option<Response> {
        if !self.precompressed || req.header("range").is_some() || req.path.ends_with('/') {
            return None;
        }
        let codings = ranked(req.headers.get_all("accept-encoding"), &self.algorithms);
        for c in codings {
            let mut sib = req.clone();
            sib.path.push_str(c.extension());
            let resp = backend.call(&sib).await;
            if resp.status != 200 && resp.status != 304 {
                continue;
            }
            let ct = crate::backend::mime::content_type(&req.path);
            let mut resp = unrender(resp);
            resp.headers.retain(|(k, _)| {
                !k.eq_ignore_ascii_case("content-type") && !k.eq_ignore_ascii_case("accept-ranges")
            });
            if resp.status == 200 {
                resp.headers.push(("Content-Type".into(), ct.into()));
            }
            resp.headers
                .push(("Content-Encoding".into(), c.token().into()));
            add_vary(&mut resp.headers);
            return Some(resp);
        }
        None
    }

    /// `resp` (the answer to `req`) compressed when everything allows it; with `Vary: Accept-Encoding` when
    /// it could have been.
    pub(crate) fn apply(&self, req: &Request, resp: Response) -> Response {
        if !self.compressible(&resp) {
            return resp;
        }
        let mut resp = resp;
        let coding = if Self::request_allows(req) {
            self.choose(req)
        } else {
            None
        };
        let Some(coding) = coding else {
            add_vary_to(&mut resp);
            return resp;
        };
        let Response {
            status,
            headers,
            body,
        } = unrender(resp);
        let mut headers = headers;
        // a static file in memory with a strong ETag: its compressed copy, when made before
        let variant_key = match (&self.variants, &body) {
            (Some(_), Body::Bytes(b)) if status == 200 && b.len() <= INLINE_MAX => headers
                .iter()
                .find(|(k, v)| k.eq_ignore_ascii_case("etag") && v.starts_with('"'))
                .map(|(_, etag)| (req.path.clone(), etag.clone(), coding)),
            _ => None,
        };
        let cached = match (&self.variants, &variant_key) {
            (Some(v), Some(k)) => v.lock().map.get(k).cloned(),
            _ => None,
        };
        headers.retain(|(k, _)| {
            !k.eq_ignore_ascii_case("content-length") && !k.eq_ignore_ascii_case("accept-ranges")
        });
        for (k, v) in headers.iter_mut() {
            if k.eq_ignore_ascii_case("etag") && !v.starts_with("W/") {
                *v = format!("W/{v}");
            }
        }
        headers.push(("Content-Encoding".into(), coding.token().into()));
        add_vary(&mut headers);
        if let Some(z) = cached {
            return Response {
                status,
                headers,
                body: Body::Bytes(z),
            };
        }
        let body = match self.encode_body(coding, body) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "compression failed to start; answering 500");
                return Response::text(500, "compression failed");
            }
        };
        if let (Some(v), Some(k), Body::Bytes(z)) = (&self.variants, variant_key, &body) {
            let mut v = v.lock();
            if v.bytes + z.len() > VARIANTS_MAX_BYTES {
                v.map.clear();
                v.bytes = 0;
            }
            v.bytes += z.len();
            if let Some(old) = v.map.insert(k, z.clone()) {
                v.bytes -= old.len();
            }
        }
        Response {
            status,
            headers,
            body,
        }
    }

    /// Whether `resp` is of a kind this route compresses (status, existing coding, no-transform, type, size).
    fn compressible(&self, resp: &Response) -> bool {
        let s = resp.status;
        if s < 200 || s == 204 || s == 206 || s == 304 {
            return false;
        }
        if matches!(resp.body, Body::Empty) {
            return false;
        }
        // header lines that are not UTF-8 (a proxied upstream's, forwarded byte for byte) cannot be edited
        if prerendered_head(resp).is_some_and(|h| {
            h.split(|&b| b == b'\n')
                .any(|l| std::str::from_utf8(l).is_err())
        }) {
            return false;
        }
        if resp.body.len().is_some_and(|n| n < self.min_size) {
            return false;
        }
        if header_of(resp, "content-encoding").is_some()
            || header_of(resp, "content-range").is_some()
        {
            return false;
        }
        if header_of(resp, "cache-control").is_some_and(|v| {
            v.split(',')
                .any(|d| d.trim().eq_ignore_ascii_case("no-transform"))
        }) {
            return false;
        }
        match header_of(resp, "content-type") {
            Some(ct) => self.type_matches(&ct),
            None => false,
        }
    }

    fn type_matches(&self, content_type: &str) -> bool {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        self.types.iter().any(|p| match p {
            TypePattern::Exact(t) => *t == media,
            TypePattern::Top(top) => media.starts_with(top.as_str()),
        })
    }

    fn encode_body(&self, coding: Coding, body: Body) -> io::Result<Body> {
        let mut enc = Encoder::new(coding, self.level)?;
        let source = match body {
            Body::Bytes(b) | Body::Prerendered { body: b, .. } if b.len() <= INLINE_MAX => {
                enc.write(&b)?;
                return Ok(Body::Bytes(Bytes::from(enc.finish()?)));
            }
            Body::Bytes(b) | Body::Prerendered { body: b, .. } => Source::Memory(b),
            Body::File { file, offset, len } => Source::File {
                file: tokio::fs::File::from_std(file),
                offset,
                left: len,
            },
            Body::Stream { rx, .. } => Source::Stream(rx),
            // (compressible() refused an empty body; unrender() made the pre-rendered stream a stream)
            b @ (Body::Empty | Body::PrerenderedStream { .. } | Body::Upgrade { .. }) => {
                return Ok(b);
            }
        };
        let (tx, rx) = mpsc::channel(CHANNEL);
        tokio::spawn(pump(source, enc, tx));
        Ok(Body::Stream { rx, len: None })
    }
}

/// A header of `resp`, looked up in its headers and, for a body with pre-rendered header lines, there.
fn header_of(resp: &Response, name: &str) -> Option<String> {
    if let Some(v) = resp.header(name) {
        return Some(v.to_string());
    }
    prerendered_head(resp).and_then(|head| {
        prerendered_lines(head)
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_string())
    })
}

/// The header lines a body carries rendered ahead of time (static files' cached heads, proxied heads).
fn prerendered_head(resp: &Response) -> Option<&[u8]> {
    match &resp.body {
        Body::Prerendered { head, .. } | Body::PrerenderedStream { head, .. } => Some(head),
        _ => None,
    }
}

/// The `Name: value` lines of a pre-rendered head (static files render them from UTF-8 text; a line that is
/// not UTF-8 or has no colon is skipped).
fn prerendered_lines(head: &[u8]) -> impl Iterator<Item = (&str, &str)> {
    head.split(|&b| b == b'\n').filter_map(|line| {
        let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
        let (k, v) = line.split_once(':')?;
        Some((k.trim(), v.trim()))
    })
}

/// `resp` with a pre-rendered head turned into ordinary headers (so they can be edited; the caller has
/// checked that its lines are UTF-8).
fn unrender(resp: Response) -> Response {
    let mut headers = resp.headers;
    let lines = |h: &mut Vec<(String, String)>, head: &[u8]| {
        h.extend(prerendered_lines(head).map(|(k, v)| (k.to_string(), v.to_string())))
    };
    let body = match resp.body {
        Body::Prerendered { head, body } => {
            lines(&mut headers, &head);
            Body::Bytes(body)
        }
        Body::PrerenderedStream { head, rx, len } => {
            lines(&mut headers, &head);
            Body::Stream { rx, len }
        }
        body => body,
    };
    Response {
        status: resp.status,
        headers,
        body,
    }
}

fn add_vary_to(resp: &mut Response) {
    add_vary(&mut resp.headers);
}

/// Adds `Accept-Encoding` to the `Vary` header (once; `Vary: *` already covers it).
fn add_vary(headers: &mut Vec<(String, String)>) {
    for (k, v) in headers.iter_mut() {
        if !k.eq_ignore_ascii_case("vary") {
            continue;
        }
        if v.split(',').any(|t| {
            let t = t.trim();
            t == "*" || t.eq_ignore_ascii_case("accept-encoding")
        }) {
            return;
        }
        if v.trim().is_empty() {
            *v = "Accept-Encoding".into();
        } else {
            v.push_str(", Accept-Encoding");
        }
        return;
    }
    headers.push(("Vary".into(), "Accept-Encoding".into()));
}

/// A q-value in thousandths (RFC 9110 §12.4.2: `0`, `0.xyz`, `1`, `1.000`); `None` when malformed.
fn parse_q(s: &str) -> Option<u16> {
    let s = s.trim();
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut milli: u16 = 0;
    for (i, b) in frac.bytes().enumerate() {
        milli += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(milli),
        "1" if milli == 0 => Some(1000),
        _ => None,
    }
}

/// The q-value (thousandths) `Accept-Encoding` gives each coding of [`Coding::ALL`] (by `Coding::index`), and
/// `*`'s. A coding named twice keeps its lowest q-value (a refusal is never overruled); an entry with a
/// malformed q-value is ignored.
fn accepted<'a>(values: impl Iterator<Item = &'a str>) -> ([Option<u16>; 3], Option<u16>) {
    let mut q: [Option<u16>; 3] = [None; 3];
    let mut star: Option<u16> = None;
    for item in values.flat_map(|v| v.split(',')) {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        if name.is_empty() {
            continue;
        }
        let mut value = Some(1000);
        for p in parts {
            let p = p.trim();
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    value = parse_q(v);
                }
            }
        }
        let Some(value) = value else { continue };
        let slot = match name.as_str() {
            "*" => &mut star,
            "x-gzip" => &mut q[Coding::Gzip.index()],
            n => match Coding::named(n) {
                Some(c) => &mut q[c.index()],
                None => continue,
            },
        };
        *slot = Some(slot.map_or(value, |old| old.min(value)));
    }
    (q, star)
}

/// The codings of `offered` the client accepts, best first: by q-value, ties in `offered`'s order. A coding
/// the header does not name takes `*`'s q-value, or is not acceptable (RFC 9110 §12.5.3); no header at all
/// means no compression (as every server does: old clients send none).
fn ranked<'a>(values: impl Iterator<Item = &'a str>, offered: &[Coding]) -> Vec<Coding> {
    let (q, star) = accepted(values);
    let mut out: Vec<(u16, usize, Coding)> = offered
        .iter()
        .enumerate()
        .filter_map(|(i, &c)| {
            let v = q[c.index()].or(star).unwrap_or(0);
            (v > 0).then_some((v, i, c))
        })
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    out.into_iter().map(|(_, _, c)| c).collect()
}

/// The best coding of `offered` for these `Accept-Encoding` values: the highest q-value, ties in
/// `offered`'s order; `*` covers what is not named; no header at all means none.
pub fn negotiate<'a>(values: impl Iterator<Item = &'a str>, offered: &[Coding]) -> Option<Coding> {
    ranked(values, offered).into_iter().next()
}

fn parse_type(t: &str) -> Result<TypePattern, String> {
    let s = t.trim().to_ascii_lowercase();
    let Some((top, sub)) = s.split_once('/') else {
        return Err(format!(
            "`{t}` is not a media type (expected type/subtype or type/*)"
        ));
    };
    let token = |x: &str| !x.is_empty() && x.bytes().all(ordo_http1::is_tchar);
    if !token(top) || !(sub == "*" || token(sub)) {
        return Err(format!(
            "`{t}` is not a media type (expected type/subtype or type/*)"
        ));
    }
    Ok(if sub == "*" {
        TypePattern::Top(format!("{top}/"))
    } else {
        TypePattern::Exact(s)
    })
}

/// A streaming encoder writing into a buffer the caller empties.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    fn new(c: Coding, level: u32) -> io::Result<Encoder> {
        Ok(match c {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(level),
            )),
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                level,
                BROTLI_LGWIN,
            ))),
            Coding::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), level as i32)?)
            }
        })
    }

    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(data),
            Encoder::Br(e) => e.write_all(data),
            Encoder::Zstd(e) => e.write_all(data),
        }
    }

    /// Pushes out everything written so far, so a client can decode it without waiting for more.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Br(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        }
    }

    /// Compressed bytes produced and not yet taken.
    fn pending(&mut self) -> usize {
        match self {
            Encoder::Gzip(e) => e.get_mut().len(),
            Encoder::Br(e) => e.get_mut().len(),
            Encoder::Zstd(e) => e.get_mut().len(),
        }
    }

    /// The compressed bytes produced so far (taken out of the encoder).
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        })
    }

    /// Ends the stream; the rest of the compressed bytes.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Br(e) => Ok(e.into_inner()),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

/// Where a streamed body's uncompressed bytes come from.
enum Source {
    Memory(Bytes),
    File {
        file: tokio::fs::File,
        offset: u64,
        left: u64,
    },
    Stream(mpsc::Receiver<io::Result<Bytes>>),
}

/// Sends `out` unless empty; `false` when the client has gone.
async fn send(tx: &mpsc::Sender<io::Result<Bytes>>, out: Vec<u8>) -> bool {
    out.is_empty() || tx.send(Ok(Bytes::from(out))).await.is_ok()
}

/// Compresses `source` into `tx` chunk by chunk. A stream's data is flushed whenever its source has nothing
/// ready (so a slow upstream's bytes reach the client as they come: server-sent events stay live); an error
/// from the source or the encoder is passed on, which aborts the response.
async fn pump(source: Source, mut enc: Encoder, tx: mpsc::Sender<io::Result<Bytes>>) {
    let r: io::Result<()> = async {
        match source {
            Source::Memory(b) => {
                for piece in b.chunks(CHUNK) {
                    enc.write(piece)?;
                    if !send(&tx, enc.take()).await {
                        return Ok(());
                    }
                }
            }
            Source::File {
                mut file,
                offset,
                mut left,
            } => {
                use tokio::io::AsyncSeekExt;
                if offset > 0 {
                    file.seek(io::SeekFrom::Start(offset)).await?;
                }
                let mut buf = Vec::with_capacity(CHUNK);
                while left > 0 {
                    buf.clear();
                    let want = left.min(CHUNK as u64);
                    let n = (&mut file).take(want).read_to_end(&mut buf).await?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "file shorter than announced",
                        ));
                    }
                    left -= n as u64;
                    enc.write(&buf)?;
                    if !send(&tx, enc.take()).await {
                        return Ok(());
                    }
                }
            }
            Source::Stream(mut rx) => loop {
                let chunk = match rx.try_recv() {
                    Ok(c) => Some(c),
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        enc.flush()?;
                        if !send(&tx, enc.take()).await {
                            return Ok(());
                        }
                        rx.recv().await
                    }
                };
                match chunk {
                    None => break,
                    // the source has nothing at hand: what was compressed goes now, and the marker on
                    // (see `Body::Stream`)
                    Some(Ok(c)) if c.is_empty() => {
                        enc.flush()?;
                        if !send(&tx, enc.take()).await || tx.send(Ok(c)).await.is_err() {
                            return Ok(());
                        }
                    }
                    Some(c) => {
                        enc.write(&c?)?;
                        if enc.pending() >= CHUNK / 4 && !send(&tx, enc.take()).await {
                            return Ok(());
                        }
                    }
                }
            },
        }
        let rest = enc.finish()?;
        send(&tx, rest).await;
        Ok(())
    }
    .await;
    if let Err(e) = r {
        let _ = tx.send(Err(e)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn neg(h: &str) -> Option<Coding> {
        negotiate(std::iter::once(h), &Coding::ALL)
    }

    #[test]
    fn q_values_pick_the_coding() {
        assert_eq!(neg("gzip"), Some(Coding::Gzip));
        assert_eq!(neg("gzip, deflate, br"), Some(Coding::Br));
        assert_eq!(neg("gzip, deflate, br, zstd"), Some(Coding::Br));
        assert_eq!(neg("br;q=0.5, gzip;q=0.8"), Some(Coding::Gzip));
        assert_eq!(neg("br;q=0.5, gzip;q=0.8, zstd;q=0.9"), Some(Coding::Zstd));
        assert_eq!(neg("GZIP;Q=1.0"), Some(Coding::Gzip));
        assert_eq!(neg("x-gzip"), Some(Coding::Gzip));
        // q=0 refuses; `*` covers what is not named
        assert_eq!(neg("gzip;q=0"), None);
        assert_eq!(neg("*"), Some(Coding::Br));
        assert_eq!(neg("*;q=0.5, br;q=0"), Some(Coding::Zstd));
        assert_eq!(neg("*;q=0"), None);
        assert_eq!(neg("*;q=0, gzip"), Some(Coding::Gzip));
        // identity alone, empty, unknown codings: nothing to compress with
        assert_eq!(neg("identity"), None);
        assert_eq!(neg(""), None);
        assert_eq!(neg("deflate, compress"), None);
        assert_eq!(neg("identity;q=0"), None);
        // a refusal is never overruled by a second mention
        assert_eq!(neg("gzip, gzip;q=0"), None);
        // malformed q-values: the entry is ignored
        assert_eq!(neg("br;q=2, gzip;q=0.1"), Some(Coding::Gzip));
        assert_eq!(neg("br;q=0.0001"), None);
        assert_eq!(neg("br;q=abc"), None);
        // several headers add up
        assert_eq!(
            negotiate(["gzip;q=0.2", "zstd;q=0.3"].into_iter(), &Coding::ALL),
            Some(Coding::Zstd)
        );
        // the server's order breaks ties, and only offered codings count
        assert_eq!(
            negotiate(std::iter::once("br, gzip"), &[Coding::Gzip, Coding::Br]),
            Some(Coding::Gzip)
        );
        assert_eq!(negotiate(std::iter::once("br"), &[Coding::Gzip]), None);
        assert_eq!(parse_q("1.000"), Some(1000));
        assert_eq!(parse_q("1.001"), None);
        assert_eq!(parse_q("0.25"), Some(250));
    }

    fn on(extra: CompressionTable) -> Compression {
        let t = CompressionTable {
            enabled: Some(true),
            min_size: Some(10),
            ..extra
        };
        Compression::build(Some(&t), None).unwrap().unwrap()
    }

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"the quick brown fox jumps over the lazy dog "[i % 44])
            .collect()
    }

    async fn collect(body: Body) -> Vec<u8> {
        match body {
            Body::Bytes(b) => b.to_vec(),
            Body::Stream { mut rx, len: None } => {
                let mut out = Vec::new();
                while let Some(c) = rx.recv().await {
                    out.extend_from_slice(&c.unwrap());
                }
                out
            }
            other => panic!("unexpected body {other:?}"),
        }
    }

    #[tokio::test]
    async fn compresses_and_leaves_alone_what_it_must() {
        let c = on(CompressionTable::default());
        let req = Request::get("/x").with_header("Accept-Encoding", "gzip");
        let body = text(5000);
        let resp = Response::bytes(200, "text/html; charset=utf-8", Bytes::from(body.clone()))
            .with_header("ETag", "\"abc\"")
            .with_header("Vary", "Cookie");
        let out = c.apply(&req, resp);
        assert_eq!(out.header("content-encoding"), Some("gzip"));
        assert_eq!(out.header("etag"), Some("W/\"abc\""));
        assert_eq!(out.header("vary"), Some("Cookie, Accept-Encoding"));
        assert_eq!(gunzip(&collect(out.body).await), body);

        let html = || Response::bytes(200, "text/html", Bytes::from(text(5000)));
        // not accepted: identity, but Vary all the same
        let plain = c.apply(&Request::get("/x"), html());
        assert_eq!(plain.header("content-encoding"), None);
        assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
        // HEAD and Range: identity
        let mut head = req.clone();
        head.method = "HEAD".into();
        assert_eq!(c.apply(&head, html()).header("content-encoding"), None);
        let range = req.clone().with_header("Range", "bytes=0-9");
        assert_eq!(c.apply(&range, html()).header("content-encoding"), None);
        // 206, 204, 304, already encoded, no-transform, wrong type, too small: untouched (no Vary either)
        for resp in [
            Response {
                status: 206,
                ..html()
            },
            Response::new(204),
            Response::new(304),
            html().with_header("Content-Encoding", "br"),
            html().with_header("Cache-Control", "public, no-transform"),
            Response::bytes(200, "image/png", Bytes::from(text(5000))),
            Response::bytes(200, "text/html", Bytes::from_static(b"tiny")),
        ] {
            let status = resp.status;
            let out = c.apply(&req, resp);
            assert_eq!(out.header("content-encoding").filter(|e| *e != "br"), None);
            assert_eq!(out.header("vary"), None, "{status}");
        }
    }

    #[tokio::test]
    async fn a_static_files_compressed_copy_is_kept_per_etag_and_coding() {
        let c = on(CompressionTable::default()).for_static();
        let page = |etag: &str, body: Vec<u8>| Response {
            status: 200,
            headers: Vec::new(),
            body: Body::Prerendered {
                head: Bytes::from(format!("Content-Type: text/html\r\nETag: {etag}\r\n")),
                body: Bytes::from(body),
            },
        };
        let req = Request::get("/p.html").with_header("Accept-Encoding", "gzip");
        let first = c.apply(&req, page("\"v1\"", text(5000)));
        let Body::Bytes(a) = first.body else {
            panic!("in memory")
        };
        let second = c.apply(&req, page("\"v1\"", text(5000)));
        let Body::Bytes(b) = second.body else {
            panic!("in memory")
        };
        // the same allocation: served from the cache, not compressed again
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(
            second
                .headers
                .iter()
                .filter(|(k, _)| k == "Content-Encoding")
                .count(),
            1
        );
        assert_eq!(gunzip(&b), text(5000));
        // a changed file (new ETag) is compressed anew
        let third = c.apply(&req, page("\"v2\"", text(6000)));
        let Body::Bytes(z) = third.body else {
            panic!("in memory")
        };
        assert_eq!(gunzip(&z), text(6000));
        // br is a copy of its own
        let br = Request::get("/p.html").with_header("Accept-Encoding", "br");
        let Body::Bytes(z) = c.apply(&br, page("\"v1\"", text(5000))).body else {
            panic!("in memory")
        };
        assert_eq!(decode(Coding::Br, &z), text(5000));
    }

    #[tokio::test]
    async fn every_coding_round_trips_in_memory_and_streamed() {
        let c = on(CompressionTable::default());
        let small = text(3000);
        let big = text(300_000);
        for coding in Coding::ALL {
            let req = Request::get("/x").with_header("Accept-Encoding", coding.token());
            for body in [&small, &big] {
                let out = c.apply(
                    &req,
                    Response::bytes(200, "application/json", Bytes::from(body.clone())),
                );
                assert_eq!(out.header("content-encoding"), Some(coding.token()));
                let z = collect(out.body).await;
                assert!(z.len() < body.len() / 4, "{coding:?}: {}", z.len());
                assert_eq!(&decode(coding, &z), body, "{coding:?}");
            }
            // a stream of unknown length, chunk by chunk
            let (tx, rx) = mpsc::channel(4);
            let chunks: Vec<Vec<u8>> = (0..20).map(|i| text(1000 + i * 100)).collect();
            let want: Vec<u8> = chunks.concat();
            tokio::spawn(async move {
                for ch in chunks {
                    tx.send(Ok(Bytes::from(ch))).await.unwrap();
                    tokio::task::yield_now().await;
                }
            });
            let resp = Response {
                status: 200,
                headers: vec![("Content-Type".into(), "text/plain".into())],
                body: Body::Stream { rx, len: None },
            };
            let out = c.apply(&req, resp);
            assert_eq!(decode(coding, &collect(out.body).await), want);
        }
    }

    #[tokio::test]
    async fn a_stream_is_flushed_while_its_source_waits() {
        // the first chunk must reach the client decodable before the upstream sends the second
        let c = on(CompressionTable::default());
        let req = Request::get("/events").with_header("Accept-Encoding", "gzip");
        let (tx, rx) = mpsc::channel(4);
        let resp = Response {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            body: Body::Stream { rx, len: None },
        };
        let Body::Stream { rx: mut out, .. } = c.apply(&req, resp).body else {
            panic!("streamed")
        };
        tx.send(Ok(Bytes::from_static(b"data: one\n\n")))
            .await
            .unwrap();
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), out.recv())
            .await
            .expect("flushed without more input")
            .unwrap()
            .unwrap();
        let mut d = flate2::write::GzDecoder::new(Vec::new());
        d.write_all(&first).unwrap();
        d.flush().unwrap();
        assert_eq!(d.get_ref().as_slice(), b"data: one\n\n");
        drop(tx);
        while out.recv().await.is_some() {}
    }

    pub(crate) fn decode(c: Coding, z: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match c {
            Coding::Gzip => {
                flate2::read::GzDecoder::new(z)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(z, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => {
                out = zstd::stream::decode_all(z).unwrap();
            }
        }
        out
    }

    #[test]
    fn settings_merge_and_errors_name_the_key() {
        assert_eq!(Compression::build(None, None).unwrap(), None);
        let server = CompressionTable {
            enabled: Some(true),
            level: Some(3),
            ..Default::default()
        };
        let route_off = CompressionTable {
            enabled: Some(false),
            ..Default::default()
        };
        assert_eq!(
            Compression::build(Some(&server), Some(&route_off)).unwrap(),
            None
        );
        let route_level = CompressionTable {
            level: Some(9),
            ..Default::default()
        };
        let c = Compression::build(Some(&server), Some(&route_level))
            .unwrap()
            .unwrap();
        assert_eq!((c.level, c.min_size), (9, DEFAULT_MIN_SIZE));
        let bad = CompressionTable {
            level: Some(12),
            ..Default::default()
        };
        let e = Compression::build(Some(&server), Some(&bad)).unwrap_err();
        assert_eq!(e, (true, ("level", "must be 1 to 9, got 12".to_string())));
        let bad = CompressionTable {
            algorithms: Some(vec!["deflate".into()]),
            ..Default::default()
        };
        let e = Compression::build(Some(&bad), None).unwrap_err();
        assert!(
            !e.0 && e.1.0 == "algorithms" && e.1.1.contains("deflate"),
            "{e:?}"
        );
        let bad = CompressionTable {
            types: Some(vec!["html".into()]),
            ..Default::default()
        };
        let e = Compression::build(None, Some(&bad)).unwrap_err();
        assert!(e.0 && e.1.0 == "types" && e.1.1.contains("`html`"), "{e:?}");
        let c = on(CompressionTable::default());
        assert!(c.type_matches("text/css; charset=utf-8"));
        assert!(c.type_matches("Application/JSON"));
        assert!(c.type_matches("image/svg+xml"));
        assert!(!c.type_matches("image/png"));
        assert!(!c.type_matches("textual/plain"));
    }
}
