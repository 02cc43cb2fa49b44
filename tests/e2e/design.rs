//! The design rules the crate map relies on, checked on the source tree: within each crate (and the binary),
//! no top-level module imports one that imports it back, so every crate reads as layers (docs/design.md).
//! A `crate::m` path outside comments and `#[cfg(test)]` code is an import of module `m`. Between crates,
//! data flows one way: `results` depends on no project crate and `report` on `results` and `util` only, so
//! a reader never reaches the server, the load generator or the tune runner.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The `.rs` files below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules a file's non-test code names as `crate::<module>`.
fn imports(src: &str) -> BTreeSet<String> {
    let code = src.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `ordo_crate::`, not this crate
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                out.insert(name);
            }
        }
    }
    out
}

/// Module → the modules it imports, for one crate's `src`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let deps = graph.entry(top.clone()).or_default();
        deps.extend(imports(&text).into_iter().filter(|m| *m != top));
    }
    graph
}

/// The groups of modules that reach each other (strongly connected components with more than one module).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if graph.contains_key(m) && seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|k| (k, reach(k))).collect();
    let mut groups = BTreeSet::new();
    for (a, ra) in &reached {
        let group: BTreeSet<String> = ra
            .iter()
            .filter(|b| *b != *a && reached[b].contains(*a))
            .cloned()
            .chain(std::iter::once((*a).clone()))
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups.into_iter().collect()
}

#[test]
fn no_crate_has_a_module_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut srcs = vec![root.join("src")];
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        srcs.push(e.path().join("src"));
    }
    let mut found = Vec::new();
    let mut modules = 0;
    for src in &srcs {
        let graph = module_graph(src);
        modules += graph.len();
        for c in cycles(&graph) {
            found.push(format!("{}: {c:?}", src.display()));
        }
    }
    assert!(
        modules > 50,
        "read only {modules} modules: is the tree where it was?"
    );
    assert!(found.is_empty(), "modules importing each other: {found:#?}");
}

#[test]
fn a_cycle_is_found() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    let found = cycles(&g);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0],
        BTreeSet::from(["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(
        imports("use crate::x::Y; // crate::z\nlet a = ordo_crate::w; crate::v::f();"),
        BTreeSet::from(["x".into(), "v".into()])
    );
}

/// The project crates (`ordo-*`) a manifest's normal dependencies name: `[dependencies]` and
/// `[target.'…'.dependencies]`; dev- and build-dependencies are not the library's.
fn project_deps(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut normal = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(section) = line.strip_prefix('[') {
            let section = section.trim_end_matches(']').trim();
            normal = section == "dependencies" || section.ends_with(".dependencies");
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if normal && name.starts_with("ordo-") {
            out.insert(name);
        }
    }
    out
}

/// The project crates each crate may depend on, for the crates the one-way flow constrains: readers read
/// results only (and render with the document model); results and the document model are leaves.
const LAYERS: &[(&str, &[&str])] = &[
    ("results", &[]),
    ("doc", &[]),
    ("report", &["ordo-results", "ordo-doc", "ordo-util"]),
];

/// What `krate`'s manifest depends on that its layer forbids.
fn layer_violations(krate: &str, manifest: &str) -> Vec<String> {
    let Some((_, allowed)) = LAYERS.iter().find(|(k, _)| *k == krate) else {
        return Vec::new();
    };
    project_deps(manifest)
        .into_iter()
        .filter(|d| !allowed.contains(&d.as_str()))
        .map(|d| format!("crates/{krate} depends on {d} (allowed: {allowed:?})"))
        .collect()
}

#[test]
fn readers_depend_on_results_only_and_results_on_no_project_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for (krate, _) in LAYERS {
        let path = root.join("crates").join(krate).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).unwrap();
        assert!(
            manifest.contains("[dependencies]"),
            "{}: no [dependencies]",
            path.display()
        );
        found.extend(layer_violations(krate, &manifest));
    }
    assert!(found.is_empty(), "a reader above a producer: {found:#?}");
}

#[test]
fn a_reader_reaching_a_producer_is_found() {
    let report = r#"
[package]
name = "ordo-report"

[dependencies]
ordo-util.workspace = true
ordo-results = { workspace = true }
ordo-tune.workspace = true # the store reader

[target.'cfg(unix)'.dependencies]
ordo-sys.workspace = true

[dev-dependencies]
ordo-bench.workspace = true
"#;
    assert_eq!(
        layer_violations("report", report),
        vec![
            "crates/report depends on ordo-sys (allowed: [\"ordo-results\", \"ordo-doc\", \"ordo-util\"])",
            "crates/report depends on ordo-tune (allowed: [\"ordo-results\", \"ordo-doc\", \"ordo-util\"])",
        ]
    );
    let results = "[dependencies]\nserde.workspace = true\nordo-sys.workspace = true\n";
    assert_eq!(
        layer_violations("results", results),
        vec!["crates/results depends on ordo-sys (allowed: [])"]
    );
    assert!(
        layer_violations(
            "results",
            "[dev-dependencies]\nordo-testkit.workspace = true\n"
        )
        .is_empty()
    );
}
