//! ordo-sys: everything Linux — knobs behind one interface with a configurable root and a journal, /proc
//! readers, getrusage and the machine fingerprint's collection (the data types it fills, Fingerprint, Policy and
//! ProcessSnapshot, are ordo-results'). The only crate allowed `unsafe`. With feature `tls`, the
//! client side of TLS connections that serve's proxy and the load generator share.

mod cancel;
pub mod clock;
pub mod coalesce;
pub mod cpus;
mod error;
pub mod fingerprint;
pub mod knobs;
pub mod memory;
pub mod net;
pub mod process;
pub mod procfs;
pub mod rusage;
mod sampler;
mod signal;
pub mod thread;
#[cfg(feature = "tls")]
pub mod tls;
pub mod units;

pub use cancel::CancelToken;
pub use cpus::CpuSet;
pub use error::SysError;
pub use fingerprint::Fingerprint;
pub use procfs::ProcRoot;
pub use rusage::Rusage;
pub use sampler::{DetailedSnapshot, ProcessSampler, ProcessSnapshot, ThreadSnapshot};
pub use signal::watch_interrupts;
pub use thread::Policy;
