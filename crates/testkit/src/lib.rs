//! ordo-testkit: helpers the tests of several ordo crates share, as one dev-dependency instead of files
//! included with `#[path]`.

pub mod chromium;
pub mod fuzz;
pub mod json_schema;
pub mod threads;
