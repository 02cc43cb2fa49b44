//! Finding a thread of the test process from outside, in /proc, as another tool would see it: the tests
//! that check a thread's scheduling priority while it works (serve's class priority) share this.

use std::time::{Duration, Instant};

use ordo_sys::thread::list_threads;

/// A thread of this process for which `want` holds, polled every 5 ms for at most 10 s (`None` if none
/// showed up by then).
pub fn wait_for_thread(want: impl Fn(i32) -> bool) -> Option<i32> {
    let pid = std::process::id() as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    for _ in 0..2000 {
        let found = list_threads(pid)
            .unwrap_or_default()
            .into_iter()
            .find(|&t| want(t));
        if found.is_some() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}
