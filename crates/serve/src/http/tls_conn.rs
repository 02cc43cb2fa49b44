//! HTTP over TLS: the handshake on an accepted connection (within the head timeout, given up at shutdown),
//! then the connection handler of the protocol ALPN chose: HTTP/2 (`crate::http2`) or HTTP/1.1. The TLS
//! stream is a [`Transport`] for the HTTP/1 loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

use super::conn::{self, Transport};
use super::write::{write_all_timeout, write_file};
use super::{Handler, Limits, shutdown_signalled};
use crate::tls::{HandshakeError, TlsAcceptor};

impl Transport for TlsStream<TcpStream> {
    fn nodelay(&self) -> std::io::Result<()> {
        self.get_ref().0.set_nodelay(true)
    }

    /// rustls may already hold decrypted input, which only a read can tell: at once.
    fn input_ready(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        std::future::ready(Ok(()))
    }

    /// The last bytes, then close_notify (the TLS end of the connection), within `limit`.
    async fn write_last(&mut self, buf: &[u8], limit: Duration) -> std::io::Result<()> {
        write_all_timeout(self, buf, limit).await?;
        match tokio::time::timeout(limit, self.shutdown()).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "client did not read the response",
            )),
        }
    }

    /// Through TLS the file has to pass through user space to be encrypted: read in chunks and written.
    async fn send_file(
        &mut self,
        head: &[u8],
        file: std::fs::File,
        offset: u64,
        len: u64,
        limit: Duration,
    ) -> std::io::Result<()> {
        write_all_timeout(self, head, limit).await?;
        let mut buf = bytes::BytesMut::new();
        write_file(self, &mut buf, file, offset, len, limit).await
    }
}

/// Serves one accepted TCP connection of a TLS listener: handshake, then the negotiated protocol.
pub(crate) async fn serve<H: Handler>(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: Arc<TlsAcceptor>,
    (handler, limits, http2): (Arc<H>, Arc<Limits>, Arc<crate::http2::Http2Config>),
    shutdown: watch::Receiver<bool>,
) {
    let mut stop_rx = shutdown.clone();
    let tls = tokio::select! {
        biased;
        r = acceptor.accept(tcp, limits.head_timeout) => r,
        _ = shutdown_signalled(&mut stop_rx) => return,
    };
    let stream = match tls {
        Ok(s) => s,
        Err(HandshakeError::TimedOut) => {
            tracing::debug!(%peer, "TLS handshake not completed in time; closed");
            return;
        }
        Err(HandshakeError::Failed(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
    };
    // The protocol ALPN settled on (none offered by the client: HTTP/1.1).
    match stream.get_ref().1.alpn_protocol() {
        Some(crate::tls::ALPN_H2) => {
            let pre = bytes::Bytes::new();
            crate::http2::serve(stream, pre, peer, handler, limits, http2, shutdown).await
        }
        None | Some(crate::tls::ALPN_HTTP1) => {
            conn::serve(
                stream,
                peer,
                handler,
                limits,
                shutdown,
                conn::Start::fresh(),
            )
            .await
        }
        Some(other) => {
            // rustls only agrees on a protocol the server offered, so this is a protocol list without its
            // handler: a bug, not a client's fault.
            tracing::error!(%peer, alpn = %String::from_utf8_lossy(other), "no handler for the negotiated protocol");
        }
    }
}
