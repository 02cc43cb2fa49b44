//! Which exit code an error asks for: 2 for bad input (a [`UsageError`] anywhere in its chain), 1 for
//! everything else. Its own module so the subcommands' glue (`cmd/`) and `main` use it without the
//! command-line definitions.

/// `ordo bench`: the run finished but failed a `--fail-if` threshold (or completed no request at all).
pub const THRESHOLDS_FAILED: u8 = 3;

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
