//! End-to-end tests of `ordo report` (owned by the report work; see docs/report.md): the binary on committed
//! fixtures writes a self-contained page, `--text` prints the tables, and a corrupt or unknown file is
//! refused with its name and a non-zero exit.

use std::path::PathBuf;
use std::time::Duration;

use crate::util::{ordo, run_with_timeout};

const LIMIT: Duration = Duration::from_secs(60);

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/report/tests/fixtures")
        .join(name)
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/report")
        .join(name)
}

#[test]
fn report_writes_one_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let mut cmd = ordo();
    cmd.arg("report")
        .arg(fixture("demo-quick.json"))
        .arg(fixture("bench-mix.json"))
        .arg(fixture("probe-compare.json"))
        .arg(example("tune-6.8.db"))
        .arg("-o")
        .arg(&out);
    let o = run_with_timeout(cmd, LIMIT);
    assert_eq!(o.code(), Some(0), "stderr: {}", o.stderr);
    assert!(o.stderr.contains("wrote"), "{}", o.stderr);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Demo — demo-quick.json"));
    assert!(html.contains("Bench — bench-mix.json"));
    assert!(html.contains("Probe comparison — probe-compare.json"));
    assert!(html.contains("Tune — seed000-style sweep (tune-6.8.db)"));
    assert_eq!(
        html.matches("<svg").count(),
        html.matches("<figure class=\"chart\"").count()
    );
    assert!(!html.contains("<script") && !html.contains("http://fonts"));
}

#[test]
fn report_text_prints_aligned_tables_and_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = ordo();
    cmd.current_dir(dir.path())
        .arg("report")
        .arg("--text")
        .arg(fixture("bench-closed.json"))
        .arg(example("tune-6.8.db"));
    let o = run_with_timeout(cmd, LIMIT);
    assert_eq!(o.code(), Some(0), "stderr: {}", o.stderr);
    for want in [
        "== Bench — bench-closed.json ==",
        "Connection Times (ms)",
        "Per configuration (web.throughput)",
        "machine defaults (baseline)",
    ] {
        assert!(o.stdout.contains(want), "{want} missing:\n{}", o.stdout);
    }
    assert!(
        !dir.path().join("report.html").exists(),
        "--text alone writes no page"
    );
}

#[test]
fn report_refuses_a_corrupt_file_by_name() {
    let bad = fixture("corrupt-truncated.json");
    let mut cmd = ordo();
    cmd.arg("report").arg("--text").arg(&bad);
    let o = run_with_timeout(cmd, LIMIT);
    assert_eq!(o.code(), Some(2), "stderr: {}", o.stderr);
    assert!(
        o.stderr.contains(&bad.display().to_string()),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("expected"), "{}", o.stderr);

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "hello").unwrap();
    let mut cmd = ordo();
    cmd.arg("report")
        .arg(&other)
        .arg("-o")
        .arg(dir.path().join("r.html"));
    let o = run_with_timeout(cmd, LIMIT);
    assert_eq!(o.code(), Some(2), "stderr: {}", o.stderr);
    assert!(
        o.stderr.contains("notes.txt: not an ordo result"),
        "{}",
        o.stderr
    );
    assert!(!dir.path().join("r.html").exists());
}
