//! Browser test: headless Chromium opens a report built from every fixture, from a file:// URL with the
//! network disabled, and must show every chart; the screenshot is kept at target/report-screenshot.png (a CI
//! artifact). Without Chromium the test fails and says to run ./scripts/setup.sh, unless ORDO_SKIP_BROWSER=1.

use crate::common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn workspace_target() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                !n.starts_with("corrupt") && (n.ends_with(".json") || n.ends_with(".jsonl"))
            })
        })
        .collect();
    v.sort();
    v
}

/// Run chromium with the given extra args; (stdout, stderr), killed after [`LIMIT`].
fn chromium(profile: &Path, extra: &[String], url: &str) -> (String, String) {
    let mut cmd = ordo_testkit::chromium::command(profile);
    cmd.args([
        "--disable-quic",
        // Any attempt to reach the network fails at once.
        "--proxy-server=127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (t_out.join().unwrap(), t_err.join().unwrap())
}

#[test]
fn chromium_shows_every_chart_offline() {
    if !Path::new(ordo_testkit::chromium::PATH).exists() {
        if std::env::var("ORDO_SKIP_BROWSER").as_deref() == Ok("1") {
            eprintln!(
                "skipping the browser test: ORDO_SKIP_BROWSER=1 and {} is missing",
                ordo_testkit::chromium::PATH
            );
            return;
        }
        panic!(
            "{} is missing: run ./scripts/setup.sh (or set ORDO_SKIP_BROWSER=1 to skip)",
            ordo_testkit::chromium::PATH
        );
    }
    let stores = tempfile::tempdir().unwrap();
    let mut paths = fixtures();
    for (file, host, kernel, speed) in [
        ("a.db", "lab-a", "6.8.0-45-generic", 1.0),
        ("b.db", "lab-b", "6.12.9", 1.08),
    ] {
        let p = stores.path().join(file);
        common::build_store(&p, host, kernel, speed, 3, 3);
        paths.push(p);
    }
    let inputs = ordo_report::load_all(&paths, common::STORES).expect("fixtures load");
    let html = ordo_report::render_html(&inputs);
    let expected_charts = html.matches("<figure class=\"chart\"").count();
    assert!(expected_charts >= 30, "every kind of input gives charts");

    let target = workspace_target();
    std::fs::create_dir_all(&target).unwrap();
    let page = target.join("report-browser.html");
    std::fs::write(&page, &html).unwrap();
    let page = page.canonicalize().unwrap();
    let url = format!("file://{}", page.display());
    let shot = target.join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);

    let profile = tempfile::tempdir().unwrap();
    let (dom, err) = chromium(profile.path(), &["--dump-dom".to_string()], &url);
    assert!(
        dom.contains("<h1>ordo report</h1>"),
        "the page did not load:\n{err}"
    );
    assert_eq!(
        dom.matches("<svg").count(),
        expected_charts,
        "every chart rendered"
    );
    assert_eq!(dom.matches("<figcaption>").count(), expected_charts);
    for bad in ["Failed to load resource", "Uncaught", "net::ERR_"] {
        assert!(!err.contains(bad), "browser reported {bad:?}:\n{err}");
    }

    let profile = tempfile::tempdir().unwrap();
    let (_, err) = chromium(
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000".to_string(),
        ],
        &url,
    );
    let meta = std::fs::metadata(&shot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}\n{err}", shot.display()));
    assert!(meta.len() > 10_000, "the screenshot has content");
}
