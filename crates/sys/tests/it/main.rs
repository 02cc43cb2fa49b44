//! ordo-sys's integration tests, one binary with a module per topic.

mod fingerprint;
mod fixtures;
