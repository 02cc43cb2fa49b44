//! End-to-end tests of `ordo bench` (owned by the bench work; see docs/bench.md).
