//! The experiment file (TOML): target, workloads, knobs and levels, design, repetition rule, baseline and
//! score, parsed into a checked [`Spec`]. Every error names the file, the line and the key.
//!
//! The files: this one holds the checked model and [`Spec::parse`], which runs the others in order: `raw`
//! (the file as serde reads it), `check` (target, workloads, baseline, repeat, score, scale), `knobs` (the
//! knob table and its levels) and `design` (the design and search tables).

mod check;
mod design;
mod knobs;
mod raw;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ordo_sys::knobs::KnobId;
use ordo_util::located::{Located, Source};
use regex::Regex;

use check::{
    Ctx, check_baseline, check_repeat, check_scale, check_score, check_target, check_workloads,
};
use design::parse_design;
use knobs::check_knobs;
use raw::RawSpec;
pub use raw::{parse_duration, split_command};

/// A bad experiment file: where, which key, what is wrong (`exp.toml:17: knobs.policy: ...`), the
/// workspace's one located error.
pub type SpecError = Located;

/// Which of the target's threads the per-thread knobs act on.
#[derive(Clone, Debug)]
pub enum ThreadSel {
    All,
    /// Threads whose name (`/proc/PID/task/TID/comm`) matches.
    Name(Regex),
}

impl fmt::Display for ThreadSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadSel::All => f.write_str("all"),
            ThreadSel::Name(r) => write!(f, "/{}/", r.as_str()),
        }
    }
}

/// What is being tuned.
#[derive(Clone, Debug)]
pub enum TargetKind {
    /// `ordo serve` started as a child for each run (`{ordo} serve --config CONFIG --listen 127.0.0.1:{port}`
    /// plus `args`).
    Builtin {
        config: Option<PathBuf>,
        args: Vec<String>,
    },
    /// A command started for each run (placeholders substituted), ready when `ready_url` answers.
    Command {
        argv: Vec<String>,
    },
    /// Running processes, never started or stopped by ordo.
    Pid(i32),
    Name(String),
}

#[derive(Clone, Debug)]
pub struct TargetSpec {
    pub kind: TargetKind,
    pub ready_url: Option<String>,
    pub ready_timeout: Duration,
    pub threads: ThreadSel,
}

impl TargetSpec {
    /// Whether ordo starts (and restarts) the target itself.
    pub fn is_started(&self) -> bool {
        matches!(
            self.kind,
            TargetKind::Builtin { .. } | TargetKind::Command { .. }
        )
    }
}

/// The built-in load generator's settings (those of `ordo bench`).
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub url: String,
    pub connections: usize,
    pub threads: usize,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    /// Open loop at this total rate (req/s); closed loop when absent.
    pub rate: Option<f64>,
    pub keepalive: bool,
    pub method: String,
    pub headers: Vec<String>,
    pub body: Option<String>,
    pub timeout: Duration,
    pub warmup: Duration,
    pub mix: Option<PathBuf>,
    pub seed: u64,
}

/// How an external command's output becomes metrics.
#[derive(Clone, Debug)]
pub enum ParserKind {
    Ab,
    Wrk,
    Sysbench,
    /// Named groups become metrics (`(?P<throughput>[0-9.]+) req/s`).
    Regex(Regex),
}

#[derive(Clone, Debug)]
pub enum WorkloadKind {
    Bench(Box<BenchSpec>),
    Command {
        argv: Vec<String>,
        parser: ParserKind,
        timeout: Duration,
    },
}

#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    /// Prefix of this workload's metrics (`web.throughput`).
    pub name: String,
    pub kind: WorkloadKind,
}

/// A knob and the levels to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobSpec {
    pub id: KnobId,
    pub levels: Vec<String>,
    /// `{ levels = [...], optional = true }`: when this machine lacks the knob (missing, not writable,
    /// kernel too old) it is dropped with a message instead of refusing the experiment.
    pub optional: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Design {
    /// Every combination of levels.
    Full,
    /// Baseline, then each knob's levels with the other knobs at the baseline.
    OneAtATime,
    /// Exactly these configurations (knob -> value; knobs not named stay at the baseline).
    List(Vec<BTreeMap<String, String>>),
    /// `n` configurations drawn without replacement from the full factorial.
    Random { n: usize, seed: u64 },
    /// A model-based search over the full factorial's points (see [`crate::search`]): only the baseline
    /// is known up front; each further configuration is proposed from the trials before it.
    Search(SearchSpec),
}

/// `[design] kind = "search"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchSpec {
    /// Trials (configurations evaluated, the baseline included).
    pub budget: usize,
    /// Space-filling trials before the model proposes.
    pub initial: usize,
    pub seed: u64,
}

/// When to stop repeating.
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatRule {
    /// At least this many measured runs per configuration (>= 3 unless `allow_fewer`).
    pub min: usize,
    pub max: usize,
    /// Stop when every configuration's 95% CI half-width is at most this fraction of its mean.
    pub rel_ci: f64,
    /// Blocks run first and discarded.
    pub warmup: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    Maximize,
    Minimize,
}

/// score = sum(weight * metric).
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreSpec {
    pub objective: Objective,
    pub terms: Vec<(String, f64)>,
}

/// A checked experiment.
#[derive(Clone, Debug)]
pub struct Spec {
    pub file: PathBuf,
    /// The directory relative paths are resolved against (`{dir}`).
    pub dir: PathBuf,
    pub text: String,
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub target: TargetSpec,
    pub workloads: Vec<WorkloadSpec>,
    pub knobs: Vec<KnobSpec>,
    pub design: Design,
    pub repeat: RepeatRule,
    /// Explicit baseline values; knobs not named use the value found on the machine (not applied).
    pub baseline: BTreeMap<String, String>,
    pub score: ScoreSpec,
    /// A knob over thread or connection counts, for the scalability ratio.
    pub scale_knob: Option<String>,
    /// The base count A of the scalability ratio (default: the smallest level).
    pub scale_base: Option<f64>,
}

impl Spec {
    pub fn from_file(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Located::new(path.display().to_string(), format!("cannot read: {e}")))?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        Spec::parse(&text, path, &dir)
    }

    /// Parse `text` as if read from `file`, resolving relative paths against `dir`: the raw serde layer
    /// (types, unknown keys), then each section checked into its part of the [`Spec`].
    pub fn parse(text: &str, file: &Path, dir: &Path) -> Result<Spec, SpecError> {
        let name = file.display().to_string();
        let cx = Ctx {
            src: Source::new(&name, text),
        };
        let raw: RawSpec = cx.src.parse()?;
        let target = check_target(&cx, raw.target, dir)?;
        let workloads = check_workloads(&cx, raw.workload, dir)?;
        let knobs = check_knobs(&cx, &raw.knobs, &target, &workloads)?;
        let names: Vec<String> = knobs.iter().map(|k| k.id.to_string()).collect();
        let baseline = check_baseline(&cx, &raw.baseline, &knobs)?;
        // Design.
        let seed = raw.seed.unwrap_or(1);
        let design = parse_design(&cx, raw.design, &names, &knobs, seed)?;
        if knobs.is_empty() && !matches!(design, Design::List(_)) {
            return Err(cx.err("knobs", "", "an experiment needs at least one knob"));
        }
        let repeat = check_repeat(&cx, raw.repeat)?;
        let score = check_score(&cx, raw.score, &workloads)?;
        let (scale_knob, scale_base) = check_scale(&cx, raw.scale, raw.scale_base, &knobs)?;

        Ok(Spec {
            file: file.to_path_buf(),
            dir: dir.to_path_buf(),
            text: text.to_string(),
            name: raw.name.unwrap_or_else(|| {
                file.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "experiment".into())
            }),
            description: raw.description.unwrap_or_default(),
            seed,
            target,
            workloads,
            knobs,
            design,
            repeat,
            baseline,
            score,
            scale_knob,
            scale_base,
        })
    }

    pub fn knob(&self, name: &str) -> Option<&KnobSpec> {
        self.knobs.iter().find(|k| k.id.to_string() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(text, Path::new("exp.toml"), Path::new("/x"))
    }

    pub(super) const GOOD: &str = r#"
name = "t"
seed = 7
scale = "param:threads"

[target]
builtin = "ordo-serve"
config = "serve.toml"
args = ["--workers", "{threads}"]

[workload]
url = "http://127.0.0.1:{port}/"
connections = 20
duration = "2s"

[knobs]
"sysctl:vm.swappiness" = [10, 60]
"param:threads" = [2, 4, 8]
policy = ["rr:10"]
"sysctl:kernel.sched_rr_timeslice_ms" = [5, 100]
"debugfs:base_slice_ns" = { levels = [750000], optional = true }

[repeat]
min = 3
max = 5
ci = 0.05

[score]
weights = { "web.throughput" = 10.0, "web.p99_ms" = -1.0 }
"#;

    #[test]
    fn good_file() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.knobs.len(), 5);
        assert!(s.knob("debugfs:base_slice_ns").unwrap().optional);
        assert!(!s.knob("policy").unwrap().optional);
        assert_eq!(
            s.repeat,
            RepeatRule {
                min: 3,
                max: 5,
                rel_ci: 0.05,
                warmup: 0
            }
        );
        assert_eq!(s.baseline.get("param:threads").unwrap(), "2");
        assert_eq!(s.score.terms.len(), 2);
        assert_eq!(s.scale_knob.as_deref(), Some("param:threads"));
        assert!(
            matches!(&s.target.kind, TargetKind::Builtin { config: Some(p), .. } if p == Path::new("/x/serve.toml"))
        );
        assert_eq!(
            s.target.ready_url.as_deref(),
            Some("http://127.0.0.1:{port}/")
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse(&GOOD.replace("[10, 60]", "[10, 10]")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("knobs.sysctl:vm.swappiness"));
        assert_eq!(e.line, Some(17));
        assert!(
            e.to_string()
                .starts_with("exp.toml:17: knobs.sysctl:vm.swappiness:"),
            "{e}"
        );
        let e = parse(&GOOD.replace("min = 3", "min = 2")).unwrap_err();
        assert_eq!((e.key.as_deref(), e.line), (Some("repeat.min"), Some(24)));
        let e = parse(&GOOD.replace("connections = 20", "connections = \"x\"")).unwrap_err();
        assert!(e.line.is_some(), "{e}");
        // a type error is named by the key at its span
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(13), Some("workload.connections")),
            "{e}"
        );
        // an unknown key gets the one meant
        let e = parse(&GOOD.replace("connections = 20", "conections = 20")).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref(), e.message.as_str()),
            (
                Some(13),
                Some("workload.conections"),
                "unknown key `conections`; did you mean `connections`?"
            ),
            "{e}"
        );
        let e = parse(&GOOD.replace("duration = \"2s\"", "duration = true")).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "exp.toml:14: workload.duration: expected a number of seconds or a duration such as \"2s\" or \"500ms\", found true"
            ),
            "{e}"
        );
        let e = parse(&GOOD.replace("min = 3", "min = \"3\"")).unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(24), Some("repeat.min")),
            "{e}"
        );
        // [[workload]] tables are named by index, on the line of the key in the right table
        let two = GOOD.replace(
            "[workload]\n",
            "[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n[[workload]]\nname = \"b\"\n",
        );
        let e = parse(&two.replace("connections = 20", "connections = 0")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "exp.toml:17: workload[1].connections: must be at least 1"
        );
        let e = parse(&GOOD.replace(
            "\"param:threads\" = [2, 4, 8]",
            "\"param:workers\" = [2, 4]",
        ))
        .unwrap_err();
        assert!(e.message.contains("no effect"), "{e}");
        let e = parse(&GOOD.replace("policy = ", "bogus = ")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("knobs.bogus"));
        let e = parse(&GOOD.replace("\"web.p99_ms\"", "\"p99\"")).unwrap_err();
        assert!(e.key.as_deref().unwrap().starts_with("score"), "{e}");
        let e = parse(&GOOD.replace(
            "builtin = \"ordo-serve\"",
            "builtin = \"ordo-serve\"\npid = 3",
        ))
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("target"));
    }
}
