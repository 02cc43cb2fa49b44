//! Who may use the admin endpoints: compiled from `[admin]` with the rest of the configuration (so a bad token
//! file is refused at start-up and on reload like any other key), and checked on every admin request before
//! any endpoint runs — the Host must name the admin listener (DNS rebinding), a browser's Origin must be its
//! own (cross-site forms and fetches), and the token must match when one is set.

use std::net::{IpAddr, SocketAddr};

use crate::config::{Invalid, Secret, ServeConfig};
use crate::http::{Request, Response};
use crate::keypath;

/// Whether `given` equals `want`, in a time that depends on `given`'s length only (not on where they
/// differ), so the token cannot be guessed byte by byte from response times.
fn same_secret(given: &[u8], want: &[u8]) -> bool {
    let mut diff = (given.len() != want.len()) as u8;
    for (i, g) in given.iter().enumerate() {
        let w = if want.is_empty() {
            0
        } else {
            want[i % want.len()]
        };
        diff |= g ^ w;
    }
    std::hint::black_box(diff) == 0
}

/// Who may use the admin endpoints: compiled from `[admin]` with the rest of the configuration, so a bad
/// token file is refused at start-up and on reload like any other key.
#[derive(Clone, Debug, Default)]
pub(crate) struct AdminGuard {
    token: Option<Secret>,
    /// lower-case, without a trailing dot
    allowed_hosts: Vec<String>,
}

impl AdminGuard {
    pub(crate) fn build(cfg: &ServeConfig) -> Result<Self, Invalid> {
        let a = &cfg.admin;
        let token = match (&a.token, &a.token_file) {
            (Some(_), Some(_)) => {
                return Err(Invalid::new(
                    keypath!["admin", "token_file"],
                    "give `token` or `token_file`, not both",
                ));
            }
            (Some(t), None) => Some(
                check_token(t.expose()).map_err(|e| Invalid::new(keypath!["admin", "token"], e))?,
            ),
            (None, Some(p)) => {
                let path = cfg.resolve(p);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    Invalid::new(
                        keypath!["admin", "token_file"],
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                let first = text.lines().next().unwrap_or("").trim();
                Some(check_token(first).map_err(|e| {
                    Invalid::new(
                        keypath!["admin", "token_file"],
                        format!("{}: {e}", path.display()),
                    )
                })?)
            }
            (None, None) => None,
        };
        let mut allowed_hosts = Vec::new();
        for (i, h) in a.allowed_hosts.iter().enumerate() {
            let name = h.trim_end_matches('.').to_ascii_lowercase();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            {
                return Err(Invalid::new(
                    keypath!["admin", "allowed_hosts", i],
                    format!(
                        "{h:?} is not a host name (give the name alone: no scheme, port or path)"
                    ),
                ));
            }
            allowed_hosts.push(name);
        }
        Ok(AdminGuard {
            token,
            allowed_hosts,
        })
    }
}

fn check_token(t: &str) -> Result<Secret, String> {
    if t.is_empty() {
        return Err("the token is empty".into());
    }
    if !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "the token must be printable ASCII without spaces (it is sent in a header)".into(),
        );
    }
    Ok(Secret::new(t))
}

/// `host[:port]` or `[v6]:port` → (host in lower case without a trailing dot, port); None when malformed.
fn split_authority(a: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        h.parse::<std::net::Ipv6Addr>().ok()?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?)),
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    // an unbracketed IPv6 address is no authority
    if host.is_empty() || (!a.starts_with('[') && host.contains(':')) {
        return None;
    }
    Some((host.trim_end_matches('.').to_ascii_lowercase(), port))
}

/// Whether a request's Host names this admin listener: its IP address (any address when it listens on all
/// of them), `localhost` when it listens on loopback (or on all addresses), or a configured name. A DNS
/// name that is none of these is what a rebinding attack sends. The port is not compared: tunnels and port
/// forwards (`ssh -L`, `kubectl port-forward`) change it, and rebinding is about the name.
fn host_allowed(host: &str, listen: SocketAddr, allowed: &[String]) -> bool {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return listen.ip().is_unspecified() || ip.to_canonical() == listen.ip().to_canonical();
    }
    if host == "localhost" {
        return listen.ip().is_loopback() || listen.ip().is_unspecified();
    }
    allowed.iter().any(|a| a == host)
}

/// The refusal for a request that may not use the admin endpoints, if it may not.
pub(crate) fn refuse(
    guard: &AdminGuard,
    listen: Option<SocketAddr>,
    req: &Request,
) -> Option<Response> {
    let host = req.header("host");
    if let (Some(h), Some(listen)) = (host, listen) {
        let ok = split_authority(h)
            .is_some_and(|(name, _)| host_allowed(&name, listen, &guard.allowed_hosts));
        if !ok {
            return Some(Response::text(
                403,
                &format!(
                    "Host {h:?} is not an address of this admin listener (add the name to [admin] allowed_hosts)"
                ),
            ));
        }
    }
    // The admin serves no pages, so a browser request from any other origin is some web page reaching in
    // (a cross-site form or fetch to 127.0.0.1): refused. Browsers send Origin with every POST.
    if let Some(origin) = req.header("origin") {
        let same = origin.split_once("://").and_then(|(scheme, auth)| {
            let default = if scheme.eq_ignore_ascii_case("https") {
                443
            } else {
                80
            };
            let (oh, op) = split_authority(auth)?;
            let (hh, hp) = split_authority(host?)?;
            Some(oh == hh && op.unwrap_or(default) == hp.unwrap_or(default))
        });
        if same != Some(true) {
            return Some(Response::text(403, "cross-origin requests are refused"));
        }
    }
    let get = req.method == "GET" || req.method == "HEAD";
    if !get
        && req.header("sec-fetch-site").is_some_and(|s| {
            s.eq_ignore_ascii_case("cross-site") || s.eq_ignore_ascii_case("same-site")
        })
    {
        return Some(Response::text(403, "cross-site requests are refused"));
    }
    if let Some(token) = &guard.token {
        let given = req
            .header("authorization")
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim());
        if !given.is_some_and(|t| same_secret(t.as_bytes(), token.expose().as_bytes())) {
            return Some(
                Response::text(
                    401,
                    "this admin listener needs `Authorization: Bearer <token>`",
                )
                .with_header("WWW-Authenticate", "Bearer realm=\"ordo admin\""),
            );
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_split_into_name_and_port() {
        let s = |a: &str| split_authority(a);
        assert_eq!(s("127.0.0.1:9090"), Some(("127.0.0.1".into(), Some(9090))));
        assert_eq!(s("LocalHost."), Some(("localhost".into(), None)));
        assert_eq!(s("[::1]:80"), Some(("::1".into(), Some(80))));
        assert_eq!(s("[::1]"), Some(("::1".into(), None)));
        assert_eq!(s("[::1]80"), None);
        assert_eq!(s("[nope]:80"), None);
        assert_eq!(s("::1"), None, "IPv6 needs brackets");
        assert_eq!(s("h:99999"), None);
        assert_eq!(s(":80"), None);
        assert_eq!(s(""), None);
    }

    #[test]
    fn hosts_allowed_by_listen_address() {
        let lo: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:9090".parse().unwrap();
        let lan: SocketAddr = "10.0.0.5:9090".parse().unwrap();
        let v6: SocketAddr = "[::1]:9090".parse().unwrap();
        let names = vec!["admin.internal".to_string()];
        assert!(host_allowed("127.0.0.1", lo, &[]));
        assert!(host_allowed("localhost", lo, &[]));
        assert!(!host_allowed("127.0.0.2", lo, &[]));
        assert!(!host_allowed("evil.example", lo, &[]));
        assert!(
            host_allowed("10.9.9.9", any, &[]),
            "listening on every address"
        );
        assert!(host_allowed("localhost", any, &[]));
        assert!(host_allowed("10.0.0.5", lan, &[]));
        assert!(
            !host_allowed("localhost", lan, &[]),
            "not listening on loopback"
        );
        assert!(host_allowed("admin.internal", lan, &names));
        assert!(host_allowed("::1", v6, &[]));
        assert!(host_allowed("localhost", v6, &[]));
        assert!(!host_allowed("127.0.0.1", v6, &[]));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abd", b"abc"));
        assert!(!same_secret(b"ab", b"abc"));
        assert!(
            !same_secret(b"abcabc", b"abc"),
            "a repeat of the token is not the token"
        );
        assert!(!same_secret(b"", b"abc"));
        assert!(!same_secret(b"x", b""));
        assert_eq!(format!("{:?}", Secret::new("hunter2")), "Secret(..)");
    }
}
