//! ordo-lab: experiments — specs, designs, the runner and its repetition rule, the SQLite store, statistics,
//! and the seed-003 demo.

pub mod analysis;
pub mod compare;
pub mod demo;
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
