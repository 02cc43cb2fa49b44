//! `ordo demo`: command-line arguments and glue to the library crate.
// PLACEHOLDER: the owner of this subcommand replaces this file.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("ordo demo is not built yet")
}
