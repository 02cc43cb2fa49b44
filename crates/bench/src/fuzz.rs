//! Fuzz targets of what a user types to the load generator (docs/design.md, "Fuzzing"): mix files, URLs,
//! `--header` and `--fail-if` expressions. (The HTTP/2 client's targets are ordo-h2client's.)

use ordo_testkit::fuzz::{config, mutated, tokens};
use proptest::prelude::*;

use crate::mix::Mix;
use crate::target::{Header, Target};
use crate::threshold::Threshold;

proptest! {
    #![proptest_config(config(1.0))]

    /// What a user types (mix files, URLs, `--header`, `--fail-if`): no panic, and a refusal says so in
    /// words.
    #[test]
    fn bench_inputs_never_panic(
        mix in prop_oneof![
            mutated(proptest::sample::select(MIXES).prop_map(|s| s.as_bytes().to_vec()), 4),
            tokens(MIX_WORDS, 30),
        ],
        url in prop_oneof![tokens(URL, 12), mutated(Just(b"https://[::1]:8443/a?b#c".to_vec()), 3)],
        header in tokens(&["X-A", ":", " ", "v", "\r", "\n", "\0", "Host", "é", "\t"], 8),
        threshold in tokens(&["p99", "p99.9", "errors", "rps", ">", "<", ">=", "=", "50", "ms", "s", "%", ".", "-", "1e9", " ", "µs", "x"], 6),
    ) {
        let text = String::from_utf8_lossy(&mix);
        if let Err(e) = Mix::parse(&text, None) {
            prop_assert!(!e.to_string().is_empty());
        }
        let url = String::from_utf8_lossy(&url);
        if let Ok(t) = Target::parse(&url) {
            let _ = t.host_header();
            let _ = t.join("/x");
            let _ = t.join(&url);
        }
        let _ = Header::parse(&String::from_utf8_lossy(&header));
        if let Err(e) = Threshold::parse(&String::from_utf8_lossy(&threshold)) {
            prop_assert!(!e.reason.is_empty());
        }
    }
}

/// The shipped example mix files.
const MIXES: &[&str] = &[
    include_str!("../../../examples/bench/open-loop-mix.toml"),
    include_str!("../../../examples/bench/seed003-classes-mix.toml"),
    include_str!("../../../examples/bench/seed003-mix.toml"),
];

/// Words of the mix file language.
const MIX_WORDS: &[&str] = &[
    "[[class]]",
    "[[classes]]",
    "name",
    "share",
    "url",
    "path",
    "method",
    "headers",
    "body",
    "assign",
    "fail_if",
    " = ",
    "\"a\"",
    "\"/x\"",
    "\"http://h/\"",
    "0.5",
    "-1",
    "nan",
    "1e999",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\"",
    "#",
    "\"p99<10ms\"",
];

/// Pieces of URLs.
const URL: &[&str] = &[
    "http://", "https://", "HTTP://", "h", "[::1]", "[", "]", ":", "80", "65536", "0", "/", "?",
    "#", "@", "%", "é", " ", "..",
];
