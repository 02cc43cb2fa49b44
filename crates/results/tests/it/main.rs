//! ordo-results' integration tests, one binary with a module per topic.

mod schemas;
