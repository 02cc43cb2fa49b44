//! The `ordo` binary: parse arguments, hand the subcommand to its library crate, map errors to exit codes.
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod exit;
mod interrupt;
mod values;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    cli::init_logging(cli.verbose, cli.quiet);
    match cli.command.run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ordo: error: {err:#}");
            ExitCode::from(exit::exit_code_for(&err))
        }
    }
}
