//! The accept loop: takes connections off a listener within `max_connections`, serves a new connection's
//! first request inline when it can (single-threaded runtime), and gives every other connection a task
//! that speaks its protocol — HTTP/1 (`crate::http`), HTTP/2 (`crate::http2`, by ALPN or the h2c
//! preface), TLS first when the listener has certificates (`crate::tls`). Shutdown stops accepting and
//! waits for the connections; dropping the loop ends them. The one place the protocols meet.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use crate::http::{Handler, Limits, conn, inline, shutdown_signalled};
use crate::tls::{HandshakeError, TlsAcceptor};

/// Accept loop: enforces `max_connections` (by not accepting beyond it: newcomers wait in the kernel's
/// backlog), serves a connection's first request inline when it can (single-threaded runtime only; see
/// `inline`) and otherwise spawns a connection task, stops accepting when `shutdown` becomes true, then
/// waits for the open connections to finish their in-flight request (idle ones close at once).
///
/// Dropping this future (the server's shutdown grace ran out and it aborted the task running it) closes
/// every connection it spawned at once, whatever each was doing: a body still arriving, a response still
/// streaming.
pub async fn run_listener<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let http2 = Arc::new(crate::http2::Http2Config::off());
    run_listener_with(listener, handler, limits, shutdown, None, http2).await
}

/// [`run_listener`] for a listener that speaks TLS when `tls` is given: each connection's task runs the
/// handshake first (there is no inline path: the handshake needs round trips), then serves the protocol
/// ALPN chose. `http2` says how HTTP/2 is served (and whether a plain listener sniffs for h2c).
pub async fn run_listener_with<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
    tls: Option<Arc<crate::tls::TlsAcceptor>>,
    http2: Arc<crate::http2::Http2Config>,
) -> std::io::Result<()> {
    let slots = Slots::new(limits.max_connections);
    let _release = AbortOnDrop(tokio::spawn(release_after_closes(slots.clone())));
    let accepted = Arc::new(AtomicU64::new(0));
    let listener = listener.into_std()?;
    run_listener_shared(
        listener, handler, limits, shutdown, tls, http2, slots, accepted,
    )
    .await
}

/// `limits.max_connections` as a semaphore the listeners of one server share (one listener per serving
/// thread: the limit is the server's, not each thread's). Every open connection holds one permit.
#[derive(Clone)]
pub(crate) struct Slots {
    sem: Arc<Semaphore>,
    max: usize,
}

impl Slots {
    pub(crate) fn new(max_connections: usize) -> Self {
        let max = max_connections.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        Slots {
            sem: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// [`run_listener_with`] for one of a server's listeners: `slots` is shared with its other listeners (the
/// server runs `release_after_closes` for them once), and every connection accepted here is counted in
/// `accepted`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_listener_shared<H: Handler>(
    listener: std::net::TcpListener,
    handler: Arc<H>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
    tls: Option<Arc<crate::tls::TlsAcceptor>>,
    http2: Arc<crate::http2::Http2Config>,
    slots: Slots,
    accepts: Arc<AtomicU64>,
) -> std::io::Result<()> {
    // Accepted sockets are registered with the runtime only when they need to wait for something.
    if limits.defer_accept {
        ordo_sys::net::set_defer_accept(&listener, 1)?;
    }
    let listener = ordo_sys::net::AsyncListener::new(listener)?;
    // With several runtime threads, serving in the accept loop would put every connection's first request
    // on the one thread that accepts; there the tasks spread over all of them instead.
    let mut scratch = (tls.is_none()
        && !limits.proxy_protocol
        && tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::CurrentThread)
        .then(inline::Scratch::new);
    let Slots { sem: slots, max } = slots;
    // one shutdown future for the whole loop (not one waiter registration per accept)
    let mut stop_rx = shutdown.clone();
    let mut stop = std::pin::pin!(shutdown_signalled(&mut stop_rx));
    // failed accepts in a row (out of file descriptors, say), so the warning is given once per episode
    let mut accept_errors: u64 = 0;
    // Never sent on: its sender is dropped with this future, which ends every connection task at once.
    let (_abandon_tx, abandoned) = watch::channel(());
    loop {
        // A connection first, then a slot for it: waiting for a connection while holding a slot would keep
        // that slot from the server's other listeners (one per serving thread), whose connections would
        // wait at the limit although one was free.
        let ready = tokio::select! {
            biased;
            _ = &mut stop => break,
            r = listener.readable() => r,
        };
        let permit = tokio::select! {
            biased;
            _ = &mut stop => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = match ready {
            Ok(()) => match listener.try_accept() {
                // the readiness was stale: wait for the next connection
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                r => r,
            },
            Err(e) => Err(e),
        };
        match accepted {
            Ok((stream, peer)) => {
                accepts.fetch_add(1, Ordering::Relaxed);
                if accept_errors > 0 {
                    tracing::info!(failed_attempts = accept_errors, "accepting again");
                    accept_errors = 0;
                }
                let start = match scratch.as_mut() {
                    Some(scratch) => {
                        let stopping = *shutdown.borrow();
                        // A handler that panics takes down only its connection, as it would in a task,
                        // not the accept loop.
                        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            inline::try_serve(&stream, peer, &*handler, &limits, stopping, scratch)
                        }));
                        match served {
                            Ok(inline::Outcome::Done) => continue, // closes the stream, frees the slot
                            Ok(inline::Outcome::Task(start)) => start,
                            Err(_) => {
                                tracing::error!(%peer, "request handler panicked; connection closed");
                                continue;
                            }
                        }
                    }
                    None => conn::Start::fresh(),
                };
                let stream = match TcpStream::from_std(stream) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot register an accepted connection; closed");
                        continue;
                    }
                };
                tokio::spawn(connection_task(
                    stream,
                    peer,
                    (handler.clone(), limits.clone(), http2.clone()),
                    shutdown.clone(),
                    start,
                    tls.clone(),
                    (abandoned.clone(), permit),
                ));
            }
            Err(e) => {
                use std::io::ErrorKind::*;
                if !matches!(
                    e.kind(),
                    ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
                ) {
                    // EMFILE/ENFILE/ENOBUFS: back off instead of spinning, and say so once per episode
                    // (with how often it repeated) rather than every 50 ms.
                    accept_errors += 1;
                    if accept_errors == 1 {
                        tracing::warn!(
                            error = %e,
                            "accept failed; retrying every 50 ms (raise the open-file limit, or lower limits.max_connections)"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
    // Every connection holds a permit until it ends: having them all back means all connections are done.
    let _all = slots.acquire_many(max as u32).await;
    Ok(())
}

/// How many connections must have closed (since the peak of open ones) before the heap's free memory is
/// given back to the kernel.
const RELEASE_AFTER_CLOSES: usize = 1024;

/// Gives the memory of closed connections back to the kernel. The allocator keeps what connections freed
/// (scattered between live allocations, it cannot shrink the heap by itself), so after a burst of closes —
/// the number of open connections (`max` less the free `slots`) fell by `RELEASE_AFTER_CLOSES` and by half
/// from its peak — the free pages are released. Checked once a second; steady churn at a level never
/// triggers it.
pub(crate) async fn release_after_closes(slots: Slots) {
    let Slots { sem: slots, max } = slots;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut peak = 0usize;
    loop {
        tick.tick().await;
        let open = max.saturating_sub(slots.available_permits());
        peak = peak.max(open);
        if peak - open >= RELEASE_AFTER_CLOSES && open <= peak / 2 {
            crate::http::conn::drop_spare_buffers();
            let released = ordo_sys::memory::release_free_heap();
            tracing::debug!(
                peak,
                open,
                released,
                "connections closed: free heap memory released"
            );
            peak = open;
        }
    }
}

/// Aborts a task when dropped (a helper task that must not outlive its owner).
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One accepted connection's task: its protocol served until it ends or the listener is given up on
/// (`abandoned` changes); then its `permit` is released. The protocol's future is built here and boxed, so
/// the task holds it once (an `async` wrapper would keep the arguments beside the future made from them):
/// an idle plain keep-alive connection costs this task plus `conn::serve`'s future (see there).
fn connection_task<H: Handler>(
    stream: TcpStream,
    peer: SocketAddr,
    (handler, limits, http2): (Arc<H>, Arc<Limits>, Arc<crate::http2::Http2Config>),
    shutdown: watch::Receiver<bool>,
    start: conn::Start,
    tls: Option<Arc<crate::tls::TlsAcceptor>>,
    (mut abandoned, permit): (watch::Receiver<()>, tokio::sync::OwnedSemaphorePermit),
) -> impl Future<Output = ()> + Send + 'static {
    let h = (handler, limits, http2);
    let served: std::pin::Pin<Box<dyn Future<Output = ()> + Send>> = if h.1.proxy_protocol {
        Box::pin(async move {
            let mut stream = stream;
            if let Some(peer) = proxied_peer(&mut stream, peer, &h.1).await {
                protocol(stream, peer, h, shutdown, start, tls).await
            }
        })
    } else {
        protocol(stream, peer, h, shutdown, start, tls)
    };
    async move {
        tokio::select! {
            biased;
            _ = served => {}
            // the listener was given up on (shutdown grace over): drop the connection
            _ = abandoned.changed() => {}
        }
        drop(permit);
    }
}

/// With `[limits] proxy_protocol`: the client's address from the PROXY header the connection starts with,
/// or None (the header is missing or invalid, or the peer is not a trusted proxy): close it unanswered.
async fn proxied_peer(
    stream: &mut TcpStream,
    peer: SocketAddr,
    limits: &Limits,
) -> Option<SocketAddr> {
    if !limits.proxy_protocol_from.is_empty()
        && !limits
            .proxy_protocol_from
            .iter()
            .any(|c| c.contains(peer.ip()))
    {
        tracing::debug!(%peer, "PROXY protocol: peer is not a trusted proxy; closed");
        return None;
    }
    // (boxed: its buffer is needed only until the header is read, not for the connection's life)
    match Box::pin(crate::proxy_protocol::read_header(
        stream,
        peer,
        limits.head_timeout,
    ))
    .await
    {
        Ok(client) => Some(client),
        Err(e) => {
            tracing::debug!(%peer, error = %e, "PROXY protocol: closed");
            None
        }
    }
}

/// The protocol a connection speaks (TLS first when the listener has certificates), boxed.
fn protocol<H: Handler>(
    stream: TcpStream,
    peer: SocketAddr,
    (handler, limits, http2): (Arc<H>, Arc<Limits>, Arc<crate::http2::Http2Config>),
    shutdown: watch::Receiver<bool>,
    start: conn::Start,
    tls: Option<Arc<crate::tls::TlsAcceptor>>,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    match tls {
        None if http2.h2c => Box::pin(plain_or_h2c(
            stream, peer, handler, limits, http2, shutdown, start,
        )),
        None => Box::pin(conn::serve(stream, peer, handler, limits, shutdown, start)),
        Some(tls) => {
            let h = (handler, limits, http2);
            Box::pin(tls_connection(stream, peer, tls, h, shutdown))
        }
    }
}

/// A plain connection with h2c on: HTTP/2 if it opens with the HTTP/2 preface, else HTTP/1.
async fn plain_or_h2c<H: Handler>(
    mut stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<H>,
    limits: Arc<Limits>,
    http2: Arc<crate::http2::Http2Config>,
    shutdown: watch::Receiver<bool>,
    mut start: conn::Start,
) {
    use crate::http2::{Sniffed, sniff};
    // only a connection nothing was answered on yet can be HTTP/2 (the inline path may have served one)
    if start.served == 0 && matches!(start.resume, conn::Resume::Read) {
        match sniff(&mut stream, &mut start.rbuf, limits.head_timeout, &shutdown).await {
            Sniffed::Gone => return,
            Sniffed::Http2 => {
                let pre = std::mem::take(&mut start.rbuf).freeze();
                let h2 = crate::http2::serve(stream, pre, peer, handler, limits, http2, shutdown);
                return Box::pin(h2).await;
            }
            Sniffed::Http1 => {}
        }
    }
    conn::serve(stream, peer, handler, limits, shutdown, start).await
}

/// Serves one accepted TCP connection of a TLS listener: handshake, then the negotiated protocol.
async fn tls_connection<H: Handler>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Request, Response};
    use bytes::Bytes;

    /// What each idle plain keep-alive connection costs is mostly its task's future: it must not grow with
    /// the handler's future or the rarer paths (TLS, HTTP/2, error answers, file and stream writes), which
    /// are boxed. The sizes are deterministic for a given compiler (today 704 bytes for `conn::serve`, 2 728 before it was split);
    /// the bounds leave room for its changes.
    #[tokio::test]
    async fn a_connection_task_future_is_small() {
        struct Heavy;
        impl Handler for Heavy {
            fn handle(&self, _req: Request) -> impl Future<Output = Response> + Send + 'static {
                let big = [7u8; 8192];
                async move {
                    tokio::task::yield_now().await;
                    Response::bytes(200, "x", Bytes::copy_from_slice(&big))
                }
            }
        }
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let plain = TcpStream::connect(addr).await.unwrap();
        let (_tx, rx) = watch::channel(false);
        let (_abandon, abandoned) = watch::channel(());
        let permit = Arc::new(Semaphore::new(1)).acquire_owned().await.unwrap();
        let fut = connection_task(
            plain,
            addr,
            (
                Arc::new(Heavy),
                Arc::new(Limits::default()),
                Arc::new(crate::http2::Http2Config::off()),
            ),
            rx,
            conn::Start::fresh(),
            None,
            (abandoned, permit),
        );
        let size = std::mem::size_of_val(&fut);
        assert!(
            size <= 256,
            "a connection task's own future is {size} bytes"
        );
        let (_tx, rx) = watch::channel(false);
        let plain = TcpStream::connect(addr).await.unwrap();
        let limits = Arc::new(Limits::default());
        let fut = conn::serve(
            plain,
            addr,
            Arc::new(Heavy),
            limits,
            rx,
            conn::Start::fresh(),
        );
        let size = std::mem::size_of_val(&fut);
        assert!(size <= 1024, "a plain connection's future is {size} bytes");
    }
}
