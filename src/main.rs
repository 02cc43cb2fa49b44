//! The `ordo` binary: parse arguments, hand the subcommand to its library crate, map errors to exit codes.
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod interrupt;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    cli::init_logging(cli.verbose, cli.quiet);
    match cmd::run(cli.command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ordo: error: {err:#}");
            ExitCode::from(cli::exit_code_for(&err))
        }
    }
}
