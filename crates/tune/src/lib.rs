//! ordo-tune: OS-scheduler experiments (`ordo tune`) — specs, designs, the runner and its repetition rule,
//! the SQLite store, statistics.

pub mod analysis;
pub mod compare;
pub mod design;
pub mod export;
#[cfg(test)]
mod fuzz;
mod parsers;
pub mod runner;
pub mod search;
pub mod sequential;
mod session;

pub use session::{resume, run};
pub mod spec;
mod stats;
pub mod store;
mod target;
mod workload;
