//! Ctrl-C for the long-running subcommands (bench, demo, probe), handled one way: the first SIGINT or
//! SIGTERM asks the run to stop at its next boundary and report what it has (exit 130); a second one quits
//! at once. (`ordo tune` has its own flag, which its runner polls between knob changes.)

/// Exit code of a run stopped by SIGINT or SIGTERM (128 + SIGINT): what it printed or saved is partial.
pub const INTERRUPTED: u8 = 130;

/// Watches SIGINT and SIGTERM on a thread of its own. The first prints `first` on stderr and calls `stop`
/// (the command then ends at its next boundary and reports); the second calls `at_once` (kill what must
/// not outlive the process), says so and exits with [`INTERRUPTED`] without a report. Returns once the
/// handlers are installed, so a signal from then on never kills the process before it reports; when they
/// cannot be installed the run goes on with the default handling and a warning says so.
pub fn stop_on_signals(
    tool: &'static str,
    first: &'static str,
    stop: impl Fn() + Send + 'static,
    at_once: impl Fn() + Send + 'static,
) -> anyhow::Result<()> {
    let watching =
        ordo_sys::watch_interrupts(&format!("{}-signal", tool.replace(' ', "-")), move |n| {
            if n > 1 {
                at_once();
                eprintln!("{tool}: stopped at once (second signal); no report");
                std::process::exit(INTERRUPTED.into());
            }
            eprintln!("{first}");
            stop();
        });
    match watching {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => eprintln!(
            "{tool}: warning: the Ctrl-C handler did not start; an interrupted run prints no report"
        ),
        Err(e) => eprintln!(
            "{tool}: warning: cannot handle Ctrl-C ({e}); an interrupted run prints no report"
        ),
    }
    Ok(())
}
