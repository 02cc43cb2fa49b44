//! ordo-sys: everything Linux — knobs behind one interface with a configurable root and a journal, /proc
//! readers, getrusage and the machine fingerprint. The only crate allowed `unsafe`.

pub mod knobs;
