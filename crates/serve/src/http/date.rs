//! The `Date` header value, formatted at most once per second per thread (formatting it per request would
//! show up in the profile of a small cached file).

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    static CACHED: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Calls `f` with the current IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes).
pub fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHED.with(|c| {
        let mut c = c.borrow_mut();
        if c.0 != secs {
            let s = httpdate::fmt_http_date(now);
            let b = s.as_bytes();
            if b.len() == 29 {
                c.1.copy_from_slice(b);
                c.0 = secs;
            } else {
                return f(b);
            }
        }
        f(&c.1)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_a_parsable_date() {
        let s = super::with_date(|b| String::from_utf8(b.to_vec()).unwrap());
        assert!(httpdate::parse_http_date(&s).is_ok(), "{s}");
        assert!(s.ends_with(" GMT"));
    }
}
