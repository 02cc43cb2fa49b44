//! `ordo report`: command-line arguments and glue to the ordo-report library — read every input, then write
//! the self-contained HTML page and/or print the terminal tables.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::exit::UsageError;

/// Render results (demo, bench, probe JSON) as one self-contained HTML page or terminal tables.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Result files: `ordo demo` JSON, `ordo bench --json`, `ordo probe ... --json`.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Where to write the HTML page (default report.html unless --text is given).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the summaries as aligned tables on stdout.
    #[arg(long)]
    pub text: bool,
    /// Title of the HTML page.
    #[arg(long, default_value = "ordo report")]
    pub title: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let inputs = ordo_report::load_all(&args.inputs).map_err(|e| UsageError(e.to_string()))?;
    if args.text {
        print!("{}", ordo_report::render_text(&inputs));
    }
    let output = match (&args.output, args.text) {
        (Some(o), _) => Some(o.clone()),
        (None, false) => Some(PathBuf::from("report.html")),
        (None, true) => None,
    };
    if let Some(path) = output {
        let opts = ordo_report::Options {
            title: args.title.clone(),
            generated: None,
        };
        let page = ordo_report::render_html_with(&inputs, &opts);
        std::fs::write(&path, page)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
        eprintln!("ordo report: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
