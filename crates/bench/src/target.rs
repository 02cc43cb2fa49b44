//! What a request is sent to and with: the parsed target URL and checked request headers, shared by the run
//! configuration, mix files and the HTTP/1 and HTTP/2 clients (its own module, so that configuration and
//! mixes both use it without importing each other).

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::BenchError;

/// A parsed `http[s]://host[:port]/path?query` target (HTTP/1.1, over TLS for `https`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// `https://`: the connection speaks TLS.
    pub tls: bool,
    /// Host name or address as written (used in the `Host` header).
    pub host: String,
    pub port: u16,
    /// Path and query, always starting with `/`.
    pub path: String,
}

impl Target {
    /// Parse an `http://` or `https://` URL; anything else is refused with the reason.
    pub fn parse(url: &str) -> Result<Target, BenchError> {
        let bad = |reason: &str| BenchError::InvalidUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let lower = url.to_ascii_lowercase();
        let (rest, tls) = if lower.starts_with("http://") {
            (&url[7..], false)
        } else if lower.starts_with("https://") {
            (&url[8..], true)
        } else if url.contains("://") {
            return Err(bad("only http:// and https:// URLs are supported"));
        } else {
            return Err(bad(
                "expected an absolute URL starting with http:// or https://",
            ));
        };
        let default_port = if tls { 443 } else { 80 };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = path.split('#').next().unwrap_or("/");
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        };
        if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(bad("the path contains spaces or control characters"));
        }
        if authority.contains('@') {
            return Err(bad("user information in the URL is not supported"));
        }
        if authority.is_empty() {
            return Err(bad("the host is missing"));
        }
        let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
            // [v6]:port
            let end = stripped
                .find(']')
                .ok_or_else(|| bad("unterminated IPv6 address"))?;
            let host = &stripped[..end];
            let after = &stripped[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => parse_port(p).ok_or_else(|| bad("the port is not a number 1-65535"))?,
                None if after.is_empty() => default_port,
                None => return Err(bad("junk after the IPv6 address")),
            };
            (format!("[{host}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    parse_port(p).ok_or_else(|| bad("the port is not a number 1-65535"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("the host is missing"));
        }
        if host
            .bytes()
            .any(|b| b <= b' ' || b == b'/' || b == b'?' || b == 0x7f)
        {
            return Err(bad("the host contains invalid characters"));
        }
        Ok(Target {
            url: url.to_string(),
            tls,
            host,
            port,
            path,
        })
    }

    /// `host:port` as sent in the `Host` header (port left out when it is the scheme's default).
    pub fn host_header(&self) -> String {
        if self.port == self.default_port() {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    fn default_port(&self) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// The name the TLS client verifies the certificate against and sends as SNI (an IP address is
    /// checked against the certificate's IP addresses and sends no SNI).
    pub fn server_name(&self) -> Result<rustls::pki_types::ServerName<'static>, BenchError> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
            BenchError::InvalidUrl {
                url: self.url.clone(),
                reason: format!("`{host}` is not a valid TLS server name: {e}"),
            }
        })
    }

    /// Resolve to every socket address the resolver returns (at least one).
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, BenchError> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = (host, self.port)
            .to_socket_addrs()
            .map_err(|e| BenchError::Unreachable {
                target: self.url.clone(),
                reason: format!("cannot resolve {host}: {e}"),
            })?
            .collect();
        if addrs.is_empty() {
            return Err(BenchError::Unreachable {
                target: self.url.clone(),
                reason: format!("{host} resolves to no address"),
            });
        }
        Ok(addrs)
    }

    /// Resolve `url_or_path` against this target: a path (`/x`) keeps this host; a full URL must name the
    /// same host and port (one connection pool per run).
    pub fn join(&self, url_or_path: &str) -> Result<Target, BenchError> {
        if url_or_path.starts_with('/') {
            return Target::parse(&format!(
                "{}://{}:{}{}",
                self.scheme(),
                self.host,
                self.port,
                url_or_path
            ));
        }
        let t = Target::parse(url_or_path)?;
        if !t.host.eq_ignore_ascii_case(&self.host) || t.port != self.port || t.tls != self.tls {
            return Err(BenchError::InvalidUrl {
                url: url_or_path.to_string(),
                reason: format!(
                    "every URL of a run must use the target's scheme, host and port ({}://{}:{})",
                    self.scheme(),
                    self.host,
                    self.port
                ),
            });
        }
        Ok(t)
    }
}

fn parse_port(p: &str) -> Option<u16> {
    match p.parse::<u16>() {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// A request header `Name: value`, checked so it cannot break the request framing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
}

impl Header {
    /// Parse `Name: value`.
    pub fn parse(s: &str) -> Result<Header, BenchError> {
        let (name, value) = s.split_once(':').ok_or_else(|| BenchError::InvalidHeader {
            header: s.to_string(),
            reason: "expected `Name: value`".to_string(),
        })?;
        Header::new(name.trim(), value.trim())
    }

    /// Check a name and value pair.
    pub fn new(name: &str, value: &str) -> Result<Header, BenchError> {
        let bad = |reason: &str| BenchError::InvalidHeader {
            header: format!("{name}: {value}"),
            reason: reason.to_string(),
        };
        if name.is_empty() {
            return Err(bad("the header name is empty"));
        }
        if !name.bytes().all(is_token_byte) {
            return Err(bad(
                "the header name may only hold letters, digits and !#$%&'*+-.^_`|~",
            ));
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(bad(
                "the header value contains a line break or NUL character",
            ));
        }
        Ok(Header {
            name: name.to_string(),
            value: value.to_string(),
        })
    }
}

pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 8080, "/a/b?x=1")
        );
        let t = Target::parse("http://example.com").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        assert_eq!(t.host_header(), "example.com");
        let t = Target::parse("http://[::1]:81?q").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("[::1]", 81, "/?q")
        );
        assert_eq!(t.host_header(), "[::1]:81");
    }

    #[test]
    fn refuses_bad_urls() {
        for u in [
            "ftp://x/",
            "x/y",
            "http://",
            "http://h:0/",
            "http://h:99999/",
            "http://h:ab/",
            "http://h/a b",
        ] {
            let e = Target::parse(u).unwrap_err();
            assert!(matches!(e, BenchError::InvalidUrl { .. }), "{u}: {e}");
        }
        let e = Target::parse("ftp://x/").unwrap_err().to_string();
        assert!(e.contains("https://"), "{e}");
    }

    #[test]
    fn https_urls() {
        let t = Target::parse("https://example.com/a").unwrap();
        assert!(t.tls);
        assert_eq!((t.port, t.host_header().as_str()), (443, "example.com"));
        let t = Target::parse("HTTPS://[::1]:8443").unwrap();
        assert_eq!((t.port, t.host_header().as_str()), (8443, "[::1]:8443"));
        assert_eq!(
            t.server_name().unwrap(),
            rustls::pki_types::ServerName::try_from("::1").unwrap()
        );
        let j = t.join("/x").unwrap();
        assert!(j.tls && j.port == 8443 && j.path == "/x", "{j:?}");
        assert!(t.join("http://[::1]:8443/x").is_err(), "scheme must match");
        assert_eq!(
            Target::parse("http://h:443/").unwrap().host_header(),
            "h:443"
        );
    }

    #[test]
    fn joins_paths() {
        let t = Target::parse("http://127.0.0.1:9/").unwrap();
        assert_eq!(t.join("/x?n=1").unwrap().path, "/x?n=1");
        assert!(t.join("http://127.0.0.1:9/y").is_ok());
        assert!(t.join("http://127.0.0.1:10/y").is_err());
    }

    #[test]
    fn parses_headers() {
        let h = Header::parse("X-User:  light ").unwrap();
        assert_eq!((h.name.as_str(), h.value.as_str()), ("X-User", "light"));
        assert!(Header::parse("no colon").is_err());
        assert!(Header::parse("Bad Name: x").is_err());
        assert!(Header::parse(": x").is_err());
        assert!(Header::new("X", "a\r\nb").is_err());
    }
}
