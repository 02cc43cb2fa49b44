//! The search's goals on synthetic response surfaces (run by bench/tune-search.sh): for each surface, many
//! seeded experiments with the model-based search and, for reference, random search with the same budget.
//! Prints the success rate (found within 2% of the grid optimum), trials as a share of the grid, and how
//! much of the reported gain the re-check against the baseline kept.
//!
//! `cargo run --release -p ordo-tune --example search_bench -- [REPETITIONS] [BUDGET_FRACTION] [NOISE]`

use ordo_tune::search::sim::{SimConfig, SimResult, random_search, simulate, surfaces};
use ordo_tune::spec::RepeatRule;

fn summary(name: &str, rs: &[SimResult]) {
    let n = rs.len() as f64;
    let near = rs.iter().filter(|r| r.near_optimum(0.02)).count();
    let kept: Vec<f64> = rs.iter().map(SimResult::kept).collect();
    let mut sorted = kept.clone();
    sorted.sort_by(f64::total_cmp);
    let kept90 = kept.iter().filter(|k| **k >= 0.9).count();
    let gap: f64 = rs.iter().map(|r| 1.0 - r.found / r.optimum).sum::<f64>() / n;
    let reported: f64 = rs.iter().map(|r| r.reported_gain).sum::<f64>() / n;
    let rechecked: f64 = rs.iter().map(|r| r.recheck_gain).sum::<f64>() / n;
    println!(
        "  {name:<7} within 2% of the grid optimum: {near}/{} ({:.0}%)  mean gap {:.2}%  trials {}/{} ({:.0}% of the grid)",
        rs.len(),
        100.0 * near as f64 / n,
        100.0 * gap,
        rs[0].trials,
        rs[0].grid,
        100.0 * rs[0].trials as f64 / rs[0].grid as f64,
    );
    println!(
        "          gain reported {:+.1}% re-checked {:+.1}% (kept {:.0}% overall; median kept {:.0}%; kept >= 90% in {kept90}/{})",
        100.0 * reported,
        100.0 * rechecked,
        100.0 * rechecked / reported,
        100.0 * sorted[sorted.len() / 2],
        rs.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(100);
    let fraction: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.2);
    let noise: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0.02);
    for s in surfaces() {
        let budget = ((s.space.size() as f64 * fraction).floor() as usize).max(4);
        let cfg = SimConfig {
            budget,
            initial: (budget / 4).clamp(2, 10),
            runs_per_trial: 3,
            noise,
            rule: RepeatRule {
                min: 3,
                max: 10,
                rel_ci: 0.02,
                warmup: 0,
            },
        };
        println!(
            "surface {}: {reps} seeds, budget {budget} trials, 3 runs per trial, noise {:.1}% per run",
            s.name,
            100.0 * noise
        );
        let gp: Vec<SimResult> = (1..=reps).map(|seed| simulate(&s, &cfg, seed)).collect();
        summary("search", &gp);
        let rnd: Vec<SimResult> = (1..=reps)
            .map(|seed| random_search(&s, &cfg, seed))
            .collect();
        summary("random", &rnd);
    }
}
