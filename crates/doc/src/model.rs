//! The model: what a document holds (sections of tables, key-value blocks, notes and figures), with no
//! rendering in it. The terminal layout hints (indent, gaps, minimum widths) are kept apart from the content
//! and left out of the JSON.

use serde::Serialize;

/// How a table column is aligned (numbers right, names left).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Align {
    Left,
    Right,
}

/// How a table sits in the terminal: the content does not change with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// Spaces before every line but the title.
    pub indent: usize,
    /// Spaces between columns.
    pub gap: usize,
    /// A line of dashes under the headers.
    pub rule: bool,
    /// Each column at least this wide (missing: no minimum), so the columns of a report stay put from run
    /// to run; a wider cell widens its column.
    pub min_widths: Vec<usize>,
}

impl Default for TableLayout {
    /// Indented by two, two spaces between columns, a rule under the headers.
    fn default() -> Self {
        TableLayout {
            indent: 2,
            gap: 2,
            rule: true,
            min_widths: Vec::new(),
        }
    }
}

/// A table: a title, headers (none: no header line), each column's alignment, and rows of cells.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<Vec<String>>,
    #[serde(skip)]
    pub layout: TableLayout,
}

impl Table {
    /// A table whose first column is left-aligned and the others right-aligned.
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            align: (0..headers.len())
                .map(|i| if i == 0 { Align::Left } else { Align::Right })
                .collect(),
            rows: Vec::new(),
            layout: TableLayout::default(),
        }
    }

    /// A table without a header line, with these alignments.
    pub fn headless(title: impl Into<String>, align: &[Align]) -> Table {
        Table {
            align: align.to_vec(),
            ..Table::new(title, &[])
        }
    }

    /// Left-align column `i` too.
    pub fn left(self, i: usize) -> Table {
        self.aligned(i, Align::Left)
    }

    /// Right-align column `i` too.
    pub fn right(self, i: usize) -> Table {
        self.aligned(i, Align::Right)
    }

    fn aligned(mut self, i: usize, a: Align) -> Table {
        if let Some(x) = self.align.get_mut(i) {
            *x = a;
        }
        self
    }

    /// The compact terminal layout of the ab/wrk-style reports: these minimum widths, one space between
    /// columns, no rule, indented by `indent`.
    pub fn columns(mut self, indent: usize, min_widths: &[usize]) -> Table {
        self.layout = TableLayout {
            indent,
            gap: 1,
            rule: false,
            min_widths: min_widths.to_vec(),
        };
        self
    }

    /// Spaces between columns.
    pub fn gap(mut self, gap: usize) -> Table {
        self.layout.gap = gap;
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// One line of a key-value block: `key: value`, and optionally a detail line under it (ab's breakdown of
/// failed requests).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pair {
    pub key: String,
    pub value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Labelled values, one a line (ab's `Complete requests:      100`), under an optional title.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KeyValue {
    pub title: String,
    pub pairs: Vec<Pair>,
    /// Spaces before each pair.
    #[serde(skip)]
    pub indent: usize,
    /// The column the values start in (after the indent); `None`: just past the longest key. A key too long
    /// for it is followed by one space.
    #[serde(skip)]
    pub key_width: Option<usize>,
}

impl KeyValue {
    /// An empty block whose values line up just past its longest key.
    pub fn new(title: impl Into<String>) -> KeyValue {
        KeyValue {
            title: title.into(),
            pairs: Vec::new(),
            indent: 0,
            key_width: None,
        }
    }

    /// Values from column `w` on (ab: 24); `0`: each value one space after its key.
    pub fn width(mut self, w: usize) -> KeyValue {
        self.key_width = Some(w);
        self
    }

    /// Indent the pairs (not the title) by `n` spaces.
    pub fn indent(mut self, n: usize) -> KeyValue {
        self.indent = n;
        self
    }

    pub fn pair(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.pairs.push(Pair {
            key: key.into(),
            value: value.into(),
            detail: None,
        });
    }

    /// A pair with a detail line under it.
    pub fn pair_with(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.pairs.push(Pair {
            key: key.into(),
            value: value.into(),
            detail: Some(detail.into()),
        });
    }
}

/// The figure type of a document that holds none: it has no value, so `Block::Figure` cannot occur.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum NoFigure {}

/// One piece of a section. `F` is what else a renderer of the section draws (`ordo report`'s charts); the
/// terminal renderer leaves figures out.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Block<F = NoFigure> {
    Table(Table),
    KeyValue(KeyValue),
    /// A sentence worth saying (a finding, a warning, why a chart is missing); it may run over lines.
    Note(String),
    Figure(F),
}

impl<F> From<Table> for Block<F> {
    fn from(t: Table) -> Block<F> {
        Block::Table(t)
    }
}

impl<F> From<KeyValue> for Block<F> {
    fn from(kv: KeyValue) -> Block<F> {
        Block::KeyValue(kv)
    }
}

/// A part of a document. A titled one (`== title ==`) is a heading with its blocks indented under it; an
/// untitled one is its blocks alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Section<F = NoFigure> {
    /// Element id (unique in a page; "" where nothing links to it).
    pub id: String,
    pub title: String,
    /// One line under the title: what was run, where.
    pub subtitle: String,
    pub blocks: Vec<Block<F>>,
}

impl<F> Section<F> {
    /// An untitled section of these blocks.
    pub fn of(blocks: Vec<Block<F>>) -> Section<F> {
        Section {
            id: String::new(),
            title: String::new(),
            subtitle: String::new(),
            blocks,
        }
    }

    /// Number of figures in this section.
    pub fn figure_count(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Figure(_)))
            .count()
    }
}

/// A whole output: its sections in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Document<F = NoFigure> {
    pub sections: Vec<Section<F>>,
}

impl<F> Document<F> {
    /// A document of one untitled section.
    pub fn of(blocks: Vec<Block<F>>) -> Document<F> {
        Document {
            sections: vec![Section::of(blocks)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON rendering is the content: tables, pairs and notes by kind, without the terminal layout.
    #[test]
    fn json_shape() {
        let mut t = Table::new("Per class", &["class", "requests"]).columns(0, &[12, 9]);
        t.row(vec!["light".into(), "100".into()]);
        let mut kv = KeyValue::new("Server").width(24).indent(2);
        kv.pair("Port", "80");
        kv.pair_with("Failed requests", "3", "(Connect: 3)");
        let doc: Document = Document {
            sections: vec![Section {
                id: "input-1".into(),
                title: "bench".into(),
                subtitle: String::new(),
                blocks: vec![kv.into(), t.into(), Block::Note("a finding".into())],
            }],
        };
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"sections": [{
                "id": "input-1", "title": "bench", "subtitle": "",
                "blocks": [
                    {"key_value": {"title": "Server", "pairs": [
                        {"key": "Port", "value": "80"},
                        {"key": "Failed requests", "value": "3", "detail": "(Connect: 3)"}
                    ]}},
                    {"table": {"title": "Per class", "headers": ["class", "requests"],
                               "align": ["left", "right"], "rows": [["light", "100"]]}},
                    {"note": "a finding"}
                ]
            }]})
        );
    }

    #[test]
    fn alignment_builders() {
        let t = Table::new("", &["a", "b", "c"]).left(2).right(0).left(9);
        assert_eq!(t.align, vec![Align::Right, Align::Right, Align::Left]);
        let h = Table::headless("x", &[Align::Right, Align::Left]);
        assert!(h.headers.is_empty());
        assert_eq!(h.align, vec![Align::Right, Align::Left]);
        let s: Section = Section::of(vec![Block::Note("n".into())]);
        assert_eq!(s.figure_count(), 0);
        let f: Section<u8> = Section::of(vec![Block::Figure(1), Block::Note("n".into())]);
        assert_eq!(f.figure_count(), 1);
    }
}
