//! Renders every kind of input from the fixtures and checks the page with a real XML parser: well-formed,
//! one SVG per chart, every chart with labelled axes and a caption, and the plotted points equal to the data
//! in the input files.

use std::path::PathBuf;

use roxmltree::{Document, Node, ParsingOptions};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn render(names: &[&str]) -> String {
    let paths: Vec<PathBuf> = names.iter().map(|n| fixture(n)).collect();
    let inputs = ordo_report::load_all(&paths, None).expect("fixtures load");
    ordo_report::render_html_with(
        &inputs,
        &ordo_report::Options {
            title: "test".into(),
            generated: Some("now".into()),
        },
    )
}

fn parse(html: &str) -> Document<'_> {
    let opts = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    Document::parse_with_options(html, opts).expect("the page is well-formed XML")
}

fn class_is(n: &Node, c: &str) -> bool {
    n.attribute("class")
        .is_some_and(|v| v.split_whitespace().any(|x| x == c))
}

fn by_class<'a, 'i>(root: Node<'a, 'i>, tag: &str, class: &str) -> Vec<Node<'a, 'i>> {
    root.descendants()
        .filter(|n| n.has_tag_name(tag) && class_is(n, class))
        .collect()
}

fn figure<'a, 'i>(doc: &'a Document<'i>, id: &str) -> Node<'a, 'i> {
    doc.descendants()
        .find(|n| n.has_tag_name("figure") && n.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no figure {id}"))
}

/// (x, y) of the points of series `name` in figure `id`.
fn points(doc: &Document, id: &str, name: &str) -> Vec<(f64, f64)> {
    let fig = figure(doc, id);
    let series = by_class(fig, "g", "series")
        .into_iter()
        .find(|g| g.attribute("data-series") == Some(name))
        .unwrap_or_else(|| panic!("no series {name} in {id}"));
    by_class(series, "path", "pt")
        .iter()
        .map(|p| {
            (
                p.attribute("data-x").unwrap().parse().unwrap(),
                p.attribute("data-y").unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// The structural checks every page must pass; returns the number of charts.
fn check_page(doc: &Document) -> usize {
    let figures: Vec<Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("figure") && class_is(n, "chart"))
        .collect();
    for f in &figures {
        let svgs: Vec<Node> = f.descendants().filter(|n| n.has_tag_name("svg")).collect();
        assert_eq!(svgs.len(), 1, "one svg per chart");
        let labels: Vec<String> = by_class(svgs[0], "text", "axis-label")
            .iter()
            .map(|t| t.text().unwrap_or("").to_string())
            .collect();
        assert_eq!(labels.len(), 2, "both axes labelled");
        assert!(labels.iter().all(|l| !l.trim().is_empty()));
        assert!(!by_class(svgs[0], "text", "tick").is_empty(), "ticks");
        let cap = f
            .children()
            .find(|n| n.has_tag_name("figcaption"))
            .and_then(|c| c.text())
            .unwrap_or("");
        assert!(!cap.trim().is_empty() && !cap.contains('\n'), "caption");
    }
    let all_svgs = doc.descendants().filter(|n| n.has_tag_name("svg")).count();
    assert_eq!(all_svgs, figures.len(), "no svg outside a chart");
    // Self-contained: nothing fetched.
    for n in doc.descendants().filter(|n| n.is_element()) {
        assert!(!n.has_tag_name("script"), "no scripts");
        assert!(!n.has_tag_name("link"), "no external stylesheets");
        assert!(n.attribute("src").is_none(), "nothing loaded");
    }
    figures.len()
}

#[test]
fn demo_page_plots_the_response_times_and_ratios() {
    let html = render(&["demo-lottery.json"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 2);
    let data = json("demo-lottery.json");
    let steps = data["steps"].as_array().unwrap();
    for (ci, class) in ["light", "medium", "heavy"].iter().enumerate() {
        let want: Vec<(f64, f64)> = steps
            .iter()
            .map(|s| {
                (
                    s["clients"].as_f64().unwrap(),
                    s["classes"][ci]["mean_ms"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(points(&doc, "input-1-response", class), want);
    }
    let lh: Vec<(f64, f64)> = steps
        .iter()
        .map(|s| {
            (
                s["clients"].as_f64().unwrap(),
                s["ratio_light_heavy"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(points(&doc, "input-1-ratios", "light/heavy"), lh);
    let refs: Vec<&str> = by_class(figure(&doc, "input-1-ratios"), "g", "ref-line")
        .iter()
        .map(|g| g.attribute("data-y").unwrap())
        .collect();
    assert_eq!(refs, vec!["4", "2"]);
    let text = ordo_report::render_text(
        &ordo_report::load_all(&[fixture("demo-lottery.json")], None).unwrap(),
    );
    assert!(text.contains("light/heavy") && text.contains("Target met"));
}

fn percentiles(v: &Value) -> Vec<(f64, f64)> {
    v["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["p"].as_f64().unwrap(), p["ms"].as_f64().unwrap()))
        .filter(|(p, _)| *p < 100.0)
        .collect()
}

#[test]
fn bench_page_plots_percentiles_and_throughput() {
    let html = render(&["bench-closed.json"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 2);
    let data = json("bench-closed.json");
    assert_eq!(
        points(&doc, "input-1-percentiles", "all requests"),
        percentiles(&data["summary"]["latency"])
    );
    let tl: Vec<(f64, f64)> = data["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["second"].as_f64().unwrap(),
                t["complete"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(points(&doc, "input-1-throughput", "completed"), tl);
    assert!(html.contains("Server process 4242"));
}

/// bench-closed.json changed by `edit`, rendered from a temporary file.
fn render_edited(edit: impl FnOnce(&mut Value)) -> (String, Value) {
    let mut v = json("bench-closed.json");
    edit(&mut v);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.json");
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let inputs = ordo_report::load_all(&[path], None).expect("edited fixture loads");
    let html = ordo_report::render_html_with(
        &inputs,
        &ordo_report::Options {
            title: "test".into(),
            generated: Some("now".into()),
        },
    );
    (html, v)
}

/// A run of 9.5 s has half a second in its last bucket: plotted as a rate, not a drop to half (issue 24).
#[test]
fn bench_throughput_scales_the_last_partial_second() {
    let (html, v) = render_edited(|v| {
        v["elapsed_s"] = Value::from(9.5);
        let last = &mut v["timeline"][9]["complete"];
        *last = Value::from(last.as_u64().unwrap() / 2);
    });
    let doc = parse(&html);
    let pts = points(&doc, "input-1-throughput", "completed");
    assert_eq!(pts.len(), 10);
    let half = v["timeline"][9]["complete"].as_f64().unwrap();
    assert_eq!(pts[9], (9.0, half * 2.0));
    assert_eq!(pts[8].1, v["timeline"][8]["complete"].as_f64().unwrap());
    // under a quarter second left: the bucket is left out
    let (html, _) = render_edited(|v| {
        v["elapsed_s"] = Value::from(9.1);
        v["timeline"][9]["complete"] = Value::from(2000);
    });
    let doc = parse(&html);
    assert_eq!(points(&doc, "input-1-throughput", "completed").len(), 9);
}

/// ab's header block on the bench page: server, document, concurrency, then time and requests.
#[test]
fn bench_page_has_the_ab_header_block() {
    let (html, _) = render_edited(|v| {
        v["document"] = serde_json::json!({
            "server_software": "nginx/1.22.1",
            "hostname": "127.0.0.1",
            "port": 18090,
            "path": "/2k.html",
            "length": 2048
        });
    });
    let doc = parse(&html);
    let rows: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("tr"))
        .map(|tr| {
            tr.descendants()
                .filter(|n| n.is_text())
                .map(|n| n.text().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    let at = |k: &str| {
        rows.iter()
            .position(|r| r.starts_with(&format!("{k}|")))
            .unwrap_or_else(|| panic!("no row {k} in {rows:#?}"))
    };
    let order = [
        ("Server Software", "nginx/1.22.1"),
        ("Server Hostname", "127.0.0.1"),
        ("Server Port", "18090"),
        ("Document Path", "/2k.html"),
        ("Document Length", "2048 bytes"),
        ("Concurrency Level", "100"),
        ("Time taken for tests (s)", "10"),
        ("Complete requests", ""),
        ("Failed requests", ""),
    ];
    let mut last = 0;
    for (k, want) in order {
        let i = at(k);
        assert!(i >= last, "{k} out of ab's order: {rows:#?}");
        assert!(rows[i].ends_with(want), "{}", rows[i]);
        last = i;
    }
    // without a recorded document (older reports) the concurrency is still there
    let html = render(&["bench-closed.json"]);
    assert!(html.contains("Concurrency Level") && !html.contains("Server Software"));
}

#[test]
fn bench_mix_has_a_curve_per_class_and_open_loop_both_latencies() {
    let doc_html = render(&["bench-mix.json", "bench-open.json"]);
    let doc = parse(&doc_html);
    // Two inputs × 2 charts, plus the comparison's 2.
    assert_eq!(check_page(&doc), 6);
    let mix = json("bench-mix.json");
    for c in mix["classes"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        assert_eq!(
            points(&doc, "input-1-percentiles", name),
            percentiles(&c["latency"])
        );
    }
    let open = json("bench-open.json");
    assert_eq!(
        points(&doc, "input-2-percentiles", "corrected"),
        percentiles(&open["summary"]["corrected"])
    );
    assert_eq!(
        points(&doc, "input-2-percentiles", "uncorrected"),
        percentiles(&open["summary"]["latency"])
    );
    // The comparison has one series per input, labelled by file name (no fingerprint in bench files).
    let fig = figure(&doc, "compare-bench-percentiles");
    assert_eq!(by_class(fig, "g", "series").len(), 2);
}

#[test]
fn comparison_labels_inputs_by_kernel_and_host() {
    let html = render(&["demo-lottery.json", "demo-stride-other-kernel.json"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 6);
    let names: Vec<&str> = by_class(figure(&doc, "compare-demo-lh"), "g", "series")
        .iter()
        .map(|g| g.attribute("data-series").unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["6.8.0-45-generic @ lab-a", "6.12.9-sched-ext @ lab-b"]
    );
}

#[test]
fn text_output_has_the_same_tables() {
    let inputs = ordo_report::load_all(&[fixture("bench-mix.json")], None).unwrap();
    let text = ordo_report::render_text(&inputs);
    for want in [
        "Per class",
        "Connection Times (ms)",
        "Latency percentiles (ms)",
        "light",
        "heavy",
    ] {
        assert!(text.contains(want), "{want} missing in\n{text}");
    }
}

/// (category, value) of the bars of series `name` in figure `id`.
fn bars(doc: &Document, id: &str, name: &str) -> Vec<(String, f64)> {
    let fig = figure(doc, id);
    let series = by_class(fig, "g", "series")
        .into_iter()
        .find(|g| g.attribute("data-series") == Some(name))
        .unwrap_or_else(|| panic!("no series {name} in {id}"));
    by_class(series, "rect", "bar")
        .iter()
        .map(|r| {
            (
                r.attribute("data-category").unwrap().to_string(),
                r.attribute("data-value").unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn probe_loop_page_plots_the_histograms_and_every_sample() {
    let html = render(&["probe-loop.json"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 3);
    let data = json("probe-loop.json");
    let label = data["label"].as_str().unwrap();
    let want: Vec<(String, f64)> = data["summary"]["relative"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["label"].as_str().unwrap().to_string(),
                b["fraction"].as_f64().unwrap() * 100.0,
            )
        })
        .collect();
    assert_eq!(bars(&doc, "input-1-relative", label), want);
    let samples: Vec<(f64, f64)> = data["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["involuntary"].as_f64().unwrap(),
                s["elapsed_ns"].as_f64().unwrap() / 1e6,
            )
        })
        .collect();
    assert!(
        samples.len() <= 2000,
        "fixture small enough to plot every sample"
    );
    assert_eq!(points(&doc, "input-1-scatter", label), samples);
}

#[test]
fn probe_compare_page_puts_the_runs_side_by_side() {
    let html = render(&["probe-compare.json"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 2);
    let data = json("probe-compare.json");
    for (ci, col) in data["columns"].as_array().unwrap().iter().enumerate() {
        let want: Vec<(String, f64)> = data["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["label"].as_str().unwrap().to_string(),
                    r["fractions"][ci].as_f64().unwrap() * 100.0,
                )
            })
            .collect();
        assert_eq!(
            bars(&doc, "input-1-histograms", col.as_str().unwrap()),
            want
        );
    }
}

#[test]
fn probe_pid_stream_plots_switches_and_wait_over_time() {
    let html = render(&["probe-pid.jsonl"]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 3);
    let text = std::fs::read_to_string(fixture("probe-pid.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let series = |key: &str| -> Vec<(f64, f64)> {
        lines
            .iter()
            .map(|l| {
                (
                    l["t_s"].as_f64().unwrap(),
                    l["process"][key].as_f64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        points(&doc, "input-1-switches", "involuntary"),
        series("involuntary_per_s")
    );
    assert_eq!(
        points(&doc, "input-1-wait", "run-queue wait"),
        series("run_delay_ms_per_s")
    );
}

#[test]
fn corrupt_and_unknown_files_are_refused_with_their_name() {
    let p = fixture("corrupt-truncated.json");
    let e = ordo_report::load(&p, None).unwrap_err().to_string();
    assert!(e.starts_with(&p.display().to_string()), "{e}");
    assert!(
        e.contains("not an ordo result") && e.contains("expected"),
        "{e}"
    );
    let e = ordo_report::parse("x.json", br#"{"kind": "bench", "version": 1, "target": 3}"#)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("x.json: corrupt bench result:"), "{e}");
    let e = ordo_report::parse(
        "pid.jsonl",
        b"{\"kind\": \"probe-pid\", \"version\": 1}\n{\"kind\": \"bench\", \"version\": 1}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("pid.jsonl: corrupt probe-pid result"), "{e}");
}

#[test]
fn large_probe_runs_are_thinned_evenly_and_say_so() {
    let mut data = json("probe-loop.json");
    let samples = data["samples"].as_array().unwrap().clone();
    let many: Vec<Value> = (0..10).flat_map(|_| samples.iter().cloned()).collect();
    let n = many.len();
    data["samples"] = Value::Array(many);
    let input = ordo_report::parse("big.json", data.to_string().as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    let doc = parse(&html);
    let label = data["label"].as_str().unwrap();
    let pts = points(&doc, "input-1-scatter", label);
    let step = n.div_ceil(2000);
    assert_eq!(pts.len(), n.div_ceil(step));
    assert!(pts.len() <= 2000);
    // Every drawn point is a real sample: the k-th drawn is sample k × step.
    let all: Vec<&Value> = data["samples"].as_array().unwrap().iter().collect();
    for (k, (x, y)) in pts.iter().enumerate() {
        let s = all[k * step];
        assert_eq!(*x, s["involuntary"].as_f64().unwrap());
        assert_eq!(*y, s["elapsed_ns"].as_f64().unwrap() / 1e6);
    }
    assert!(html.contains("evenly thinned"));
}

#[test]
fn empty_and_interrupted_results_say_so_instead_of_drawing() {
    let mut demo = json("demo-quick.json");
    demo["steps"] = Value::Array(vec![]);
    demo["complete"] = Value::Bool(false);
    let input = ordo_report::parse("stopped.json", demo.to_string().as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    let doc = parse(&html);
    assert_eq!(check_page(&doc), 0);
    assert!(html.contains("stopped before its last step"));
    assert!(html.contains("no finished step"));

    let mut bench = json("bench-closed.json");
    bench["summary"]["latency"]["count"] = Value::from(0);
    bench["timeline"] = Value::Array(vec![]);
    bench["interrupted"] = Value::Bool(true);
    let input = ordo_report::parse("empty.json", bench.to_string().as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    assert_eq!(check_page(&parse(&html)), 0);
    assert!(html.contains("No request completed") && html.contains("interrupted"));
}

#[test]
fn interrupted_probe_runs_say_so() {
    let mut data = json("probe-loop.json");
    data["interrupted"] = Value::Bool(true);
    let done = data["summary"]["samples"].as_u64().unwrap();
    let planned = data["config"]["samples"].as_u64().unwrap();
    let input = ordo_report::parse("stopped.json", data.to_string().as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    check_page(&parse(&html));
    assert!(
        html.contains(&format!("interrupted after {done} of {planned} samples")),
        "{html}"
    );

    let mut cmp = json("probe-compare.json");
    cmp["interrupted"] = Value::Bool(true);
    cmp["not_run"] = serde_json::json!(["loaded"]);
    let input = ordo_report::parse("cmp.json", cmp.to_string().as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    assert!(html.contains("interrupted; not run: loaded"), "{html}");

    let text = std::fs::read_to_string(fixture("probe-pid.jsonl")).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines.last_mut().unwrap()["interrupted"] = Value::Bool(true);
    let jsonl: String = lines.iter().map(|v| format!("{v}\n")).collect();
    let input = ordo_report::parse("pid.jsonl", jsonl.as_bytes()).unwrap();
    let html = ordo_report::render_html(&[input]);
    assert!(html.contains("Watching was interrupted"), "{html}");

    // not interrupted: no such note
    let html = render(&["probe-loop.json", "probe-compare.json", "probe-pid.jsonl"]);
    assert!(!html.contains("interrupted"));
}

/// A merged bench result (`ordo report merge`, issue 24): the page header has a line per generator
/// machine, the section a table of the runs, and a forced merge's warning is in the header, the section
/// and the terminal tables.
#[test]
fn merged_bench_results_show_each_machine_and_the_forced_merge() {
    let run = |source: &str, host: &str| {
        serde_json::json!({
            "source": source,
            "fingerprint": { "hostname": host, "kernel_release": "6.1.0", "cores": 2 },
            "started_unix_ms": 1_700_000_000_000u64,
            "elapsed_s": 10.0,
            "connections": 50,
            "threads": 2,
            "complete": 1000,
            "failed": 0,
            "rps": 100.0,
            "p50_ms": 1.5,
            "p99_ms": 9.25
        })
    };
    let (html, _) = render_edited(|v| {
        v["merged"] = serde_json::json!([run("gen1.json", "gen-a"), run("gen2.json", "gen-b")]);
        v["warnings"] = serde_json::json!([
            "WARNING: merged with --force although the results measure different workloads: x"
        ]);
    });
    let header = &html[..html.find("</header>").unwrap()];
    assert!(
        header.contains("run gen1.json: host gen-a")
            && header.contains("run gen2.json: host gen-b"),
        "{header}"
    );
    assert_eq!(
        html.matches("WARNING: merged with --force").count(),
        2,
        "banner + section"
    );
    let doc = parse(&html);
    let cells: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("td"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        cells.contains(&"gen2.json") && cells.contains(&"6.1.0 @ gen-b"),
        "{cells:?}"
    );
    assert!(cells.contains(&"9.25 ms"), "{cells:?}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.json");
    let mut v = json("bench-closed.json");
    v["merged"] = serde_json::json!([run("gen1.json", "gen-a")]);
    v["warnings"] = serde_json::json!(["WARNING: forced"]);
    std::fs::write(&p, v.to_string()).unwrap();
    let text = ordo_report::render_text(&ordo_report::load_all(&[p], None).unwrap());
    assert!(
        text.contains("WARNING: forced") && text.contains("Merged from 1 runs"),
        "{text}"
    );
}

/// A ramp's stages are drawn (the load ramp and each stage's req/s; p50/p99 by stage) and tabled (issue 24).
#[test]
fn bench_stages_are_charted_and_tabled() {
    let stage = |n: u64, start: f64, from: f64, target: f64, rps: f64, p99: f64| {
        serde_json::json!({
            "stage": n, "start_s": start, "duration_s": 2.0, "from": from, "target": target,
            "unit": "connections", "complete": (rps * 2.0) as u64, "failed": 0, "rps": rps,
            "latency": {"count": (rps * 2.0) as u64, "min_ms": 0.05, "mean_ms": 0.2, "stdev_ms": 0.1,
                        "max_ms": 9.0, "percentiles": [{"p": 50.0, "ms": 0.1}, {"p": 99.0, "ms": p99}]},
            "corrected": null
        })
    };
    let (html, _) = render_edited(|v| {
        v["stages"] = Value::from(vec![
            stage(1, 0.0, 0.0, 10.0, 16630.5, 4.5),
            stage(2, 2.0, 10.0, 0.0, 20685.0, 4.4),
        ]);
    });
    let doc = parse(&html);
    assert_eq!(
        points(&doc, "input-1-load", "connections"),
        vec![(0.0, 0.0), (2.0, 10.0), (2.0, 10.0), (4.0, 0.0)]
    );
    assert_eq!(
        points(&doc, "input-1-stage-latency", "p99"),
        vec![(1.0, 4.5), (3.0, 4.4)]
    );
    assert!(html.contains("Stages (requests by the stage they ended in"));
    assert!(html.contains("10 → 0 connections"));
    // without stages, neither chart nor table
    let (plain, _) = render_edited(|_| {});
    assert!(!plain.contains("input-1-load") && !plain.contains("Stages (requests"));
    // an open loop's offered rate is drawn on the throughput chart, in its own unit
    let (open, _) = render_edited(|v| {
        let mut s = stage(1, 0.0, 100.0, 300.0, 190.0, 3.0);
        s["unit"] = Value::from("req/s");
        v["stages"] = Value::from(vec![s]);
    });
    let doc = parse(&open);
    // per second of the timeline, the ramp's mean over that second: 100→300 over 2 s is 150 then 250, and 0
    // after the ramp ends (the fixture's timeline runs 10 s)
    let offered = points(&doc, "input-1-throughput", "offered (stages)");
    assert_eq!(offered.len(), 10);
    assert!((offered[0].1 - 150.0).abs() < 0.01, "{offered:?}");
    assert!((offered[1].1 - 250.0).abs() < 0.01, "{offered:?}");
    assert_eq!(offered[2], (2.0, 0.0));
    assert!(!open.contains("input-1-load"));
}
