//! ordo-probe: context-switch and run-queue measurements — the loop experiment of seed 004 (`probe loop`,
//! with `--compare` and `--footprints`) and the per-process sampler (`probe pid`). The /proc readers live
//! in ordo-sys; this crate measures, analyses and renders.

mod compare;
mod error;
pub mod load;
mod looprobe;
mod pid;
pub mod render;
pub mod work;

pub use ordo_results::probe::stats;
pub use ordo_results::probe::{
    Applied, CompareConfig, CompareReport, CompareRow, LoadSpec, LoopConfig, LoopReport,
    LoopSample, LoopSummary, PidReport, PsiRates, Rates, Split, SwitchCost, SwitchGroup,
    ThreadRates, Work,
};

pub use compare::{run_compare, run_compare_until};
pub use error::ProbeError;
pub use looprobe::{analyze, run_loop, run_loop_until};
pub use ordo_sys::CancelToken;
pub use pid::{PidConfig, PidEnd, watch, watch_until};
