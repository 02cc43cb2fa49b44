//! The synthetic backend: work on demand for experiments, so every experiment runs with nothing else
//! installed. Query parameters, on any path and in any combination (`/cpu?us=N`, `/sleep?ms=N`,
//! `/bytes?n=N`, `/work?us=..&ms=..&n=..`):
//! - `ms=N`: wait N milliseconds (an async sleep: the serving thread is free meanwhile);
//! - `us=N`: then burn N microseconds of CPU on the serving thread (a spin on the monotonic clock);
//! - `n=N`: answer N bytes (from one shared buffer, never allocated per request); without `n` the body is `ok\n`.
//!
//! A value that is not a non-negative integer, or is over its cap, is answered 400 naming the parameter.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;

use super::BackendError;
use crate::http::{Body, Request, Response};

/// Size of the shared body buffer; larger bodies are streamed from it in slices.
const SHARED_LEN: usize = 1 << 20;

fn shared() -> &'static Bytes {
    static BUF: OnceLock<Bytes> = OnceLock::new();
    BUF.get_or_init(|| Bytes::from(vec![b'x'; SHARED_LEN]))
}

/// `[routes.synthetic]`: caps on what one request may ask for.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Largest `us` (CPU burn, microseconds). Default 10 s.
    pub max_us: u64,
    /// Largest `ms` (sleep, milliseconds). Default 60 s.
    pub max_ms: u64,
    /// Largest `n` (body bytes). Default 1 GiB.
    pub max_bytes: u64,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig {
            max_us: 10_000_000,
            max_ms: 60_000,
            max_bytes: 1 << 30,
        }
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct SyntheticBackend {
    cfg: SyntheticConfig,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Work {
    us: Option<u64>,
    ms: Option<u64>,
    n: Option<u64>,
}

impl SyntheticBackend {
    pub fn new(cfg: &SyntheticConfig) -> Result<Self, BackendError> {
        Ok(SyntheticBackend { cfg: cfg.clone() })
    }

    fn param(
        req: &Request,
        name: &'static str,
        cap: u64,
        cap_name: &str,
    ) -> Result<Option<u64>, String> {
        let Some(v) = req.query_param(name) else {
            return Ok(None);
        };
        let n: u64 = v.parse().map_err(|_| {
            format!("bad value for parameter {name}: {v:?} (expected a non-negative integer)")
        })?;
        if n > cap {
            return Err(format!(
                "parameter {name}={n} is over the cap {cap_name} = {cap}"
            ));
        }
        Ok(Some(n))
    }

    fn work(&self, req: &Request) -> Result<Work, String> {
        if req.query.is_none() {
            return Ok(Work::default());
        }
        Ok(Work {
            us: Self::param(req, "us", self.cfg.max_us, "max_us")?,
            ms: Self::param(req, "ms", self.cfg.max_ms, "max_ms")?,
            n: Self::param(req, "n", self.cfg.max_bytes, "max_bytes")?,
        })
    }

    pub async fn call(&self, req: &Request) -> Response {
        let w = match self.work(req) {
            Ok(w) => w,
            Err(msg) => return Response::text(400, &msg),
        };
        if let Some(ms) = w.ms.filter(|&m| m > 0) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(us) = w.us.filter(|&u| u > 0) {
            burn(Duration::from_micros(us));
        }
        match w.n {
            None => Response::bytes(
                200,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ok\n"),
            ),
            Some(n) if n as usize <= SHARED_LEN => Response::bytes(
                200,
                "application/octet-stream",
                shared().slice(..n as usize),
            ),
            Some(n) => {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tokio::spawn(async move {
                    let mut left = n;
                    while left > 0 {
                        let k = left.min(SHARED_LEN as u64) as usize;
                        if tx.send(Ok(shared().slice(..k))).await.is_err() {
                            return;
                        }
                        left -= k as u64;
                    }
                });
                Response {
                    status: 200,
                    headers: vec![("Content-Type".into(), "application/octet-stream".into())],
                    body: Body::Stream { rx, len: Some(n) },
                }
            }
        }
    }

    /// The requested work in microseconds (`us` + 1000 × `ms`); `None` without either or on a bad value.
    pub fn size_hint(&self, req: &Request) -> Option<u64> {
        let w = self.work(req).ok()?;
        if w.us.is_none() && w.ms.is_none() {
            return None;
        }
        Some(
            w.us.unwrap_or(0)
                .saturating_add(w.ms.unwrap_or(0).saturating_mul(1000)),
        )
    }
}

/// Spins on the monotonic clock for `d` (the CPU work of a request, on the serving thread on purpose).
fn burn(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> SyntheticBackend {
        SyntheticBackend::new(&SyntheticConfig::default()).unwrap()
    }

    #[test]
    fn parses_and_caps() {
        let b = backend();
        assert_eq!(
            b.work(&Request::get("/work?us=5&ms=2&n=10")),
            Ok(Work {
                us: Some(5),
                ms: Some(2),
                n: Some(10)
            })
        );
        assert!(
            b.work(&Request::get("/cpu?us=abc"))
                .unwrap_err()
                .contains("parameter us")
        );
        assert!(
            b.work(&Request::get("/cpu?us=-1"))
                .unwrap_err()
                .contains("parameter us")
        );
        assert!(
            b.work(&Request::get("/bytes?n=99999999999"))
                .unwrap_err()
                .contains("max_bytes")
        );
        assert_eq!(b.size_hint(&Request::get("/work?us=5&ms=2")), Some(2005));
        assert_eq!(b.size_hint(&Request::get("/bytes?n=5")), None);
    }

    #[tokio::test]
    async fn bodies() {
        let b = backend();
        let r = b.call(&Request::get("/bytes?n=1000")).await;
        assert_eq!((r.status, r.body.len()), (200, Some(1000)));
        let r = b.call(&Request::get("/bytes?n=3000000")).await;
        assert_eq!(r.body.len(), Some(3_000_000));
        let r = b.call(&Request::get("/sleep?ms=oops")).await;
        assert_eq!(r.status, 400);
        let t = Instant::now();
        let r = b.call(&Request::get("/cpu?us=2000")).await;
        assert_eq!(r.status, 200);
        assert!(t.elapsed() >= Duration::from_micros(2000));
    }
}
