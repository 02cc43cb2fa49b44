//! The synthetic backend: work on demand for experiments, so every experiment runs with nothing else
//! installed. Query parameters, on any path and in any combination (`/cpu?us=N`, `/sleep?ms=N`,
//! `/bytes?n=N`, `/work?us=..&ms=..&n=..`):
//! - `ms=N`: wait N milliseconds (an async sleep: the serving thread is free meanwhile);
//! - `us=N`: then burn N microseconds of CPU (a spin on the monotonic clock) on tokio's blocking pool, so
//!   CPU-bound requests queue in the scheduler, not on the runtime's I/O threads (`inline_cpu = true` burns
//!   on the serving thread instead, as before); a request whose client goes away stops burning;
//! - `n=N`: answer N bytes (from one shared buffer, never allocated per request); without `n` the body is `ok\n`.
//!
//! With a `capacity` schedule the backend has a knee, as a real one does: at most `servers` requests do
//! their work at once and the others wait inside the backend in arrival order (a c-server FIFO queue), with
//! `servers` following the schedule from the time the backend was built (server start or reload). That is
//! what `workers = "auto"` is measured against (docs/overload.md).
//!
//! A value that is not a non-negative integer, or is over its cap, is answered 400 naming the parameter.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ordo_sys::thread::WorkPriority;
use serde::Deserialize;

use super::BackendError;
use crate::http::{Body, Request, Response};

/// Size of the shared body buffer; larger bodies are streamed from it in slices.
const SHARED_LEN: usize = 1 << 20;

fn shared() -> &'static Bytes {
    static BUF: OnceLock<Bytes> = OnceLock::new();
    BUF.get_or_init(|| Bytes::from(vec![b'x'; SHARED_LEN]))
}

/// `[routes.synthetic]`: caps on what one request may ask for.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Largest `us` (CPU burn, microseconds). Default 10 s.
    pub max_us: u64,
    /// Largest `ms` (sleep, milliseconds). Default 60 s.
    pub max_ms: u64,
    /// Largest `n` (body bytes). Default 1 GiB.
    pub max_bytes: u64,
    /// A knee: how many requests do their work at once from when on (the rest wait, FIFO). Empty: no limit.
    pub capacity: Vec<CapacityStep>,
    /// Burn `us` on the serving (I/O) thread instead of the blocking pool.
    pub inline_cpu: bool,
}

impl Default for SyntheticConfig {
    fn default() -> Self {
        SyntheticConfig {
            max_us: 10_000_000,
            max_ms: 60_000,
            max_bytes: 1 << 30,
            capacity: Vec::new(),
            inline_cpu: false,
        }
    }
}

/// One step of the capacity schedule: from `at` after the backend started, `servers` at once.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CapacityStep {
    #[serde(deserialize_with = "crate::http::duration::deserialize")]
    pub at: Duration,
    pub servers: usize,
}

/// See the module documentation.
#[derive(Debug)]
pub struct SyntheticBackend {
    cfg: SyntheticConfig,
    capacity: Option<Capacity>,
}

/// The c-server FIFO queue of a backend with a `capacity` schedule.
#[derive(Debug)]
struct Capacity {
    steps: Vec<CapacityStep>,
    start: tokio::time::Instant,
    state: Mutex<CapState>,
}

#[derive(Debug, Default)]
struct CapState {
    busy: usize,
    waiters: VecDeque<tokio::sync::oneshot::Sender<()>>,
}

impl Capacity {
    /// Servers at `elapsed` since start (unlimited before the first step).
    fn servers_at(steps: &[CapacityStep], elapsed: Duration) -> usize {
        steps
            .iter()
            .rev()
            .find(|s| s.at <= elapsed)
            .map_or(usize::MAX, |s| s.servers)
    }

    fn servers(&self) -> usize {
        Self::servers_at(&self.steps, self.start.elapsed())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CapState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand free servers to waiters (skipping those that went away).
    fn grant(&self, st: &mut CapState) {
        let cap = self.servers();
        while st.busy < cap {
            let Some(tx) = st.waiters.pop_front() else {
                break;
            };
            if tx.send(()).is_ok() {
                st.busy += 1;
            }
        }
    }

    /// Wait for a server (FIFO); the guard gives it back.
    async fn acquire(&self) -> ServerSlot<'_> {
        let rx = {
            let mut st = self.lock();
            self.grant(&mut st);
            if st.busy < self.servers() && st.waiters.is_empty() {
                st.busy += 1;
                return ServerSlot(self);
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            st.waiters.push_back(tx);
            rx
        };
        let mut wait = SlotWait {
            cap: self,
            rx: Some(rx),
        };
        let granted = match wait.rx.as_mut() {
            Some(rx) => rx.await.is_ok(),
            None => false,
        };
        wait.rx = None;
        if !granted {
            // The sender was dropped without a grant (cannot happen while the backend lives): take a slot.
            self.lock().busy += 1;
        }
        ServerSlot(self)
    }
}

/// A server of the capacity model, held while a request does its work.
struct ServerSlot<'a>(&'a Capacity);

impl Drop for ServerSlot<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.busy = st.busy.saturating_sub(1);
        self.0.grant(&mut st);
    }
}

/// A wait for a server; dropped after its grant was sent but before it was taken, it gives the server back.
struct SlotWait<'a> {
    cap: &'a Capacity,
    rx: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Drop for SlotWait<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                drop(ServerSlot(self.cap));
            }
        }
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Work {
    us: Option<u64>,
    ms: Option<u64>,
    n: Option<u64>,
}

impl SyntheticBackend {
    pub fn new(cfg: &SyntheticConfig) -> Result<Self, BackendError> {
        let mut prev: Option<Duration> = None;
        for (i, s) in cfg.capacity.iter().enumerate() {
            if s.servers == 0 {
                return Err(BackendError::Invalid {
                    field: "capacity",
                    msg: format!("step {i}: servers must be ≥ 1, got 0"),
                });
            }
            if prev.is_some_and(|p| s.at <= p) {
                return Err(BackendError::Invalid {
                    field: "capacity",
                    msg: format!(
                        "step {i}: `at` must come after the previous step's ({} ≤ {})",
                        crate::http::duration::format(s.at),
                        crate::http::duration::format(prev.unwrap_or_default())
                    ),
                });
            }
            prev = Some(s.at);
        }
        let capacity = (!cfg.capacity.is_empty()).then(|| Capacity {
            steps: cfg.capacity.clone(),
            start: tokio::time::Instant::now(),
            state: Mutex::new(CapState::default()),
        });
        Ok(SyntheticBackend {
            cfg: cfg.clone(),
            capacity,
        })
    }

    /// Servers of the capacity model now (`None` without a `capacity` schedule).
    pub fn servers(&self) -> Option<usize> {
        self.capacity.as_ref().map(Capacity::servers)
    }

    fn param(
        req: &Request,
        name: &'static str,
        cap: u64,
        cap_name: &str,
    ) -> Result<Option<u64>, String> {
        let Some(v) = req.query_param(name) else {
            return Ok(None);
        };
        let n: u64 = v.parse().map_err(|_| {
            format!("bad value for parameter {name}: {v:?} (expected a non-negative integer)")
        })?;
        if n > cap {
            return Err(format!(
                "parameter {name}={n} is over the cap {cap_name} = {cap}"
            ));
        }
        Ok(Some(n))
    }

    fn work(&self, req: &Request) -> Result<Work, String> {
        if req.query.is_none() {
            return Ok(Work::default());
        }
        Ok(Work {
            us: Self::param(req, "us", self.cfg.max_us, "max_us")?,
            ms: Self::param(req, "ms", self.cfg.max_ms, "max_ms")?,
            n: Self::param(req, "n", self.cfg.max_bytes, "max_bytes")?,
        })
    }

    pub async fn call(&self, req: &Request) -> Response {
        self.call_at(req, WorkPriority::default()).await
    }

    /// [`SyntheticBackend::call`] with the CPU work (`us`) run at `priority` on the blocking pool's thread
    /// (and the thread's own priority back afterwards); `inline_cpu` burns on the I/O thread, shared by
    /// every connection, so there the priority is not applied.
    pub async fn call_at(&self, req: &Request, priority: WorkPriority) -> Response {
        let w = match self.work(req) {
            Ok(w) => w,
            Err(msg) => return Response::text(400, &msg),
        };
        let _server = match &self.capacity {
            Some(c) => Some(c.acquire().await),
            None => None,
        };
        if let Some(ms) = w.ms.filter(|&m| m > 0) {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(us) = w.us.filter(|&u| u > 0) {
            let d = Duration::from_micros(us);
            if self.cfg.inline_cpu {
                burn(d, &AtomicBool::new(false));
            } else {
                burn_off_thread(d, priority).await;
            }
        }
        match w.n {
            None => Response::bytes(
                200,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ok\n"),
            ),
            Some(n) if n as usize <= SHARED_LEN => Response::bytes(
                200,
                "application/octet-stream",
                shared().slice(..n as usize),
            ),
            Some(n) => {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tokio::spawn(async move {
                    let mut left = n;
                    while left > 0 {
                        let k = left.min(SHARED_LEN as u64) as usize;
                        if tx.send(Ok(shared().slice(..k))).await.is_err() {
                            return;
                        }
                        left -= k as u64;
                    }
                });
                Response {
                    status: 200,
                    headers: vec![("Content-Type".into(), "application/octet-stream".into())],
                    body: Body::Stream { rx, len: Some(n) },
                }
            }
        }
    }

    /// The requested work in microseconds (`us` + 1000 × `ms`); `None` without either or on a bad value.
    pub fn size_hint(&self, req: &Request) -> Option<u64> {
        let w = self.work(req).ok()?;
        if w.us.is_none() && w.ms.is_none() {
            return None;
        }
        Some(
            w.us.unwrap_or(0)
                .saturating_add(w.ms.unwrap_or(0).saturating_mul(1000)),
        )
    }
}

/// Spins on the monotonic clock for `d` (the CPU work of a request), or until `stop` is set.
fn burn(d: Duration, stop: &AtomicBool) {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < d {
        std::hint::spin_loop();
        n = n.wrapping_add(1);
        if n % 64 == 0 && stop.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// [`burn`] on tokio's blocking pool (its threads number at most the requests in flight, which the gate
/// bounds by `workers`), so the I/O threads keep accepting, parsing and scheduling meanwhile. Dropping the
/// future (the client went away) stops the burn. The thread runs at `priority` meanwhile; if the kernel
/// refuses it (the configuration check makes sure it would not), the work runs at the thread's own and
/// the first refusal is logged.
async fn burn_off_thread(d: Duration, priority: WorkPriority) {
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let guard = StopOnDrop(stop.clone());
    let _ = tokio::task::spawn_blocking(move || {
        let _at = match priority.enter() {
            Ok(g) => Some(g),
            Err(e) => {
                static LOGGED: AtomicBool = AtomicBool::new(false);
                if !LOGGED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "cannot give a worker thread its class's priority; running at its own");
                }
                None
            }
        };
        burn(d, &stop)
    })
    .await;
    drop(guard);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> SyntheticBackend {
        SyntheticBackend::new(&SyntheticConfig::default()).unwrap()
    }

    #[test]
    fn parses_and_caps() {
        let b = backend();
        assert_eq!(
            b.work(&Request::get("/work?us=5&ms=2&n=10")),
            Ok(Work {
                us: Some(5),
                ms: Some(2),
                n: Some(10)
            })
        );
        assert!(
            b.work(&Request::get("/cpu?us=abc"))
                .unwrap_err()
                .contains("parameter us")
        );
        assert!(
            b.work(&Request::get("/cpu?us=-1"))
                .unwrap_err()
                .contains("parameter us")
        );
        assert!(
            b.work(&Request::get("/bytes?n=99999999999"))
                .unwrap_err()
                .contains("max_bytes")
        );
        assert_eq!(b.size_hint(&Request::get("/work?us=5&ms=2")), Some(2005));
        assert_eq!(b.size_hint(&Request::get("/bytes?n=5")), None);
    }

    #[tokio::test]
    async fn bodies() {
        let b = backend();
        let r = b.call(&Request::get("/bytes?n=1000")).await;
        assert_eq!((r.status, r.body.len()), (200, Some(1000)));
        let r = b.call(&Request::get("/bytes?n=3000000")).await;
        assert_eq!(r.body.len(), Some(3_000_000));
        let r = b.call(&Request::get("/sleep?ms=oops")).await;
        assert_eq!(r.status, 400);
        let t = Instant::now();
        let r = b.call(&Request::get("/cpu?us=2000")).await;
        assert_eq!(r.status, 200);
        assert!(t.elapsed() >= Duration::from_micros(2000));
    }

    fn steps(s: &[(u64, usize)]) -> Vec<CapacityStep> {
        s.iter()
            .map(|&(at, servers)| CapacityStep {
                at: Duration::from_secs(at),
                servers,
            })
            .collect()
    }

    #[test]
    fn capacity_schedule_is_checked_and_followed() {
        let cfg = |s| SyntheticConfig {
            capacity: steps(s),
            ..SyntheticConfig::default()
        };
        let e = SyntheticBackend::new(&cfg(&[(0, 4), (0, 2)])).unwrap_err();
        assert!(
            e.to_string().contains("step 1: `at` must come after"),
            "{e}"
        );
        let e = SyntheticBackend::new(&cfg(&[(0, 0)])).unwrap_err();
        assert!(e.to_string().contains("servers must be ≥ 1"), "{e}");
        let s = steps(&[(5, 64), (20, 16), (40, 64)]);
        let at = |secs| Capacity::servers_at(&s, Duration::from_secs(secs));
        assert_eq!(
            (at(0), at(5), at(19), at(20), at(39), at(40), at(1000)),
            (usize::MAX, 64, 64, 16, 16, 64, 64)
        );
        assert!(
            SyntheticBackend::new(&SyntheticConfig::default())
                .unwrap()
                .servers()
                .is_none()
        );
    }

    /// Two servers, five 100 ms requests at once: they finish in waves of two (a c-server FIFO queue), and
    /// after the capacity steps up at 1 s, four run at once. Paused time: deterministic.
    #[tokio::test(start_paused = true)]
    async fn capacity_model_queues_beyond_its_servers() {
        let b = Arc::new(
            SyntheticBackend::new(&SyntheticConfig {
                capacity: steps(&[(0, 2), (1, 4)]),
                ..SyntheticConfig::default()
            })
            .unwrap(),
        );
        let run = |n: usize| {
            let b = b.clone();
            async move {
                let t = tokio::time::Instant::now();
                let hs: Vec<_> = (0..n)
                    .map(|_| {
                        let b = b.clone();
                        tokio::spawn(async move {
                            b.call(&Request::get("/sleep?ms=100")).await;
                            t.elapsed().as_millis() / 100
                        })
                    })
                    .collect();
                let mut waves = Vec::new();
                for h in hs {
                    waves.push(h.await.unwrap());
                }
                waves.sort();
                waves
            }
        };
        assert_eq!(run(5).await, vec![1, 1, 2, 2, 3]);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(b.servers(), Some(4));
        assert_eq!(run(5).await, vec![1, 1, 1, 1, 2]);
    }

    /// The thread burning a request's CPU runs at the priority given for it (its class's) while it burns,
    /// and has its own back once the request ends — here ended early, by the client going away. The
    /// thread is found from outside, in /proc, as another tool would see it. Bounded: 5 ms polls, at
    /// most 10 s each; needs the right to restore a priority (root, CAP_SYS_NICE), else it checks nothing
    /// and says so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn cpu_work_runs_at_its_priority_and_the_thread_gets_its_own_back() {
        use ordo_sys::Policy;
        use ordo_sys::thread::{get_sched, nice_floor};
        use ordo_testkit::threads::wait_for_thread as poll;
        let own = get_sched(0).unwrap();
        if nice_floor() > own.nice {
            eprintln!(
                "skipped: this process may not restore a thread's priority (no CAP_SYS_NICE)"
            );
            return;
        }
        let nice = if own.nice == 13 { 14 } else { 13 };
        let cases = [
            WorkPriority {
                policy: None,
                nice: Some(nice),
                cpus: None,
            },
            WorkPriority {
                policy: Some(Policy::Idle),
                nice: None,
                cpus: None,
            },
        ];
        let b = Arc::new(backend());
        for prio in cases {
            let is_at = move |t: i32| {
                get_sched(t).is_ok_and(|s| match prio.policy {
                    Some(p) => s.policy == p,
                    None => s.nice == nice,
                })
            };
            let call = {
                let b = b.clone();
                tokio::spawn(async move { b.call_at(&Request::get("/cpu?us=9000000"), prio).await })
            };
            let tid = tokio::task::spawn_blocking(move || poll(is_at))
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("no thread ran the work at {prio:?}"));
            call.abort();
            let _ = call.await;
            let back = tokio::task::spawn_blocking(move || poll(move |t| t == tid && !is_at(t)))
                .await
                .unwrap();
            assert_eq!(back, Some(tid), "thread {tid} kept {prio:?}");
            let s = get_sched(tid).unwrap();
            assert_eq!((s.policy, s.nice), (own.policy, own.nice), "{prio:?}");
        }
    }

    /// CPU work runs on the blocking pool: a current-thread runtime still runs other tasks meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn cpu_work_leaves_the_io_thread_free() {
        let b = Arc::new(backend());
        let burner = {
            let b = b.clone();
            tokio::spawn(async move { b.call(&Request::get("/cpu?us=300000")).await.status })
        };
        let t = Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            t.elapsed() < Duration::from_millis(200),
            "the I/O thread was blocked for {:?}",
            t.elapsed()
        );
        assert_eq!(burner.await.unwrap(), 200);
    }
}
