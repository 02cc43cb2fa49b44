//! ordo-probe's integration tests, one binary with a module per topic (tests/interrupt.rs is its own
//! binary: it checks that a stopped probe's threads are gone from the process, which other tests' probe
//! threads running beside it in one binary would confuse).

mod fixtures;
mod scheduling;
mod schema;
