//! Clocks the probes read: CLOCK_MONOTONIC for elapsed time (comparable between processes, unlike
//! `Instant`'s opaque epoch) and the calling thread's CPU clock.

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec.max(0) as u64) * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// CLOCK_MONOTONIC, ns since boot (excluding suspend).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

#[cfg(test)]
mod tests {
    #[test]
    fn clocks_move() {
        let a = super::monotonic_ns();
        let c = super::thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x ^ i);
        }
        assert!(super::monotonic_ns() > a);
        assert!(super::thread_cpu_ns() > c);
    }
}
