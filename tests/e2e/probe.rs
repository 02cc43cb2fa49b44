//! End-to-end tests of `ordo probe` (owned by the probe work; see docs/probe.md).
