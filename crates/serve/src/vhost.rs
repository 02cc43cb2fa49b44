//! Virtual host names: a route's `host` pattern (exact, `*.wildcard` or any) and a request's host as
//! routing compares it. A leaf, shared by the configuration check, the router and the redirect backend.

/// The host names a route serves: any (no `host`), one name exactly, or a wildcard's subdomains.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum HostPattern {
    #[default]
    Any,
    /// A lower-case name, `api.example.com`.
    Exact(String),
    /// `*.example.com`, kept as the lower-case suffix `.example.com`: one or more labels before it.
    Wildcard(String),
}

impl HostPattern {
    /// Parse a route's `host`: a name (`api.example.com`), `*.example.com`, or `*` (any); no port, no
    /// scheme, letters, digits, `-` and `.` only (IP addresses are names too).
    pub fn parse(s: &str) -> Result<HostPattern, String> {
        let lower = s.trim().to_ascii_lowercase();
        if lower == "*" {
            return Ok(HostPattern::Any);
        }
        let lower = lower.strip_suffix('.').unwrap_or(&lower);
        let (wild, name) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, lower),
        };
        let valid_label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if name.is_empty() || name.len() > 253 || !name.split('.').all(valid_label) {
            return Err(format!(
                "`{s}` is not a host name (`api.example.com`, `*.example.com` or `*`; no port or scheme)"
            ));
        }
        Ok(if wild {
            HostPattern::Wildcard(format!(".{name}"))
        } else {
            HostPattern::Exact(name.to_string())
        })
    }

    /// How well `host` (lower case, no port) matches: None when it does not; more specific is greater
    /// (an exact name over a wildcard, a longer wildcard over a shorter one, any last).
    pub fn rank(&self, host: Option<&str>) -> Option<(u8, usize)> {
        match (self, host) {
            (HostPattern::Any, _) => Some((0, 0)),
            (HostPattern::Exact(n), Some(h)) => (h == n).then_some((2, n.len())),
            (HostPattern::Wildcard(sfx), Some(h)) => {
                (h.len() > sfx.len() && h.ends_with(sfx.as_str())).then_some((1, sfx.len()))
            }
            (_, None) => None,
        }
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostPattern::Any => f.write_str("*"),
            HostPattern::Exact(n) => f.write_str(n),
            HostPattern::Wildcard(s) => write!(f, "*{s}"),
        }
    }
}

/// A request's host name for routing: the Host header (HTTP/2's `:authority`) without its port or a
/// trailing dot, lower case; an IPv6 literal keeps its brackets.
pub fn request_host(host: &str) -> String {
    let name = if host.starts_with('[') {
        host.find(']').map_or(host, |i| &host[..=i])
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_parse_and_rank() {
        assert_eq!(HostPattern::parse("*"), Ok(HostPattern::Any));
        assert_eq!(
            HostPattern::parse("API.Example.com."),
            Ok(HostPattern::Exact("api.example.com".into()))
        );
        assert_eq!(
            HostPattern::parse("*.example.com"),
            Ok(HostPattern::Wildcard(".example.com".into()))
        );
        for bad in [
            "", "a:80", "http://a", "a..b", "*.", "a.*.b", "a b", "*x.com",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        let w = HostPattern::parse("*.example.com").unwrap();
        assert!(w.rank(Some("a.example.com")).is_some());
        assert!(w.rank(Some("a.b.example.com")).is_some());
        assert!(w.rank(Some("example.com")).is_none());
        assert!(w.rank(Some("xexample.com")).is_none());
        assert!(w.rank(None).is_none());
        assert_eq!(request_host("API.example.com:8080"), "api.example.com");
        assert_eq!(request_host("example.com."), "example.com");
        assert_eq!(request_host("[::1]:443"), "[::1]");
        assert_eq!(request_host("[::1]"), "[::1]");
    }
}
