//! The request path's per-class counters and latency histograms, striped: each thread writes a slot of its
//! own (aligned so no two slots share a cache line) and a scrape sums the slots. A shared counter would
//! move its cache line between cores on every request, and prometheus-client's histogram takes a write
//! lock per observation; on many cores both cost more than the request's own work.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use ordo_sched::RejectReason;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::histogram::exponential_buckets;

use super::{ClassLabel, Escaped, RejectLabel};

/// The histograms' upper bounds: 50 µs doubling to ~26 s (20 buckets, then +Inf).
const BUCKETS: usize = 20;
const FIRST_BOUND_NS: u64 = 50_000;

thread_local! {
    /// This thread's stripe (usize::MAX: not yet assigned).
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Threads take stripes in the order they first count something: serving threads, started one after the
/// other, get stripes of their own as long as there are enough.
static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

/// Stripes per class: twice the CPUs (serving threads plus the few others that count), a power of two.
fn stripes() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
        (cpus * 2).next_power_of_two().clamp(4, 512)
    })
}

/// The calling thread's stripe, below `n` (a power of two).
fn stripe(n: usize) -> usize {
    let s = STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_STRIPE.fetch_add(1, Ordering::Relaxed));
        }
        s.get()
    });
    s & (n - 1)
}

/// The bucket of a duration: the first whose upper bound (`50 µs · 2^i`) it does not exceed.
fn bucket(ns: u64) -> usize {
    let units = ns.div_ceil(FIRST_BOUND_NS);
    if units <= 1 {
        return 0;
    }
    ((u64::BITS - (units - 1).leading_zeros()) as usize).min(BUCKETS)
}

/// One thread's share of a histogram: counts per bucket (not cumulative) and the sum in nanoseconds.
#[derive(Default)]
struct Hist {
    buckets: [AtomicU64; BUCKETS + 1],
    sum_ns: AtomicU64,
}

impl Hist {
    fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// One thread's counters of one class.
#[repr(align(128))]
#[derive(Default)]
struct Stripe {
    arrivals: AtomicU64,
    dispatched: AtomicU64,
    completed: AtomicU64,
    rejected: [AtomicU64; RejectReason::ALL.len()],
    queue_wait: Hist,
    service: Hist,
}

/// A histogram summed over the stripes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistogramTotals {
    /// Per bucket, not cumulative; the last is +Inf.
    pub buckets: Vec<u64>,
    pub sum: Duration,
}

impl HistogramTotals {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// One class's request-path counters.
pub struct ClassMetrics {
    stripes: Box<[Stripe]>,
}

impl ClassMetrics {
    pub(super) fn new() -> Self {
        ClassMetrics {
            stripes: (0..stripes()).map(|_| Stripe::default()).collect(),
        }
    }

    fn mine(&self) -> &Stripe {
        &self.stripes[stripe(self.stripes.len())]
    }

    fn sum(&self, f: impl Fn(&Stripe) -> &AtomicU64) -> u64 {
        self.stripes
            .iter()
            .map(|s| f(s).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    fn hist(&self, f: impl Fn(&Stripe) -> &Hist) -> HistogramTotals {
        let mut buckets = vec![0; BUCKETS + 1];
        let mut sum = 0u64;
        for s in self.stripes.iter() {
            let h = f(s);
            for (total, b) in buckets.iter_mut().zip(&h.buckets) {
                *total += b.load(Ordering::Relaxed);
            }
            sum = sum.wrapping_add(h.sum_ns.load(Ordering::Relaxed));
        }
        HistogramTotals {
            buckets,
            sum: Duration::from_nanos(sum),
        }
    }

    /// A request was classified into the class.
    pub fn arrive(&self) {
        self.mine().arrivals.fetch_add(1, Ordering::Relaxed);
    }

    /// A request of the class was refused for `reason`.
    pub fn reject(&self, reason: RejectReason) {
        let i = reason_index(reason);
        self.mine().rejected[i].fetch_add(1, Ordering::Relaxed);
    }

    /// A request of the class got a worker after waiting `waited`.
    pub fn dispatch(&self, waited: Duration) {
        let s = self.mine();
        s.dispatched.fetch_add(1, Ordering::Relaxed);
        s.queue_wait.observe(waited);
    }

    /// A request's backend answered after `service`.
    pub fn complete(&self, service: Duration) {
        let s = self.mine();
        s.completed.fetch_add(1, Ordering::Relaxed);
        s.service.observe(service);
    }

    pub fn arrivals(&self) -> u64 {
        self.sum(|s| &s.arrivals)
    }

    pub fn dispatched(&self) -> u64 {
        self.sum(|s| &s.dispatched)
    }

    pub fn completed(&self) -> u64 {
        self.sum(|s| &s.completed)
    }

    /// Requests refused for `reason`.
    pub fn rejected(&self, reason: RejectReason) -> u64 {
        let i = reason_index(reason);
        self.sum(|s| &s.rejected[i])
    }

    pub fn queue_wait(&self) -> HistogramTotals {
        self.hist(|s| &s.queue_wait)
    }

    pub fn service(&self) -> HistogramTotals {
        self.hist(|s| &s.service)
    }
}

fn reason_index(reason: RejectReason) -> usize {
    RejectReason::ALL
        .iter()
        .position(|r| *r == reason)
        .unwrap_or(0)
}

/// Every class's counters by name (a class removed by a reload keeps its own).
pub(super) type ClassTable = RwLock<HashMap<Arc<str>, Arc<ClassMetrics>>>;

/// A family written from each class's sums: its name, help text and how to read the sum.
type Reading<T> = (&'static str, &'static str, fn(&ClassMetrics) -> T);

/// Writes the striped families at each scrape, summed over the stripes.
#[derive(Debug)]
pub(super) struct ClassCollector(pub(super) Arc<ClassTable>);

impl std::fmt::Debug for ClassMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassMetrics")
            .field("arrivals", &self.arrivals())
            .finish_non_exhaustive()
    }
}

impl Collector for ClassCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let classes: Vec<(Arc<str>, Arc<ClassMetrics>)> = self
            .0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        let label = |n: &Arc<str>| ClassLabel::new(n);
        let counters: [Reading<u64>; 3] = [
            (
                "arrivals",
                "Requests classified into a class",
                ClassMetrics::arrivals,
            ),
            (
                "dispatched",
                "Requests handed to a worker",
                ClassMetrics::dispatched,
            ),
            (
                "completed",
                "Requests whose backend answered",
                ClassMetrics::completed,
            ),
        ];
        for (name, help, get) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (n, m) in &classes {
                ConstCounter::new(get(m)).encode(family.encode_family(&label(n))?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "rejected",
            "Requests answered 503 instead of served, by reason",
            None,
            MetricType::Counter,
        )?;
        for (n, m) in &classes {
            for r in RejectReason::ALL {
                let l = RejectLabel {
                    class: Escaped(n.to_string()),
                    reason: r.as_str().to_string(),
                };
                ConstCounter::new(m.rejected(r)).encode(family.encode_family(&l)?)?;
            }
        }
        let bounds: Vec<f64> =
            exponential_buckets(FIRST_BOUND_NS as f64 / 1e9, 2.0, BUCKETS as u16)
                .chain(std::iter::once(f64::MAX))
                .collect();
        let hists: [Reading<HistogramTotals>; 2] = [
            (
                "queue_wait_seconds",
                "Time from arrival to dispatch",
                ClassMetrics::queue_wait,
            ),
            (
                "service_seconds",
                "Time a worker spent on the request (backend call)",
                ClassMetrics::service,
            ),
        ];
        for (name, help, get) in hists {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for (n, m) in &classes {
                let h = get(m);
                let count = h.count();
                // per bucket: the encoder writes them cumulative (`le`) itself
                let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(h.buckets).collect();
                family
                    .encode_family(&label(n))?
                    .encode_histogram::<ClassLabel>(h.sum.as_secs_f64(), count, &buckets, None)?;
            }
        }
        Ok(())
    }
}

/// Status classes counted: 1xx … 5xx.
pub(super) const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// One thread's responses of one route, by status class.
#[repr(align(128))]
#[derive(Default)]
struct StatusStripe {
    by_class: [AtomicU64; STATUS_CLASSES.len()],
}

/// One route's responses by status class, striped like [`ClassMetrics`].
pub struct RouteResponses {
    stripes: Box<[StatusStripe]>,
}

/// The index in [`STATUS_CLASSES`] of a status (anything outside 100–599 counts with 5xx).
fn status_index(status: u16) -> usize {
    match status {
        100..=599 => usize::from(status / 100 - 1),
        _ => STATUS_CLASSES.len() - 1,
    }
}

impl RouteResponses {
    pub(super) fn new() -> Self {
        RouteResponses {
            stripes: (0..stripes()).map(|_| StatusStripe::default()).collect(),
        }
    }

    /// A response with `status` was sent for the route.
    pub fn count(&self, status: u16) {
        self.stripes[stripe(self.stripes.len())].by_class[status_index(status)]
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Responses of status class `i` (index in [`STATUS_CLASSES`]), summed over the stripes.
    pub fn total(&self, i: usize) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.by_class[i].load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

impl std::fmt::Debug for RouteResponses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteResponses").finish_non_exhaustive()
    }
}

/// Every route's response counters by its label (a route removed by a reload keeps its own).
pub(super) type RouteTable = RwLock<HashMap<Arc<str>, Arc<RouteResponses>>>;

/// Writes `responses_total{route, status}` at each scrape, summed over the stripes.
#[derive(Debug)]
pub(super) struct ResponsesCollector(pub(super) Arc<RouteTable>);

impl Collector for ResponsesCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut routes: Vec<(Arc<str>, Arc<RouteResponses>)> = self
            .0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        routes.sort_by(|a, b| a.0.cmp(&b.0));
        let mut family = encoder.encode_descriptor(
            "responses",
            "Responses sent for requests that reached routing, by route and status class (`(none)`: no \
             route matched)",
            None,
            MetricType::Counter,
        )?;
        for (route, m) in &routes {
            for (i, status) in STATUS_CLASSES.iter().enumerate() {
                let l = super::StatusLabel {
                    route: Escaped(route.to_string()),
                    status: (*status).to_string(),
                };
                ConstCounter::new(m.total(i)).encode(family.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_count_by_class() {
        let r = RouteResponses::new();
        for status in [200, 204, 302, 404, 502, 503, 0, 700] {
            r.count(status);
        }
        let got: Vec<u64> = (0..STATUS_CLASSES.len()).map(|i| r.total(i)).collect();
        assert_eq!(got, vec![0, 2, 1, 1, 4]);
    }

    #[test]
    fn buckets_follow_the_bounds() {
        // upper bounds are inclusive, as Prometheus's `le`
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(50_000), 0);
        assert_eq!(bucket(50_001), 1);
        assert_eq!(bucket(100_000), 1);
        assert_eq!(bucket(100_001), 2);
        assert_eq!(bucket(200_000), 2);
        assert_eq!(bucket(400_000), 3);
        let last = FIRST_BOUND_NS << (BUCKETS - 1);
        assert_eq!(bucket(last), BUCKETS - 1);
        assert_eq!(bucket(last + 1), BUCKETS);
        assert_eq!(bucket(u64::MAX), BUCKETS);
        // against the definition, over a sweep
        for ns in (0..3_000_000u64).step_by(7_919) {
            let want = (0..BUCKETS)
                .find(|&i| ns <= FIRST_BOUND_NS << i)
                .unwrap_or(BUCKETS);
            assert_eq!(bucket(ns), want, "{ns} ns");
        }
    }

    #[test]
    fn counts_from_many_threads_add_up() {
        let m = Arc::new(ClassMetrics::new());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        m.arrive();
                        m.dispatch(Duration::from_micros(i % 100));
                        m.complete(Duration::from_micros(70));
                        if i % 10 == 0 {
                            m.reject(RejectReason::QueueTimeout);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.arrivals(), 8000);
        assert_eq!(m.dispatched(), 8000);
        assert_eq!(m.completed(), 8000);
        assert_eq!(m.rejected(RejectReason::QueueTimeout), 800);
        assert_eq!(m.rejected(RejectReason::Shutdown), 0);
        let s = m.service();
        assert_eq!(s.count(), 8000);
        assert_eq!(s.buckets[1], 8000, "70 µs is in (50 µs, 100 µs]");
        assert_eq!(s.sum, Duration::from_micros(70 * 8000));
        let w = m.queue_wait();
        // 0..=49 µs: bucket 0 (50 per thread-loop of 100), 50 µs too; 51..=99 µs: bucket 1
        assert_eq!(w.buckets[0], 8 * 10 * 51);
        assert_eq!(w.buckets[1], 8 * 10 * 49);
    }

    #[test]
    fn threads_take_stripes_of_their_own() {
        let n = 1 << 40; // the raw indices
        let mine = stripe(n);
        let other = std::thread::spawn(move || stripe(n)).join().unwrap();
        assert_ne!(mine, other);
        assert_eq!(stripe(n), mine, "a thread keeps its stripe");
    }
}
