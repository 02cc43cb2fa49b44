//! The terminal renderer: tables as padded columns (numbers right-aligned), key-value blocks with their
//! values in one column, notes as lines. Widths count characters, as Rust's `format!` padding does (a wide
//! East Asian character counts as one).

use std::fmt::Write as _;

use crate::model::{Align, Block, Document, KeyValue, Section, Table};

/// A document: each titled section as `== title ==`, its subtitle and its blocks, a blank line between and
/// after them; an untitled section as its blocks with a blank line between.
pub fn render<F>(doc: &Document<F>) -> String {
    sections(&doc.sections)
}

/// Sections, as [`render`] prints them.
pub fn sections<F>(sections: &[Section<F>]) -> String {
    let mut out = String::new();
    let mut after_untitled = false;
    for s in sections {
        let blocks: Vec<String> = s.blocks.iter().filter_map(|b| block(b, s)).collect();
        if s.title.is_empty() {
            if blocks.is_empty() {
                continue;
            }
            if after_untitled {
                out.push('\n');
            }
            out.push_str(&blocks.join("\n"));
            after_untitled = true;
        } else {
            let _ = writeln!(out, "== {} ==", s.title);
            if !s.subtitle.is_empty() {
                let _ = writeln!(out, "{}", s.subtitle);
            }
            for b in blocks {
                out.push('\n');
                out.push_str(&b);
            }
            out.push('\n');
            after_untitled = false;
        }
    }
    out
}

/// One block's lines (none for a figure); a note is indented under a section title.
fn block<F>(b: &Block<F>, s: &Section<F>) -> Option<String> {
    match b {
        Block::Table(t) => Some(table(t)),
        Block::KeyValue(kv) => Some(key_value(kv)),
        Block::Note(n) => {
            let indent = if s.title.is_empty() { "" } else { "  " };
            Some(n.lines().map(|l| format!("{indent}{l}\n")).collect())
        }
        Block::Figure(_) => None,
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// A table with columns padded to their widest cell (or their minimum width).
pub fn table(t: &Table) -> String {
    let cols = t
        .headers
        .len()
        .max(t.rows.iter().map(Vec::len).max().unwrap_or(0));
    let mut widths: Vec<usize> = (0..cols)
        .map(|i| t.layout.min_widths.get(i).copied().unwrap_or(0))
        .collect();
    for row in std::iter::once(&t.headers).chain(&t.rows) {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(c));
        }
    }
    let indent = " ".repeat(t.layout.indent);
    let gap = " ".repeat(t.layout.gap);
    let mut out = String::new();
    if !t.title.is_empty() {
        let _ = writeln!(out, "{}", t.title);
    }
    let line = |row: &[String], out: &mut String| {
        let mut s = indent.clone();
        for (i, w) in widths.iter().enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            let pad = " ".repeat(w - width(cell));
            if i > 0 {
                s.push_str(&gap);
            }
            match t.align.get(i).copied().unwrap_or(Align::Right) {
                Align::Left => {
                    s.push_str(cell);
                    s.push_str(&pad);
                }
                Align::Right => {
                    s.push_str(&pad);
                    s.push_str(cell);
                }
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    if !t.headers.is_empty() {
        line(&t.headers, &mut out);
        if t.layout.rule {
            let total = widths.iter().sum::<usize>() + t.layout.gap * cols.saturating_sub(1);
            let _ = writeln!(out, "{indent}{}", "-".repeat(total));
        }
    }
    for row in &t.rows {
        line(row, &mut out);
    }
    out
}

/// A key-value block: `key:` padded to the value column, then the value; a detail line under its pair,
/// three spaces in. Lines keep their trailing spaces (ab prints `Server Software:` with none after it).
pub fn key_value(kv: &KeyValue) -> String {
    let column = kv.key_width.unwrap_or_else(|| {
        kv.pairs
            .iter()
            .map(|p| width(&p.key) + 2)
            .max()
            .unwrap_or(0)
    });
    let indent = " ".repeat(kv.indent);
    let mut out = String::new();
    if !kv.title.is_empty() {
        let _ = writeln!(out, "{}", kv.title);
    }
    for p in &kv.pairs {
        let key = format!("{}:", p.key);
        let pad = column.saturating_sub(width(&key)).max(1);
        let _ = writeln!(out, "{indent}{key}{}{}", " ".repeat(pad), p.value);
        if let Some(d) = &p.detail {
            let _ = writeln!(out, "{indent}   {d}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new("Per class", &["class", "mean ms", "requests"]);
        t.row(vec!["light".into(), "12.5".into(), "100".into()]);
        t.row(vec!["heavy".into(), "3.25".into(), "12345".into()]);
        let s = table(&t);
        assert_eq!(
            s,
            "Per class\n\
             \x20 class  mean ms  requests\n\
             \x20 ------------------------\n\
             \x20 light     12.5       100\n\
             \x20 heavy     3.25     12345\n"
        );
    }

    #[test]
    fn minimum_widths_a_wider_cell_and_unicode() {
        let mut t = Table::new("", &["", "min", "p99"]).columns(0, &[6, 5]);
        t.row(vec!["a".into(), "1.0".into(), "2–3 →".into()]);
        t.row(vec!["longer name".into(), "10.0".into(), "4".into()]);
        assert_eq!(
            table(&t),
            "              min   p99\n\
             a             1.0 2–3 →\n\
             longer name  10.0     4\n"
        );
    }

    #[test]
    fn an_empty_table_is_its_title_and_headers_and_a_short_row_pads() {
        let t = Table::new("Nothing yet", &["a", "bb"]);
        assert_eq!(table(&t), "Nothing yet\n  a  bb\n  -----\n");
        let mut h = Table::headless("", &[Align::Right, Align::Left]).columns(2, &[6]);
        h.row(vec!["50%".into(), "1.5".into()]);
        h.row(vec!["100%".into()]);
        assert_eq!(table(&h), "     50% 1.5\n    100%\n");
        assert_eq!(table(&Table::new("", &[])), "");
    }

    #[test]
    fn key_values_line_up() {
        let mut kv = KeyValue::new("").width(24);
        kv.pair("Server Software", "");
        kv.pair_with("Failed requests", "3", "(Connect: 3)");
        kv.pair("A key longer than the value column", "x");
        assert_eq!(
            key_value(&kv),
            "Server Software:        \n\
             Failed requests:        3\n\
             \x20  (Connect: 3)\n\
             A key longer than the value column: x\n"
        );
        let mut kv = KeyValue::new("Runs").indent(2);
        kv.pair("a", "1");
        kv.pair("ccc", "3");
        assert_eq!(key_value(&kv), "Runs\n  a:   1\n  ccc: 3\n");
        let mut kv = KeyValue::new("").width(0);
        kv.pair("a", "1");
        kv.pair("ccc", "3");
        assert_eq!(key_value(&kv), "a: 1\nccc: 3\n");
    }

    #[test]
    fn sections_titled_and_not() {
        let mut t = Table::new("T", &["k", "v"]);
        t.row(vec!["x".into(), "1".into()]);
        let titled: Section<u8> = Section {
            id: "s".into(),
            title: "Title".into(),
            subtitle: "sub".into(),
            blocks: vec![
                Block::Figure(1),
                t.clone().into(),
                Block::Note("two\nlines".into()),
            ],
        };
        assert_eq!(
            sections(&[titled]),
            "== Title ==\nsub\n\nT\n  k  v\n  ----\n  x  1\n\n  two\n  lines\n\n"
        );
        let doc: Document = Document {
            sections: vec![
                Section::of(vec![Block::Note("a".into()), Block::Note("b".into())]),
                Section::of(vec![]),
                Section::of(vec![Block::Note("c".into())]),
            ],
        };
        assert_eq!(render(&doc), "a\n\nb\n\nc\n");
    }
}
