//! When a failed exchange is sent again: one rule, a pure function of what failed and what had been sent,
//! with its table of cases. The exchange reports what happened ([`Failure`]); the call loop asks [`resend`]
//! and does what it says, so no flag set deep in the exchange decides on its own.

/// How an exchange with an upstream failed, as far as sending it again is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// A pooled connection failed before any response byte (the upstream had closed it while it sat idle);
    /// `sent_any`: some of the request had been accepted by the socket.
    Stale { sent_any: bool },
    /// Anything else: connect refused or timed out, a TLS failure, a timeout, a malformed response.
    Other,
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
        Failure::Other => false,
    }
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
            (Failure::Other, at(true, false, true), false),
            (Failure::Other, at(false, false, true), false),
        ];
        for (failure, attempt, want) in cases {
            assert_eq!(resend(failure, attempt), want, "{failure:?} {attempt:?}");
        }
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
