//! The committed JSON Schemas (crates/results/schema/*.json, which the docs link to) are exactly the ones
//! generated from the types, and the result files kept as fixtures and examples validate against them.
//! After a deliberate change to a result type: `ORDO_BLESS=1 cargo test -p ordo-results --test it schemas::`.

use std::path::{Path, PathBuf};

use ordo_testkit::json_schema;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_schemas_are_the_generated_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
    let bless = std::env::var_os("ORDO_BLESS").is_some();
    for (file, text) in ordo_results::schema::files() {
        let path = dir.join(file);
        if bless {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{} differs from the schema generated from the types; if the change is deliberate, run \
             ORDO_BLESS=1 cargo test -p ordo-results --test it schemas:: and commit the file",
            path.display()
        );
    }
}

/// Every JSON document of a file (probe-pid files are JSON lines).
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map_while(Result::ok) // a truncated fixture yields what parses
        .collect()
}

#[test]
fn committed_result_files_validate() {
    let mut checked = 0;
    for dir in ["crates/report/tests/fixtures", "examples/report"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "jsonl"))
            .collect();
        paths.sort();
        for path in paths {
            for doc in documents(&path) {
                let schema = match ordo_results::kind_of(&doc) {
                    Some("bench") => ordo_results::schema::bench(),
                    Some("demo") => ordo_results::schema::demo(),
                    Some(k) if k.starts_with("probe-") => ordo_results::schema::probe(),
                    _ => continue, // deliberately broken fixtures and non-results
                };
                let errors = json_schema::check(&schema, &doc);
                assert!(errors.is_empty(), "{}: {errors:?}", path.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "only {checked} result files found");
}
