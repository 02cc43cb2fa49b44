//! The report as a document independent of its output: ordo-doc's sections of tables, key-value blocks and
//! notes, with this crate's charts as their figures. Each input kind builds sections once; the HTML
//! renderer draws everything and ordo-doc's terminal renderer prints the tables and notes, so the terminal
//! and the page always show the same summaries.

use crate::svg::{BarChart, XyChart};

pub use ordo_doc::Table;

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

/// One piece of a section: a table, key-value block or note, or a chart.
pub type Block = ordo_doc::Block<Box<Chart>>;

/// A titled part of the report: one per input, plus comparisons.
pub type Section = ordo_doc::Section<Box<Chart>>;

impl From<XyChart> for Block {
    fn from(c: XyChart) -> Block {
        Block::Figure(Box::new(Chart::Xy(c)))
    }
}

impl From<BarChart> for Block {
    fn from(c: BarChart) -> Block {
        Block::Figure(Box::new(Chart::Bar(c)))
    }
}
