//! The chunked transfer coding's decoder (RFC 9112 §7.1), one state machine for every reader of a chunked
//! body: serve's request bodies, the proxy's upstream responses and the bench client's responses. Strict
//! where leniency lets two parsers disagree on where a body ends: CRLF line ends only, a bounded
//! chunk-size line (also when one read brings the whole body), no sign or `0x`, bounded and well-formed
//! trailers.

use std::fmt;

use bytes::{Buf, BytesMut};

use crate::token::{hex_digit, is_field_byte, is_tchar, trim_ows_start};

/// Longest chunk-size line (with extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;
/// Largest trailer section accepted.
const MAX_TRAILER_BYTES: usize = 16 * 1024;

/// What a body reader found in the bytes it was fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEvent<'a> {
    /// Decoded body data (a slice of the input, never copied).
    Data(&'a [u8]),
    /// One trailer field line of a chunked body (`name: value`, already checked), without its CRLF.
    Trailer(&'a [u8]),
}

/// Incremental decoder of a chunked body.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: ChunkState,
    total: u64,
    max: u64,
    trailer_bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Why a chunked body was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// Malformed framing; the text says what was wrong.
    Invalid(&'static str),
    /// More decoded bytes than the decoder's limit.
    TooLarge,
}

impl fmt::Display for ChunkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkError::Invalid(m) => f.write_str(m),
            ChunkError::TooLarge => f.write_str("chunk too large"),
        }
    }
}

impl std::error::Error for ChunkError {}

impl ChunkedDecoder {
    /// A decoder refusing more than `max` decoded bytes.
    pub fn new(max: u64) -> Self {
        ChunkedDecoder {
            state: ChunkState::Size,
            total: 0,
            max,
            trailer_bytes: 0,
        }
    }

    /// The last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// [`feed`](Self::feed) on a read buffer: the bytes used are advanced past, so `src` keeps only what
    /// has not been decoded yet (a partial line, or what follows the body).
    #[inline]
    pub fn decode(
        &mut self,
        src: &mut BytesMut,
        out: impl FnMut(&[u8]),
    ) -> Result<bool, ChunkError> {
        let (used, done) = self.feed(src, out)?;
        src.advance(used);
        Ok(done)
    }

    /// Decodes what it can from the start of `src`, passing decoded data to `out` (slices of `src`, never
    /// copied). Returns how many bytes of `src` were used and whether the body ended (last chunk and
    /// trailers read). A line not complete yet is left unused: the caller keeps the bytes from `used` on
    /// and feeds them again with what arrives next.
    #[inline]
    pub fn feed(
        &mut self,
        src: &[u8],
        mut out: impl FnMut(&[u8]),
    ) -> Result<(usize, bool), ChunkError> {
        self.feed_events(src, |e| {
            if let BodyEvent::Data(d) = e {
                out(d)
            }
        })
    }

    /// [`feed`](Self::feed) that also reports each trailer field line (checked, without its CRLF) as
    /// [`BodyEvent::Trailer`], in order, after the body's data.
    pub fn feed_events(
        &mut self,
        src: &[u8],
        mut out: impl FnMut(BodyEvent<'_>),
    ) -> Result<(usize, bool), ChunkError> {
        let mut at = 0;
        loop {
            let rest = &src[at..];
            match self.state {
                ChunkState::Done => return Ok((at, true)),
                ChunkState::Size => {
                    // the limit holds however much of the body one read brought (only the line is scanned)
                    let window = &rest[..rest.len().min(MAX_CHUNK_LINE + 2)];
                    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
                        if rest.len() > MAX_CHUNK_LINE + 1 {
                            return Err(ChunkError::Invalid("chunk-size line too long"));
                        }
                        return Ok((at, false));
                    };
                    if nl > MAX_CHUNK_LINE + 1 {
                        return Err(ChunkError::Invalid("chunk-size line too long"));
                    }
                    if nl == 0 || rest[nl - 1] != b'\r' {
                        return Err(ChunkError::Invalid("bare LF in chunk-size line"));
                    }
                    let size = parse_chunk_size(&rest[..nl - 1])?;
                    at += nl + 1;
                    if size == 0 {
                        self.state = ChunkState::Trailer;
                    } else {
                        if self.total.saturating_add(size) > self.max {
                            return Err(ChunkError::TooLarge);
                        }
                        self.total += size;
                        self.state = ChunkState::Data(size);
                    }
                }
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok((at, false));
                    }
                    let n = (left.min(rest.len() as u64)) as usize;
                    out(BodyEvent::Data(&rest[..n]));
                    at += n;
                    self.state = if left == n as u64 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - n as u64)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        if rest.first().is_some_and(|&b| b != b'\r') {
                            return Err(ChunkError::Invalid("chunk data not followed by CRLF"));
                        }
                        return Ok((at, false));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(ChunkError::Invalid("chunk data not followed by CRLF"));
                    }
                    at += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => {
                    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                        if self.trailer_bytes + rest.len() > MAX_TRAILER_BYTES {
                            return Err(ChunkError::Invalid("trailer section too large"));
                        }
                        return Ok((at, false));
                    };
                    if nl == 0 || rest[nl - 1] != b'\r' {
                        return Err(ChunkError::Invalid("bare LF in trailer"));
                    }
                    let line = &rest[..nl - 1];
                    at += nl + 1;
                    if line.is_empty() {
                        self.state = ChunkState::Done;
                        continue;
                    }
                    valid_trailer_line(line)?;
                    self.trailer_bytes += nl + 1;
                    if self.trailer_bytes > MAX_TRAILER_BYTES {
                        return Err(ChunkError::Invalid("trailer section too large"));
                    }
                    out(BodyEvent::Trailer(line));
                }
            }
        }
    }
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, ChunkError> {
    let digits_end = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    if digits_end == 0 {
        return Err(ChunkError::Invalid("invalid chunk size"));
    }
    if digits_end > 16 {
        return Err(ChunkError::Invalid("chunk size overflows"));
    }
    let mut size: u64 = 0;
    for &b in &line[..digits_end] {
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(hex_digit(b).unwrap_or(0))))
            .ok_or(ChunkError::Invalid("chunk size overflows"))?;
    }
    let rest = &line[digits_end..];
    if !rest.is_empty() {
        // chunk extensions: `;name[=value]`, optionally after whitespace; no control bytes.
        if trim_ows_start(rest).first() != Some(&b';') || !rest.iter().all(|&b| is_field_byte(b)) {
            return Err(ChunkError::Invalid("invalid chunk size"));
        }
    }
    Ok(size)
}

fn valid_trailer_line(line: &[u8]) -> Result<(), ChunkError> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or(ChunkError::Invalid("malformed trailer"))?;
    if colon == 0 || !line[..colon].iter().all(|&b| is_tchar(b)) {
        return Err(ChunkError::Invalid("malformed trailer"));
    }
    if !line[colon + 1..].iter().all(|&b| is_field_byte(b)) {
        return Err(ChunkError::Invalid("malformed trailer"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], max: u64) -> Result<(Vec<u8>, Vec<u8>), ChunkError> {
        // feed byte by byte to exercise every partial state
        let mut d = ChunkedDecoder::new(max);
        let mut src = BytesMut::new();
        let mut out = Vec::new();
        for &b in input {
            src.extend_from_slice(&[b]);
            if d.decode(&mut src, |c| out.extend_from_slice(c))? {
                break;
            }
        }
        assert!(d.is_done(), "decoder not done");
        Ok((out, src.to_vec()))
    }

    #[test]
    fn chunked_decodes() {
        let (out, rest) =
            decode_all(b"5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nX-T: 1\r\n\r\nGET", 100).unwrap();
        assert_eq!(out, b"hello!");
        assert!(rest.is_empty());
        let mut d = ChunkedDecoder::new(100);
        let mut src = BytesMut::from(&b"A\r\n0123456789\r\n0\r\n\r\nNEXT"[..]);
        let mut out = Vec::new();
        assert_eq!(d.decode(&mut src, |c| out.extend_from_slice(c)), Ok(true));
        assert_eq!(out, b"0123456789");
        assert_eq!(&src[..], b"NEXT");
    }

    /// Every way of cutting a body into three reads decodes the same, using exactly the body's bytes: the
    /// caller keeps what a feed left unused and feeds it again in front of the next read.
    #[test]
    fn chunked_decoder_any_split() {
        let wire = b"5;a=b\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nT: v\r\n\r\nNEXT";
        let body_len = wire.len() - 4;
        for a in 0..=wire.len() {
            for b in a..=wire.len() {
                let mut d = ChunkedDecoder::new(u64::MAX);
                let (mut used, mut data) = (0, Vec::new());
                let mut pending: Vec<u8> = Vec::new();
                let mut done = false;
                for piece in [&wire[..a], &wire[a..b], &wire[b..]] {
                    if done {
                        break;
                    }
                    pending.extend_from_slice(piece);
                    let (n, fin) = d.feed(&pending, |c| data.extend_from_slice(c)).unwrap();
                    pending.drain(..n);
                    used += n;
                    done = fin;
                }
                assert!(done, "split {a}/{b}");
                assert_eq!(used, body_len, "split {a}/{b}");
                assert_eq!(data, b"helloabcdefghijklmnopqrstuvwxyz", "split {a}/{b}");
            }
        }
    }

    #[test]
    fn chunked_refuses() {
        for bad in [
            &b"x\r\n"[..],
            b"zz\r\n",
            b"-1\r\n",
            b"+5\r\nhello\r\n",
            b"0x5\r\nhello\r\n",
            b" 5\r\nhello\r\n",
            b"5\nhello\r\n",
            b"5\r\nhello\n",
            b"5\r\nhelloXX",
            b"11111111111111111\r\n",
            b"5;\x01\r\n",
            b"0\r\nbad trailer\r\n\r\n",
            b"0\r\nX: y\n\r\n",
            b"0\r\n\n",
        ] {
            assert!(
                matches!(decode_all(bad, 1 << 40), Err(ChunkError::Invalid(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            decode_all(b"ffffffffffffffff\r\n", 100).unwrap_err(),
            ChunkError::TooLarge
        );
        assert_eq!(decode_all(b"60\r\n", 10).unwrap_err(), ChunkError::TooLarge);
    }

    #[test]
    fn chunk_size_line_limit_holds_in_one_read() {
        let long = format!("3;x={}\r\nabc\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE));
        let mut d = ChunkedDecoder::new(1 << 20);
        let mut src = BytesMut::from(long.as_bytes());
        assert_eq!(
            d.decode(&mut src, |_| {}),
            Err(ChunkError::Invalid("chunk-size line too long"))
        );
        // byte by byte too
        assert!(matches!(
            decode_all(long.as_bytes(), 1 << 20),
            Err(ChunkError::Invalid("chunk-size line too long"))
        ));
        // a line of exactly the limit is fine, whole or byte by byte
        let fits = format!("3;x={}\r\nabc\r\n0\r\n\r\n", "e".repeat(MAX_CHUNK_LINE - 4));
        let mut d = ChunkedDecoder::new(1 << 20);
        let mut src = BytesMut::from(fits.as_bytes());
        assert_eq!(d.decode(&mut src, |_| {}), Ok(true));
        assert_eq!(decode_all(fits.as_bytes(), 1 << 20).unwrap().0, b"abc");
    }
}
