//! Where the upstreams are and how a connection to one is made: the `host:port` forms accepted, the check
//! that an upstream is not the server's own listener, TCP connect and the TLS handshake within
//! `connect_timeout`, and the TLS client configuration for `https://` upstreams.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::net::TcpStream;

use super::BackendError;

use super::*;
use crate::tls::{UpstreamStream, UpstreamTls};

/// Whether connecting to `upstream` (as written in the config) would reach a server listening on `listen`:
/// the same port and (after `0.0.0.0`/`[::]` in the upstream is read as the loopback address Linux connects
/// to) the same address, or a loopback upstream (`127.x`, `[::1]`, `localhost`) while `listen` is
/// unspecified (`0.0.0.0` takes IPv4 only, `[::]` both families). Other host names are not resolved: the
/// Via check catches a loop through them at run time. An ephemeral listen port (0) never matches.
pub(crate) fn points_at_listener(upstream: &str, listen: std::net::SocketAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let Ok(hostport) = parse_upstream(upstream) else {
        return false;
    };
    let Some((host, port)) = hostport.rsplit_once(':') else {
        return false;
    };
    if listen.port() == 0 || port.parse::<u16>().ok() != Some(listen.port()) {
        return false;
    }
    let l = listen.ip();
    let reaches = |u: IpAddr| {
        let u = match u {
            IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            u => u,
        };
        u == l || (l.is_unspecified() && u.is_loopback() && (l.is_ipv6() || u.is_ipv4()))
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(u) => reaches(u),
        Err(_) => {
            let h = host.trim_end_matches('.').to_ascii_lowercase();
            (h == "localhost" || h.ends_with(".localhost"))
                && (reaches(IpAddr::V4(Ipv4Addr::LOCALHOST))
                    || reaches(IpAddr::V6(Ipv6Addr::LOCALHOST)))
        }
    }
}

pub(crate) fn parse_upstream(s: &str) -> Result<String, String> {
    parse_upstream_url(s).map(|(hostport, _tls)| hostport)
}

/// `host:port` of an upstream and whether it is `https://` (port 443 then when omitted, else 80).
pub(crate) fn parse_upstream_url(s: &str) -> Result<(String, bool), String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (hostport, tls) = if lower.starts_with("https://") {
        (&t[8..], true)
    } else if lower.starts_with("http://") {
        (&t[7..], false)
    } else {
        (t, false)
    };
    let hostport = hostport.trim_end_matches('/');
    if hostport.is_empty() || hostport.contains(['/', '?', '#', ' ', '@']) {
        return Err(format!(
            "{s:?}: expected host:port, http://host:port or https://host:port"
        ));
    }
    let has_port = if let Some(rest) = hostport.strip_prefix('[') {
        rest.contains("]:")
    } else {
        hostport.contains(':')
    };
    if has_port {
        let port = hostport.rsplit(':').next().unwrap_or("");
        if port.parse::<u16>().is_err() {
            return Err(format!("{s:?}: bad port {port:?}"));
        }
        Ok((hostport.to_string(), tls))
    } else if tls {
        Ok((format!("{hostport}:443"), tls))
    } else {
        Ok((format!("{hostport}:80"), tls))
    }
}

/// The TLS client configuration of a backend's `https://` upstreams: the system's CA certificates, or
/// `ca_file`'s, or none checked at all (`danger_accept_invalid_certs`).
pub(super) fn upstream_client_config(
    cfg: &ProxyConfig,
) -> Result<Arc<rustls::ClientConfig>, BackendError> {
    if cfg.danger_accept_invalid_certs {
        tracing::warn!(
            "proxy: danger_accept_invalid_certs is set: https upstream certificates are NOT verified"
        );
        return Ok(crate::tls::client_config(None, &[crate::tls::ALPN_HTTP1]));
    }
    let roots =
        crate::tls::root_store(cfg.ca_file.as_deref()).map_err(|msg| BackendError::Invalid {
            field: if cfg.ca_file.is_some() {
                "ca_file"
            } else {
                "upstreams"
            },
            msg,
        })?;
    Ok(crate::tls::client_config(
        Some(roots),
        &[crate::tls::ALPN_HTTP1],
    ))
}

impl ProxyBackend {
    pub(super) async fn connect(&self, up: &Upstream) -> Result<UpConn, ExchangeError> {
        match tokio::time::timeout(
            self.cfg.connect_timeout,
            TcpStream::connect(up.addr.as_str()),
        )
        .await
        {
            Err(_) => Err(ExchangeError::ConnectTimeout),
            Ok(Err(e)) => Err(ExchangeError::Connect(e.to_string())),
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                let stream = match &up.tls {
                    None => UpstreamStream::Plain(stream),
                    Some(tls) => self.handshake(tls, stream).await?,
                };
                Ok(UpConn {
                    stream,
                    buf: BytesMut::with_capacity(8 * 1024),
                    wbuf: BytesMut::with_capacity(1024),
                    timer: Box::pin(tokio::time::sleep(self.cfg.read_timeout)),
                })
            }
        }
    }

    /// The TLS handshake with an `https://` upstream (within `connect_timeout`): a failure (an untrusted
    /// or wrong-name certificate, say) is 502, a timeout 504.
    pub(super) async fn handshake(
        &self,
        tls: &UpstreamTls,
        tcp: TcpStream,
    ) -> Result<UpstreamStream, ExchangeError> {
        match tokio::time::timeout(self.cfg.connect_timeout, tls.connect(tcp)).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(ExchangeError::Tls(format!("TLS handshake failed: {e}"))),
            Err(_) => Err(ExchangeError::ConnectTimeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_addresses() {
        assert_eq!(
            parse_upstream("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".into())
        );
        assert_eq!(
            parse_upstream("http://backend:81/"),
            Ok("backend:81".into())
        );
        assert_eq!(parse_upstream("backend"), Ok("backend:80".into()));
        assert_eq!(parse_upstream("[::1]:9000"), Ok("[::1]:9000".into()));
        assert_eq!(parse_upstream_url("https://x:1"), Ok(("x:1".into(), true)));
        assert_eq!(parse_upstream_url("HTTPS://x/"), Ok(("x:443".into(), true)));
        assert_eq!(parse_upstream_url("http://x"), Ok(("x:80".into(), false)));
        assert!(parse_upstream("x:notaport").is_err());
        assert!(parse_upstream("x:1/path").is_err());
        assert!(parse_upstream("").is_err());
    }

    #[test]
    fn upstream_pointing_at_the_listener() {
        let at = |u: &str, l: &str| points_at_listener(u, l.parse().unwrap());
        assert!(at("127.0.0.1:8080", "127.0.0.1:8080"));
        assert!(at("http://127.0.0.1:8080/", "127.0.0.1:8080"));
        assert!(at("localhost:8080", "127.0.0.1:8080"));
        assert!(at("LOCALHOST.:8080", "[::1]:8080"));
        assert!(at("0.0.0.0:8080", "127.0.0.1:8080"));
        assert!(at("[::]:8080", "[::1]:8080"));
        assert!(!at("[::]:8080", "10.1.2.3:8080"));
        assert!(!at("localhost:8080", "127.0.0.2:8080"));
        assert!(at("127.0.0.1:8080", "0.0.0.0:8080"));
        assert!(at("[::1]:8080", "[::]:8080"));
        assert!(at("127.0.0.1:8080", "[::]:8080"));
        assert!(at("10.1.2.3:8080", "10.1.2.3:8080"));
        assert!(at("[::1]:8080", "[::1]:8080"));
        assert!(at("localhost:80", "0.0.0.0:80"));
        assert!(at("localhost", "0.0.0.0:80"));
        // a different port, address or family, a remote name, an ephemeral listen port: not refused
        assert!(!at("127.0.0.1:8081", "127.0.0.1:8080"));
        assert!(!at("127.0.0.2:8080", "127.0.0.1:8080"));
        assert!(!at("[::1]:8080", "127.0.0.1:8080"));
        assert!(!at("[::1]:8080", "0.0.0.0:8080"));
        assert!(!at("10.1.2.3:8080", "0.0.0.0:8080"));
        assert!(!at("backend:8080", "0.0.0.0:8080"));
        assert!(!at("localhost:8080", "10.1.2.3:8080"));
        assert!(!at("127.0.0.1:0", "127.0.0.1:0"));
        assert!(at("https://127.0.0.1:8080", "127.0.0.1:8080"));
    }
}
