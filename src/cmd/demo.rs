//! `ordo demo`: the flags of the seed-003 reproduction, resolved into an `ordo_demo::DemoPlan`, run on a
//! runtime of its own with Ctrl-C handling, printed as a table, saved as JSON (and HTML when `ordo report`
//! can render it).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ordo_demo::plan::{parse_duration, parse_steps};
use ordo_demo::result::{render_header, render_step, render_verdict};
use ordo_demo::run::{Event, run_demo};
use ordo_demo::{DemoPlan, DemoPolicy, PlanInput};

use crate::exit::UsageError;
use crate::interrupt::{INTERRUPTED, stop_on_signals};

/// Reproduce seed 003's result: with lottery weights 1:2:4 and enough clients, light users see four times
/// and medium users twice the response time of heavy users.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scheduling policy of the server: lottery (the seed's, the default) or stride (deterministic).
    #[arg(long, value_name = "POLICY", ignore_case = true, value_parser = crate::values::demo_policy())]
    pub policy: Option<DemoPolicy>,
    /// The short plan: 4 steps of 5 s, 20 ms service time (about 30 s).
    #[arg(long)]
    pub quick: bool,
    /// Total client counts, comma-separated (default 50,100,150,175,200,250,300,340).
    #[arg(long, value_name = "N,N,...", value_parser = parse_step_list)]
    pub steps: Option<StepList>,
    /// Measured time per step (default 20s; 5s with --quick).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub step_duration: Option<Duration>,
    /// Unmeasured warm-up per step (default 3s; 1s with --quick).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Requests served at once (the seed's MaxClients).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Synthetic service time per request, a sleep in whole milliseconds (mean; default 50ms, 20ms with --quick).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub service: Option<Duration>,
    /// Directory for the JSON result (and HTML report).
    #[arg(long, value_name = "DIR", default_value = "ordo-results")]
    pub out: PathBuf,
    /// Print the JSON result on stdout (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `--steps` as one value (clap would otherwise treat a `Vec` as repeated values).
#[derive(Clone, Debug)]
pub struct StepList(pub Vec<usize>);

fn parse_step_list(s: &str) -> Result<StepList, String> {
    parse_steps(s).map(StepList)
}

/// `--out DIR` must be a directory we can create files in: create it, then create and remove a probe file.
fn check_writable_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    let unusable =
        |e: std::io::Error| UsageError(format!("--out {}: cannot write there: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(unusable)?;
    let probe = dir.join(format!(".ordo-demo-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(unusable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let plan = DemoPlan::resolve(PlanInput {
        policy: args.policy,
        quick: args.quick,
        steps: args.steps.map(|s| s.0),
        step_duration: args.step_duration,
        warmup: args.warmup,
        workers: args.workers,
        service: args.service,
    })
    .map_err(|e| UsageError(e.to_string()))?;

    // A result that cannot be saved is found now, not after minutes of measuring.
    check_writable_dir(&args.out)?;

    // The table goes to stdout unless stdout carries the JSON.
    let mut table: Box<dyn Write> = if args.json {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let status_line = std::io::stderr().is_terminal();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("ordo-demo")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    writeln!(table, "{}", render_header(&plan))?;
    table.flush()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    stop_on_signals(
        "ordo demo",
        "\nordo demo: stopping; saving the finished steps (Ctrl-C again to quit at once)",
        move || {
            let _ = stop_tx.send(true);
        },
        || {},
    )?;
    let outcome = rt.block_on(async {
        run_demo(&plan, stop_rx, |event| match event {
            Event::StepStarted { clients, index, of } => {
                if status_line {
                    eprint!(
                        "\r  step {}/{}: {} clients, warming up and measuring ...",
                        index + 1,
                        of,
                        clients
                    );
                }
            }
            Event::StepFinished(step) => {
                if status_line {
                    eprint!("\r\x1b[2K");
                }
                let _ = writeln!(table, "{}", render_step(step));
                let _ = table.flush();
            }
        })
        .await
    });
    // Stop the server and client tasks before printing the end.
    rt.shutdown_timeout(Duration::from_secs(2));
    let result = outcome.context("the demo failed")?;

    writeln!(table)?;
    writeln!(table, "{}", render_verdict(&result))?;
    let json_path =
        ordo_demo::result::save(&result, &args.out).context("cannot save the demo result")?;
    writeln!(table, "saved: {}", json_path.display())?;
    let html = write_html(&json_path)?;
    writeln!(table, "report: {}", html.display())?;
    table.flush()?;
    if args.json {
        println!("{}", result.to_json());
    }
    // Stopped by Ctrl-C: the finished steps are saved; 128 + SIGINT tells scripts the run is partial.
    Ok(if result.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INTERRUPTED)
    })
}

/// The HTML report next to the JSON (same name, `.html`), rendered by `ordo report` from the saved file.
fn write_html(json_path: &std::path::Path) -> anyhow::Result<PathBuf> {
    let html = json_path.with_extension("html");
    let input = ordo_report::load(json_path, None)
        .with_context(|| format!("cannot read back {}", json_path.display()))?;
    ordo_report::write_html(&[input], &html)
        .with_context(|| format!("cannot write the report {}", html.display()))?;
    Ok(html)
}
