//! The redirect backend: a route that answers every request with a redirect to a target built from the
//! request (`https://{host}{uri}` sends HTTP to HTTPS), without taking a worker.

use bytes::BytesMut;
use serde::Deserialize;

use super::BackendError;
use crate::http::parse::origin_form;
use crate::http::{Request, Response};

/// `redirect = { to = "https://{host}{uri}", status = 301 }`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RedirectConfig {
    /// The target: an absolute URL (`https://…`, `http://…`) or a path (`/…`), with the placeholders
    /// `{host}` (the request's host name, no port), `{uri}` (path and query), `{path}` and `{query}`.
    pub to: String,
    /// 301, 302, 303, 307 or 308 (default 301).
    #[serde(default = "default_status")]
    pub status: u16,
}

fn default_status() -> u16 {
    301
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Host,
    Uri,
    Path,
    Query,
}

/// A compiled redirect.
#[derive(Debug)]
pub struct RedirectBackend {
    parts: Vec<Part>,
    status: u16,
}

impl RedirectBackend {
    /// Checks the status and the target (its placeholders and its form).
    pub fn new(cfg: &RedirectConfig) -> Result<RedirectBackend, BackendError> {
        let invalid = |field, msg: String| BackendError::Invalid { field, msg };
        if !matches!(cfg.status, 301 | 302 | 303 | 307 | 308) {
            return Err(invalid(
                "status",
                format!(
                    "{} is not a redirect status (301, 302, 303, 307 or 308)",
                    cfg.status
                ),
            ));
        }
        let to = &cfg.to;
        let lower = to.to_ascii_lowercase();
        let absolute = ["http://", "https://"]
            .iter()
            .any(|s| lower.starts_with(s) && lower.len() > s.len());
        if !(absolute || to.starts_with('/')) {
            return Err(invalid(
                "to",
                format!("`{to}` must be an absolute http(s) URL or start with `/`"),
            ));
        }
        if to.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(invalid(
                "to",
                format!(
                    "`{}` contains spaces or control characters",
                    to.escape_debug()
                ),
            ));
        }
        let mut parts = Vec::new();
        let mut rest = to.as_str();
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            let Some(close) = rest[open..].find('}') else {
                return Err(invalid("to", format!("unclosed `{{` in `{to}`")));
            };
            parts.push(match &rest[open + 1..open + close] {
                "host" => Part::Host,
                "uri" => Part::Uri,
                "path" => Part::Path,
                "query" => Part::Query,
                other => {
                    return Err(invalid(
                        "to",
                        format!(
                            "unknown placeholder `{{{other}}}` in `{to}` (known: {{host}}, {{uri}}, {{path}}, {{query}})"
                        ),
                    ));
                }
            });
            rest = &rest[open + close + 1..];
        }
        if rest.contains('}') {
            return Err(invalid("to", format!("`}}` without `{{` in `{to}`")));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(RedirectBackend {
            parts,
            status: cfg.status,
        })
    }

    /// The redirect for `req`: its status, `Location` and a short text body.
    pub fn answer(&self, req: &Request) -> Response {
        let mut out = BytesMut::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                Part::Host => {
                    let host = req.header("host").map(crate::vhost::request_host);
                    out.extend_from_slice(host.as_deref().unwrap_or("localhost").as_bytes());
                }
                Part::Uri => origin_form(&req.path, req.query.as_deref(), &mut out),
                Part::Path => origin_form(&req.path, None, &mut out),
                Part::Query => out.extend_from_slice(req.query.as_deref().unwrap_or("").as_bytes()),
            }
        }
        let location = String::from_utf8_lossy(&out).into_owned();
        Response::text(self.status, &format!("redirecting to {location}\n"))
            .with_header("Location", location)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(to: &str, status: u16) -> Result<RedirectBackend, String> {
        RedirectBackend::new(&RedirectConfig {
            to: to.into(),
            status,
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn targets_are_built_from_the_request() {
        let b = backend("https://{host}{uri}", 308).unwrap();
        // (the path as routing sees it: decoded)
        let req = Request::get("/a b/c?x=1&y").with_header("Host", "Example.com:8080");
        let r = b.answer(&req);
        assert_eq!(r.status, 308);
        assert_eq!(
            r.header("location"),
            Some("https://example.com/a%20b/c?x=1&y")
        );
        let b = backend("/new{path}?from={query}", 302).unwrap();
        assert_eq!(
            b.answer(&req).header("location"),
            Some("/new/a%20b/c?from=x=1&y")
        );
        let b = backend("https://{host}/", 301).unwrap();
        assert_eq!(
            b.answer(&Request::get("/")).header("location"),
            Some("https://localhost/"),
            "no Host (HTTP/1.0)"
        );
    }

    #[test]
    fn bad_statuses_and_targets_are_refused() {
        for s in [200, 300, 304, 404] {
            let e = backend("/x", s).unwrap_err();
            assert!(e.contains("status") && e.contains("not a redirect"), "{e}");
        }
        for (to, want) in [
            ("example.com/x", "absolute"),
            ("ftp://x/", "absolute"),
            ("https://", "absolute"),
            ("/x y", "spaces"),
            ("/{nope}", "unknown placeholder `{nope}`"),
            ("/{host", "unclosed"),
            ("/x}", "without"),
        ] {
            let e = backend(to, 301).unwrap_err();
            assert!(e.contains(want), "{to}: {e}");
        }
    }
}
