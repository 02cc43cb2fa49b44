//! The HTTP/2 frame layer (RFC 9113 §4, §6) the connection is built on: the connection preface, frame
//! types, flags and error codes, the 9-byte frame header (written and read), the padding rule, and the
//! connection error every malformed frame becomes. No state: [`Conn`](crate::Conn) keeps that.

/// What a client sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types.
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

/// Frame flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Error codes (RST_STREAM, GOAWAY).
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// A frame header: the length of the payload that follows (24 bits), the type, the flags and the stream id
/// (31 bits, the reserved bit cleared).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

/// The length of a frame header.
pub const HEAD_LEN: usize = 9;

impl Head {
    /// Reads a frame header from the first [`HEAD_LEN`] bytes of `h` (None: fewer than that).
    #[inline]
    pub fn parse(h: &[u8]) -> Option<Head> {
        let h = h.get(..HEAD_LEN)?;
        Some(Head {
            len: (h[0] as usize) << 16 | (h[1] as usize) << 8 | h[2] as usize,
            kind: h[3],
            flags: h[4],
            stream: be32(&h[5..9]) & 0x7fff_ffff,
        })
    }
}

/// Largest window (2^31 - 1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// A connection error (RFC 9113 §5.4.1): what went wrong, and the error code sent in GOAWAY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnError {
    /// The error code (one of the constants above).
    pub code: u32,
    /// What the peer did, in words.
    pub reason: String,
}

pub(crate) fn err<T>(code: u32, reason: impl Into<String>) -> Result<T, ConnError> {
    Err(ConnError {
        code,
        reason: reason.into(),
    })
}

/// Appends a frame header.
#[inline]
pub fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A big-endian 32-bit number from the first four bytes of `b`.
#[inline]
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// The payload of a frame with the PADDED flag, without its pad length and padding.
#[inline]
pub fn unpad(flags: u8, p: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(p);
    }
    let Some((&pad, rest)) = p.split_first() else {
        return err(FRAME_SIZE_ERROR, "padded frame without its pad length");
    };
    if pad as usize > rest.len() {
        return err(PROTOCOL_ERROR, "padding longer than the frame");
    }
    Ok(&rest[..rest.len() - pad as usize])
}
