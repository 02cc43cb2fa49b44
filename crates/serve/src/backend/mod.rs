//! Backends that answer requests: static files, reverse proxy, synthetic work and redirects. The HTTP layer and the
//! scheduler know nothing about them; a route owns one [`Backend`] and the server calls it once per request.

pub mod mime;
pub mod proxy;
pub mod redirect;
pub mod static_files;
pub mod synthetic;

use ordo_sys::thread::WorkPriority;

use crate::http::{Request, Response, Version};

/// Why a backend could not be built from its config.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("static root {path}: {source}")]
    Root {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("static root {0} is not a directory")]
    NotADirectory(std::path::PathBuf),
    #[error("{field}: {msg}")]
    Invalid { field: &'static str, msg: String },
}

/// What a backend is told of the class of the request it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    /// The kernel priority the request's CPU work runs at (the synthetic backend's `us`).
    pub priority: WorkPriority,
    /// The class's rank among the classes, in thousandths: [`TOP_RANK`] for the top class (and for a
    /// class alone), 0 for the lowest. A proxy's retry budget serves the higher ranks first.
    pub rank: u32,
}

/// The rank of the top class.
pub const TOP_RANK: u32 = 1000;

impl Default for ClassInfo {
    fn default() -> Self {
        ClassInfo {
            priority: WorkPriority::default(),
            rank: TOP_RANK,
        }
    }
}

/// The backend of one route.
#[derive(Debug)]
pub enum Backend {
    Static(static_files::StaticBackend),
    Proxy(proxy::ProxyBackend),
    Synthetic(synthetic::SyntheticBackend),
    Redirect(redirect::RedirectBackend),
}

impl Backend {
    /// Answers one request (never fails: errors become 4xx/5xx responses).
    pub async fn call(&self, req: &Request) -> Response {
        self.call_at(req, ClassInfo::default()).await
    }

    /// [`Backend::call`] for a request of `class`: the CPU work the backend does on a thread of its own
    /// for this request (the synthetic backend's `us`) runs at the class's kernel priority (static files
    /// and the proxy do their work on the shared I/O threads, where a per-request priority would apply to
    /// every other connection too, so they ignore it); a proxy's retries are taken from its budget by the
    /// class's rank.
    pub async fn call_at(&self, req: &Request, class: ClassInfo) -> Response {
        match self {
            Backend::Static(b) => b.call(req).await,
            Backend::Proxy(b) => b.call_ranked(req, class.rank).await,
            Backend::Synthetic(b) => b.call_at(req, class.priority).await,
            Backend::Redirect(b) => b.answer(req),
        }
    }

    /// An answer the backend gives without being called, before the request is scheduled: today a proxy
    /// loop (the request already carries this proxy's Via pseudonym → 508), a redirect, and an HTTP/2
    /// client's WebSocket on a route that cannot open one (501: only a proxy route tunnels, and any `2xx`
    /// would tell the client its tunnel is open). `None`: schedule it.
    pub fn answer_before_scheduling(&self, req: &Request) -> Option<Response> {
        match self {
            Backend::Proxy(b) => b.loop_response(req),
            Backend::Redirect(b) => Some(b.answer(req)),
            Backend::Static(_) | Backend::Synthetic(_) => (req.version == Version::Http2
                && proxy::upgrade_of(req).is_some())
            .then(|| {
                Response::text(
                    501,
                    "not implemented: this route does not tunnel WebSocket (only proxy routes do)",
                )
            }),
        }
    }

    /// A proxy's upstream weight that takes requests now, beside its whole weight (see
    /// `ProxyBackend::capacity`); None for the other backends, whose capacity does not drop this way.
    pub fn capacity(&self) -> Option<(f64, f64)> {
        match self {
            Backend::Proxy(b) => b.capacity(),
            Backend::Static(_) | Backend::Synthetic(_) | Backend::Redirect(_) => None,
        }
    }

    /// What the backend knows of the request's size before serving it: a static file's size in bytes, a
    /// synthetic request's work in microseconds; `None` when it cannot tell (a proxied request).
    pub fn size_hint(&self, req: &Request) -> Option<u64> {
        match self {
            Backend::Static(b) => b.size_hint(req),
            Backend::Proxy(_) | Backend::Redirect(_) => None,
            Backend::Synthetic(b) => b.size_hint(req),
        }
    }

    /// "static", "proxy", "synthetic" or "redirect".
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Static(_) => "static",
            Backend::Proxy(_) => "proxy",
            Backend::Synthetic(_) => "synthetic",
            Backend::Redirect(_) => "redirect",
        }
    }
}
