//! The search's goals on synthetic response surfaces (run by bench/tune-search.sh): for each surface, many
//! seeded experiments with the model-based search and, for reference, random search with the same budget.
//! Prints the success rate (found within 2% of the grid optimum), trials as a share of the grid, and how
//! much of the reported gain the re-check against the baseline kept.
//!
//! `cargo run --release -p ordo-tune --example search_bench -- [REPETITIONS] [BUDGET_FRACTION] [NOISE]`
//!
//! With `stores GRID.db SEARCH.db` it compares a real search against the full grid of the same knobs
//! instead (the newest experiment of each): the search's best configuration as the grid measured it, the
//! grid's optimum, trials against grid points, and the gain the re-check kept.

use ordo_tune::search::sim::{SimConfig, SimResult, random_search, simulate, surfaces};
use ordo_tune::spec::RepeatRule;

fn summary(name: &str, rs: &[SimResult]) {
    let n = rs.len() as f64;
    let near = rs.iter().filter(|r| r.near_optimum(0.02)).count();
    // Seeds with no reported gain have nothing to keep: they are counted apart, never as 100% kept.
    let with_gain: Vec<&SimResult> = rs.iter().filter(|r| r.kept().is_some()).collect();
    let nothing = rs.len() - with_gain.len();
    let mut sorted: Vec<f64> = with_gain.iter().filter_map(|r| r.kept()).collect();
    sorted.sort_by(f64::total_cmp);
    let kept90 = sorted.iter().filter(|k| **k >= 0.9).count();
    let gap: f64 = rs.iter().map(|r| 1.0 - r.found / r.optimum).sum::<f64>() / n;
    let reported: f64 = with_gain.iter().map(|r| r.reported_gain).sum::<f64>();
    let rechecked: f64 = with_gain.iter().map(|r| r.recheck_gain).sum::<f64>();
    let m = with_gain.len().max(1) as f64;
    println!(
        "  {name:<7} within 2% of the grid optimum: {near}/{} ({:.0}%)  mean gap {:.2}%  trials {}/{} ({:.0}% of the grid)",
        rs.len(),
        100.0 * near as f64 / n,
        100.0 * gap,
        rs[0].trials,
        rs[0].grid,
        100.0 * rs[0].trials as f64 / rs[0].grid as f64,
    );
    if sorted.is_empty() {
        println!(
            "          no seed reported a gain over the baseline: nothing to keep in {nothing}/{}",
            rs.len()
        );
        return;
    }
    println!(
        "          over the {} seeds with a reported gain: reported {:+.1}% re-checked {:+.1}% (kept {:.0}% overall; median kept {:.0}%; kept >= 90% in {kept90}/{}); nothing to keep in {nothing}/{} (not scored)",
        with_gain.len(),
        100.0 * reported / m,
        100.0 * rechecked / m,
        100.0 * rechecked / reported,
        100.0 * sorted[sorted.len() / 2],
        with_gain.len(),
        rs.len()
    );
}

/// A search store against a grid store of the same knobs.
fn stores(grid: &str, search: &str) -> Result<(), String> {
    use ordo_tune::analysis::analyze;
    use ordo_tune::store::Store;
    let load = |p: &str| -> Result<ordo_tune::analysis::Analysis, String> {
        let s = Store::open_read_only(p.as_ref()).map_err(|e| format!("{p}: {e}"))?;
        let id = s.latest().map_err(|e| format!("{p}: {e}"))?;
        Ok(analyze(&s.load(id).map_err(|e| format!("{p}: {e}"))?))
    };
    let (g, s) = (load(grid)?, load(search)?);
    let sign = if g.objective == "minimize" { -1.0 } else { 1.0 };
    let measured = || g.configs.iter().filter(|c| c.score.n > 0);
    let optimum = measured()
        .max_by(|a, b| (sign * a.score.mean).total_cmp(&(sign * b.score.mean)))
        .ok_or("the grid store has no measured configuration")?;
    let summary = s
        .search
        .as_ref()
        .ok_or("the second store is not a search")?;
    let best = summary.best.as_deref().unwrap_or("the baseline");
    let best = best.strip_prefix("re-check: ").unwrap_or(best);
    let best_in_grid = measured()
        .find(|c| c.label == best || (best == "the baseline" && c.is_baseline))
        .ok_or(format!("`{best}` is not among the grid's configurations"))?;
    let gap = sign * (optimum.score.mean - best_in_grid.score.mean) / optimum.score.mean.abs();
    // Both count their baseline: the grid's configurations against the search's trials.
    let grid_points = measured().count();
    println!(
        "grid optimum:      {} = {:.1} (± {:.1}, {} runs)",
        optimum.label, optimum.score.mean, optimum.score.ci95, optimum.score.n
    );
    println!(
        "search best:       {best} = {:.1} in the grid's runs (± {:.1}): {:.2}% below the grid optimum (goal: within 2%) -> {}",
        best_in_grid.score.mean,
        best_in_grid.score.ci95,
        100.0 * gap,
        if gap <= 0.02 { "MET" } else { "NOT MET" }
    );
    let share = summary.trials as f64 / grid_points.max(1) as f64;
    println!(
        "trials:            {} configurations against the grid's {} ({:.0}%; goal: at most 20%) -> {}",
        summary.trials,
        grid_points,
        100.0 * share,
        if share <= 0.2 + 1e-9 {
            "MET"
        } else {
            "NOT MET"
        }
    );
    match (summary.reported_gain, &summary.recheck, summary.kept) {
        (Some(rep), Some(r), Some(k)) => println!(
            "re-check:          reported {:+.2}%, re-checked {:+.2}% over {} interleaved runs each (p {}): kept {:.0}% (goal: at least 90%) -> {}",
            100.0 * rep,
            100.0 * r.gain,
            r.runs,
            ordo_tune::analysis::format_p(r.p),
            100.0 * k,
            if k >= 0.9 { "MET" } else { "NOT MET" }
        ),
        (Some(rep), Some(r), None) => println!(
            "re-check:          reported {:+.2}%, re-checked {:+.2}% (no positive gain was reported, so none to keep)",
            100.0 * rep,
            100.0 * r.gain
        ),
        _ => println!("re-check:          none (no trial beat the baseline)"),
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("stores") {
        if let Err(e) = stores(
            args.get(1).map_or("grid.db", String::as_str),
            args.get(2).map_or("search.db", String::as_str),
        ) {
            eprintln!("search_bench: {e}");
            std::process::exit(1);
        }
        return;
    }
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
