//! A run's progress as the coordinator reports it ([`Progress`], about ten times a second), and the progress
//! bar `ordo bench` draws from it on a terminal (indicatif): nothing at all when stderr is a pipe or a file,
//! so scripted runs and JSON output stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar as Bar, ProgressDrawTarget, ProgressStyle};

/// A live view for progress display, passed to the callback of [`run_observed`](crate::run_observed) about ten times a second.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Time since the measured part began (zero during warm-up).
    pub elapsed: Duration,
    pub warming_up: bool,
    pub complete: u64,
    pub failed: u64,
    /// The run's length, when it is a duration.
    pub duration: Option<Duration>,
    /// The run's request count, when it is one.
    pub requests: Option<u64>,
}

/// Draws [`Progress`] updates; inert when stderr is not a terminal.
#[derive(Debug)]
pub struct ProgressBar {
    bar: Option<Bar>,
    length_set: bool,
}

impl ProgressBar {
    /// A bar on stderr when it is a terminal, else one that draws nothing.
    pub fn stderr_if_terminal() -> ProgressBar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = Bar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
        ProgressBar {
            bar,
            length_set: false,
        }
    }

    /// Show one update.
    pub fn update(&mut self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        if !self.length_set {
            match (p.requests, p.duration) {
                (Some(n), _) => bar.set_length(n),
                (None, Some(d)) => bar.set_length(d.as_millis() as u64),
                _ => {}
            }
            self.length_set = true;
        }
        if p.warming_up {
            bar.set_position(0);
            bar.set_message("warming up");
            return;
        }
        match p.requests {
            Some(_) => bar.set_position(p.complete + p.failed),
            None => bar.set_position(p.elapsed.as_millis() as u64),
        }
        let secs = p.elapsed.as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} ok, {} failed, {:.0} req/s",
            p.complete,
            p.failed,
            p.complete as f64 / secs
        ));
    }

    /// Remove the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
