//! The experiment file (TOML): target, workloads, knobs and levels, design, repetition rule, baseline and
//! score, parsed into a checked [`Spec`]. Every error names the file, the line and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ordo_sys::knobs::KnobId;
use regex::Regex;
use serde::Deserialize;

/// A bad experiment file: where, which key, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), if key.is_empty() { String::new() } else { format!(": {key}") })]
pub struct SpecError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub key: String,
    pub message: String,
}

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

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StrOrList {
    Str(String),
    List(Vec<String>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Secs(f64),
    Text(String),
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

/// The line (1-based) of `key` inside `[table]` (or at top level when `table` is empty).
fn locate(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    let mut table_line = None;
    let key_plain = key.trim_matches('"');
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            if current == table {
                table_line.get_or_insert(i + 1);
            }
            continue;
        }
        if current != table || key.is_empty() {
            continue;
        }
        let head = l
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        if head == key_plain {
            return Some(i + 1);
        }
    }
    table_line
}

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

struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, table: &str, key: &str, message: impl Into<String>) -> SpecError {
        let full = if table.is_empty() {
            key.to_string()
        } else if key.is_empty() {
            table.to_string()
        } else {
            format!("{table}.{key}")
        };
        SpecError {
            file: self.file.to_path_buf(),
            line: locate(self.text, table, key),
            key: full,
            message: message.into(),
        }
    }

    fn duration(
        &self,
        table: &str,
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

    fn command(&self, table: &str, v: StrOrList) -> Result<Vec<String>, SpecError> {
        match v {
            StrOrList::Str(s) => split_command(&s).map_err(|m| self.err(table, "command", m)),
            StrOrList::List(l) if l.is_empty() => Err(self.err(table, "command", "empty command")),
            StrOrList::List(l) => Ok(l),
        }
    }
}

impl Spec {
    pub fn from_file(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|e| SpecError {
            file: path.to_path_buf(),
            line: None,
            key: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        Spec::parse(&text, path, &dir)
    }

    /// Parse `text` as if read from `file`, resolving relative paths against `dir`.
    pub fn parse(text: &str, file: &Path, dir: &Path) -> Result<Spec, SpecError> {
        let cx = Ctx { file, text };
        let raw: RawSpec = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            SpecError {
                file: file.to_path_buf(),
                line,
                key: String::new(),
                message: e.message().to_string(),
            }
        })?;
        let resolve = |p: &str| {
            let p = PathBuf::from(p);
            if p.is_absolute() { p } else { dir.join(p) }
        };

        // Target.
        let t = raw.target;
        let threads = match t.threads.as_deref() {
            None | Some("all") => ThreadSel::All,
            Some(re) => ThreadSel::Name(
                Regex::new(re)
                    .map_err(|e| cx.err("target", "threads", format!("bad regex: {e}")))?,
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
        let target = TargetSpec {
            kind,
            ready_url,
            ready_timeout: cx.duration(
                "target",
                "ready_timeout",
                t.ready_timeout,
                Duration::from_secs(10),
            )?,
            threads,
        };

        // Workloads.
        let raw_workloads = match raw.workload {
            OneOrMany::One(w) => vec![w],
            OneOrMany::Many(v) => v,
        };
        if raw_workloads.is_empty() {
            return Err(cx.err("workload", "", "at least one [workload] is needed"));
        }
        let mut workloads = Vec::new();
        for (i, w) in raw_workloads.into_iter().enumerate() {
            let tbl = "workload";
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
                "bench" => {
                    let url = w
                        .url
                        .clone()
                        .ok_or_else(|| cx.err(tbl, "url", "a bench workload needs url"))?;
                    let connections = w.connections.or(w.concurrency).unwrap_or(10);
                    if connections == 0 {
                        return Err(cx.err(tbl, "connections", "must be at least 1"));
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
                        Some(cx.duration(tbl, "duration", w.duration, Duration::from_secs(5))?)
                    };
                    WorkloadKind::Bench(Box::new(BenchSpec {
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
                        timeout: cx.duration(tbl, "timeout", w.timeout, Duration::from_secs(30))?,
                        warmup: cx.duration(tbl, "warmup", w.warmup, Duration::ZERO)?,
                        mix: w.mix.as_deref().map(resolve),
                        seed: w.seed.unwrap_or(0x5eed),
                    }))
                }
                "command" => {
                    let argv = cx.command(
                        tbl,
                        w.command.ok_or_else(|| {
                            cx.err(tbl, "command", "a command workload needs command")
                        })?,
                    )?;
                    let parser = match w.parser.as_deref() {
                        Some("ab") => ParserKind::Ab,
                        Some("wrk") => ParserKind::Wrk,
                        Some("sysbench") => ParserKind::Sysbench,
                        Some("regex") | None if w.regex.is_some() => {
                            let re = Regex::new(w.regex.as_deref().unwrap_or_default())
                                .map_err(|e| cx.err(tbl, "regex", format!("bad regex: {e}")))?;
                            if re.capture_names().flatten().next().is_none() {
                                return Err(cx.err(tbl, "regex", "needs at least one named group, e.g. (?P<throughput>[0-9.]+)"));
                            }
                            ParserKind::Regex(re)
                        }
                        Some("regex") => return Err(cx.err(tbl, "regex", "parser = \"regex\" needs regex = '...'")),
                        Some(p) => return Err(cx.err(tbl, "parser", format!("unknown parser `{p}` (ab, wrk, sysbench, regex)"))),
                        None => return Err(cx.err(tbl, "parser", "a command workload needs parser = \"ab\" | \"wrk\" | \"sysbench\" | \"regex\"")),
                    };
                    WorkloadKind::Command {
                        argv,
                        parser,
                        timeout: cx.duration(
                            tbl,
                            "timeout",
                            w.timeout,
                            Duration::from_secs(600),
                        )?,
                    }
                }
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

        // Knobs.
        let mut knobs = Vec::new();
        for (k, v) in &raw.knobs {
            let id: KnobId = k
                .parse()
                .map_err(|e: ordo_sys::knobs::KnobError| cx.err("knobs", k, e.to_string()))?;
            let mut optional = false;
            let v = match v {
                toml::Value::Table(t) => {
                    for key in t.keys() {
                        if key != "levels" && key != "optional" {
                            return Err(cx.err(
                                "knobs",
                                k,
                                format!("unknown key `{key}` (levels, optional)"),
                            ));
                        }
                    }
                    optional = match t.get("optional") {
                        None => false,
                        Some(toml::Value::Boolean(b)) => *b,
                        Some(_) => {
                            return Err(cx.err("knobs", k, "optional must be true or false"));
                        }
                    };
                    t.get("levels")
                        .ok_or_else(|| cx.err("knobs", k, "needs levels = [...]"))?
                }
                v => v,
            };
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
            if let KnobId::Param(p) = &id {
                let uses = |s: &str| s.contains(&format!("{{{p}}}"));
                let used = match &target.kind {
                    TargetKind::Builtin { args, .. } => args.iter().any(|a| uses(a)),
                    TargetKind::Command { argv } => argv.iter().any(|a| uses(a)),
                    _ => false,
                } || workloads.iter().any(|w| match &w.kind {
                    WorkloadKind::Bench(b) => uses(&b.url),
                    WorkloadKind::Command { argv, .. } => argv.iter().any(|a| uses(a)),
                });
                if !used {
                    return Err(cx.err("knobs", k, format!("no `{{{p}}}` in the target's command or a workload: this parameter would have no effect")));
                }
            }
            knobs.push(KnobSpec {
                id,
                levels,
                optional,
            });
        }
        // TOML tables are sorted by key; keep the order the file lists the knobs in.
        knobs.sort_by_key(|k| {
            raw.knobs
                .keys()
                .find(|key| key.parse::<KnobId>().is_ok_and(|id| id == k.id))
                .and_then(|key| locate(text, "knobs", key))
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
        let names: Vec<String> = knobs.iter().map(|k| k.id.to_string()).collect();
        let canon = |k: &str| {
            k.parse::<KnobId>()
                .map(|id| id.to_string())
                .unwrap_or_else(|_| k.to_string())
        };

        // Baseline.
        let mut baseline = BTreeMap::new();
        for (k, v) in &raw.baseline {
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
        for k in &knobs {
            if matches!(k.id, KnobId::Param(_)) && !baseline.contains_key(&k.id.to_string()) {
                // A parameter has no "value found on the machine": the first level is the baseline.
                baseline.insert(k.id.to_string(), k.levels[0].clone());
            }
        }

        // Design.
        let seed = raw.seed.unwrap_or(1);
        let design = match raw.design {
            None => Design::Full,
            Some(d) => match d.kind.as_deref().unwrap_or(if d.configurations.is_empty() {
                "full"
            } else {
                "list"
            }) {
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
                "list" => {
                    if d.configurations.is_empty() {
                        return Err(cx.err(
                            "design",
                            "configurations",
                            "a list design needs configurations = [{ knob = value, ... }, ...]",
                        ));
                    }
                    let mut list = Vec::new();
                    for c in d.configurations {
                        let mut m = BTreeMap::new();
                        for (k, v) in c {
                            let ck = canon(&k);
                            if !names.contains(&ck) {
                                return Err(cx.err(
                                    "design",
                                    "configurations",
                                    format!("`{k}` is not one of the experiment's knobs"),
                                ));
                            }
                            m.insert(
                                ck,
                                toml_value_string(&v).ok_or_else(|| {
                                    cx.err(
                                        "design",
                                        "configurations",
                                        format!("`{k}`: value must be a string or number"),
                                    )
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
                        format!("unknown design `{k}` (full, ofat, list, random)"),
                    ));
                }
            },
        };
        if knobs.is_empty() && !matches!(design, Design::List(_)) {
            return Err(cx.err("knobs", "", "an experiment needs at least one knob"));
        }

        // Repetition.
        let r = raw.repeat.unwrap_or(RawRepeat {
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
        let repeat = RepeatRule {
            min,
            max,
            rel_ci,
            warmup: r.warmup.unwrap_or(0),
        };

        // Score.
        let first = workloads[0].name.clone();
        let score = match raw.score {
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
                let terms: Vec<(String, f64)> = match (s.metric, s.weights.is_empty()) {
                    (Some(_), false) => {
                        return Err(cx.err("score", "metric", "set metric or weights, not both"));
                    }
                    (Some(m), true) => vec![(m, 1.0)],
                    (None, false) => s.weights.into_iter().collect(),
                    (None, true) => vec![(format!("{first}.throughput"), 1.0)],
                };
                for (m, w) in &terms {
                    if !w.is_finite() {
                        return Err(cx.err("score", m, "weight must be a finite number"));
                    }
                    let prefix = m.split('.').next().unwrap_or("");
                    if !m.contains('.')
                        || !(workloads.iter().any(|w| w.name == prefix) || prefix == "target")
                    {
                        return Err(cx.err("score", m, format!("metric `{m}` must be <workload>.<metric> (workloads: {}) or target.<metric>", workloads.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", "))));
                    }
                }
                ScoreSpec { objective, terms }
            }
        };

        let scale_knob = match raw.scale {
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
        let scale_base = match (raw.scale_base, &scale_knob) {
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
        assert_eq!(e.key, "knobs.sysctl:vm.swappiness");
        assert_eq!(e.line, Some(17));
        assert!(
            e.to_string()
                .starts_with("exp.toml:17: knobs.sysctl:vm.swappiness:"),
            "{e}"
        );
        let e = parse(&GOOD.replace("min = 3", "min = 2")).unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("repeat.min", Some(24)));
        let e = parse(&GOOD.replace("connections = 20", "connections = \"x\"")).unwrap_err();
        assert!(e.line.is_some(), "{e}");
        let e = parse(&GOOD.replace(
            "\"param:threads\" = [2, 4, 8]",
            "\"param:workers\" = [2, 4]",
        ))
        .unwrap_err();
        assert!(e.message.contains("no effect"), "{e}");
        let e = parse(&GOOD.replace("policy = ", "bogus = ")).unwrap_err();
        assert_eq!(e.key, "knobs.bogus");
        let e = parse(&GOOD.replace("\"web.p99_ms\"", "\"p99\"")).unwrap_err();
        assert!(e.key.starts_with("score"), "{e}");
        let e = parse(&GOOD.replace(
            "builtin = \"ordo-serve\"",
            "builtin = \"ordo-serve\"\npid = 3",
        ))
        .unwrap_err();
        assert_eq!(e.key, "target");
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
