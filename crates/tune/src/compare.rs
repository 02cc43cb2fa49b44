//! Kernel against kernel (or any two machines, or the same one twice): the same experiment run in two
//! stores is merged into one (`ordo tune merge`), refused with the reason when the two are not the same
//! experiment, and compared configuration by configuration (`ordo tune compare`): Welch's t-test of the
//! second's runs against the first's, Holm-corrected over the configurations, as the analysis does against
//! the baseline.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis::{ALPHA, label_width, num, pct, scores};
use crate::stats::{Summary, holm, p_equals, welch};
use crate::store::{ExperimentData, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Incompatible(String),
    #[error("{}: already exists; merge writes a new store (choose another -o)", .0.display())]
    OutputExists(PathBuf),
    #[error("{0}")]
    Usage(String),
}

impl CompareError {
    /// A usage error (exit 2): bad files or incompatible experiments.
    pub fn is_usage(&self) -> bool {
        match self {
            CompareError::Store(e) => e.is_bad_file(),
            _ => true,
        }
    }
}

/// Why `b` is not the same experiment as `a`, if it is not: different knobs and levels, score,
/// objective, or configurations (labels and values, in order). A search's configurations are the trials it
/// chose, so two searches compare only when they chose the same.
pub fn incompatibility(a: &ExperimentData, b: &ExperimentData) -> Option<String> {
    let (ma, mb) = (&a.experiment.meta, &b.experiment.meta);
    if ma.knobs != mb.knobs {
        let names = |m: &crate::store::ExperimentMeta| {
            m.knobs
                .iter()
                .map(|(k, l)| format!("{k} = [{}]", l.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        };
        return Some(format!(
            "the knobs differ: {} against {}",
            names(ma),
            names(mb)
        ));
    }
    if ma.score_terms != mb.score_terms || ma.objective != mb.objective {
        return Some(format!(
            "the score differs: {} {:?} against {} {:?}",
            ma.objective, ma.score_terms, mb.objective, mb.score_terms
        ));
    }
    if a.configurations.len() != b.configurations.len() {
        return Some(format!(
            "{} configurations against {}",
            a.configurations.len(),
            b.configurations.len()
        ));
    }
    for (x, y) in a.configurations.iter().zip(&b.configurations) {
        if x.values != y.values || x.label != y.label || x.is_baseline != y.is_baseline {
            return Some(format!(
                "configuration {} is `{}` in one and `{}` in the other",
                x.idx, x.label, y.label
            ));
        }
    }
    None
}

/// Where an experiment came from, for the output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub experiment: i64,
    pub name: String,
    /// `hostname — Linux <release>, HZ=…, <preemption>` when the fingerprint is known.
    pub machine: String,
}

/// One configuration in both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigComparison {
    pub idx: usize,
    pub label: String,
    pub a: Summary,
    pub b: Summary,
    /// mean(b) - mean(a), and relative to |mean(a)|, in score units (not the objective's direction).
    pub diff: f64,
    pub rel: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub p: f64,
    pub p_holm: f64,
    pub significant: bool,
}

/// Every configuration of two runs of one experiment, compared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreComparison {
    pub a: Side,
    pub b: Side,
    pub objective: String,
    pub configs: Vec<ConfigComparison>,
}

fn side(d: &ExperimentData) -> Side {
    Side {
        experiment: d.experiment.id,
        name: d.experiment.name.clone(),
        machine: d
            .fingerprint()
            .map(|f| {
                format!(
                    "{} — Linux {}{}{}",
                    f.hostname,
                    f.kernel_release,
                    f.config_hz.map(|h| format!(", HZ={h}")).unwrap_or_default(),
                    f.preemption.map(|p| format!(", {p}")).unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "machine unknown".into()),
    }
}

/// Compare `b` against `a`, configuration by configuration (Welch, Holm over the configurations).
pub fn compare(a: &ExperimentData, b: &ExperimentData) -> Result<StoreComparison, CompareError> {
    if let Some(why) = incompatibility(a, b) {
        return Err(CompareError::Incompatible(format!(
            "experiments {} and {} are not the same experiment: {why}",
            a.experiment.id, b.experiment.id
        )));
    }
    let mut rows = Vec::new();
    let mut ps = Vec::new();
    for c in &a.configurations {
        let (xa, xb) = (scores(a, c.idx), scores(b, c.idx));
        let (sa, sb) = (Summary::of(&xa), Summary::of(&xb));
        let w = welch(&xb, &xa);
        ps.push(w.as_ref().map_or(f64::NAN, |w| w.p));
        rows.push(ConfigComparison {
            idx: c.idx,
            label: c.label.clone(),
            diff: sb.mean - sa.mean,
            rel: (sb.mean - sa.mean) / sa.mean.abs(),
            ci_low: w.as_ref().map_or(f64::NAN, |w| w.ci_low),
            ci_high: w.as_ref().map_or(f64::NAN, |w| w.ci_high),
            p: w.as_ref().map_or(f64::NAN, |w| w.p),
            p_holm: f64::NAN,
            significant: false,
            a: sa,
            b: sb,
        });
    }
    for (r, p) in rows.iter_mut().zip(holm(&ps)) {
        r.p_holm = p;
        r.significant = p < ALPHA;
    }
    Ok(StoreComparison {
        a: side(a),
        b: side(b),
        objective: a.experiment.meta.objective.clone(),
        configs: rows,
    })
}

/// The comparison as terminal text.
pub fn render(c: &StoreComparison) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "A: experiment {} `{}` — {}",
        c.a.experiment, c.a.name, c.a.machine
    );
    let _ = writeln!(
        o,
        "B: experiment {} `{}` — {}",
        c.b.experiment, c.b.name, c.b.machine
    );
    let _ = writeln!(
        o,
        "B against A per configuration (Welch's t-test, Holm-corrected over {} configurations, alpha {ALPHA}; score {})",
        c.configs.len(),
        c.objective
    );
    let w = label_width(c.configs.iter().map(|r| r.label.as_str()), 13);
    let _ = writeln!(
        o,
        "{:<w$}  {:>5}  {:>12}  {:>12}  {:>9}  {:<24}  {:<16}  {:<18}",
        "configuration", "n A/B", "mean A", "mean B", "B vs A", "difference CI", "p", "p_holm"
    );
    for r in &c.configs {
        let verdict = if r.significant {
            "SIGNIFICANT"
        } else {
            "no significant difference"
        };
        let _ = writeln!(
            o,
            "{:<w$}  {:>5}  {:>12}  {:>12}  {:>9}  {:<24}  {:<16}  {:<18}  {verdict}",
            r.label,
            format!("{}/{}", r.a.n, r.b.n),
            num(r.a.mean),
            num(r.b.mean),
            pct(r.rel),
            format!("[{}, {}]", num(r.ci_low), num(r.ci_high)),
            p_equals("p", r.p),
            p_equals("p_holm", r.p_holm),
        );
    }
    if c.configs.iter().all(|r| !r.significant) {
        let _ = writeln!(
            o,
            "=> no configuration differs significantly between A and B"
        );
    }
    o
}

/// The experiment to take from a store: `id`, or its newest.
pub fn pick(store: &Store, id: Option<i64>) -> Result<ExperimentData, CompareError> {
    let id = match id {
        Some(id) => id,
        None => store.latest()?,
    };
    Ok(store.load(id)?)
}

/// Merge the newest experiment of each input store into a new store `out`, refusing (and writing nothing)
/// when one is still running or is not the same experiment as the first. Returns (input, old id, new id).
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<Vec<(PathBuf, i64, i64)>, CompareError> {
    if inputs.len() < 2 {
        return Err(CompareError::Usage(
            "merge needs at least two stores".into(),
        ));
    }
    if out.exists() {
        return Err(CompareError::OutputExists(out.to_path_buf()));
    }
    let mut all: Vec<(PathBuf, ExperimentData)> = Vec::new();
    for p in inputs {
        if !p.exists() {
            return Err(StoreError::Missing(p.clone()).into());
        }
        let store = Store::open_read_only(p).map_err(|e| StoreError::NotAStore {
            path: p.clone(),
            reason: e.to_string(),
        })?;
        let data = pick(&store, None).map_err(|e| match e {
            CompareError::Store(StoreError::Sql(e)) => StoreError::NotAStore {
                path: p.clone(),
                reason: e.to_string(),
            }
            .into(),
            CompareError::Store(StoreError::Empty) => {
                CompareError::Usage(format!("{}: holds no experiments", p.display()))
            }
            e => e,
        })?;
        if data.experiment.status == "running" {
            return Err(CompareError::Incompatible(format!(
                "{}: experiment {} is still running (or was killed: resume or finish it first)",
                p.display(),
                data.experiment.id
            )));
        }
        if let Some((first, a)) = all.first()
            && let Some(why) = incompatibility(a, &data)
        {
            return Err(CompareError::Incompatible(format!(
                "{} (experiment {}) is not the same experiment as {} (experiment {}): {why}",
                p.display(),
                data.experiment.id,
                first.display(),
                a.experiment.id
            )));
        }
        all.push((p.clone(), data));
    }
    let mut store = Store::open(out)?;
    let mut ids = Vec::new();
    for (p, data) in &all {
        ids.push((p.clone(), data.experiment.id, store.import(data)?));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Configuration;
    use crate::store::{ExperimentMeta, NewRun};
    use std::collections::BTreeMap;

    fn store_with(path: &Path, levels: &[&str], shift: &[f64]) -> i64 {
        let mut s = Store::open(path).unwrap();
        let meta = ExperimentMeta {
            knobs: vec![(
                "nice".into(),
                levels.iter().map(|l| l.to_string()).collect(),
            )],
            objective: "maximize".into(),
            score_terms: vec![("web.throughput".into(), 1.0)],
            min_runs: 3,
            max_runs: 5,
            rel_ci: 0.02,
            ..Default::default()
        };
        let configs: Vec<Configuration> = std::iter::once(Configuration {
            label: "baseline (machine defaults)".into(),
            values: BTreeMap::new(),
            is_baseline: true,
        })
        .chain(levels.iter().map(|l| Configuration {
            label: format!("nice={l}"),
            values: [("nice".to_string(), l.to_string())].into(),
            is_baseline: false,
        }))
        .collect();
        let id = s
            .create_experiment("e", "e.toml", "text", 1, &meta, &configs, None)
            .unwrap();
        for (c, d) in shift.iter().enumerate() {
            for (b, noise) in [0.0, 1.0, -1.0, 0.5].iter().enumerate() {
                let v = 1000.0 + d + noise;
                s.record_run(
                    id,
                    &NewRun {
                        config: c,
                        block: b,
                        warmup: false,
                        started_unix_ms: 0,
                        duration_s: 1.0,
                        error: None,
                        metrics: [("web.throughput".to_string(), v), ("score".to_string(), v)]
                            .into(),
                    },
                )
                .unwrap();
            }
        }
        s.set_status(id, "finished").unwrap();
        id
    }

    #[test]
    fn merge_then_compare_finds_the_configuration_that_moved_and_refuses_another_experiment() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            d.path().join("a.db"),
            d.path().join("b.db"),
            d.path().join("c.db"),
        );
        store_with(&a, &["0", "5"], &[0.0, 0.0, 0.0]);
        store_with(&b, &["0", "5"], &[0.0, 50.0, 0.3]);
        let out = d.path().join("ab.db");
        let ids = merge(&[a.clone(), b.clone()], &out).unwrap();
        assert_eq!(ids.iter().map(|x| x.2).collect::<Vec<_>>(), vec![1, 2]);
        let merged = Store::open_read_only(&out).unwrap();
        let (ea, eb) = (
            pick(&merged, Some(1)).unwrap(),
            pick(&merged, Some(2)).unwrap(),
        );
        assert_eq!(ea.runs.len(), 12);
        let cmp = compare(&ea, &eb).unwrap();
        let sig: Vec<&str> = cmp
            .configs
            .iter()
            .filter(|r| r.significant)
            .map(|r| r.label.as_str())
            .collect();
        assert_eq!(sig, vec!["nice=0"], "{cmp:#?}");
        let text = render(&cmp);
        assert!(
            text.contains("SIGNIFICANT") && text.contains("Holm"),
            "{text}"
        );
        // A store that is not the same experiment is refused, and nothing is written.
        store_with(&c, &["0", "10"], &[0.0, 0.0, 0.0]);
        let out2 = d.path().join("ac.db");
        let e = merge(&[a.clone(), c], &out2).unwrap_err().to_string();
        assert!(
            e.contains("not the same experiment") && e.contains("knobs differ"),
            "{e}"
        );
        assert!(!out2.exists());
        // An existing output is never overwritten.
        assert!(matches!(
            merge(&[a, b], &out),
            Err(CompareError::OutputExists(_))
        ));
    }
}
