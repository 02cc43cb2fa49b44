//! WebSocket (and any HTTP/1.1 `Upgrade`) through the proxy: the request's `Upgrade` and `Connection:
//! Upgrade` are forwarded, an upstream's `101` is passed on, and then the client's and the upstream's
//! connections are relayed both ways until either closes or nothing moves for `read_timeout`. The request
//! took a worker of its class like any other until the `101`; the tunnel holds none.

use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::headers::Known;
use crate::http::{ClientIo, Request, Tunnel, Version};

use super::pool::UpConn;

/// The protocol an HTTP/1.1 request asks to switch to (`Upgrade: websocket` with `Connection: upgrade`),
/// if any. Other versions cannot switch this way (HTTP/2 has its own extended CONNECT).
pub(super) fn upgrade_of(req: &Request) -> Option<&str> {
    if req.version != Version::Http11 {
        return None;
    }
    let asks = req
        .headers
        .known(Known::Connection)
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let proto = req.headers.get("upgrade")?.trim();
    (asks
        && !proto.is_empty()
        && proto
            .bytes()
            .all(|b| b.is_ascii_graphic() || b == b' ' || b == b','))
    .then_some(proto)
}

/// The relay between a client and the upstream that answered `101`.
#[derive(Debug)]
pub(super) struct ProxyTunnel {
    pub(super) conn: UpConn,
    /// What the upstream sent after its `101` head, already read.
    pub(super) early: Bytes,
    /// The longest time nothing may move either way.
    pub(super) idle: Duration,
}

impl Tunnel for ProxyTunnel {
    fn run<'a>(
        self: Box<Self>,
        client: &'a mut dyn ClientIo,
        early: Bytes,
    ) -> Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            let ProxyTunnel {
                conn,
                early: from_upstream,
                idle,
            } = *self;
            let mut up = conn.stream;
            if (!early.is_empty() && up.write_all(&early).await.is_err())
                || (!from_upstream.is_empty() && client.write_all(&from_upstream).await.is_err())
            {
                return;
            }
            let _ = relay(client, &mut up, idle).await;
            let _ = up.shutdown().await;
            let _ = client.shutdown().await;
        })
    }
}

/// Copies both ways until one side closes (its end is passed on as a shutdown of the other's writing
/// side, and the relay ends when both have closed) or nothing moves for `idle`.
async fn relay(
    a: &mut dyn ClientIo,
    b: &mut crate::tls::UpstreamStream,
    idle: Duration,
) -> std::io::Result<()> {
    let mut abuf = BytesMut::with_capacity(16 * 1024);
    let mut bbuf = BytesMut::with_capacity(16 * 1024);
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        abuf.clear();
        bbuf.clear();
        tokio::select! {
            r = a.read_buf(&mut abuf), if a_open => {
                if r? == 0 {
                    a_open = false;
                    b.shutdown().await?;
                } else {
                    b.write_all(&abuf).await?;
                }
            }
            r = b.read_buf(&mut bbuf), if b_open => {
                if r? == 0 {
                    b_open = false;
                    a.shutdown().await?;
                } else {
                    a.write_all(&bbuf).await?;
                }
            }
            () = tokio::time::sleep(idle) => return Ok(()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http11_requests_that_ask_both_ways_upgrade() {
        let ws = Request::get("/chat")
            .with_header("Connection", "keep-alive, Upgrade")
            .with_header("Upgrade", "websocket");
        assert_eq!(upgrade_of(&ws), Some("websocket"));
        let no_connection = Request::get("/chat").with_header("Upgrade", "websocket");
        assert_eq!(
            upgrade_of(&no_connection),
            None,
            "Upgrade alone is not a request to switch"
        );
        let no_upgrade = Request::get("/chat").with_header("Connection", "upgrade");
        assert_eq!(upgrade_of(&no_upgrade), None);
        let mut h2 = ws.clone();
        h2.version = Version::Http2;
        assert_eq!(upgrade_of(&h2), None);
        let bad = Request::get("/")
            .with_header("Connection", "upgrade")
            .with_header("Upgrade", "a\u{1}b");
        assert_eq!(upgrade_of(&bad), None);
    }
}
