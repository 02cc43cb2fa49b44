//! ordo-demo: the seed-003 demo (`ordo demo`) — `ordo serve` in-process with three user classes under
//! lottery (or stride) weights 1:2:4, driven by `ordo bench` at rising client counts, reporting per-class
//! response times and their ratios.
//!
//! `plan` resolves and checks the flags, `result` holds what was measured (the JSON `ordo report` reads) with
//! the ratio and verdict arithmetic, and `run` wires the server and the load generator together.

pub mod plan;
pub mod result;
pub mod run;

pub use plan::{DemoClass, DemoPlan, DemoPolicy, PlanError, PlanInput};
pub use result::{ClassStats, DemoResult, DemoStep, Outcome, Verdict};
