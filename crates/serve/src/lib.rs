//! ordo-serve: the HTTP front end that classifies each request, queues it per class and hands it to a bounded
//! pool of workers by the configured policy.

pub mod backend;
pub mod http;
