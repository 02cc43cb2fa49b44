//! The one configuration every crate's fuzz targets run under (docs/design.md, "Fuzzing"), so a short,
//! deterministic run is part of `cargo test` and `scripts/fuzz.sh` turns the same targets into a long one.
//!
//! - `ORDO_FUZZ_CASES`: inputs per target (default [`DEFAULT_CASES`], a few seconds at most per target);
//! - `ORDO_FUZZ_SEED`: the seed (default [`DEFAULT_SEED`], so CI runs the same inputs every time). A failure
//!   prints the seed, and the minimal input proptest shrank it to becomes a regression test by hand.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed};

/// Inputs per target when `ORDO_FUZZ_CASES` is not set.
pub const DEFAULT_CASES: u32 = 256;
/// The seed when `ORDO_FUZZ_SEED` is not set.
pub const DEFAULT_SEED: u64 = 0x6f72_646f; // "ordo"

/// `name`'s value as a number, `default` when unset; a value that is not a number is a test setup error.
fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a whole number")),
        Err(_) => default,
    }
}

/// The number of inputs a target runs: `ORDO_FUZZ_CASES` or [`DEFAULT_CASES`], times `scale` (a target
/// whose input costs much more or less than a parser call's scales its share; at least 1).
pub fn cases(scale: f64) -> u32 {
    let n = env_u64("ORDO_FUZZ_CASES", u64::from(DEFAULT_CASES)) as f64 * scale;
    n.clamp(1.0, f64::from(u32::MAX)) as u32
}

/// The proptest configuration of a fuzz target: [`cases`]`(scale)` inputs from the fixed or given seed, no
/// failure files written (a failure's input goes into a named regression test instead), shrinking bounded
/// in time so a failure reports within a minute.
pub fn config(scale: f64) -> Config {
    let seed = env_u64("ORDO_FUZZ_SEED", DEFAULT_SEED);
    let cases = cases(scale);
    // shown with a failure (and read by scripts/fuzz.sh, which runs with --nocapture)
    eprintln!("ordo-fuzz: cases={cases} seed={seed}");
    Config {
        cases,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// Any bytes, up to `max` of them.
pub fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(any::<u8>(), 0..=max)
}

/// Up to `max` of the `tokens` (a parser's grammar: keywords, separators, digits, line ends) joined: inputs
/// that get past a parser's first checks, which random bytes almost never do.
pub fn tokens(
    tokens: &'static [&'static str],
    max: usize,
) -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(proptest::sample::select(tokens), 0..=max)
        .prop_map(|t| t.concat().into_bytes())
}

/// `base`'s inputs with up to `edits` bytes overwritten, inserted or removed at random places: a valid
/// input made slightly invalid, where parsers most often go wrong.
pub fn mutated(
    base: impl Strategy<Value = Vec<u8>> + Clone,
    edits: usize,
) -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        base,
        proptest::collection::vec((0u8..3, any::<Index>(), any::<u8>()), 0..=edits),
    )
        .prop_map(|(mut v, edits)| {
            for (kind, at, b) in edits {
                match kind {
                    0 if !v.is_empty() => {
                        let i = at.index(v.len());
                        v[i] = b;
                    }
                    1 => {
                        let i = at.index(v.len() + 1);
                        v.insert(i, b);
                    }
                    _ if !v.is_empty() => {
                        let i = at.index(v.len());
                        v.remove(i);
                    }
                    _ => {}
                }
            }
            v
        })
}

/// Splits `input` at the given points (each taken modulo its length + 1, then sorted): the reads a socket
/// might deliver.
pub fn split<'a>(input: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::with_capacity(at.len() + 1);
    let mut from = 0;
    for to in at {
        pieces.push(&input[from..to]);
        from = to;
    }
    pieces.push(&input[from..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_fixed_and_small() {
        // (the test process may have ORDO_FUZZ_* set by scripts/fuzz.sh; the defaults apply otherwise)
        if std::env::var_os("ORDO_FUZZ_CASES").is_none() {
            assert_eq!(cases(1.0), DEFAULT_CASES);
            assert_eq!(cases(0.25), DEFAULT_CASES / 4);
            assert_eq!(cases(0.0), 1);
        }
        if std::env::var_os("ORDO_FUZZ_SEED").is_none() {
            assert_eq!(config(1.0).rng_seed, RngSeed::Fixed(DEFAULT_SEED));
        }
        assert!(config(1.0).failure_persistence.is_none());
    }

    #[test]
    fn split_covers_the_input_in_order() {
        let input = b"abcdef";
        let pieces = split(input, &[5, 1, 10]);
        // 10 % 7 = 3
        assert_eq!(pieces, [&b"a"[..], b"bc", b"de", b"f"]);
        assert_eq!(split(b"", &[3]), [&b""[..], b""]);
    }
}
