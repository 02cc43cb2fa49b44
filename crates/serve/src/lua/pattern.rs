//! Lua 5.4's patterns (`string.find`, `match`, `gmatch`, `gsub`) reimplemented with a work budget, because
//! the C library's matcher cannot be interrupted: it runs no Lua instructions, so the instruction hook never
//! fires inside it, and a pattern like `("a*"):rep(20) .. "b"` backtracks for years on a 30-byte subject (one
//! `string.find` on a long header held a thread for 10 s). The algorithm and the results follow Lua 5.4's
//! lstrlib.c (MIT licence): same captures, positions, anchors, `%b`, `%f`, back-references, the 200-level
//! recursion limit and the same error messages. What differs is that every step counts, and every
//! [`TICK_EVERY`] steps the caller's `tick` runs (the sandbox checks its clock there and stops the call).

use mlua::{Error, Result};

/// Captures a pattern may have (LUA_MAXCAPTURES).
pub(crate) const MAX_CAPTURES: usize = 32;
/// Nesting of the recursive matcher (MAXCCALLS in lstrlib.c).
const MAX_DEPTH: u32 = 200;
/// Steps between two calls of `tick`.
pub(crate) const TICK_EVERY: u64 = 1 << 12;
const CAP_UNFINISHED: isize = -1;
const CAP_POSITION: isize = -2;
const L_ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";

fn rt(msg: impl Into<String>) -> Error {
    Error::runtime(msg.into())
}

/// One capture, or the whole match when a pattern has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cap<'s> {
    Str(&'s [u8]),
    /// A position capture `()`: 1-based.
    Pos(usize),
}

/// The matcher's state over one subject and one pattern.
pub(crate) struct Matcher<'a, 't> {
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    capture: [(usize, isize); MAX_CAPTURES],
    depth: u32,
    work: u64,
    tick: &'t mut dyn FnMut() -> Result<()>,
}

/// `posrelatI` of lstrlib.c: a 1-based start position, negative from the end, clipped to 1.
pub(crate) fn start_pos(pos: i64, len: usize) -> usize {
    if pos > 0 {
        pos as usize
    } else if pos == 0 || pos < -(len as i64) {
        1
    } else {
        (len as i64 + pos + 1) as usize
    }
}

fn match_class(c: u8, cl: u8) -> bool {
    let res = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace includes the vertical tab, Rust's is_ascii_whitespace does not
        b's' => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_lowercase() { res } else { !res }
}

impl<'a, 't> Matcher<'a, 't> {
    pub(crate) fn new(
        src: &'a [u8],
        pat: &'a [u8],
        tick: &'t mut dyn FnMut() -> Result<()>,
    ) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            capture: [(0, 0); MAX_CAPTURES],
            depth: MAX_DEPTH,
            work: 0,
            tick,
        }
    }

    /// Counts `n` steps, calling `tick` each time another [`TICK_EVERY`] have gone.
    fn charge(&mut self, n: u64) -> Result<()> {
        let before = self.work;
        self.work += n;
        if before / TICK_EVERY != self.work / TICK_EVERY {
            (self.tick)()?;
        }
        Ok(())
    }

    /// The pattern byte at `i`; 0 past the end (C reads the terminating NUL there).
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    fn class_end(&self, mut p: usize) -> Result<usize> {
        let c = self.p(p);
        p += 1;
        if c == L_ESC {
            if p >= self.pat.len() {
                return Err(rt("malformed pattern (ends with '%')"));
            }
            return Ok(p + 1);
        }
        if c == b'[' {
            if self.p(p) == b'^' {
                p += 1;
            }
            loop {
                // look for a ']'; the first character is taken as it is (so `[]]` is a class of `]`)
                if p >= self.pat.len() {
                    return Err(rt("malformed pattern (missing ']')"));
                }
                let cc = self.pat[p];
                p += 1;
                if cc == L_ESC && p < self.pat.len() {
                    p += 1;
                }
                if self.p(p) == b']' {
                    break;
                }
            }
            return Ok(p + 1);
        }
        Ok(p)
    }

    /// `p` is at the `[`, `ec` at the closing `]`.
    fn match_bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut sig = true;
        if self.p(p + 1) == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                break;
            }
            if self.p(p) == L_ESC {
                p += 1;
                if match_class(c, self.p(p)) {
                    return sig;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if self.p(p - 2) <= c && c <= self.p(p) {
                    return sig;
                }
            } else if self.p(p) == c {
                return sig;
            }
        }
        !sig
    }

    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.p(p) {
            b'.' => true,
            L_ESC => match_class(c, self.p(p + 1)),
            b'[' => self.match_bracket_class(c, p, ep - 1),
            pc => pc == c,
        }
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Result<Option<usize>> {
        if p + 1 >= self.pat.len() {
            return Err(rt("malformed pattern (missing arguments to '%b')"));
        }
        if self.src.get(s) != Some(&self.pat[p]) {
            return Ok(None);
        }
        let (b, e) = (self.pat[p], self.pat[p + 1]);
        let mut cont = 1u64;
        let mut i = s + 1;
        while i < self.src.len() {
            let c = self.src[i];
            if c == e {
                cont -= 1;
                if cont == 0 {
                    self.charge((i - s) as u64)?;
                    return Ok(Some(i + 1));
                }
            } else if c == b {
                cont += 1;
            }
            i += 1;
        }
        self.charge((i - s) as u64)?;
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Result<Option<usize>> {
        let mut i = 0;
        while self.single_match(s + i, p, ep) {
            i += 1;
        }
        self.charge(i as u64)?;
        // try the longest repetition first, then one fewer each time
        loop {
            if let Some(r) = self.do_match(s + i, ep + 1)? {
                return Ok(Some(r));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Result<Option<usize>> {
        loop {
            if let Some(r) = self.do_match(s, ep + 1)? {
                return Ok(Some(r));
            }
            if self.single_match(s, p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: isize) -> Result<Option<usize>> {
        if self.level >= MAX_CAPTURES {
            return Err(rt("too many captures"));
        }
        self.capture[self.level] = (s, what);
        self.level += 1;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.level -= 1;
        }
        Ok(r)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Result<Option<usize>> {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.capture[l].1 == CAP_UNFINISHED)
        else {
            return Err(rt("invalid pattern capture"));
        };
        self.capture[l].1 = (s - self.capture[l].0) as isize;
        let r = self.do_match(s, p)?;
        if r.is_none() {
            self.capture[l].1 = CAP_UNFINISHED;
        }
        Ok(r)
    }

    /// A back-reference `%1`..`%9` at `s`.
    fn match_capture(&mut self, s: usize, digit: u8) -> Result<Option<usize>> {
        let l = digit as isize - b'1' as isize;
        if l < 0 || l as usize >= self.level || self.capture[l as usize].1 == CAP_UNFINISHED {
            return Err(rt(format!("invalid capture index %{}", l + 1)));
        }
        let (start, len) = self.capture[l as usize];
        // a position capture has no text: as in C (its length is huge as a size_t), it never matches
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        self.charge(len as u64)?;
        if self.src.len() - s >= len && self.src[start..start + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> Result<Option<usize>> {
        if self.depth == 0 {
            return Err(rt("pattern too complex"));
        }
        self.depth -= 1;
        let r = self.match_here(s, p);
        self.depth += 1;
        r
    }

    fn match_here(&mut self, mut s: usize, mut p: usize) -> Result<Option<usize>> {
        loop {
            self.charge(1)?;
            if p == self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat[p] {
                b'(' => {
                    return if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, CAP_POSITION)
                    } else {
                        self.start_capture(s, p + 1, CAP_UNFINISHED)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                L_ESC if self.p(p + 1) == b'b' => match self.match_balance(s, p + 2)? {
                    Some(e) => {
                        s = e;
                        p += 4;
                    }
                    None => return Ok(None),
                },
                L_ESC if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return Err(rt("missing '[' after '%f' in pattern"));
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    let current = self.src.get(s).copied().unwrap_or(0);
                    if !self.match_bracket_class(previous, p, ep - 1)
                        && self.match_bracket_class(current, p, ep - 1)
                    {
                        p = ep;
                    } else {
                        return Ok(None);
                    }
                }
                L_ESC if self.p(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.p(p + 1))? {
                        Some(e) => {
                            s = e;
                            p += 2;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    // a single-character class with an optional repetition suffix
                    let ep = self.class_end(p)?;
                    let suffix = self.p(ep);
                    if !self.single_match(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        b'?' => {
                            if let Some(r) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(r));
                            }
                            p = ep + 1;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    /// Capture `i` of the match `s..e` (the whole match when the pattern has no captures and `i` is 0).
    pub(crate) fn capture(&self, i: usize, s: usize, e: usize) -> Result<Cap<'a>> {
        if i >= self.level {
            if i != 0 {
                return Err(rt(format!("invalid capture index %{}", i + 1)));
            }
            return Ok(Cap::Str(&self.src[s..e]));
        }
        let (init, len) = self.capture[i];
        match len {
            CAP_UNFINISHED => Err(rt("unfinished capture")),
            CAP_POSITION => Ok(Cap::Pos(init + 1)),
            len => Ok(Cap::Str(&self.src[init..init + len as usize])),
        }
    }

    /// All captures of the match `s..e`: the whole match when there are none and `whole` is asked for.
    pub(crate) fn captures(&self, s: usize, e: usize, whole: bool) -> Result<Vec<Cap<'a>>> {
        let n = if self.level == 0 && whole {
            1
        } else {
            self.level
        };
        (0..n).map(|i| self.capture(i, s, e)).collect()
    }

    /// The text of the match `s..e`.
    pub(crate) fn whole(&self, s: usize, e: usize) -> &'a [u8] {
        &self.src[s..e]
    }

    /// Tries to match the pattern (from pattern offset `p`) at subject offset `s`: the match's end.
    pub(crate) fn try_at(&mut self, s: usize, p: usize) -> Result<Option<usize>> {
        self.level = 0;
        self.do_match(s, p)
    }

    /// Appends gsub's replacement string `repl` for the match `s..e` (`%0`..`%9`, `%%`).
    pub(crate) fn expand(&self, repl: &[u8], s: usize, e: usize, out: &mut Vec<u8>) -> Result<()> {
        let mut i = 0;
        while let Some(off) = repl[i..].iter().position(|&b| b == L_ESC) {
            out.extend_from_slice(&repl[i..i + off]);
            let at = i + off + 1;
            match repl.get(at).copied().unwrap_or(0) {
                L_ESC => out.push(L_ESC),
                b'0' => out.extend_from_slice(&self.src[s..e]),
                d if d.is_ascii_digit() => match self.capture((d - b'1') as usize, s, e)? {
                    Cap::Str(b) => out.extend_from_slice(b),
                    Cap::Pos(n) => out.extend_from_slice(n.to_string().as_bytes()),
                },
                _ => return Err(rt("invalid use of '%' in replacement string")),
            }
            i = at + 1;
        }
        out.extend_from_slice(&repl[i..]);
        Ok(())
    }
}

/// Whether `pat` has no magic characters (then find is a plain search).
pub(crate) fn no_specials(pat: &[u8]) -> bool {
    !pat.iter().any(|b| SPECIALS.contains(b))
}

/// Plain substring search, charging the bytes it compares.
pub(crate) fn mem_find(
    hay: &[u8],
    needle: &[u8],
    tick: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<usize>> {
    if needle.is_empty() {
        return Ok(Some(0));
    }
    if needle.len() > hay.len() {
        return Ok(None);
    }
    let mut work = 0u64;
    let last = hay.len() - needle.len();
    let mut i = 0;
    while i <= last {
        match hay[i..=last].iter().position(|&b| b == needle[0]) {
            None => return Ok(None),
            Some(off) => i += off,
        }
        let before = work;
        work += off_cost(needle.len());
        if before / TICK_EVERY != work / TICK_EVERY {
            tick()?;
        }
        if hay[i..i + needle.len()] == *needle {
            return Ok(Some(i));
        }
        i += 1;
    }
    Ok(None)
}

/// Steps charged for one comparison of `n` bytes (a step is roughly a few bytes' work).
fn off_cost(n: usize) -> u64 {
    1 + (n as u64) / 16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_tick() -> impl FnMut() -> Result<()> {
        || Ok(())
    }

    fn find(s: &str, p: &str) -> Option<(usize, usize)> {
        let mut t = no_tick();
        let mut m = Matcher::new(s.as_bytes(), p.as_bytes(), &mut t);
        (0..=s.len()).find_map(|i| m.try_at(i, 0).unwrap().map(|e| (i + 1, e)))
    }

    #[test]
    fn basic_matches() {
        assert_eq!(find("hello world", "o w"), Some((5, 7)));
        assert_eq!(find("hello", "l+"), Some((3, 4)));
        assert_eq!(find("hello", "x*"), Some((1, 0)));
        assert_eq!(find("f(a(b)c)d", "%b()"), Some((2, 8)));
        assert_eq!(find("THE (quick) fox", "%f[%a]%a+"), Some((1, 3)));
        assert_eq!(find("abcabc", "(abc)%1"), Some((1, 6)));
        assert_eq!(find("a.b", "%."), Some((2, 2)));
        assert_eq!(find("x]y", "[]]"), Some((2, 2)));
        assert_eq!(
            find("a\x0bb", "%s"),
            Some((2, 2)),
            "vertical tab is a space in C"
        );
    }

    #[test]
    fn errors_match_lua() {
        let mut t = no_tick();
        for (p, msg) in [
            ("%", "malformed pattern (ends with '%')"),
            ("[a", "malformed pattern (missing ']')"),
            ("%b", "malformed pattern (missing arguments to '%b')"),
            ("%fa", "missing '[' after '%f' in pattern"),
            ("%1", "invalid capture index %1"),
            ("(a", "unfinished capture"),
            ("a)", "invalid pattern capture"),
        ] {
            let mut m = Matcher::new(b"aaa", p.as_bytes(), &mut t);
            let r = m.try_at(0, 0).and_then(|e| match e {
                Some(e) => m.captures(0, e, true).map(|_| ()),
                None => Ok(()),
            });
            let e = r.expect_err(p).to_string();
            assert!(e.contains(msg), "{p}: {e}");
        }
    }

    #[test]
    fn a_pathological_pattern_calls_tick_and_stops() {
        let s = "a".repeat(40);
        let p = "a*".repeat(20) + "b";
        let mut ticks = 0u32;
        let mut tick = || {
            ticks += 1;
            if ticks > 100 {
                Err(rt("stopped"))
            } else {
                Ok(())
            }
        };
        let mut m = Matcher::new(s.as_bytes(), p.as_bytes(), &mut tick);
        let e = m.try_at(0, 0).unwrap_err().to_string();
        assert!(e.contains("stopped"), "{e}");
    }

    #[test]
    fn plain_search_ticks() {
        let hay = "a".repeat(100_000);
        let needle = "a".repeat(50_000) + "b";
        let mut ticks = 0u32;
        let mut tick = || {
            ticks += 1;
            if ticks > 3 {
                Err(rt("stopped"))
            } else {
                Ok(())
            }
        };
        assert!(mem_find(hay.as_bytes(), needle.as_bytes(), &mut tick).is_err());
        let mut t = no_tick();
        assert_eq!(mem_find(b"xxabc", b"abc", &mut t).unwrap(), Some(2));
        assert_eq!(mem_find(b"xxabc", b"", &mut t).unwrap(), Some(0));
        assert_eq!(mem_find(b"ab", b"abc", &mut t).unwrap(), None);
    }
}
