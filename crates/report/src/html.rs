//! The HTML page: one self-contained, XHTML-compatible file (inline CSS, inline SVG, no scripts, no fonts
//! or anything else fetched from the network) with a header describing the inputs and machines, a table of
//! contents, and one section per input or comparison. Readable on screen and when printed.

use std::fmt::Write as _;

use ordo_doc::{Align, KeyValue};

use crate::doc::{Block, Section, Table};
use crate::svg::escape;

/// What the header says about one input.
#[derive(Clone, Debug)]
pub(crate) struct InputLine {
    pub file: String,
    pub kind: String,
    pub label: String,
    /// Each machine with the part of the input measured there ("" when there is one machine).
    pub machines: Vec<(String, Vec<(String, String)>)>,
    /// Printed as a banner under the header (a tune store merged with `--force`).
    pub warnings: Vec<String>,
}

const CSS: &str = r#"
:root { --fg: #1d2430; --muted: #5b6472; --line: #d9dee5; --bg: #f5f7fa; --card: #ffffff; --accent: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", Arial, sans-serif; }
header.page { background: #14324a; color: #ffffff; padding: 28px 40px 22px; }
header.page h1 { margin: 0 0 4px; font-size: 26px; font-weight: 650; letter-spacing: 0.2px; }
header.page p { margin: 0; color: #c9d6e2; }
header.page table { margin-top: 14px; border-collapse: collapse; font-size: 13px; color: #e8eef4; }
header.page th, header.page td { text-align: left; padding: 3px 16px 3px 0; vertical-align: top; }
header.page th { color: #9fb6ca; font-weight: 600; }
nav.toc { padding: 10px 40px; background: #e9eef3; border-bottom: 1px solid var(--line); font-size: 14px; }
nav.toc a { color: var(--accent); text-decoration: none; margin-right: 18px; }
main { padding: 8px 32px 40px; max-width: 1680px; }
section.input { margin: 26px 0; }
section.input > h2 { font-size: 21px; margin: 0 0 2px; }
section.input > p.subtitle { margin: 0 0 12px; color: var(--muted); font-size: 14px; }
.grid { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
figure.chart { margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 6px;
  padding: 10px 12px 8px; flex: 0 1 590px; max-width: 100%; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart figcaption { font-size: 13px; color: var(--muted); margin-top: 4px; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", Arial, sans-serif; fill: #1d2430; }
svg .tick { font-size: 11px; fill: #4a5361; }
svg .axis-label { font-size: 12.5px; font-weight: 600; }
svg .legend-text { font-size: 12px; }
svg .plot-bg { fill: #fbfcfd; }
svg .frame { fill: none; stroke: #9aa3ae; stroke-width: 1; }
svg .grid { stroke: #e3e7ec; stroke-width: 1; }
svg .ref-line line { stroke: #333333; stroke-width: 1.2; stroke-dasharray: 7 4; }
svg .ref-line text { font-size: 11.5px; fill: #333333; paint-order: stroke; stroke: #ffffff; stroke-width: 3px; stroke-linejoin: round; }
svg .flag { paint-order: stroke; stroke: #ffffff; stroke-width: 3px; }
svg .err { stroke: #222222; stroke-width: 1.3; fill: none; }
svg .flag { font-size: 14px; font-weight: 700; fill: #b03000; }
.tables { display: flex; flex-wrap: wrap; gap: 18px; margin-top: 16px; align-items: flex-start; }
table.summary { border-collapse: collapse; background: var(--card); border: 1px solid var(--line); font-size: 13px; }
table.summary caption { text-align: left; font-weight: 600; padding: 6px 2px; caption-side: top; }
table.summary th, table.summary td { padding: 4px 10px; border-bottom: 1px solid #edf0f3; white-space: nowrap; }
table.summary th { background: #eef2f6; font-weight: 600; text-align: left; }
table.summary td.r, table.summary th.r { text-align: right; font-variant-numeric: tabular-nums; }
p.note { margin: 10px 0; padding: 8px 12px; background: #fff8e6; border-left: 3px solid #E69F00; font-size: 14px; max-width: 1100px; }
header.page p.warning { margin: 12px 0 0; padding: 8px 12px; background: #b03000; color: #ffffff; font-weight: 650; max-width: 1100px; }
footer { padding: 16px 40px 30px; color: var(--muted); font-size: 12px; }
@media print {
  body { background: #ffffff; font-size: 11pt; }
  header.page { background: #ffffff; color: #000000; padding: 0 0 8px; border-bottom: 2px solid #000000; }
  header.page p, header.page table, header.page th { color: #000000; }
  nav.toc { display: none; }
  main { padding: 0; max-width: none; }
  figure.chart { break-inside: avoid; page-break-inside: avoid; border: none; padding: 0; flex-basis: 100%; }
  table.summary { break-inside: avoid; page-break-inside: avoid; }
  section.input { break-before: auto; }
  section.input > h2 { break-after: avoid; page-break-after: avoid; }
  p.note { background: none; border-left: 2px solid #000000; }
}
"#;

/// Render a table as HTML.
pub(crate) fn table(t: &Table) -> String {
    let mut out = String::from("<table class=\"summary\">");
    if !t.title.is_empty() {
        let _ = write!(out, "<caption>{}</caption>", escape(&t.title));
    }
    let class = |i: usize| match t.align.get(i) {
        Some(Align::Left) => "",
        _ => " class=\"r\"",
    };
    out.push_str("<thead><tr>");
    for (i, h) in t.headers.iter().enumerate() {
        let _ = write!(out, "<th{}>{}</th>", class(i), escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(i), escape(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// Render a key-value block as a two-column table (a detail line in the value's cell, under it).
pub(crate) fn key_value(kv: &KeyValue) -> String {
    let mut out = String::from("<table class=\"summary\">");
    if !kv.title.is_empty() {
        let _ = write!(out, "<caption>{}</caption>", escape(&kv.title));
    }
    out.push_str("<tbody>");
    for p in &kv.pairs {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}",
            escape(&p.key),
            escape(&p.value)
        );
        if let Some(d) = &p.detail {
            let _ = write!(out, "<br/>{}", escape(d));
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// Render the whole page.
pub(crate) fn page(
    title: &str,
    generated: &str,
    inputs: &[InputLine],
    sections: &[Section],
) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n<meta name=\"generator\" content=\"ordo report\"/>\n");
    let _ = writeln!(out, "<title>{}</title>", escape(title));
    let _ = writeln!(out, "<style>{CSS}</style>\n</head>\n<body>");
    let _ = write!(
        out,
        "<header class=\"page\"><h1>{}</h1><p>{} input{} · generated {}</p>",
        escape(title),
        inputs.len(),
        if inputs.len() == 1 { "" } else { "s" },
        escape(generated)
    );
    if !inputs.is_empty() {
        out.push_str("<table class=\"inputs\"><thead><tr><th>input</th><th>kind</th><th>run</th><th>machine</th></tr></thead><tbody>");
        for i in inputs {
            let machines: Vec<String> = i
                .machines
                .iter()
                .map(|(who, facts)| {
                    let facts: Vec<String> =
                        facts.iter().map(|(k, v)| format!("{k} {v}")).collect();
                    let facts = if facts.is_empty() {
                        "not recorded in the result".to_string()
                    } else {
                        facts.join(" · ")
                    };
                    if who.is_empty() {
                        escape(&facts)
                    } else {
                        format!("{}: {}", escape(who), escape(&facts))
                    }
                })
                .collect();
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&i.file),
                escape(&i.kind),
                escape(&i.label),
                if machines.is_empty() {
                    "not recorded in the result".to_string()
                } else {
                    machines.join("<br/>")
                }
            );
        }
        out.push_str("</tbody></table>");
        for w in inputs.iter().flat_map(|i| &i.warnings) {
            let _ = write!(out, "<p class=\"warning\">{}</p>", escape(w));
        }
    }
    out.push_str("</header>\n");
    if sections.len() > 1 {
        out.push_str("<nav class=\"toc\">");
        for s in sections {
            let _ = write!(
                out,
                "<a href=\"#{}\">{}</a>",
                escape(&s.id),
                escape(&s.title)
            );
        }
        out.push_str("</nav>\n");
    }
    out.push_str("<main>\n");
    for s in sections {
        let _ = write!(
            out,
            "<section class=\"input\" id=\"{}\"><h2>{}</h2>",
            escape(&s.id),
            escape(&s.title)
        );
        if !s.subtitle.is_empty() {
            let _ = write!(out, "<p class=\"subtitle\">{}</p>", escape(&s.subtitle));
        }
        let mut open: Option<&str> = None;
        for b in &s.blocks {
            let want = match b {
                Block::Figure(_) => Some("grid"),
                Block::Table(_) | Block::KeyValue(_) => Some("tables"),
                Block::Note(_) => None,
            };
            if open != want {
                if open.is_some() {
                    out.push_str("</div>");
                }
                if let Some(w) = want {
                    let _ = write!(out, "<div class=\"{w}\">");
                }
                open = want;
            }
            match b {
                Block::Figure(c) => out.push_str(&c.render()),
                Block::Table(t) => out.push_str(&table(t)),
                Block::KeyValue(kv) => out.push_str(&key_value(kv)),
                Block::Note(n) => {
                    let _ = write!(
                        out,
                        "<p class=\"note\">{}</p>",
                        escape(n).replace('\n', "<br/>")
                    );
                }
            }
        }
        if open.is_some() {
            out.push_str("</div>");
        }
        out.push_str("</section>\n");
    }
    out.push_str("</main>\n<footer>Made by <code>ordo report</code>. Each chart's points carry their values: hover for a tooltip. Self-contained: no scripts, fonts or network.</footer>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key-value block is a captioned two-column table, its detail under the value, everything escaped;
    /// a multi-line note keeps its lines.
    #[test]
    fn key_values_and_notes_in_a_section() {
        let mut kv = KeyValue::new("Server <1>");
        kv.pair("Port", "80");
        kv.pair_with("Failed", "3", "(Connect: 3 & more)");
        assert_eq!(
            key_value(&kv),
            "<table class=\"summary\"><caption>Server &lt;1&gt;</caption><tbody>\
             <tr><th>Port</th><td>80</td></tr>\
             <tr><th>Failed</th><td>3<br/>(Connect: 3 &amp; more)</td></tr></tbody></table>"
        );
        let s = Section {
            id: "s".into(),
            title: "t".into(),
            subtitle: String::new(),
            blocks: vec![kv.into(), Block::Note("one\ntwo".into())],
        };
        let p = page("x", "now", &[], &[s]);
        assert!(p.contains("<div class=\"tables\"><table class=\"summary\"><caption>Server"));
        assert!(p.contains("<p class=\"note\">one<br/>two</p>"));
    }
}
