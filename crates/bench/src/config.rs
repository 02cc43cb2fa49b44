//! The checked run configuration: what the engine needs, built in Rust (demo, tune) or from the command line,
//! plus the small parsers (URL, header, duration) the command line and mix files share.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;

use crate::BenchError;
use crate::mix::Mix;

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

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Durations in flags and mix files: `250ms`, `2s`, `1.5m`, `500us`, or a bare number of seconds.
pub use ordo_sys::units::parse_duration_or_secs as parse_duration;

/// When the run ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Exactly this many measured requests (completed or failed).
    Requests(u64),
    /// Measure for this long (requests in flight at the end are abandoned, as wrk does).
    Duration(Duration),
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Each connection sends its next request as soon as the previous response is in (ab, wrk).
    Closed,
    /// `rate` requests per second in total, spread evenly over the connections; latency is also measured
    /// from the time each request was due (coordinated omission corrected, wrk2).
    Open { rate: f64 },
}

/// Everything one run needs. Build it with [`BenchConfig::new`] and adjust the public fields, or resolve it
/// from the command line; [`crate::run`] validates it first.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub target: Target,
    /// Concurrent connections (closed loop: concurrent clients).
    pub connections: usize,
    /// Worker threads (each runs a single-threaded runtime with its share of the connections).
    pub threads: usize,
    pub stop: Stop,
    pub pacing: Pacing,
    /// Reuse connections (HTTP/1.1 keep-alive); false opens a new connection per request (ab's default).
    pub keepalive: bool,
    pub method: String,
    /// Extra headers sent with every request (a mix class adds its own).
    pub headers: Vec<Header>,
    pub body: Option<Bytes>,
    /// Per-request limit (connect + send + receive); a request over it counts as an exception.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Run this long first and leave it out of every statistic.
    pub warmup: Duration,
    /// Class mix; `None` means one class named `default` requesting the target.
    pub mix: Option<Mix>,
    /// Count a response whose body length differs from the first one for the same URL as a `length`
    /// failure (ab's rule). Off by default because dynamic responses vary.
    pub strict_length: bool,
    /// Sample this process's threads (CPU, context switches, run-queue wait) during the measured part.
    pub server_pid: Option<i32>,
    /// Seed for random URL choice.
    pub seed: u64,
    /// With a duration: let the requests in flight when it ends finish (within `timeout`) and count them,
    /// so the sample is every request *started* in the measured window; a closed loop keeps its load on,
    /// unmeasured, until they are in, so they finish under the load they started in. Without it they are
    /// abandoned, as wrk does, which leaves out the longest requests and biases means low by about R/T
    /// (`ordo demo`).
    pub drain: bool,
    /// https: verification of the server's certificate, trust roots and session resumption.
    pub tls: TlsOptions,
    /// Speak HTTP/2: over TLS by ALPN for an `https://` target (`--h2`), with prior knowledge (h2c) for an
    /// `http://` one (`--h2c`).
    pub h2: bool,
    /// HTTP/2: concurrent streams per connection, each a client of the loop (h2load's `-m`).
    pub streams: usize,
}

/// How an `https://` target is connected to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Accept any server certificate (curl's `-k`): for test servers with self-signed certificates.
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file instead of the system's.
    pub cacert: Option<PathBuf>,
    /// Resume TLS sessions on new connections (as browsers do); off, every connection makes a full
    /// handshake (as ab and wrk do), which is what a handshake rate measures.
    pub resume: bool,
}

impl BenchConfig {
    /// A closed-loop keep-alive GET of `url` with 1 thread, 10 connections for 10 s.
    pub fn new(url: &str) -> Result<BenchConfig, BenchError> {
        Ok(BenchConfig {
            target: Target::parse(url)?,
            connections: 10,
            threads: 1,
            stop: Stop::Duration(Duration::from_secs(10)),
            pacing: Pacing::Closed,
            keepalive: true,
            method: "GET".to_string(),
            headers: Vec::new(),
            body: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            warmup: Duration::ZERO,
            mix: None,
            strict_length: false,
            server_pid: None,
            seed: 0x5eed,
            drain: false,
            tls: TlsOptions::default(),
            h2: false,
            streams: 1,
        })
    }

    /// Check the combination; every error names the offending setting.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |field: &str, msg: String| BenchError::InvalidConfig {
            field: field.to_string(),
            message: msg,
        };
        if self.connections == 0 {
            return Err(bad("connections", "must be at least 1".into()));
        }
        if self.connections > 100_000 {
            return Err(bad("connections", "at most 100000".into()));
        }
        if self.threads == 0 {
            return Err(bad("threads", "must be at least 1".into()));
        }
        match self.stop {
            Stop::Requests(0) => return Err(bad("requests", "must be at least 1".into())),
            Stop::Duration(d) if d.is_zero() => {
                return Err(bad("duration", "must be longer than 0".into()));
            }
            _ => {}
        }
        if let Pacing::Open { rate } = self.pacing {
            if !(rate.is_finite() && rate > 0.0 && rate <= 10_000_000.0) {
                return Err(bad("rate", format!("must be > 0 and <= 1e7 (got {rate})")));
            }
        }
        if self.method.is_empty() || !self.method.bytes().all(is_token_byte) {
            return Err(bad(
                "method",
                format!("`{}` is not a valid HTTP method", self.method),
            ));
        }
        if self.timeout.is_zero() {
            return Err(bad("timeout", "must be longer than 0".into()));
        }
        if self.connect_timeout.is_zero() {
            return Err(bad("connect-timeout", "must be longer than 0".into()));
        }
        if let Some(mix) = &self.mix {
            mix.validate_against(&self.target)?;
        }
        if self.streams == 0 || self.streams > 10_000 {
            return Err(bad(
                "streams",
                format!("must be 1 – 10000 (got {})", self.streams),
            ));
        }
        if self.streams > 1 && !self.h2 {
            return Err(bad(
                "streams",
                "several streams per connection need HTTP/2 (--h2 or --h2c)".into(),
            ));
        }
        if self.h2 && !self.keepalive {
            return Err(bad(
                "keepalive",
                "HTTP/2 always reuses its connections; --no-keepalive is for HTTP/1.1".into(),
            ));
        }
        if self.connections.saturating_mul(self.streams) > 1_000_000 {
            return Err(bad(
                "streams",
                "connections × streams must be at most 1000000".into(),
            ));
        }
        Ok(())
    }

    /// The threads actually used (never more than connections).
    pub(crate) fn effective_threads(&self) -> usize {
        self.threads.min(self.connections).max(1)
    }
}

/// Where a mix came from, for error messages.
pub(crate) fn display_path(p: &Option<PathBuf>) -> String {
    p.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<mix>".to_string())
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

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("2 weeks").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn validates() {
        let mut c = BenchConfig::new("http://127.0.0.1:1/").unwrap();
        c.validate().unwrap();
        c.connections = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("connections")
        );
        c.connections = 1;
        c.pacing = Pacing::Open { rate: 0.0 };
        assert!(c.validate().unwrap_err().to_string().contains("rate"));
        c.pacing = Pacing::Closed;
        c.method = "G T".into();
        assert!(c.validate().unwrap_err().to_string().contains("method"));
    }
}
