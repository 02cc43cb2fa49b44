//! TLS for `https://` targets: the client configuration (the server's certificate verified against the
//! system's CA certificates or `--cacert`, or not at all with `--insecure`; session resumption only when
//! asked), the connect-and-handshake step of a connection, and a first handshake before the run so a
//! certificate problem is reported once, with what to do about it, instead of as a run of failures.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::BenchError;
use crate::config::TlsOptions;
use crate::target::Target;

/// What every connection of a run needs to speak TLS.
#[derive(Clone)]
pub(crate) struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    pub name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({:?})", self.name)
    }
}

impl Tls {
    /// The handshake on a connected socket.
    pub(crate) async fn handshake<IO: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: IO,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<IO>> {
        self.connector.connect(self.name.clone(), io).await
    }
}

/// Accepts any certificate (`--insecure`); signatures are still checked, so the handshake costs the same.
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .map_err(|e| invalid("tls", e.to_string()))?;
    let mut cc = if opts.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &opts.cacert {
            Some(p) => {
                let text = std::fs::read(p)
                    .map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
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
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cc.alpn_protocols = vec![if h2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    if !opts.resume {
        cc.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(cc))
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
    Ok(Tls {
        connector: tokio_rustls::TlsConnector::from(config),
        name,
    })
}
