//! ordo-util: small pure helpers several ordo crates share, kept here so each exists once (no I/O, no
//! dependency).

mod calendar;
mod rng;

pub use calendar::civil_from_days;
pub use rng::SplitMix64;
