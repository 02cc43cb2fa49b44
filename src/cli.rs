//! Top-level command line: the subcommand enum, its dispatch to the glue in `cmd/`, and logging set-up.
//! Each subcommand's own `Args` lives beside its glue in `cmd/<name>.rs` (cmd never imports this module:
//! the man page and completions get the clap definitions passed in).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
    Bench(Box<cmd::bench::Args>),
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

impl Command {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Serve(a) => cmd::serve::run(a),
            Command::Bench(a) => cmd::bench::run(*a),
            Command::Tune(a) => cmd::tune::run(a),
            Command::Probe(a) => cmd::probe::run(a),
            Command::Report(a) => cmd::report::run(a),
            Command::Demo(a) => cmd::demo::run(a),
            Command::Completions(a) => cmd::docs::completions(a, Cli::command()),
            Command::Man(a) => cmd::docs::man(a, Cli::command()),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_and_completions_render() {
        let mut cmd = Cli::command();
        cmd.build();
        let page = String::from_utf8(cmd::docs::render(cmd.clone()).unwrap()).unwrap();
        assert!(
            page.contains(".TH ordo 1") && page.contains("serve"),
            "{page}"
        );
        let serve = cmd
            .find_subcommand("serve")
            .unwrap()
            .clone()
            .name("ordo-serve");
        let page = String::from_utf8(cmd::docs::render(serve).unwrap()).unwrap();
        assert!(
            page.contains("ordo\\-serve") && page.contains("\\-\\-check"),
            "{page}"
        );
        let mut out = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "ordo", &mut out);
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("--cacert") && script.contains("completions"));
    }
}
