//! When a failed exchange is sent again: one rule, a pure function of what failed and what had been sent,
//! with its table of cases. The exchange reports what happened ([`Failure`]); the call loop asks [`resend`]
//! and does what it says, so no flag set deep in the exchange decides on its own.

use crate::backend::TOP_RANK;

/// How an exchange with an upstream failed, as far as sending it again is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// Nothing reached the upstream: connecting failed or timed out, or the TLS handshake failed.
    NotSent,
    /// A pooled connection failed before any response byte (the upstream had closed it while it sat idle);
    /// `sent_any`: some of the request had been accepted by the socket.
    Stale { sent_any: bool },
    /// No answer (or no whole head) in time.
    Timeout,
    /// A malformed answer.
    Bad,
}

/// `retry_on`: what else sends an idempotent request to the next upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RetryOn {
    timeout: bool,
    reset: bool,
    s502: bool,
    s503: bool,
    s504: bool,
}

impl RetryOn {
    pub(super) fn parse(items: &[String]) -> Result<RetryOn, String> {
        let mut r = RetryOn::default();
        for i in items {
            match i.trim() {
                "timeout" => r.timeout = true,
                "reset" => r.reset = true,
                "502" => r.s502 = true,
                "503" => r.s503 = true,
                "504" => r.s504 = true,
                other => {
                    return Err(format!(
                        "unknown condition {other:?} (expected \"timeout\", \"reset\", \"502\", \"503\" or \"504\")"
                    ));
                }
            }
        }
        Ok(r)
    }

    /// Whether an upstream's answer with `status` is retried (idempotent requests only).
    pub(super) fn status(&self, status: u16) -> bool {
        match status {
            502 => self.s502,
            503 => self.s503,
            504 => self.s504,
            _ => false,
        }
    }
}

/// Whether the failed exchange may have reached the upstream (so sending it elsewhere adds load, and
/// counts against the retry budget): everything but a connection that never carried a byte of it.
pub(super) fn reached_upstream(failure: Failure) -> bool {
    !matches!(
        failure,
        Failure::NotSent | Failure::Stale { sent_any: false }
    )
}

/// Whether a request whose exchange failed goes to the next upstream (tries and budget permitting):
/// always when none of it reached the upstream — it cannot have acted on it, whatever the method —; an
/// idempotent one also after what `retry_on` names.
pub(super) fn next_upstream(failure: Failure, idempotent: bool, on: &RetryOn) -> bool {
    match failure {
        Failure::NotSent | Failure::Stale { sent_any: false } => true,
        Failure::Stale { sent_any: true } => idempotent && on.reset,
        Failure::Timeout => idempotent && on.timeout,
        Failure::Bad => false,
    }
}

/// What had been tried when the exchange failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Attempt {
    /// The connection came from the pool (a new one failing says the upstream itself fails).
    pub(super) reused: bool,
    /// The request was already sent again once.
    pub(super) retried: bool,
    /// The method is idempotent ([`idempotent`]).
    pub(super) idempotent: bool,
}

/// Whether to send the request again on a new connection: only after a pooled connection went stale, only
/// once, and only when the upstream cannot act on it twice — none of it was written, or the method is
/// idempotent (RFC 9112 §9.3.1).
pub(super) fn resend(failure: Failure, attempt: Attempt) -> bool {
    match failure {
        Failure::Stale { sent_any } => {
            attempt.reused && !attempt.retried && (!sent_any || attempt.idempotent)
        }
        Failure::NotSent | Failure::Timeout | Failure::Bad => false,
    }
}

/// A retry's price in the budget (which is kept in hundredths of a retry).
pub(super) const RETRY_COST: u64 = 100;

/// Whether a request of class rank `rank` (thousandths, [`TOP_RANK`] the top class) may take a retry from a
/// budget holding `budget` hundredths of a retry (at most `reserve`): the top class may spend it to the
/// last retry; a lower class must leave a floor that rises as its rank falls, to half the reserve for the
/// lowest — so when retries run short, the lowest classes are the first refused and the top class keeps
/// what is left.
pub(super) fn budget_allows(budget: u64, reserve: u64, rank: u32) -> bool {
    let below_top = u64::from(TOP_RANK - rank.min(TOP_RANK));
    let floor = reserve / 2 * below_top / u64::from(TOP_RANK);
    budget >= RETRY_COST + floor
}

/// Methods whose effect does not change when a request is repeated (RFC 9110 §9.2.2): a proxy may resend
/// them after a connection failed before the response; others it must not (RFC 9112 §9.3.1).
pub(super) fn idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        let stale = |sent_any| Failure::Stale { sent_any };
        let at = |reused, retried, idempotent| Attempt {
            reused,
            retried,
            idempotent,
        };
        // (failure, reused, retried, idempotent) -> resend
        let cases = [
            (stale(false), at(true, false, false), true), // nothing written: even a POST
            (stale(false), at(true, false, true), true),
            (stale(true), at(true, false, true), true), // written, but GET-like
            (stale(true), at(true, false, false), false), // a POST the upstream may have acted on
            (stale(false), at(true, true, true), false), // only once
            (stale(false), at(false, false, true), false), // a new connection failing: the upstream fails
            (Failure::NotSent, at(true, false, true), false), // (the next upstream's business)
            (Failure::Timeout, at(true, false, true), false),
            (Failure::Bad, at(false, false, true), false),
        ];
        for (failure, attempt, want) in cases {
            assert_eq!(resend(failure, attempt), want, "{failure:?} {attempt:?}");
        }
    }

    #[test]
    fn the_next_upstream_table() {
        let none = RetryOn::default();
        let all =
            RetryOn::parse(&["timeout", "reset", "502", "503", "504"].map(String::from)).unwrap();
        let stale = |sent_any| Failure::Stale { sent_any };
        // (failure, idempotent, retry_on) -> next upstream
        let cases = [
            (Failure::NotSent, false, none, true), // nothing reached it: even a POST, even by default
            (stale(false), false, none, true),
            (stale(true), true, none, false), // written: only when asked
            (stale(true), true, all, true),
            (stale(true), false, all, false), // never a POST the upstream may have acted on
            (Failure::Timeout, true, none, false),
            (Failure::Timeout, true, all, true),
            (Failure::Timeout, false, all, false),
            (Failure::Bad, true, all, false),
        ];
        for (failure, idem, on, want) in cases {
            assert_eq!(
                next_upstream(failure, idem, &on),
                want,
                "{failure:?} idempotent={idem} {on:?}"
            );
        }
        assert!(all.status(503) && !none.status(503) && !all.status(500));
        // the retry budget counts only what an upstream may have seen
        assert!(!reached_upstream(Failure::NotSent));
        assert!(!reached_upstream(stale(false)));
        assert!(reached_upstream(stale(true)));
        assert!(reached_upstream(Failure::Timeout));
        assert!(reached_upstream(Failure::Bad));
        assert!(RetryOn::parse(&["5xx".to_string()]).is_err());
    }

    #[test]
    fn the_budget_serves_the_top_class_last() {
        // (budget in hundredths, rank) -> allowed, with the reserve of 10 retries (1000)
        let cases = [
            (1000, 0, true), // a full budget: every class
            (600, 0, true),  // the lowest class leaves half the reserve (500) after its retry
            (599, 0, false),
            (599, 500, true), // a middle class leaves a quarter (250)
            (349, 500, false),
            (350, 500, true),
            (100, TOP_RANK, true), // the top class takes the last retry
            (99, TOP_RANK, false),
            (0, TOP_RANK, false),
            (100, 2000, true), // (a rank over the top is the top)
        ];
        for (budget, rank, want) in cases {
            assert_eq!(
                budget_allows(budget, 1000, rank),
                want,
                "budget {budget}, rank {rank}"
            );
        }
        // two classes asking in turn from a budget that is not refilled: the lowest class stops where its
        // retry would leave less than half the reserve (after 3), the top class takes the rest
        let mut budget = 1000;
        let (mut low, mut top) = (0, 0);
        for _ in 0..20 {
            for (rank, n) in [(0, &mut low), (TOP_RANK, &mut top)] {
                if budget_allows(budget, 1000, rank) {
                    budget -= RETRY_COST;
                    *n += 1;
                }
            }
        }
        assert_eq!((low, top, budget), (3, 7, 0));
    }

    #[test]
    fn idempotent_methods() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(idempotent(m), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "get"] {
            assert!(!idempotent(m), "{m}");
        }
    }
}
