//! ordo-demo's integration tests, one binary with a module per topic.

mod schema;
