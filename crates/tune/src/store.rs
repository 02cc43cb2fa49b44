//! The SQLite store of experiments, configurations, runs, metrics and machine fingerprints: written one
//! transaction per run (so an interrupted experiment resumes where it stopped), read by `ordo tune show`,
//! `ordo tune export` and `ordo report` (read-only).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;

pub use ordo_results::tune::{
    ConfigurationRow, ExperimentData, ExperimentMeta, ExperimentRow, RecheckMeta, RunRow,
    SearchMeta,
};

use crate::design::Configuration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("database: bad JSON in {what}: {source}")]
    Json {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("no experiment {0} in the database")]
    NoExperiment(i64),
    #[error("the database holds no experiments")]
    Empty,
    #[error("{}: no such database", .0.display())]
    Missing(PathBuf),
    #[error("{}: not an ordo tune store ({reason})", .path.display())]
    NotAStore { path: PathBuf, reason: String },
}

impl StoreError {
    /// The file named is not a store (missing, not SQLite, another program's database): a usage error.
    pub fn is_bad_file(&self) -> bool {
        matches!(self, StoreError::Missing(_) | StoreError::NotAStore { .. })
    }
}

/// A run to record.
#[derive(Clone, Debug)]
pub struct NewRun {
    pub config: usize,
    pub block: usize,
    pub warmup: bool,
    pub started_unix_ms: i64,
    pub duration_s: f64,
    pub error: Option<String>,
    pub metrics: BTreeMap<String, f64>,
}

/// 64-bit FNV-1a, hex: identifies an experiment file's text for resuming.
pub fn text_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS experiments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    spec_path TEXT NOT NULL,
    spec_text TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    created_unix INTEGER NOT NULL,
    finished_unix INTEGER,
    meta_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS fingerprints (
    experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id),
    json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS configurations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    idx INTEGER NOT NULL,
    label TEXT NOT NULL,
    values_json TEXT NOT NULL,
    is_baseline INTEGER NOT NULL,
    UNIQUE (experiment_id, idx)
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment_id INTEGER NOT NULL REFERENCES experiments(id),
    configuration_idx INTEGER NOT NULL,
    block INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    started_unix_ms INTEGER NOT NULL,
    duration_s REAL NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX IF NOT EXISTS runs_by_experiment ON runs(experiment_id);
";

fn to_json<T: Serialize>(what: &'static str, v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|source| StoreError::Json { what, source })
}

fn insert_configuration(
    conn: &Connection,
    experiment: i64,
    idx: usize,
    label: &str,
    values: &BTreeMap<String, String>,
    is_baseline: bool,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO configurations (experiment_id, idx, label, values_json, is_baseline) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![experiment, idx as i64, label, to_json("configuration", values)?, is_baseline],
    )?;
    Ok(())
}

fn insert_fingerprint(
    conn: &Connection,
    experiment: i64,
    fp: &serde_json::Value,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO fingerprints (experiment_id, json) VALUES (?1, ?2)",
        params![experiment, fp.to_string()],
    )?;
    Ok(())
}

/// A run and its (finite) metrics; `ok` as stored (a copied run keeps its own).
fn insert_run(
    conn: &Connection,
    experiment: i64,
    run: &NewRun,
    ok: bool,
) -> Result<i64, StoreError> {
    conn.execute(
        "INSERT INTO runs (experiment_id, configuration_idx, block, warmup, started_unix_ms, duration_s, ok, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            experiment,
            run.config as i64,
            run.block as i64,
            run.warmup,
            run.started_unix_ms,
            run.duration_s,
            ok,
            run.error
        ],
    )?;
    let id = conn.last_insert_rowid();
    let mut st =
        conn.prepare_cached("INSERT INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)")?;
    for (k, v) in &run.metrics {
        if v.is_finite() {
            st.execute(params![id, k, v])?;
        }
    }
    Ok(id)
}

/// The store.
pub struct Store {
    conn: Connection,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn json<T: serde::de::DeserializeOwned>(what: &'static str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|source| StoreError::Json { what, source })
}

impl Store {
    /// Open (create) a store for writing.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store { conn })
    }

    /// Open an existing store for writing (to resume): a missing file is not created and a file that
    /// is not an ordo tune store (not SQLite, corrupt, another program's database) is left unchanged;
    /// both are errors naming the file.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing(path.to_path_buf()));
        }
        let not_a_store = |e: StoreError| StoreError::NotAStore {
            path: path.to_path_buf(),
            reason: match e {
                StoreError::Sql(e) => e.to_string(),
                e => e.to_string(),
            },
        };
        {
            let ro = Store::open_read_only(path).map_err(not_a_store)?;
            ro.list_experiments().map_err(not_a_store)?;
            for table in ["fingerprints", "configurations", "runs", "metrics"] {
                ro.conn
                    .prepare(&format!("SELECT * FROM {table} LIMIT 0"))
                    .map_err(|e| not_a_store(e.into()))?;
            }
        }
        Store::open(path)
    }

    /// Open an existing store read-only (for `ordo report` and `ordo tune show`).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        Ok(Store { conn })
    }

    /// A store in memory (tests).
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store { conn })
    }

    /// Create an experiment with its configurations and fingerprint (one transaction).
    #[allow(clippy::too_many_arguments)]
    pub fn create_experiment(
        &mut self,
        name: &str,
        spec_path: &str,
        spec_text: &str,
        seed: u64,
        meta: &ExperimentMeta,
        configs: &[Configuration],
        fingerprint: Option<&serde_json::Value>,
    ) -> Result<i64, StoreError> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiments (name, spec_path, spec_text, spec_hash, seed, status, created_unix, meta_json)
             VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7)",
            params![name, spec_path, spec_text, text_hash(spec_text), seed as i64, now_unix(), to_json("meta", meta)?],
        )?;
        let id = tx.last_insert_rowid();
        for (i, c) in configs.iter().enumerate() {
            insert_configuration(&tx, id, i, &c.label, &c.values, c.is_baseline)?;
        }
        if let Some(fp) = fingerprint {
            insert_fingerprint(&tx, id, fp)?;
        }
        tx.commit()?;
        Ok(id)
    }

    /// Copy a whole experiment (from another store) into this one, under a new id, in one transaction:
    /// its row, fingerprint, configurations, runs and metrics. Returns the new id.
    pub fn import(&mut self, data: &ExperimentData) -> Result<i64, StoreError> {
        let e = &data.experiment;
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiments (name, spec_path, spec_text, spec_hash, seed, status, created_unix, finished_unix, meta_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![e.name, e.spec_path, e.spec_text, e.spec_hash, e.seed as i64, e.status, e.created_unix, e.finished_unix, to_json("meta", &e.meta)?],
        )?;
        let id = tx.last_insert_rowid();
        if let Some(fp) = &data.fingerprint {
            insert_fingerprint(&tx, id, fp)?;
        }
        for c in &data.configurations {
            insert_configuration(&tx, id, c.idx, &c.label, &c.values, c.is_baseline)?;
        }
        for r in &data.runs {
            insert_run(
                &tx,
                id,
                &NewRun {
                    config: r.config,
                    block: r.block,
                    warmup: r.warmup,
                    started_unix_ms: r.started_unix_ms,
                    duration_s: r.duration_s,
                    error: r.error.clone(),
                    metrics: r.metrics.clone(),
                },
                r.ok,
            )?;
        }
        tx.commit()?;
        Ok(id)
    }

    /// Record one run and its metrics (one transaction).
    pub fn record_run(&mut self, experiment: i64, run: &NewRun) -> Result<i64, StoreError> {
        let tx = self.conn.transaction()?;
        let id = insert_run(&tx, experiment, run, run.error.is_none())?;
        tx.commit()?;
        Ok(id)
    }

    pub fn set_status(&mut self, experiment: i64, status: &str) -> Result<(), StoreError> {
        let finished = (status == "finished").then(now_unix);
        self.conn.execute(
            "UPDATE experiments SET status = ?2, finished_unix = ?3 WHERE id = ?1",
            params![experiment, status, finished],
        )?;
        Ok(())
    }

    /// Add configuration `idx` to an experiment (a search adds each trial when it proposes it).
    pub fn add_configuration(
        &mut self,
        experiment: i64,
        idx: usize,
        c: &Configuration,
    ) -> Result<(), StoreError> {
        insert_configuration(
            &self.conn,
            experiment,
            idx,
            &c.label,
            &c.values,
            c.is_baseline,
        )
    }

    /// Replace an experiment's metadata (a search records its re-check when it starts).
    pub fn update_meta(
        &mut self,
        experiment: i64,
        meta: &ExperimentMeta,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE experiments SET meta_json = ?2 WHERE id = ?1",
            params![experiment, to_json("meta", meta)?],
        )?;
        Ok(())
    }

    fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(ExperimentRow, String)> {
        Ok((
            ExperimentRow {
                id: r.get(0)?,
                name: r.get(1)?,
                spec_path: r.get(2)?,
                spec_text: r.get(3)?,
                spec_hash: r.get(4)?,
                seed: r.get::<_, i64>(5)? as u64,
                status: r.get(6)?,
                created_unix: r.get(7)?,
                finished_unix: r.get(8)?,
                meta: ExperimentMeta {
                    knobs: Vec::new(),
                    objective: String::new(),
                    score_terms: Vec::new(),
                    scale_knob: None,
                    scale_base: None,
                    min_runs: 0,
                    max_runs: 0,
                    rel_ci: 0.0,
                    warmup_blocks: 0,
                    fixed_work: false,
                    notes: Vec::new(),
                    ..Default::default()
                },
            },
            r.get(9)?,
        ))
    }

    const COLS: &'static str = "id, name, spec_path, spec_text, spec_hash, seed, status, created_unix, finished_unix, meta_json";

    /// All experiments, oldest first.
    pub fn list_experiments(&self) -> Result<Vec<ExperimentRow>, StoreError> {
        let mut st = self.conn.prepare(&format!(
            "SELECT {} FROM experiments ORDER BY id",
            Self::COLS
        ))?;
        let rows = st
            .query_map([], Self::row)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(mut e, m)| {
                e.meta = json("meta", &m)?;
                Ok(e)
            })
            .collect()
    }

    pub fn experiment(&self, id: i64) -> Result<ExperimentRow, StoreError> {
        let (mut e, m) = self
            .conn
            .query_row(
                &format!("SELECT {} FROM experiments WHERE id = ?1", Self::COLS),
                [id],
                Self::row,
            )
            .optional()?
            .ok_or(StoreError::NoExperiment(id))?;
        e.meta = json("meta", &m)?;
        Ok(e)
    }

    /// The newest experiment not finished whose file text hashes to `hash` (to resume it).
    pub fn resumable(&self, hash: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM experiments WHERE spec_hash = ?1 AND status != 'finished' ORDER BY id DESC LIMIT 1",
                [hash],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The newest unfinished experiment.
    pub fn latest_unfinished(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT id FROM experiments WHERE status != 'finished' ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The newest experiment.
    pub fn latest(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("SELECT MAX(id) FROM experiments", [], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .ok_or(StoreError::Empty)
    }

    /// One experiment with its fingerprint, configurations, runs and metrics.
    pub fn load(&self, id: i64) -> Result<ExperimentData, StoreError> {
        let experiment = self.experiment(id)?;
        let fingerprint: Option<String> = self
            .conn
            .query_row(
                "SELECT json FROM fingerprints WHERE experiment_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let fingerprint = fingerprint.map(|s| json("fingerprint", &s)).transpose()?;
        let mut st = self.conn.prepare(
            "SELECT id, idx, label, values_json, is_baseline FROM configurations WHERE experiment_id = ?1 ORDER BY idx",
        )?;
        let raw = st
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, bool>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let configurations = raw
            .into_iter()
            .map(|(cid, idx, label, v, b)| {
                Ok(ConfigurationRow {
                    id: cid,
                    idx: idx as usize,
                    label,
                    values: json("configuration", &v)?,
                    is_baseline: b,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut st = self.conn.prepare(
            "SELECT id, configuration_idx, block, warmup, started_unix_ms, duration_s, ok, error
             FROM runs WHERE experiment_id = ?1 ORDER BY id",
        )?;
        let mut runs = st
            .query_map([id], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    config: r.get::<_, i64>(1)? as usize,
                    block: r.get::<_, i64>(2)? as usize,
                    warmup: r.get(3)?,
                    started_unix_ms: r.get(4)?,
                    duration_s: r.get(5)?,
                    ok: r.get(6)?,
                    error: r.get(7)?,
                    metrics: BTreeMap::new(),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut st = self.conn.prepare(
            "SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.experiment_id = ?1",
        )?;
        let mut by_run: BTreeMap<i64, BTreeMap<String, f64>> = BTreeMap::new();
        for row in st.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, f64>(2)?,
            ))
        })? {
            let (rid, name, value) = row?;
            by_run.entry(rid).or_default().insert(name, value);
        }
        for r in &mut runs {
            if let Some(m) = by_run.remove(&r.id) {
                r.metrics = m;
            }
        }
        Ok(ExperimentData {
            experiment,
            fingerprint,
            configurations,
            runs,
        })
    }
}

/// CSV of every run: experiment, configuration, label, block, warmup, ok, then one column per metric.
pub fn to_csv(data: &ExperimentData) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let metrics = data.metric_names();
    let knobs: Vec<&String> = data.experiment.meta.knobs.iter().map(|(k, _)| k).collect();
    let mut out = String::from("experiment,configuration,label,baseline");
    for k in &knobs {
        out.push(',');
        out.push_str(&field(k));
    }
    out.push_str(",block,warmup,ok,started_unix_ms,duration_s");
    for m in &metrics {
        out.push(',');
        out.push_str(&field(m));
    }
    out.push('\n');
    for r in &data.runs {
        let c = data.configurations.iter().find(|c| c.idx == r.config);
        let label = c.map(|c| c.label.as_str()).unwrap_or("");
        out.push_str(&format!(
            "{},{},{},{}",
            data.experiment.id,
            r.config,
            field(label),
            c.is_some_and(|c| c.is_baseline)
        ));
        for k in &knobs {
            out.push(',');
            out.push_str(&field(
                c.and_then(|c| c.values.get(*k))
                    .map(String::as_str)
                    .unwrap_or(""),
            ));
        }
        out.push_str(&format!(
            ",{},{},{},{},{}",
            r.block, r.warmup, r.ok, r.started_unix_ms, r.duration_s
        ));
        for m in &metrics {
            out.push(',');
            if let Some(v) = r.metrics.get(m) {
                out.push_str(&v.to_string());
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn meta() -> ExperimentMeta {
        ExperimentMeta {
            knobs: vec![("nice".into(), vec!["0".into(), "5".into()])],
            objective: "maximize".into(),
            score_terms: vec![("web.throughput".into(), 1.0)],
            scale_knob: None,
            scale_base: None,
            min_runs: 3,
            max_runs: 5,
            rel_ci: 0.02,
            warmup_blocks: 0,
            fixed_work: false,
            notes: vec!["note".into()],
            ..Default::default()
        }
    }

    #[test]
    fn round_trip_in_memory() {
        let mut s = Store::in_memory().unwrap();
        let configs = vec![
            Configuration {
                label: "baseline".into(),
                values: BTreeMap::new(),
                is_baseline: true,
            },
            Configuration {
                label: "nice=5".into(),
                values: [("nice".to_string(), "5".to_string())].into(),
                is_baseline: false,
            },
        ];
        let fp = serde_json::json!({"hostname": "h"});
        let id = s
            .create_experiment("e", "e.toml", "text", 7, &meta(), &configs, Some(&fp))
            .unwrap();
        assert_eq!(s.resumable(&text_hash("text")).unwrap(), Some(id));
        for (i, v) in [100.0, 110.0, f64::NAN].iter().enumerate() {
            s.record_run(
                id,
                &NewRun {
                    config: i % 2,
                    block: i / 2,
                    warmup: false,
                    started_unix_ms: 1,
                    duration_s: 0.5,
                    error: None,
                    metrics: [("web.throughput".to_string(), *v)].into(),
                },
            )
            .unwrap();
        }
        let d = s.load(id).unwrap();
        assert_eq!(d.configurations.len(), 2);
        assert_eq!(d.runs.len(), 3);
        assert_eq!(d.values(0, "web.throughput"), vec![100.0]);
        assert_eq!(d.values(1, "web.throughput"), vec![110.0]);
        assert_eq!(d.fingerprint, Some(fp));
        assert_eq!(d.experiment.meta, meta());
        let csv = to_csv(&d);
        assert!(
            csv.starts_with("experiment,configuration,label,baseline,nice,block"),
            "{csv}"
        );
        assert_eq!(csv.lines().count(), 4);
        s.set_status(id, "finished").unwrap();
        assert_eq!(s.resumable(&text_hash("text")).unwrap(), None);
        assert_eq!(s.list_experiments().unwrap().len(), 1);
        assert!(matches!(s.load(99), Err(StoreError::NoExperiment(99))));
    }

    #[test]
    fn read_only_open_of_a_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.db");
        let mut s = Store::open(&p).unwrap();
        let id = s
            .create_experiment("e", "e.toml", "t", 1, &meta(), &[], None)
            .unwrap();
        drop(s);
        let r = Store::open_read_only(&p).unwrap();
        assert_eq!(r.latest().unwrap(), id);
        assert!(r.load(id).unwrap().fingerprint.is_none());
    }

    #[test]
    fn open_existing_neither_creates_nor_changes_a_file_that_is_not_a_store() {
        let d = tempfile::tempdir().unwrap();
        // Missing: an error naming the file, and no file created.
        let missing = d.path().join("missing.db");
        let e = Store::open_existing(&missing).unwrap_err();
        assert!(e.is_bad_file());
        assert_eq!(
            e.to_string(),
            format!("{}: no such database", missing.display())
        );
        assert!(!missing.exists());

        // Not SQLite: named, left byte for byte.
        let garbage = d.path().join("garbage.db");
        std::fs::write(&garbage, "not a database, just text\n").unwrap();
        let e = Store::open_existing(&garbage).unwrap_err();
        assert!(e.is_bad_file());
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("{}: not an ordo tune store (", garbage.display())),
            "{msg}"
        );
        assert_eq!(
            std::fs::read_to_string(&garbage).unwrap(),
            "not a database, just text\n"
        );

        // Another program's SQLite database: refused, and no tables of ours added to it.
        let other = d.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE notes (x TEXT);")
            .unwrap();
        let e = Store::open_existing(&other).unwrap_err();
        assert!(e.is_bad_file(), "{e}");
        let tables: Vec<String> = Connection::open(&other)
            .unwrap()
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(tables, vec!["notes".to_string()]);

        // A store (even an empty one) opens.
        let good = d.path().join("good.db");
        drop(Store::open(&good).unwrap());
        let s = Store::open_existing(&good).unwrap();
        assert!(s.list_experiments().unwrap().is_empty());
    }
}
