//! ordo-tune's integration tests, one binary with a module per topic.

mod tune_inprocess;
