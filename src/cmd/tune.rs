//! `ordo tune`: OS-scheduler experiments that always restore the machine — run (or plan with --dry-run),
//! resume, show, export, list and recover. Glue between the command line and ordo-tune's runner and store.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use ordo_sys::knobs::{RealThreads, SysRoot};
use ordo_tune::runner::{self, RunError, RunOptions};
use ordo_tune::spec::Spec;
use ordo_tune::store::{self, Store};

use crate::exit::UsageError;

const DEFAULT_DB: &str = "ordo-tune.db";

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: TuneCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TuneCommand {
    /// Run an experiment file (or continue it: running the same file again resumes where it stopped).
    Run(RunArgs),
    /// Continue the newest unfinished experiment in the database.
    Resume(StoreArgs),
    /// Print an experiment's analysis: per-configuration statistics, seed 000's table, main effects,
    /// Welch's t-tests against the baseline (Holm-corrected), scalability, the best configuration.
    Show(ShowArgs),
    /// List the experiments in a database.
    List(ListArgs),
    /// Export an experiment's runs as CSV or everything as JSON.
    Export(ExportArgs),
    /// Restore every knob value recorded in a journal (after a crash or SIGKILL) and stop the processes
    /// the run had started, then remove it.
    Recover(RecoverArgs),
    /// Merge the newest experiment of each store into a new store (e.g. one run per kernel), refusing
    /// experiments that are not the same experiment.
    Merge(MergeArgs),
    /// Compare two runs of one experiment configuration by configuration (Welch's t-test, Holm-corrected):
    /// two stores (the newest experiment of each), or two experiments of one (merged) store.
    Compare(CompareArgs),
}

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The stores to merge (two or more).
    #[arg(value_name = "DB", num_args = 2.., required = true)]
    pub inputs: Vec<PathBuf>,
    /// The new store to write (must not exist).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// Merge experiments whose workload, target, objective or score differ (never different knobs or
    /// configurations); every later output of the merged store carries a warning saying what differs.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// One store (two of its experiments) or two stores (the newest experiment of each).
    #[arg(value_name = "DB", num_args = 1..=2, required = true)]
    pub dbs: Vec<PathBuf>,
    /// Experiment A (default: with one store, the second newest; with two, the newest of the first).
    #[arg(long, short = 'a', value_name = "ID")]
    pub a: Option<i64>,
    /// Experiment B, compared against A (default: the newest of its store).
    #[arg(long, short = 'b', value_name = "ID")]
    pub b: Option<i64>,
    /// The comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// Compare experiments whose workload, target, objective or score differ, with a warning on the
    /// output saying what differs (configurations must still match).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// SQLite database of experiments.
    #[arg(long, value_name = "FILE", default_value = DEFAULT_DB)]
    pub db: PathBuf,
    /// Journal of original knob values (default: the database path + `.journal`).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Resolve /proc/sys, debugfs and cgroup knobs under DIR instead of / (tests).
    #[arg(long, value_name = "DIR", hide = true)]
    pub sys_root: Option<PathBuf>,
    /// When another experiment holds one of the knobs (machine-wide lock), wait up to this long for it
    /// instead of refusing at once ("30s", "10m").
    #[arg(long, value_name = "DURATION", value_parser = parse_wait)]
    pub wait_lock: Option<std::time::Duration>,
}

fn parse_wait(s: &str) -> Result<std::time::Duration, String> {
    ordo_tune::spec::parse_duration(s)
}

/// The flags that point a later command at the same store, journal and root as this one (the resume hint
/// printed after an interruption dropped `--db`, so following it resumed nothing).
fn store_flags(a: &StoreArgs) -> String {
    let quote = |p: &Path| {
        let s = p.display().to_string();
        if s.contains(char::is_whitespace) {
            format!("'{s}'")
        } else {
            s
        }
    };
    let mut out = String::new();
    if a.db != Path::new(DEFAULT_DB) {
        out.push_str(&format!(" --db {}", quote(&a.db)));
    }
    if let Some(j) = &a.journal {
        out.push_str(&format!(" --journal {}", quote(j)));
    }
    if let Some(r) = &a.sys_root {
        out.push_str(&format!(" --sys-root {}", quote(r)));
    }
    out
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The experiment file (TOML; see docs/tune.md).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print the plan (knob checks, configurations, commands, estimated duration) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// SQLite database of experiments.
    #[arg(value_name = "DB", default_value = DEFAULT_DB)]
    pub db: PathBuf,
    /// Experiment id (default: the newest).
    #[arg(long, short = 'e', value_name = "ID")]
    pub experiment: Option<i64>,
    /// Analyse this metric instead of the experiment's score (e.g. web.p99_ms, target.cpu_us_per_req).
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// With --metric: lower is better.
    #[arg(long, requires = "metric")]
    pub minimize: bool,
    /// The analysis as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[arg(value_name = "DB", default_value = DEFAULT_DB)]
    pub db: PathBuf,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[arg(value_name = "DB", default_value = DEFAULT_DB)]
    pub db: PathBuf,
    #[arg(long, short = 'e', value_name = "ID")]
    pub experiment: Option<i64>,
    #[arg(long, short = 'f', value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Write here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    /// The journal to restore from.
    #[arg(long, value_name = "FILE", default_value = "ordo-tune.db.journal")]
    pub journal: PathBuf,
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

fn journal_for(db: &Path, journal: &Option<PathBuf>) -> PathBuf {
    journal.clone().unwrap_or_else(|| {
        let mut s = db.as_os_str().to_owned();
        s.push(".journal");
        PathBuf::from(s)
    })
}

fn options(a: &StoreArgs) -> RunOptions {
    let stop = Arc::new(AtomicBool::new(false));
    RunOptions {
        db: a.db.clone(),
        journal: journal_for(&a.db, &a.journal),
        root: match &a.sys_root {
            Some(r) => SysRoot::at(r),
            None => SysRoot::real(),
        },
        threads: Arc::new(RealThreads),
        ordo: std::env::current_exe().ok(),
        stop,
        progress: !a.no_progress,
        run_limit: None,
        print: true,
        lock_wait: a.wait_lock.unwrap_or_default(),
    }
}

fn map_run_error(e: RunError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

fn finish(outcome: runner::Outcome, how_to_resume: &str, db: &Path) -> anyhow::Result<ExitCode> {
    println!();
    print!("{}", ordo_tune::analysis::render(&outcome.analysis));
    write_report(db, outcome.analysis.experiment);
    if outcome.interrupted {
        eprintln!(
            "interrupted after {} run(s) in this session; every knob was restored. Resume with `{how_to_resume}`.",
            outcome.runs_this_session
        );
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// The experiment's HTML report next to the store (`tune.db` → `tune-<id>.html`), rendered by ordo-report;
/// a failure to write it is a warning, never a failed experiment.
fn write_report(db: &Path, experiment: i64) {
    let stem = db
        .file_stem()
        .map_or_else(|| "tune".into(), |s| s.to_string_lossy().into_owned());
    let html = db.with_file_name(format!("{stem}-{experiment}.html"));
    let written =
        ordo_report::Input::tune_store(db, Some(experiment), &ordo_tune::export::read_store)
            .map_err(ordo_report::ReportError::from)
            .and_then(|input| ordo_report::write_html(&[input], &html));
    match written {
        Ok(()) => println!("report: {}", html.display()),
        Err(e) => eprintln!("warning: no HTML report: {e}"),
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        TuneCommand::Run(a) => {
            let spec = Spec::from_file(&a.file).map_err(usage)?;
            let opts = options(&a.store);
            if a.dry_run {
                let plan = runner::plan(&spec, &opts, false).map_err(map_run_error)?;
                print!("{}", plan.render());
                for s in plan.skipped() {
                    println!("note: {s}");
                }
                let refused = plan.refusals();
                if !refused.is_empty() {
                    return Err(usage(RunError::Refused(refused)));
                }
                if plan.configs.len() < 2 && plan.search.is_none() {
                    println!(
                        "note: {} — `ordo tune run` would refuse",
                        runner::NOTHING_TO_COMPARE
                    );
                }
                println!("dry run: nothing was changed");
                return Ok(ExitCode::SUCCESS);
            }
            runner::install_signal_flag(opts.stop.clone());
            let outcome = ordo_tune::run(&spec, &opts).map_err(map_run_error)?;
            finish(
                outcome,
                &format!(
                    "ordo tune run {}{}",
                    a.file.display(),
                    store_flags(&a.store)
                ),
                &opts.db,
            )
        }
        TuneCommand::Resume(a) => {
            let opts = options(&a);
            runner::install_signal_flag(opts.stop.clone());
            let outcome = ordo_tune::resume(&opts).map_err(map_run_error)?;
            finish(
                outcome,
                &format!("ordo tune resume{}", store_flags(&a)),
                &opts.db,
            )
        }
        TuneCommand::Show(a) => {
            let store = open_ro(&a.db)?;
            let id = match a.experiment {
                Some(id) => id,
                None => store.latest().map_err(usage)?,
            };
            let data = store.load(id).map_err(usage)?;
            let analysis = match &a.metric {
                Some(m) => {
                    if !data.metric_names().contains(m) {
                        return Err(usage(format!(
                            "experiment {id} has no metric `{m}`; it has: {}",
                            data.metric_names().join(", ")
                        )));
                    }
                    let obj = if a.minimize {
                        ordo_tune::spec::Objective::Minimize
                    } else {
                        ordo_tune::spec::Objective::Maximize
                    };
                    ordo_tune::analysis::analyze_metric(&data, m, obj)
                }
                None => ordo_tune::analysis::analyze(&data),
            };
            if a.json {
                let doc = ordo_tune::export::analysis(&data, analysis);
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                if let Some(fp) = data.fingerprint() {
                    println!(
                        "machine: {} — Linux {} ({} cores, {}{}), {}",
                        fp.hostname,
                        fp.kernel_release,
                        fp.cores,
                        fp.config_hz
                            .map(|h| format!("HZ={h}, "))
                            .unwrap_or_default(),
                        fp.preemption
                            .clone()
                            .unwrap_or_else(|| "preemption unknown".into()),
                        fp.cpu_model
                    );
                }
                print!("{}", ordo_tune::analysis::render(&analysis));
            }
            Ok(ExitCode::SUCCESS)
        }
        TuneCommand::List(a) => {
            let store = open_ro(&a.db)?;
            for e in store.list_experiments()? {
                println!("{:>4}  {:<11}  {}  {}", e.id, e.status, e.name, e.spec_path);
            }
            Ok(ExitCode::SUCCESS)
        }
        TuneCommand::Export(a) => {
            let store = open_ro(&a.db)?;
            let id = match a.experiment {
                Some(id) => id,
                None => store.latest().map_err(usage)?,
            };
            let data = store.load(id).map_err(usage)?;
            let text = match a.format {
                ExportFormat::Csv => store::to_csv(&data),
                ExportFormat::Json => {
                    serde_json::to_string_pretty(&ordo_tune::export::experiment(data))? + "\n"
                }
            };
            match a.output {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => std::io::stdout().write_all(text.as_bytes())?,
            }
            Ok(ExitCode::SUCCESS)
        }
        TuneCommand::Merge(a) => merge(a),
        TuneCommand::Compare(a) => compare(a),
        TuneCommand::Recover(a) => {
            if !a.journal.exists() {
                println!("{}: no journal, nothing to restore", a.journal.display());
                return Ok(ExitCode::SUCCESS);
            }
            let notes = ordo_sys::knobs::recover(&a.journal, &RealThreads)
                .with_context(|| format!("recovering from {}", a.journal.display()))?;
            for n in &notes {
                println!("{n}");
            }
            if notes.iter().any(|n| n.failed()) {
                eprintln!(
                    "some values could not be restored; the journal {} is kept",
                    a.journal.display()
                );
                return Ok(ExitCode::from(1));
            }
            println!("{} change(s) restored; journal removed", notes.len());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn compare_error(e: ordo_tune::compare::CompareError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        anyhow::Error::new(e)
    }
}

fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let done = ordo_tune::compare::merge(&a.inputs, &a.output, a.force).map_err(compare_error)?;
    if let Some(w) = &done.warning {
        println!("{w}");
    }
    for m in &done.merged {
        println!(
            "{}: experiment {} -> {} experiment {} ({})",
            m.input.display(),
            m.old,
            a.output.display(),
            m.new,
            m.machine
        );
    }
    println!(
        "compare them with `ordo tune compare {}{}`",
        a.output.display(),
        if a.force { " --force" } else { "" }
    );
    if let Some(w) = &done.warning {
        println!("{w}");
    }
    Ok(ExitCode::SUCCESS)
}

fn compare(a: CompareArgs) -> anyhow::Result<ExitCode> {
    use ordo_tune::compare::pick;
    let first = open_ro(&a.dbs[0])?;
    let (ea, eb) = match a.dbs.get(1) {
        Some(second) => {
            let second = open_ro(second)?;
            (pick(&first, a.a), pick(&second, a.b))
        }
        None => {
            let ids: Vec<i64> = first.list_experiments()?.iter().map(|e| e.id).collect();
            if ids.len() < 2 && (a.a.is_none() || a.b.is_none()) {
                return Err(usage(format!(
                    "{}: holds {} experiment(s); compare needs two (merge two stores with `ordo tune merge`, or give a second store)",
                    a.dbs[0].display(),
                    ids.len()
                )));
            }
            let n = ids.len();
            (
                pick(&first, a.a.or(ids.get(n.wrapping_sub(2)).copied())),
                pick(&first, a.b.or(ids.last().copied())),
            )
        }
    };
    let (ea, eb) = (ea.map_err(compare_error)?, eb.map_err(compare_error)?);
    let c = ordo_tune::compare::compare(&ea, &eb, a.force).map_err(compare_error)?;
    if a.json {
        let doc = ordo_tune::export::comparison(c);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", ordo_tune::compare::render(&c));
    }
    Ok(ExitCode::SUCCESS)
}

fn open_ro(db: &Path) -> anyhow::Result<Store> {
    if !db.exists() {
        return Err(usage(format!("{}: no such database", db.display())));
    }
    let store = Store::open_read_only(db).with_context(|| format!("opening {}", db.display()))?;
    // A file that is not an ordo tune store (or not SQLite at all) fails on the first query; name it.
    store
        .list_experiments()
        .map_err(|e| usage(format!("{}: not an ordo tune store ({e})", db.display())))?;
    Ok(store)
}
