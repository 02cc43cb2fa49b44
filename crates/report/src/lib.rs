//! ordo-report: renders any ordo result as a self-contained HTML page (inline SVG) or terminal tables.
//!
//! ```no_run
//! let inputs = ordo_report::load_all(&["demo.json", "bench.json"], None).unwrap();
//! ordo_report::write_html(&inputs, std::path::Path::new("report.html")).unwrap();
//! print!("{}", ordo_report::render_text(&inputs));
//! ```

mod compare;
mod doc;
mod fmt;
mod html;
mod inputs;
mod machine;
mod svg;

use std::path::Path;

pub use doc::{Block, Section, Table};
pub use inputs::{
    EXPECTED, Input, InputData, InputError, Kind, StoreReader, load, load_all, parse,
};
pub use machine::Machine;

/// Errors of the library: reading inputs and writing the page.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{path}: cannot write the report: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no input to report on")]
    Empty,
}

/// Page options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The page title.
    pub title: String,
    /// When the page was generated, as shown in the header; `None` means now.
    pub generated: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            title: "ordo report".into(),
            generated: None,
        }
    }
}

/// Every section of the report: one per input, then comparisons of inputs of the same kind.
pub fn sections(inputs: &[Input]) -> Vec<Section> {
    let mut out: Vec<Section> = inputs
        .iter()
        .enumerate()
        .flat_map(|(i, input)| input.sections(&format!("input-{}", i + 1)))
        .collect();
    out.extend(compare::sections(inputs));
    out
}

/// The whole HTML page for `inputs`.
pub fn render_html(inputs: &[Input]) -> String {
    render_html_with(inputs, &Options::default())
}

/// The whole HTML page, with options.
pub fn render_html_with(inputs: &[Input], opts: &Options) -> String {
    let generated = opts.generated.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        fmt::civil_utc(now)
    });
    let lines: Vec<html::InputLine> = inputs
        .iter()
        .map(|i| html::InputLine {
            file: i.name.clone(),
            kind: i.kind().as_str().to_string(),
            label: i.summary(),
            machines: i
                .machines()
                .into_iter()
                .map(|(who, m)| (who, m.facts()))
                .collect(),
            warnings: i.warnings(),
        })
        .collect();
    html::page(&opts.title, &generated, &lines, &sections(inputs))
}

/// Write the HTML page for `inputs` to `path`.
pub fn write_html(inputs: &[Input], path: &Path) -> Result<(), ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::Empty);
    }
    std::fs::write(path, render_html(inputs)).map_err(|source| ReportError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// The same summaries as aligned terminal tables (ordo-doc's terminal renderer; charts left out).
pub fn render_text(inputs: &[Input]) -> String {
    ordo_doc::text::sections(&sections(inputs))
}
