//! End-to-end tests of `ordo report` (owned by the report work; see docs/report.md).
