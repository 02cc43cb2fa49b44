//! Rate limits for WARN lines that clients can cause (Lua errors, rapid-reset HTTP/2 connections): at most
//! a few lines per call site per interval, then silence, and the next line that is written says how many
//! were left out (`… (K more suppressed in the last 10s)`), so a flood costs the log one line per interval
//! and the operator still sees that it happened and how often.
//!
//! Each call site owns one `static` [`LogLimit`]:
//!
//! ```ignore
//! static LIMIT: LogLimit = LogLimit::per_site();
//! if let Some(more) = LIMIT.line() {
//!     tracing::warn!(error = %e, "lua classify failed; using the rules{more}");
//! }
//! ```
//!
//! The lock is taken only on the warning paths (a failing
//! script, a misbehaving connection), never on the path of a request that succeeds.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines per interval a call site may write before it is suppressed.
pub const DEFAULT_BURST: u32 = 5;
/// The interval [`DEFAULT_BURST`] applies to.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// One call site's budget of log lines.
pub struct LogLimit {
    burst: u32,
    interval: Duration,
    state: Mutex<State>,
}

struct State {
    /// Start of the current interval (None: nothing logged yet).
    since: Option<Instant>,
    /// Lines written in the current interval.
    written: u32,
    /// Lines suppressed since the last line written, and when the first of them was.
    suppressed: u64,
    suppressed_since: Option<Instant>,
}

/// What a call site may do with the line it is about to write.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Write it; `suppressed` lines were left out before it, since `over` ago.
    Write { suppressed: u64, over: Duration },
    /// Leave it out (it is counted and reported with the next line written).
    Suppress,
}

impl Admit {
    /// The text to append to the line: empty, or ` (K more suppressed in the last 10s)`.
    pub fn suffix(&self) -> String {
        match self {
            Admit::Write { suppressed, over } if *suppressed > 0 => {
                format!(
                    " ({suppressed} more suppressed in the last {}s)",
                    over.as_secs().max(1)
                )
            }
            _ => String::new(),
        }
    }
}

impl LogLimit {
    /// At most `burst` lines per `interval` (`burst` 0 is taken as 1).
    pub const fn new(burst: u32, interval: Duration) -> Self {
        LogLimit {
            burst: if burst == 0 { 1 } else { burst },
            interval,
            state: Mutex::new(State {
                since: None,
                written: 0,
                suppressed: 0,
                suppressed_since: None,
            }),
        }
    }

    /// [`DEFAULT_BURST`] lines per [`DEFAULT_INTERVAL`].
    pub const fn per_site() -> Self {
        Self::new(DEFAULT_BURST, DEFAULT_INTERVAL)
    }

    /// Whether a line may be written now: `Some(suffix)` to append to it (empty, or
    /// ` (K more suppressed in the last Ns)`), `None` to leave it out.
    pub fn line(&self) -> Option<String> {
        match self.admit_at(Instant::now()) {
            Admit::Suppress => None,
            a => Some(a.suffix()),
        }
    }

    /// Whether a line may be written at `now` (the clock is a parameter so tests can move it).
    pub fn admit_at(&self, now: Instant) -> Admit {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = match st.since {
            None => true,
            Some(since) => now.saturating_duration_since(since) >= self.interval,
        };
        if fresh {
            st.since = Some(now);
            st.written = 0;
        }
        if st.written < self.burst {
            st.written += 1;
            let suppressed = std::mem::take(&mut st.suppressed);
            let over = st
                .suppressed_since
                .take()
                .map(|t| now.saturating_duration_since(t))
                .unwrap_or_default();
            Admit::Write { suppressed, over }
        } else {
            if st.suppressed == 0 {
                st.suppressed_since = Some(now);
            }
            st.suppressed += 1;
            Admit::Suppress
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_silence_then_one_line_with_the_count() {
        let limit = LogLimit::new(3, Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        for i in 0..3 {
            assert_eq!(
                limit.admit_at(at(i as f64 * 0.1)),
                Admit::Write {
                    suppressed: 0,
                    over: Duration::ZERO
                }
            );
        }
        // 100 more within the interval: all suppressed
        for i in 0..100 {
            assert_eq!(limit.admit_at(at(1.0 + i as f64 * 0.05)), Admit::Suppress);
        }
        // the interval is over: the next line carries the count, measured from the first suppressed one
        let a = limit.admit_at(at(10.5));
        assert_eq!(
            a,
            Admit::Write {
                suppressed: 100,
                over: Duration::from_secs_f64(9.5)
            }
        );
        assert_eq!(a.suffix(), " (100 more suppressed in the last 9s)");
        // and the count starts again from zero
        assert_eq!(limit.admit_at(at(10.6)).suffix(), "");
        assert_eq!(limit.admit_at(at(10.7)).suffix(), "");
        assert_eq!(limit.admit_at(at(10.8)), Admit::Suppress);
    }

    #[test]
    fn a_quiet_site_is_never_suppressed() {
        let limit = LogLimit::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..50u64 {
            // one line every 6 s: never more than 2 in any interval
            let a = limit.admit_at(t0 + Duration::from_secs(6 * i));
            assert!(
                matches!(a, Admit::Write { suppressed: 0, .. }),
                "{i}: {a:?}"
            );
        }
    }

    #[test]
    fn zero_burst_still_writes_one_line_per_interval() {
        let limit = LogLimit::new(0, Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(matches!(limit.admit_at(t0), Admit::Write { .. }));
        assert_eq!(limit.admit_at(t0), Admit::Suppress);
        assert_eq!(
            limit.admit_at(t0 + Duration::from_millis(1500)).suffix(),
            " (1 more suppressed in the last 1s)"
        );
    }
}
