//! Each upstream's idle keep-alive connections, one pool per serving thread: what goes back to a pool, what
//! comes out of it, and when a connection has sat idle too long.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use tokio::io::AsyncReadExt;

use crate::serving_thread::PerThread;
use crate::tls::{UpstreamStream, UpstreamTls};

#[derive(Debug)]
pub(super) struct UpConn {
    pub(super) stream: UpstreamStream,
    /// What was read from the upstream and not yet used (empty between exchanges).
    pub(super) buf: BytesMut,
    /// The request head being sent, rendered into this buffer reused by each exchange on the connection.
    pub(super) wbuf: BytesMut,
    /// The deadline of the read under way (see [`UpConn::read_by`]): one timer for the connection's life,
    /// moved for each read, instead of one registered and cancelled per read.
    pub(super) timer: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl UpConn {
    /// One read into `buf`, given up at `deadline` (`None`). Moving the connection's timer later, as each
    /// request does, only records the new deadline (the runtime finds it when the old one comes due); a
    /// timer is registered only when the deadline moves earlier or after it fired.
    pub(super) async fn read_by(
        &mut self,
        deadline: tokio::time::Instant,
    ) -> Option<std::io::Result<usize>> {
        self.timer.as_mut().reset(deadline);
        tokio::select! {
            biased;
            r = self.stream.read_buf(&mut self.buf) => Some(r),
            () = self.timer.as_mut() => None,
        }
    }

    /// What the upstream has now, at most `max` bytes, without waiting: None when nothing is there yet.
    pub(super) async fn read_now(&mut self, max: usize) -> Option<std::io::Result<usize>> {
        let mut limited = (&mut self.buf).limit(max);
        let mut read = std::pin::pin!(self.stream.read_buf(&mut limited));
        // (a read future that found nothing is dropped having read nothing: tokio's and rustls's reads
        // lose no bytes when cancelled)
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match read.as_mut().poll(cx) {
                std::task::Poll::Ready(r) => Some(r),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    /// [`UpConn::read_by`], taking at most `max` bytes from the socket (a streamed body's chunk: what is
    /// not taken stays in the kernel, and the upstream's writes stall when its buffers are full).
    pub(super) async fn read_at_most_by(
        &mut self,
        deadline: tokio::time::Instant,
        max: usize,
    ) -> Option<std::io::Result<usize>> {
        self.timer.as_mut().reset(deadline);
        let mut limited = (&mut self.buf).limit(max);
        tokio::select! {
            biased;
            r = self.stream.read_buf(&mut limited) => Some(r),
            () = self.timer.as_mut() => None,
        }
    }
}

/// The most buffer capacity an idle pooled connection keeps (read and write buffers each).
const IDLE_BUFFER_MAX: usize = 16 * 1024;

#[derive(Debug)]
pub(super) struct Upstream {
    pub(super) addr: String,
    /// Set for an `https://` upstream.
    pub(super) tls: Option<UpstreamTls>,
    /// Idle connections, one pool per serving thread (see [`crate::serving_thread::serving_thread`]): a connection
    /// is registered with the runtime of the thread that opened it, whose reactor alone reports its
    /// readiness (and which closes it when it stops), so it is reused only on that thread — and no thread
    /// takes a lock another thread takes. Oldest first. `max_idle` is per thread.
    pub(super) idle: PerThread<Mutex<VecDeque<(UpConn, Instant)>>>,
    pub(super) max_idle: usize,
    pub(super) idle_timeout: Duration,
    /// Its share in the group (≥ 1).
    pub(super) weight: u32,
    /// Whether it takes requests (passive ejection, active checks).
    pub(super) health: super::health::Health,
    /// Requests in flight and latency, kept when the balancing policy reads them.
    pub(super) load: super::balance::Load,
}

impl Upstream {
    pub(super) fn new(
        addr: String,
        tls: Option<UpstreamTls>,
        max_idle: usize,
        idle_timeout: Duration,
    ) -> Self {
        Upstream {
            addr,
            tls,
            idle: PerThread::new(),
            max_idle,
            idle_timeout,
            weight: 1,
            health: Default::default(),
            load: Default::default(),
        }
    }

    /// Back to the pool, idle since `since` (an exchange passes when its request was sent: a little early,
    /// which only shortens the idle time allowed, and saves a clock read). Connections idle longer than
    /// `idle_timeout` at the pool's old end are closed first, so a pool holds what was in use recently:
    /// after a burst it shrinks back as the burst's connections age out.
    pub(super) fn checkin(&self, mut conn: UpConn, since: Instant) {
        if !conn.buf.is_empty() {
            return;
        }
        // An idle connection keeps no large buffer: a body read whole grows the read buffer to its size,
        // and a pool holds as many connections as were in flight (the next exchange reserves what it needs).
        if conn.buf.capacity() > IDLE_BUFFER_MAX {
            conn.buf = BytesMut::new();
        }
        if conn.wbuf.capacity() > IDLE_BUFFER_MAX {
            conn.wbuf = BytesMut::new();
        }
        let Some(pool) = self.idle.get_or_init(|| Mutex::new(VecDeque::new())) else {
            return;
        };
        let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
        while idle
            .front()
            .is_some_and(|(_, t)| since.saturating_duration_since(*t) >= self.idle_timeout)
        {
            idle.pop_front();
        }
        if idle.len() < self.max_idle {
            idle.push_back((conn, since));
        }
    }

    /// The most recently returned idle connection that is still usable: younger than `idle_timeout`, and
    /// with nothing to read and not closed (see [`idle_and_open`]). Others are closed.
    pub(super) fn checkout_idle(&self) -> Option<UpConn> {
        let pool = self.idle.get()?;
        loop {
            let mut idle = pool.lock().unwrap_or_else(|e| e.into_inner());
            let (c, since) = idle.pop_back()?;
            if since.elapsed() >= self.idle_timeout {
                // the newest is too old: so is every one before it
                idle.clear();
                return None;
            }
            drop(idle);
            if !idle_and_open(&c.stream) {
                tracing::debug!(upstream = %self.addr, "idle upstream connection was closed or sent unrequested bytes; discarded");
                continue;
            }
            return Some(c);
        }
    }
}

/// Whether an idle upstream connection may carry a new request: nothing to read and not closed. Bytes that
/// arrived while it sat in the pool (a body after a HEAD answer, a second response nobody asked for) would
/// otherwise be taken for the next request's response — another client's — and an end of input (the
/// upstream closed it) would cost that request a failed attempt. One non-blocking read attempt, which the
/// runtime answers without a system call when the socket has not become readable since it last drained it.
pub(super) fn idle_and_open(stream: &UpstreamStream) -> bool {
    // (TLS: the socket under it — any byte there, even a TLS record, means the connection is not idle)
    let stream = stream.tcp();
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    /// A connection to `l` as the pool holds one, and the listener's side of it (kept open by the caller).
    async fn connected(l: &tokio::net::TcpListener) -> (UpConn, TcpStream) {
        let s = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let peer = l.accept().await.unwrap().0;
        let conn = UpConn {
            stream: UpstreamStream::Plain(s),
            buf: BytesMut::new(),
            wbuf: BytesMut::new(),
            timer: Box::pin(tokio::time::sleep(Duration::from_secs(60))),
        };
        (conn, peer)
    }

    /// An idle connection is reused only by the serving thread that pooled it (the runtime it is
    /// registered with), and each thread keeps up to `max_idle` of its own.
    #[tokio::test]
    async fn the_pool_keeps_each_serving_threads_connections_apart() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream::new(addr.to_string(), None, 1, Duration::from_secs(60));
        let mut peers = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..3 {
            let (c, peer) = connected(&l).await;
            peers.push(peer);
            conns.push(c);
        }
        let (c0, c1b, c1) = (
            conns.pop().unwrap(),
            conns.pop().unwrap(),
            conns.pop().unwrap(),
        );
        let local = |c: &UpConn| c.stream.tcp().local_addr().unwrap();
        let (a1, a0) = (local(&c1), local(&c0));
        crate::serving_thread::set_serving_thread(1);
        up.checkin(c1, Instant::now());
        // thread 1's pool is full (max_idle 1 per thread): dropped
        up.checkin(c1b, Instant::now());
        crate::serving_thread::set_serving_thread(0);
        assert!(
            up.checkout_idle().is_none(),
            "thread 0 took thread 1's connection"
        );
        up.checkin(c0, Instant::now());
        assert_eq!(local(&up.checkout_idle().unwrap()), a0);
        assert!(up.checkout_idle().is_none());
        crate::serving_thread::set_serving_thread(1);
        assert_eq!(local(&up.checkout_idle().unwrap()), a1);
        assert!(up.checkout_idle().is_none());
        crate::serving_thread::set_serving_thread(0);
    }

    /// A connection goes back to the pool with bounded buffers (issue 20 item 8: 20 slow HTTP/2 clients
    /// left hundreds of idle connections each holding a 200 kB body's read buffer): a read or write buffer
    /// grown past `IDLE_BUFFER_MAX` is let go, one within it is kept for the next exchange as it is.
    #[tokio::test]
    async fn an_idle_connection_keeps_small_buffers_and_lets_grown_ones_go() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = Upstream::new(
            l.local_addr().unwrap().to_string(),
            None,
            8,
            Duration::from_secs(60),
        );
        let (mut grown, _p1) = connected(&l).await;
        grown.buf.reserve(200_000); // a body read whole
        grown.wbuf.reserve(64 * 1024); // a long request head
        let (mut small, _p2) = connected(&l).await;
        small.buf.reserve(8 * 1024);
        small.wbuf.reserve(1024);
        let kept = (small.buf.capacity(), small.wbuf.capacity());
        assert!(kept.0 <= IDLE_BUFFER_MAX && kept.1 <= IDLE_BUFFER_MAX);
        crate::serving_thread::set_serving_thread(5);
        up.checkin(grown, Instant::now());
        up.checkin(small, Instant::now());
        let small = up.checkout_idle().unwrap();
        assert_eq!((small.buf.capacity(), small.wbuf.capacity()), kept);
        let grown = up.checkout_idle().unwrap();
        assert!(
            grown.buf.capacity() <= IDLE_BUFFER_MAX && grown.wbuf.capacity() <= IDLE_BUFFER_MAX,
            "an idle connection kept {} + {} bytes of buffers",
            grown.buf.capacity(),
            grown.wbuf.capacity()
        );
        crate::serving_thread::set_serving_thread(0);
    }

    /// A pool holds what was in use recently: connections idle longer than the timeout are closed from the
    /// pool's old end when a connection comes back, and a newest connection too old means all are.
    #[tokio::test]
    async fn the_pool_closes_what_aged_out_from_its_old_end() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let up = Upstream::new(addr.to_string(), None, 8, Duration::from_secs(60));
        let mut peers = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..4 {
            let (c, peer) = connected(&l).await;
            peers.push(peer);
            conns.push(c);
        }
        let local = |c: &UpConn| c.stream.tcp().local_addr().unwrap();
        let now = Instant::now();
        let long_ago = now - Duration::from_secs(120);
        let mut newest = conns.pop().unwrap();
        newest.buf.reserve(256 * 1024); // a body read whole grew it
        let fresh = conns.pop().unwrap();
        let (a_newest, a_fresh) = (local(&newest), local(&fresh));
        crate::serving_thread::set_serving_thread(3);
        for c in conns {
            up.checkin(c, long_ago);
        }
        up.checkin(fresh, now - Duration::from_secs(1));
        // the two returned long ago are closed as this one comes back
        up.checkin(newest, now);
        let count = |up: &Upstream| up.idle.get().unwrap().lock().unwrap().len();
        assert_eq!(count(&up), 2);
        // what an idle connection keeps of its buffers is bounded
        {
            let idle = up.idle.get().unwrap().lock().unwrap();
            assert!(
                idle.iter()
                    .all(|(c, _)| c.buf.capacity() <= IDLE_BUFFER_MAX)
            );
        }
        assert_eq!(local(&up.checkout_idle().unwrap()), a_newest);
        assert_eq!(local(&up.checkout_idle().unwrap()), a_fresh);
        assert!(up.checkout_idle().is_none());
        // a newest connection past the timeout: every one before it is older still
        let (c, peer) = connected(&l).await;
        peers.push(peer);
        up.idle
            .get()
            .unwrap()
            .lock()
            .unwrap()
            .push_back((c, long_ago));
        assert!(up.checkout_idle().is_none());
        assert_eq!(count(&up), 0);
        crate::serving_thread::set_serving_thread(0);
    }
}
