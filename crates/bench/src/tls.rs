//! TLS for `https://` targets: the client configuration (the server's certificate verified against the
//! system's CA certificates or `--cacert`, or not at all with `--insecure`; session resumption only when
//! asked), the connector every connection of the run hands its socket to, and a first handshake before the
//! run so a certificate problem is reported once, with what to do about it, instead of as a run of failures.
//! The pieces serve's proxy uses too (the rustls configuration, connector and stream) are `ordo_sys::tls`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::BenchError;
use crate::config::TlsOptions;
use crate::target::Target;

/// What every connection of a run needs to speak TLS.
pub(crate) type Tls = ordo_sys::tls::Connector;

fn invalid(field: &str, message: String) -> BenchError {
    BenchError::InvalidConfig {
        field: field.to_string(),
        message,
    }
}

/// The client configuration for `opts`, offering `h2` by ALPN when `h2`, else `http/1.1`.
pub(crate) fn client_config(
    opts: &TlsOptions,
    h2: bool,
) -> Result<Arc<rustls::ClientConfig>, BenchError> {
    let roots = if opts.insecure {
        None
    } else {
        Some(root_store(opts)?)
    };
    let alpn: &[u8] = if h2 { b"h2" } else { b"http/1.1" };
    let mut cc = ordo_sys::tls::client_config(roots, &[alpn]);
    if !opts.resume {
        cc.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(cc))
}

/// The certificates a server's is verified against: `--cacert`'s, else the system's.
fn root_store(opts: &TlsOptions) -> Result<rustls::RootCertStore, BenchError> {
    let mut roots = rustls::RootCertStore::empty();
    match &opts.cacert {
        Some(p) => {
            let text =
                std::fs::read(p).map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
            for c in CertificateDer::pem_slice_iter(&text) {
                let c = c.map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
                roots
                    .add(c)
                    .map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
            }
            if roots.is_empty() {
                return Err(invalid(
                    "cacert",
                    format!("{}: no PEM certificate in it", p.display()),
                ));
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    Ok(roots)
}

/// Builds the run's TLS side and makes one handshake with the server at `addr` (blocking, within
/// `limit`), so a bad certificate — or, with `h2`, a server that does not offer HTTP/2 — stops the run at
/// once with the reason.
pub(crate) fn prepare(
    target: &Target,
    opts: &TlsOptions,
    addr: SocketAddr,
    limit: Duration,
    h2: bool,
) -> Result<Tls, BenchError> {
    let config = client_config(opts, h2)?;
    let name = target.server_name()?;
    let unreachable = |reason: String| BenchError::Unreachable {
        target: target.url.clone(),
        reason,
    };
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, limit)
        .map_err(|e| unreachable(format!("connect to {addr}: {e}")))?;
    let _ = tcp.set_read_timeout(Some(limit));
    let _ = tcp.set_write_timeout(Some(limit));
    let mut conn = rustls::ClientConnection::new(config.clone(), name.clone())
        .map_err(|e| unreachable(format!("TLS: {e}")))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            let hint = if h2 && e.to_string().contains("NoApplicationProtocol") {
                " (the server does not offer HTTP/2 by ALPN: drop --h2 for HTTP/1.1)"
            } else if e.to_string().contains("certificate") && !opts.insecure {
                " (trust the server's CA with --cacert FILE, or skip verification with -k/--insecure)"
            } else {
                ""
            };
            return Err(unreachable(format!("TLS handshake with {addr}: {e}{hint}")));
        }
    }
    if h2 && conn.alpn_protocol() != Some(b"h2") {
        return Err(unreachable(format!(
            "{addr} does not offer HTTP/2 by ALPN (drop --h2 for HTTP/1.1)"
        )));
    }
    conn.send_close_notify();
    let _ = conn.write_tls(&mut tcp);
    let _ = tcp.flush();
    Ok(Tls::new(config, name))
}
