//! ordo-h2client: the client side of HTTP/2 (RFC 9113) and HPACK (RFC 7541) without I/O, for
//! `ordo bench --h2` and `--h2c`. No sockets, no runtime, no clock: the caller reads into
//! [`Conn::input`], hands the count to [`Conn::received`] (which parses the frames and pushes [`Event`]s),
//! writes what [`Conn::output`] holds and reports how much with [`Conn::written`].
//!
//! - [`frame`]: the frame layer (preface, types, flags, error codes, headers, padding).
//! - [`hpack`]: the request encoder (a [`hpack::Template`] per request, its fields put in the server's
//!   dynamic table once and then sent as indices) and the full response decoder.
//! - [`Conn`]: one connection's state: streams, flow-control windows, SETTINGS, PING, GOAWAY, and the
//!   bounds on what a hostile server can make it hold or loop on (unwritten acknowledgements,
//!   CONTINUATION frames, header-block and header-list sizes, 1xx responses).
//!
//! It is its own crate so the protocol is fuzzed and tested without the load generator (`src/fuzz.rs`:
//! differentially against the `h2` crate), and the load generator keeps only its I/O driver around it.
//! Its own speed is what the load generator measures with (`bench/h2-client-vs-h2load.sh`): no header map,
//! no allocation per request once a connection's table is filled.

#![forbid(unsafe_code)]

mod conn;
pub mod frame;
#[cfg(test)]
mod fuzz;
pub mod hpack;

pub use conn::{
    Conn, Event, MAX_CONTINUATIONS, MAX_CONTROL_QUEUED, MAX_HEADER_BLOCK, MAX_HEADER_LIST,
    MAX_INFORMATIONAL, StreamFail,
};
pub use frame::ConnError;
