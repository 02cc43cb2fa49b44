//! ordo-bench: the load generator behind `ordo bench`, `ordo demo` and `ordo tune`.
