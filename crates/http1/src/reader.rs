//! One HTTP/1 response read off the wire, sans-IO: head until complete, interim (1xx) heads counted and
//! handed back, then the body by its framing (Content-Length, chunked, the end of the connection, or none
//! for HEAD/1xx/204/304). The proxy's upstream exchange and the bench client both drive it from their own
//! I/O loops and buffers, so "read one response" and its limits are written once.
//!
//! The two phases are two types: [`ResponseReader`] reads heads and, on the final one, gives the
//! [`BodyReader`] for its body (a body cannot be read before its head, nor a head in the middle of a body).

use std::fmt;
use std::mem::MaybeUninit;

use bytes::{Buf, Bytes, BytesMut};

use crate::chunked::{BodyEvent, ChunkError, ChunkedDecoder};
use crate::framing::ResponseFraming;
use crate::response::{ResponseError, ResponseHead, parse_response};

/// The bounds a [`ResponseReader`] holds a response to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderLimits {
    /// Longest head (status line, fields, final CRLF) accepted, interim heads each on their own.
    pub max_head_bytes: usize,
    /// Interim (1xx) heads accepted before the final one: without a bound an upstream could keep a request
    /// waiting with endless `100 Continue` (a caller that bounds this by a deadline instead passes
    /// `u32::MAX`).
    pub max_informational: u32,
    /// Largest decoded chunked body. (A Content-Length body is as long as it says; the caller decides
    /// what to do with a large one before reading it.)
    pub max_chunked_bytes: u64,
}

impl Default for ReaderLimits {
    /// 1 MiB heads, 8 interim heads (as HTTP/2 clients bound them), chunked bodies unbounded.
    fn default() -> Self {
        ReaderLimits {
            max_head_bytes: 1 << 20,
            max_informational: 8,
            max_chunked_bytes: u64::MAX,
        }
    }
}

/// Why a response could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ResponseReadError {
    /// The head was refused (tokens or framing); the inner error says what.
    Head(ResponseError),
    /// The head was not complete within `limit` bytes.
    HeadTooLarge { limit: usize },
    /// More than `limit` interim (1xx) heads before the final one.
    TooManyInformational { limit: u32 },
    /// The chunked body was refused (framing, or more than the limit).
    Chunked(ChunkError),
    /// The connection ended before the body did: `got` bytes of body data had arrived of `expected`
    /// (`None`: a chunked body, whose length is not declared).
    Truncated { expected: Option<u64>, got: u64 },
}

impl fmt::Display for ResponseReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseReadError::Head(e) => write!(f, "bad response head: {e}"),
            ResponseReadError::HeadTooLarge { limit } => {
                write!(f, "response head larger than {limit} bytes")
            }
            ResponseReadError::TooManyInformational { limit } => {
                write!(f, "more than {limit} informational (1xx) responses")
            }
            ResponseReadError::Chunked(e) => write!(f, "bad chunked body: {e}"),
            ResponseReadError::Truncated {
                expected: Some(n),
                got,
            } => write!(
                f,
                "connection closed inside the body ({got} of {n} bytes received)"
            ),
            ResponseReadError::Truncated {
                expected: None,
                got,
            } => write!(
                f,
                "connection closed inside the chunked body ({got} bytes received)"
            ),
        }
    }
}

impl std::error::Error for ResponseReadError {}

/// What [`ResponseReader::read_head`] found at the start of the buffer.
#[derive(Debug)]
pub enum HeadEvent<'h, 'b> {
    /// The head is not complete yet: read more and call again with all the bytes so far.
    Partial,
    /// An interim head (1xx but 101), reported so a caller can look at it: drop its `len` bytes from the
    /// front of the buffer and call again for the next head.
    Informational(ResponseHead<'h, 'b>),
    /// The final head, with the reader of its body (the bytes after `len` are the body's). `101 Switching
    /// Protocols` is final too, with no body: HTTP/1 ends there and the caller decides whether it asked
    /// for the switch.
    Final(ResponseHead<'h, 'b>, BodyReader),
}

/// The head phase of one response: fed the bytes received so far, it says whether a head is complete,
/// counts interim heads and enforces the limits. One per response (it holds the interim count).
#[derive(Clone, Debug)]
pub struct ResponseReader {
    head_request: bool,
    limits: ReaderLimits,
    informational: u32,
}

impl ResponseReader {
    /// A reader for the response to one request; `head_request`: the request was HEAD, so the response
    /// has no body whatever its head declares.
    #[inline]
    pub fn new(head_request: bool, limits: ReaderLimits) -> Self {
        ResponseReader {
            head_request,
            limits,
            informational: 0,
        }
    }

    /// Reads the head at the start of `buf` (all the bytes received since the previous head or since the
    /// request, never fewer) into `headers`, uninitialised storage as for [`parse_response`], whose rules
    /// it applies (more fields than `headers` holds is a malformed head).
    #[inline]
    pub fn read_head<'h, 'b>(
        &mut self,
        buf: &'b mut [u8],
        headers: &'h mut [MaybeUninit<httparse::Header<'b>>],
    ) -> Result<HeadEvent<'h, 'b>, ResponseReadError> {
        let received = buf.len();
        let max = self.limits.max_head_bytes;
        let head = match parse_response(buf, headers, self.head_request) {
            Ok(Some(head)) => head,
            // a head not complete within the limit can only end beyond it
            Ok(None) if received >= max => {
                return Err(ResponseReadError::HeadTooLarge { limit: max });
            }
            Ok(None) => return Ok(HeadEvent::Partial),
            Err(e) => return Err(ResponseReadError::Head(e)),
        };
        if head.len > max {
            return Err(ResponseReadError::HeadTooLarge { limit: max });
        }
        if head.status < 200 && head.status != 101 {
            self.informational += 1;
            if self.informational > self.limits.max_informational {
                return Err(ResponseReadError::TooManyInformational {
                    limit: self.limits.max_informational,
                });
            }
            return Ok(HeadEvent::Informational(head));
        }
        let body = BodyReader::new(head.framing, self.limits.max_chunked_bytes);
        Ok(HeadEvent::Final(head, body))
    }
}

/// The body phase of one response: fed the bytes after the head, it hands back the body's data and says
/// how many of the bytes were the body's and whether it ended.
#[derive(Debug)]
pub struct BodyReader {
    kind: BodyKind,
    /// Decoded data handed back so far.
    data: u64,
    /// Bytes of the wire used so far (the chunked framing included).
    wire: u64,
}

#[derive(Debug)]
enum BodyKind {
    Done,
    Length { total: u64, left: u64 },
    Chunked(ChunkedDecoder),
    UntilClose,
}

impl BodyReader {
    /// A reader of a body framed as `framing`; a chunked body of more than `max_chunked` decoded bytes is
    /// refused.
    #[inline]
    pub fn new(framing: ResponseFraming, max_chunked: u64) -> Self {
        let kind = match framing {
            ResponseFraming::None | ResponseFraming::Length(0) => BodyKind::Done,
            ResponseFraming::Length(n) => BodyKind::Length { total: n, left: n },
            ResponseFraming::Chunked => BodyKind::Chunked(ChunkedDecoder::new(max_chunked)),
            ResponseFraming::UntilClose => BodyKind::UntilClose,
        };
        BodyReader {
            kind,
            data: 0,
            wire: 0,
        }
    }

    /// The whole body has been read: the bytes after it belong to the next response.
    #[inline]
    pub fn is_done(&self) -> bool {
        match &self.kind {
            BodyKind::Done => true,
            BodyKind::Chunked(d) => d.is_done(),
            BodyKind::Length { .. } | BodyKind::UntilClose => false,
        }
    }

    /// The bytes still to come of a Content-Length body (`None` for the other framings).
    #[inline]
    pub fn remaining(&self) -> Option<u64> {
        match self.kind {
            BodyKind::Length { left, .. } => Some(left),
            _ => None,
        }
    }

    /// The body runs to the end of the connection (it cannot be reused after).
    pub fn until_close(&self) -> bool {
        matches!(self.kind, BodyKind::UntilClose)
    }

    /// Decoded body bytes handed back so far.
    pub fn data_bytes(&self) -> u64 {
        self.data
    }

    /// Bytes of the wire used so far, the chunked framing (sizes, extensions, trailers) included.
    pub fn wire_bytes(&self) -> u64 {
        self.wire
    }

    /// Takes `avail` bytes offered to a Content-Length or close-delimited body: how many are the body's
    /// and whether it ended. Not for a chunked body.
    #[inline]
    fn take_plain(&mut self, avail: usize) -> (usize, bool) {
        let (n, done) = match &mut self.kind {
            BodyKind::Length { left, .. } => {
                let n = (*left).min(avail as u64);
                *left -= n;
                let done = *left == 0;
                if done {
                    self.kind = BodyKind::Done;
                }
                (n as usize, done)
            }
            BodyKind::UntilClose => (avail, false),
            BodyKind::Done | BodyKind::Chunked(_) => (0, true),
        };
        self.data += n as u64;
        self.wire += n as u64;
        (n, done)
    }

    /// Reads what it can of the body from the start of `src`, passing its data (slices of `src`, never
    /// copied) and, for a chunked body, its trailer lines to `on`. Returns how many bytes of `src` were
    /// the body's and whether the body ended. What is left unused is a chunked line not complete yet (keep
    /// it and feed it again in front of what arrives next) or, once the body ended, the next response.
    #[inline]
    pub fn feed(
        &mut self,
        src: &[u8],
        mut on: impl FnMut(BodyEvent<'_>),
    ) -> Result<(usize, bool), ResponseReadError> {
        if let BodyKind::Chunked(dec) = &mut self.kind {
            let mut data = 0u64;
            let (used, done) = dec
                .feed_events(src, |e| {
                    if let BodyEvent::Data(d) = e {
                        data += d.len() as u64;
                    }
                    on(e)
                })
                .map_err(ResponseReadError::Chunked)?;
            self.data += data;
            self.wire += used as u64;
            return Ok((used, done));
        }
        let (n, done) = self.take_plain(src.len());
        if n > 0 {
            on(BodyEvent::Data(&src[..n]));
        }
        Ok((n, done))
    }

    /// [`feed`](Self::feed) on a read buffer: the bytes used are advanced past.
    #[inline]
    pub fn decode(
        &mut self,
        src: &mut BytesMut,
        on: impl FnMut(BodyEvent<'_>),
    ) -> Result<bool, ResponseReadError> {
        let (used, done) = self.feed(src, on)?;
        src.advance(used);
        Ok(done)
    }

    /// The body's data at the front of `src` as one `Bytes` (advancing `src` past what was used) and
    /// whether the body ended: split off `src` without a copy for a Content-Length or close-delimited
    /// body, the chunks' data copied out of their framing for a chunked one (trailers are dropped).
    pub fn decode_bytes(&mut self, src: &mut BytesMut) -> Result<(Bytes, bool), ResponseReadError> {
        if matches!(self.kind, BodyKind::Chunked(_)) {
            let mut out = BytesMut::new();
            let done = self.decode(src, |e| {
                if let BodyEvent::Data(d) = e {
                    out.extend_from_slice(d)
                }
            })?;
            return Ok((out.freeze(), done));
        }
        let (n, done) = self.take_plain(src.len());
        Ok((src.split_to(n).freeze(), done))
    }

    /// The connection ended (no more bytes will come): a close-delimited body ends here; any other body
    /// not read to its end is [`ResponseReadError::Truncated`].
    pub fn end_of_input(&mut self) -> Result<(), ResponseReadError> {
        match &self.kind {
            BodyKind::UntilClose => {
                self.kind = BodyKind::Done;
                Ok(())
            }
            _ if self.is_done() => Ok(()),
            BodyKind::Length { total, .. } => Err(ResponseReadError::Truncated {
                expected: Some(*total),
                got: self.data,
            }),
            _ => Err(ResponseReadError::Truncated {
                expected: None,
                got: self.data,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What reading one response produced, in order: the interim statuses, the final status, the body's
    /// data and trailer lines, the wire bytes the response took (head and body) and whether it ended.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Read {
        interim: Vec<u16>,
        status: u16,
        data: Vec<u8>,
        trailers: Vec<String>,
        used: usize,
        done: bool,
    }

    /// Reads one response from `wire` delivered in the pieces `cuts` makes (cut positions, ascending),
    /// keeping what each call left unused in front of the next piece as a caller's buffer does;
    /// `closes`: the connection ends after the last piece.
    fn read(
        wire: &[u8],
        cuts: &[usize],
        head_request: bool,
        limits: ReaderLimits,
        closes: bool,
    ) -> Result<Read, ResponseReadError> {
        let mut ends: Vec<usize> = cuts.to_vec();
        ends.push(wire.len());
        let mut r = ResponseReader::new(head_request, limits);
        let mut body: Option<BodyReader> = None;
        let mut out = Read::default();
        let mut pending: Vec<u8> = Vec::new();
        let mut from = 0;
        for end in ends {
            pending.extend_from_slice(&wire[from..end]);
            from = end;
            loop {
                if let Some(b) = body.as_mut() {
                    let (used, done) = b.feed(&pending, |e| match e {
                        BodyEvent::Data(d) => out.data.extend_from_slice(d),
                        BodyEvent::Trailer(t) => {
                            out.trailers.push(String::from_utf8_lossy(t).into_owned())
                        }
                    })?;
                    pending.drain(..used);
                    out.used += used;
                    if done {
                        out.done = true;
                        return Ok(out);
                    }
                    break;
                }
                let mut h = [const { MaybeUninit::uninit() }; 16];
                match r.read_head(&mut pending, &mut h)? {
                    HeadEvent::Partial => break,
                    HeadEvent::Informational(head) => {
                        out.interim.push(head.status);
                        let len = head.len;
                        pending.drain(..len);
                        out.used += len;
                    }
                    HeadEvent::Final(head, b) => {
                        out.status = head.status;
                        let len = head.len;
                        pending.drain(..len);
                        out.used += len;
                        body = Some(b);
                    }
                }
            }
        }
        if closes {
            if let Some(b) = body.as_mut() {
                b.end_of_input()?;
                out.done = b.is_done();
            }
        }
        Ok(out)
    }

    const CL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloNEXT";
    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b;c=\"d\"\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\nX-U: two\r\n\r\nNEXT";
    const INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT";

    fn ok(
        interim: &[u16],
        status: u16,
        data: &[u8],
        trailers: &[&str],
        used: usize,
        done: bool,
    ) -> Read {
        Read {
            interim: interim.to_vec(),
            status,
            data: data.to_vec(),
            trailers: trailers.iter().map(|t| t.to_string()).collect(),
            used,
            done,
        }
    }

    /// (name, wire, answers a HEAD request, the connection ends after it, what the reader makes of it)
    type Case = (
        &'static str,
        Vec<u8>,
        bool,
        bool,
        Result<Read, ResponseReadError>,
    );

    /// The table: each response, whole, as the reader must see it. `NEXT` after a response is the next
    /// one's first bytes: never the body's.
    fn cases() -> Vec<Case> {
        vec![
            (
                "content-length",
                CL.to_vec(),
                false,
                false,
                Ok(ok(&[], 200, b"hello", &[], CL.len() - 4, true)),
            ),
            (
                "1xx then final",
                INTERIM.to_vec(),
                false,
                false,
                Ok(ok(&[100, 103], 200, b"ok", &[], INTERIM.len() - 4, true)),
            ),
            (
                "HEAD: no body whatever the head declares",
                b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nNEXT".to_vec(),
                true,
                false,
                Ok(ok(&[], 200, b"", &[], 39, true)),
            ),
            (
                "204",
                b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nNEXT".to_vec(),
                false,
                false,
                Ok(ok(&[], 204, b"", &[], 46, true)),
            ),
            (
                "304",
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\n\r\nNEXT".to_vec(),
                false,
                false,
                Ok(ok(&[], 304, b"", &[], 48, true)),
            ),
            (
                "101 is final, with no body",
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nNEXT".to_vec(),
                false,
                false,
                Ok(ok(&[], 101, b"", &[], 48, true)),
            ),
            (
                "chunked with extensions and trailers",
                CHUNKED.to_vec(),
                false,
                false,
                Ok(ok(
                    &[],
                    200,
                    b"helloabcdefghijklmnopqrstuvwxyz",
                    &["X-T: 1", "X-U: two"],
                    CHUNKED.len() - 4,
                    true,
                )),
            ),
            (
                "close-delimited",
                b"HTTP/1.0 200 OK\r\n\r\nall of it".to_vec(),
                false,
                true,
                Ok(ok(&[], 200, b"all of it", &[], 28, true)),
            ),
            (
                "Content-Length: 0",
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nNEXT".to_vec(),
                false,
                false,
                Ok(ok(&[], 200, b"", &[], 38, true)),
            ),
            (
                "truncated Content-Length body",
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc".to_vec(),
                false,
                true,
                Err(ResponseReadError::Truncated {
                    expected: Some(9),
                    got: 3,
                }),
            ),
            (
                "truncated chunked body",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab".to_vec(),
                false,
                true,
                Err(ResponseReadError::Truncated {
                    expected: None,
                    got: 2,
                }),
            ),
            (
                "malformed framing: two lengths",
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc".to_vec(),
                false,
                false,
                Err(ResponseReadError::Head(ResponseError::Invalid(
                    "conflicting Content-Length",
                ))),
            ),
            (
                "malformed framing: length and chunked",
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .to_vec(),
                false,
                false,
                Err(ResponseReadError::Head(ResponseError::Invalid(
                    "Content-Length together with Transfer-Encoding",
                ))),
            ),
            (
                "malformed chunk size",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
                false,
                false,
                Err(ResponseReadError::Chunked(ChunkError::Invalid(
                    "invalid chunk size",
                ))),
            ),
            (
                "bare LF after chunk data",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\n0\r\n\r\n".to_vec(),
                false,
                false,
                Err(ResponseReadError::Chunked(ChunkError::Invalid(
                    "chunk data not followed by CRLF",
                ))),
            ),
            (
                "bad trailer",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n"
                    .to_vec(),
                false,
                false,
                Err(ResponseReadError::Chunked(ChunkError::Invalid(
                    "malformed trailer",
                ))),
            ),
            (
                "not HTTP",
                b"HTTZ/1.1 200 OK\r\n\r\n".to_vec(),
                false,
                false,
                Err(ResponseReadError::Head(ResponseError::Malformed(
                    httparse::Error::Version,
                ))),
            ),
            (
                "a head cut by the end of the connection is only partial",
                b"HTTP/1.1 200 OK\r\nContent-Len".to_vec(),
                false,
                false,
                Ok(ok(&[], 0, b"", &[], 0, false)),
            ),
        ]
    }

    /// Every case gives the same result however its bytes are cut in two, or in three, reads.
    #[test]
    fn table_at_every_split() {
        let limits = ReaderLimits::default();
        for (name, wire, head, closes, want) in cases() {
            assert_eq!(
                read(&wire, &[], head, limits, closes),
                want,
                "{name}: whole"
            );
            for a in 0..=wire.len() {
                assert_eq!(
                    read(&wire, &[a], head, limits, closes),
                    want,
                    "{name}: split at {a}"
                );
            }
            for a in (0..=wire.len()).step_by(3) {
                for b in (a..=wire.len()).step_by(5) {
                    assert_eq!(
                        read(&wire, &[a, b], head, limits, closes),
                        want,
                        "{name}: split at {a}, {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn oversized_heads_are_refused_however_they_arrive() {
        let limits = ReaderLimits {
            max_head_bytes: 64,
            ..ReaderLimits::default()
        };
        let mut wire = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
        wire.extend_from_slice(&[b'a'; 64]);
        wire.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
        let want = Err(ResponseReadError::HeadTooLarge { limit: 64 });
        // whole (complete in one read) and byte by byte (never complete)
        assert_eq!(read(&wire, &[], false, limits, false), want);
        let every: Vec<usize> = (1..wire.len()).collect();
        assert_eq!(read(&wire, &every, false, limits, false), want);
        // a head of exactly the limit is read
        let fits = b"HTTP/1.1 200 OK\r\nX-Pad: aaaaaaaaaaaaaaaaa\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(fits.len(), 64);
        let every: Vec<usize> = (1..fits.len()).collect();
        assert_eq!(
            read(fits, &every, false, limits, false),
            Ok(ok(&[], 200, b"", &[], 64, true))
        );
        // an interim head counts on its own: two of 40 bytes and a final one fit a 64-byte limit
        let interim = b"HTTP/1.1 103 Early Hints\r\nX: 1234567\r\n\r\n";
        assert_eq!(interim.len(), 40);
        let mut w = interim.repeat(2);
        w.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            read(&w, &[], false, limits, false),
            Ok(ok(&[103, 103], 200, b"", &[], w.len(), true))
        );
    }

    #[test]
    fn too_many_informational_heads() {
        let limits = ReaderLimits {
            max_informational: 3,
            ..ReaderLimits::default()
        };
        let one = b"HTTP/1.1 100 Continue\r\n\r\n";
        let mut w = one.repeat(3);
        w.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            read(&w, &[], false, limits, false).unwrap().interim.len(),
            3
        );
        let w = one.repeat(4);
        let e = read(&w, &[], false, limits, false).unwrap_err();
        assert_eq!(e, ResponseReadError::TooManyInformational { limit: 3 });
        assert_eq!(e.to_string(), "more than 3 informational (1xx) responses");
    }

    #[test]
    fn chunked_body_limit() {
        let limits = ReaderLimits {
            max_chunked_bytes: 4,
            ..ReaderLimits::default()
        };
        assert_eq!(
            read(CHUNKED, &[], false, limits, false),
            Err(ResponseReadError::Chunked(ChunkError::TooLarge))
        );
    }

    /// The proxy's path: `decode_bytes` hands back the data of a plain body as a split of the buffer,
    /// the decoded chunks of a chunked one, and leaves the next response in the buffer.
    #[test]
    fn decode_bytes_leaves_the_next_response() {
        for (wire, want) in [
            (CL, &b"hello"[..]),
            (CHUNKED, &b"helloabcdefghijklmnopqrstuvwxyz"[..]),
        ] {
            let mut buf = BytesMut::from(wire);
            let mut r = ResponseReader::new(false, ReaderLimits::default());
            let mut h = [const { MaybeUninit::uninit() }; 16];
            let (len, mut body) = match r.read_head(&mut buf, &mut h).unwrap() {
                HeadEvent::Final(head, body) => (head.len, body),
                other => panic!("{other:?}"),
            };
            buf.advance(len);
            let (data, done) = body.decode_bytes(&mut buf).unwrap();
            assert!(done && body.is_done());
            assert_eq!(&data[..], want);
            assert_eq!(&buf[..], b"NEXT");
            assert_eq!(body.data_bytes(), want.len() as u64);
            assert_eq!(body.wire_bytes(), (wire.len() - len - 4) as u64);
        }
        // a Content-Length body in pieces: what is there, then the rest
        let mut body = BodyReader::new(ResponseFraming::Length(5), u64::MAX);
        let mut buf = BytesMut::from(&b"hel"[..]);
        assert_eq!(
            body.decode_bytes(&mut buf).unwrap(),
            (Bytes::from("hel"), false)
        );
        assert_eq!(body.remaining(), Some(2));
        assert_eq!(
            body.end_of_input(),
            Err(ResponseReadError::Truncated {
                expected: Some(5),
                got: 3
            })
        );
        buf.extend_from_slice(b"loX");
        assert_eq!(
            body.decode_bytes(&mut buf).unwrap(),
            (Bytes::from("lo"), true)
        );
        assert_eq!(&buf[..], b"X");
        assert_eq!(body.end_of_input(), Ok(()));
        // close-delimited: all of it, until the connection ends
        let mut body = BodyReader::new(ResponseFraming::UntilClose, u64::MAX);
        assert!(body.until_close());
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert_eq!(
            body.decode_bytes(&mut buf).unwrap(),
            (Bytes::from("abc"), false)
        );
        assert!(buf.is_empty() && !body.is_done());
        assert_eq!(body.end_of_input(), Ok(()));
        assert!(body.is_done());
    }
}
