//! The experiment file (TOML): target, workloads, knobs and levels, design, repetition rule, baseline and
//! score, parsed into a checked [`Spec`]. Every error names the file, the line and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ordo_sys::knobs::KnobId;
use ordo_util::keypath;
use ordo_util::located::{IntoSeg, Located, Seg, Source, span_of_path};
use regex::Regex;
use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};

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

// ---- raw serde layer ------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<String>,
    description: Option<String>,
    seed: Option<u64>,
    target: RawTarget,
    #[serde(default)]
    workload: OneOrMany<RawWorkload>,
    #[serde(default)]
    knobs: toml::Table,
    design: Option<RawDesign>,
    repeat: Option<RawRepeat>,
    #[serde(default)]
    baseline: toml::Table,
    score: Option<RawScore>,
    scale: Option<String>,
    scale_base: Option<f64>,
}

/// `[workload]` (one table) or `[[workload]]` (an array of them). Deserialized by hand rather than as an
/// untagged enum: that buffers the value and reports only "did not match any variant", while this hands the
/// table to `T` directly, so an error inside it keeps its key and line.
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table or an array of tables")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(m)).map(OneOrMany::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(SeqAccessDeserializer::new(s)).map(OneOrMany::Many)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A command: one string split like a shell would, or a list of arguments.
enum StrOrList {
    Str(String),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for StrOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrOrList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a command line (\"ab -n 100 URL\") or a list of arguments")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StrOrList, E> {
                Ok(StrOrList::Str(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<StrOrList, A::Error> {
                Vec::<String>::deserialize(SeqAccessDeserializer::new(s)).map(StrOrList::List)
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration: a number of seconds, or a string such as `"500ms"`.
enum DurationValue {
    Secs(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DurationValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of seconds or a duration such as \"2s\" or \"500ms\"")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<DurationValue, E> {
                Ok(DurationValue::Secs(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationValue, E> {
                Ok(DurationValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    builtin: Option<String>,
    config: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    command: Option<StrOrList>,
    ready_url: Option<String>,
    ready_timeout: Option<DurationValue>,
    pid: Option<i32>,
    name: Option<String>,
    threads: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    name: Option<String>,
    kind: Option<String>,
    // bench
    url: Option<String>,
    connections: Option<usize>,
    concurrency: Option<usize>,
    threads: Option<usize>,
    duration: Option<DurationValue>,
    requests: Option<u64>,
    rate: Option<f64>,
    keepalive: Option<bool>,
    method: Option<String>,
    #[serde(default)]
    headers: Vec<String>,
    body: Option<String>,
    timeout: Option<DurationValue>,
    warmup: Option<DurationValue>,
    mix: Option<String>,
    seed: Option<u64>,
    // command
    command: Option<StrOrList>,
    parser: Option<String>,
    regex: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDesign {
    kind: Option<String>,
    n: Option<usize>,
    budget: Option<usize>,
    initial: Option<usize>,
    seed: Option<u64>,
    #[serde(default)]
    configurations: Vec<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepeat {
    min: Option<usize>,
    max: Option<usize>,
    ci: Option<f64>,
    warmup: Option<usize>,
    allow_fewer: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScore {
    objective: Option<String>,
    metric: Option<String>,
    #[serde(default)]
    weights: BTreeMap<String, f64>,
}

// ---- helpers --------------------------------------------------------------------------------------

fn toml_value_string(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Durations in experiment files: `10`, `2.5` (seconds), `"500ms"`, `"2s"`, `"1m"`; at most 10^7 s, so no
/// deadline computed from one can overflow the clock.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = ordo_sys::units::parse_duration_or_secs(s)?;
    if d > Duration::from_secs(10_000_000) {
        return Err(format!("`{s}` is out of range (at most 10000000s)"));
    }
    Ok(d)
}

/// Split a command line on whitespace, honouring single and double quotes (no other shell syntax).
pub fn split_command(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unterminated quote in `{s}`"));
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    if out.is_empty() {
        return Err("empty command".into());
    }
    Ok(out)
}

/// Where a check's error points: a table (`"target"`, `""` for the top level) or a key path prefix
/// (`workload[1]`), plus the key under it.
trait At: Copy {
    fn path(self, key: &str) -> Vec<Seg>;
}

impl At for &str {
    fn path(self, key: &str) -> Vec<Seg> {
        [self, key]
            .into_iter()
            .filter(|k| !k.is_empty())
            .map(IntoSeg::into_seg)
            .collect()
    }
}

impl At for &Vec<Seg> {
    fn path(self, key: &str) -> Vec<Seg> {
        let mut p = self.clone();
        if !key.is_empty() {
            p.push(Seg::Key(key.to_string()));
        }
        p
    }
}

struct Ctx<'a> {
    src: Source<'a>,
}

impl Ctx<'_> {
    /// An error at `key` of `table`, on the line the file spells it (or its table's line).
    fn err(&self, table: impl At, key: &str, message: impl Into<String>) -> SpecError {
        self.src.at_path(&table.path(key), message)
    }

    fn duration(
        &self,
        table: impl At,
        key: &str,
        v: Option<DurationValue>,
        default: Duration,
    ) -> Result<Duration, SpecError> {
        match v {
            None => Ok(default),
            Some(DurationValue::Secs(s)) if (0.0..=1e7).contains(&s) => {
                Ok(Duration::from_secs_f64(s))
            }
            Some(DurationValue::Secs(s)) => {
                Err(self.err(table, key, format!("{s} is out of range")))
            }
            Some(DurationValue::Text(t)) => parse_duration(&t).map_err(|m| self.err(table, key, m)),
        }
    }

    /// A duration that must not be zero (a measured time, a timeout).
    fn positive_duration(
        &self,
        table: impl At,
        key: &str,
        v: Option<DurationValue>,
        default: Duration,
    ) -> Result<Duration, SpecError> {
        let d = self.duration(table, key, v, default)?;
        if d.is_zero() {
            return Err(self.err(table, key, "must be longer than 0"));
        }
        Ok(d)
    }

    fn command(&self, table: impl At, v: StrOrList) -> Result<Vec<String>, SpecError> {
        match v {
            StrOrList::Str(s) => split_command(&s).map_err(|m| self.err(table, "command", m)),
            StrOrList::List(l) if l.is_empty() => Err(self.err(table, "command", "empty command")),
            StrOrList::List(l) => Ok(l),
        }
    }
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

/// A knob name as the experiment spells it after parsing (`sysctl:vm.swappiness`), or the name as given.
fn canon(k: &str) -> String {
    k.parse::<KnobId>()
        .map(|id| id.to_string())
        .unwrap_or_else(|_| k.to_string())
}

/// Resolve a path from the file against the file's directory.
fn resolve(dir: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(p);
    if p.is_absolute() { p } else { dir.join(p) }
}

/// `[target]`: what is measured and how it is started.
fn check_target(cx: &Ctx<'_>, t: RawTarget, dir: &Path) -> Result<TargetSpec, SpecError> {
    let resolve = |p: &str| resolve(dir, p);
    let threads = match t.threads.as_deref() {
        None | Some("all") => ThreadSel::All,
        Some(re) => ThreadSel::Name(
            Regex::new(re).map_err(|e| cx.err("target", "threads", format!("bad regex: {e}")))?,
        ),
    };
    let chosen = [
        t.builtin.is_some(),
        t.command.is_some(),
        t.pid.is_some(),
        t.name.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if chosen != 1 {
        return Err(cx.err(
            "target",
            "",
            "set exactly one of builtin = \"ordo-serve\", command, pid or name",
        ));
    }
    let kind = if let Some(b) = t.builtin {
        if b != "ordo-serve" {
            return Err(cx.err(
                "target",
                "builtin",
                format!("unknown builtin `{b}` (only \"ordo-serve\")"),
            ));
        }
        TargetKind::Builtin {
            config: t.config.as_deref().map(resolve),
            args: t.args,
        }
    } else if let Some(c) = t.command {
        TargetKind::Command {
            argv: cx.command("target", c)?,
        }
    } else if let Some(pid) = t.pid {
        if pid <= 0 {
            return Err(cx.err("target", "pid", "must be a positive process id"));
        }
        TargetKind::Pid(pid)
    } else {
        TargetKind::Name(t.name.unwrap_or_default())
    };
    if t.config.is_some() && !matches!(kind, TargetKind::Builtin { .. }) {
        return Err(cx.err("target", "config", "only for builtin = \"ordo-serve\""));
    }
    let ready_url = match (&kind, t.ready_url) {
        (TargetKind::Builtin { .. }, None) => Some("http://127.0.0.1:{port}/".to_string()),
        (_, u) => u,
    };
    Ok(TargetSpec {
        kind,
        ready_url,
        ready_timeout: cx.positive_duration(
            "target",
            "ready_timeout",
            t.ready_timeout,
            Duration::from_secs(10),
        )?,
        threads,
    })
}

/// `[workload]` or `[[workload]]`: what load is applied during each run.
fn check_workloads(
    cx: &Ctx<'_>,
    raw: OneOrMany<RawWorkload>,
    dir: &Path,
) -> Result<Vec<WorkloadSpec>, SpecError> {
    // `[[workload]]` tables are named by index (`workload[1].url`), a single `[workload]` by its keys.
    let many = matches!(raw, OneOrMany::Many(_));
    let raw_workloads = match raw {
        OneOrMany::One(w) => vec![w],
        OneOrMany::Many(v) => v,
    };
    if raw_workloads.is_empty() {
        return Err(cx.err("workload", "", "at least one [workload] is needed"));
    }
    let mut workloads = Vec::new();
    for (i, w) in raw_workloads.into_iter().enumerate() {
        let tbl = &if many {
            keypath!["workload", i]
        } else {
            keypath!["workload"]
        };
        let name = w.name.clone().unwrap_or_else(|| {
            if i == 0 {
                "web".to_string()
            } else {
                format!("w{}", i + 1)
            }
        });
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(cx.err(
                tbl,
                "name",
                format!("`{name}`: use letters, digits, _ or -"),
            ));
        }
        if workloads.iter().any(|x: &WorkloadSpec| x.name == name) {
            return Err(cx.err(tbl, "name", format!("two workloads are named `{name}`")));
        }
        let kind = match w.kind.as_deref().unwrap_or(if w.command.is_some() {
            "command"
        } else {
            "bench"
        }) {
            "bench" => check_bench_workload(cx, tbl, w, dir)?,
            "command" => check_command_workload(cx, tbl, w)?,
            k => {
                return Err(cx.err(
                    tbl,
                    "kind",
                    format!("unknown workload kind `{k}` (bench, command)"),
                ));
            }
        };
        workloads.push(WorkloadSpec { name, kind });
    }
    Ok(workloads)
}

/// A `kind = "bench"` workload: ordo's load generator.
fn check_bench_workload(
    cx: &Ctx<'_>,
    tbl: &Vec<Seg>,
    w: RawWorkload,
    dir: &Path,
) -> Result<WorkloadKind, SpecError> {
    let resolve = |p: &str| resolve(dir, p);
    let url = w
        .url
        .clone()
        .ok_or_else(|| cx.err(tbl, "url", "a bench workload needs url"))?;
    let connections = w.connections.or(w.concurrency).unwrap_or(10);
    if connections == 0 {
        return Err(cx.err(tbl, "connections", "must be at least 1"));
    }
    if w.requests == Some(0) {
        return Err(cx.err(tbl, "requests", "must be at least 1"));
    }
    if w.requests.is_some() && w.duration.is_some() {
        return Err(cx.err(tbl, "requests", "set requests or duration, not both"));
    }
    if let Some(r) = w.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(cx.err(
            tbl,
            "rate",
            "must be a positive number of requests per second",
        ));
    }
    let duration = if w.requests.is_some() {
        None
    } else {
        Some(cx.positive_duration(tbl, "duration", w.duration, Duration::from_secs(5))?)
    };
    Ok(WorkloadKind::Bench(Box::new(BenchSpec {
        url,
        connections,
        threads: w.threads.unwrap_or(1).max(1),
        duration,
        requests: w.requests,
        rate: w.rate,
        keepalive: w.keepalive.unwrap_or(true),
        method: w.method.clone().unwrap_or_else(|| "GET".into()),
        headers: w.headers.clone(),
        body: w.body.clone(),
        timeout: cx.positive_duration(tbl, "timeout", w.timeout, Duration::from_secs(30))?,
        warmup: cx.duration(tbl, "warmup", w.warmup, Duration::ZERO)?,
        mix: w.mix.as_deref().map(resolve),
        seed: w.seed.unwrap_or(0x5eed),
    })))
}

/// A `kind = "command"` workload: an external load generator whose output a parser reads.
fn check_command_workload(
    cx: &Ctx<'_>,
    tbl: &Vec<Seg>,
    w: RawWorkload,
) -> Result<WorkloadKind, SpecError> {
    let argv = cx.command(
        tbl,
        w.command
            .ok_or_else(|| cx.err(tbl, "command", "a command workload needs command"))?,
    )?;
    let parser = match w.parser.as_deref() {
        Some("ab") => ParserKind::Ab,
        Some("wrk") => ParserKind::Wrk,
        Some("sysbench") => ParserKind::Sysbench,
        Some("regex") | None if w.regex.is_some() => {
            let re = Regex::new(w.regex.as_deref().unwrap_or_default())
                .map_err(|e| cx.err(tbl, "regex", format!("bad regex: {e}")))?;
            if re.capture_names().flatten().next().is_none() {
                return Err(cx.err(
                    tbl,
                    "regex",
                    "needs at least one named group, e.g. (?P<throughput>[0-9.]+)",
                ));
            }
            ParserKind::Regex(re)
        }
        Some("regex") => {
            return Err(cx.err(tbl, "regex", "parser = \"regex\" needs regex = '...'"));
        }
        Some(p) => {
            return Err(cx.err(
                tbl,
                "parser",
                format!("unknown parser `{p}` (ab, wrk, sysbench, regex)"),
            ));
        }
        None => {
            return Err(cx.err(
                tbl,
                "parser",
                "a command workload needs parser = \"ab\" | \"wrk\" | \"sysbench\" | \"regex\"",
            ));
        }
    };
    Ok(WorkloadKind::Command {
        argv,
        parser,
        timeout: cx.positive_duration(tbl, "timeout", w.timeout, Duration::from_secs(600))?,
    })
}

/// `[knobs]`: each knob and its levels, in the order the file lists them.
fn check_knobs(
    cx: &Ctx<'_>,
    raw: &toml::Table,
    target: &TargetSpec,
    workloads: &[WorkloadSpec],
) -> Result<Vec<KnobSpec>, SpecError> {
    let mut knobs = raw
        .iter()
        .map(|(k, v)| check_knob(cx, k, v, target, workloads))
        .collect::<Result<Vec<_>, _>>()?;
    // TOML tables are sorted by key; keep the order the file lists the knobs in.
    knobs.sort_by_key(|k| {
        raw.keys()
            .find(|key| key.parse::<KnobId>().is_ok_and(|id| id == k.id))
            .and_then(|key| span_of_path(cx.src.text, &keypath!["knobs", key]))
            .map(|s| s.start)
            .unwrap_or(usize::MAX)
    });
    if matches!(target.kind, TargetKind::Pid(_) | TargetKind::Name(_))
        && let Some(p) = knobs.iter().find(|k| matches!(k.id, KnobId::Param(_)))
    {
        return Err(cx.err(
            "knobs",
            &p.id.to_string(),
            "parameters need a target that ordo starts (builtin or command)",
        ));
    }
    Ok(knobs)
}

/// `[knobs] k = v`: the knob's name, its form (`levels` alone, or a table with `levels` and `optional`), its
/// levels, and for a parameter, that something uses it.
fn check_knob(
    cx: &Ctx<'_>,
    k: &str,
    v: &toml::Value,
    target: &TargetSpec,
    workloads: &[WorkloadSpec],
) -> Result<KnobSpec, SpecError> {
    let id: KnobId = k
        .parse()
        .map_err(|e: ordo_sys::knobs::KnobError| cx.err("knobs", k, e.to_string()))?;
    let (levels, optional) = match v {
        toml::Value::Table(t) => knob_table(cx, k, t)?,
        v => (v, false),
    };
    let levels = knob_levels(cx, k, levels)?;
    if let KnobId::Param(p) = &id
        && !param_used(p, target, workloads)
    {
        return Err(cx.err("knobs", k, format!("no `{{{p}}}` in the target's command or a workload: this parameter would have no effect")));
    }
    Ok(KnobSpec {
        id,
        levels,
        optional,
    })
}

/// `k = { levels = ..., optional = ... }`: the levels' value and whether the knob is optional.
fn knob_table<'t>(
    cx: &Ctx<'_>,
    k: &str,
    t: &'t toml::Table,
) -> Result<(&'t toml::Value, bool), SpecError> {
    if let Some(key) = t.keys().find(|key| *key != "levels" && *key != "optional") {
        return Err(cx.err(
            "knobs",
            k,
            format!("unknown key `{key}` (levels, optional)"),
        ));
    }
    let optional = match t.get("optional") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(_) => {
            return Err(cx.err("knobs", k, "optional must be true or false"));
        }
    };
    let levels = t
        .get("levels")
        .ok_or_else(|| cx.err("knobs", k, "needs levels = [...]"))?;
    Ok((levels, optional))
}

/// A knob's levels: an array of strings or numbers, or one of them alone; at least one, none twice.
fn knob_levels(cx: &Ctx<'_>, k: &str, v: &toml::Value) -> Result<Vec<String>, SpecError> {
    let levels: Vec<String> = match v {
        toml::Value::Array(a) => a
            .iter()
            .map(|x| {
                toml_value_string(x)
                    .ok_or_else(|| cx.err("knobs", k, "levels must be strings or numbers"))
            })
            .collect::<Result<_, _>>()?,
        other => vec![
            toml_value_string(other)
                .ok_or_else(|| cx.err("knobs", k, "levels must be strings or numbers"))?,
        ],
    };
    if levels.is_empty() {
        return Err(cx.err("knobs", k, "needs at least one level"));
    }
    let mut seen = levels.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != levels.len() {
        return Err(cx.err("knobs", k, "a level is listed twice"));
    }
    Ok(levels)
}

/// Whether parameter `p` appears as `{p}` in the target's command or a workload (else it would change
/// nothing).
fn param_used(p: &str, target: &TargetSpec, workloads: &[WorkloadSpec]) -> bool {
    let uses = |s: &str| s.contains(&format!("{{{p}}}"));
    (match &target.kind {
        TargetKind::Builtin { args, .. } => args.iter().any(|a| uses(a)),
        TargetKind::Command { argv } => argv.iter().any(|a| uses(a)),
        _ => false,
    }) || workloads.iter().any(|w| match &w.kind {
        WorkloadKind::Bench(b) => uses(&b.url),
        WorkloadKind::Command { argv, .. } => argv.iter().any(|a| uses(a)),
    })
}

/// `[baseline]`: explicit values; a parameter knob not named gets its first level.
fn check_baseline(
    cx: &Ctx<'_>,
    raw: &toml::Table,
    knobs: &[KnobSpec],
) -> Result<BTreeMap<String, String>, SpecError> {
    let names: Vec<String> = knobs.iter().map(|k| k.id.to_string()).collect();
    let mut baseline = BTreeMap::new();
    for (k, v) in raw {
        let c = canon(k);
        if !names.contains(&c) {
            return Err(cx.err("baseline", k, "not one of the experiment's knobs"));
        }
        baseline.insert(
            c,
            toml_value_string(v)
                .ok_or_else(|| cx.err("baseline", k, "must be a string or number"))?,
        );
    }
    for k in knobs {
        if matches!(k.id, KnobId::Param(_)) && !baseline.contains_key(&k.id.to_string()) {
            // A parameter has no "value found on the machine": the first level is the baseline.
            baseline.insert(k.id.to_string(), k.levels[0].clone());
        }
    }
    Ok(baseline)
}

/// `[repeat]`: how many runs per configuration.
fn check_repeat(cx: &Ctx<'_>, r: Option<RawRepeat>) -> Result<RepeatRule, SpecError> {
    let r = r.unwrap_or(RawRepeat {
        min: None,
        max: None,
        ci: None,
        warmup: None,
        allow_fewer: None,
    });
    let min = r.min.unwrap_or(3);
    if min < 3 && !r.allow_fewer.unwrap_or(false) {
        return Err(cx.err("repeat", "min", "at least 3 runs per configuration are needed for a confidence interval worth the name (allow_fewer = true overrides)"));
    }
    let min = min.max(1);
    let max = r.max.unwrap_or(min.max(10));
    if max < min {
        return Err(cx.err("repeat", "max", format!("must be >= min ({min})")));
    }
    let rel_ci = r.ci.unwrap_or(0.02);
    if !(rel_ci.is_finite() && rel_ci > 0.0) {
        return Err(cx.err("repeat", "ci", "must be a positive fraction such as 0.02"));
    }
    Ok(RepeatRule {
        min,
        max,
        rel_ci,
        warmup: r.warmup.unwrap_or(0),
    })
}

/// `[score]`: the objective over the workloads' metrics.
fn check_score(
    cx: &Ctx<'_>,
    s: Option<RawScore>,
    workloads: &[WorkloadSpec],
) -> Result<ScoreSpec, SpecError> {
    let first = workloads[0].name.clone();
    let score = match s {
        None => ScoreSpec {
            objective: Objective::Maximize,
            terms: vec![(format!("{first}.throughput"), 1.0)],
        },
        Some(s) => {
            let objective = match s.objective.as_deref() {
                None | Some("maximize") | Some("max") => Objective::Maximize,
                Some("minimize") | Some("min") => Objective::Minimize,
                Some(o) => {
                    return Err(cx.err(
                        "score",
                        "objective",
                        format!("`{o}`: maximize or minimize"),
                    ));
                }
            };
            // a term is named where the file gives it: `metric = "..."` or a key of `weights = {...}`
            let term_at = if s.metric.is_some() {
                keypath!["score", "metric"]
            } else if s.weights.is_empty() {
                keypath!["score"]
            } else {
                keypath!["score", "weights"]
            };
            let term_key = |m: &str| if s.metric.is_some() { "" } else { m }.to_string();
            let terms: Vec<(String, f64)> = match (s.metric.clone(), s.weights.is_empty()) {
                (Some(_), false) => {
                    return Err(cx.err("score", "metric", "set metric or weights, not both"));
                }
                (Some(m), true) => vec![(m, 1.0)],
                (None, false) => s.weights.clone().into_iter().collect(),
                (None, true) => vec![(format!("{first}.throughput"), 1.0)],
            };
            for (m, w) in &terms {
                if !w.is_finite() {
                    return Err(cx.err(&term_at, &term_key(m), "weight must be a finite number"));
                }
                let prefix = m.split('.').next().unwrap_or("");
                if !m.contains('.')
                    || !(workloads.iter().any(|w| w.name == prefix) || prefix == "target")
                {
                    return Err(cx.err(&term_at, &term_key(m), format!("metric `{m}` must be <workload>.<metric> (workloads: {}) or target.<metric>", workloads.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", "))));
                }
            }
            ScoreSpec { objective, terms }
        }
    };
    Ok(score)
}

/// `scale` and `scale_base`: the knob over thread or connection counts for the scalability ratio.
fn check_scale(
    cx: &Ctx<'_>,
    scale: Option<String>,
    scale_base: Option<f64>,
    knobs: &[KnobSpec],
) -> Result<(Option<String>, Option<f64>), SpecError> {
    let scale_knob = match scale {
        Some(s) => {
            let c = canon(&s);
            let k = knobs
                .iter()
                .find(|k| k.id.to_string() == c)
                .ok_or_else(|| {
                    cx.err(
                        "",
                        "scale",
                        format!("`{s}` is not one of the experiment's knobs"),
                    )
                })?;
            if k.levels
                .iter()
                .any(|l| l.parse::<f64>().map(|v| v <= 0.0).unwrap_or(true))
            {
                return Err(cx.err("", "scale", "the scalability knob's levels must be positive numbers (thread or connection counts)"));
            }
            Some(c)
        }
        None => None,
    };
    let scale_base = match (scale_base, &scale_knob) {
        (None, _) => None,
        (Some(_), None) => return Err(cx.err("", "scale_base", "needs scale = \"<knob>\"")),
        (Some(b), Some(k)) => {
            let levels = &knobs
                .iter()
                .find(|x| x.id.to_string() == *k)
                .map(|x| x.levels.clone())
                .unwrap_or_default();
            if !levels
                .iter()
                .any(|l| l.parse::<f64>().is_ok_and(|v| v == b))
            {
                return Err(cx.err("", "scale_base", format!("{b} is not a level of {k}")));
            }
            Some(b)
        }
    };
    Ok((scale_knob, scale_base))
}

/// `[design]`: which configurations run (its own function so `Spec::parse` does not grow with each kind).
fn parse_design(
    cx: &Ctx<'_>,
    raw: Option<RawDesign>,
    names: &[String],
    knobs: &[KnobSpec],
    seed: u64,
) -> Result<Design, SpecError> {
    let Some(d) = raw else {
        return Ok(Design::Full);
    };
    let kind = d.kind.as_deref().unwrap_or(if d.configurations.is_empty() {
        "full"
    } else {
        "list"
    });
    if kind != "search" {
        for (key, set) in [
            ("budget", d.budget.is_some()),
            ("initial", d.initial.is_some()),
        ] {
            if set {
                return Err(cx.err("design", key, "only for kind = \"search\""));
            }
        }
    }
    Ok(match kind {
        "full" | "factorial" => Design::Full,
        "ofat" | "one-at-a-time" => Design::OneAtATime,
        "random" => {
            let n =
                d.n.ok_or_else(|| cx.err("design", "n", "random design needs n"))?;
            if n == 0 {
                return Err(cx.err("design", "n", "must be at least 1"));
            }
            Design::Random {
                n,
                seed: d.seed.unwrap_or(seed),
            }
        }
        "search" => Design::Search(parse_search(cx, &d, knobs, seed)?),
        "list" => {
            if d.configurations.is_empty() {
                return Err(cx.err(
                    "design",
                    "configurations",
                    "a list design needs configurations = [{ knob = value, ... }, ...]",
                ));
            }
            let mut list = Vec::new();
            for (i, c) in d.configurations.into_iter().enumerate() {
                let at = &keypath!["design", "configurations", i];
                let mut m = BTreeMap::new();
                for (k, v) in c {
                    let ck = canon(&k);
                    if !names.contains(&ck) {
                        return Err(cx.err(
                            at,
                            &k,
                            format!("`{k}` is not one of the experiment's knobs"),
                        ));
                    }
                    m.insert(
                        ck,
                        toml_value_string(&v).ok_or_else(|| {
                            cx.err(at, &k, format!("`{k}`: value must be a string or number"))
                        })?,
                    );
                }
                list.push(m);
            }
            Design::List(list)
        }
        k => {
            return Err(cx.err(
                "design",
                "kind",
                format!("unknown design `{k}` (full, ofat, list, random, search)"),
            ));
        }
    })
}

/// `[design] kind = "search"`: the trial budget (default a fifth of the full grid, at least 8) and the
/// number of space-filling initial trials before the model proposes (default a quarter of the budget).
fn parse_search(
    cx: &Ctx<'_>,
    d: &RawDesign,
    knobs: &[KnobSpec],
    seed: u64,
) -> Result<SearchSpec, SpecError> {
    if !d.configurations.is_empty() || d.n.is_some() {
        return Err(cx.err(
            "design",
            if d.n.is_some() { "n" } else { "configurations" },
            "a search chooses its configurations; set budget = N (trials) instead",
        ));
    }
    let grid = knobs
        .iter()
        .fold(1usize, |acc, k| acc.saturating_mul(k.levels.len()));
    let budget = match d.budget {
        Some(b) if b < 3 => {
            return Err(cx.err(
                "design",
                "budget",
                "at least 3 trials (the baseline and two others)",
            ));
        }
        Some(b) => b,
        None => grid.div_ceil(5).max(8),
    };
    // The baseline is a trial too, so the grid plus it is the most there is to try.
    let budget = budget.min(grid.saturating_add(1));
    let initial = match d.initial {
        Some(0) => return Err(cx.err("design", "initial", "at least 1")),
        Some(i) if i >= budget => {
            return Err(cx.err(
                "design",
                "initial",
                format!(
                    "must be below the budget ({budget}), or the model never proposes anything"
                ),
            ));
        }
        Some(i) => i,
        None => (budget / 4).clamp(2, 10).min(budget - 1),
    };
    Ok(SearchSpec {
        budget,
        initial,
        seed: d.seed.unwrap_or(seed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(text, Path::new("exp.toml"), Path::new("/x"))
    }

    const GOOD: &str = r#"
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

    /// Issue 13: `duration = "0s"` passed validation (and measured nothing).
    #[test]
    fn zero_durations_and_request_counts_are_refused() {
        for (from, to, key) in [
            (
                "duration = \"2s\"",
                "duration = \"0s\"",
                "workload.duration",
            ),
            ("duration = \"2s\"", "duration = 0", "workload.duration"),
            (
                "duration = \"2s\"",
                "duration = \"2s\"\ntimeout = \"0ms\"",
                "workload.timeout",
            ),
            ("duration = \"2s\"", "requests = 0", "workload.requests"),
            (
                "args = [",
                "ready_timeout = 0\nargs = [",
                "target.ready_timeout",
            ),
        ] {
            let e = parse(&GOOD.replace(from, to)).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(key), "{to}: {e}");
            assert!(e.line.is_some(), "{e}");
        }
    }

    #[test]
    fn search_design() {
        let s = parse(&format!(
            "{GOOD}\n[design]\nkind = \"search\"\nbudget = 6\n"
        ))
        .unwrap();
        // 2 x 3 x 1 x 2 x 1 = 12 grid points; 6 trials, a quarter (at least 2) of them space-filling.
        assert_eq!(
            s.design,
            Design::Search(SearchSpec {
                budget: 6,
                initial: 2,
                seed: 7
            })
        );
        let s = parse(&format!("{GOOD}\n[design]\nkind = \"search\"\n")).unwrap();
        assert!(matches!(
            s.design,
            Design::Search(SearchSpec { budget: 8, .. })
        ));
        for (extra, key) in [
            ("budget = 2", "design.budget"),
            ("budget = 6\ninitial = 6", "design.initial"),
            ("n = 4", "design.n"),
        ] {
            let e = parse(&format!("{GOOD}\n[design]\nkind = \"search\"\n{extra}\n")).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(key), "{e}");
        }
        let e = parse(&format!("{GOOD}\n[design]\nkind = \"full\"\nbudget = 4\n")).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("design.budget"), "{e}");
    }

    #[test]
    fn commands_split_like_a_shell_would() {
        assert_eq!(
            split_command("ab -n 10 'http://x/ y'").unwrap(),
            vec!["ab", "-n", "10", "http://x/ y"]
        );
        assert!(split_command("a 'b").is_err());
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    }
}
