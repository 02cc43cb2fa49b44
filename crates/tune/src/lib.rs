//! ordo-tune: OS-scheduler experiments (`ordo tune`) — specs, designs, the runner and its repetition rule,
//! the SQLite store, statistics.

pub mod analysis;
pub mod compare;
pub mod design;
pub mod parsers;
pub mod runner;
pub mod search;
mod session;
pub mod spec;
pub mod stats;
pub mod store;
pub mod target;
pub mod workload;
