//! Kernel against kernel (or any two machines, or the same one twice): the same experiment run in two
//! stores is merged into one (`ordo tune merge`), refused with the reason when the two are not the same
//! experiment, and compared configuration by configuration (`ordo tune compare`): Welch's t-test of the
//! second's runs against the first's, Holm-corrected over the configurations, as the analysis does against
//! the baseline.

use std::path::{Path, PathBuf};

pub use ordo_results::tune::{
    ConfigComparison, Mismatch, MismatchKind, Side, StoreComparison, incompatibility, joined,
    mismatches, unit_of,
};

use ordo_doc::{Block, Document, KeyValue, Table};

use crate::analysis::{ALPHA, num, pct, test_scores, verdict};
use crate::stats::{holm, p_equals, summary, welch};
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

/// Why experiments that differ (`found`) are refused, ending with what `--force` would do (`forced`), or
/// `None` when they are not: the same experiment, or forced and still pairable (the same knobs and
/// configurations, which `--force` never overrides).
fn refusal(found: &[Mismatch], force: bool, forced: &str) -> Option<String> {
    let unpaired = found
        .iter()
        .any(|m| matches!(m.kind, MismatchKind::Configurations | MismatchKind::Knobs));
    if found.is_empty() || (force && !unpaired) {
        return None;
    }
    let tail = if unpaired {
        " (their configurations cannot be paired, even with --force)".to_string()
    } else {
        format!(" (--force {forced})")
    };
    Some(format!("{}{tail}", joined(found)))
}

/// The banner every output of a forced merge or comparison carries.
pub fn forced_banner(what: &str, mismatches: &[String]) -> String {
    format!(
        "WARNING: {what} with --force although the experiments differ ({}); the differences below may be the setup's, not the machines'",
        mismatches.join("; ")
    )
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

/// Compare `b` against `a`, configuration by configuration (Welch on the confirmatory runs, Holm over the
/// configurations). Experiments that differ ([`mismatches`]) are refused unless `force`, which compares them
/// with a warning every output carries (so does a store merged with `--force`). The configurations must
/// match even then: there is nothing to pair otherwise.
pub fn compare(
    a: &ExperimentData,
    b: &ExperimentData,
    force: bool,
) -> Result<StoreComparison, CompareError> {
    let found = mismatches(a, b);
    if let Some(why) = refusal(&found, force, "compares them anyway, with a warning") {
        return Err(CompareError::Incompatible(format!(
            "experiments {} and {} are not the same experiment: {why}",
            a.experiment.id, b.experiment.id,
        )));
    }
    let mut warnings: Vec<String> = a
        .experiment
        .meta
        .warnings
        .iter()
        .chain(&b.experiment.meta.warnings)
        .cloned()
        .collect();
    warnings.dedup();
    if !found.is_empty() {
        warnings.push(forced_banner("compared", &[joined(&found)]));
    }
    let mut rows = Vec::new();
    let mut ps = Vec::new();
    for c in &a.configurations {
        let (xa, xb) = (test_scores(a, c.idx), test_scores(b, c.idx));
        let (sa, sb) = (summary(&xa), summary(&xb));
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
        warnings,
        objective: a.experiment.meta.objective.clone(),
        configs: rows,
    })
}

/// The comparison as terminal text: its [`document`] through ordo-doc's terminal renderer.
pub fn render(c: &StoreComparison) -> String {
    ordo_doc::text::render(&document(c))
}

/// The comparison as a document: the warnings, the two experiments, the table of B against A per
/// configuration, the conclusion when none differs, and the warnings again (they must not scroll away).
pub fn document(c: &StoreComparison) -> Document {
    let warnings = (!c.warnings.is_empty()).then(|| Block::Note(c.warnings.join("\n")));
    let mut sides = KeyValue::new("");
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        sides.pair(
            name,
            format!("experiment {} `{}` — {}", s.experiment, s.name, s.machine),
        );
    }
    let mut t = Table::new(
        format!(
            "B against A per configuration (Welch's t-test on each side's confirmatory runs, Holm-corrected over {} configurations, alpha {ALPHA}; score {})",
            c.configs.len(),
            c.objective
        ),
        &[
            "configuration",
            "n A/B",
            "mean A",
            "mean B",
            "B vs A",
            "difference CI",
            "p",
            "p_holm",
            "",
        ],
    )
    .left(5)
    .left(6)
    .left(7)
    .left(8)
    .columns(0, &[0, 5, 12, 12, 9])
    .gap(2);
    for r in &c.configs {
        t.row(vec![
            r.label.clone(),
            format!("{}/{}", r.a.n, r.b.n),
            num(r.a.mean),
            num(r.b.mean),
            pct(r.rel),
            format!("[{}, {}]", num(r.ci_low), num(r.ci_high)),
            p_equals("p", r.p),
            p_equals("p_holm", r.p_holm),
            verdict(r.significant).into(),
        ]);
    }
    let mut blocks: Vec<Block> = warnings.iter().cloned().collect();
    blocks.push(sides.into());
    blocks.push(t.into());
    if c.configs.iter().all(|r| !r.significant) {
        blocks.push(Block::Note(
            "=> no configuration differs significantly between A and B".into(),
        ));
    }
    blocks.extend(warnings);
    Document::of(blocks)
}

/// The experiment to take from a store: `id`, or its newest.
pub fn pick(store: &Store, id: Option<i64>) -> Result<ExperimentData, CompareError> {
    let id = match id {
        Some(id) => id,
        None => store.latest()?,
    };
    Ok(store.load(id)?)
}

/// One store merged: where it came from, its id there and in the merged store, and its machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Merged {
    pub input: PathBuf,
    pub old: i64,
    pub new: i64,
    pub machine: String,
}

/// What a merge did: each store, and the warning it carries when forced.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeOutcome {
    pub merged: Vec<Merged>,
    pub warning: Option<String>,
}

/// Merge the newest experiment of each input store into a new store `out`, refusing (and writing nothing)
/// when one is still running or is not the same experiment as the first ([`mismatches`]: workload,
/// target, objective, units, score, knobs, configurations). `force` merges experiments that differ in
/// anything but their knobs and configurations anyway, and stores the warning with every merged experiment,
/// so `show`, `compare` and the HTML report print it too. Each experiment keeps its own machine fingerprint.
pub fn merge(inputs: &[PathBuf], out: &Path, force: bool) -> Result<MergeOutcome, CompareError> {
    if inputs.len() < 2 {
        return Err(CompareError::Usage(
            "merge needs at least two stores".into(),
        ));
    }
    if out.exists() {
        return Err(CompareError::OutputExists(out.to_path_buf()));
    }
    let mut all: Vec<(PathBuf, ExperimentData)> = Vec::new();
    let mut differences: Vec<String> = Vec::new();
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
        if let Some((first, a)) = all.first() {
            let found = mismatches(a, &data);
            let forced = "merges them anyway, with a warning on every output";
            if let Some(why) = refusal(&found, force, forced) {
                return Err(CompareError::Incompatible(format!(
                    "{} (experiment {}) is not the same experiment as {} (experiment {}): {why}",
                    p.display(),
                    data.experiment.id,
                    first.display(),
                    a.experiment.id,
                )));
            }
            differences.extend(found.iter().map(|m| format!("{}: {m}", p.display())));
        }
        all.push((p.clone(), data));
    }
    let warning = (!differences.is_empty()).then(|| forced_banner("merged", &differences));
    let mut store = Store::open(out)?;
    let mut merged = Vec::new();
    for (p, data) in &all {
        let mut data = data.clone();
        if let Some(w) = &warning {
            data.experiment.meta.warnings.push(w.clone());
        }
        merged.push(Merged {
            input: p.clone(),
            old: data.experiment.id,
            new: store.import(&data)?,
            machine: side(&data).machine,
        });
    }
    Ok(MergeOutcome { merged, warning })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::design::Configuration;
    use crate::store::{ExperimentMeta, NewRun};
    use std::collections::BTreeMap;

    const SPEC: &str = r#"
[target]
builtin = "ordo-serve"
args = ["--workers", "4"]
ready_timeout = "5s"

[[workload]]
url = "http://127.0.0.1:{port}/"
connections = 10
duration = "2s"

[knobs]
nice = [0, 5]
"#;

    /// How a store differs from the reference one.
    #[derive(Clone, Default)]
    struct Variant {
        spec: Option<String>,
        objective: Option<&'static str>,
        metric: Option<&'static str>,
        levels: Option<Vec<&'static str>>,
    }

    fn store_with(path: &Path, levels: &[&'static str], shift: &[f64]) -> i64 {
        store_variant(
            path,
            &Variant {
                levels: Some(levels.to_vec()),
                ..Default::default()
            },
            shift,
        )
    }

    fn store_variant(path: &Path, v: &Variant, shift: &[f64]) -> i64 {
        let levels = v.levels.clone().unwrap_or(vec!["0", "5"]);
        let metric = v.metric.unwrap_or("web.throughput");
        let mut s = Store::open(path).unwrap();
        let meta = ExperimentMeta {
            knobs: vec![(
                "nice".into(),
                levels.iter().map(|l| l.to_string()).collect(),
            )],
            objective: v.objective.unwrap_or("maximize").into(),
            score_terms: vec![(metric.into(), 1.0)],
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
        let spec = v.spec.clone().unwrap_or_else(|| SPEC.to_string());
        let id = s
            .create_experiment("e", "e.toml", &spec, 1, &meta, &configs, None)
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
                        metrics: [(metric.to_string(), v), ("score".to_string(), v)].into(),
                    },
                )
                .unwrap();
            }
        }
        s.set_status(id, "finished").unwrap();
        id
    }

    /// Issue 24: stores with different workloads, targets, objectives or score units merged, and compare
    /// called the setup's difference SIGNIFICANT. Each kind is refused, naming what differs, by merge and
    /// by compare, and nothing is written.
    #[test]
    fn every_kind_of_mismatch_is_refused_and_named() {
        let d = tempfile::tempdir().unwrap();
        let reference = d.path().join("ref.db");
        store_variant(&reference, &Variant::default(), &[0.0, 0.0, 0.0]);
        let cases: Vec<(MismatchKind, Variant, &str)> = vec![
            (
                MismatchKind::Workload,
                Variant {
                    spec: Some(SPEC.replace("connections = 10", "connections = 500")),
                    ..Default::default()
                },
                "connections = 500",
            ),
            (
                MismatchKind::Workload,
                Variant {
                    spec: Some(SPEC.replace(
                        "url = \"http://127.0.0.1:{port}/\"\nconnections = 10\nduration = \"2s\"",
                        "command = \"wrk -c 10 http://127.0.0.1:{port}/\"\nparser = \"wrk\"",
                    )),
                    ..Default::default()
                },
                "wrk -c 10",
            ),
            (
                MismatchKind::Target,
                Variant {
                    spec: Some(SPEC.replace(
                        "builtin = \"ordo-serve\"\nargs = [\"--workers\", \"4\"]",
                        "command = \"nginx -c /etc/nginx.conf\"",
                    )),
                    ..Default::default()
                },
                "nginx -c /etc/nginx.conf",
            ),
            (
                MismatchKind::Objective,
                Variant {
                    objective: Some("minimize"),
                    ..Default::default()
                },
                "maximize against minimize",
            ),
            (
                MismatchKind::Units,
                Variant {
                    metric: Some("web.p99_ms"),
                    ..Default::default()
                },
                "web.throughput (req/s) against web.p99_ms (ms)",
            ),
            (
                MismatchKind::Score,
                Variant {
                    metric: Some("web.requests_per_s_throughput"),
                    ..Default::default()
                },
                "web.requests_per_s_throughput",
            ),
            (
                MismatchKind::Knobs,
                Variant {
                    levels: Some(vec!["0", "10"]),
                    ..Default::default()
                },
                "nice = [0, 10]",
            ),
        ];
        for (i, (kind, v, says)) in cases.iter().enumerate() {
            let other = d.path().join(format!("other-{i}.db"));
            store_variant(&other, v, &[0.0, 500.0, 0.0]);
            let (ra, rb) = (
                pick(&Store::open_read_only(&reference).unwrap(), None).unwrap(),
                pick(&Store::open_read_only(&other).unwrap(), None).unwrap(),
            );
            // Exactly this kind (different levels also make different configurations).
            let found = mismatches(&ra, &rb);
            assert_eq!(found.first().map(|m| m.kind), Some(*kind), "{found:?}");
            assert!(
                found
                    .iter()
                    .skip(1)
                    .all(|m| *kind == MismatchKind::Knobs && m.kind == MismatchKind::Configurations),
                "{found:?}"
            );
            let out = d.path().join(format!("merged-{i}.db"));
            let e = merge(&[reference.clone(), other.clone()], &out, false)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("not the same experiment")
                    && e.contains(&format!("{kind}: "))
                    && e.contains(says),
                "{kind}: {e}"
            );
            assert!(!out.exists());
            let e = compare(&ra, &rb, false).unwrap_err().to_string();
            assert!(e.contains(says), "{kind}: {e}");
        }
        // A store without its experiment file cannot be checked: refused too.
        let bare = d.path().join("bare.db");
        store_variant(
            &bare,
            &Variant {
                spec: Some("text".into()),
                ..Default::default()
            },
            &[0.0, 0.0, 0.0],
        );
        let e = merge(&[reference.clone(), bare], &d.path().join("b.db"), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown: B (experiment 1): no readable experiment file stored"),
            "{e}"
        );
    }

    /// `--force` merges and compares experiments that differ in their setup, and every output says so:
    /// the merge, the comparison (terminal and JSON), the merged experiments' analysis. Different knobs
    /// are never forced (nothing to pair).
    #[test]
    fn force_merges_with_a_warning_on_every_output() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.db"), d.path().join("b.db"));
        store_variant(&a, &Variant::default(), &[0.0, 0.0, 0.0]);
        store_variant(
            &b,
            &Variant {
                spec: Some(SPEC.replace("connections = 10", "connections = 500")),
                ..Default::default()
            },
            &[0.0, 0.0, 0.0],
        );
        let out = d.path().join("ab.db");
        let done = merge(&[a.clone(), b.clone()], &out, true).unwrap();
        let w = done.warning.clone().unwrap();
        assert!(
            w.starts_with("WARNING: merged with --force") && w.contains("connections = 500"),
            "{w}"
        );
        assert_eq!(done.merged.len(), 2);
        assert!(done.merged.iter().all(|m| m.machine == "machine unknown"));
        let merged = Store::open_read_only(&out).unwrap();
        let (ea, eb) = (
            pick(&merged, Some(1)).unwrap(),
            pick(&merged, Some(2)).unwrap(),
        );
        for e in [&ea, &eb] {
            let text = crate::analysis::render(&crate::analysis::analyze(e));
            assert!(text.starts_with("WARNING: merged with --force"), "{text}");
        }
        assert!(compare(&ea, &eb, false).is_err());
        let c = compare(&ea, &eb, true).unwrap();
        let text = render(&c);
        assert!(text.starts_with("WARNING: merged with --force"), "{text}");
        assert!(text.contains("WARNING: compared with --force"), "{text}");
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("WARNING: compared with --force"), "{json}");
        // Different knobs cannot be forced.
        let c2 = d.path().join("c.db");
        store_with(&c2, &["0", "10"], &[0.0, 0.0, 0.0]);
        let e = merge(&[a, c2], &d.path().join("ac.db"), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be paired, even with --force"), "{e}");
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
        let done = merge(&[a.clone(), b.clone()], &out, false).unwrap();
        assert_eq!(
            done.merged.iter().map(|m| m.new).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(done.warning.is_none());
        let merged = Store::open_read_only(&out).unwrap();
        let (ea, eb) = (
            pick(&merged, Some(1)).unwrap(),
            pick(&merged, Some(2)).unwrap(),
        );
        assert_eq!(ea.runs.len(), 12);
        let cmp = compare(&ea, &eb, false).unwrap();
        let sig: Vec<&str> = cmp
            .configs
            .iter()
            .filter(|r| r.significant)
            .map(|r| r.label.as_str())
            .collect();
        assert_eq!(sig, vec!["nice=0"], "{cmp:#?}");
        // The text, pinned: the two sides, then the table (a row starts with its label and ends with its
        // verdict: tests/e2e/tune.rs reads them so).
        let expected = [
            "A: experiment 1 `e` — machine unknown",
            "B: experiment 2 `e` — machine unknown",
            "",
            "B against A per configuration (Welch's t-test on each side's confirmatory runs, Holm-corrected over 3 configurations, alpha 0.05; score maximize)",
            "configuration                n A/B        mean A        mean B     B vs A  difference CI     p          p_holm",
            "baseline (machine defaults)    4/4        1000.1        1000.1     +0.00%  [-1.477, 1.477]   p = 1.00   p_holm = 1.00   no significant difference",
            "nice=0                         4/4        1000.1        1050.1     +5.00%  [48.523, 51.477]  p < 0.001  p_holm < 0.001  SIGNIFICANT",
            "nice=5                         4/4        1000.1        1000.4     +0.03%  [-1.177, 1.777]   p = 0.637  p_holm = 1.00   no significant difference",
        ]
        .join("\n")
            + "\n";
        assert_eq!(render(&cmp), expected);
        // A store that is not the same experiment is refused, and nothing is written.
        store_with(&c, &["0", "10"], &[0.0, 0.0, 0.0]);
        let out2 = d.path().join("ac.db");
        let e = merge(&[a.clone(), c], &out2, false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not the same experiment") && e.contains("knobs differ"),
            "{e}"
        );
        assert!(!out2.exists());
        // An existing output is never overwritten.
        assert!(matches!(
            merge(&[a, b], &out, false),
            Err(CompareError::OutputExists(_))
        ));
    }
}
