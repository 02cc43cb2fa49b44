//! `ordo demo` results (`"kind": "demo"`): seed 003's Figure 3 — mean response time per user class against
//! the number of clients — plus the light/heavy and medium/heavy ratio lines with their targets 4 and 2, a
//! per-step table and the verdict.
//!
//! The input type is `ordo_results::demo::DemoResult`, the type `ordo demo` writes, so the report reads
//! exactly that.

pub(crate) use ordo_results::demo::{DemoResult, Outcome, TARGET_LIGHT_HEAVY, TARGET_MEDIUM_HEAVY};

use crate::doc::{Block, Section, Table};
use crate::fmt::{civil_utc, num};
use crate::machine::Machine;
use crate::svg::{Point, RefLine, XyChart, XySeries};

/// Class names in the result's order (from the set-up, else from the first step).
pub(crate) fn class_names(d: &DemoResult) -> Vec<String> {
    if !d.classes.is_empty() {
        return d.classes.iter().map(|c| c.name.clone()).collect();
    }
    let mut names: Vec<String> = Vec::new();
    for s in &d.steps {
        for c in &s.classes {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    names
}

/// "ordo demo, lottery policy, weights light 1 : medium 2 : heavy 4, 100 workers, 10 ms service".
pub(crate) fn summary(d: &DemoResult) -> String {
    let weights: Vec<String> = d
        .classes
        .iter()
        .map(|c| format!("{} {}", c.name, c.weight))
        .collect();
    let mut s = format!("ordo demo, {} policy", d.policy);
    if !weights.is_empty() {
        s.push_str(&format!(", weights {}", weights.join(" : ")));
    }
    if d.workers > 0 {
        s.push_str(&format!(", {} workers", d.workers));
    }
    if d.service_ms > 0.0 {
        s.push_str(&format!(", {} ms service", num(d.service_ms, 2)));
    }
    if d.quick {
        s.push_str(", --quick");
    }
    s
}

/// Series of (clients, mean ms) per class.
pub(crate) fn response_series(d: &DemoResult) -> Vec<(String, Vec<Point>)> {
    class_names(d)
        .into_iter()
        .map(|name| {
            let pts = d
                .steps
                .iter()
                .filter_map(|s| {
                    s.classes
                        .iter()
                        .find(|c| c.name == name && c.requests > 0)
                        .map(|c| Point {
                            x: s.clients as f64,
                            y: c.mean_ms,
                            note: Some(format!("{} requests", c.requests)),
                        })
                })
                .collect();
            (name, pts)
        })
        .collect()
}

/// (light/heavy, medium/heavy) ratio series against clients.
pub(crate) fn ratio_series(d: &DemoResult) -> (Vec<Point>, Vec<Point>) {
    let lh = d
        .steps
        .iter()
        .filter_map(|s| s.ratio_light_heavy.map(|r| Point::new(s.clients as f64, r)))
        .collect();
    let mh = d
        .steps
        .iter()
        .filter_map(|s| {
            s.ratio_medium_heavy
                .map(|r| Point::new(s.clients as f64, r))
        })
        .collect();
    (lh, mh)
}

/// The response-time chart (seed 003, Figure 3).
pub(crate) fn response_chart(id: &str, d: &DemoResult) -> XyChart {
    let mut c = XyChart::new(
        id,
        format!(
            "Mean response time per user class against the number of clients ({} policy; seed 003, Figure 3).",
            d.policy
        ),
        "clients",
        "mean response time (ms)",
    );
    c.series = response_series(d)
        .into_iter()
        .map(|(name, pts)| XySeries::line(name, pts))
        .collect();
    c
}

/// The ratio chart with the targets marked.
pub(crate) fn ratio_chart(id: &str, d: &DemoResult) -> XyChart {
    let (lh, mh) = ratio_series(d);
    let mut c = XyChart::new(
        id,
        "Response-time ratios light/heavy and medium/heavy against the number of clients; dashed lines mark the targets 4 and 2.",
        "clients",
        "ratio of mean response times",
    );
    c.series = vec![
        XySeries::line("light/heavy", lh),
        XySeries::line("medium/heavy", mh),
    ];
    c.ref_lines = vec![
        RefLine {
            y: TARGET_LIGHT_HEAVY,
            label: "target light/heavy = 4".into(),
        },
        RefLine {
            y: TARGET_MEDIUM_HEAVY,
            label: "target medium/heavy = 2".into(),
        },
    ];
    c
}

/// The per-step table.
pub(crate) fn step_table(d: &DemoResult) -> Table {
    let names = class_names(d);
    let mut headers: Vec<String> = vec!["clients".into()];
    headers.extend(names.iter().map(|n| format!("{n} mean ms")));
    headers.extend(
        ["light/heavy", "medium/heavy", "requests", "errors"]
            .iter()
            .map(|s| s.to_string()),
    );
    let hdr: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new("Mean response time per class and step", &hdr);
    for s in &d.steps {
        let mut row = vec![s.clients.to_string()];
        for n in &names {
            row.push(
                s.classes
                    .iter()
                    .find(|c| &c.name == n && c.requests > 0)
                    .map_or("–".into(), |c| num(c.mean_ms, 2)),
            );
        }
        row.push(s.ratio_light_heavy.map_or("–".into(), |r| num(r, 3)));
        row.push(s.ratio_medium_heavy.map_or("–".into(), |r| num(r, 3)));
        row.push(
            s.classes
                .iter()
                .map(|c| c.requests)
                .sum::<u64>()
                .to_string(),
        );
        row.push(s.classes.iter().map(|c| c.errors).sum::<u64>().to_string());
        t.row(row);
    }
    t
}

/// The verdict in one sentence.
pub(crate) fn verdict_note(d: &DemoResult) -> Option<String> {
    let v = &d.verdict;
    let pct = |e: Option<f64>| e.map_or("–".to_string(), |e| format!("{}%", num(e * 100.0, 1)));
    Some(match v.outcome {
        Outcome::Met => format!(
            "Target met: at {} clients and above the ratios are within {}% of 4 and 2 (worst errors {} and {}).",
            v.min_clients,
            num(v.tolerance * 100.0, 1),
            pct(v.worst_light_heavy_error),
            pct(v.worst_medium_heavy_error)
        ),
        Outcome::Missed => format!(
            "Target missed: at {} clients and above the ratios should be within {}% of 4 and 2; worst errors {} and {}.",
            v.min_clients,
            num(v.tolerance * 100.0, 1),
            pct(v.worst_light_heavy_error),
            pct(v.worst_medium_heavy_error)
        ),
        Outcome::NotChecked => format!(
            "Target not checked: no step reached {} clients.",
            v.min_clients
        ),
    })
}

/// The demo's section.
pub(crate) fn section(d: &DemoResult, id: &str, name: &str, m: &Machine) -> Section {
    let mut sub = summary(d);
    if d.started_unix_s > 0 {
        sub.push_str(&format!("; started {}", civil_utc(d.started_unix_s)));
    }
    if let Some(l) = m.label() {
        sub.push_str(&format!("; {l}"));
    }
    let mut blocks: Vec<Block> = Vec::new();
    if !d.complete {
        blocks.push(Block::Note(
            "The run was stopped before its last step; the steps shown are complete.".into(),
        ));
    }
    if d.steps.is_empty() {
        blocks.push(Block::Note("The result holds no finished step.".into()));
    } else {
        blocks.push(response_chart(&format!("{id}-response"), d).into());
        blocks.push(ratio_chart(&format!("{id}-ratios"), d).into());
    }
    if let Some(n) = verdict_note(d) {
        blocks.push(Block::Note(n));
    }
    blocks.push(step_table(d).into());
    Section {
        id: id.to_string(),
        title: format!("Demo — {name}"),
        subtitle: sub,
        blocks,
    }
}
