//! ordo-sched's integration tests (property tests), one binary with a module per topic.

mod cancel;
mod capabilities;
mod properties;
