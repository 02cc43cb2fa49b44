//! End-to-end tests of the `ordo` binary: one test binary, one module per topic, a shared harness in `util`.

mod util;

mod bench;
mod demo;
mod design;
mod operator;
mod probe;
mod report;
mod serve;
mod tune;
