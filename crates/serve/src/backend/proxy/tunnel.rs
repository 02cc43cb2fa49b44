//! WebSocket (and any HTTP/1.1 `Upgrade`) through the proxy: the request's `Upgrade` and `Connection:
//! Upgrade` are forwarded, an upstream's `101` is passed on, and then the client's and the upstream's
//! connections are relayed both ways until either closes or nothing moves for `read_timeout`. The request
//! took a worker of its class like any other until the `101`; the tunnel holds none.
//!
//! An HTTP/2 client's WebSocket (RFC 8441 extended CONNECT, mapped by `crate::http2` to the HTTP/1.1
//! handshake without its key) is opened upstream as an HTTP/1.1 one: the proxy draws the
//! `Sec-WebSocket-Key` and checks the upstream's `Sec-WebSocket-Accept` against it, since the HTTP/2 client
//! has no key to check it with.

use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::headers::Known;
use crate::http::{ClientIo, Request, Tunnel, Version};

use super::pool::UpConn;

/// The protocol an HTTP/1.1 request asks to switch to (`Upgrade: websocket` with `Connection: upgrade`),
/// if any. HTTP/1.0 cannot switch. An HTTP/2 request carries the pair only when `crate::http2` mapped an
/// extended CONNECT to it (h2 refuses a stream that sends either field itself, RFC 9113 §8.2.2).
pub(crate) fn upgrade_of(req: &Request) -> Option<&str> {
    if req.version == Version::Http10 {
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

/// The GUID RFC 6455 §1.3 appends to the key before hashing it into `Sec-WebSocket-Accept`.
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Key` the proxy sends upstream for an HTTP/2 client's WebSocket (16 random bytes in
/// base64, RFC 6455 §4.1); None for any other request (an HTTP/1.1 client sends its own key and checks the
/// answer itself).
pub(super) fn websocket_key(req: &Request) -> Option<String> {
    use base64::Engine;
    if req.version != Version::Http2 || !upgrade_of(req)?.eq_ignore_ascii_case("websocket") {
        return None;
    }
    let bits = crate::forwarded::random_bits().to_le_bytes();
    Some(base64::engine::general_purpose::STANDARD.encode(bits))
}

/// The `Sec-WebSocket-Accept` an upstream must answer `key` with (RFC 6455 §4.2.2).
fn websocket_accept(key: &str) -> String {
    use base64::Engine;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(WS_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(ctx.finish())
}

/// Whether the header lines of an upstream's `101` (`name: value` CRLF lines, as the proxy renders them)
/// carry exactly one `Sec-WebSocket-Accept`, and it is the one `key` asks for.
pub(super) fn accepts(lines: &[u8], key: &str) -> bool {
    let want = websocket_accept(key);
    let mut found = lines.split(|&b| b == b'\n').filter_map(|l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let i = l.iter().position(|&b| b == b':')?;
        l[..i]
            .eq_ignore_ascii_case(b"sec-websocket-accept")
            .then(|| ordo_http1::trim_ows(&l[i + 1..]))
    });
    found.next() == Some(want.as_bytes()) && found.next().is_none()
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
/// side, and the relay ends when both have closed) or nothing moves for `idle` — a side that reads nothing
/// while the other has bytes for it (a TCP window, an HTTP/2 stream window that stays shut) counts as
/// nothing moving too. At most one buffer of 16 KiB is held each way.
async fn relay(
    a: &mut dyn ClientIo,
    b: &mut crate::tls::UpstreamStream,
    idle: Duration,
) -> std::io::Result<()> {
    let stalled = || std::io::Error::new(std::io::ErrorKind::TimedOut, "tunnel write stalled");
    let mut abuf = BytesMut::with_capacity(16 * 1024);
    let mut bbuf = BytesMut::with_capacity(16 * 1024);
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        abuf.clear();
        bbuf.clear();
        tokio::select! {
            r = a.read_buf(&mut abuf), if a_open => {
                let done = if r? == 0 {
                    a_open = false;
                    tokio::time::timeout(idle, b.shutdown()).await
                } else {
                    tokio::time::timeout(idle, b.write_all(&abuf)).await
                };
                done.map_err(|_| stalled())??;
            }
            r = b.read_buf(&mut bbuf), if b_open => {
                let done = if r? == 0 {
                    b_open = false;
                    tokio::time::timeout(idle, a.shutdown()).await
                } else {
                    tokio::time::timeout(idle, a.write_all(&bbuf)).await
                };
                done.map_err(|_| stalled())??;
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
        let mut h10 = ws.clone();
        h10.version = Version::Http10;
        assert_eq!(upgrade_of(&h10), None);
        // HTTP/2: only as crate::http2 maps an extended CONNECT (h2 refuses the fields from a client)
        let mut h2 = ws.clone();
        h2.version = Version::Http2;
        assert_eq!(upgrade_of(&h2), Some("websocket"));
        let bad = Request::get("/")
            .with_header("Connection", "upgrade")
            .with_header("Upgrade", "a\u{1}b");
        assert_eq!(upgrade_of(&bad), None);
    }

    #[test]
    fn the_accept_of_rfc_6455s_example_and_only_it_is_accepted() {
        // RFC 6455 §1.3: this key is answered with this accept
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        assert_eq!(websocket_accept(key), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        let ok = b"Upgrade: websocket\r\nSec-WebSocket-Accept:  s3pPLMBiTxaQ9kYGzzhZRbK+xOo= \r\n";
        assert!(accepts(ok, key));
        assert!(!accepts(b"Upgrade: websocket\r\n", key), "missing");
        assert!(
            !accepts(
                b"sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo\r\n",
                key
            ),
            "wrong"
        );
        let twice = [&ok[..], &ok[..]].concat();
        assert!(!accepts(&twice, key), "two answers");
    }

    #[test]
    fn only_http2_websockets_get_a_key_drawn_by_the_proxy() {
        let ws = Request::get("/chat")
            .with_header("connection", "upgrade")
            .with_header("upgrade", "websocket");
        assert_eq!(websocket_key(&ws), None, "an HTTP/1.1 client sends its own");
        let mut h2 = ws.clone();
        h2.version = Version::Http2;
        let (a, b) = (websocket_key(&h2).unwrap(), websocket_key(&h2).unwrap());
        assert_ne!(a, b);
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&a)
            .unwrap();
        assert_eq!(raw.len(), 16);
        let mut other = Request::get("/x")
            .with_header("connection", "upgrade")
            .with_header("upgrade", "h2c");
        other.version = Version::Http2;
        assert_eq!(websocket_key(&other), None);
    }
}
