//! Wakeup coalescing for the runtimes of `ordo serve`'s serving threads and `ordo bench`'s client threads: a
//! thread that is busy spins briefly before it parks in `epoll_wait`, so what its peers on other cores send
//! meanwhile is taken without a wakeup — which, on one machine, the sender pays (an inter-processor
//! interrupt, under a hypervisor a VM exit): docs/serve.md "Wakeup coalescing", docs/bench.md.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest coalescing wait either command accepts (`ordo serve`'s `coalesce`, `ordo bench
/// --coalesce`): a longer spin costs the spinning thread more than the wakeup it saves its peers.
pub const MAX_WAIT: Duration = Duration::from_micros(100);

/// A thread spins before parking only while it is hot: in its last full window of this length it spent
/// at least [`HOT_PERCENT`] of the time working (not parked, not spinning). Near saturation a spin costs
/// little next to the work and saves its senders a wakeup each time; at a moderate load it would cost the
/// thread more CPU than it saves it, and an idle server parks at once.
const WINDOW: Duration = Duration::from_millis(10);

/// See [`WINDOW`].
const HOT_PERCENT: u128 = 75;

/// A spin paid off when the park after it returned within this: the work was there (epoll_wait returned
/// without sleeping). A park that slept takes longer — the sleep, the wakeup and the switch back.
const PAID_OFF_WITHIN: Duration = Duration::from_micros(10);

/// After a spin that did not pay off, the thread parks without spinning this many times, doubled after
/// each further miss up to [`MAX_SKIP`] and reset by a spin that paid off: at a load where data seldom
/// arrives within the spin, spinning stops costing CPU.
const MAX_SKIP: u32 = 64;

/// One runtime thread's coalescing state (thread-local: each runtime thread decides for itself).
#[derive(Clone, Copy, Debug)]
struct Coalescing {
    /// When the runtime last woke from parking.
    last_unpark: Option<Instant>,
    /// When the current window began (None: the thread has not parked yet).
    window_start: Option<Instant>,
    /// Time worked in the current window so far (from each wakeup to the next park).
    worked: Duration,
    /// Whether the last full window was hot.
    hot: bool,
    /// When the current park began after a spin (None: it did not spin).
    spun_park: Option<Instant>,
    /// Parks left to take without spinning.
    skip: u32,
    /// The skip after the next miss.
    backoff: u32,
}

impl Coalescing {
    /// A thread that has not parked yet (`const`, so the thread-local needs no lazy initialisation on the
    /// park path).
    const IDLE: Coalescing = Coalescing {
        last_unpark: None,
        window_start: None,
        worked: Duration::ZERO,
        hot: false,
        spun_park: None,
        skip: 0,
        backoff: 0,
    };

    /// Called as the runtime is about to park at `now`: should it spin first?
    fn before_park(&mut self, now: Instant) -> bool {
        if let Some(woke) = self.last_unpark {
            self.worked += now.saturating_duration_since(woke);
        }
        match self.window_start {
            None => self.window_start = Some(now),
            Some(start) => {
                let span = now.saturating_duration_since(start);
                if span >= WINDOW {
                    self.hot = self.worked.as_nanos() * 100 >= span.as_nanos() * HOT_PERCENT;
                    self.window_start = Some(now);
                    self.worked = Duration::ZERO;
                }
            }
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        self.hot
    }

    /// The spin ended at `now` and the park begins.
    fn spun(&mut self, now: Instant) {
        self.spun_park = Some(now);
    }

    /// The runtime woke from parking at `now`. After a spin: whether it paid off.
    fn unparked(&mut self, now: Instant) -> Option<bool> {
        self.last_unpark = Some(now);
        let parked = self.spun_park.take()?;
        let paid_off = now.saturating_duration_since(parked) <= PAID_OFF_WITHIN;
        if paid_off {
            self.backoff = 0;
        } else {
            self.backoff = (self.backoff * 2).clamp(1, MAX_SKIP);
            self.skip = self.backoff;
        }
        Some(paid_off)
    }
}

thread_local! {
    static COALESCING: Cell<Coalescing> = const { Cell::new(Coalescing::IDLE) };
}

/// Spins of every coalescing runtime thread in the process since it started: [paid off, missed].
static SPINS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// The process's coalescing spins so far, `(paid off, missed)`: `ordo serve`'s `/status` and `/metrics` show
/// them, so an operator can see whether `coalesce` finds work (process-wide: every runtime in the process
/// adds to them).
pub fn coalesce_spins() -> (u64, u64) {
    (
        SPINS[0].load(Ordering::Relaxed),
        SPINS[1].load(Ordering::Relaxed),
    )
}

/// Runs `f` on this thread's coalescing state (nothing while the thread is being torn down).
fn with_state<R: Default>(f: impl FnOnce(&mut Coalescing) -> R) -> R {
    COALESCING
        .try_with(|c| {
            let mut s = c.get();
            let r = f(&mut s);
            c.set(s);
            r
        })
        .unwrap_or_default()
}

/// Wakeup coalescing for a runtime (`ordo serve`'s `coalesce` setting, `ordo bench --coalesce`; nothing when
/// it is zero): when the
/// runtime runs out of ready tasks while its thread is hot (it worked at least 75% of its last 10 ms),
/// the thread spins for `wait` before it parks in
/// `epoll_wait`. Data that arrives meanwhile queues on its sockets without waking anyone — the thread is
/// not on the epoll wait queue, so the sender (a client, an upstream, on another core) skips the wakeup and
/// its inter-processor interrupt — and the runtime then takes it without blocking. A proxy that finishes its
/// work quickly otherwise blocks and is woken several times per request, and those wakeups are paid on the
/// other core (docs/serve.md, "Wakeup coalescing"). Spins that do not pay off (the park after them still
/// sleeps) make the thread skip spinning for a while; a thread below the mark, and an idle server, never
/// spins.
///
/// A spin, not a sleep: a sleep of a few microseconds arms a high-resolution timer, which under a hypervisor
/// costs more CPU than the spin (measured ~20 µs of CPU per `nanosleep` on a KVM guest), and the kernel's
/// default timer slack stretches it to ~55 µs, long enough to leave the other side idle.
pub fn coalesce_wakeups(
    builder: &mut tokio::runtime::Builder,
    wait: Duration,
) -> &mut tokio::runtime::Builder {
    if wait.is_zero() {
        return builder;
    }
    builder
        .on_thread_unpark(|| {
            if let Some(paid_off) = with_state(|s| s.unparked(Instant::now())) {
                SPINS[usize::from(!paid_off)].fetch_add(1, Ordering::Relaxed);
            }
        })
        .on_thread_park(move || {
            if with_state(|s| s.before_park(Instant::now())) {
                spin_for(wait);
                with_state(|s| s.spun(Instant::now()));
            }
        })
}

/// Busy-waits for `d` (the CPU stays with this thread; `spin_loop` lets a hyperthread sibling run).
fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_thread_that_worked_most_of_its_last_window_spins() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut c = Coalescing::IDLE;
        assert!(
            !c.before_park(t0),
            "a thread that never parked does not spin"
        );
        // parked 1 ms, then worked 9 ms: the window [0, 10 ms] was 90% work, hot
        c.unparked(t0 + ms(1));
        assert!(c.before_park(t0 + WINDOW));
        // until the next window ends, the verdict stands
        c.unparked(t0 + WINDOW + ms(5));
        assert!(c.before_park(t0 + WINDOW + ms(5)));
        // [10, 20 ms]: parked 5 ms, worked 5 ms (50%), then [20, 30]: 100%
        c.unparked(t0 + ms(15));
        assert!(!c.before_park(t0 + ms(20)));
        c.unparked(t0 + ms(20));
        assert!(c.before_park(t0 + ms(30)));
        // a long sleep makes a cold window: an idle server parks at once
        c.unparked(t0 + ms(5_000));
        assert!(!c.before_park(t0 + ms(5_001)));
        // exactly 75% is hot, just under is not
        let mut c = Coalescing::IDLE;
        c.before_park(t0);
        c.unparked(t0 + Duration::from_micros(2_500));
        assert!(c.before_park(t0 + WINDOW));
        let mut c = Coalescing::IDLE;
        c.before_park(t0);
        c.unparked(t0 + Duration::from_micros(2_501));
        assert!(!c.before_park(t0 + WINDOW));
    }

    #[test]
    fn spins_that_do_not_pay_off_back_off_and_one_that_does_resets() {
        let us = Duration::from_micros;
        let mut t = Instant::now();
        let mut c = Coalescing::IDLE;
        // the first park opens a window, and a window of work without a park makes the thread hot
        assert!(!c.before_park(t));
        c.unparked(t);
        t += WINDOW;
        // spin, then a park that returns at once: paid off, the next park spins again
        assert!(c.before_park(t));
        c.spun(t);
        t += us(3);
        assert_eq!(c.unparked(t), Some(true));
        assert!(c.before_park(t));
        // spin, then a park that sleeps 100 µs: a miss, the next park skips (1), then spins again
        c.spun(t);
        t += us(100);
        assert_eq!(c.unparked(t), Some(false));
        assert!(!c.before_park(t));
        assert!(c.before_park(t));
        // each further miss doubles the skip: 2, 4, ... up to MAX_SKIP
        let mut skips = Vec::new();
        for _ in 0..9 {
            c.spun(t);
            t += us(100);
            c.unparked(t);
            let mut n = 0;
            while !c.before_park(t) {
                n += 1;
            }
            skips.push(n);
        }
        assert_eq!(skips, [2, 4, 8, 16, 32, 64, 64, 64, 64]);
        // one that pays off resets: no skip after it, and the next miss skips 1 again
        c.spun(t);
        t += us(2);
        c.unparked(t);
        assert!(c.before_park(t));
        c.spun(t);
        t += us(100);
        c.unparked(t);
        assert!(!c.before_park(t));
        assert!(c.before_park(t));
        // a park that did not spin (skipped, or idle) leaves the backoff alone and is not a spin
        assert_eq!(c.unparked(t + us(500)), None);
        assert!(c.before_park(t + us(500)));
    }

    #[test]
    fn spin_lasts_at_least_its_duration() {
        let t = Instant::now();
        spin_for(Duration::from_millis(3));
        assert!(t.elapsed() >= Duration::from_millis(3));
        let t = Instant::now();
        spin_for(Duration::ZERO);
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    /// The park hook spins on a hot thread's park, not on a cold one's: a runtime whose coalescing wait is
    /// long (50 ms) runs a task that parks once (a timer), then works a whole window without parking and
    /// parks again. The first park (no window yet) does not spin; the second follows a hot window and
    /// does, so the run lasts at least the work and the wait; the wakeup after it counts the spin. The work
    /// is four windows long: the first park's timer may wake late on a loaded machine, and that lateness
    /// counts as idle time of the window (with one window of work, 3 ms late made it 73%, not hot).
    #[test]
    fn a_hot_runtime_spins_before_it_parks() {
        let wait = Duration::from_millis(50);
        let mut b = tokio::runtime::Builder::new_current_thread();
        b.enable_time();
        let rt = coalesce_wakeups(&mut b, wait).build().unwrap();
        let t = Instant::now();
        rt.block_on(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            spin_for(4 * WINDOW);
            tokio::time::sleep(Duration::from_millis(1)).await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        });
        assert!(t.elapsed() >= 4 * WINDOW + wait, "{:?}", t.elapsed());
        assert!(
            COALESCING.with(Cell::get).last_unpark.is_some(),
            "the unpark hook ran"
        );
        let (paid, missed) = coalesce_spins();
        assert!(
            paid + missed >= 1,
            "the spin was counted at the next wakeup"
        );
    }
}
