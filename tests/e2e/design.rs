//! The design rule the crate map relies on, checked on the source tree: within each crate (and the binary),
//! no top-level module imports one that imports it back, so every crate reads as layers (docs/design.md).
//! A `crate::m` path outside comments and `#[cfg(test)]` code is an import of module `m`.

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
