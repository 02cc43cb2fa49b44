//! The one load-generating loop, parameterised by pacing (closed or open), stop rule, keep-alive and class
//! assignment. Each worker thread runs a single-threaded tokio runtime with its share of the connections;
//! every connection is one task that takes a request slot, sends the pre-serialised request, reads the
//! response and records the outcome into its thread's statistics. With HTTP/2 (the h2 module) a client is a
//! stream instead: each connection carries `streams` of them, each running the same loop.

use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::config::Pacing;
use crate::http::{ReadError, ResponseInfo, read_response};
use crate::mix::UrlOrder;
use crate::stats::{FailKind, Stats};

/// One class as the engine sees it: its pre-serialised requests.
#[derive(Debug)]
pub(crate) struct ClassPlan {
    pub requests: Vec<Bytes>,
    pub order: UrlOrder,
    pub think: Duration,
}

/// Per-thread counters the coordinator reads for progress.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
}

/// Everything the workers share, fixed before they start.
#[derive(Debug)]
pub(crate) struct Plan {
    pub addr: SocketAddr,
    /// `https://`: what connections need to speak TLS.
    pub tls: Option<crate::tls::Tls>,
    pub classes: Vec<ClassPlan>,
    /// Request slot → class (smooth weighted round robin), used when `assign_requests`.
    pub slot_table: Vec<usize>,
    /// Connection → class, used otherwise.
    pub conn_class: Vec<usize>,
    pub assign_requests: bool,
    pub keepalive: bool,
    pub head_request: bool,
    pub strict_length: bool,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Wakeup coalescing of each worker thread's runtime (`BenchConfig::coalesce`).
    pub coalesce: Duration,
    pub pacing: Pacing,
    pub connections: usize,
    /// How connections are made and requests sent: HTTP/1.1 (`Http1Protocol`) or HTTP/2 (`h2::H2Plan`),
    /// picked by the caller, so this loop knows nothing of either.
    pub protocol: Arc<dyn Protocol>,
    /// Clients: one per connection for HTTP/1.1, `streams` per connection for HTTP/2. Open-loop slots and
    /// client classes are spread over them.
    pub clients: usize,
    /// Measured requests to run (closed loop), or the last open-loop slot index (exclusive).
    pub limit: Option<u64>,
    /// Open loop: slots before this index fall in the warm-up.
    pub warm_slots: u64,
    pub start: Instant,
    pub measure_start: Instant,
    pub end: Option<Instant>,
    pub issued: AtomicU64,
    pub warm_issued: AtomicU64,
    pub live: Vec<Live>,
    pub seed: u64,
    /// Let requests in flight at `end` finish (up to `timeout`) instead of abandoning them; a closed loop
    /// keeps its load on (unmeasured) meanwhile, so they finish under the same load they started in.
    pub drain: bool,
    /// Measured requests started and not yet recorded (read by the drain).
    pub measured_in_flight: AtomicU64,
    /// Stages: when clients run (closed loop) or slots are due (open loop).
    pub ramp: Option<crate::stage::Ramp>,
}

impl Plan {
    /// When open-loop slot `slot` is due (None: after the stages end).
    fn due(&self, slot: u64, rate: f64) -> Option<Instant> {
        match &self.ramp {
            Some(r) => r
                .time_of_slot(slot as f64)
                .map(|t| self.start + Duration::from_secs_f64(t)),
            None => Some(self.start + Duration::from_secs_f64(slot as f64 / rate)),
        }
    }

    /// The stage a request that ended `done_us` after the measured start counts in.
    fn stage_of(&self, done_us: u64) -> Option<usize> {
        self.ramp.as_ref()?.stage_at(done_us as f64 / 1e6)
    }
}

/// Run one worker thread's connections to the end and return what they recorded.
pub(crate) fn run_thread(
    plan: Arc<Plan>,
    index: usize,
    threads: usize,
    cancel: watch::Receiver<bool>,
) -> std::io::Result<Stats> {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    let rt = ordo_sys::coalesce::coalesce_wakeups(&mut builder, plan.coalesce).build()?;
    let local = tokio::task::LocalSet::new();
    let open = matches!(plan.pacing, Pacing::Open { .. });
    let stats = Rc::new(RefCell::new(
        Stats::new(plan.classes.len(), open).with_stages(plan.ramp.as_ref().map_or(0, |r| r.len())),
    ));
    let lengths: Rc<RefCell<Vec<Vec<Option<u64>>>>> = Rc::new(RefCell::new(
        plan.classes
            .iter()
            .map(|c| vec![None; c.requests.len()])
            .collect(),
    ));
    local.block_on(&rt, async {
        let mut handles: Vec<_> = (index..plan.connections)
            .step_by(threads)
            .map(|j| {
                let ctx = Ctx {
                    plan: plan.clone(),
                    stats: stats.clone(),
                    lengths: lengths.clone(),
                    live: index,
                };
                tokio::task::spawn_local(plan.protocol.clone().connection(ctx, j))
            })
            .collect();
        let mut cancel = cancel;
        let end = plan.end;
        tokio::select! {
            _ = async { for h in handles.iter_mut() { let _ = h.await; } } => {}
            _ = async {
                match end {
                    Some(e) if plan.drain => {
                        tokio::time::sleep_until(e.into()).await;
                        let limit = e + plan.timeout;
                        while plan.measured_in_flight.load(Ordering::Relaxed) > 0
                            && Instant::now() < limit
                        {
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        }
                    }
                    Some(e) => tokio::time::sleep_until(e.into()).await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = cancel.wait_for(|c| *c) => {}
        }
        for h in &handles {
            h.abort();
        }
    });
    drop(local);
    let out = stats.replace(Stats::new(0, false));
    Ok(out)
}

pub(crate) struct Ctx {
    pub(crate) plan: Arc<Plan>,
    stats: Rc<RefCell<Stats>>,
    lengths: Rc<RefCell<Vec<Vec<Option<u64>>>>>,
    live: usize,
}

impl Ctx {
    /// The worker thread this client runs on (0-based).
    pub(crate) fn thread(&self) -> usize {
        self.live
    }

    /// The client failed a connection for `reason` (the server broke the protocol or flooded it).
    pub(crate) fn connection_error(&self, reason: &str) {
        self.stats.borrow_mut().record_conn_error(reason, 1);
    }
}

/// How a worker thread runs connection `j` of the plan, with its clients: the protocol's side of the
/// engine. The future runs on the thread's `LocalSet` until it ends or is aborted.
pub(crate) trait Protocol: std::fmt::Debug + Send + Sync {
    fn connection(self: Arc<Self>, ctx: Ctx, j: usize) -> Pin<Box<dyn Future<Output = ()>>>;
}

/// HTTP/1.1: each connection is one client.
#[derive(Debug)]
pub(crate) struct Http1Protocol;

impl Protocol for Http1Protocol {
    fn connection(self: Arc<Self>, ctx: Ctx, j: usize) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(connection(ctx, j))
    }
}

/// How one client makes a request: over an HTTP/1.1 connection of its own, or as a stream of a shared
/// HTTP/2 connection (the h2 module, which implements this trait and `Protocol`).
pub(crate) trait Exchange {
    /// Sends request `url` of `class` and reads its response; `opened` counts connections it opened.
    async fn exchange(
        &mut self,
        plan: &Plan,
        class: usize,
        url: usize,
        opened: &mut u64,
    ) -> Result<Exchanged, FailKind>;
    /// The request timed out (its future was dropped): drop what cannot be reused.
    fn timed_out(&mut self);
    /// The `Server` header this client saw first (ab's "Server Software"), if it keeps one.
    fn server_software(&self) -> Option<&str> {
        None
    }
}

/// A client with an HTTP/1.1 connection of its own.
struct Http1 {
    stream: Option<Conn>,
    carry: usize,
    buf: Vec<u8>,
    /// The `Server` header this connection saw first.
    server: Option<String>,
}

impl Exchange for Http1 {
    async fn exchange(
        &mut self,
        plan: &Plan,
        class: usize,
        url: usize,
        opened: &mut u64,
    ) -> Result<Exchanged, FailKind> {
        let req = &plan.classes[class].requests[url];
        exchange(
            &mut self.stream,
            &mut self.buf,
            &mut self.carry,
            opened,
            req,
            plan,
            &mut self.server,
        )
        .await
    }

    fn timed_out(&mut self) {
        self.stream = None;
    }

    fn server_software(&self) -> Option<&str> {
        self.server.as_deref()
    }
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// A connection to the target: plain TCP, or TLS over it (`https://`).
pub(crate) type Conn = ordo_sys::tls::ClientStream;

/// Sends one request. A TLS stream holds the records until flushed; a TCP socket has nothing to flush.
pub(crate) async fn send(conn: &mut Conn, req: &[u8]) -> std::io::Result<()> {
    conn.write_all(req).await?;
    match conn {
        Conn::Plain(_) => Ok(()),
        Conn::Tls(_) => conn.flush().await,
    }
}

/// Connects (and for `https://` makes the TLS handshake) within `limit`.
async fn open(plan: &Plan, limit: Duration) -> Option<Conn> {
    open_to(plan, plan.addr, limit).await
}

/// [`open`] to `addr` (a script's thread may set its own address).
pub(crate) async fn open_to(plan: &Plan, addr: SocketAddr, limit: Duration) -> Option<Conn> {
    let connect = async {
        let s = TcpStream::connect(addr).await.ok()?;
        if plan.keepalive {
            // One write per request, so Nagle never delays a fresh connection's only request;
            // skipping the setsockopt saves a syscall per request without keep-alive.
            let _ = s.set_nodelay(true);
        }
        match &plan.tls {
            None => Some(Conn::Plain(s)),
            Some(tls) => {
                // the handshake's own messages must not wait for Nagle either
                let _ = s.set_nodelay(true);
                tls.connect(s).await.ok()
            }
        }
    };
    tokio::time::timeout(limit, connect).await.ok().flatten()
}

/// One HTTP/1.1 connection: one client.
async fn connection(ctx: Ctx, j: usize) {
    let mut x = Http1 {
        stream: None,
        carry: 0,
        buf: vec![0u8; 8 * 1024],
        server: None,
    };
    client(&ctx, j, &mut x).await
}

/// What a client takes next: a request slot, or the end of its run.
pub(crate) struct Taken {
    /// Open loop: the request is not due yet; send it at this instant (then counting from the actual send).
    pub(crate) wait_until: Option<Instant>,
    pub(crate) slot: Slot,
}

/// One request slot: what to send and how it is counted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) class: usize,
    pub(crate) url: usize,
    /// Open loop: the request was due while the client was still busy (the server held it up), so its
    /// corrected latency counts from here.
    pub(crate) due: Option<Instant>,
    pub(crate) measured: bool,
}

/// A client's place in the run (client `j` of `plan.clients`): its open-loop slots and URL turns.
pub(crate) struct ClientState {
    j: usize,
    rng: ordo_util::SplitMix64,
    turn: Vec<usize>,
    k: u64,
}

impl ClientState {
    pub(crate) fn new(plan: &Plan, j: usize) -> ClientState {
        ClientState {
            j,
            rng: ordo_util::SplitMix64::new(
                plan.seed ^ (j as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            ),
            turn: vec![0usize; plan.classes.len()],
            k: 0,
        }
    }

    /// The next request slot at `now`, or `None` when this client is done.
    pub(crate) fn take(&mut self, plan: &Plan, now: Instant) -> Option<Taken> {
        let j = self.j;
        // closed loop with stages: this client's turn comes later
        let mut wait = None;
        let (slot, due, wait_until, measured) = match plan.pacing {
            Pacing::Open { rate } => {
                let i = j as u64 + self.k * plan.clients as u64;
                self.k += 1;
                if plan.limit.is_some_and(|l| i >= l) {
                    return None;
                }
                let due = plan.due(i, rate)?;
                if plan.end.is_some_and(|e| due >= e) {
                    return None;
                }
                // The corrected latency counts from when the request was due only if the connection
                // was still busy with the previous response then (the server held it up). An idle
                // connection sends when the timer fires, and that timer's lateness (tokio's timer has
                // 1 ms resolution) is the client's, not the server's: count from the actual send.
                let backlogged = due <= now;
                (
                    i,
                    backlogged.then_some(due),
                    (!backlogged).then_some(due),
                    i >= plan.warm_slots,
                )
            }
            Pacing::Closed => {
                let mut now = now;
                if let Some(r) = &plan.ramp {
                    // client j runs while the ramp's level is at least j + 1
                    let t = now
                        .saturating_duration_since(plan.measure_start)
                        .as_secs_f64();
                    let at = r.first_at_least(t, (j + 1) as f64)?;
                    if at > t {
                        let until = plan.measure_start + Duration::from_secs_f64(at);
                        if plan.end.is_some_and(|e| until >= e) {
                            return None;
                        }
                        wait = Some(until);
                        now = until;
                    }
                }
                if plan.end.is_some_and(|e| now >= e) {
                    // Draining: keep the load on, unmeasured, until the measured requests are in.
                    if !plan.drain || plan.measured_in_flight.load(Ordering::Relaxed) == 0 {
                        return None;
                    }
                    (
                        plan.warm_issued.fetch_add(1, Ordering::Relaxed),
                        None,
                        None,
                        false,
                    )
                } else if now >= plan.measure_start {
                    let i = plan.issued.fetch_add(1, Ordering::Relaxed);
                    if plan.limit.is_some_and(|l| i >= l) {
                        return None;
                    }
                    (i, None, None, true)
                } else {
                    (
                        plan.warm_issued.fetch_add(1, Ordering::Relaxed),
                        None,
                        None,
                        false,
                    )
                }
            }
        };
        // Which class and URL.
        let class = if plan.assign_requests {
            plan.slot_table[(slot % plan.slot_table.len() as u64) as usize]
        } else {
            plan.conn_class[j]
        };
        let cp = &plan.classes[class];
        let url = if cp.requests.len() == 1 {
            0
        } else {
            match cp.order {
                UrlOrder::InTurn => {
                    let u = self.turn[class];
                    self.turn[class] = (u + 1) % cp.requests.len();
                    u
                }
                UrlOrder::Random => self.rng.index(cp.requests.len()),
            }
        };
        Some(Taken {
            wait_until: wait_until.or(wait),
            slot: Slot {
                class,
                url,
                due,
                measured,
            },
        })
    }
}

/// A request of `slot` starts (is sent or waits for its connection): the drain waits for measured ones.
pub(crate) fn begin(plan: &Plan, slot: &Slot) {
    if slot.measured {
        plan.measured_in_flight.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records how the request of `slot`, started at `t_start` (see [`begin`]), ended at `t_done`, having
/// opened `opened` connections; `server` is the `Server` header its client has seen.
pub(crate) fn record(
    ctx: &Ctx,
    slot: &Slot,
    res: Result<Exchanged, FailKind>,
    opened: u64,
    (t_start, t_done): (Instant, Instant),
    server: Option<&str>,
) {
    if !slot.measured {
        return;
    }
    let plan = &*ctx.plan;
    let class = slot.class;
    let done_us = us(t_done.saturating_duration_since(plan.measure_start));
    let live = &plan.live[ctx.live];
    let mut st = ctx.stats.borrow_mut();
    st.connections_opened += opened;
    if res.is_ok() && st.server_software.is_none() {
        st.server_software = server.map(str::to_owned);
    }
    match res {
        Ok(x) => {
            let mut length_ok = true;
            if plan.strict_length {
                let mut lens = ctx.lengths.borrow_mut();
                let len = &mut lens[class][slot.url];
                match len {
                    None => *len = Some(x.info.content_bytes),
                    Some(n) => length_ok = *n == x.info.content_bytes,
                }
            }
            st.document_length.get_or_insert(x.info.content_bytes);
            if length_ok {
                let connect_us = x
                    .connected
                    .map(|(a, b)| us(b.saturating_duration_since(a)))
                    .unwrap_or(0);
                let conn_at = x.connected.map(|(_, b)| b).unwrap_or(t_start);
                let open = matches!(plan.pacing, Pacing::Open { .. });
                let total_us = us(t_done.saturating_duration_since(t_start));
                let corrected_us =
                    open.then(|| us(t_done.saturating_duration_since(slot.due.unwrap_or(t_start))));
                if let Some(s) = plan.stage_of(done_us) {
                    st.record_stage(s, Some((total_us, corrected_us)));
                }
                st.record_ok(
                    class,
                    x.info.status,
                    total_us,
                    corrected_us,
                    connect_us,
                    us(x.first_byte
                        .unwrap_or(t_done)
                        .saturating_duration_since(x.sent)),
                    us(t_done.saturating_duration_since(conn_at)),
                    x.info.head_bytes,
                    x.info.body_bytes,
                    x.info.content_bytes,
                    done_us,
                );
                live.completed.fetch_add(1, Ordering::Relaxed);
            } else {
                st.length_mismatch += 1;
                if let Some(s) = plan.stage_of(done_us) {
                    st.record_stage(s, None);
                }
                st.record_fail(class, FailKind::Length, done_us);
                live.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        Err(kind) => {
            if let Some(s) = plan.stage_of(done_us) {
                st.record_stage(s, None);
            }
            st.record_fail(class, kind, done_us);
            live.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    plan.measured_in_flight.fetch_sub(1, Ordering::Relaxed);
}

/// One client (client `j` of `plan.clients`) with an exchange of its own: the loop every HTTP/1.1
/// connection runs (HTTP/2 drives its streams with the same pieces in `h2::connection`).
pub(crate) async fn client<X: Exchange>(ctx: &Ctx, j: usize, x: &mut X) {
    let plan = &*ctx.plan;
    let mut state = ClientState::new(plan, j);
    let mut timer = None;
    // 1. Take a request slot (or stop), and wait until it is due (open loop).
    while let Some(taken) = state.take(plan, Instant::now()) {
        if let Some(due) = taken.wait_until {
            tokio::time::sleep_until(due.into()).await;
        }
        let slot = taken.slot;
        begin(plan, &slot);
        // 2. The exchange, bounded by the request timeout.
        let t_start = Instant::now();
        let mut opened = 0u64;
        let exchange = x.exchange(plan, slot.class, slot.url, &mut opened);
        let res = within(exchange, &mut timer, t_start.checked_add(plan.timeout)).await;
        let t_done = Instant::now();
        let res = match res {
            Some(r) => r,
            None => {
                x.timed_out();
                Err(FailKind::Timeout)
            }
        };
        // 3. Record.
        record(
            ctx,
            &slot,
            res,
            opened,
            (t_start, t_done),
            x.server_software(),
        );
        // 4. Think (closed loop).
        let think = plan.classes[slot.class].think;
        if !think.is_zero() && plan.pacing == Pacing::Closed {
            tokio::time::sleep(think).await;
        }
    }
}

/// `fut`, unless `deadline` passes first (None: it did; a deadline past the clock's range never does).
/// `timer` is the client's one timer for all its requests: armed at its first request's deadline and moved
/// on only when it fires before the deadline of the request then in flight, so the runtime's timer wheel
/// is touched about once per `--timeout` instead of twice per request (`tokio::time::timeout` registers
/// and removes an entry each time).
async fn within<F: Future>(
    fut: F,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    deadline: Option<Instant>,
) -> Option<F::Output> {
    let Some(deadline) = deadline else {
        return Some(fut.await);
    };
    let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline.into())));
    let mut fut = std::pin::pin!(fut);
    loop {
        tokio::select! {
            biased;
            r = &mut fut => return Some(r),
            () = timer.as_mut() => {
                if Instant::now() >= deadline {
                    return None;
                }
                // an earlier request's deadline: on to this one's
                timer.as_mut().reset(deadline.into());
            }
        }
    }
}

pub(crate) struct Exchanged {
    pub(crate) info: ResponseInfo,
    /// (connect started, connected) when this request opened a connection.
    pub(crate) connected: Option<(Instant, Instant)>,
    pub(crate) sent: Instant,
    pub(crate) first_byte: Option<Instant>,
}

/// Send one request and read its response, opening a connection first if there is none. A reused
/// keep-alive connection the server closed before answering is retried once on a fresh connection (the
/// server may close idle connections at any time), without counting a failure.
async fn exchange(
    stream: &mut Option<Conn>,
    buf: &mut Vec<u8>,
    carry: &mut usize,
    opened: &mut u64,
    req: &Bytes,
    plan: &Plan,
    server: &mut Option<String>,
) -> Result<Exchanged, FailKind> {
    let mut retried = false;
    loop {
        let mut connected = None;
        let s = match stream {
            Some(s) => s,
            None => {
                let t0 = Instant::now();
                let Some(s) = open(plan, plan.connect_timeout).await else {
                    return Err(FailKind::Connect);
                };
                *opened += 1;
                *carry = 0;
                connected = Some((t0, Instant::now()));
                stream.insert(s)
            }
        };
        let reused = connected.is_none();
        if send(s, req).await.is_err() {
            *stream = None;
            if reused && !retried {
                retried = true;
                continue;
            }
            return Err(FailKind::Exception);
        }
        let sent = Instant::now();
        let mut first_byte = None;
        match read_response(s, buf, carry, plan.head_request, &mut first_byte, server).await {
            Ok(info) => {
                if info.close || !plan.keepalive {
                    *stream = None;
                }
                return Ok(Exchanged {
                    info,
                    connected,
                    sent,
                    first_byte,
                });
            }
            Err(ReadError::Receive { received: 0, .. }) if reused && !retried => {
                *stream = None;
                retried = true;
            }
            Err(e) => {
                *stream = None;
                return Err(match e {
                    ReadError::Receive { .. } => FailKind::Receive,
                    ReadError::Length { .. } => FailKind::Length,
                    ReadError::Malformed(_) => FailKind::Exception,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One timer serves a client's requests one after another: each request is timed out by its own
    /// deadline — not earlier, when the timer still points at an earlier request's, and not never.
    #[test]
    fn within_times_each_request_out_by_its_own_deadline_with_one_timer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let ms = Duration::from_millis;
            let mut timer = None;
            let t0 = Instant::now();
            assert_eq!(
                within(async { 1 }, &mut timer, Some(t0 + ms(200))).await,
                Some(1)
            );
            // the timer is armed at t0 + 200 ms; this request runs past that, within its own deadline
            tokio::time::sleep(ms(150)).await;
            let t1 = Instant::now();
            let slow = async {
                tokio::time::sleep(ms(300)).await;
                2
            };
            assert_eq!(within(slow, &mut timer, Some(t1 + ms(1500))).await, Some(2));
            // one that never ends is cut at its deadline
            let t2 = Instant::now();
            let never = std::future::pending::<u8>();
            assert_eq!(within(never, &mut timer, Some(t2 + ms(100))).await, None);
            assert!(t2.elapsed() >= ms(100));
            // no deadline (past the clock's range): awaited as it is
            assert_eq!(within(async { 3 }, &mut timer, None).await, Some(3));
        });
    }
}
