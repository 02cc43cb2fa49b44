//! Terminal rendering: the sections' tables as aligned plain-text columns, and their notes, for
//! `ordo report --text`.

use std::fmt::Write as _;

use crate::doc::{Align, Block, Section, Table};

/// Render a table with columns padded to their widest cell.
pub(crate) fn table(t: &Table) -> String {
    let cols = t
        .headers
        .len()
        .max(t.rows.iter().map(Vec::len).max().unwrap_or(0));
    let mut width = vec![0usize; cols];
    for row in std::iter::once(&t.headers).chain(&t.rows) {
        for (i, c) in row.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    if !t.title.is_empty() {
        let _ = writeln!(out, "{}", t.title);
    }
    let line = |row: &[String], out: &mut String| {
        let mut s = String::new();
        for (i, w) in width.iter().enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            let pad = w - cell.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            match t.align.get(i).copied().unwrap_or(Align::Right) {
                Align::Left => {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                }
                Align::Right => {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
        }
        let _ = writeln!(out, "  {}", s.trim_end());
    };
    line(&t.headers, &mut out);
    let total: usize = width.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
    let _ = writeln!(out, "  {}", "-".repeat(total));
    for row in &t.rows {
        line(row, &mut out);
    }
    out
}

/// Render all sections: title, subtitle, tables and notes (charts are listed by caption).
pub(crate) fn render(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        let _ = writeln!(out, "== {} ==", s.title);
        if !s.subtitle.is_empty() {
            let _ = writeln!(out, "{}", s.subtitle);
        }
        for b in &s.blocks {
            match b {
                Block::Table(t) => {
                    out.push('\n');
                    out.push_str(&table(t));
                }
                Block::Note(n) => {
                    let _ = writeln!(out, "\n  {n}");
                }
                Block::Chart(_) => {}
            }
        }
        out.push('\n');
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
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Per class");
        assert_eq!(lines[1], "  class  mean ms  requests");
        assert_eq!(lines[3], "  light     12.5       100");
        assert_eq!(lines[4], "  heavy     3.25     12345");
        assert_eq!(lines[2].trim().len(), lines[1].trim().len());
    }
}
