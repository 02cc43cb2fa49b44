//! End-to-end tests of `ordo serve` (owned by the serve work; see docs/serve.md).
