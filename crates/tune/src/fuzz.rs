//! Fuzz targets of the experiment side's parsers (docs/design.md, "Fuzzing"): experiment files (the shipped
//! examples mutated, and TOML made of their words), durations, and the output of the external load
//! generators (ab, wrk, sysbench) a command workload is read from — text ordo does not control.

use std::path::Path;

use ordo_testkit::fuzz::{config, mutated, tokens};
use proptest::prelude::*;

use crate::parsers::{parse_ab, parse_regex, parse_sysbench, parse_wrk};
use crate::spec::{Spec, parse_duration};

/// The shipped example experiment files.
const EXAMPLES: &[&str] = &[
    include_str!("../../../examples/tune/seed000.toml"),
    include_str!("../../../examples/tune/seed001.toml"),
    include_str!("../../../examples/tune/seed001-sysbench.toml"),
    include_str!("../../../examples/tune/seed002.toml"),
    include_str!("../../../examples/tune/search.toml"),
    include_str!("../../../examples/tune/nginx.toml"),
    include_str!("../../../examples/tune/tuned-profiles.toml"),
];

/// Words of the experiment file language.
const SPEC_WORDS: &[&str] = &[
    "name",
    "seed",
    "[target]",
    "[[workload]]",
    "[[knobs]]",
    "[design]",
    "[score]",
    "[baseline]",
    "repeat",
    "builtin",
    "\"ordo-serve\"",
    "command",
    "key",
    "values",
    "\"kernel.sched_rr_timeslice_ms\"",
    "\"vm.swappiness\"",
    "kind",
    "\"grid\"",
    "\"search\"",
    "\"list\"",
    "duration",
    "\"5s\"",
    "\"0s\"",
    "\"1e400s\"",
    " = ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "1",
    "-1",
    "0.5",
    "\n",
    "\"",
    "#",
    "parser",
    "\"ab\"",
    "\"regex\"",
    "\"(?P<throughput>[0-9.]+)\"",
    "\"(\"",
    "metric",
    "\"throughput\"",
    "expr",
];

/// Lines of the load generators' output, and the numbers and units in them.
const OUTPUT: &[&str] = &[
    "Requests per second:",
    "Time per request:",
    "Complete requests:",
    "Failed requests:",
    "Non-2xx responses:",
    "Time taken for tests:",
    " 50%",
    " 99%",
    "100%",
    "Latency",
    "Req/Sec",
    "Requests/sec:",
    "Transfer/sec:",
    "requests in",
    "Socket errors: connect 1, read 2, write 3, timeout 4",
    "Non-2xx or 3xx responses:",
    "transactions:",
    "events/s (eps):",
    "total time:",
    "min:",
    "avg:",
    "max:",
    "95th percentile:",
    "(",
    ")",
    "[ms]",
    "[#/sec]",
    "(mean)",
    " ",
    "\t",
    "\n",
    "1",
    "0",
    "-1",
    "1.5",
    "1e308",
    "1e309",
    "Total:",
    "Connect:",
    "inf",
    "NaN",
    "infinity",
    "req/s",
    "events/s",
    "us",
    "ms",
    "s",
    "m",
    "h",
    "k",
    "%",
    "µs",
    "9999999999999999999",
];

proptest! {
    #![proptest_config(config(1.0))]

    /// An experiment file: no panic, and a refusal names the file.
    #[test]
    fn experiment_file_never_panics(
        text in prop_oneof![
            mutated(proptest::sample::select(EXAMPLES).prop_map(|s| s.as_bytes().to_vec()), 4),
            tokens(SPEC_WORDS, 40),
        ],
        duration in tokens(&["1", "0", "1.5", "-", "ms", "s", "m", "h", "d", "us", " ", "e9", "99999999999999999999"], 5),
    ) {
        let text = String::from_utf8_lossy(&text);
        // (a directory that does not exist: no example's relative file is found or read)
        if let Err(e) = Spec::parse(&text, Path::new("fuzz.toml"), Path::new("/nonexistent-ordo-fuzz")) {
            let msg = e.to_string();
            prop_assert!(msg.contains("fuzz.toml"), "{:?}", msg);
        }
        let _ = parse_duration(&String::from_utf8_lossy(&duration));
    }

    /// A load generator's output: no panic, and every metric read is a finite number (a NaN or an
    /// infinity would poison the statistics of the whole experiment).
    #[test]
    fn load_generator_output_never_panics(out in tokens(OUTPUT, 60)) {
        let out = String::from_utf8_lossy(&out);
        let re = regex::Regex::new(r"(?P<throughput>\S+) (?:req|events)/s").expect("a regex");
        for m in [parse_ab(&out), parse_wrk(&out), parse_sysbench(&out), parse_regex(&re, &out)]
            .into_iter()
            .flatten()
        {
            for (k, v) in &m {
                prop_assert!(v.is_finite(), "{} = {} from {:?}", k, v, out);
            }
        }
    }
}
