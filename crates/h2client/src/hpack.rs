//! HPACK (RFC 7541) for the HTTP/2 client. Requests: each request's fields are known before the run (a
//! [`Template`] per request, numbered together by [`number`]), so a connection's first request of a template inserts its fields into the server's dynamic table (literals
//! with incremental indexing) and every later one is a block of table indices, built once and reused while
//! the table does not change (when the run's fields do not all fit in the table, a fixed block of static
//! indices and literals is sent instead). Responses are decoded with the full decoder (dynamic table with
//! eviction and size updates, Huffman strings) into a callback per field, without building a header map.

use std::collections::VecDeque;
use std::sync::OnceLock;

/// A header block that cannot be decoded: the connection fails (its compression state is lost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpackError(pub &'static str);

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad HPACK header block: {}", self.0)
    }
}

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Appends `v` with an `n`-bit prefix (RFC 7541 §5.1); `first` holds the bits above the prefix.
fn put_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a string literal without Huffman coding.
fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Encodes `fields` (names lower case, pseudo-headers first) as a header block without the dynamic table:
/// a field of the static table is indexed; a name of it is indexed with the value as a literal; any other
/// field is a literal without indexing. The block is the same for every request that sends these fields.
pub fn encode(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(name, value) in fields {
        if let Some(i) = STATIC
            .iter()
            .position(|&(n, v)| n.as_bytes() == name && v.as_bytes() == value)
        {
            put_int(&mut out, 0x80, 7, i + 1);
        } else if let Some(i) = STATIC.iter().position(|&(n, _)| n.as_bytes() == name) {
            put_int(&mut out, 0x00, 4, i + 1);
            put_str(&mut out, value);
        } else {
            out.push(0x00);
            put_str(&mut out, name);
            put_str(&mut out, value);
        }
    }
    out
}

/// One field of a request template, as the encoder needs it.
#[derive(Debug)]
pub(crate) struct Field {
    /// The same (name, value) has the same id in every template of the run.
    pub(crate) id: u32,
    /// Index in the static table of this name and value, or of this name.
    full: Option<usize>,
    name_index: Option<usize>,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Field {
    /// Its size in the dynamic table (RFC 7541 §4.1).
    pub(crate) fn size(&self) -> usize {
        self.name.len() + self.value.len() + 32
    }

    /// Its name and value.
    #[cfg(test)]
    pub(crate) fn pair(&self) -> (&[u8], &[u8]) {
        (&self.name, &self.value)
    }

    /// Whether it is sent by a static index (it never goes into the dynamic table).
    pub(crate) fn is_static(&self) -> bool {
        self.full.is_some()
    }
}

/// The fields of one request (names lower case, pseudo-headers first), and `fallback`: the block without
/// the dynamic table ([`encode`]).
#[derive(Debug)]
pub struct Template {
    /// Its number in the run (for the encoder's cache); set with the field ids by [`number`].
    pub(crate) index: usize,
    pub(crate) fields: Vec<Field>,
    fallback: Vec<u8>,
}

impl Template {
    /// The template of a request with `fields`; [`number`] numbers it with the run's others.
    pub fn new(fields: &[(&[u8], &[u8])]) -> Template {
        Template {
            index: 0,
            fields: fields
                .iter()
                .map(|&(name, value)| Field {
                    id: 0,
                    full: STATIC
                        .iter()
                        .position(|&(n, v)| n.as_bytes() == name && v.as_bytes() == value),
                    name_index: STATIC.iter().position(|&(n, _)| n.as_bytes() == name),
                    name: name.to_vec(),
                    value: value.to_vec(),
                })
                .collect(),
            fallback: encode(fields),
        }
    }
}

/// What the encoders of a run know of its templates, from [`number`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbering {
    /// The templates numbered.
    pub templates: usize,
    /// What their distinct fields that are not static take in a dynamic table together.
    pub table_total: usize,
}

/// Numbers a run's `templates` (0, 1, ... in order, for the encoder's cache of blocks) and gives every
/// distinct (name, value) among their fields one id (the encoder's model of the server's table holds ids).
pub fn number<'a>(templates: impl IntoIterator<Item = &'a mut Template>) -> Numbering {
    let mut ids: std::collections::HashMap<(Vec<u8>, Vec<u8>), u32> =
        std::collections::HashMap::new();
    let mut table_total = 0usize;
    let mut index = 0usize;
    for t in templates {
        t.index = index;
        index += 1;
        for f in &mut t.fields {
            let next = ids.len() as u32;
            f.id = *ids
                .entry((f.name.clone(), f.value.clone()))
                .or_insert_with(|| {
                    if !f.is_static() {
                        table_total += f.size();
                    }
                    next
                });
        }
    }
    Numbering {
        templates: index,
        table_total,
    }
}

/// The encoding side of one connection: a model of the server's dynamic table as our blocks filled it, and
/// per template the block of indices last built (valid while the table's version is the same).
#[derive(Debug)]
pub struct Encoder {
    /// (field id, size), newest first.
    table: VecDeque<(u32, usize)>,
    size: usize,
    max: usize,
    /// A size update owed at the start of the next block (the server lowered its table size).
    pending: Option<usize>,
    version: u64,
    cache: Vec<Option<(u64, Vec<u8>)>>,
    /// What the run's distinct dynamic fields take in a table: above `max`, the fallback blocks are sent.
    total: usize,
    scratch: Vec<u8>,
}

impl Encoder {
    /// An encoder for the templates [`number`] numbered.
    pub fn new(n: Numbering) -> Encoder {
        let Numbering {
            templates,
            table_total: total,
        } = n;
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max: 4096,
            pending: None,
            version: 0,
            cache: (0..templates).map(|_| None).collect(),
            total,
            scratch: Vec::new(),
        }
    }

    /// The server's SETTINGS_HEADER_TABLE_SIZE: below the table size in use, the table shrinks and the next
    /// block starts with a size update (RFC 7541 §4.2). (Above it, the table stays at its default 4096.)
    #[inline]
    pub fn limit(&mut self, n: usize) {
        if n < self.max {
            self.max = n;
            self.evict(0);
            self.version += 1;
            self.pending = Some(n);
        }
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((_, s)) => self.size -= s,
                None => break,
            }
        }
    }

    /// The header block for a request of template `t`.
    #[inline]
    pub fn encode<'a>(&'a mut self, t: &'a Template) -> &'a [u8] {
        let dynamic = self.total <= self.max;
        if self.pending.is_none() {
            if !dynamic {
                return &t.fallback;
            }
            if matches!(&self.cache[t.index], Some((v, _)) if *v == self.version) {
                return &self.cache[t.index].as_ref().expect("matched above").1;
            }
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        let mut steady = true;
        if let Some(n) = self.pending.take() {
            put_int(&mut out, 0x20, 5, n);
            steady = false;
        }
        if !dynamic {
            out.extend_from_slice(&t.fallback);
            self.scratch = out;
            return &self.scratch;
        }
        for f in &t.fields {
            if let Some(i) = f.full {
                put_int(&mut out, 0x80, 7, i + 1);
            } else if let Some(p) = self.table.iter().position(|&(id, _)| id == f.id) {
                put_int(&mut out, 0x80, 7, 62 + p);
            } else {
                // literal with incremental indexing: the server's table gets it, so will ours
                match f.name_index {
                    Some(i) => put_int(&mut out, 0x40, 6, i + 1),
                    None => {
                        out.push(0x40);
                        put_str(&mut out, &f.name);
                    }
                }
                put_str(&mut out, &f.value);
                let size = f.size();
                if size > self.max {
                    self.table.clear();
                    self.size = 0;
                } else {
                    self.evict(size);
                    self.table.push_front((f.id, size));
                    self.size += size;
                }
                self.version += 1;
                steady = false;
            }
        }
        if steady {
            // only indices into a table this block did not change: the same bytes until it changes
            self.cache[t.index] = Some((self.version, out));
            return &self.cache[t.index].as_ref().expect("just set").1;
        }
        self.scratch = out;
        &self.scratch
    }
}

/// A dynamic table entry: name and value in one allocation.
#[derive(Debug)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    /// Its size by RFC 7541 §4.1.
    fn size(&self) -> usize {
        self.bytes.len() + 32
    }
}

/// The decoding side of one connection: its dynamic table and scratch space for literals.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first.
    table: VecDeque<Entry>,
    size: usize,
    /// The table's maximum size as the last size update set it.
    max: usize,
    /// The most the encoder may set it to (our SETTINGS_HEADER_TABLE_SIZE).
    limit: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

/// Where a field's name or value is while it is handed to the callback.
#[derive(Clone, Copy)]
enum Src {
    Static(usize),
    Dynamic(usize),
    Scratch,
}

impl Decoder {
    /// A decoder whose table may hold up to `limit` octets (4096, the default, unless our SETTINGS say
    /// otherwise).
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: limit,
            limit,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Decodes one complete header block, calling `field(name, value)` for each field in order.
    pub fn decode(
        &mut self,
        mut b: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut fields = 0usize;
        while let Some(&first) = b.first() {
            if first & 0x80 != 0 {
                // indexed field
                let i = get_int(&mut b, 7)?;
                let src = self.lookup(i)?;
                let (n, v) = self.pair(src, src);
                field(n, v);
            } else if first & 0xe0 == 0x20 {
                // dynamic table size update: only before the first field
                let n = get_int(&mut b, 5)?;
                if fields > 0 {
                    return Err(HpackError("table size update after a field"));
                }
                if n > self.limit {
                    return Err(HpackError("table size update above the limit"));
                }
                self.max = n;
                self.evict(0);
                continue;
            } else {
                // literal: with incremental indexing (01), without (0000) or never indexed (0001)
                let index = first & 0xc0 == 0x40;
                let i = get_int(&mut b, if index { 6 } else { 4 })?;
                let name_src = if i == 0 {
                    get_str(&mut b, &mut self.name)?;
                    Src::Scratch
                } else {
                    self.lookup(i)?
                };
                get_str(&mut b, &mut self.value)?;
                if index {
                    let n = match name_src {
                        Src::Scratch => self.name.as_slice(),
                        other => self.pair(other, other).0,
                    };
                    let mut bytes = Vec::with_capacity(n.len() + self.value.len());
                    bytes.extend_from_slice(n);
                    bytes.extend_from_slice(&self.value);
                    let e = Entry {
                        bytes: bytes.into_boxed_slice(),
                        name_len: n.len(),
                    };
                    let (n, v) = (e.name(), e.value());
                    field(n, v);
                    self.insert(e);
                } else {
                    let (n, v) = self.pair(name_src, Src::Scratch);
                    field(n, v);
                }
            }
            fields += 1;
        }
        Ok(())
    }

    /// Index `i` (1-based, static then dynamic) or an error.
    fn lookup(&self, i: usize) -> Result<Src, HpackError> {
        match i {
            0 => Err(HpackError("index 0")),
            1..=61 => Ok(Src::Static(i - 1)),
            _ if i - 62 < self.table.len() => Ok(Src::Dynamic(i - 62)),
            _ => Err(HpackError("index past the table")),
        }
    }

    /// The name of `n` and the value of `v` (scratch: the name or value buffer).
    fn pair(&self, n: Src, v: Src) -> (&[u8], &[u8]) {
        let name = match n {
            Src::Static(i) => STATIC[i].0.as_bytes(),
            Src::Dynamic(i) => self.table[i].name(),
            Src::Scratch => &self.name,
        };
        let value = match v {
            Src::Static(i) => STATIC[i].1.as_bytes(),
            Src::Dynamic(i) => self.table[i].value(),
            Src::Scratch => &self.value,
        };
        (name, value)
    }

    /// Adds `e` at the front, evicting the oldest entries to make room (an entry larger than the table
    /// empties it and is not added, RFC 7541 §4.4).
    fn insert(&mut self, e: Entry) {
        let size = e.size();
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(e);
    }

    /// Evicts until `room` more octets fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some(e) => self.size -= e.size(),
                None => break,
            }
        }
    }

    /// (octets in the dynamic table, its maximum size as the last update set it).
    #[cfg(test)]
    pub(crate) fn table_size(&self) -> (usize, usize) {
        (self.size, self.max)
    }

    /// (entries, size) of the dynamic table.
    #[cfg(test)]
    fn table_state(&self) -> Vec<(String, String)> {
        self.table
            .iter()
            .map(|e| {
                (
                    String::from_utf8_lossy(e.name()).into_owned(),
                    String::from_utf8_lossy(e.value()).into_owned(),
                )
            })
            .collect()
    }
}

/// Reads an integer with an `n`-bit prefix.
fn get_int(b: &mut &[u8], n: u32) -> Result<usize, HpackError> {
    let max = (1usize << n) - 1;
    let (&first, rest) = b.split_first().ok_or(HpackError("truncated integer"))?;
    *b = rest;
    let mut v = first as usize & max;
    if v < max {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let (&c, rest) = b.split_first().ok_or(HpackError("truncated integer"))?;
        *b = rest;
        if shift > 21 {
            return Err(HpackError("integer too large"));
        }
        v += ((c & 0x7f) as usize) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// Reads a string literal (Huffman-coded or not) into `out`.
fn get_str(b: &mut &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huffman = b.first().is_some_and(|&c| c & 0x80 != 0);
    let len = get_int(b, 7)?;
    if len > b.len() {
        return Err(HpackError("string past the block"));
    }
    let (s, rest) = b.split_at(len);
    *b = rest;
    out.clear();
    if huffman {
        huffman_decode(s, out)
    } else {
        out.extend_from_slice(s);
        Ok(())
    }
}

/// RFC 7541 Appendix B: the Huffman code of each symbol (0..=255, and 256 = EOS) as (code, bit length).
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The Huffman code as a decoding table: per state (a node of the code tree) and input nibble, the next
/// state, the symbol emitted (if any) and whether the state after it may end a string (it is on the
/// all-ones path of at most 7 bits, RFC 7541 §5.2); a transition through EOS or off the tree fails.
struct Nibbles {
    /// [state * 16 + nibble] = (next state, symbol or NONE, flags)
    t: Vec<(u16, u16, u8)>,
    /// Per state: may the string end here.
    end_ok: Vec<bool>,
}

const NONE: u16 = u16::MAX;
const FAIL: u8 = 1;

fn nibbles() -> &'static Nibbles {
    static T: OnceLock<Nibbles> = OnceLock::new();
    T.get_or_init(|| {
        // the code tree: node -> [child; 2], a child is a node (< 0x8000) or 0x8000 | symbol
        let mut tree: Vec<[u16; 2]> = vec![[0, 0]];
        for (sym, &(code, len)) in CODES.iter().enumerate() {
            let mut node = 0usize;
            for k in (0..len).rev() {
                let bit = ((code >> k) & 1) as usize;
                if k == 0 {
                    tree[node][bit] = 0x8000 | sym as u16;
                } else {
                    if tree[node][bit] == 0 {
                        tree.push([0, 0]);
                        tree[node][bit] = (tree.len() - 1) as u16;
                    }
                    node = tree[node][bit] as usize;
                }
            }
        }
        // end_ok: nodes reached from the root by 0..=7 one bits
        let mut end_ok = vec![false; tree.len()];
        let mut node = 0usize;
        end_ok[0] = true;
        for _ in 0..7 {
            node = tree[node][1] as usize;
            end_ok[node] = true;
        }
        let mut t = Vec::with_capacity(tree.len() * 16);
        for state in 0..tree.len() {
            for nib in 0..16u8 {
                let mut node = state;
                let mut sym = NONE;
                let mut flags = 0u8;
                for k in (0..4).rev() {
                    let next = tree[node][((nib >> k) & 1) as usize];
                    if next & 0x8000 != 0 {
                        let s = next & 0x7fff;
                        if s == 256 || sym != NONE {
                            // EOS, or a second symbol in one nibble (codes are at least 5 bits: never)
                            flags = FAIL;
                        }
                        sym = s;
                        node = 0;
                    } else {
                        node = next as usize;
                    }
                }
                t.push((node as u16, sym, flags));
            }
        }
        Nibbles { t, end_ok }
    })
}

/// Decodes a Huffman-coded string (RFC 7541 §5.2) into `out`.
fn huffman_decode(s: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let n = nibbles();
    let mut state = 0usize;
    for &c in s {
        for nib in [c >> 4, c & 0x0f] {
            let (next, sym, flags) = n.t[state * 16 + nib as usize];
            if flags & FAIL != 0 {
                return Err(HpackError("EOS in a Huffman string"));
            }
            if sym != NONE {
                out.push(sym as u8);
            }
            state = next as usize;
        }
    }
    if !n.end_ok[state] {
        return Err(HpackError("bad Huffman padding"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decode(d: &mut Decoder, block: &str) -> Vec<(String, String)> {
        let mut got = Vec::new();
        d.decode(&hex(block), |n, v| {
            got.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ))
        })
        .unwrap();
        got
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    fn size(d: &Decoder) -> usize {
        d.size
    }

    /// RFC 7541 C.3 (requests without Huffman) and C.4 (the same with Huffman): the same fields and table.
    #[test]
    fn rfc7541_c3_and_c4_requests() {
        for blocks in [
            [
                "828684410f7777772e6578616d706c652e636f6d",
                "828684be58086e6f2d6361636865",
                "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
            ],
            [
                "828684418cf1e3c2e5f23a6ba0ab90f4ff",
                "828684be5886a8eb10649cbf",
                "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
            ],
        ] {
            let mut d = Decoder::new(4096);
            assert_eq!(
                decode(&mut d, blocks[0]),
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com")
                ])
            );
            assert_eq!(d.table_state(), pairs(&[(":authority", "www.example.com")]));
            assert_eq!(size(&d), 57);
            assert_eq!(
                decode(&mut d, blocks[1]),
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "http"),
                    (":path", "/"),
                    (":authority", "www.example.com"),
                    ("cache-control", "no-cache")
                ])
            );
            assert_eq!(size(&d), 110);
            assert_eq!(
                decode(&mut d, blocks[2]),
                pairs(&[
                    (":method", "GET"),
                    (":scheme", "https"),
                    (":path", "/index.html"),
                    (":authority", "www.example.com"),
                    ("custom-key", "custom-value")
                ])
            );
            assert_eq!(
                d.table_state(),
                pairs(&[
                    ("custom-key", "custom-value"),
                    ("cache-control", "no-cache"),
                    (":authority", "www.example.com")
                ])
            );
            assert_eq!(size(&d), 164);
        }
    }

    /// RFC 7541 C.5 (responses without Huffman) and C.6 (with): a 256-octet table, entries evicted.
    #[test]
    fn rfc7541_c5_and_c6_responses_evict() {
        for blocks in [
            [
                "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
                "4803333037c1c0bf",
                "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
            ],
            [
                "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
                "4883640effc1c0bf",
                "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
            ],
        ] {
            let mut d = Decoder::new(256);
            let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
            let loc = "https://www.example.com";
            assert_eq!(
                decode(&mut d, blocks[0]),
                pairs(&[
                    (":status", "302"),
                    ("cache-control", "private"),
                    ("date", date1),
                    ("location", loc)
                ])
            );
            assert_eq!(size(&d), 222);
            // 307 evicts (:status, 302)
            assert_eq!(
                decode(&mut d, blocks[1]),
                pairs(&[
                    (":status", "307"),
                    ("cache-control", "private"),
                    ("date", date1),
                    ("location", loc)
                ])
            );
            assert_eq!(
                d.table_state(),
                pairs(&[
                    (":status", "307"),
                    ("location", loc),
                    ("date", date1),
                    ("cache-control", "private")
                ])
            );
            assert_eq!(size(&d), 222);
            let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
            assert_eq!(
                decode(&mut d, blocks[2]),
                pairs(&[
                    (":status", "200"),
                    ("cache-control", "private"),
                    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                    ("location", loc),
                    ("content-encoding", "gzip"),
                    ("set-cookie", cookie)
                ])
            );
            assert_eq!(
                d.table_state(),
                pairs(&[
                    ("set-cookie", cookie),
                    ("content-encoding", "gzip"),
                    ("date", "Mon, 21 Oct 2013 20:13:22 GMT")
                ])
            );
            assert_eq!(size(&d), 215);
        }
    }

    #[test]
    fn size_updates_are_bounded_and_only_first() {
        let mut d = Decoder::new(4096);
        decode(&mut d, "400a637573746f6d2d6b65790c637573746f6d2d76616c7565");
        assert_eq!(d.table_state().len(), 1);
        // size update to 0 empties the table, then back to 4096
        decode(&mut d, "203fe11f");
        assert_eq!(d.table_state().len(), 0);
        assert_eq!(d.max, 4096);
        // above the limit (4097)
        assert!(d.decode(&hex("3fe21f"), |_, _| {}).is_err());
        // after a field
        assert!(d.decode(&hex("8220"), |_, _| {}).is_err());
    }

    #[test]
    fn bad_blocks_are_refused() {
        let mut d = Decoder::new(4096);
        for bad in [
            "80",           // index 0
            "be",           // index 62, empty dynamic table
            "ff",           // truncated integer
            "ffffffffff7f", // integer too large
            "4005616263",   // string past the block
            "0081ff",       // Huffman: padding of 8 ones
            "0084ffffffff", // Huffman: EOS
            "008100",       // Huffman: padding of zeros
        ] {
            assert!(d.decode(&hex(bad), |_, _| {}).is_err(), "{bad}");
        }
    }

    #[test]
    fn huffman_round_trips_every_octet() {
        // encode with the table, decode back
        let input: Vec<u8> = (0..=255u8).chain(b"hello, world".iter().copied()).collect();
        let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
        for &c in &input {
            let (code, len) = CODES[c as usize];
            acc = (acc << len) | code as u64;
            bits += len as u32;
            while bits >= 8 {
                out.push((acc >> (bits - 8)) as u8);
                bits -= 8;
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
        }
        let mut back = Vec::new();
        huffman_decode(&out, &mut back).unwrap();
        assert_eq!(back, input);
    }

    fn template(fields: &[(&str, &str)]) -> Template {
        let raw: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        Template::new(&raw)
    }

    /// Blocks from the encoder, decoded in order by the decoder, give each template's fields back; once
    /// every template was sent, a block is indices only and the same bytes each time.
    #[test]
    fn the_encoder_fills_the_dynamic_table_then_sends_indices() {
        let a: &[(&str, &str)] = &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/a"),
            (":authority", "localhost:8443"),
            ("user-agent", "ordo-bench/0.1"),
            ("x-custom", "1"),
        ];
        let b: &[(&str, &str)] = &[
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/b"),
            (":authority", "localhost:8443"),
            ("user-agent", "ordo-bench/0.1"),
        ];
        let mut ts = [template(a), template(b)];
        let numbering = number(&mut ts);
        // every field but the static `:method` and `:scheme` ones, the shared ones once
        let dynamic = [
            (":path", "/a"),
            (":authority", "localhost:8443"),
            ("user-agent", "ordo-bench/0.1"),
            ("x-custom", "1"),
            (":path", "/b"),
        ];
        let total: usize = dynamic.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert_eq!(
            numbering,
            Numbering {
                templates: 2,
                table_total: total
            }
        );
        assert_eq!((ts[0].index, ts[1].index), (0, 1));
        assert_eq!(ts[0].fields[4].id, ts[1].fields[4].id, "one id per field");
        for (limit, server_table) in [(4096, 4096), (100, 100), (0, 0)] {
            let mut e = Encoder::new(numbering);
            e.limit(limit);
            let mut d = Decoder::new(server_table);
            let mut last = [Vec::new(), Vec::new()];
            for round in 0..4 {
                for (i, t) in ts.iter().enumerate() {
                    let block = e.encode(t).to_vec();
                    let mut got = Vec::new();
                    d.decode(&block, |n, v| {
                        got.push((
                            String::from_utf8(n.to_vec()).unwrap(),
                            String::from_utf8(v.to_vec()).unwrap(),
                        ))
                    })
                    .unwrap();
                    let want: Vec<(String, String)> = [a, b][i]
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_string()))
                        .collect();
                    assert_eq!(got, want, "limit {limit}, round {round}, template {i}");
                    if round >= 2 {
                        assert_eq!(block, last[i], "steady blocks repeat");
                    }
                    if round >= 1 && limit == 4096 {
                        assert!(
                            block.iter().all(|&c| c & 0x80 != 0),
                            "indices only: {block:?}"
                        );
                    }
                    last[i] = block;
                }
            }
        }
    }

    #[test]
    fn requests_encode_to_static_indices_and_literals() {
        let block = encode(&[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/x"),
            (b":authority", b"a.b"),
            (b"x-k", b"v"),
        ]);
        assert_eq!(block, hex("8287 0402 2f78 0103 612e 62 0003 782d 6b01 76"));
        let mut d = Decoder::new(4096);
        let mut got = Vec::new();
        d.decode(&block, |n, v| got.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[2], (b":path".to_vec(), b"/x".to_vec()));
        assert!(d.table_state().is_empty());
    }
}
