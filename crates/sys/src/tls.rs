//! The client side of TLS connections, which serve's proxy (to `https://` upstreams) and the load generator
//! (to `https://` targets) share: the client configuration (rustls with the ring provider, certificates
//! verified against given roots, or not at all), the connector bound to the name a server's certificate must
//! be valid for, and a connection that is plain TCP or TLS over it. Behind the `tls` feature so the crates
//! that do not use it (results, probe) build without rustls.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The client configuration for connecting to TLS servers: certificates verified against `roots`, or not
/// verified at all when `roots` is `None` (signatures are still checked, so a handshake costs the same).
/// `alpn` is offered when not empty.
pub fn client_config(roots: Option<rustls::RootCertStore>, alpn: &[&[u8]]) -> rustls::ClientConfig {
    match roots {
        Some(r) => {
            let mut cc = builder(provider())
                .with_root_certificates(r)
                .with_no_client_auth();
            cc.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            cc
        }
        None => client_config_verified_by(Arc::new(AcceptAnyCertificate(provider())), alpn),
    }
}

/// [`client_config`] with the caller's certificate verifier (bench's `--cacert`, which also trusts a
/// self-signed server certificate given as itself); build it on [`provider`].
pub fn client_config_verified_by(
    verifier: Arc<dyn ServerCertVerifier>,
    alpn: &[&[u8]],
) -> rustls::ClientConfig {
    let mut cc = builder(provider())
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    cc.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    cc
}

/// The cryptography every client configuration here uses (rustls's ring provider).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn builder(
    provider: Arc<CryptoProvider>,
) -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier> {
    rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .expect("the ring provider supports the default versions")
}

/// A certificate verifier that accepts any certificate (a proxy's `danger_accept_invalid_certs`, bench's
/// `--insecure`, tests against self-signed servers); it still checks the handshake's signatures.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
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

/// What every connection to one server needs to speak TLS: the client configuration and the name the
/// server's certificate must be valid for (sent as SNI unless it is an IP address).
#[derive(Clone)]
pub struct Connector {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Connector({:?})", self.name)
    }
}

impl Connector {
    pub fn new(config: Arc<rustls::ClientConfig>, name: ServerName<'static>) -> Self {
        Connector {
            connector: tokio_rustls::TlsConnector::from(config),
            name,
        }
    }

    /// The name the server's certificate must be valid for.
    pub fn name(&self) -> &ServerName<'static> {
        &self.name
    }

    /// The handshake on a connected socket (or a wrapper of one, such as `ordo bench`'s read-ahead).
    pub async fn handshake<IO: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: IO,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<IO>> {
        self.connector.connect(self.name.clone(), io).await
    }

    /// The handshake on a connected socket, as a [`ClientStream`].
    pub async fn connect(&self, tcp: TcpStream) -> std::io::Result<ClientStream> {
        Ok(ClientStream::Tls(Box::new(self.handshake(tcp).await?)))
    }
}

/// A connection to a server: plain TCP, or TLS over it.
#[derive(Debug)]
pub enum ClientStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl ClientStream {
    /// The TCP socket (under the TLS session, if any).
    pub fn tcp(&self) -> &TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(s) => s.get_ref().0,
        }
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
