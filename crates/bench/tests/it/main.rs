//! ordo-bench's integration tests, one binary with a module per topic (the allocation test is its own
//! binary, tests/alloc.rs: it installs a counting global allocator).

mod common;
mod engine;
mod examples;
mod h2;
mod merge;
mod schema;
mod script;
mod tls;
