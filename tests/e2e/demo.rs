//! End-to-end tests of `ordo demo` (owned by the demo work; see docs/demo.md).
