//! Criterion microbenchmark of the scheduling core: the cost of one enqueue plus one dispatch with 100k
//! requests queued across 8 classes, for every built-in policy and for the custom policy with a trivial
//! HeadPicker (the Lua picker's cost is measured by ordo-serve); and the cost of one enqueue plus one cancel
//! of a random queued request (a client that went away) at the same depth. Measurement times are set short
//! in code so the whole run finishes in about two minutes: `cargo bench -p ordo-sched --bench core`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ordo_sched::{
    ClassId, ClassSpec, Head, HeadPicker, Meta, Nanos, PolicyKind, SchedConfig, Scheduler, Ticket,
};

const QUEUED: usize = 100_000;
const CLASSES: usize = 8;
/// Simulated time between two operations.
const TICK: Nanos = 100;

/// A picker doing trivial work: the class with the longest queue.
struct Longest;
impl HeadPicker for Longest {
    fn pick(&mut self, heads: &[Head<'_>], _now: Nanos) -> Option<ClassId> {
        heads.iter().max_by_key(|h| h.queued).map(|h| h.class)
    }
}

/// Variants of the set-up.
#[derive(Clone, Copy, PartialEq)]
enum Deadlines {
    /// Far deadlines: edf's admission fast path (all queued work fits before the deadline) always applies.
    Far,
    /// Tight: for most classes the queued work exceeds the deadline, so edf admission searches the queues.
    Tight,
    /// Far deadlines and no aging: srpt always serves from its size index.
    FarNoAging,
}

fn config(policy: PolicyKind, deadlines: Deadlines) -> SchedConfig {
    let classes = (0..CLASSES)
        .map(|i| {
            let mut c = ClassSpec::new(format!("class{i}"))
                .weight(1 + i as u32)
                .priority((i % 3) as i32);
            // Ages after 5 ms of simulated time (50k operations): the aging paths are exercised too.
            c.age_after = (deadlines != Deadlines::FarNoAging).then_some(5_000_000);
            c.deadline = Some(match deadlines {
                Deadlines::Far | Deadlines::FarNoAging => {
                    1_000_000_000_000 + i as Nanos * 1_000_000
                }
                // 30..44 ms against 40 ms of queued work (100k x 400 ns on one worker).
                Deadlines::Tight => 30_000_000 + i as Nanos * 2_000_000,
            });
            c
        })
        .collect();
    let mut cfg = SchedConfig::new(classes, policy);
    cfg.seed = 42;
    cfg
}

/// Request `i`'s class and size hint (sizes spread over five orders of magnitude).
fn shape(i: u64) -> (ClassId, u64) {
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((x >> 59) as usize % CLASSES, 1 + (x >> 20) % 100_000)
}

fn filled(policy: PolicyKind, deadlines: Deadlines) -> (Scheduler<u64>, u64) {
    let cfg = config(policy, deadlines);
    let mut s = if policy == PolicyKind::Custom {
        Scheduler::with_picker(cfg, Box::new(Longest)).expect("valid config")
    } else {
        Scheduler::new(cfg).expect("valid config")
    };
    let (workers, service) = match deadlines {
        Deadlines::Far | Deadlines::FarNoAging => (64, 1_000),
        Deadlines::Tight => (1, 400),
    };
    s.set_capacity(workers);
    for c in 0..CLASSES {
        s.observe_service(c, service);
    }
    for i in 0..QUEUED as u64 {
        let (class, size_hint) = shape(i);
        let meta = Meta {
            class,
            size_hint,
            deadline: None,
            arrival: i * TICK,
        };
        s.enqueue(i, meta, i * TICK).expect("admitted");
    }
    (s, QUEUED as u64)
}

/// One measured operation: enqueue request `i` at time `i * TICK`, then dispatch one request.
struct Run {
    s: Scheduler<u64>,
    i: u64,
    rejected: u64,
}

impl Run {
    #[inline]
    fn op(&mut self) -> Option<u64> {
        let now = self.i * TICK;
        let (class, size_hint) = shape(self.i);
        let meta = Meta {
            class,
            size_hint,
            deadline: None,
            arrival: now,
        };
        let accepted = self.s.enqueue(self.i, meta, now).is_ok();
        self.i += 1;
        self.rejected += u64::from(!accepted);
        self.s.dispatch(now).map(|d| d.item)
    }
}

/// CPU time of the current thread in ns (CLOCK_THREAD_CPUTIME_ID), so that time spent waiting for a CPU
/// on a shared machine is not counted.
fn thread_cpu_ns() -> u64 {
    ordo_sys::clock::thread_cpu_ns()
}

fn runs() -> impl Iterator<Item = (PolicyKind, Deadlines, String)> {
    PolicyKind::ALL
        .into_iter()
        .map(|p| (p, Deadlines::Far, p.as_str().to_string()))
        .chain([
            (PolicyKind::Edf, Deadlines::Tight, "edf-tight".to_string()),
            (
                PolicyKind::Srpt,
                Deadlines::FarNoAging,
                "srpt-no-aging".to_string(),
            ),
        ])
}

/// One measured operation of the cancel benchmark: enqueue request `i`, then cancel a pseudo-random queued
/// request (from anywhere in the queues) by its ticket.
struct CancelRun {
    s: Scheduler<u64>,
    tickets: Vec<Ticket>,
    i: u64,
}

impl CancelRun {
    fn new(policy: PolicyKind) -> Self {
        let cfg = config(policy, Deadlines::Far);
        let mut s = if policy == PolicyKind::Custom {
            Scheduler::with_picker(cfg, Box::new(Longest)).expect("valid config")
        } else {
            Scheduler::new(cfg).expect("valid config")
        };
        s.set_capacity(64);
        for c in 0..CLASSES {
            s.observe_service(c, 1_000);
        }
        let mut run = CancelRun {
            s,
            tickets: Vec::with_capacity(QUEUED + 1),
            i: 0,
        };
        for _ in 0..QUEUED {
            run.push();
        }
        run
    }

    fn push(&mut self) {
        let now = self.i * TICK;
        let (class, size_hint) = shape(self.i);
        let meta = Meta {
            class,
            size_hint,
            deadline: None,
            arrival: now,
        };
        let t = self.s.enqueue_ticket(self.i, meta, now).expect("admitted");
        self.tickets.push(t);
        self.i += 1;
    }

    #[inline]
    fn op(&mut self) -> Option<u64> {
        self.push();
        let pick = (self.i.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) as usize % self.tickets.len();
        let t = self.tickets.swap_remove(pick);
        self.s.cancel(t)
    }
}

fn check(run: &Run, name: &str) {
    // Every run must really have kept ~100k queued (a rejected enqueue shrinks the queue by one).
    assert!(
        run.rejected < 1_000 && run.s.len() + 1_000 >= QUEUED,
        "{name}: {} rejected, {} queued",
        run.rejected,
        run.s.len()
    );
}

fn bench(c: &mut Criterion) {
    let mut wall = c.benchmark_group("wall: enqueue+dispatch, 100k queued, 8 classes");
    wall.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20);
    for (policy, deadlines, name) in runs() {
        let (s, i) = filled(policy, deadlines);
        let mut run = Run { s, i, rejected: 0 };
        wall.bench_function(name.as_str(), |b| b.iter(|| black_box(run.op())));
        check(&run, &name);
    }
    wall.finish();

    let mut cpu = c.benchmark_group("cpu: enqueue+dispatch, 100k queued, 8 classes");
    cpu.warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20);
    for (policy, deadlines, name) in runs() {
        let (s, i) = filled(policy, deadlines);
        let mut run = Run { s, i, rejected: 0 };
        cpu.bench_function(name.as_str(), |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu_ns();
                for _ in 0..iters {
                    black_box(run.op());
                }
                Duration::from_nanos(thread_cpu_ns().saturating_sub(start))
            })
        });
        check(&run, &name);
    }
    cpu.finish();

    let mut cancel = c.benchmark_group("cpu: enqueue+cancel, 100k queued, 8 classes");
    cancel
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1500))
        .sample_size(20);
    for policy in PolicyKind::ALL {
        let mut run = CancelRun::new(policy);
        cancel.bench_function(policy.as_str(), |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu_ns();
                for _ in 0..iters {
                    assert!(black_box(run.op()).is_some(), "a live ticket");
                }
                Duration::from_nanos(thread_cpu_ns().saturating_sub(start))
            })
        });
        assert_eq!(run.s.len(), QUEUED, "{}", policy.as_str());
    }
    cancel.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
