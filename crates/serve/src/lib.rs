//! ordo-serve: the HTTP front end that classifies each request, queues it per class and hands it to a bounded
//! pool of workers by the configured policy.

mod access_log;
mod admin;
mod admin_guard;
pub mod backend;
mod cidr;
pub mod classify;
mod compile;
pub mod config;
pub mod edge;
pub mod fleet;
pub mod forwarded;
#[cfg(test)]
mod fuzz;
pub mod gate;
pub mod http;
pub mod http2;
mod invalid;
mod label;
pub mod listen;
mod log_limit;
pub mod lua;
mod metrics;
mod overload;
pub mod proxy_protocol;
mod sd_notify;
pub mod server;
mod serving_thread;
mod shared;
mod tls;
mod vhost;

pub use config::{ConfigError, Overrides, POLICY_NAMES, ServeConfig, parse_policy, policy_name};
pub use gate::Overloaded;
pub use ordo_sched::PolicyKind;
pub use ordo_sys::coalesce::coalesce_wakeups;
/// Build a key path: `keypath!["classes", 1, "weight"]`.
#[doc(hidden)]
pub use ordo_util::keypath;
pub use overload::Workers;
pub use server::{Server, ServerHandle, StartError};
