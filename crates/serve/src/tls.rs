//! TLS termination for `ordo serve` (rustls with the ring provider): the `[tls]` configuration, loading and
//! checking certificates and keys (errors name the config file, line and key, and the PEM file), SNI
//! selection among several certificates, ALPN, the acceptor whose certificates a reload swaps without
//! touching established connections, and the client side used for `https://` proxy upstreams (their trust
//! roots and server name here; the rustls configuration, connector and stream shared with bench in
//! `ordo_sys::tls`).
//!
//! The handshake's result is handed to a protocol-specific connection handler by the negotiated ALPN
//! protocol (see `crate::http::tls_conn`): HTTP/2 (`h2`, unless `[http2] enabled = false`) or HTTP/1.1.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use tokio::net::TcpStream;

use crate::invalid::Invalid;
use crate::keypath;
use ordo_util::located::Seg;

/// ALPN identifier of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
/// ALPN identifier of HTTP/2 over TLS.
pub const ALPN_H2: &[u8] = b"h2";
/// What the server offers, in order of preference (without `h2` when `[http2] enabled = false`).
pub const ALPN_PROTOCOLS: &[&[u8]] = &[ALPN_H2, ALPN_HTTP1];

/// The lowest TLS version accepted (`min_version = "1.2"` or `"1.3"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum TlsVersion {
    #[default]
    #[serde(rename = "1.2")]
    Tls12,
    #[serde(rename = "1.3")]
    Tls13,
}

/// `[tls]`: TLS on the main listener, or on a listener of its own next to the plain one.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Address of an HTTPS listener beside the plain `listen` one. Left out: the main `listen` speaks TLS.
    pub listen: Option<SocketAddr>,
    /// Certificates with their keys. The client's SNI name picks the first whose certificate is valid for
    /// it; a client without SNI, or naming none of them, gets the first.
    pub certificates: Vec<CertConfig>,
    /// Lowest protocol version accepted.
    pub min_version: TlsVersion,
}

/// One certificate chain (PEM, leaf first) and its private key (PEM: PKCS#8, PKCS#1 or SEC1).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CertConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

fn versions(min: TlsVersion) -> &'static [&'static rustls::SupportedProtocolVersion] {
    match min {
        TlsVersion::Tls12 => rustls::DEFAULT_VERSIONS,
        TlsVersion::Tls13 => TLS13_ONLY,
    }
}

/// Reads a PEM certificate chain; the error says what is wrong with the file.
pub(crate) fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: bad PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: no certificate in it (expected a PEM `BEGIN CERTIFICATE` block)",
            path.display()
        ));
    }
    for (i, c) in certs.iter().enumerate() {
        webpki::EndEntityCert::try_from(c).map_err(|e| {
            format!(
                "{}: certificate {} of the chain is not a valid X.509 certificate: {e}",
                path.display(),
                i + 1
            )
        })?;
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "{}: no private key in it (expected a PEM `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or \
             `BEGIN EC PRIVATE KEY` block)",
            path.display()
        ),
        e => format!("{}: bad PEM: {e}", path.display()),
    })
}

/// Loads and checks one certificate/key pair. `at` is the key path of the pair in the config.
fn load_pair(
    c: &CertConfig,
    resolve: &dyn Fn(&Path) -> PathBuf,
    at: &[Seg],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, Invalid> {
    let field = |k: &str| {
        let mut p = at.to_vec();
        p.push(Seg::Key(k.to_string()));
        p
    };
    if c.cert.as_os_str().is_empty() {
        return Err(Invalid::new(
            field("cert"),
            "missing: the certificate file (PEM)",
        ));
    }
    if c.key.as_os_str().is_empty() {
        return Err(Invalid::new(
            field("key"),
            "missing: the private key file (PEM)",
        ));
    }
    let (cert_path, key_path) = (resolve(&c.cert), resolve(&c.key));
    let chain = read_certs(&cert_path).map_err(|m| Invalid::new(field("cert"), m))?;
    let key = read_key(&key_path).map_err(|m| Invalid::new(field("key"), m))?;
    let signer = provider.key_provider.load_private_key(key).map_err(|e| {
        Invalid::new(
            field("key"),
            format!("{}: unusable private key: {e}", key_path.display()),
        )
    })?;
    let ck = CertifiedKey::new(chain, signer);
    match ck.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(ck),
        Err(rustls::Error::InconsistentKeys(_)) => Err(Invalid::new(
            field("key"),
            format!(
                "{} is not the key of the certificate in {} (their public keys differ)",
                key_path.display(),
                cert_path.display()
            ),
        )),
        Err(e) => Err(Invalid::new(
            field("cert"),
            format!("{}: {e}", cert_path.display()),
        )),
    }
}

/// Picks a certificate by the client's SNI name: the first whose leaf is valid for the name (wildcards as
/// X.509 defines them), else the first certificate.
struct SniResolver {
    keys: Vec<Arc<CertifiedKey>>,
}

impl fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SniResolver({} certificates)", self.keys.len())
    }
}

impl SniResolver {
    fn pick(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        if self.keys.len() > 1 {
            if let Some(sn) = name.and_then(|n| ServerName::try_from(n).ok()) {
                for k in &self.keys {
                    let valid = k
                        .end_entity_cert()
                        .ok()
                        .and_then(|c| webpki::EndEntityCert::try_from(c).ok())
                        .is_some_and(|ee| ee.verify_is_valid_for_subject_name(&sn).is_ok());
                    if valid {
                        return k.clone();
                    }
                }
            }
        }
        self.keys[0].clone()
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

/// Builds the rustls server configuration of `[tls]`: every certificate and key read and checked (a file
/// that cannot be read, holds no certificate or key, or a key that is not the certificate's, is refused at
/// its key). `resolve` makes the config's relative paths absolute; `h2` offers HTTP/2 by ALPN.
pub(crate) fn server_config(
    cfg: &TlsConfig,
    resolve: &dyn Fn(&Path) -> PathBuf,
    h2: bool,
) -> Result<Arc<rustls::ServerConfig>, Invalid> {
    if cfg.certificates.is_empty() {
        return Err(Invalid::new(
            keypath!["tls", "certificates"],
            "at least one certificate is needed: [[tls.certificates]] with `cert` and `key`",
        ));
    }
    let provider = provider();
    let mut keys = Vec::with_capacity(cfg.certificates.len());
    for (i, c) in cfg.certificates.iter().enumerate() {
        let at = keypath!["tls", "certificates", i];
        keys.push(Arc::new(load_pair(c, resolve, &at, &provider)?));
    }
    let mut sc = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions(cfg.min_version))
        .map_err(|e| Invalid::new(keypath!["tls", "min_version"], e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { keys }));
    sc.alpn_protocols = ALPN_PROTOCOLS
        .iter()
        .filter(|p| h2 || **p != ALPN_H2)
        .map(|p| p.to_vec())
        .collect();
    // Stateless resumption tickets (as nginx gives by default), besides the in-memory session cache.
    if let Ok(t) = rustls::crypto::ring::Ticketer::new() {
        sc.ticketer = t;
    }
    sc.session_storage = rustls::server::ServerSessionMemoryCache::new(16 * 1024);
    Ok(Arc::new(sc))
}

/// The TLS side of a listener: the current server configuration, swapped whole on reload. A handshake takes
/// the configuration current when it starts; established connections keep theirs.
#[derive(Debug)]
pub struct TlsAcceptor {
    config: RwLock<Arc<rustls::ServerConfig>>,
}

/// How a handshake ended without a connection.
#[derive(Debug)]
pub(crate) enum HandshakeError {
    TimedOut,
    Failed(std::io::Error),
}

impl TlsAcceptor {
    pub(crate) fn new(config: Arc<rustls::ServerConfig>) -> Self {
        TlsAcceptor {
            config: RwLock::new(config),
        }
    }

    /// Use `config` for handshakes from now on.
    pub(crate) fn swap(&self, config: Arc<rustls::ServerConfig>) {
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
    }

    fn current(&self) -> Arc<rustls::ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Runs the server handshake on `tcp`, within `limit`.
    pub(crate) async fn accept(
        &self,
        tcp: TcpStream,
        limit: Duration,
    ) -> Result<tokio_rustls::server::TlsStream<TcpStream>, HandshakeError> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current());
        match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
            Err(_) => Err(HandshakeError::TimedOut),
            Ok(Err(e)) => Err(HandshakeError::Failed(e)),
            Ok(Ok(s)) => Ok(s),
        }
    }
}

/// Trust roots for verifying a server: the PEM bundle `ca_file` when given, else the system's (what
/// `SSL_CERT_FILE`/`SSL_CERT_DIR` or the distribution's bundle hold). The error says what is wrong.
pub fn root_store(ca_file: Option<&Path>) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(p) => {
            for c in read_certs(p)? {
                roots
                    .add(c)
                    .map_err(|e| format!("{}: unusable CA certificate: {e}", p.display()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for c in found.certs {
                let _ = roots.add(c);
            }
            if roots.is_empty() {
                let why = found
                    .errors
                    .first()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                return Err(format!(
                    "no system CA certificates found{why} (give a CA file, or install ca-certificates)"
                ));
            }
        }
    }
    Ok(roots)
}

/// The client configuration for connecting to TLS servers: certificates verified against `roots`, or not
/// verified at all when `roots` is `None` (tests only). `alpn` is offered when not empty.
pub fn client_config(
    roots: Option<rustls::RootCertStore>,
    alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    Arc::new(ordo_sys::tls::client_config(roots, alpn))
}

/// How a proxy connects to an `https://` upstream: the client configuration and the name its certificate
/// must be valid for (sent as SNI unless it is an IP address).
#[derive(Clone)]
pub(crate) struct UpstreamTls(ordo_sys::tls::Connector);

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UpstreamTls({:?})", self.0.name())
    }
}

impl UpstreamTls {
    /// For the upstream `host` (as written: a name, an IPv4 address or a bracketed IPv6 one).
    pub(crate) fn new(config: Arc<rustls::ClientConfig>, host: &str) -> Result<Self, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("`{host}` is not a valid TLS server name: {e}"))?;
        Ok(UpstreamTls(ordo_sys::tls::Connector::new(config, name)))
    }

    pub(crate) async fn connect(&self, tcp: TcpStream) -> std::io::Result<UpstreamStream> {
        self.0.connect(tcp).await
    }
}

/// A pooled connection to an upstream: plain TCP, or TLS over it.
pub(crate) type UpstreamStream = ordo_sys::tls::ClientStream;

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn pair(names: &[&str]) -> (String, String) {
        let ck = rcgen::generate_simple_self_signed(
            names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        (ck.cert.pem(), ck.key_pair.serialize_pem())
    }

    fn load(
        dir: &Path,
        certs: &[(PathBuf, PathBuf)],
    ) -> Result<Arc<rustls::ServerConfig>, Invalid> {
        let cfg = TlsConfig {
            certificates: certs
                .iter()
                .map(|(c, k)| CertConfig {
                    cert: c.clone(),
                    key: k.clone(),
                })
                .collect(),
            ..TlsConfig::default()
        };
        let d = dir.to_path_buf();
        server_config(&cfg, &move |p: &Path| d.join(p), true)
    }

    #[test]
    fn bad_files_are_refused_at_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let (c1, k1) = pair(&["a.test"]);
        let (_c2, k2) = pair(&["b.test"]);
        let cert = write(dir.path(), "c1.pem", &c1);
        let key = write(dir.path(), "k1.pem", &k1);
        let other_key = write(dir.path(), "k2.pem", &k2);
        let junk = write(dir.path(), "junk.pem", "hello\n");
        assert!(load(dir.path(), &[(cert.clone(), key.clone())]).is_ok());

        let e = load(dir.path(), &[(cert.clone(), other_key.clone())]).unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates[0].key");
        assert!(
            e.message.contains("is not the key of the certificate"),
            "{}",
            e.message
        );

        let e = load(dir.path(), &[(junk.clone(), key.clone())]).unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates[0].cert");
        assert!(e.message.contains("no certificate"), "{}", e.message);

        let e = load(dir.path(), &[(cert.clone(), junk.clone())]).unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates[0].key");
        assert!(e.message.contains("no private key"), "{}", e.message);

        let e = load(
            dir.path(),
            &[
                (cert.clone(), key.clone()),
                (PathBuf::from("missing.pem"), key),
            ],
        )
        .unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates[1].cert");
        assert!(
            e.message.contains("missing.pem: cannot read"),
            "{}",
            e.message
        );

        // a key file where the certificate should be: no certificate in it
        let e = load(dir.path(), &[(other_key, cert)]).unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates[0].cert");

        let e =
            server_config(&TlsConfig::default(), &|p: &Path| p.to_path_buf(), true).unwrap_err();
        assert_eq!(path_string(&e), "tls.certificates");
    }

    fn path_string(e: &Invalid) -> String {
        ordo_util::located::path_to_string(&e.path)
    }

    #[test]
    fn sni_picks_the_certificate_valid_for_the_name() {
        let provider = provider();
        let key_for = |names: &[&str]| {
            let (c, k) = pair(names);
            let chain = vec![CertificateDer::from_pem_slice(c.as_bytes()).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(k.as_bytes()).unwrap();
            Arc::new(CertifiedKey::from_der(chain, key, &provider).unwrap())
        };
        let a = key_for(&["a.test"]);
        let b = key_for(&["*.b.test"]);
        let r = SniResolver {
            keys: vec![a.clone(), b.clone()],
        };
        assert!(Arc::ptr_eq(&r.pick(Some("a.test")), &a));
        assert!(Arc::ptr_eq(&r.pick(Some("x.b.test")), &b));
        assert!(
            Arc::ptr_eq(&r.pick(Some("b.test")), &a),
            "wildcard needs a label"
        );
        assert!(Arc::ptr_eq(&r.pick(Some("other.test")), &a));
        assert!(Arc::ptr_eq(&r.pick(None), &a));
    }
}
