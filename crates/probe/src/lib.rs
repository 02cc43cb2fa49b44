//! ordo-probe: context-switch and run-queue measurements — the loop experiment of seed 004 (`probe loop`,
//! with `--compare` and `--footprints`) and the per-process sampler (`probe pid`). The /proc readers live
//! in ordo-sys; this crate measures, analyses and renders.

pub mod cancel;
pub mod compare;
pub mod error;
pub mod load;
pub mod looprobe;
pub mod pid;
pub mod render;
pub mod stats;
pub mod work;

pub use cancel::CancelToken;
pub use compare::{CompareConfig, CompareReport, run_compare, run_compare_until};
pub use error::ProbeError;
pub use load::LoadSpec;
pub use looprobe::{LoopConfig, LoopReport, LoopSample, Work, analyze, run_loop, run_loop_until};
pub use pid::{PidConfig, PidEnd, PidReport, watch, watch_until};
