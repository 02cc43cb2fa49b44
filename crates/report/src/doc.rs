//! The report as a document independent of its output: sections of charts, tables and notes. Each input
//! kind builds sections once; the HTML renderer draws everything and the text renderer prints the tables and
//! notes, so the terminal and the page always show the same summaries.

use crate::svg::{BarChart, XyChart};

/// How a table column is aligned (numbers right, names left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A summary table.
#[derive(Clone, Debug)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<Vec<String>>,
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
        }
    }

    /// Left-align column `i` too.
    pub fn left(mut self, i: usize) -> Table {
        if let Some(a) = self.align.get_mut(i) {
            *a = Align::Left;
        }
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// A chart of either family.
#[derive(Clone, Debug)]
pub enum Chart {
    Xy(XyChart),
    Bar(BarChart),
}

impl Chart {
    pub fn render(&self) -> String {
        match self {
            Chart::Xy(c) => c.render(),
            Chart::Bar(c) => c.render(),
        }
    }

    pub fn caption(&self) -> &str {
        match self {
            Chart::Xy(c) => &c.caption,
            Chart::Bar(c) => &c.caption,
        }
    }
}

/// One piece of a section.
#[derive(Clone, Debug)]
pub enum Block {
    Chart(Box<Chart>),
    Table(Table),
    /// A sentence worth saying (a finding, or why a chart is missing).
    Note(String),
}

impl From<XyChart> for Block {
    fn from(c: XyChart) -> Block {
        Block::Chart(Box::new(Chart::Xy(c)))
    }
}

impl From<BarChart> for Block {
    fn from(c: BarChart) -> Block {
        Block::Chart(Box::new(Chart::Bar(c)))
    }
}

impl From<Table> for Block {
    fn from(t: Table) -> Block {
        Block::Table(t)
    }
}

/// A titled part of the report: one per input, plus comparisons.
#[derive(Clone, Debug)]
pub struct Section {
    /// Element id (unique in the page).
    pub id: String,
    pub title: String,
    /// One line under the title: what was run, where.
    pub subtitle: String,
    pub blocks: Vec<Block>,
}

impl Section {
    /// Number of charts in this section.
    pub fn chart_count(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Chart(_)))
            .count()
    }
}
