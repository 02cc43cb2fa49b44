//! Located errors for the TOML files ordo reads (serve's config, bench's mix files, tune's experiment
//! files), so each is refused the same way — `file:line: key: message` — and finds the line the same way:
//! from the span toml reports for a parse or type error, or from the key path a later check names.

use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;
use toml_edit::{ImDocument, Item, Table, Value};

/// One step of a key path: a table key or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Conversion of path pieces for [`keypath!`](crate::keypath).
pub trait IntoSeg {
    fn into_seg(self) -> Seg;
}
impl IntoSeg for &str {
    fn into_seg(self) -> Seg {
        Seg::Key(self.to_string())
    }
}
impl IntoSeg for &String {
    fn into_seg(self) -> Seg {
        Seg::Key(self.clone())
    }
}
impl IntoSeg for String {
    fn into_seg(self) -> Seg {
        Seg::Key(self)
    }
}
impl IntoSeg for usize {
    fn into_seg(self) -> Seg {
        Seg::Index(self)
    }
}
impl IntoSeg for Seg {
    fn into_seg(self) -> Seg {
        self
    }
}

/// Build a key path (a `Vec<Seg>`): `keypath!["classes", 1, "weight"]`.
#[macro_export]
macro_rules! keypath {
    ($($seg:expr),* $(,)?) => {
        ::std::vec::Vec::<$crate::located::Seg>::from([$($crate::located::IntoSeg::into_seg($seg)),*])
    };
}

/// A key path as the messages spell it: `classes[1].weight`.
pub fn path_to_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A refused file: which file, where in it, which key, and why. Displayed as `file:line: key: message`,
/// leaving out the parts that are not known (the column is kept for tools, not printed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The file as the user named it — or, for a value that came from elsewhere (a command-line flag), that
    /// origin (`--policy lua`).
    pub file: String,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column (in characters).
    pub column: Option<usize>,
    /// Key path (`classes[1].weight`).
    pub key: Option<String>,
    pub message: String,
}

impl Located {
    /// An error about the file as a whole (cannot be read, nothing in it to point at).
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Located {
        Located {
            file: file.into(),
            line: None,
            column: None,
            key: None,
            message: message.into(),
        }
    }

    /// The same error naming `key` (when no line is known for it).
    pub fn with_key(mut self, key: impl Into<String>) -> Located {
        self.key = Some(key.into());
        self
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Located {}

/// A TOML text and the name its errors carry.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl<'a> Source<'a> {
    pub fn new(name: &'a str, text: &'a str) -> Source<'a> {
        Source { name, text }
    }

    /// Deserialize the text (with `toml::Spanned` fields where a later check needs a value's place). A
    /// syntax error, a wrong type or an unknown key is located at the span toml reports, and named by the
    /// key path found there.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Located> {
        toml::from_str(self.text).map_err(|e| {
            let mut message = plain_message(e.message().trim());
            if message.is_empty() {
                // toml says nothing when the text ends where a value was due (`a =` as the last line)
                let ends_here = e
                    .span()
                    .is_none_or(|s| self.text.get(s.start..).is_none_or(|r| r.trim().is_empty()));
                message = if ends_here {
                    "expected a value, found the end of the file".to_string()
                } else {
                    "invalid TOML syntax here".to_string()
                };
            }
            match e.span() {
                Some(s) => self.at_offset(s.start, message),
                None => Located::new(self.name, message),
            }
        })
    }

    /// An error at byte offset `at`, named by the key path there (if any).
    pub fn at_offset(&self, at: usize, message: impl Into<String>) -> Located {
        let (line, column) = line_col(self.text, at);
        let key = key_path_at(self.text, at)
            .map(|p| path_to_string(&p))
            .or_else(|| key_at(self.text, at));
        Located {
            file: self.name.to_string(),
            line: Some(line),
            column: Some(column),
            key,
            message: message.into(),
        }
    }

    /// An error at the key path `path`, on the line of the deepest part of it the text spells out (the
    /// key's own line where it is written; its table's line when the value is a default).
    pub fn at_path(&self, path: &[Seg], message: impl Into<String>) -> Located {
        let at = span_of_path(self.text, path).map(|s| line_col(self.text, s.start));
        Located {
            file: self.name.to_string(),
            line: at.map(|a| a.0),
            column: at.map(|a| a.1),
            key: (!path.is_empty()).then(|| path_to_string(path)),
            message: message.into(),
        }
    }

    /// An error about a value whose span the caller holds (`toml::Spanned::span`), named by `path`.
    pub fn at_span(&self, span: Range<usize>, path: &[Seg], message: impl Into<String>) -> Located {
        let (line, column) = line_col(self.text, span.start);
        Located {
            file: self.name.to_string(),
            line: Some(line),
            column: Some(column),
            key: (!path.is_empty()).then(|| path_to_string(path)),
            message: message.into(),
        }
    }
}

/// serde's wording of a refused value, in the words of the file's reader: an unknown key or value gets the
/// nearest valid one ("did you mean") or the list of them, Rust type names become what they accept
/// (`u32` → "a whole number (0 to 4294967295)"), and the value found is said last. Anything else is kept.
pub fn plain_message(msg: &str) -> String {
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        return unknown("key", rest);
    }
    if let Some(rest) = msg.strip_prefix("unknown variant ") {
        return unknown("value", rest);
    }
    if let Some(name) = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.strip_suffix('`'))
    {
        return format!("missing key `{name}`");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((found, expected)) = msg
            .strip_prefix(prefix)
            .and_then(|r| r.rsplit_once(", expected "))
        {
            return format!(
                "expected {}, found {}",
                plain_expected(expected),
                plain_found(found)
            );
        }
    }
    msg.to_string()
}

/// "`wokers`, expected one of `listen`, `workers`" → "unknown key `wokers`; did you mean `workers`?"
/// (or, with nothing near, the valid names listed).
fn unknown(what: &str, rest: &str) -> String {
    let Some((name, expected)) = rest.split_once(", ") else {
        return format!("unknown {what} {rest}");
    };
    // serde's `OneOf`: "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`"
    let list = expected
        .trim_start_matches("expected ")
        .trim_start_matches("one of ")
        .replace("` or `", "`, `");
    let valid: Vec<&str> = list
        .split(", ")
        .filter_map(|v| v.strip_prefix('`')?.strip_suffix('`'))
        .collect();
    let given = name.trim_matches('`');
    if valid.is_empty() {
        // "there are no fields"
        return format!("unknown {what} {name} (none is allowed here)");
    }
    match nearest(given, &valid) {
        Some(near) => format!("unknown {what} {name}; did you mean `{near}`?"),
        None => format!(
            "unknown {what} {name} (expected one of: {})",
            valid.join(", ")
        ),
    }
}

/// The valid name closest to `given` by edit distance (a swap of two neighbours counts one), when it is
/// close enough to be a typo: at most one edit for names up to 5 characters, a third of the length beyond.
/// Failing that, a name that `given` is the start of, or that is the start of `given`, within three
/// characters (`class` → `classes`, `[[rule]]` → `rules`).
pub fn nearest<'a>(given: &str, valid: &[&'a str]) -> Option<&'a str> {
    let given = given.to_lowercase();
    let limit = (given.chars().count() / 3).max(1);
    let close = valid
        .iter()
        .map(|v| (edit_distance(&given, &v.to_lowercase()), *v))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| v);
    close.or_else(|| {
        valid.iter().copied().find(|v| {
            let v = v.to_lowercase();
            let (short, long) = if v.len() < given.len() {
                (&v, &given)
            } else {
                (&given, &v)
            };
            short.len() >= 3 && long.starts_with(short.as_str()) && long.len() - short.len() <= 3
        })
    })
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: distance between a[..i] and b[..j]
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// What serde's `expected` of a Rust type accepts, said plainly.
fn plain_expected(expected: &str) -> String {
    let range = |lo: i128, hi: i128| format!("a whole number ({lo} to {hi})");
    match expected {
        "u8" => range(0, u8::MAX.into()),
        "u16" => range(0, u16::MAX.into()),
        "u32" => range(0, u32::MAX.into()),
        "u64" | "usize" => range(0, u64::MAX.into()),
        "i8" => range(i8::MIN.into(), i8::MAX.into()),
        "i16" => range(i16::MIN.into(), i16::MAX.into()),
        "i32" => range(i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => range(i64::MIN.into(), i64::MAX.into()),
        "f32" | "f64" => "a number".to_string(),
        "a boolean" => "true or false".to_string(),
        "a borrowed string" => "a string".to_string(),
        "a character" => "a single character".to_string(),
        "a sequence" => "a list ([...])".to_string(),
        "a map" => "a table".to_string(),
        e if e.starts_with("struct ") || e.starts_with("a map") => "a table".to_string(),
        e if e.starts_with("a sequence") || e.starts_with("a tuple") => {
            "a list ([...])".to_string()
        }
        e => e.to_string(),
    }
}

/// What serde's `invalid type` names as found, said plainly: `string "x"` → `the string "x"`,
/// ``integer `-3` `` → `-3`.
fn plain_found(found: &str) -> String {
    let quoted = |p: &str| {
        found
            .strip_prefix(p)
            .and_then(|r| r.strip_prefix('`')?.strip_suffix('`'))
            .map(str::to_string)
    };
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the string {s}");
    }
    if let Some(n) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {n}");
    }
    if let Some(b) = quoted("boolean ") {
        return b;
    }
    match found {
        "sequence" => "a list".to_string(),
        "map" => "a table".to_string(),
        f => f.to_string(),
    }
}

/// 1-based line of byte offset `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    line_col(text, at).0
}

/// 1-based line and column (in characters) of byte offset `at` (clamped to the text).
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

enum Node<'a> {
    Item(&'a Item),
    Table(&'a Table),
    Value(&'a Value),
}

/// The span of a key path in the text: the key's own span where it is written, else that of the deepest
/// part of the path that is (a key the text leaves out, e.g. a defaulted field, ends the walk there).
/// `None` when the text does not parse or spells out none of the path.
pub fn span_of_path(text: &str, path: &[Seg]) -> Option<Range<usize>> {
    let doc = ImDocument::parse(text).ok()?;
    let mut node = Node::Item(doc.as_item());
    let mut best = None;
    for seg in path {
        let step = (|| -> Option<(Node, Option<Range<usize>>)> {
            Some(match (seg, &node) {
                (Seg::Key(k), Node::Item(Item::Table(t))) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span().or_else(|| item.span()))
                }
                (Seg::Key(k), Node::Table(t)) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span().or_else(|| item.span()))
                }
                (Seg::Key(k), Node::Item(Item::Value(Value::InlineTable(t))))
                | (Seg::Key(k), Node::Value(Value::InlineTable(t))) => {
                    let (key, item) = t.get_key_value(k)?;
                    (Node::Item(item), key.span().or_else(|| item.span()))
                }
                (Seg::Index(i), Node::Item(Item::ArrayOfTables(a))) => {
                    let t = a.get(*i)?;
                    (Node::Table(t), t.span())
                }
                (Seg::Index(i), Node::Item(Item::Value(Value::Array(a))))
                | (Seg::Index(i), Node::Value(Value::Array(a))) => {
                    let v = a.get(*i)?;
                    (Node::Value(v), v.span())
                }
                _ => return None,
            })
        })();
        let Some((next, span)) = step else { break };
        if span.is_some() {
            best = span;
        }
        node = next;
    }
    best
}

/// The key path of the deepest key, value or table header that byte offset `at` falls in. `None` when
/// the text does not parse or `at` is in none of them (a comment, blank space).
pub fn key_path_at(text: &str, at: usize) -> Option<Vec<Seg>> {
    let doc = ImDocument::parse(text).ok()?;
    let mut best = None;
    let mut path = Vec::new();
    search_table(doc.as_table(), at, &mut path, &mut best);
    best
}

fn contains(span: Option<Range<usize>>, at: usize) -> bool {
    span.is_some_and(|s| s.start <= at && at < s.end.max(s.start + 1))
}

fn offer(path: &[Seg], best: &mut Option<Vec<Seg>>) {
    if best.as_ref().is_none_or(|b| path.len() >= b.len()) {
        *best = Some(path.to_vec());
    }
}

fn search_table(t: &Table, at: usize, path: &mut Vec<Seg>, best: &mut Option<Vec<Seg>>) {
    for (k, item) in t.iter() {
        path.push(Seg::Key(k.to_string()));
        if contains(t.key(k).and_then(|key| key.span()), at) {
            offer(path, best);
        }
        match item {
            Item::Value(v) => search_value(v, at, path, best),
            Item::Table(sub) => {
                if contains(sub.span(), at) {
                    offer(path, best);
                }
                search_table(sub, at, path, best);
            }
            Item::ArrayOfTables(a) => {
                for (i, sub) in a.iter().enumerate() {
                    path.push(Seg::Index(i));
                    if contains(sub.span(), at) {
                        offer(path, best);
                    }
                    search_table(sub, at, path, best);
                    path.pop();
                }
            }
            Item::None => {}
        }
        path.pop();
    }
}

fn search_value(v: &Value, at: usize, path: &mut Vec<Seg>, best: &mut Option<Vec<Seg>>) {
    if !contains(v.span(), at) {
        return;
    }
    offer(path, best);
    match v {
        Value::InlineTable(t) => {
            for (k, item) in t.iter() {
                path.push(Seg::Key(k.to_string()));
                if contains(t.key(k).and_then(|key| key.span()), at) {
                    offer(path, best);
                }
                search_value(item, at, path, best);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, item) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                search_value(item, at, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

/// For a text that does not parse: the bare key at the start of the line holding `at`, if the line looks
/// like `key = ...`, prefixed with its table from the headers above (`limits.head_timeout`, `classes[1].x`).
fn key_at(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let start = text.get(..at)?.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next()?;
    let (k, _) = line.split_once('=')?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        return None;
    }
    Some(match table_at(&text[..start]) {
        Some(t) => format!("{t}.{k}"),
        None => k.to_string(),
    })
}

/// The table a line belongs to, from the `[table]` / `[[array]]` headers above it; `None` at top level.
fn table_at(before: &str) -> Option<String> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut current = None;
    for line in before.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
            let name = name.trim();
            let n = counts.entry(name).or_insert(0);
            current = Some(format!("{name}[{n}]"));
            *n += 1;
        } else if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
        }
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    const TEXT: &str = "workers = 4\n\n[[classes]]\nname = \"a\"\n\n[[classes]]\nname = \"b\"\nweight = 0\n\n[admin]\nlisten = \"127.0.0.1:1\"\n[[rules]]\nclass = \"a\"\nheader = { name = \"x\", regex = \"(\" }\n";

    #[test]
    fn key_paths_find_their_lines_in_tables_arrays_and_inline_tables() {
        let s = Source::new("c.toml", TEXT);
        let line = |p: Vec<Seg>| s.at_path(&p, "m").line;
        assert_eq!(line(keypath!["workers"]), Some(1));
        assert_eq!(line(keypath!["classes", 1, "weight"]), Some(8));
        assert_eq!(line(keypath!["admin", "listen"]), Some(11));
        assert_eq!(line(keypath!["rules", 0, "header", "regex"]), Some(14));
        assert_eq!(line(keypath!["classes", 0]), Some(3));
        // a defaulted key: its table's line
        assert_eq!(line(keypath!["classes", 0, "weight"]), Some(3));
        assert_eq!(line(keypath!["nothing"]), None);
        let e = s.at_path(&keypath!["rules", 0, "header", "regex"], "bad regex");
        assert_eq!(e.column, Some(24));
        assert_eq!(e.to_string(), "c.toml:14: rules[0].header.regex: bad regex");
    }

    #[test]
    fn offsets_name_the_nested_key_there() {
        let at = |needle: &str| TEXT.find(needle).unwrap();
        let path = |needle| key_path_at(TEXT, at(needle)).map(|p| path_to_string(&p));
        assert_eq!(path("weight").as_deref(), Some("classes[1].weight"));
        assert_eq!(path("0\n").as_deref(), Some("classes[1].weight"));
        assert_eq!(path("\"(\"").as_deref(), Some("rules[0].header.regex"));
        assert_eq!(path("listen").as_deref(), Some("admin.listen"));
        assert_eq!(line_col(TEXT, at("regex")), (14, 24));
        assert_eq!(line_col("é = 1\nx", 7), (2, 1));
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Cfg {
        #[serde(default)]
        workers: u32,
        #[serde(default)]
        classes: Vec<Class>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Class {
        name: String,
        #[serde(default)]
        weight: u32,
    }

    fn parse_err(text: &str) -> Located {
        Source::new("c.toml", text).parse::<Cfg>().unwrap_err()
    }

    /// Found by the fuzz target (issue 23): toml's message is empty when the text ends where a value was
    /// due, which printed `c.toml:1: a: ` with no reason.
    #[test]
    fn issue23_a_value_missing_at_the_end_is_said() {
        for text in ["a = ", "a =", "[[classes]]\nname = "] {
            let e = parse_err(text);
            assert_eq!(
                e.message, "expected a value, found the end of the file",
                "{text:?}"
            );
            assert!(e.line.is_some(), "{text:?}");
        }
    }

    #[test]
    fn parse_errors_are_located() {
        // a type error in the second of an array of tables
        let e = parse_err("[[classes]]\nname = \"a\"\n[[classes]]\nname = \"b\"\nweight = \"x\"\n");
        assert_eq!(
            (e.line, e.column, e.key.as_deref()),
            (Some(5), Some(10), Some("classes[1].weight"))
        );
        assert_eq!(
            e.to_string(),
            "c.toml:5: classes[1].weight: expected a whole number (0 to 4294967295), found the string \"x\""
        );
        // an unknown key, top level and nested, with the key meant
        let e = parse_err("workers = 1\nwokers = 2\n");
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("wokers")));
        assert_eq!(e.message, "unknown key `wokers`; did you mean `workers`?");
        let e = parse_err("[[classes]]\nname = \"a\"\nweigth = 2\n");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("classes[0].weigth"))
        );
        assert_eq!(e.message, "unknown key `weigth`; did you mean `weight`?");
        // nothing near: the keys the table takes
        let e = parse_err("colour = 1\n");
        assert_eq!(
            e.message,
            "unknown key `colour` (expected one of: workers, classes)"
        );
        // out of range, and a negative number for an unsigned one
        let e = parse_err("workers = 5000000000\n");
        assert_eq!(
            e.message,
            "expected a whole number (0 to 4294967295), found the number 5000000000"
        );
        let e = parse_err("workers = -3\n");
        assert_eq!(
            e.message,
            "expected a whole number (0 to 4294967295), found the number -3"
        );
        let e = parse_err("workers = true\n");
        assert_eq!(
            e.message,
            "expected a whole number (0 to 4294967295), found true"
        );
        let e = parse_err("classes = 3\n");
        assert!(e.message.starts_with("expected a list"), "{e}");
        // a syntax error: the line, and the key read from the text
        let e = parse_err("workers = 1\n[[classes]]\nname = \"a\nweight = 1\n");
        assert_eq!(e.line, Some(3), "{e}");
        let e = parse_err("[[classes]]\nname = \"a\"\nweight = \n");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("classes[0].weight")),
            "{e}"
        );
        // a missing key: the line of its table
        let e = parse_err("workers = 1\n[[classes]]\nweight = 1\n");
        assert_eq!(e.message, "missing key `name`");
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn near_names_are_typos_far_ones_are_not() {
        assert_eq!(edit_distance("wokers", "workers"), 1);
        assert_eq!(edit_distance("weigth", "weight"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        let keys = ["listen", "threads", "workers", "policy", "queue_timeout"];
        assert_eq!(nearest("wokers", &keys), Some("workers"));
        assert_eq!(nearest("Policy", &keys), Some("policy"));
        assert_eq!(nearest("queue_timout", &keys), Some("queue_timeout"));
        assert_eq!(nearest("lsten", &keys), Some("listen"));
        assert_eq!(nearest("colour", &keys), None);
        // a singular for a plural, a word cut short
        let tables = ["classes", "rules", "routes", "limits", "lua"];
        assert_eq!(nearest("class", &tables), Some("classes"));
        assert_eq!(nearest("rule", &tables), Some("rules"));
        assert_eq!(nearest("limit", &tables), Some("limits"));
        assert_eq!(nearest("xy", &tables), None);
        assert_eq!(nearest("cl", &tables), None);
        assert_eq!(nearest("x", &keys), None);
        // unknown values of an enum get the same
        assert_eq!(
            plain_message("unknown variant `strid`, expected one of `fcfs`, `stride`"),
            "unknown value `strid`; did you mean `stride`?"
        );
        assert_eq!(
            plain_message("unknown variant `random`, expected `fcfs` or `stride`"),
            "unknown value `random` (expected one of: fcfs, stride)"
        );
        assert_eq!(
            plain_message("unknown field `x`, there are no fields"),
            "unknown key `x` (none is allowed here)"
        );
        // what it does not know stays as it was
        assert_eq!(plain_message("a policy name"), "a policy name");
        assert_eq!(
            plain_message("invalid type: boolean `true`, expected a number of seconds"),
            "expected a number of seconds, found true"
        );
    }

    #[test]
    fn display_leaves_out_what_is_unknown() {
        assert_eq!(
            Located::new("x.toml", "cannot read: gone").to_string(),
            "x.toml: cannot read: gone"
        );
        assert_eq!(
            Located::new("--policy lua", "needs a script")
                .with_key("policy")
                .to_string(),
            "--policy lua: policy: needs a script"
        );
        assert_eq!(
            path_to_string(&keypath!["classes", 1, "weight"]),
            "classes[1].weight"
        );
    }
}
