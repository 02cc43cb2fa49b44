//! Several serving threads (`Server::start_threads`, what `threads = N` starts): each thread's own
//! SO_REUSEPORT listener takes connections, keep-alive and pipelining work on every thread, the proxy's
//! pool serves each thread from its own connections, shutdown lets every thread's in-flight requests finish,
//! a reload reaches every thread, and the default pool counts the threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::ctl_util::{accepted_per_thread, busy, get, start_threads, wait_until};

/// Connections opened at most while waiting for the kernel to give each thread one (it hashes the
/// connection's addresses, so the chance that 200 all go to one of two listeners is 2^-199).
const MAX_CONNS: usize = 200;

/// Reads one response with a `Content-Length` from `s` (bounded by 10 s); returns its body.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> (u16, String) {
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().unwrap())
                    })
                    .expect("content-length");
                if buf.len() >= end + 4 + len {
                    let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string();
                    buf.drain(..end + 4 + len);
                    let status = head[9..12].parse().unwrap();
                    return (status, body);
                }
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed before a whole response");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("response within 10 s")
}

/// Opens keep-alive connections (at most MAX_CONNS) until every one of `threads` threads has accepted one.
async fn conns_on_every_thread(h: &ordo_serve::ServerHandle, threads: usize) -> Vec<TcpStream> {
    let a = h.local_addr();
    let mut conns = Vec::new();
    while conns.len() < MAX_CONNS {
        conns.push(TcpStream::connect(a).await.unwrap());
        // the accept may trail the connect: a keep-alive request makes sure it happened
        let c = conns.last_mut().unwrap();
        c.write_all(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let (status, _) = read_response(c, &mut Vec::new()).await;
        assert_eq!(status, 200);
        let per = accepted_per_thread(h);
        assert_eq!(per.len(), threads);
        if per.iter().all(|&n| n > 0) {
            return conns;
        }
    }
    panic!(
        "{MAX_CONNS} connections, accepted per thread {:?}",
        accepted_per_thread(h)
    );
}

#[tokio::test]
async fn two_threads_both_accept_and_serve_keep_alive_and_pipelined_requests() {
    let h = start_threads("workers = 8\n", 2).await;
    let mut conns = conns_on_every_thread(&h, 2).await;
    let per = accepted_per_thread(&h);
    assert_eq!(per.iter().sum::<u64>(), conns.len() as u64, "{per:?}");
    // on every connection (so on both threads): two pipelined requests in one write, then one more
    for c in &mut conns {
        c.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_response(c, &mut buf).await.0, 200);
        assert_eq!(read_response(c, &mut buf).await.0, 200);
        c.write_all(b"GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(read_response(c, &mut buf).await.0, 200);
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut rest))
            .await
            .expect("closed after Connection: close")
            .unwrap();
        assert!(rest.is_empty() && buf.is_empty());
    }
    // no connection was lost or counted twice
    assert_eq!(
        accepted_per_thread(&h).iter().sum::<u64>(),
        conns.len() as u64
    );
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn coalescing_threads_serve_keep_alive_and_pipelined_requests() {
    // `coalesce` at its longest: requests on coalescing threads are served
    let h = start_threads("workers = 8\ncoalesce = \"100us\"\n", 2).await;
    let mut conns = conns_on_every_thread(&h, 2).await;
    for round in 0..3 {
        for c in &mut conns {
            c.write_all(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
                .await
                .unwrap();
            let mut buf = Vec::new();
            assert_eq!(read_response(c, &mut buf).await.0, 200, "round {round}");
            assert_eq!(read_response(c, &mut buf).await.0, 200, "round {round}");
            assert!(buf.is_empty());
        }
    }
    // /status and /metrics show the setting and the process's spins (a thread spins only while it works
    // most of the time, which this light load does not make it do: the counting is tested in
    // serving_thread's unit tests)
    let st = h.status();
    assert_eq!(st["coalesce"]["wait"], "100us", "{st}");
    for k in ["spins_paid_off", "spins_missed"] {
        assert!(st["coalesce"][k].is_u64(), "{k}: {st}");
    }
    let m = get(h.admin_addr().unwrap(), "/metrics").await;
    for result in ["paid_off", "missed"] {
        let line = format!("ordo_serve_coalesce_spins_total{{result=\"{result}\"}} ");
        assert!(m.body.contains(&line), "{line} in {}", m.body);
    }
    h.shutdown().await.unwrap();
}

/// An upstream answering `body` on every request of every connection, counting its connections.
async fn upstream(body: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let counted = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            counted.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let out = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if s.write_all(out.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (addr, conns)
}

fn proxy_config(upstream: SocketAddr) -> String {
    format!("workers = 8\n[[routes]]\nprefix = \"/\"\nproxy = {{ upstreams = [\"{upstream}\"] }}\n")
}

#[tokio::test]
async fn two_threads_proxy_through_their_pools_and_a_reload_reaches_both() {
    let (up_a, conns_a) = upstream("from-a").await;
    let h = start_threads(&proxy_config(up_a), 2).await;
    let mut conns = conns_on_every_thread(&h, 2).await;
    let first = conns_a.load(Ordering::Relaxed);
    assert!(first >= 1 && first <= conns.len(), "{first}");
    // every connection's next requests, one at a time: each thread reuses its pooled upstream connections
    let rounds = 3;
    for _ in 0..rounds {
        for c in &mut conns {
            c.write_all(b"GET /p HTTP/1.1\r\nHost: t\r\n\r\n")
                .await
                .unwrap();
            assert_eq!(
                read_response(c, &mut Vec::new()).await,
                (200, "from-a".to_string())
            );
        }
    }
    let requests = conns.len() * (rounds + 1);
    let opened = conns_a.load(Ordering::Relaxed);
    assert!(
        opened * 2 <= requests,
        "{opened} upstream connections for {requests} requests one at a time: the pool is not reused"
    );
    // a reload swaps the upstream for every thread, on connections opened before it
    let (up_b, conns_b) = upstream("from-b").await;
    let cfg = ordo_serve::ServeConfig::from_toml_str(&proxy_config(up_b), "test.toml").unwrap();
    let mut running = h.config();
    running.routes = cfg.routes;
    h.reload(running).unwrap();
    for c in &mut conns {
        c.write_all(b"GET /p HTTP/1.1\r\nHost: t\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(
            read_response(c, &mut Vec::new()).await,
            (200, "from-b".to_string())
        );
    }
    assert!(conns_b.load(Ordering::Relaxed) >= 1);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish_on_every_thread() {
    let h = start_threads("workers = 64\n", 2).await;
    let a = h.local_addr();
    let mut in_flight = Vec::new();
    // slow requests until both threads hold one (each accepted before the next starts)
    while in_flight.len() < 60 {
        let before: u64 = accepted_per_thread(&h).iter().sum();
        in_flight.push(tokio::spawn(async move { get(a, "/sleep?ms=800").await }));
        wait_until(Duration::from_secs(10), || {
            accepted_per_thread(&h).iter().sum::<u64>() > before
        })
        .await;
        if accepted_per_thread(&h).iter().all(|&n| n > 0) {
            break;
        }
    }
    let n = in_flight.len() as u64;
    wait_until(Duration::from_secs(10), || busy(&h) == n).await;
    assert!(
        accepted_per_thread(&h).iter().all(|&n| n > 0),
        "{:?}",
        accepted_per_thread(&h)
    );
    tokio::time::timeout(Duration::from_secs(20), h.shutdown())
        .await
        .expect("shutdown within 20 s")
        .unwrap();
    for r in in_flight {
        let r = r.await.unwrap();
        assert_eq!(r.status, 200, "in-flight request completes: {r:?}");
    }
    // nothing listens any more, on either thread's listener
    for _ in 0..8 {
        assert!(TcpStream::connect(a).await.is_err());
    }
}

#[tokio::test]
async fn a_second_server_on_a_threaded_servers_address_is_refused() {
    let h = start_threads("", 2).await;
    let mut cfg = ordo_serve::ServeConfig::default();
    cfg.apply_overrides(ordo_serve::Overrides {
        listen: Some(h.local_addr()),
        admin: Some(None),
        ..Default::default()
    });
    for threads in [1, 2] {
        let e = ordo_serve::Server::start_threads(cfg.clone(), threads)
            .await
            .err()
            .expect("the address is taken");
        assert!(e.to_string().contains("cannot listen on"), "{e}");
    }
    h.shutdown().await.unwrap();
}

/// Bodies dripped a byte at a time on both threads: shutdown waits `shutdown_grace`, then every thread's
/// connections are closed without an answer and the shutdown returns.
#[tokio::test]
async fn shutdown_grace_closes_what_is_left_on_every_thread() {
    let h = start_threads("shutdown_grace = \"600ms\"\n", 2).await;
    let a = h.local_addr();
    let mut readers = Vec::new();
    let mut drippers = Vec::new();
    while readers.len() < MAX_CONNS {
        let before: u64 = accepted_per_thread(&h).iter().sum();
        let mut s = TcpStream::connect(a).await.unwrap();
        s.write_all(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n")
            .await
            .unwrap();
        let (rd, mut wr) = s.into_split();
        readers.push(rd);
        // a byte every 50 ms for up to 30 s (far longer than the grace), until the server closes
        drippers.push(tokio::spawn(async move {
            for _ in 0..600 {
                if wr.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
        wait_until(Duration::from_secs(10), || {
            accepted_per_thread(&h).iter().sum::<u64>() > before
        })
        .await;
        if accepted_per_thread(&h).iter().all(|&n| n > 0) {
            break;
        }
    }
    assert!(accepted_per_thread(&h).iter().all(|&n| n > 0));
    let t = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), h.shutdown())
        .await
        .expect("shutdown returns within 20 s")
        .unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(550),
        "waited the grace: {:?}",
        t.elapsed()
    );
    for mut rd in readers {
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), rd.read(&mut buf))
            .await
            .expect("closed")
            .unwrap_or(0);
        assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&buf[..n]));
    }
    for d in drippers {
        d.abort();
    }
}

/// `limits.max_connections` is the server's, not each thread's, and no listener keeps a slot while it waits
/// for a connection: with one slot and two threads, every connection is served once the one before it has
/// closed (whichever thread's listener the kernel puts it on), and a second one waits while one is open.
#[tokio::test]
async fn max_connections_is_shared_by_the_threads() {
    let h = start_threads("[limits]\nmax_connections = 1\nidle_timeout = \"10s\"\n", 2).await;
    let a = h.local_addr();
    for _ in 0..MAX_CONNS {
        assert_eq!(get(a, "/x").await.status, 200);
        if accepted_per_thread(&h).iter().all(|&n| n > 0) {
            break;
        }
    }
    assert!(
        accepted_per_thread(&h).iter().all(|&n| n > 0),
        "{:?}",
        accepted_per_thread(&h)
    );
    // one keep-alive connection open: the next one waits, on whichever thread, until it closes
    let mut held = TcpStream::connect(a).await.unwrap();
    held.write_all(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut held, &mut Vec::new()).await.0, 200);
    let mut next = TcpStream::connect(a).await.unwrap();
    next.write_all(b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .unwrap();
    let mut peek = [0u8; 16];
    let waited = tokio::time::timeout(Duration::from_millis(300), next.peek(&mut peek)).await;
    assert!(waited.is_err(), "served beyond max_connections = 1");
    drop(held);
    assert_eq!(read_response(&mut next, &mut Vec::new()).await.0, 200);
    h.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_default_pool_is_64_workers_per_serving_thread_also_after_a_reload() {
    // `threads` in the file says 1: what the server started with (3) is what counts
    let h = start_threads("threads = 1\n", 3).await;
    let st = h.status();
    assert_eq!(st["workers"], 192, "{st}");
    assert_eq!(st["workers_setting"], "64 per serving thread");
    // a reload re-reads the file (no thread count in it): the pool stays 64 per running thread
    let fresh =
        ordo_serve::ServeConfig::from_toml_str("threads = 1\nworkers = 64\n", "test.toml").unwrap();
    let mut cfg = h.config();
    cfg.workers = fresh.workers;
    cfg.started_threads = None;
    h.reload(cfg).unwrap();
    assert_eq!(h.status()["workers"], 64, "a number written is the pool");
    let mut cfg = h.config();
    cfg.workers = ordo_serve::Workers::default();
    cfg.started_threads = None;
    h.reload(cfg).unwrap();
    let st = h.status();
    assert_eq!(st["workers"], 192, "{st}");
    assert_eq!(st["workers_setting"], "64 per serving thread");
    h.shutdown().await.unwrap();
}
