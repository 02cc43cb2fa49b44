//! ordo-report's integration tests, one binary with a module per topic.

mod browser;
mod common;
mod render;
mod tune;
