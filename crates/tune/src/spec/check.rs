//! The checks that turn the raw sections into the [`Spec`](super::Spec)'s parts — target, workloads,
//! baseline, repetition rule, score and scale — with the context every error is located by (`Ctx`, `At`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ordo_sys::knobs::KnobId;
use ordo_util::keypath;
use ordo_util::located::{IntoSeg, Seg, Source};
use regex::Regex;

use super::raw::{
    DurationValue, OneOrMany, RawRepeat, RawScore, RawTarget, RawWorkload, StrOrList,
    parse_duration, split_command, toml_value_string,
};
use super::{
    BenchSpec, KnobSpec, Objective, ParserKind, RepeatRule, ScoreSpec, SpecError, TargetKind,
    TargetSpec, ThreadSel, WorkloadKind, WorkloadSpec,
};

/// Where a check's error points: a table (`"target"`, `""` for the top level) or a key path prefix
/// (`workload[1]`), plus the key under it.
pub(super) trait At: Copy {
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

pub(super) struct Ctx<'a> {
    pub(super) src: Source<'a>,
}

impl Ctx<'_> {
    /// An error at `key` of `table`, on the line the file spells it (or its table's line).
    pub(super) fn err(&self, table: impl At, key: &str, message: impl Into<String>) -> SpecError {
        self.src.at_path(&table.path(key), message)
    }

    pub(super) fn duration(
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
    pub(super) fn positive_duration(
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

    pub(super) fn command(&self, table: impl At, v: StrOrList) -> Result<Vec<String>, SpecError> {
        match v {
            StrOrList::Str(s) => split_command(&s).map_err(|m| self.err(table, "command", m)),
            StrOrList::List(l) if l.is_empty() => Err(self.err(table, "command", "empty command")),
            StrOrList::List(l) => Ok(l),
        }
    }
}

/// A knob name as the experiment spells it after parsing (`sysctl:vm.swappiness`), or the name as given.
pub(super) fn canon(k: &str) -> String {
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
pub(super) fn check_target(
    cx: &Ctx<'_>,
    t: RawTarget,
    dir: &Path,
) -> Result<TargetSpec, SpecError> {
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
pub(super) fn check_workloads(
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

/// `[baseline]`: explicit values; a parameter knob not named gets its first level.
pub(super) fn check_baseline(
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
pub(super) fn check_repeat(cx: &Ctx<'_>, r: Option<RawRepeat>) -> Result<RepeatRule, SpecError> {
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
pub(super) fn check_score(
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
pub(super) fn check_scale(
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

#[cfg(test)]
mod tests {
    use super::super::tests::{GOOD, parse};

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
}
