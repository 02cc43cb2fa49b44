//! HTTP/1.1 over TLS: the TLS stream as a [`Transport`] for the HTTP/1 loop (files pass through user space
//! to be encrypted). The handshake and the choice of protocol by ALPN are `crate::listen`'s.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::conn::Transport;
use super::write::{write_all_timeout, write_file};

impl Transport for TlsStream<TcpStream> {
    fn nodelay(&self) -> std::io::Result<()> {
        self.get_ref().0.set_nodelay(true)
    }

    fn tls_info(&self) -> Option<super::TlsInfo> {
        let sni = self.get_ref().1.server_name();
        Some(super::TlsInfo {
            sni: sni.map(|n| std::sync::Arc::from(n.to_ascii_lowercase())),
        })
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

    async fn write_parts(
        &mut self,
        parts: &[&[u8]],
        _more: bool,
        limit: Duration,
    ) -> std::io::Result<()> {
        for part in parts {
            write_all_timeout(self, part, limit).await?;
        }
        Ok(())
    }

    fn push(&self) -> std::io::Result<()> {
        Ok(())
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
