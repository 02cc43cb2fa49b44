//! Glue between the command line and the library crates: one module per subcommand, each with its `Args`
//! (clap derive) and a `run` that resolves the arguments into the crate's checked config and calls it; the
//! dispatch on the subcommand is `cli::Command::run`.

pub mod bench;
pub mod demo;
pub mod docs;
mod manual;
pub mod probe;
pub mod report;
pub mod serve;
pub mod tune;
