//! Glue between the command line and the library crates: one module per subcommand, each with its `Args`
//! (clap derive) and a `run` that resolves the arguments into the crate's checked config and calls it.

pub mod bench;
pub mod demo;
pub mod docs;
pub mod probe;
pub mod report;
pub mod serve;
pub mod tune;

use std::process::ExitCode;

use crate::cli::Command;

pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(a) => serve::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Probe(a) => probe::run(a),
        Command::Report(a) => report::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Completions(a) => docs::completions(a),
        Command::Man(a) => docs::man(a),
    }
}
