//! End-to-end tests of `ordo tune` (owned by the tune work; see docs/tune.md).
