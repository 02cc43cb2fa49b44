//! The `[knobs]` table: each knob's name (a sysctl, a debugfs or cgroup setting, a scheduling policy or a
//! parameter of the target), its levels and whether it is optional, checked against what the target and
//! workloads use.

use ordo_sys::knobs::KnobId;
use ordo_util::keypath;
use ordo_util::located::span_of_path;

use super::check::Ctx;
use super::raw::toml_value_string;
use super::{KnobSpec, SpecError, TargetKind, TargetSpec, WorkloadKind, WorkloadSpec};

/// `[knobs]`: each knob and its levels, in the order the file lists them.
pub(super) fn check_knobs(
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
