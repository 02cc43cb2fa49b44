//! Tune stores: read read-only through ordo-tune's reader (as ordo passes it; the report crate itself reads
//! only the typed results it returns), the report draws one bar per
//! configuration (CI, baseline, significance), a main-effect plot per knob, percentile curves per
//! configuration and seed 001's scalability charts — with the plotted values equal to the stored runs.

use crate::common;

use std::collections::BTreeMap;

use roxmltree::{Document, ParsingOptions};

fn attr_f64(n: &roxmltree::Node, a: &str) -> f64 {
    n.attribute(a).unwrap().parse().unwrap()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn tune_store_renders_every_chart_with_the_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tune.db");
    common::build_store(&db, "lab-a", "6.8.0-45-generic", 1.0, 42, 4);
    let input = ordo_report::load(&db, common::STORES).expect("store loads");
    assert_eq!(input.kind(), ordo_report::Kind::Tune);
    assert_eq!(input.label(), "6.8.0-45-generic @ lab-a");
    let html = ordo_report::render_html(std::slice::from_ref(&input));
    let doc = Document::parse_with_options(
        &html,
        ParsingOptions {
            allow_dtd: true,
            ..ParsingOptions::default()
        },
    )
    .expect("well-formed");
    let figs: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("figure"))
        .collect();
    let ids: Vec<&str> = figs.iter().map(|f| f.attribute("id").unwrap()).collect();
    assert_eq!(
        ids,
        vec![
            "input-1-e1-configs",
            "input-1-e1-effect-1",
            "input-1-e1-effect-2",
            "input-1-e1-percentiles",
            "input-1-e1-scale-runtime",
            "input-1-e1-scale-ratio"
        ]
    );
    for f in &figs {
        assert_eq!(f.descendants().filter(|n| n.has_tag_name("svg")).count(), 1);
    }

    // Expected values straight from the store's runs (warm-ups excluded).
    let store = ordo_tune::store::Store::open_read_only(&db).unwrap();
    let data = store.load(1).unwrap();
    let per_config = |idx: usize, metric: &str| -> f64 { mean(&data.values(idx, metric)) };

    let bars: Vec<_> = figs[0]
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("data-category").is_some())
        .collect();
    assert_eq!(bars.len(), data.configurations.len());
    // The y axis names the score with its unit.
    assert!(
        figs[0]
            .descendants()
            .any(|n| n.has_tag_name("text") && n.text() == Some("web.throughput (per s)")),
        "the bar chart's y axis says web.throughput (per s)"
    );
    for (bar, cfg) in bars.iter().zip(&data.configurations) {
        assert_eq!(bar.attribute("data-category"), Some(cfg.label.as_str()));
        let want = per_config(cfg.idx, "web.throughput");
        assert!((attr_f64(bar, "data-value") - want).abs() <= 1e-9 * want);
        let (lo, hi) = (attr_f64(bar, "data-lo"), attr_f64(bar, "data-hi"));
        assert!(lo < want && want < hi, "the CI surrounds the mean");
        assert_eq!(
            bar.attribute("class") == Some("bar baseline"),
            cfg.is_baseline
        );
    }
    // threads=2 is 20% slower than the baseline: flagged; the others within noise of it are not all flagged.
    let flags = figs[0]
        .descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("class") == Some("flag"))
        .count();
    assert!(
        flags >= 2,
        "the threads=2 configurations differ significantly"
    );
    assert!(flags < data.configurations.len() - 1);

    // Main effect of threads: mean over configurations at each level.
    let effect: Vec<(String, f64)> = figs[2]
        .descendants()
        .filter(|n| n.attribute("class") == Some("pt"))
        .map(|n| {
            (
                n.attribute("data-x").unwrap().to_string(),
                attr_f64(&n, "data-y"),
            )
        })
        .collect();
    // Over the design's levels only: the baseline (machine defaults) is no level of anything (issue 13;
    // it was drawn as a fifth level, "(machine)").
    let levels = ["2", "4", "8", "16"];
    assert_eq!(effect.len(), 4);
    for ((lvl, y), want_lvl) in effect.iter().zip(levels) {
        assert_eq!(lvl, want_lvl);
        let ms: Vec<f64> = data
            .configurations
            .iter()
            .filter(|c| c.values.get(common::KNOB_THREADS).map(String::as_str) == Some(want_lvl))
            .map(|c| per_config(c.idx, "web.throughput"))
            .collect();
        assert!((y - mean(&ms)).abs() <= 1e-9 * y);
    }

    // Percentile curves: more than 8 configurations, so baseline, best and worst are drawn.
    let series: BTreeMap<String, Vec<(f64, f64)>> = figs[3]
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .map(|g| {
            (
                g.attribute("data-series").unwrap().to_string(),
                g.descendants()
                    .filter(|n| n.attribute("class") == Some("pt"))
                    .map(|n| (attr_f64(&n, "data-x"), attr_f64(&n, "data-y")))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(series.len(), 3);
    let base = &series["machine defaults (baseline)"];
    let want: Vec<(f64, f64)> = [
        (50.0, "web.p50_ms"),
        (90.0, "web.p90_ms"),
        (95.0, "web.p95_ms"),
        (99.0, "web.p99_ms"),
    ]
    .iter()
    .map(|(p, m)| (*p, per_config(0, m)))
    .collect();
    for ((px, py), (wx, wy)) in base.iter().zip(&want) {
        assert_eq!(px, wx);
        assert!((py - wy).abs() <= 1e-9 * wy);
    }

    // Scalability: one line per swappiness level over threads 2..16.
    let groups = figs[4]
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .count();
    assert_eq!(groups, 2);
    assert!(html.contains("Best: swappiness=10 threads=8"));

    let text = ordo_report::render_text(std::slice::from_ref(&input));
    assert!(text.contains("Per configuration (web.throughput)"));
    assert!(text.contains("Main effects (mean per level)"));
    assert!(text.contains("Scalability over param:threads"));
}

#[test]
fn two_stores_from_different_kernels_are_compared_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.db");
    let b = dir.path().join("b.db");
    common::build_store(&a, "lab-a", "6.8.0-45-generic", 1.0, 1, 3);
    common::build_store(&b, "lab-b", "6.12.9", 1.08, 2, 3);
    let inputs = ordo_report::load_all(&[&a, &b], common::STORES).unwrap();
    let html = ordo_report::render_html(&inputs);
    assert!(html.contains("id=\"compare-tune-1\""));
    let doc = Document::parse_with_options(
        &html,
        ParsingOptions {
            allow_dtd: true,
            ..ParsingOptions::default()
        },
    )
    .unwrap();
    let fig = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("compare-tune-1-configs"))
        .expect("comparison chart");
    let names: Vec<&str> = fig
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .map(|n| n.attribute("data-series").unwrap())
        .collect();
    assert_eq!(names, vec!["6.8.0-45-generic @ lab-a", "6.12.9 @ lab-b"]);
}

#[test]
fn an_sqlite_file_that_is_not_a_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('hi');")
        .unwrap();
    let e = ordo_report::load(&db, common::STORES)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&db.display().to_string()), "{e}");
    assert!(e.contains("not an ordo tune store"), "{e}");

    let empty = dir.path().join("empty.db");
    drop(ordo_tune::store::Store::open(&empty).unwrap());
    let e = ordo_report::load(&empty, common::STORES)
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds no experiment"), "{e}");
}

#[test]
#[ignore = "regenerates the committed example store; run by hand"]
fn regenerate_example_store() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/report");
    std::fs::create_dir_all(&root).unwrap();
    for (file, host, kernel, speed, seed) in [
        ("tune-6.8.db", "lab-a", "6.8.0-45-generic", 1.0, 7),
        ("tune-6.12.db", "lab-b", "6.12.9", 1.08, 8),
    ] {
        let p = root.join(file);
        let _ = std::fs::remove_file(&p);
        common::build_store(&p, host, kernel, speed, seed, 3);
        common::to_rollback_journal(&p);
    }
}

#[test]
fn one_experiment_of_a_store_can_be_picked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tune.db");
    common::build_store(&db, "lab-a", "6.8.0", 1.0, 1, 3);
    common::build_store(&db, "lab-a", "6.8.0", 1.0, 2, 3);
    let all = ordo_report::load(&db, common::STORES).unwrap();
    let html = ordo_report::render_html(std::slice::from_ref(&all));
    assert!(html.contains("id=\"input-1-e1\"") && html.contains("id=\"input-1-e2\""));
    // Same name, same machine: compared within the store, told apart by experiment number.
    assert!(html.contains("id=\"compare-tune-1-configs\""));
    assert!(html.contains("6.8.0 @ lab-a (tune.db #2)"));

    let one = ordo_report::Input::tune_store(&db, Some(2), &ordo_tune::export::read_store).unwrap();
    let html = ordo_report::render_html(&[one]);
    assert!(html.contains("id=\"input-1-e2\"") && !html.contains("id=\"input-1-e1\""));
    let e = ordo_report::Input::tune_store(&db, Some(9), &ordo_tune::export::read_store)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no experiment 9"), "{e}");
}

#[test]
fn a_real_ordo_tune_store_renders_its_stored_means() {
    // Written by `ordo tune run` (a 2 × 2 of workers and nice against the built-in ordo serve).
    let db = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tune-two-by-two.db");
    let input = ordo_report::load(&db, common::STORES).expect("store loads");
    let html = ordo_report::render_html(std::slice::from_ref(&input));
    let doc = Document::parse_with_options(
        &html,
        ParsingOptions {
            allow_dtd: true,
            ..ParsingOptions::default()
        },
    )
    .expect("well-formed");
    let store = ordo_tune::store::Store::open_read_only(&db).unwrap();
    let data = store.load(1).unwrap();
    let bars: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("data-category").is_some())
        .collect();
    assert_eq!(bars.len(), data.configurations.len());
    for (bar, cfg) in bars.iter().zip(&data.configurations) {
        let want = mean(&data.values(cfg.idx, "web.throughput"));
        assert_eq!(bar.attribute("data-category"), Some(cfg.label.as_str()));
        assert!((attr_f64(bar, "data-value") - want).abs() <= 1e-9 * want);
    }
    assert!(!html.contains("(baseline) (baseline)"));
    assert!(html.contains("baseline (workers=4)"));
}

/// Issue 24: a store merged from two kernels showed one machine in the page header, and a merge forced over
/// differing experiments looked like any other. Each experiment's machine is in the header, and the
/// warning is a banner there and a note in every experiment's section (and in the terminal text).
#[test]
fn a_merged_store_shows_every_machine_and_a_forced_merge_warns() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, merged) = (
        dir.path().join("a.db"),
        dir.path().join("b.db"),
        dir.path().join("ab.db"),
    );
    common::build_store(&a, "lab-a", "6.8.0-45-generic", 1.0, 1, 3);
    common::build_store(&b, "lab-b", "6.12.9", 1.08, 2, 3);
    // Their experiment file is not stored (synthetic): refused unless forced.
    let refused = ordo_tune::compare::merge(&[a.clone(), b.clone()], &merged, false)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("no readable experiment file"), "{refused}");
    let done = ordo_tune::compare::merge(&[a, b], &merged, true).unwrap();
    assert!(done.merged[0].machine.contains("lab-a") && done.merged[1].machine.contains("lab-b"));
    let input =
        ordo_report::Input::tune_store(&merged, None, &ordo_tune::export::read_store).unwrap();
    let html = ordo_report::render_html(std::slice::from_ref(&input));
    let header = &html[..html.find("</header>").unwrap()];
    assert!(
        header.contains("experiment #1: host lab-a · kernel 6.8.0-45-generic")
            && header.contains("experiment #2: host lab-b · kernel 6.12.9"),
        "{header}"
    );
    assert!(
        header.contains("<p class=\"warning\">WARNING: merged with --force"),
        "{header}"
    );
    assert_eq!(
        html.matches("WARNING: merged with --force").count(),
        3,
        "banner + 2 sections"
    );
    // The side-by-side comparison of the two says they are not the same experiment either.
    assert!(
        html.contains("WARNING: these runs are not the same experiment"),
        "{html}"
    );
    let text = ordo_report::render_text(&[input]);
    assert!(text.contains("WARNING: merged with --force"), "{text}");
}

/// Issue 24: the HTML banner named the trial with the highest raw mean while the re-check named the
/// search's pick. The banner, like the terminal and the JSON, names the re-checked configuration.
#[test]
fn a_search_banner_names_the_rechecked_best() {
    use ordo_tune::design::Configuration;
    use ordo_tune::store::{ExperimentMeta, NewRun, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("search.db");
    let mut store = Store::open(&db).unwrap();
    let meta: ExperimentMeta = serde_json::from_value(serde_json::json!({
        "knobs": [["param:a", ["1", "2", "3"]]],
        "objective": "maximize",
        "score_terms": [["web.throughput", 1.0]],
        "scale_knob": null,
        "min_runs": 3, "max_runs": 10, "rel_ci": 0.02, "warmup_blocks": 0,
        "design": "search", "confirmatory": true,
        "search": {"budget": 3, "initial": 2, "seed": 1, "grid": 3,
                   "recheck": {"best": 2, "baseline": 3, "candidate": 4,
                               "confirm": {"from": 3, "blocks": 3}}}
    }))
    .unwrap();
    let config = |label: &str, a: Option<&str>, base: bool| Configuration {
        label: label.into(),
        values: a
            .map(|a| [("param:a".to_string(), a.to_string())].into())
            .unwrap_or_default(),
        is_baseline: base,
    };
    let configs = vec![
        config("machine defaults", None, true),
        config("a=2", Some("2"), false),
        config("a=3", Some("3"), false),
        config("re-check: baseline", None, false),
        config("re-check: a=3", Some("3"), false),
    ];
    let id = store
        .create_experiment("s", "s.toml", "", 1, &meta, &configs, None)
        .unwrap();
    // a=2 is the luckiest trial (raw mean 125); the model picked a=3 (120), which the re-check confirms.
    let runs: [&[f64]; 5] = [
        &[100.0, 100.5, 99.5],
        &[125.0, 126.0, 124.0],
        &[120.0, 121.0, 119.0],
        &[100.0, 101.0, 99.0, 100.0, 100.5, 99.5],
        &[118.0, 119.0, 117.0, 118.0, 118.5, 117.5],
    ];
    for (c, xs) in runs.iter().enumerate() {
        for (block, &x) in xs.iter().enumerate() {
            store
                .record_run(
                    id,
                    &NewRun {
                        config: c,
                        block,
                        warmup: false,
                        started_unix_ms: 0,
                        duration_s: 1.0,
                        error: None,
                        metrics: [("web.throughput".to_string(), x)].into(),
                    },
                )
                .unwrap();
        }
    }
    store.set_status(id, "finished").unwrap();
    drop(store);
    let html = ordo_report::render_html(&[ordo_report::Input::tune_store(
        &db,
        None,
        &ordo_tune::export::read_store,
    )
    .unwrap()]);
    assert!(html.contains("Best: a=3 with mean 118"), "{html}");
    assert!(!html.contains("Best: a=2"));
    assert!(html.contains("Main effects — observational"));
}
