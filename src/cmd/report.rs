//! `ordo report`: command-line arguments and glue to the ordo-report library — read every input, then write
//! the self-contained HTML page and/or print the terminal tables; `ordo report merge` joins the bench
//! results of several generator machines (ordo-bench's merge) into one.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::exit::UsageError;

/// Render results (demo, bench, probe JSON) as one self-contained HTML page or terminal tables.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Examples:\n  ordo report run.json -o run.html\n  \
    ordo report --text a.json b.json\n  \
    ordo report merge gen1.json gen2.json gen3.json --save all.json   # bench results of a fleet"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<ReportCommand>,
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

#[derive(Debug, clap::Subcommand)]
pub enum ReportCommand {
    /// Merge `ordo bench --save` results of one workload run at once from several generator machines into
    /// one result with exact percentiles (from their summed HDR histograms), counts, errors and bytes
    /// summed, and a line per machine. Results of different workloads are refused with what differs.
    Merge(MergeArgs),
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// `ordo bench --save` (or `--json`) results, two or more: one per generator machine.
    #[arg(required = true, num_args = 2.., value_name = "RESULT")]
    pub inputs: Vec<PathBuf>,
    /// Write the merged result (bench JSON, which `ordo report` renders and merges again) to FILE.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Merge results whose workloads differ (target, method, loop, rate, length, mix, protocol, classes);
    /// every output of the merged result then carries a warning saying what differs.
    #[arg(long)]
    pub force: bool,
    /// Print the merged result as JSON instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Print wrk's short summary instead of the text report.
    #[arg(long, conflicts_with = "json")]
    pub brief: bool,
}

/// Reads one `ordo bench` result, saying which file and what is wrong.
fn read_bench(path: &std::path::Path) -> anyhow::Result<ordo_bench::BenchReport> {
    let name = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read {name}: {e}")))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| UsageError(format!("{name}: not JSON: {e}")))?;
    match v.get("kind").and_then(|k| k.as_str()) {
        Some("bench") => {}
        Some(k) => {
            return Err(UsageError(format!(
                "{name}: an `ordo {k}` result; only `ordo bench` results merge"
            ))
            .into());
        }
        None => {
            return Err(UsageError(format!(
                "{name}: not an ordo result (no \"kind\"); merge reads `ordo bench --save` files"
            ))
            .into());
        }
    }
    Ok(serde_json::from_value(v)
        .map_err(|e| UsageError(format!("{name}: not a valid bench result: {e}")))?)
}

fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut inputs = Vec::with_capacity(a.inputs.len());
    for p in &a.inputs {
        inputs.push((p.display().to_string(), read_bench(p)?));
    }
    let merged = ordo_bench::merge(&inputs, a.force).map_err(|e| UsageError(e.to_string()))?;
    for w in &merged.warnings {
        eprintln!("ordo report merge: {w}");
    }
    let json = || -> anyhow::Result<String> {
        let mut s = serde_json::to_string_pretty(&merged).context("serialising the result")?;
        s.push('\n');
        Ok(s)
    };
    if let Some(path) = &a.save {
        std::fs::write(path, json()?)
            .map_err(|e| UsageError(format!("--save {}: cannot write: {e}", path.display())))?;
        eprintln!("ordo report merge: wrote {}", path.display());
    }
    let out = if a.json {
        json()?
    } else if a.brief {
        ordo_bench::print::brief(&merged)
    } else {
        ordo_bench::print::text(&merged)
    };
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(ReportCommand::Merge(a)) = args.command {
        return merge(a);
    }
    let inputs = ordo_report::load_all(&args.inputs, Some(&ordo_tune::export::read_store))
        .map_err(|e| UsageError(e.to_string()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        crate::cmd::parse_args("report", args)
    }

    #[test]
    fn merge_is_a_subcommand_beside_the_inputs() {
        let a = parse(&["a.json", "b.json", "--text"]).unwrap();
        assert!(a.command.is_none());
        assert_eq!(a.inputs.len(), 2);
        let a = parse(&["merge", "a.json", "b.json", "--save", "all.json", "--force"]).unwrap();
        let Some(ReportCommand::Merge(m)) = a.command else {
            panic!("{a:?}")
        };
        assert_eq!(m.inputs.len(), 2);
        assert!(m.force);
        assert_eq!(m.save.as_deref(), Some(std::path::Path::new("all.json")));
        // one result is not a merge
        assert!(parse(&["merge", "a.json"]).is_err());
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn merge_names_the_file_that_is_not_a_bench_result() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("demo.json");
        std::fs::write(&p, r#"{"kind": "demo", "version": 1}"#).unwrap();
        let e = read_bench(&p).unwrap_err().to_string();
        assert!(e.contains("demo.json: an `ordo demo` result"), "{e}");
        std::fs::write(&p, "{").unwrap();
        let e = read_bench(&p).unwrap_err().to_string();
        assert!(e.contains("demo.json: not JSON"), "{e}");
        let e = read_bench(&dir.path().join("none.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }
}
