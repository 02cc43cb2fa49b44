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

/// Parses `args` (without the program name) as subcommand `name`'s arguments `A`: the unit tests' way into
/// a subcommand's clap derive.
#[cfg(test)]
pub(crate) fn parse_args<A: clap::Args + clap::FromArgMatches>(
    name: &'static str,
    args: &[&str],
) -> Result<A, clap::Error> {
    let matches = A::augment_args(clap::Command::new(name))
        .try_get_matches_from(std::iter::once(name).chain(args.iter().copied()))?;
    A::from_arg_matches(&matches)
}
