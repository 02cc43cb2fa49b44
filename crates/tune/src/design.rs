//! Turning a spec's knobs and design into the list of configurations to run, and the randomized blocked
//! run order (each block runs every configuration once, in a seeded random order, so drift spreads evenly).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::spec::{Design, Spec};
use crate::stats::Rng;

/// One configuration: the value of each knob it sets. Knobs it does not name keep the value found on
/// the machine (nothing is written).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub label: String,
    pub values: BTreeMap<String, String>,
    pub is_baseline: bool,
}

pub use ordo_results::tune::short_name;

pub fn label_of(values: &BTreeMap<String, String>, order: &[String]) -> String {
    if values.is_empty() {
        return "machine defaults".into();
    }
    order
        .iter()
        .filter_map(|k| values.get(k).map(|v| format!("{}={v}", short_name(k))))
        .collect::<Vec<_>>()
        .join(" ")
}

/// All configurations of the experiment; the baseline is always first.
pub fn configurations(spec: &Spec) -> Vec<Configuration> {
    let order: Vec<String> = spec.knobs.iter().map(|k| k.id.to_string()).collect();
    let base = spec.baseline.clone();
    let mut out = vec![Configuration {
        label: format!("baseline ({})", label_of(&base, &order)),
        values: base.clone(),
        is_baseline: true,
    }];
    let push = |values: BTreeMap<String, String>, out: &mut Vec<Configuration>| {
        if out.iter().any(|c| c.values == values) {
            return;
        }
        out.push(Configuration {
            label: label_of(&values, &order),
            values,
            is_baseline: false,
        });
    };
    let full = || {
        let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
        for k in &spec.knobs {
            let name = k.id.to_string();
            let mut next = Vec::with_capacity(combos.len() * k.levels.len());
            for c in &combos {
                for l in &k.levels {
                    let mut c = c.clone();
                    c.insert(name.clone(), l.clone());
                    next.push(c);
                }
            }
            combos = next;
        }
        combos
    };
    match &spec.design {
        Design::Full => {
            for c in full() {
                push(c, &mut out);
            }
        }
        Design::OneAtATime => {
            for k in &spec.knobs {
                for l in &k.levels {
                    let mut c = base.clone();
                    c.insert(k.id.to_string(), l.clone());
                    push(c, &mut out);
                }
            }
        }
        Design::List(list) => {
            for m in list {
                let mut c = base.clone();
                c.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
                push(c, &mut out);
            }
        }
        // A search proposes its configurations as it goes (crate::search); only the baseline is known.
        Design::Search(_) => {}
        Design::Random { n, seed } => {
            let mut all = full();
            let mut rng = Rng::new(*seed);
            rng.shuffle(&mut all);
            for c in all.into_iter().take(*n) {
                push(c, &mut out);
            }
        }
    }
    out
}

/// The order of configurations in block `block` (0-based): a seeded shuffle, different per block.
pub fn block_order(n: usize, seed: u64, block: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut rng = Rng::new(seed ^ (block as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    rng.shuffle(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn spec(design: &str) -> Spec {
        let text = format!(
            r#"
[target]
pid = 1
[workload]
url = "http://127.0.0.1:1/"
[knobs]
"sysctl:vm.swappiness" = [10, 60, 100]
nice = [0, 5, 10]
"debugfs:base_slice_ns" = [1000000, 3000000, 6000000]
{design}
"#
        );
        Spec::parse(&text, Path::new("e.toml"), Path::new(".")).unwrap()
    }

    #[test]
    fn full_factorial_is_27_plus_baseline() {
        let c = configurations(&spec(""));
        assert_eq!(c.len(), 28);
        assert!(c[0].is_baseline && c[0].values.is_empty());
        assert_eq!(c[1].label, "swappiness=10 nice=0 base_slice_ns=1000000");
        let mut labels: Vec<&str> = c.iter().map(|c| c.label.as_str()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), 28);
    }

    #[test]
    fn other_designs() {
        assert_eq!(configurations(&spec("[design]\nkind = \"ofat\"")).len(), 10);
        let r = configurations(&spec("[design]\nkind = \"random\"\nn = 5\nseed = 3"));
        assert_eq!(r.len(), 6);
        assert_eq!(
            r,
            configurations(&spec("[design]\nkind = \"random\"\nn = 5\nseed = 3"))
        );
        let l = configurations(&spec(
            "[design]\nconfigurations = [{ nice = 5 }, { nice = 5, \"sysctl:vm.swappiness\" = 10 }]",
        ));
        assert_eq!(l.len(), 3);
        assert_eq!(l[2].values.len(), 2);
    }

    #[test]
    fn blocks_are_permutations_and_differ() {
        let a = block_order(10, 7, 0);
        let b = block_order(10, 7, 1);
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..10).collect::<Vec<_>>());
        assert_ne!(a, b);
        assert_eq!(a, block_order(10, 7, 0));
    }
}
