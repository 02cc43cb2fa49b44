//! The seed-003 demo: `ordo serve` in-process with three user classes under lottery (or stride) weights 1:2:4,
//! driven by `ordo bench` at rising client counts, reporting per-class response times and their ratios.
