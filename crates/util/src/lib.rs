//! ordo-util: small pure helpers several ordo crates share, kept here so each exists once (no I/O, no
//! dependency; with the `toml` feature, the located-error layer every TOML file ordo reads goes through).

mod calendar;
#[cfg(all(test, feature = "toml"))]
mod fuzz;
#[cfg(feature = "toml")]
pub mod located;
pub mod pvalue;
mod rng;

pub use calendar::civil_from_days;
pub use rng::SplitMix64;
