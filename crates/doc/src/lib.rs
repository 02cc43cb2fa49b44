//! ordo-doc: the one document model of ordo's output — tables, key-value blocks and notes in sections — and
//! its renderers, so a command builds a document and never formats columns itself. The terminal renderer is
//! [`text`]; the JSON rendering is the model's `Serialize`; `ordo report` draws the same blocks in HTML
//! beside the charts it adds through [`Block::Figure`].
//!
//! ```
//! use ordo_doc::{Block, Document, KeyValue, Table};
//! let mut t = Table::new("Per class", &["class", "requests"]);
//! t.row(vec!["light".into(), "100".into()]);
//! let mut kv = KeyValue::new("").width(24);
//! kv.pair("Complete requests", "100");
//! let doc: Document = Document::of(vec![Block::from(kv), Block::from(t)]);
//! assert!(ordo_doc::text::render(&doc).starts_with("Complete requests:      100\n"));
//! ```

#![forbid(unsafe_code)]

mod model;
pub mod text;

pub use model::{Align, Block, Document, KeyValue, NoFigure, Pair, Section, Table, TableLayout};
