//! What a demo run measured, in the JSON form `ordo report` reads (`"kind": "demo"`), with the ratio and
//! verdict arithmetic and the terminal rendering kept pure so they are unit-tested.

use std::path::{Path, PathBuf};

pub use ordo_results::demo::{
    ClassStats, DemoResult, DemoStep, KIND, Outcome, ResultError, VERSION, Verdict, ratio,
    relative_error, verdict,
};

use crate::plan::{
    DemoPlan, TARGET_LIGHT_HEAVY, TARGET_MEDIUM_HEAVY, TARGET_MIN_CLIENTS, format_duration,
};

/// A result with no steps yet for `plan`.
pub fn new_result(plan: &DemoPlan, started_unix_s: u64) -> DemoResult {
    DemoResult {
        kind: KIND.to_string(),
        version: VERSION,
        policy: plan.policy,
        classes: plan.classes.clone(),
        workers: plan.workers,
        service_ms: plan.service.as_secs_f64() * 1e3,
        service_ms_values: crate::plan::service_times_ms(plan.service),
        step_duration_s: plan.step_duration.as_secs_f64(),
        warmup_s: plan.warmup.as_secs_f64(),
        quick: plan.quick,
        started_unix_s,
        complete: false,
        steps: Vec::new(),
        verdict: verdict(plan.policy, &[]),
        fingerprint: None,
    }
}

/// Write the JSON to `dir/demo-<policy>-<started>.json` (creating `dir`) and return the path.
pub fn save(result: &DemoResult, dir: &Path) -> Result<PathBuf, ResultError> {
    std::fs::create_dir_all(dir).map_err(|e| ResultError::Io(dir.to_path_buf(), e))?;
    let path = dir.join(format!(
        "demo-{}-{}.json",
        result.policy.as_str(),
        timestamp(result.started_unix_s)
    ));
    let mut text = result.to_json();
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| ResultError::Io(path.clone(), e))?;
    Ok(path)
}

/// `YYYYmmdd-HHMMSS` (UTC) for a Unix time, for file names.
pub(crate) fn timestamp(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let (y, m, d) = ordo_util::civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// The header printed before the first step.
pub fn render_header(plan: &DemoPlan) -> String {
    let times = crate::plan::service_times_ms(plan.service);
    let weights: Vec<String> = plan
        .classes
        .iter()
        .map(|c| format!("{}={}", c.name, c.weight))
        .collect();
    format!(
        "ordo demo: {} weights {} | {} workers | service {}-{}ms (sleep, mean {}) | {} warm-up + {} per step | about {}s\n\
         target: at >= {} clients light/heavy = {} and medium/heavy = {} within {:.0}%\n\n\
         {:>7}  {:>9} {:>9} {:>9}  {:>11} {:>12}  {:>8}",
        plan.policy,
        weights.join(":"),
        plan.workers,
        times.first().copied().unwrap_or(0),
        times.last().copied().unwrap_or(0),
        format_duration(plan.service),
        format_duration(plan.warmup),
        format_duration(plan.step_duration),
        plan.estimated_duration().as_secs(),
        TARGET_MIN_CLIENTS,
        TARGET_LIGHT_HEAVY,
        TARGET_MEDIUM_HEAVY,
        plan.policy.tolerance() * 100.0,
        "clients",
        "light ms",
        "medium ms",
        "heavy ms",
        "light/heavy",
        "medium/heavy",
        "req/s",
    )
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

/// One line per step, aligned under [`render_header`].
pub fn render_step(step: &DemoStep) -> String {
    let mean = |name: &str| {
        step.classes
            .iter()
            .find(|c| c.name == name)
            .filter(|c| c.requests > 0)
            .map_or_else(|| "-".to_string(), |c| format!("{:.1}", c.mean_ms))
    };
    let rps: f64 = step.classes.iter().map(|c| c.throughput_rps).sum();
    let mut line = format!(
        "{:>7}  {:>9} {:>9} {:>9}  {:>11} {:>12}  {:>8.0}",
        step.clients,
        mean("light"),
        mean("medium"),
        mean("heavy"),
        fmt_ratio(step.ratio_light_heavy),
        fmt_ratio(step.ratio_medium_heavy),
        rps,
    );
    let errors = step.errors();
    if errors > 0 {
        line.push_str(&format!("  ({errors} errors)"));
    }
    line
}

/// The closing verdict lines.
pub fn render_verdict(result: &DemoResult) -> String {
    let v = &result.verdict;
    let pct = |e: Option<f64>| e.map_or_else(|| "-".to_string(), |e| format!("{:.1}%", e * 100.0));
    let mut out = String::new();
    if !result.complete {
        out.push_str("stopped early: the steps above are complete, the rest did not run\n");
    }
    match v.outcome {
        Outcome::NotChecked => out.push_str(&format!(
            "verdict: not checked (no step reached {} clients)",
            v.min_clients
        )),
        outcome => {
            let word = if outcome == Outcome::Met {
                "MET"
            } else {
                "MISSED"
            };
            out.push_str(&format!(
                "verdict: {word} — at {:?} clients the worst errors are {} (light/heavy vs {}) and {} \
                 (medium/heavy vs {}); {} allows {:.0}%",
                v.checked_clients,
                pct(v.worst_light_heavy_error),
                TARGET_LIGHT_HEAVY,
                pct(v.worst_medium_heavy_error),
                TARGET_MEDIUM_HEAVY,
                result.policy,
                v.tolerance * 100.0
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{DemoPolicy, PlanInput};

    fn class(name: &str, mean: f64, n: u64) -> ClassStats {
        ClassStats {
            name: name.into(),
            clients: 100,
            requests: n,
            errors: 0,
            mean_ms: mean,
            p50_ms: mean,
            p95_ms: mean * 1.5,
            p99_ms: mean * 2.0,
            throughput_rps: n as f64 / 10.0,
        }
    }

    fn step(per_class: usize, l: f64, m: f64, h: f64) -> DemoStep {
        DemoStep::new(
            per_class,
            10.0,
            vec![
                class("light", l, 100),
                class("medium", m, 200),
                class("heavy", h, 400),
            ],
        )
    }

    #[test]
    fn ratios_divide_means() {
        let s = step(100, 140.0, 70.0, 35.0);
        assert_eq!(s.clients, 300);
        assert!((s.ratio_light_heavy.unwrap() - 4.0).abs() < 1e-12);
        assert!((s.ratio_medium_heavy.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(s.requests(), 700);
    }

    #[test]
    fn ratio_needs_both_means() {
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
        let mut s = step(100, 140.0, 70.0, 35.0);
        s.classes[2].requests = 0;
        let s = DemoStep::new(100, 10.0, s.classes);
        assert_eq!(s.ratio_light_heavy, None);
        assert_eq!(s.ratio_medium_heavy, None);
    }

    #[test]
    fn verdict_checks_only_the_big_steps() {
        // A small step far off target does not count; the seed saw small ratios there too.
        let steps = vec![step(17, 12.0, 11.0, 10.0), step(100, 41.0, 20.2, 10.0)];
        let v = verdict(DemoPolicy::Lottery, &steps);
        assert_eq!(v.outcome, Outcome::Met);
        assert_eq!(v.checked_clients, vec![300]);
        assert!((v.worst_light_heavy_error.unwrap() - 0.025).abs() < 1e-9);
        // The same numbers miss stride's 2%.
        assert_eq!(verdict(DemoPolicy::Stride, &steps).outcome, Outcome::Missed);
        // Medium/heavy alone can miss.
        let v = verdict(DemoPolicy::Lottery, &[step(113, 40.0, 22.0, 10.0)]);
        assert_eq!(v.outcome, Outcome::Missed);
    }

    #[test]
    fn verdict_without_big_steps_is_not_checked() {
        let v = verdict(DemoPolicy::Stride, &[step(17, 12.0, 11.0, 10.0)]);
        assert_eq!(v.outcome, Outcome::NotChecked);
        assert!(v.checked_clients.is_empty());
    }

    #[test]
    fn verdict_misses_when_a_checked_class_got_nothing() {
        let mut s = step(100, 40.0, 20.0, 10.0);
        s.classes[0].requests = 0;
        let s = DemoStep::new(100, 10.0, s.classes);
        assert_eq!(verdict(DemoPolicy::Lottery, &[s]).outcome, Outcome::Missed);
    }

    #[test]
    fn json_round_trips_and_checks_kind() {
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        let mut r = new_result(&plan, 1_700_000_000);
        r.push_step(step(100, 40.0, 20.0, 10.0));
        r.complete = true;
        let text = r.to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["kind"], "demo");
        assert_eq!(v["version"], 1);
        assert_eq!(v["policy"], "lottery");
        assert_eq!(v["classes"][2]["weight"], 4);
        assert_eq!(v["steps"][0]["classes"][0]["p99_ms"], 80.0);
        assert_eq!(v["verdict"]["outcome"], "met");
        let back = DemoResult::from_json(&text).unwrap();
        assert_eq!(back.steps, r.steps);
        let wrong = text.replace("\"kind\": \"demo\"", "\"kind\": \"bench\"");
        assert!(matches!(
            DemoResult::from_json(&wrong),
            Err(ResultError::Kind(_))
        ));
    }

    #[test]
    fn saves_into_a_new_directory() {
        let dir = tempfile::tempdir().unwrap();
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        let r = new_result(&plan, 1_700_000_000);
        let path = save(&r, &dir.path().join("a/b")).unwrap();
        assert!(path.ends_with("demo-lottery-20231114-221320.json"));
        let back = DemoResult::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back.policy, DemoPolicy::Lottery);
    }

    #[test]
    fn timestamps_are_utc_calendar() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400), "20000229-000000");
        assert_eq!(timestamp(1_700_000_000), "20231114-221320");
    }

    #[test]
    fn rendering_lines_up() {
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        let header = render_header(&plan);
        let last = header.lines().last().unwrap();
        let line = render_step(&step(100, 140.0, 70.0, 35.0));
        assert_eq!(last.len(), line.len(), "\n{last}\n{line}");
        assert!(line.contains("4.00") && line.contains("2.00"));
        let mut r = new_result(&plan, 0);
        r.push_step(step(100, 140.0, 70.0, 35.0));
        r.complete = true;
        assert!(render_verdict(&r).starts_with("verdict: MET"));
    }
}
