//! `ordo probe loop --compare` and `--footprints`: the same loop run under different conditions (quiet vs
//! loaded, 1 MB vs 500 MB vs 900 MB) with one shared calibration, shown side by side like seed 004's
//! development-vs-production and footprint tables.

use ordo_sys::thread;

use crate::error::ProbeError;
use ordo_sys::CancelToken;

use crate::looprobe::{run_loop_until, validate};
use crate::work::Calibration;
use ordo_results::probe::{
    CompareConfig, CompareReport, CompareRow, LoadSpec, LoopConfig, LoopReport,
};

/// The runs of a comparison, in order, with their column labels.
pub(crate) fn plan(cfg: &CompareConfig) -> Result<Vec<LoopConfig>, ProbeError> {
    let loaded = if cfg.base.load.is_none() {
        LoadSpec::Threads(if cfg.base.cpu.is_some() {
            2
        } else {
            thread::cpu_count()
        })
    } else {
        cfg.base.load.clone()
    };
    let conditions: Vec<(String, LoadSpec)> = if cfg.quiet_vs_loaded {
        vec![
            ("quiet".to_string(), LoadSpec::None),
            (format!("loaded ({})", loaded.describe()), loaded),
        ]
    } else {
        vec![(String::new(), cfg.base.load.clone())]
    };
    let footprints: Vec<Option<usize>> = match &cfg.footprints {
        Some(f) if f.is_empty() => {
            return Err(ProbeError::Config(
                "--footprints needs at least one size".into(),
            ));
        }
        Some(f) => f.iter().map(|&m| Some(m)).collect(),
        None => vec![None],
    };
    if footprints.len() * conditions.len() < 2 {
        return Err(ProbeError::Config(
            "nothing to compare: give --compare, or --footprints with two or more sizes".into(),
        ));
    }
    let mut out = Vec::new();
    for fp in &footprints {
        for (cond, load) in &conditions {
            let label = match (fp, cond.is_empty()) {
                (Some(m), true) => format!("{m} MB"),
                (Some(m), false) => format!("{m} MB {cond}"),
                (None, _) => cond.clone(),
            };
            out.push(LoopConfig {
                label,
                load: load.clone(),
                footprint_mb: fp.unwrap_or(cfg.base.footprint_mb),
                ..cfg.base.clone()
            });
        }
    }
    Ok(out)
}

/// Run every planned configuration; `progress` hears each run's label before it starts.
pub fn run_compare(
    cfg: &CompareConfig,
    progress: impl FnMut(&str),
) -> Result<CompareReport, ProbeError> {
    run_compare_until(cfg, &CancelToken::new(), progress)
}

/// `run_compare` that stops early when `cancel` is set: the run in progress ends as a partial report, the
/// later ones are listed in `not_run`. The first run is always returned (with no samples when cancelled
/// during the calibration), so the report has at least one column.
pub fn run_compare_until(
    cfg: &CompareConfig,
    cancel: &CancelToken,
    mut progress: impl FnMut(&str),
) -> Result<CompareReport, ProbeError> {
    let plan = plan(cfg)?;
    for c in &plan {
        validate(c)?;
    }
    let ns_per_iteration = match cfg.base.ns_per_iteration {
        Some(n) => n,
        None => Calibration::measure().ns_per_iteration,
    };
    let mut runs: Vec<LoopReport> = Vec::with_capacity(plan.len());
    let mut not_run = Vec::new();
    for mut c in plan {
        let stopped = cancel.is_cancelled() || runs.last().is_some_and(|r| r.interrupted);
        if stopped && !runs.is_empty() {
            not_run.push(c.label);
            continue;
        }
        c.ns_per_iteration = Some(ns_per_iteration);
        progress(&c.label);
        runs.push(run_loop_until(&c, cancel)?);
    }
    let interrupted = !not_run.is_empty() || runs.iter().any(|r| r.interrupted);
    let custom = cfg.base.buckets_ms.is_some();
    let hist = |r: &LoopReport| {
        if custom {
            r.summary
                .buckets
                .clone()
                .unwrap_or_else(|| r.summary.relative.clone())
        } else {
            r.summary.relative.clone()
        }
    };
    let first = hist(&runs[0]);
    let rows = first
        .buckets
        .iter()
        .enumerate()
        .map(|(i, b)| CompareRow {
            label: b.label.clone(),
            fractions: runs.iter().map(|r| hist(r).buckets[i].fraction).collect(),
        })
        .collect();
    Ok(CompareReport {
        kind: "probe-compare".into(),
        version: 1,
        columns: runs.iter().map(|r| r.label.clone()).collect(),
        nominal_ns: runs[0].nominal_ns,
        unit: first.unit.clone(),
        rows,
        runs,
        interrupted,
        not_run,
        fingerprint: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let base = LoopConfig::default();
        let c = CompareConfig {
            base: base.clone(),
            quiet_vs_loaded: true,
            footprints: None,
        };
        let p = plan(&c).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].label, "quiet");
        assert!(p[0].load.is_none());
        assert!(p[1].label.starts_with("loaded"));
        assert!(!p[1].load.is_none());
        let c = CompareConfig {
            base: base.clone(),
            quiet_vs_loaded: false,
            footprints: Some(vec![1, 500, 900]),
        };
        let p = plan(&c).unwrap();
        assert_eq!(
            p.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
            vec!["1 MB", "500 MB", "900 MB"]
        );
        assert_eq!(p[2].footprint_mb, 900);
        let c = CompareConfig {
            base,
            quiet_vs_loaded: false,
            footprints: Some(vec![1]),
        };
        assert!(plan(&c).is_err());
    }
}
