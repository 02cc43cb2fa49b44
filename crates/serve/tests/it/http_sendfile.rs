//! Large static files sent with sendfile(2) on plain TCP: whole files, ranges (206) and HEAD, keep-alive after
//! a sendfile response (the next response on the connection intact), a file that shrinks while it is being
//! sent (the connection closes after a prefix of the file, never garbage or padding), a client that leaves
//! mid-file, an empty file (its head must not be held back waiting for body bytes), and a file replaced
//! between requests (served anew at once, not 404 from a stale entry).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::http_util::*;
use ordo_serve::backend::Backend;
use ordo_serve::backend::static_files::{StaticBackend, StaticConfig};
use ordo_serve::http::{Handler, Limits, Request, Response};
use tokio::io::AsyncReadExt;

struct Route(Arc<Backend>);

impl Handler for Route {
    fn handle(&self, req: Request) -> impl std::future::Future<Output = Response> + Send + 'static {
        let backend = self.0.clone();
        async move { backend.call(&req).await }
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

async fn server(root: &Path, sendfile_min_bytes: u64) -> Server {
    let mut cfg = StaticConfig::new(root);
    cfg.sendfile_min_bytes = sendfile_min_bytes;
    let b = StaticBackend::new(&cfg, "").unwrap();
    start(Route(Arc::new(Backend::Static(b))), Limits::default()).await
}

#[tokio::test]
async fn sendfile_whole_ranges_head_and_keep_alive() {
    let dir = tempfile::tempdir().unwrap();
    let big = pattern(1_000_003);
    let small = pattern(100);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("small.txt"), &small).unwrap();
    let s = server(dir.path(), 64 * 1024).await;
    let mut c = Client::connect(s.addr).await;
    // the first request of a connection (handed from the accept loop to a task), then more on the same one
    for _ in 0..3 {
        c.send(&get("/big.bin")).await;
        let r = c.response().await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("1000003"));
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        assert!(r.body == big, "body differs");
    }
    let len = big.len();
    for (spec, a, b) in [
        ("0-0", 0, 0),
        ("4095-4096", 4095, 4096),
        ("500000-", 500_000, len - 1),
        ("-3", len - 3, len - 1),
        ("65536-700000", 65536, 700_000),
    ] {
        c.send(
            format!("GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={spec}\r\n\r\n").as_bytes(),
        )
        .await;
        let r = c.response().await;
        assert_eq!(r.status, 206, "{spec}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes {a}-{b}/{len}").as_str()),
            "{spec}"
        );
        assert!(r.body == big[a..=b], "{spec}: body differs");
    }
    // HEAD: the length, no body (the next response follows the head directly)
    c.send(b"HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n").await;
    let r = c.try_response(true).await.unwrap();
    assert_eq!(
        (r.status, r.header("content-length")),
        (200, Some("1000003"))
    );
    // pipelined: a sendfile response, then a small one from memory, then sendfile again
    let mut two = get("/big.bin");
    two.extend_from_slice(&get("/small.txt"));
    two.extend_from_slice(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=10-19\r\n\r\n");
    c.send(&two).await;
    assert!(c.response().await.body == big);
    assert_eq!(c.response().await.body, small);
    assert_eq!(c.response().await.body, big[10..20]);
}

#[tokio::test]
async fn an_empty_file_by_sendfile_is_answered_at_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    // every file goes the sendfile way
    let s = server(dir.path(), 0).await;
    let mut c = Client::connect(s.addr).await;
    for _ in 0..3 {
        c.send(&get("/empty")).await;
        let r = c.response().await;
        assert_eq!((r.status, r.header("content-length")), (200, Some("0")));
    }
}

/// Reads until EOF (or an error, or `limit` bytes), within `WAIT` per read.
async fn read_to_close(stream: &mut tokio::net::TcpStream, limit: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    while got.len() < limit {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("connection neither closed nor sent anything in {WAIT:?}"),
        }
    }
    got
}

#[tokio::test]
async fn a_file_that_shrinks_while_sent_closes_the_connection_after_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let len = 48 << 20;
    let data = pattern(len);
    std::fs::write(&path, &data).unwrap();
    let s = server(dir.path(), 64 * 1024).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/big.bin")).await;
    // The head first (so the length announced is the whole file's), then no reading for a while: the server
    // fills the socket buffers (a few MB on loopback) and waits. Then the file shrinks to a page-aligned size
    // far below what is already queued.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    while find(&got, b"\r\n\r\n").is_none() {
        let n = tokio::time::timeout(WAIT, c.stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed before the head");
        got.extend_from_slice(&buf[..n]);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cut = 1 << 20;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    got.extend(read_to_close(&mut c.stream, len + 4096).await);
    let head_end = find(&got, b"\r\n\r\n").expect("a head") + 4;
    let head = String::from_utf8_lossy(&got[..head_end]);
    assert!(
        head.contains(&format!("Content-Length: {len}\r\n")),
        "{head}"
    );
    let body = &got[head_end..];
    assert!(
        body.len() < len,
        "the whole announced length arrived from a file cut to {cut} bytes"
    );
    // What arrived before the cut is the file's own bytes, in order. Bytes past the cut that were already
    // queued in the socket refer to page-cache pages the truncation zeroed: each is the file's byte or 0
    // (the kernel's doing, as with any sendfile server); the body is short, so no client takes it as whole.
    let upto = body.len().min(cut);
    assert!(body[..upto] == data[..upto], "body differs before the cut");
    let odd = body[upto..]
        .iter()
        .zip(&data[upto..])
        .position(|(&a, &b)| a != b && a != 0);
    assert!(
        odd.is_none(),
        "byte {:?} past the cut is neither the file's nor 0",
        odd.map(|i| i + upto)
    );
    // the changed file is served at once (its stale entry is dropped), complete
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/big.bin")).await;
    let r = c.response().await;
    assert_eq!(r.status, 200);
    assert!(r.body == data[..cut], "the shrunk file's bytes differ");
}

#[tokio::test]
async fn a_client_that_leaves_mid_file_does_not_disturb_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(16 << 20);
    std::fs::write(dir.path().join("big.bin"), &data).unwrap();
    let s = server(dir.path(), 64 * 1024).await;
    for _ in 0..3 {
        let mut c = Client::connect(s.addr).await;
        c.send(&get("/big.bin")).await;
        let mut buf = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(WAIT, c.stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0);
        // gone with most of the file unread: the server's send fails (reset), the connection ends
        drop(c);
    }
    let mut c = Client::connect(s.addr).await;
    c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=-100\r\n\r\n")
        .await;
    let r = c.response().await;
    assert_eq!(r.status, 206);
    assert!(r.body == data[data.len() - 100..]);
}

#[tokio::test]
async fn a_file_replaced_between_requests_is_served_anew() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    std::fs::write(&path, pattern(200_000)).unwrap();
    let s = server(dir.path(), 64 * 1024).await;
    let mut c = Client::connect(s.addr).await;
    c.send(&get("/f.bin")).await;
    assert_eq!(c.response().await.body.len(), 200_000);
    // within the revalidation interval: the cached metadata no longer matches the file opened
    let new = pattern(300_001);
    std::fs::write(&path, &new).unwrap();
    c.send(&get("/f.bin")).await;
    let r = c.response().await;
    assert_eq!(r.header("content-length"), Some("300001"));
    assert!(r.body == new);
}
