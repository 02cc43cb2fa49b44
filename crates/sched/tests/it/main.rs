//! ordo-sched's integration tests (property tests, the limiter simulation, overload control), one binary with a
//! module per topic.

mod cancel;
mod capabilities;
mod limit;
mod overload;
mod properties;
