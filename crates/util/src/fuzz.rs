//! Fuzz targets of the located-error layer (docs/design.md, "Fuzzing"): every TOML file ordo reads goes
//! through it, so any text, offset and key path must give a located answer, never a panic, and the two
//! directions (offset → key path, key path → span) must agree.

use ordo_testkit::fuzz::{config, mutated, tokens};
use proptest::prelude::*;

use crate::located::{Seg, Source, key_path_at, line_col, span_of_path};

/// TOML made of its punctuation and a few keys: tables, arrays of tables, inline tables, strings.
const TOML: &[&str] = &[
    "a",
    "b",
    "x.y",
    "\"q k\"",
    " = ",
    "=",
    "1",
    "-1",
    "1.5",
    "true",
    "\"s\"",
    "'s'",
    "\"\"\"m\"\"\"",
    "[a]",
    "[[a]]",
    "[a.b]",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\n",
    "\r\n",
    "#c",
    " ",
    "\t",
    "é",
    "\"",
    "\\",
    "1979-05-27",
];

const DOC: &str =
    "top = 1\n[a]\nb = { c = [1, 2, {d = \"é\"}] }\n[[t]]\nk = 'v'\n[[t]]\nk = \"w\" # c\n";

proptest! {
    #![proptest_config(config(1.0))]

    /// Any text through `Source::parse`: a refusal carries the file, a line within the text and a
    /// column; any byte offset gets a line and column; and where an offset names a key path, that path's
    /// span is found again (and lies in the text).
    #[test]
    fn located_any_toml(
        text in prop_oneof![tokens(TOML, 30), mutated(Just(DOC.as_bytes().to_vec()), 4)],
        at in any::<usize>(),
    ) {
        let text = String::from_utf8_lossy(&text);
        let lines = text.matches('\n').count() + 1;
        if let Err(e) = Source::new("f.toml", &text).parse::<toml::Table>() {
            prop_assert_eq!(e.file.as_str(), "f.toml");
            prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= lines), "{:?} of {}", e.line, lines);
            prop_assert!(!e.message.is_empty());
        }
        let at = at % (text.len() + 1);
        let (line, col) = line_col(&text, at);
        prop_assert!(line >= 1 && line <= lines && col >= 1);
        if let Some(path) = key_path_at(&text, at) {
            let span = span_of_path(&text, &path);
            prop_assert!(span.as_ref().is_some_and(|s| s.start <= s.end && s.end <= text.len()), "{:?} {:?}", path, span);
        }
        let path = [Seg::Key("a".into()), Seg::Index(at % 3), Seg::Key("b".into())];
        if let Some(s) = span_of_path(&text, &path) {
            prop_assert!(s.end <= text.len());
        }
    }
}
