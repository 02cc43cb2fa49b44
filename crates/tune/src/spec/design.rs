//! The `[design]` table: which runs the experiment makes (full factorial, fractional, a list, or a search
//! with its budget), checked against the knobs.

use std::collections::BTreeMap;

use ordo_util::keypath;

use super::check::{Ctx, canon};
use super::raw::{RawDesign, toml_value_string};
use super::{Design, KnobSpec, SearchSpec, SpecError};

/// `[design]`: which configurations run (its own function so `Spec::parse` does not grow with each kind).
pub(super) fn parse_design(
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
    use super::super::tests::{GOOD, parse};
    use super::*;

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
}
