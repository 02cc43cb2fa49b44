//! A sans-IO HTTP/1.1 codec: the framing rules every HTTP/1 reader in ordo applies the same way, with no
//! sockets and no runtime, so each user keeps its own buffers and I/O loop.
//!
//! Who uses it:
//! - `ordo-serve`'s server side: request framing ([`request_framing`], [`parse_content_length`]) and
//!   request bodies ([`ChunkedDecoder`]); request-target and Host rules stay in serve;
//! - `ordo-serve`'s proxy backend, the client of its upstreams, and `ordo-bench`'s HTTP/1 client: whole
//!   responses through [`ResponseReader`] (heads by [`parse_response`], interim 1xx heads, then the body
//!   by its framing through [`BodyReader`]), so the load generator refuses exactly the framing the proxy
//!   and the server refuse; each keeps only its own I/O loop around the reader.
//!
//! Strict where leniency lets two parsers disagree on where a message ends (request smuggling, response
//! splitting): CRLF line ends only, one Content-Length value of digits, `chunked` last and once.

mod chunked;
mod framing;
#[cfg(test)]
mod fuzz;
mod reader;
mod response;
mod token;

pub use chunked::{BodyEvent, ChunkError, ChunkedDecoder};
pub use framing::{Framing, FramingError, ResponseFraming, parse_content_length, request_framing};
pub use reader::{BodyReader, HeadEvent, ReaderLimits, ResponseReadError, ResponseReader};
pub use response::{ResponseError, ResponseHead, parse_response};
pub use token::{ConnectionOptions, contains_byte, has_bare_lf, hex_digit, is_tchar, trim_ows};
