//! The typed results a store yields (ordo-results' `tune-experiment` and `tune-analysis`): what `ordo tune
//! show|export --json` write and what `ordo report` draws for a store, so readers get the experiments
//! analysed without opening SQLite or running the statistics themselves.

use std::path::Path;

pub use ordo_results::tune::StoreReadError as ReadError;
use ordo_results::tune::{AnalysisResult, ComparisonResult, ExperimentResult, StoreComparison};

use crate::analysis::analyze;
use crate::store::{ExperimentData, Store};

/// An experiment with its analysis (`ordo tune export --format json`).
pub fn experiment(data: ExperimentData) -> ExperimentResult {
    let analysis = analyze(&data);
    ExperimentResult::new(data, analysis)
}

/// An experiment's analysis with its machine (`ordo tune show --json`); `analysis` is of the score or of
/// another metric.
pub fn analysis(data: &ExperimentData, analysis: crate::analysis::Analysis) -> AnalysisResult {
    AnalysisResult::new(analysis, data.fingerprint.clone())
}

/// Two runs of one experiment compared (`ordo tune compare --json`).
pub fn comparison(c: StoreComparison) -> ComparisonResult {
    ComparisonResult::new(c)
}

/// Every experiment of the store at `path` (or only experiment `only`), analysed, oldest first. The store
/// is opened read-only.
pub fn read_store(path: &Path, only: Option<i64>) -> Result<Vec<ExperimentResult>, ReadError> {
    let not_store = |e: crate::store::StoreError| ReadError::NotAStore(e.to_string());
    let store = Store::open_read_only(path).map_err(not_store)?;
    let mut ids: Vec<i64> = store
        .list_experiments()
        .map_err(not_store)?
        .into_iter()
        .map(|row| row.id)
        .collect();
    if let Some(id) = only {
        if !ids.contains(&id) {
            return Err(ReadError::Corrupt(format!(
                "the store has no experiment {id}"
            )));
        }
        ids = vec![id];
    }
    if ids.is_empty() {
        return Err(ReadError::Corrupt("the store holds no experiment".into()));
    }
    ids.sort_unstable();
    ids.into_iter()
        .map(|id| {
            store
                .load(id)
                .map(experiment)
                .map_err(|e| ReadError::Corrupt(format!("experiment {id}: {e}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_reads_as_analysed_experiments_and_bad_files_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let store = Store::open(&db).unwrap();
        drop(store);
        assert_eq!(
            read_store(&db, None).unwrap_err(),
            ReadError::Corrupt("the store holds no experiment".into())
        );
        assert_eq!(
            read_store(&db, Some(3)).unwrap_err(),
            ReadError::Corrupt("the store has no experiment 3".into())
        );
        let other = dir.path().join("other.db");
        std::fs::write(&other, b"SQLite format 3\0 but not really").unwrap();
        assert!(matches!(
            read_store(&other, None),
            Err(ReadError::NotAStore(_))
        ));
    }

    /// A finished experiment: the baseline with four runs, `nice=5` with one (its interval is infinite) and
    /// `nice=10` with none (its mean is NaN) — numbers JSON writes as null.
    fn stored(db: &Path) -> i64 {
        use crate::design::Configuration;
        use crate::store::{ExperimentMeta, NewRun};
        let mut s = Store::open(db).unwrap();
        let meta = ExperimentMeta {
            knobs: vec![("nice".into(), vec!["5".into(), "10".into()])],
            objective: "maximize".into(),
            score_terms: vec![("web.throughput".into(), 1.0)],
            min_runs: 3,
            max_runs: 5,
            rel_ci: 0.02,
            ..Default::default()
        };
        let configs: Vec<Configuration> = ["", "5", "10"]
            .iter()
            .map(|l| Configuration {
                label: if l.is_empty() {
                    "baseline (machine defaults)".into()
                } else {
                    format!("nice={l}")
                },
                values: if l.is_empty() {
                    Default::default()
                } else {
                    [("nice".to_string(), l.to_string())].into()
                },
                is_baseline: l.is_empty(),
            })
            .collect();
        let spec =
            "[target]\nbuiltin = \"ordo-serve\"\n\n[[workload]]\nurl = \"http://127.0.0.1/\"\n";
        let id = s
            .create_experiment("e", "e.toml", spec, 1, &meta, &configs, None)
            .unwrap();
        for (config, block, v) in [
            (0, 0, 1000.0),
            (0, 1, 1001.0),
            (0, 2, 999.0),
            (0, 3, 1000.5),
            (1, 0, 990.0),
        ] {
            let run = NewRun {
                config,
                block,
                warmup: false,
                started_unix_ms: 0,
                duration_s: 1.0,
                error: None,
                metrics: [("web.throughput".to_string(), v)].into(),
            };
            s.record_run(id, &run).unwrap();
        }
        s.set_status(id, "finished").unwrap();
        id
    }

    /// Issue 23: the three tune kinds were built with json! and had no schema; the typed results validate
    /// against their committed schemas, non-finite numbers (null) included, and a tampered document does not.
    #[test]
    fn every_tune_kind_validates_against_its_schema() {
        use ordo_testkit::json_schema::check;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let id = stored(&db);
        let read = read_store(&db, None).unwrap();
        assert_eq!(read.len(), 1);
        let e = &read[0];
        assert_eq!((e.kind.as_str(), e.version), ("tune-experiment", 1));
        assert_eq!(e.analysis.experiment, id);
        let doc = serde_json::to_value(e).unwrap();
        assert!(
            doc.to_string().contains("null"),
            "no non-finite number to check"
        );
        assert_eq!(
            check(&ordo_results::schema::tune_experiment(), &doc),
            Vec::<String>::new()
        );

        let shown = serde_json::to_value(analysis(&e.experiment, e.analysis.clone())).unwrap();
        assert_eq!(shown["kind"], "tune-analysis");
        assert_eq!(
            check(&ordo_results::schema::tune_analysis(), &shown),
            Vec::<String>::new()
        );

        let c = crate::compare::compare(&e.experiment, &e.experiment, false).unwrap();
        let compared = serde_json::to_value(comparison(c)).unwrap();
        assert_eq!(compared["kind"], "tune-comparison");
        assert_eq!(
            check(&ordo_results::schema::tune_comparison(), &compared),
            Vec::<String>::new()
        );

        // A score term is a (metric, weight) pair; a run's metrics map names to numbers.
        let mut bad = doc.clone();
        bad["analysis"]["score_terms"][0] = serde_json::json!(["web.throughput", 1.0, 2.0]);
        bad["experiment"]["runs"][0]["metrics"]["web.throughput"] = serde_json::json!("fast");
        let errors = check(&ordo_results::schema::tune_experiment(), &bad);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("score_terms[0]") && e.contains("maxItems")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("metrics.web.throughput")),
            "{errors:?}"
        );
    }
}
