//! TLS for `https://` targets: the client configuration (the server's certificate verified against the
//! system's CA certificates or `--cacert`, or not at all with `--insecure`; session resumption only when
//! asked), the connector every connection of the run hands its socket to, and a first handshake before the
//! run so a certificate problem is reported once, with what to do about it, instead of as a run of failures.
//! The pieces serve's proxy uses too (the rustls configuration, connector and stream) are `ordo_sys::tls`.
//! A certificate given with `--cacert` that the server presents as its own is trusted as itself, as curl
//! does, even when it is marked as a CA (the self-signed leaf `openssl req -x509` makes): see
//! [`CacertVerifier`].

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::config::TlsOptions;
use crate::error::BenchError;
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
    let alpn: &[u8] = if h2 { b"h2" } else { b"http/1.1" };
    let mut cc = match (&opts.cacert, opts.insecure) {
        (Some(_), false) => {
            let (roots, certs) = root_store(opts)?;
            let provider = ordo_sys::tls::provider();
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| invalid("cacert", e.to_string()))?;
            let verifier = CacertVerifier {
                webpki,
                certs,
                provider,
            };
            ordo_sys::tls::client_config_verified_by(Arc::new(verifier), &[alpn])
        }
        (_, true) => ordo_sys::tls::client_config(None, &[alpn]),
        (None, false) => ordo_sys::tls::client_config(Some(root_store(opts)?.0), &[alpn]),
    };
    if !opts.resume {
        cc.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(cc))
}

/// The certificates a server's is verified against: `--cacert`'s (also returned as they are), else the
/// system's.
#[allow(clippy::type_complexity)]
fn root_store(
    opts: &TlsOptions,
) -> Result<(rustls::RootCertStore, Vec<CertificateDer<'static>>), BenchError> {
    let mut roots = rustls::RootCertStore::empty();
    let mut certs = Vec::new();
    match &opts.cacert {
        Some(p) => {
            let text =
                std::fs::read(p).map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
            for c in CertificateDer::pem_slice_iter(&text) {
                let c = c.map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
                roots
                    .add(c.clone())
                    .map_err(|e| invalid("cacert", format!("{}: {e}", p.display())))?;
                certs.push(c);
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
    Ok((roots, certs))
}

/// `--cacert`'s verifier: webpki's against the file's certificates, and — where that refuses — a server
/// certificate that is byte for byte one of the file's, trusted as its own anchor (curl's and OpenSSL's
/// rule: a certificate in the CA file is trusted as such). webpki refuses the common self-signed leaf
/// (`openssl req -x509 … -addext subjectAltName=DNS:localhost` marks it CA:TRUE) with `CaUsedAsEndEntity`;
/// such a certificate is still checked here for its validity period and for the name the URL asks for,
/// and the handshake's signature must be made with its key, so only the holder of that key passes.
#[derive(Debug)]
struct CacertVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    certs: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for CacertVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if !self.certs.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            return Err(refused);
        }
        verify_pinned(
            end_entity,
            server_name,
            now,
            self.provider.signature_verification_algorithms.all,
        )
        .map_err(pki_error)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// A server certificate that is exactly one the user trusts: valid now (webpki checks a leaf's validity
/// period before its CA flag, so a path that stops at `CaUsedAsEndEntity` has passed it), usable for
/// server authentication, and valid for `name`.
fn verify_pinned(
    cert: &CertificateDer<'_>,
    name: &ServerName<'_>,
    now: UnixTime,
    algs: &[&dyn rustls::pki_types::SignatureVerificationAlgorithm],
) -> Result<(), webpki::Error> {
    let ee = webpki::EndEntityCert::try_from(cert)?;
    let anchor = webpki::anchor_from_trusted_cert(cert)?;
    match ee.verify_for_usage(
        algs,
        &[anchor],
        &[],
        now,
        webpki::KeyUsage::server_auth(),
        None,
        None,
    ) {
        Ok(_) | Err(webpki::Error::CaUsedAsEndEntity) => {}
        Err(e) => return Err(e),
    }
    ee.verify_is_valid_for_subject_name(name)
}

/// webpki's error as rustls reports certificate errors.
fn pki_error(e: webpki::Error) -> rustls::Error {
    use rustls::CertificateError as C;
    let c = match e {
        webpki::Error::CertExpired { .. } => C::Expired,
        webpki::Error::CertNotValidYet { .. } => C::NotValidYet,
        webpki::Error::CertNotValidForName(_) => C::NotValidForName,
        webpki::Error::BadDer | webpki::Error::BadDerTime => C::BadEncoding,
        other => C::Other(rustls::OtherError(Arc::new(other))),
    };
    rustls::Error::InvalidCertificate(c)
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
            } else if e.to_string().contains("CaUsedAsEndEntity") {
                " (the server's certificate is marked as a CA: to trust a self-signed one, give that certificate \
                 itself with --cacert FILE; or skip verification with -k/--insecure)"
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
