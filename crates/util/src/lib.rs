//! ordo-util: small pure helpers several ordo crates share, kept here so each exists once (no I/O, no
//! dependency).

mod rng;

pub use rng::SplitMix64;
