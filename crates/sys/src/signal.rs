//! SIGINT and SIGTERM for the long-running commands, watched one way: a thread of its own with a small
//! tokio runtime receives them and calls back with how many have arrived, so a command can stop gracefully
//! on the first and give up on the second (the binary's bench/demo/probe) or set a flag its loop polls
//! (`ordo tune`'s runner, which must restore the machine before it exits).

use std::io;
use std::time::Duration;

/// Watch SIGINT and SIGTERM on a thread named `thread_name`, calling `on_signal(n)` for the n-th signal
/// (1, 2, …). Returns once the handlers are installed, so from then on a signal never kills the process
/// with the default action; `Err` when they could not be (the caller warns and goes on with the default
/// handling).
pub fn watch_interrupts(
    thread_name: &str,
    mut on_signal: impl FnMut(u32) + Send + 'static,
) -> io::Result<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    std::thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || {
            use tokio::signal::unix::{SignalKind, signal};
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let (mut int, mut term) = match (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) {
                    (Ok(i), Ok(t)) => (i, t),
                    (Err(e), _) | (_, Err(e)) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut n = 0u32;
                loop {
                    tokio::select! {
                        _ = int.recv() => {}
                        _ = term.recv() => {}
                    }
                    n = n.saturating_add(1);
                    on_signal(n);
                }
            });
        })?;
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the signal thread did not start within 5 s",
        )),
    }
}
