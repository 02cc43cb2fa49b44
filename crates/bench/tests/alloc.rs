//! The hot path allocates nothing per request: a counting global allocator compares a run of N requests
//! with a run of 4N against a server that itself never allocates per request.

use std::alloc::System;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use ordo_bench::{BenchConfig, CancelToken, Stop, run};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

// Counts allocations process-wide (stats_alloc: the workspace forbids the `unsafe` a hand-written
// counting allocator would need).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Thread-per-connection keep-alive server with a fixed buffer and a static response.
fn server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let _ = s.set_nodelay(true);
                let mut buf = [0u8; 4096];
                let mut filled = 0;
                loop {
                    match s.read(&mut buf[filled..]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => filled += n,
                    }
                    while let Some(end) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.copy_within(end + 4..filled, 0);
                        filled -= end + 4;
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

fn allocs_for(url: &str, n: u64) -> u64 {
    let mut c = BenchConfig::new(url).unwrap();
    c.connections = 4;
    c.stop = Stop::Requests(n);
    c.timeout = Duration::from_secs(5);
    let before = allocations();
    let r = run(c, CancelToken::new()).unwrap();
    let after = allocations();
    assert_eq!(r.summary.complete, n);
    after - before
}

#[test]
fn no_allocation_per_request() {
    let url = server();
    // Warm the server's connection threads and the process (first-use allocations).
    allocs_for(&url, 500);
    let small = allocs_for(&url, 2_000);
    let large = allocs_for(&url, 8_000);
    let extra = large.saturating_sub(small);
    eprintln!("allocations: {small} for 2000 requests, {large} for 8000");
    // 6000 more requests: allow a little slack for the per-second timeline and runtime housekeeping.
    assert!(
        extra < 300,
        "{extra} more allocations for 6000 more requests ({small} vs {large})"
    );
}
