//! The design rules the crate map relies on, checked on the source tree (docs/design.md, "Rules the design
//! test checks"): within each crate (and the binary), no top-level module imports one that imports it back,
//! so every crate reads as layers — a `crate::m` path outside comments and `#[cfg(test)]` code is an import
//! of module `m`. Between crates, data flows one way: `results` depends on no project crate and `report` on
//! `results` and `util` only, so a reader never reaches the server, the load generator or the tune runner.
//! No source file has more than 1,000 lines of code before its tests, and each crate's integration tests
//! are one binary, `tests/it/main.rs` (the binary's: `tests/e2e/main.rs`), unless a listed reason needs
//! another.
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

/// The most lines of code a source file may have before its tests: past this, split it along its concepts
/// into a module folder (docs/design.md).
const MAX_FILE_LINES: usize = 1000;

/// A file's lines of code: those before the first line that starts with `#[cfg(test)]`.
fn non_test_lines(src: &str) -> usize {
    src.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

/// The modules `path` declares test-only (`#[cfg(test)]` on the line before `mod name;`), as the path of
/// their code without `.rs`: `crates/x/src/tests` for `mod tests;` in `crates/x/src/lib.rs`.
fn test_only_modules(path: &str, src: &str) -> Vec<String> {
    let base = match path.rsplit_once('/') {
        Some((dir, "lib.rs" | "main.rs" | "mod.rs")) => dir.to_string(),
        _ => path.trim_end_matches(".rs").to_string(),
    };
    let lines: Vec<&str> = src.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim() == "#[cfg(test)]")
        .filter_map(|w| {
            let decl = w[1].trim();
            let decl = decl
                .strip_prefix("pub(crate) ")
                .or_else(|| decl.strip_prefix("pub "))
                .unwrap_or(decl);
            decl.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .map(|name| format!("{base}/{name}"))
        .collect()
}

/// The files among `files` (path from the root, text) with more than [`MAX_FILE_LINES`] lines of code,
/// as `path: N lines`; test-only modules are not counted.
fn oversized(files: &[(String, String)]) -> Vec<String> {
    let test_only: Vec<String> = files
        .iter()
        .flat_map(|(p, s)| test_only_modules(p, s))
        .collect();
    let is_test = |p: &str| {
        test_only.iter().any(|t| {
            p.strip_prefix(t.as_str())
                .is_some_and(|r| r == ".rs" || r.starts_with('/'))
        })
    };
    files
        .iter()
        .filter(|(p, _)| !is_test(p))
        .filter_map(|(p, s)| {
            let n = non_test_lines(s);
            (n > MAX_FILE_LINES).then(|| format!("{p}: {n} lines"))
        })
        .collect()
}

/// The directories of the workspace's packages, from the root (`""`: the binary's own), each with its path.
fn packages(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = vec![(String::new(), root.to_path_buf())];
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        if e.path().join("Cargo.toml").is_file() {
            out.push((
                format!("crates/{}", e.file_name().to_string_lossy()),
                e.path(),
            ));
        }
    }
    out.sort();
    out
}

/// `rel` joined under the package directory `pkg` (`""`: the root).
fn under(pkg: &str, rel: &str) -> String {
    if pkg.is_empty() {
        rel.to_string()
    } else {
        format!("{pkg}/{rel}")
    }
}

#[test]
fn no_source_file_is_over_1000_lines_of_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for (pkg, dir) in packages(root) {
        let mut found = Vec::new();
        rust_files(&dir.join("src"), &mut found);
        for f in found {
            let rel = f.strip_prefix(&dir).unwrap().to_string_lossy().into_owned();
            files.push((under(&pkg, &rel), std::fs::read_to_string(&f).unwrap()));
        }
    }
    assert!(
        files.len() > 100,
        "read only {} files: is the tree where it was?",
        files.len()
    );
    let over = oversized(&files);
    assert!(
        over.is_empty(),
        "over {MAX_FILE_LINES} lines before the tests; split each into a module folder along its concepts \
         (docs/design.md): {over:#?}"
    );
}

#[test]
fn an_oversized_file_is_found() {
    let lines = |n: usize| "x\n".repeat(n);
    let files = vec![
        ("crates/a/src/big.rs".to_string(), lines(1001)),
        // an indented `#[cfg(test)]` (a test-only item inside the code) does not end the count
        (
            "crates/a/src/inner.rs".to_string(),
            format!("{}    #[cfg(test)]\n{}", lines(10), lines(991)),
        ),
        (
            "crates/a/src/tested.rs".to_string(),
            format!(
                "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
                lines(1000),
                lines(500)
            ),
        ),
        (
            "crates/a/src/lib.rs".to_string(),
            "mod big;\n#[cfg(test)]\nmod fuzz;\n".to_string(),
        ),
        ("crates/a/src/fuzz.rs".to_string(), lines(1500)),
        (
            "crates/a/src/m/mod.rs".to_string(),
            "#[cfg(test)]\npub(crate) mod tests;\n".to_string(),
        ),
        ("crates/a/src/m/tests/deep.rs".to_string(), lines(1500)),
        ("crates/a/src/fuzzy.rs".to_string(), lines(1002)),
    ];
    assert_eq!(
        oversized(&files),
        vec![
            "crates/a/src/big.rs: 1001 lines",
            "crates/a/src/inner.rs: 1002 lines",
            "crates/a/src/fuzzy.rs: 1002 lines",
        ]
    );
    assert_eq!(non_test_lines("a\n#[cfg(test)]\nb\n"), 1);
}

/// Integration-test binaries besides each crate's `tests/it/main.rs` and the binary's `tests/e2e/main.rs`,
/// each with why it cannot be a module of its package's one binary (docs/design.md, "crates/*/tests/it/").
/// `[[test]]` entries and `autotests` keys of a Cargo.toml are listed the same way
/// (`crates/x/Cargo.toml: [[test]] name`, `crates/x/Cargo.toml: autotests`).
const OWN_TEST_BINARIES: &[(&str, &str)] = &[
    (
        "crates/bench/tests/alloc.rs",
        "its #[global_allocator] counts every allocation of the process: another test's threads would add \
         theirs to the count",
    ),
    (
        "crates/probe/tests/interrupt.rs",
        "checks that the probe's threads are gone from /proc/self/task after a stop: another test's threads \
         would be counted as its own",
    ),
];

/// The test binaries cargo builds for a package (`pkg`: its directory from the root, `""` for the
/// binary's own): `tests/*.rs` and `tests/*/main.rs`.
fn test_binaries(pkg: &str, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("tests")) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        if p.is_file() && name.ends_with(".rs") {
            out.push(under(pkg, &format!("tests/{name}")));
        } else if p.join("main.rs").is_file() {
            out.push(under(pkg, &format!("tests/{name}/main.rs")));
        }
    }
    out
}

/// A manifest's `[[test]]` entries and `autotests` key, as `path: [[test]] name` and `path: autotests`.
fn manifest_test_entries(path: &str, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_test = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_test = line == "[[test]]";
            if in_test {
                out.push(format!("{path}: [[test]]"));
            }
        } else if in_test && line.split('=').next().is_some_and(|k| k.trim() == "name") {
            let name = line
                .split('=')
                .nth(1)
                .unwrap_or("")
                .trim()
                .trim_matches('"');
            if let Some(last) = out.last_mut() {
                *last = format!("{path}: [[test]] {name}");
            }
        } else if line
            .split('=')
            .next()
            .is_some_and(|k| k.trim() == "autotests")
        {
            out.push(format!("{path}: autotests"));
        }
    }
    out
}

/// What breaks the one-binary rule: a test binary that is neither its package's one binary nor listed, a
/// manifest's unlisted `[[test]]` entry or `autotests` key, and a listed entry that is not there.
fn stray_test_binaries(
    binaries: &[String],
    manifests: &[(String, String)],
    listed: &[(&str, &str)],
) -> Vec<String> {
    let is_listed = |b: &str| listed.iter().any(|(l, _)| *l == b);
    let own: Vec<&String> = binaries
        .iter()
        .filter(|b| match b.strip_prefix("crates/") {
            Some(rest) => rest
                .split_once('/')
                .is_none_or(|(_, r)| r != "tests/it/main.rs"),
            None => b.as_str() != "tests/e2e/main.rs",
        })
        .collect();
    let entries: Vec<String> = manifests
        .iter()
        .flat_map(|(p, t)| manifest_test_entries(p, t))
        .collect();
    let mut found = Vec::new();
    for b in &own {
        if !is_listed(b) {
            found.push(format!("{b}: a test binary of its own, not listed"));
        }
    }
    for e in &entries {
        if !is_listed(e) {
            found.push(format!("{e}: not listed"));
        }
    }
    for (l, _) in listed {
        if !own.iter().any(|b| b == l) && !entries.iter().any(|e| e == l) {
            found.push(format!("{l}: listed, but not there"));
        }
    }
    found
}

#[test]
fn every_crate_has_one_integration_test_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut binaries = Vec::new();
    let mut manifests = Vec::new();
    for (pkg, dir) in packages(root) {
        binaries.extend(test_binaries(&pkg, &dir));
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        manifests.push((under(&pkg, "Cargo.toml"), text));
    }
    assert!(
        binaries.iter().any(|b| b == "tests/e2e/main.rs") && manifests.len() > 10,
        "found {binaries:?} in {} packages: is the tree where it was?",
        manifests.len()
    );
    let stray = stray_test_binaries(&binaries, &manifests, OWN_TEST_BINARIES);
    assert!(
        stray.is_empty(),
        "each crate's integration tests are one binary, tests/it/main.rs, with a module per topic; move \
         these into it, or list them in OWN_TEST_BINARIES with the reason they need a process of their \
         own: {stray:#?}"
    );
}

#[test]
fn a_stray_test_binary_is_found() {
    let binaries: Vec<String> = [
        "tests/e2e/main.rs",
        "tests/it/main.rs",
        "crates/a/tests/it/main.rs",
        "crates/a/tests/extra.rs",
        "crates/b/tests/more/main.rs",
        "crates/c/tests/own.rs",
    ]
    .map(String::from)
    .to_vec();
    let manifests = vec![
        (
            "crates/a/Cargo.toml".to_string(),
            "[package]\nname = \"a\"\nautotests = false\n\n[[test]]\nname = \"x\"\npath = \"t/x.rs\"\n\n\
             [dependencies]\nname = \"not a test\"\n"
                .to_string(),
        ),
        (
            "crates/c/Cargo.toml".to_string(),
            "[package]\nname = \"c\"\n\n[[test]]\nname = \"y\"\n".to_string(),
        ),
    ];
    let listed = [
        ("crates/c/tests/own.rs", "a reason"),
        ("crates/c/Cargo.toml: [[test]] y", "a reason"),
        ("crates/d/tests/gone.rs", "a reason"),
    ];
    assert_eq!(
        stray_test_binaries(&binaries, &manifests, &listed),
        vec![
            "tests/it/main.rs: a test binary of its own, not listed",
            "crates/a/tests/extra.rs: a test binary of its own, not listed",
            "crates/b/tests/more/main.rs: a test binary of its own, not listed",
            "crates/a/Cargo.toml: autotests: not listed",
            "crates/a/Cargo.toml: [[test]] x: not listed",
            "crates/d/tests/gone.rs: listed, but not there",
        ]
    );
}
