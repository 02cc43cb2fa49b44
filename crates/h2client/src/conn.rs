//! The client side of one HTTP/2 connection (RFC 9113), without I/O: the driver (`ordo bench`'s connection
//! task) hands it the bytes it read and writes out the bytes it queued. It opens streams with a header block
//! encoded once per class, sends request bodies as the peer's windows allow, answers SETTINGS and PING,
//! hands back flow-control credit in batches, honours GOAWAY, RST_STREAM and MAX_CONCURRENT_STREAMS, and
//! turns responses into events that carry only what the report needs (status, head size, body bytes). A
//! malformed frame or header block is an error of the whole connection, and so is a server that floods it:
//! more acknowledgements waiting unwritten than [`MAX_CONTROL_QUEUED`], a header block in more than
//! [`MAX_CONTINUATIONS`] CONTINUATION frames or over [`MAX_HEADER_BLOCK`], a header list that decodes past
//! [`MAX_HEADER_LIST`], or more than [`MAX_INFORMATIONAL`] 1xx responses on a stream — each bounds what a
//! hostile server can make the client hold or loop on.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use crate::frame::*;
use crate::hpack::Decoder;

/// The largest frame payload we accept (the default SETTINGS_MAX_FRAME_SIZE, which we do not change).
const OUR_MAX_FRAME: usize = 16_384;
/// Header blocks larger than this (HEADERS and CONTINUATIONs together) fail the connection.
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// CONTINUATION frames one header block may take (nghttp2, h2load's library, allows 8): empty ones would
/// otherwise keep a block open for ever without growing it.
pub const MAX_CONTINUATIONS: usize = 16;
/// The decoded size of a response's header list (RFC 9113's measure: name + value + 32 per field) past
/// which the connection fails — an HPACK bomb decodes a small block into a huge list. Advertised as our
/// SETTINGS_MAX_HEADER_LIST_SIZE.
pub const MAX_HEADER_LIST: usize = 256 * 1024;
/// Informational (1xx) responses a stream may have before its final response.
pub const MAX_INFORMATIONAL: u8 = 8;
/// Frames we send in answer to the server's (PING and SETTINGS acknowledgements, RST_STREAM) that may wait
/// unwritten: a server that makes us answer faster than it reads the answers floods the connection
/// (nghttp2's limit, and so h2load's).
pub const MAX_CONTROL_QUEUED: usize = 1000;

/// Why a stream ended without its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFail {
    /// RST_STREAM from the server (other than REFUSED_STREAM), or a response that breaks the rules
    /// (no or bad `:status`, a body unlike its content-length).
    Reset,
    /// The server did not process it (REFUSED_STREAM, or above a GOAWAY's last stream): safe to send again.
    Refused,
}

/// What the peer said about a stream (the `client` is the one the stream was opened for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The final response head: status, its size as HTTP/1.1 would carry it, and whether the stream ended
    /// with it.
    Head {
        client: usize,
        status: u16,
        head_bytes: u64,
        end: bool,
    },
    /// Body bytes.
    Data { client: usize, len: usize },
    /// The response ended (END_STREAM on DATA or trailers).
    End { client: usize },
    /// The stream ended without a (complete) response.
    Failed { client: usize, why: StreamFail },
}

struct Stream {
    client: usize,
    /// What we may still send on it.
    send_window: i64,
    /// What the peer may still send on it, and what it has sent since our last WINDOW_UPDATE.
    recv_window: i64,
    unacked: u32,
    /// The request body left to send (from this offset).
    body: Option<(Bytes, usize)>,
    /// The final response head came.
    head: bool,
    /// Whether the body must match the content-length (not for HEAD).
    check_length: bool,
    content_length: Option<u64>,
    received: u64,
    /// Informational (1xx) responses so far.
    informational: u8,
}

/// A header block being received (HEADERS without END_HEADERS, then CONTINUATIONs).
struct Partial {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
    continuations: usize,
}

/// One connection's state: bytes in ([`Conn::input`], [`Conn::received`]), events and bytes out
/// ([`Conn::output`], [`Conn::written`]).
pub struct Conn {
    /// The bytes to write, in order.
    out: Vec<u8>,
    /// Where each counted answer (PING and SETTINGS ACK, RST_STREAM) not yet written ends in `out`.
    control: VecDeque<usize>,
    /// Received bytes not yet parsed: `inbuf[start..end]`.
    inbuf: Box<[u8]>,
    start: usize,
    end: usize,
    hpack: Decoder,
    block: Vec<u8>,
    partial: Option<Partial>,
    next_id: u32,
    streams: HashMap<u32, Stream>,
    /// The server's first SETTINGS came (streams are opened only after it, so its limits hold).
    settings_seen: bool,
    max_streams: usize,
    max_frame: usize,
    /// The server's SETTINGS_INITIAL_WINDOW_SIZE, and the connection's send window.
    peer_initial: i64,
    send_window: i64,
    /// Our initial stream window and connection window, what the connection may still receive, and what
    /// it received since our last connection WINDOW_UPDATE.
    stream_window: u32,
    conn_window: u32,
    recv_window: i64,
    unacked: u32,
    /// Streams with body bytes waiting for window.
    blocked: Vec<u32>,
    /// The server's SETTINGS_HEADER_TABLE_SIZE (what our encoder may use of its decoder's table).
    table_size: usize,
    /// The last stream id of a GOAWAY received.
    goaway: Option<u32>,
    /// The `server` field of the first response that has one.
    server: Option<String>,
}

impl Conn {
    /// A new connection with receive windows of `stream_window` per stream and `conn_window` for the
    /// connection; the preface, our SETTINGS and the connection's WINDOW_UPDATE are queued.
    pub fn new(stream_window: u32, conn_window: u32) -> Conn {
        let stream_window = stream_window.clamp(1, MAX_WINDOW as u32);
        let conn_window = conn_window.clamp(65_535, MAX_WINDOW as u32);
        let mut out = Vec::with_capacity(64 * 1024);
        out.extend_from_slice(PREFACE);
        // SETTINGS_ENABLE_PUSH = 0, SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE
        head(&mut out, 18, SETTINGS, 0, 0);
        out.extend_from_slice(&[0, 2, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&stream_window.to_be_bytes());
        out.extend_from_slice(&[0, 6]);
        out.extend_from_slice(&(MAX_HEADER_LIST as u32).to_be_bytes());
        if conn_window > 65_535 {
            head(&mut out, 4, WINDOW_UPDATE, 0, 0);
            out.extend_from_slice(&(conn_window - 65_535).to_be_bytes());
        }
        Conn {
            out,
            control: VecDeque::new(),
            inbuf: vec![0u8; 4 * (OUR_MAX_FRAME + 9)].into_boxed_slice(),
            start: 0,
            end: 0,
            hpack: Decoder::new(4096),
            block: Vec::new(),
            partial: None,
            next_id: 1,
            streams: HashMap::new(),
            settings_seen: false,
            max_streams: usize::MAX,
            max_frame: 16_384,
            peer_initial: 65_535,
            send_window: 65_535,
            stream_window,
            conn_window,
            recv_window: conn_window as i64,
            unacked: 0,
            blocked: Vec::new(),
            table_size: 4096,
            goaway: None,
            server: None,
        }
    }

    /// May a new stream be opened now: the server's SETTINGS came, its stream limit is not reached, no
    /// GOAWAY, stream ids left.
    #[inline]
    pub fn can_open(&self) -> bool {
        self.settings_seen
            && self.goaway.is_none()
            && self.streams.len() < self.max_streams
            && self.next_id < (1 << 31)
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE (4096 until it says otherwise).
    #[inline]
    pub fn header_table_size(&self) -> usize {
        self.table_size
    }

    /// The connection will take no new stream (GOAWAY, or out of ids) and has none left: drop it.
    #[inline]
    pub fn finished(&self) -> bool {
        (self.goaway.is_some() || self.next_id >= (1 << 31)) && self.streams.is_empty()
    }

    /// Opens a stream for `client` with the encoded header `block` and an optional `body`; returns its id.
    /// The caller checks [`Conn::can_open`] first.
    /// `head_request`: the method is HEAD, so the response's content-length describes no body.
    pub fn open(
        &mut self,
        client: usize,
        block: &[u8],
        body: Option<&Bytes>,
        head_request: bool,
    ) -> u32 {
        let id = self.next_id;
        self.next_id += 2;
        let end = if body.is_none() { END_STREAM } else { 0 };
        let mut rest = block;
        let first = rest.len().min(self.max_frame);
        let flags = end | if first == rest.len() { END_HEADERS } else { 0 };
        head(&mut self.out, first, HEADERS, flags, id);
        self.out.extend_from_slice(&rest[..first]);
        rest = &rest[first..];
        while !rest.is_empty() {
            let n = rest.len().min(self.max_frame);
            let flags = if n == rest.len() { END_HEADERS } else { 0 };
            head(&mut self.out, n, CONTINUATION, flags, id);
            self.out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
        self.streams.insert(
            id,
            Stream {
                client,
                send_window: self.peer_initial,
                recv_window: self.stream_window as i64,
                unacked: 0,
                body: body.map(|b| (b.clone(), 0)),
                head: false,
                check_length: !head_request,
                content_length: None,
                received: 0,
                informational: 0,
            },
        );
        if body.is_some() {
            self.send_body(id);
        }
        id
    }

    /// Resets stream `id` (CANCEL) if it is still open: the request timed out. (Not counted as an answer:
    /// our own timeouts are bounded by our streams.)
    pub fn cancel(&mut self, id: u32) {
        if self.streams.remove(&id).is_some() {
            head(&mut self.out, 4, RST_STREAM, 0, id);
            self.out.extend_from_slice(&CANCEL.to_be_bytes());
        }
    }

    /// Resets stream `id` for what the server sent on it: an answer, counted.
    fn rst(&mut self, id: u32, code: u32) -> Result<(), ConnError> {
        self.answer()?;
        head(&mut self.out, 4, RST_STREAM, 0, id);
        self.out.extend_from_slice(&code.to_be_bytes());
        self.answered();
        Ok(())
    }

    /// Before queuing an answer to the server: refused when [`MAX_CONTROL_QUEUED`] already wait unwritten.
    fn answer(&self) -> Result<(), ConnError> {
        if self.control.len() >= MAX_CONTROL_QUEUED {
            return err(
                ENHANCE_YOUR_CALM,
                format!(
                    "the server floods the connection: {MAX_CONTROL_QUEUED} PING/SETTINGS acknowledgements \
                     and RST_STREAMs wait unwritten while it sends more and reads none (limit {MAX_CONTROL_QUEUED})"
                ),
            );
        }
        Ok(())
    }

    /// An answer was queued: it ends where `out` ends now.
    fn answered(&mut self) {
        self.control.push_back(self.out.len());
    }

    /// The bytes queued to write, in order: the driver writes them and says how far with [`Conn::written`].
    #[inline]
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// The `server` field of the first response that had one.
    #[inline]
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// The answers queued and not yet written.
    #[cfg(test)]
    pub(crate) fn answers_queued(&self) -> usize {
        self.control.len()
    }

    /// The driver has written `out[..written]`: the answers in it no longer count. When all of `out` is
    /// written it is emptied and true returned (the driver's count starts again from 0).
    #[inline]
    pub fn written(&mut self, written: usize) -> bool {
        while self.control.front().is_some_and(|&end| end <= written) {
            self.control.pop_front();
        }
        if written >= self.out.len() {
            self.out.clear();
            self.control.clear();
            return true;
        }
        false
    }

    /// Queues GOAWAY for a connection error (best effort: the connection is dropped after it).
    pub fn goaway(&mut self, code: u32) {
        head(&mut self.out, 8, GOAWAY, 0, 0);
        self.out.extend_from_slice(&0u32.to_be_bytes());
        self.out.extend_from_slice(&code.to_be_bytes());
    }

    /// Free space to read into (at least one frame's worth).
    #[inline]
    pub fn input(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.inbuf.len() - self.end < OUR_MAX_FRAME + 9 {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.inbuf[self.end..]
    }

    /// `n` bytes were read into [`Conn::input`]: parses the complete frames among what was received,
    /// pushing what they say about streams to `ev`.
    #[inline]
    pub fn received(&mut self, n: usize, ev: &mut Vec<Event>) -> Result<(), ConnError> {
        self.end += n;
        loop {
            let avail = self.end - self.start;
            let Some(Head {
                len,
                kind,
                flags,
                stream: id,
            }) = Head::parse(&self.inbuf[self.start..self.end])
            else {
                return Ok(());
            };
            if len > OUR_MAX_FRAME {
                return err(
                    FRAME_SIZE_ERROR,
                    format!("a frame of {len} bytes (limit {OUR_MAX_FRAME})"),
                );
            }
            if avail < HEAD_LEN + len {
                return Ok(());
            }
            let (a, b) = (self.start + HEAD_LEN, self.start + HEAD_LEN + len);
            self.start = b;
            // the payload is copied out of the input buffer only for header blocks; others are read in place
            let payload = std::mem::take(&mut self.inbuf);
            let r = self.frame(kind, flags, id, &payload[a..b], ev);
            self.inbuf = payload;
            r?;
        }
    }

    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        id: u32,
        p: &[u8],
        ev: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        if let Some(part) = &mut self.partial {
            if kind != CONTINUATION || id != part.stream {
                return err(PROTOCOL_ERROR, "a frame inside a header block");
            }
            part.continuations += 1;
            if part.continuations > MAX_CONTINUATIONS {
                return err(
                    ENHANCE_YOUR_CALM,
                    format!("a header block in more than {MAX_CONTINUATIONS} CONTINUATION frames"),
                );
            }
            if part.block.len() + p.len() > MAX_HEADER_BLOCK {
                return err(
                    ENHANCE_YOUR_CALM,
                    format!("a header block over {} KiB", MAX_HEADER_BLOCK / 1024),
                );
            }
            part.block.extend_from_slice(p);
            if flags & END_HEADERS != 0 {
                let part = self.partial.take().expect("checked above");
                self.headers(part.stream, &part.block, part.end_stream, ev)?;
            }
            return Ok(());
        }
        match kind {
            DATA => self.data(flags, id, p, ev),
            HEADERS => {
                if id == 0 {
                    return err(PROTOCOL_ERROR, "HEADERS on stream 0");
                }
                let mut p = unpad(flags, p)?;
                if flags & PRIORITY_FLAG != 0 {
                    if p.len() < 5 {
                        return err(FRAME_SIZE_ERROR, "HEADERS too short for its priority");
                    }
                    p = &p[5..];
                }
                if flags & END_HEADERS != 0 {
                    let mut block = std::mem::take(&mut self.block);
                    block.clear();
                    block.extend_from_slice(p);
                    let r = self.headers(id, &block, flags & END_STREAM != 0, ev);
                    self.block = block;
                    r
                } else {
                    self.partial = Some(Partial {
                        stream: id,
                        end_stream: flags & END_STREAM != 0,
                        block: p.to_vec(),
                        continuations: 0,
                    });
                    Ok(())
                }
            }
            PRIORITY => {
                if id == 0 {
                    return err(PROTOCOL_ERROR, "PRIORITY on stream 0");
                }
                if p.len() != 5 {
                    return err(FRAME_SIZE_ERROR, "PRIORITY not of 5 bytes");
                }
                Ok(())
            }
            RST_STREAM => {
                if id == 0 {
                    return err(PROTOCOL_ERROR, "RST_STREAM on stream 0");
                }
                if p.len() != 4 {
                    return err(FRAME_SIZE_ERROR, "RST_STREAM not of 4 bytes");
                }
                self.check_id(id)?;
                if let Some(s) = self.streams.remove(&id) {
                    let why = if be32(p) == REFUSED_STREAM {
                        StreamFail::Refused
                    } else {
                        StreamFail::Reset
                    };
                    ev.push(Event::Failed {
                        client: s.client,
                        why,
                    });
                }
                Ok(())
            }
            SETTINGS => self.settings(flags, id, p),
            PUSH_PROMISE => err(PROTOCOL_ERROR, "PUSH_PROMISE with push disabled"),
            PING => {
                if id != 0 {
                    return err(PROTOCOL_ERROR, "PING on a stream");
                }
                if p.len() != 8 {
                    return err(FRAME_SIZE_ERROR, "PING not of 8 bytes");
                }
                if flags & ACK == 0 {
                    self.answer()?;
                    head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(p);
                    self.answered();
                }
                Ok(())
            }
            GOAWAY => {
                if id != 0 {
                    return err(PROTOCOL_ERROR, "GOAWAY on a stream");
                }
                if p.len() < 8 {
                    return err(FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
                }
                let last = be32(p) & 0x7fff_ffff;
                self.goaway = Some(self.goaway.map_or(last, |g| g.min(last)));
                let mut above: Vec<u32> =
                    self.streams.keys().copied().filter(|&s| s > last).collect();
                above.sort_unstable();
                for s in above {
                    if let Some(st) = self.streams.remove(&s) {
                        ev.push(Event::Failed {
                            client: st.client,
                            why: StreamFail::Refused,
                        });
                    }
                }
                Ok(())
            }
            WINDOW_UPDATE => {
                if p.len() != 4 {
                    return err(FRAME_SIZE_ERROR, "WINDOW_UPDATE not of 4 bytes");
                }
                let inc = (be32(p) & 0x7fff_ffff) as i64;
                if id == 0 {
                    if inc == 0 {
                        return err(PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0");
                    }
                    self.send_window += inc;
                    if self.send_window > MAX_WINDOW {
                        return err(FLOW_CONTROL_ERROR, "connection send window past 2^31-1");
                    }
                    self.unblock();
                    return Ok(());
                }
                self.check_id(id)?;
                let Some(s) = self.streams.get_mut(&id) else {
                    return Ok(());
                };
                s.send_window += inc;
                if inc == 0 || s.send_window > MAX_WINDOW {
                    let client = s.client;
                    self.streams.remove(&id);
                    let code = if inc == 0 {
                        PROTOCOL_ERROR
                    } else {
                        FLOW_CONTROL_ERROR
                    };
                    self.rst(id, code)?;
                    ev.push(Event::Failed {
                        client,
                        why: StreamFail::Reset,
                    });
                    return Ok(());
                }
                self.unblock();
                Ok(())
            }
            CONTINUATION => err(PROTOCOL_ERROR, "CONTINUATION without HEADERS"),
            // unknown frame types are ignored (RFC 9113 §4.1)
            _ => Ok(()),
        }
    }

    /// A stream id the server may talk about: one of ours that we opened.
    fn check_id(&self, id: u32) -> Result<(), ConnError> {
        if id % 2 == 0 || id >= self.next_id {
            return err(
                PROTOCOL_ERROR,
                format!("a frame on stream {id}, which was never opened"),
            );
        }
        Ok(())
    }

    fn data(&mut self, flags: u8, id: u32, p: &[u8], ev: &mut Vec<Event>) -> Result<(), ConnError> {
        if id == 0 {
            return err(PROTOCOL_ERROR, "DATA on stream 0");
        }
        self.check_id(id)?;
        // flow control counts the whole payload, padding included
        let n = p.len();
        self.recv_window -= n as i64;
        if self.recv_window < 0 {
            return err(FLOW_CONTROL_ERROR, "DATA past the connection window");
        }
        self.unacked += n as u32;
        if self.unacked >= self.conn_window / 2 {
            head(&mut self.out, 4, WINDOW_UPDATE, 0, 0);
            self.out.extend_from_slice(&self.unacked.to_be_bytes());
            self.recv_window += self.unacked as i64;
            self.unacked = 0;
        }
        let body = unpad(flags, p)?;
        let end = flags & END_STREAM != 0;
        let Some(s) = self.streams.get_mut(&id) else {
            // a stream we reset (timeout): its bytes only count for the connection
            return Ok(());
        };
        s.recv_window -= n as i64;
        if s.recv_window < 0 {
            return err(
                FLOW_CONTROL_ERROR,
                format!("DATA past stream {id}'s window"),
            );
        }
        let client = s.client;
        if !s.head {
            self.streams.remove(&id);
            self.rst(id, PROTOCOL_ERROR)?;
            ev.push(Event::Failed {
                client,
                why: StreamFail::Reset,
            });
            return Ok(());
        }
        s.received += body.len() as u64;
        if !body.is_empty() {
            ev.push(Event::Data {
                client,
                len: body.len(),
            });
        }
        if end {
            let s = self.streams.remove(&id).expect("looked up above");
            self.end_of(s, ev);
            return Ok(());
        }
        s.unacked += n as u32;
        if s.unacked >= self.stream_window / 2 {
            let u = s.unacked;
            s.recv_window += u as i64;
            s.unacked = 0;
            head(&mut self.out, 4, WINDOW_UPDATE, 0, id);
            self.out.extend_from_slice(&u.to_be_bytes());
        }
        Ok(())
    }

    /// Stream `s` ended: complete, unless its body disagrees with its content-length.
    fn end_of(&mut self, s: Stream, ev: &mut Vec<Event>) {
        if s.content_length.is_some_and(|cl| cl != s.received) {
            ev.push(Event::Failed {
                client: s.client,
                why: StreamFail::Reset,
            });
        } else {
            ev.push(Event::End { client: s.client });
        }
    }

    /// A complete header block on stream `id`: decoded (always: the compression state is the
    /// connection's), then the response head or trailers of the stream if it is still open.
    fn headers(
        &mut self,
        id: u32,
        block: &[u8],
        end: bool,
        ev: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        self.check_id(id)?;
        let mut status: Option<u16> = None;
        let mut bad = false;
        let mut fields = 0u64;
        let mut content_length: Option<u64> = None;
        let want_server = self.server.is_none();
        let mut server = None;
        let mut list = 0usize;
        let r = self.hpack.decode(block, |name, value| {
            list += name.len() + value.len() + 32;
            if name.first() == Some(&b':') {
                if name == b":status" && status.is_none() && value.len() == 3 {
                    match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                        Some(v) if (100..1000).contains(&v) => status = Some(v),
                        _ => bad = true,
                    }
                } else {
                    bad = true;
                }
                return;
            }
            fields += (name.len() + value.len() + 4) as u64;
            if name == b"content-length" {
                match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    Some(v) => content_length = Some(v),
                    None => bad = true,
                }
            } else if want_server && name == b"server" {
                server = Some(String::from_utf8_lossy(value).into_owned());
            }
        });
        if let Err(e) = r {
            return err(COMPRESSION_ERROR, e.to_string());
        }
        if list > MAX_HEADER_LIST {
            return err(
                ENHANCE_YOUR_CALM,
                format!(
                    "a header list that decodes past {} KiB (SETTINGS_MAX_HEADER_LIST_SIZE): an HPACK bomb",
                    MAX_HEADER_LIST / 1024
                ),
            );
        }
        if server.is_some() {
            self.server = server;
        }
        let Some(s) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        let client = s.client;
        if s.head {
            // trailers: they end the stream
            if !end || status.is_some() {
                self.streams.remove(&id);
                self.rst(id, PROTOCOL_ERROR)?;
                ev.push(Event::Failed {
                    client,
                    why: StreamFail::Reset,
                });
                return Ok(());
            }
            let s = self.streams.remove(&id).expect("looked up above");
            self.end_of(s, ev);
            return Ok(());
        }
        match status {
            Some(st) if !bad => {
                if st < 200 {
                    // informational: the final head follows
                    s.informational += 1;
                    if s.informational > MAX_INFORMATIONAL {
                        return err(
                            PROTOCOL_ERROR,
                            format!(
                                "more than {MAX_INFORMATIONAL} informational (1xx) responses on one stream"
                            ),
                        );
                    }
                    if end {
                        self.streams.remove(&id);
                        ev.push(Event::Failed {
                            client,
                            why: StreamFail::Reset,
                        });
                    }
                    return Ok(());
                }
                s.head = true;
                s.content_length = content_length.filter(|_| s.check_length);
                ev.push(Event::Head {
                    client,
                    status: st,
                    head_bytes: "HTTP/1.1 200 OK\r\n".len() as u64 + fields + 2,
                    end,
                });
                if end {
                    let s = self.streams.remove(&id).expect("looked up above");
                    if s.content_length.is_some_and(|cl| cl != 0) {
                        ev.pop();
                        ev.push(Event::Failed {
                            client,
                            why: StreamFail::Reset,
                        });
                    }
                }
                Ok(())
            }
            _ => {
                self.streams.remove(&id);
                self.rst(id, PROTOCOL_ERROR)?;
                ev.push(Event::Failed {
                    client,
                    why: StreamFail::Reset,
                });
                Ok(())
            }
        }
    }

    fn settings(&mut self, flags: u8, id: u32, p: &[u8]) -> Result<(), ConnError> {
        if id != 0 {
            return err(PROTOCOL_ERROR, "SETTINGS on a stream");
        }
        if flags & ACK != 0 {
            if !p.is_empty() {
                return err(FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
            }
            return Ok(());
        }
        if p.len() % 6 != 0 {
            return err(FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes");
        }
        for s in p.chunks_exact(6) {
            let key = u16::from_be_bytes([s[0], s[1]]);
            let v = be32(&s[2..6]);
            match key {
                1 => self.table_size = v as usize,
                3 => self.max_streams = v as usize,
                4 => {
                    if v as i64 > MAX_WINDOW {
                        return err(
                            FLOW_CONTROL_ERROR,
                            "SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1",
                        );
                    }
                    let delta = v as i64 - self.peer_initial;
                    self.peer_initial = v as i64;
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > MAX_WINDOW {
                            return err(FLOW_CONTROL_ERROR, "a stream's send window past 2^31-1");
                        }
                    }
                }
                5 => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return err(PROTOCOL_ERROR, format!("SETTINGS_MAX_FRAME_SIZE of {v}"));
                    }
                    self.max_frame = v as usize;
                }
                _ => {}
            }
        }
        self.answer()?;
        head(&mut self.out, 0, SETTINGS, ACK, 0);
        self.answered();
        self.settings_seen = true;
        self.unblock();
        Ok(())
    }

    /// Sends what the windows allow of every stream's waiting body.
    fn unblock(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let blocked = std::mem::take(&mut self.blocked);
        for id in blocked {
            self.send_body(id);
        }
    }

    /// Sends what the windows allow of stream `id`'s body (END_STREAM with its last byte); the rest waits
    /// in `blocked` for WINDOW_UPDATE or SETTINGS.
    fn send_body(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let Some((body, mut off)) = s.body.take() else {
            return;
        };
        loop {
            let left = body.len() - off;
            let n = (left as i64)
                .min(s.send_window)
                .min(self.send_window)
                .min(self.max_frame as i64)
                .max(0) as usize;
            if n == 0 && left > 0 {
                s.body = Some((body, off));
                self.blocked.push(id);
                return;
            }
            let last = n == left;
            head(
                &mut self.out,
                n,
                DATA,
                if last { END_STREAM } else { 0 },
                id,
            );
            self.out.extend_from_slice(&body[off..off + n]);
            off += n;
            s.send_window -= n as i64;
            self.send_window -= n as i64;
            if last {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, id: u32, p: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        head(&mut out, p.len(), kind, flags, id);
        out.extend_from_slice(p);
        out
    }

    fn feed(c: &mut Conn, bytes: &[u8]) -> Result<Vec<Event>, ConnError> {
        let mut ev = Vec::new();
        // in pieces of 7 bytes: frames split across reads are put together
        for piece in bytes.chunks(7) {
            c.input()[..piece.len()].copy_from_slice(piece);
            c.received(piece.len(), &mut ev)?;
        }
        Ok(ev)
    }

    /// The frames queued in `out` since the last call, as (type, flags, stream, payload).
    fn sent(c: &mut Conn) -> Vec<(u8, u8, u32, Vec<u8>)> {
        // (all written: as the driver's written() does)
        c.control.clear();
        let mut b = std::mem::take(&mut c.out);
        let mut b = &mut b[..];
        if b.starts_with(PREFACE) {
            b = &mut b[PREFACE.len()..];
        }
        let mut out = Vec::new();
        while b.len() >= 9 {
            let len = (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize;
            out.push((b[3], b[4], be32(&b[5..9]), b[9..9 + len].to_vec()));
            b = &mut b[9 + len..];
        }
        assert!(b.is_empty());
        out
    }

    fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for &(k, v) in pairs {
            p.extend_from_slice(&k.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        frame(SETTINGS, 0, 0, &p)
    }

    /// A connection past the handshake (the server's SETTINGS `pairs` acknowledged), output drained.
    fn ready(pairs: &[(u16, u32)]) -> Conn {
        let mut c = Conn::new(1 << 20, 1 << 20);
        assert!(!c.can_open(), "no stream before the server's SETTINGS");
        assert!(feed(&mut c, &settings(pairs)).unwrap().is_empty());
        sent(&mut c);
        assert!(c.can_open());
        c
    }

    // :status 200 (static index 8), then content-length: 5 as a literal with an indexed name
    const HEAD_200_CL5: &[u8] = &[0x88, 0x0f, 0x0d, 0x01, b'5'];

    #[test]
    fn preface_settings_and_window_go_out_first() {
        let mut c = Conn::new(1000, 1 << 20);
        assert!(c.out.starts_with(PREFACE));
        let f = sent(&mut c);
        assert_eq!(f[0].0, SETTINGS);
        assert_eq!(
            f[0].3,
            vec![0, 2, 0, 0, 0, 0, 0, 4, 0, 0, 0x03, 0xe8, 0, 6, 0, 4, 0, 0]
        );
        assert_eq!(
            f[1],
            (
                WINDOW_UPDATE,
                0,
                0,
                ((1u32 << 20) - 65_535).to_be_bytes().to_vec()
            )
        );
        // the server's SETTINGS are acknowledged; its ACK of ours needs nothing
        assert_eq!(c.header_table_size(), 4096);
        feed(&mut c, &settings(&[(3, 10), (1, 100)])).unwrap();
        assert_eq!(c.header_table_size(), 100);
        feed(&mut c, &frame(SETTINGS, ACK, 0, &[])).unwrap();
        assert_eq!(sent(&mut c), vec![(SETTINGS, ACK, 0, vec![])]);
    }

    #[test]
    fn a_response_in_headers_and_data() {
        let mut c = ready(&[]);
        let id = c.open(7, &[0x82], None, false);
        assert_eq!(id, 1);
        assert_eq!(
            sent(&mut c),
            vec![(HEADERS, END_STREAM | END_HEADERS, 1, vec![0x82])]
        );
        let mut bytes = frame(HEADERS, END_HEADERS, 1, HEAD_200_CL5);
        bytes.extend(frame(DATA, 0, 1, b"abc"));
        bytes.extend(frame(
            DATA,
            END_STREAM | PADDED,
            1,
            &[3, b'd', b'e', 0, 0, 0],
        ));
        let ev = feed(&mut c, &bytes).unwrap();
        let head_bytes = ("HTTP/1.1 200 OK\r\n".len() + "content-length".len() + 1 + 4 + 2) as u64;
        assert_eq!(
            ev,
            vec![
                Event::Head {
                    client: 7,
                    status: 200,
                    head_bytes,
                    end: false
                },
                Event::Data { client: 7, len: 3 },
                Event::Data { client: 7, len: 2 },
                Event::End { client: 7 },
            ]
        );
        assert!(c.streams.is_empty());
        // a body unlike its content-length fails the stream
        c.open(1, &[0x82], None, false);
        let mut bytes = frame(HEADERS, END_HEADERS, 3, HEAD_200_CL5);
        bytes.extend(frame(DATA, END_STREAM, 3, b"abcdef"));
        let ev = feed(&mut c, &bytes).unwrap();
        assert_eq!(
            ev[2],
            Event::Failed {
                client: 1,
                why: StreamFail::Reset
            }
        );
    }

    #[test]
    fn continuation_completes_a_header_block_and_nothing_may_come_between() {
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let mut bytes = frame(HEADERS, PRIORITY_FLAG, 1, &[0, 0, 0, 0, 16, 0x88]);
        bytes.extend(frame(CONTINUATION, 0, 1, &[0x0f, 0x0d]));
        bytes.extend(frame(
            CONTINUATION,
            END_HEADERS | END_STREAM,
            1,
            &[0x01, b'0'],
        ));
        let ev = feed(&mut c, &bytes).unwrap();
        assert!(
            matches!(
                ev[0],
                Event::Head {
                    status: 200,
                    end: false,
                    ..
                }
            ),
            "{ev:?}"
        );
        // (END_STREAM belongs on HEADERS: on CONTINUATION it is ignored)
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let mut bytes = frame(HEADERS, 0, 1, &[0x88]);
        bytes.extend(frame(PING, 0, 0, &[0; 8]));
        assert_eq!(feed(&mut c, &bytes).unwrap_err().code, PROTOCOL_ERROR);
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let e = feed(&mut c, &frame(CONTINUATION, END_HEADERS, 1, &[0x88])).unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR);
        assert!(e.reason.contains("CONTINUATION without HEADERS"), "{e:?}");
    }

    #[test]
    fn large_request_header_blocks_are_split_by_the_frame_size() {
        let mut c = ready(&[]);
        let block = vec![0x82u8; 40_000];
        c.open(0, &block, None, false);
        let f = sent(&mut c);
        let kinds: Vec<(u8, u8, usize)> = f.iter().map(|f| (f.0, f.1, f.3.len())).collect();
        assert_eq!(
            kinds,
            vec![
                (HEADERS, END_STREAM, 16_384),
                (CONTINUATION, 0, 16_384),
                (CONTINUATION, END_HEADERS, 40_000 - 2 * 16_384)
            ]
        );
    }

    #[test]
    fn malformed_frames_fail_the_connection_and_unknown_ones_are_ignored() {
        let cases: Vec<(Vec<u8>, u32)> = vec![
            (frame(PING, 0, 0, &[0; 7]), FRAME_SIZE_ERROR),
            (frame(PING, 0, 1, &[0; 8]), PROTOCOL_ERROR),
            (frame(SETTINGS, 0, 0, &[0; 5]), FRAME_SIZE_ERROR),
            (frame(SETTINGS, ACK, 0, &[0; 6]), FRAME_SIZE_ERROR),
            (frame(WINDOW_UPDATE, 0, 0, &[0; 3]), FRAME_SIZE_ERROR),
            (frame(WINDOW_UPDATE, 0, 0, &[0; 4]), PROTOCOL_ERROR),
            (frame(RST_STREAM, 0, 1, &[0; 3]), FRAME_SIZE_ERROR),
            (frame(GOAWAY, 0, 0, &[0; 7]), FRAME_SIZE_ERROR),
            (frame(PRIORITY, 0, 1, &[0; 4]), FRAME_SIZE_ERROR),
            (frame(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
            (frame(DATA, 0, 9, b"x"), PROTOCOL_ERROR),
            (frame(DATA, PADDED, 1, &[5, b'x']), PROTOCOL_ERROR),
            (frame(HEADERS, END_HEADERS, 2, &[0x88]), PROTOCOL_ERROR),
            (frame(HEADERS, END_HEADERS, 1, &[0x80]), COMPRESSION_ERROR),
            (
                frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x82]),
                PROTOCOL_ERROR,
            ),
            (settings(&[(5, 100)]), PROTOCOL_ERROR),
            (settings(&[(4, 1 << 31)]), FLOW_CONTROL_ERROR),
            (
                frame(DATA, 0, 1, &vec![0u8; OUR_MAX_FRAME + 1]),
                FRAME_SIZE_ERROR,
            ),
        ];
        for (bytes, code) in cases {
            let mut c = ready(&[]);
            c.open(0, &[0x82], None, false);
            let e = feed(&mut c, &bytes).unwrap_err();
            assert_eq!(e.code, code, "{bytes:?}: {e:?}");
        }
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        sent(&mut c);
        let mut bytes = frame(0x20, 0xff, 1, b"whatever");
        bytes.extend(frame(0x0b, 0, 0, b""));
        assert!(feed(&mut c, &bytes).unwrap().is_empty());
        assert!(sent(&mut c).is_empty());
    }

    #[test]
    fn ping_is_answered() {
        let mut c = ready(&[]);
        feed(&mut c, &frame(PING, 0, 0, b"12345678")).unwrap();
        feed(&mut c, &frame(PING, ACK, 0, b"abcdefgh")).unwrap();
        assert_eq!(sent(&mut c), vec![(PING, ACK, 0, b"12345678".to_vec())]);
    }

    #[test]
    fn streams_stay_within_the_servers_limit() {
        let mut c = ready(&[(3, 2)]);
        c.open(0, &[0x82], None, false);
        c.open(1, &[0x82], None, false);
        assert!(!c.can_open());
        feed(
            &mut c,
            &frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x88]),
        )
        .unwrap();
        assert!(c.can_open());
    }

    #[test]
    fn reset_streams_fail_alone() {
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        c.open(1, &[0x82], None, false);
        let mut bytes = frame(RST_STREAM, 0, 1, &2u32.to_be_bytes());
        bytes.extend(frame(RST_STREAM, 0, 3, &REFUSED_STREAM.to_be_bytes()));
        let ev = feed(&mut c, &bytes).unwrap();
        assert_eq!(
            ev,
            vec![
                Event::Failed {
                    client: 0,
                    why: StreamFail::Reset
                },
                Event::Failed {
                    client: 1,
                    why: StreamFail::Refused
                },
            ]
        );
        assert!(c.can_open());
        // frames on the reset stream are ignored, but its header block is still decoded
        let ev = feed(
            &mut c,
            &frame(HEADERS, END_HEADERS, 1, &[0x48, 0x03, b'2', b'9', b'9']),
        )
        .unwrap();
        assert!(ev.is_empty());
        c.open(2, &[0x82], None, false);
        let ev = feed(
            &mut c,
            &frame(HEADERS, END_HEADERS | END_STREAM, 5, &[0xbe]),
        )
        .unwrap();
        assert_eq!(
            ev,
            vec![Event::Head {
                client: 2,
                status: 299,
                head_bytes: 19,
                end: true
            }]
        );
        // a cancelled stream sends RST_STREAM (CANCEL) once
        sent(&mut c);
        c.open(3, &[0x82], None, false);
        sent(&mut c);
        c.cancel(7);
        c.cancel(7);
        assert_eq!(
            sent(&mut c),
            vec![(RST_STREAM, 0, 7, CANCEL.to_be_bytes().to_vec())]
        );
    }

    #[test]
    fn goaway_refuses_the_streams_above_its_last_and_lets_the_others_finish() {
        let mut c = ready(&[]);
        for client in 0..3 {
            c.open(client, &[0x82], None, false);
        }
        let mut p = 3u32.to_be_bytes().to_vec();
        p.extend_from_slice(&0u32.to_be_bytes());
        let ev = feed(&mut c, &frame(GOAWAY, 0, 0, &p)).unwrap();
        assert_eq!(
            ev,
            vec![Event::Failed {
                client: 2,
                why: StreamFail::Refused
            }]
        );
        assert!(!c.can_open());
        assert!(!c.finished());
        let mut bytes = frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x88]);
        bytes.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &[0x88]));
        let ev = feed(&mut c, &bytes).unwrap();
        assert_eq!(ev.len(), 2);
        assert!(c.finished());
    }

    #[test]
    fn receive_credit_is_handed_back_in_batches() {
        // 100 bytes per stream, 65535 for the connection
        let mut c = Conn::new(100, 65_535);
        let f = sent(&mut c);
        assert_eq!(
            f.len(),
            1,
            "no connection WINDOW_UPDATE at the default size"
        );
        feed(&mut c, &settings(&[])).unwrap();
        sent(&mut c);
        c.open(0, &[0x82], None, false);
        sent(&mut c);
        feed(&mut c, &frame(HEADERS, END_HEADERS, 1, &[0x88])).unwrap();
        feed(&mut c, &frame(DATA, 0, 1, &[0; 40])).unwrap();
        assert!(
            sent(&mut c).is_empty(),
            "under half the window: nothing yet"
        );
        feed(&mut c, &frame(DATA, 0, 1, &[0; 20])).unwrap();
        assert_eq!(
            sent(&mut c),
            vec![(WINDOW_UPDATE, 0, 1, 60u32.to_be_bytes().to_vec())]
        );
        // 100 more fit (40 left + the 60 handed back); 101 would not
        feed(&mut c, &frame(DATA, 0, 1, &[0; 90])).unwrap();
        assert_eq!(
            sent(&mut c),
            vec![(WINDOW_UPDATE, 0, 1, 90u32.to_be_bytes().to_vec())]
        );
        let e = feed(&mut c, &frame(DATA, 0, 1, &[0; 101])).unwrap_err();
        assert_eq!(e.code, FLOW_CONTROL_ERROR);
        // the connection's window: credit once half of it is used
        let mut c = Conn::new(1 << 20, 65_535);
        feed(&mut c, &settings(&[])).unwrap();
        c.open(0, &[0x82], None, false);
        feed(&mut c, &frame(HEADERS, END_HEADERS, 1, &[0x88])).unwrap();
        sent(&mut c);
        for _ in 0..3 {
            feed(&mut c, &frame(DATA, 0, 1, &[0; 10_000])).unwrap();
        }
        assert!(sent(&mut c).is_empty());
        feed(&mut c, &frame(DATA, 0, 1, &[0; 10_000])).unwrap();
        assert_eq!(
            sent(&mut c),
            vec![(WINDOW_UPDATE, 0, 0, 40_000u32.to_be_bytes().to_vec())]
        );
    }

    #[test]
    fn request_bodies_wait_for_the_servers_windows() {
        // the server allows 10 bytes per stream
        let mut c = ready(&[(4, 10)]);
        let body = Bytes::from_static(b"0123456789abcdefghijKLMNO");
        c.open(0, &[0x83], Some(&body), false);
        assert_eq!(
            sent(&mut c),
            vec![
                (HEADERS, END_HEADERS, 1, vec![0x83]),
                (DATA, 0, 1, b"0123456789".to_vec())
            ]
        );
        feed(&mut c, &frame(WINDOW_UPDATE, 0, 1, &10u32.to_be_bytes())).unwrap();
        assert_eq!(sent(&mut c), vec![(DATA, 0, 1, b"abcdefghij".to_vec())]);
        // a larger initial window opens the rest (SETTINGS change every stream's window)
        feed(&mut c, &settings(&[(4, 100)])).unwrap();
        assert_eq!(
            sent(&mut c),
            vec![
                (SETTINGS, ACK, 0, vec![]),
                (DATA, END_STREAM, 1, b"KLMNO".to_vec())
            ]
        );
    }

    #[test]
    fn a_ping_or_settings_flood_is_bounded_and_fails_the_connection() {
        for flood in [frame(PING, 0, 0, b"floodfld"), settings(&[])] {
            let mut c = ready(&[]);
            // the driver writes nothing (the server reads nothing): the answers pile up to the bound
            for i in 0..MAX_CONTROL_QUEUED {
                feed(&mut c, &flood).unwrap_or_else(|e| panic!("answer {i}: {e:?}"));
                assert_eq!(c.answers_queued(), i + 1);
            }
            let out_len = c.out.len();
            let e = feed(&mut c, &flood).unwrap_err();
            assert_eq!(e.code, ENHANCE_YOUR_CALM);
            assert!(e.reason.contains("floods the connection"), "{e:?}");
            assert_eq!(
                c.answers_queued(),
                MAX_CONTROL_QUEUED,
                "never past the bound"
            );
            assert_eq!(c.out.len(), out_len, "the refused answer was not queued");
        }
        // answers that get written stop counting: a server that reads may ping for ever
        let mut c = ready(&[]);
        for _ in 0..3 * MAX_CONTROL_QUEUED {
            feed(&mut c, &frame(PING, 0, 0, b"12345678")).unwrap();
            // 17 bytes an answer: a partial write of the first leaves it counted
            assert!(!c.written(10));
            assert_eq!(c.answers_queued(), 1);
            assert!(c.written(c.out.len()));
            assert_eq!((c.answers_queued(), c.out.len()), (0, 0));
        }
        // RST_STREAMs the server provokes count too (DATA before a response head resets the stream)
        let mut c = ready(&[]);
        let mut failed = None;
        for i in 0..=MAX_CONTROL_QUEUED as u32 {
            let id = c.open(0, &[0x82], None, false);
            if let Err(e) = feed(&mut c, &frame(DATA, 0, id, b"x")) {
                failed = Some((i, e));
                break;
            }
        }
        let (i, e) = failed.expect("the bound holds for RST_STREAM");
        assert_eq!(
            (i as usize, e.code),
            (MAX_CONTROL_QUEUED, ENHANCE_YOUR_CALM)
        );
        // a timeout's CANCEL is ours, not an answer
        let mut c = ready(&[]);
        let id = c.open(0, &[0x82], None, false);
        c.cancel(id);
        assert_eq!(c.answers_queued(), 0);
    }

    #[test]
    fn endless_continuations_fail_the_connection() {
        // empty CONTINUATIONs: the count is the limit
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        feed(&mut c, &frame(HEADERS, 0, 1, &[0x88])).unwrap();
        for _ in 0..MAX_CONTINUATIONS {
            feed(&mut c, &frame(CONTINUATION, 0, 1, &[])).unwrap();
        }
        let e = feed(&mut c, &frame(CONTINUATION, 0, 1, &[])).unwrap_err();
        assert_eq!(e.code, ENHANCE_YOUR_CALM);
        assert!(
            e.reason.contains("more than 16 CONTINUATION frames"),
            "{e:?}"
        );
        // full ones: the block size is
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let full = vec![0u8; OUR_MAX_FRAME];
        feed(&mut c, &frame(HEADERS, 0, 1, &full)).unwrap();
        let mut n = 0;
        let e = loop {
            match feed(&mut c, &frame(CONTINUATION, 0, 1, &full)) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(n, MAX_HEADER_BLOCK / OUR_MAX_FRAME - 1);
        assert!(e.reason.contains("a header block over 256 KiB"), "{e:?}");
        // up to the limit a block completes
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let mut bytes = frame(HEADERS, 0, 1, &[0x88]);
        for _ in 0..MAX_CONTINUATIONS - 1 {
            bytes.extend(frame(CONTINUATION, 0, 1, &[]));
        }
        bytes.extend(frame(CONTINUATION, END_HEADERS, 1, &[]));
        let ev = feed(&mut c, &bytes).unwrap();
        assert!(matches!(ev[0], Event::Head { status: 200, .. }), "{ev:?}");
    }

    // :status 103 as a literal without indexing, the name from the static table (index 8)
    const HEAD_103: &[u8] = &[0x08, 0x03, b'1', b'0', b'3'];

    #[test]
    fn endless_informational_responses_fail_the_connection() {
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        for _ in 0..MAX_INFORMATIONAL {
            assert!(
                feed(&mut c, &frame(HEADERS, END_HEADERS, 1, HEAD_103))
                    .unwrap()
                    .is_empty()
            );
        }
        // the final response after as many as allowed is taken
        let ev = feed(
            &mut c,
            &frame(HEADERS, END_HEADERS | END_STREAM, 1, &[0x88]),
        )
        .unwrap();
        assert!(matches!(ev[0], Event::Head { status: 200, .. }), "{ev:?}");
        // one more is not
        c.open(0, &[0x82], None, false);
        for _ in 0..MAX_INFORMATIONAL {
            feed(&mut c, &frame(HEADERS, END_HEADERS, 3, HEAD_103)).unwrap();
        }
        let e = feed(&mut c, &frame(HEADERS, END_HEADERS, 3, HEAD_103)).unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR);
        assert!(e.reason.contains("more than 8 informational"), "{e:?}");
    }

    /// A header block that puts a 4000-byte field in the dynamic table and then refers to it `refs` times.
    fn hpack_bomb(refs: usize) -> Vec<u8> {
        let mut b = vec![0x88, 0x40, 6];
        b.extend_from_slice(b"x-bomb");
        // 4000 = 127 + 3873, a 7-bit prefix integer
        b.extend_from_slice(&[0x7f, 0x80 | (3873 & 0x7f) as u8, (3873 >> 7) as u8]);
        b.extend(std::iter::repeat_n(b'a', 4000));
        // index 62: the newest dynamic entry
        b.extend(std::iter::repeat_n(0xbe, refs));
        b
    }

    #[test]
    fn an_hpack_bomb_fails_the_connection() {
        // 4 KB + 10 references decode to 44 KB: a big but acceptable header list
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let ev = feed(
            &mut c,
            &frame(HEADERS, END_HEADERS | END_STREAM, 1, &hpack_bomb(10)),
        )
        .unwrap();
        assert!(matches!(ev[0], Event::Head { status: 200, .. }), "{ev:?}");
        // 4 KB + 70 references in a 4.1 KB block decode to 286 KB
        let mut c = ready(&[]);
        c.open(0, &[0x82], None, false);
        let block = hpack_bomb(70);
        assert!(block.len() < 4200);
        let e = feed(&mut c, &frame(HEADERS, END_HEADERS | END_STREAM, 1, &block)).unwrap_err();
        assert_eq!(e.code, ENHANCE_YOUR_CALM);
        assert!(e.reason.contains("HPACK bomb"), "{e:?}");
        // the limit is advertised
        let mut c = Conn::new(1000, 1 << 20);
        let f = sent(&mut c);
        assert!(f[0].3.ends_with(&[0, 6, 0, 4, 0, 0]));
        assert_eq!(MAX_HEADER_LIST, 0x4_0000);
    }
}
