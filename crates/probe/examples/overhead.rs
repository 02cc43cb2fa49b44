//! The probes' own cost, for bench/probe-overhead.sh: (1) one sample's reads (two getrusage, two thread
//! CPU clock reads, two schedstat reads, two monotonic clock reads) in a tight loop; (2) the loop probe's
//! work timed with and without those reads, interleaved so drift hits both alike, printed as a ratio;
//! (3) one `ProcessSampler::sample()` of a process with 1, 16 and 64 threads, with and without the
//! migrations file. Run it with `--release`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ordo_probe::work::{Calibration, spin};
use ordo_sys::procfs::{ProcRoot, ThreadSchedstat};
use ordo_sys::{ProcessSampler, clock, rusage, thread};

fn reads(s: &mut ThreadSchedstat) -> u64 {
    let t0 = clock::monotonic_ns();
    let a = s.read().map(|x| x.run_delay_ns).unwrap_or(0);
    let r0 = rusage::thread().map(|r| r.nivcsw).unwrap_or(0);
    let c0 = clock::thread_cpu_ns();
    let c1 = clock::thread_cpu_ns();
    let r1 = rusage::thread().map(|r| r.nivcsw).unwrap_or(0);
    let b = s.read().map(|x| x.run_delay_ns).unwrap_or(0);
    let t1 = clock::monotonic_ns();
    a ^ b ^ r0 ^ r1 ^ c0 ^ c1 ^ t0 ^ t1
}

fn main() {
    let cpu = *thread::get_affinity(0).unwrap().last().unwrap();
    thread::pin_current_thread(cpu).expect("pin");
    let mut s = ThreadSchedstat::open_current(&ProcRoot::default()).expect("schedstat");

    // (1) the per-sample reads alone.
    let n = 20_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            black_box(reads(&mut s));
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    println!(
        "per-sample reads (2x getrusage, 2x schedstat, 2x thread CPU clock, 2x monotonic): {:.2} us",
        best / 1e3
    );

    // (2) the loop with and without the reads, alternating sample by sample. Each sample is timed on its
    // own; the minimum and the median are compared (the minimum is what preemption cannot inflate).
    let cal = Calibration::measure();
    for (label, work_ns, samples) in [
        ("0.1 ms", 100_000u64, 4000usize),
        ("1 ms", 1_000_000, 1000),
        ("14 ms", 14_000_000, 120),
    ] {
        let iters = cal.iterations_for(work_ns);
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for i in 0..samples {
            let instrumented = i % 2 == 0;
            let t = clock::monotonic_ns();
            if instrumented {
                black_box(reads(&mut s));
            }
            black_box(spin(iters));
            let took = clock::monotonic_ns() - t;
            if instrumented {
                with.push(took)
            } else {
                without.push(took)
            }
        }
        with.sort_unstable();
        without.sort_unstable();
        let (wmin, omin) = (with[0] as f64, without[0] as f64);
        let (wmed, omed) = (
            with[with.len() / 2] as f64,
            without[without.len() / 2] as f64,
        );
        println!(
            "loop of {label} work: with reads / without = {:.4}x at the minimum ({:.1} us vs {:.1} us), {:.4}x at the median",
            wmin / omin,
            wmin / 1e3,
            omin / 1e3,
            wmed / omed
        );
    }

    // (3) the pid sampler on this process with more and more threads (they sleep).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut handles = Vec::new();
    let pid = std::process::id() as i32;
    for target in [1usize, 16, 64] {
        while thread::list_threads(pid).unwrap().len() < target {
            let stop = stop.clone();
            handles.push(std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }));
        }
        let threads = thread::list_threads(pid).unwrap().len();
        for migrations in [true, false] {
            let mut sampler = ProcessSampler::new(pid)
                .unwrap()
                .read_migrations(migrations);
            let k = 200;
            let c = clock::thread_cpu_ns();
            let t = Instant::now();
            for _ in 0..k {
                black_box(sampler.sample().unwrap());
            }
            let wall = t.elapsed().as_secs_f64() / k as f64;
            let per = (clock::thread_cpu_ns() - c) as f64 / 1e9 / k as f64;
            println!(
                "pid sampler, {threads:>2} threads, migrations {}: {:.1} us CPU per sample ({:.1} us wall), {:.1} us per thread; at 1 s intervals {:.3}% of one CPU",
                if migrations { "on " } else { "off" },
                per * 1e6,
                wall * 1e6,
                per * 1e6 / threads as f64,
                per * 100.0
            );
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
}
