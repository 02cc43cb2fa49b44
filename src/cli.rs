//! Top-level command line: the subcommand enum, logging set-up and the mapping of errors to exit codes.
//! Each subcommand's own `Args` lives beside its glue in `cmd/<name>.rs`.

use clap::{Parser, Subcommand};

use crate::cmd;

/// Scheduling for web services, from the request queue down to the kernel.
#[derive(Debug, Parser)]
#[command(name = "ordo", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the request-scheduling HTTP front end.
    Serve(cmd::serve::Args),
    /// Generate HTTP load (closed or open loop, class mixes) and report honest latency.
    Bench(cmd::bench::Args),
    /// Run OS-scheduler experiments that always restore the machine.
    Tune(cmd::tune::Args),
    /// Measure context switches and run-queue delay.
    Probe(cmd::probe::Args),
    /// Render results as a self-contained HTML page or terminal tables.
    Report(cmd::report::Args),
    /// Reproduce the request-scheduling result of seed 003 on localhost.
    Demo(cmd::demo::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::docs::CompletionsArgs),
    /// Print the man page (or write one per subcommand with --dir).
    Man(cmd::docs::ManArgs),
}

/// Log to stderr; `ORDO_LOG` (an `EnvFilter` directive) overrides the flags.
pub fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORDO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// An error that says which exit code it wants; anything else exits 1.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// 2 for bad input (usage, config), 1 for everything else.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.is::<UsageError>()) {
        2
    } else {
        1
    }
}
