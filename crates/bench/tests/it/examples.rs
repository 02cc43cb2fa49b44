//! Every mix under examples/bench/ parses and validates against a local target, so the documented commands
//! cannot rot.

use std::path::Path;

use ordo_bench::{Mix, Target};

#[test]
fn example_mixes_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bench");
    let target = Target::parse("http://127.0.0.1:8080/").unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let mix = Mix::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            mix.validate_against(&target)
                .unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(seen >= 3, "found {seen} example mixes");
    let seed = Mix::from_file(&dir.join("seed003-mix.toml")).unwrap();
    let names: Vec<&str> = seed.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["light", "medium", "heavy"]);
}
