//! The demo's checked plan: which policy, which classes and weights, how many workers, what service time and
//! which client counts, resolved from raw flag values before any socket is opened (pure, unit-tested).

use std::time::Duration;

pub use ordo_results::demo::{
    DemoClass, DemoPolicy, TARGET_LIGHT_HEAVY, TARGET_MEDIUM_HEAVY, TARGET_MIN_CLIENTS,
};

/// The seed's three user types with weights 1:2:4 and their files (1 KB, 43 KB, 760 KB) scaled down 100×, so
/// that loopback bandwidth and copying never become the bottleneck on a small machine.
pub(crate) fn seed_classes() -> Vec<DemoClass> {
    [("light", 1, 10), ("medium", 2, 430), ("heavy", 4, 7_600)]
        .into_iter()
        .map(|(name, weight, bytes)| DemoClass {
            name: name.to_string(),
            weight,
            path_prefix: format!("/{name}/"),
            response_bytes: bytes,
        })
        .collect()
}

/// Default client counts (totals over the three classes), as in the seed's figure: 50 up to 340.
pub(crate) const DEFAULT_STEPS: &[usize] = &[50, 100, 150, 175, 200, 250, 300, 340];
/// `--quick` client counts: one step below the knee, one at it, two in the target region.
pub(crate) const QUICK_STEPS: &[usize] = &[50, 175, 300, 340];

/// Default mean synthetic service time, a compromise between two noises. The heavy class's queue holds
/// n − 4/7·workers requests, which is 0.75 service times of work at 300 clients: a stall of the machine
/// (client or server threads not running) longer than that empties it and costs heavy its share — 50 ms
/// rides out 37 ms stalls, where 20 ms cost stride 7% at 300 clients on a loaded 2-core machine. Lottery's
/// shares are binomial over a step's dispatches (~20,000 at 50 ms): light/heavy wobbles by ~1.4% (one sd),
/// 3.5 sd inside the 5% target; at 100 ms it was 2%, and one run read 4.19.
pub(crate) const DEFAULT_SERVICE: Duration = Duration::from_millis(50);
/// `--quick` service time: shorter, so short steps still hold thousands of requests.
pub(crate) const QUICK_SERVICE: Duration = Duration::from_millis(20);

/// Upper bound on one step's total client count (each is a socket in this process and one in the server).
pub(crate) const MAX_CLIENTS: usize = 5_000;

/// The raw values a user may give; `None` means "the default for this mode".
#[derive(Clone, Debug, Default)]
pub struct PlanInput {
    pub policy: Option<DemoPolicy>,
    pub quick: bool,
    pub steps: Option<Vec<usize>>,
    pub step_duration: Option<Duration>,
    pub warmup: Option<Duration>,
    pub workers: Option<usize>,
    pub service: Option<Duration>,
}

/// A fully resolved, valid plan.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoPlan {
    pub policy: DemoPolicy,
    pub quick: bool,
    pub classes: Vec<DemoClass>,
    /// Requested client totals, in the order they run.
    pub steps: Vec<usize>,
    /// Measured part of each step.
    pub step_duration: Duration,
    /// Unmeasured lead-in of each step (queues fill, connections open).
    pub warmup: Duration,
    /// The seed's MaxClients: requests served at once.
    pub workers: usize,
    /// Synthetic service time per request (a sleep, so it does not depend on free CPU).
    pub service: Duration,
}

/// A value the user gave that cannot be used; names the flag.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid value for {flag}: {reason}")]
pub struct PlanError {
    pub flag: &'static str,
    pub reason: String,
}

fn bad(flag: &'static str, reason: impl Into<String>) -> PlanError {
    PlanError {
        flag,
        reason: reason.into(),
    }
}

impl DemoPlan {
    /// Fill in the mode's defaults and check every value.
    pub fn resolve(input: PlanInput) -> Result<DemoPlan, PlanError> {
        let quick = input.quick;
        let steps = match input.steps {
            Some(s) => s,
            None if quick => QUICK_STEPS.to_vec(),
            None => DEFAULT_STEPS.to_vec(),
        };
        validate_steps(&steps).map_err(|r| bad("--steps", r))?;
        let step_duration = input.step_duration.unwrap_or(if quick {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(20)
        });
        if step_duration < Duration::from_millis(100) || step_duration > Duration::from_secs(3600) {
            return Err(bad(
                "--step-duration",
                format!("{step_duration:?} is outside 100ms..1h"),
            ));
        }
        // Several light response times (7·n·service/workers, at most ~0.4 s by default) so queues settle.
        let warmup = input.warmup.unwrap_or(if quick {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(3)
        });
        if warmup > Duration::from_secs(600) {
            return Err(bad("--warmup", format!("{warmup:?} is longer than 10m")));
        }
        let workers = input.workers.unwrap_or(100);
        if workers == 0 || workers > 10_000 {
            return Err(bad("--workers", format!("{workers} is outside 1..=10000")));
        }
        let service = input.service.unwrap_or(if quick {
            QUICK_SERVICE
        } else {
            DEFAULT_SERVICE
        });
        if service < Duration::from_millis(1) || service > Duration::from_secs(10) {
            return Err(bad(
                "--service",
                format!("{service:?} is outside 1ms..10s (it must be whole milliseconds)"),
            ));
        }
        if Duration::from_millis(service.as_millis() as u64) != service {
            return Err(bad(
                "--service",
                format!("{service:?} is not a whole number of milliseconds"),
            ));
        }
        Ok(DemoPlan {
            policy: input.policy.unwrap_or(DemoPolicy::Lottery),
            quick,
            classes: seed_classes(),
            steps,
            step_duration,
            warmup,
            workers,
            service,
        })
    }

    /// Clients per class for a requested total: the total split equally, rounded to the nearest whole client
    /// (equal counts matter: R_c = n_c / X_c, so unequal n would bias the ratios).
    pub fn clients_per_class(&self, total: usize) -> usize {
        per_class(total, self.classes.len())
    }

    /// Rough wall-clock time of the whole run.
    pub fn estimated_duration(&self) -> Duration {
        (self.step_duration + self.warmup) * self.steps.len() as u32
    }
}

/// `total` split over `classes` classes, rounded to nearest, at least 1.
pub fn per_class(total: usize, classes: usize) -> usize {
    let classes = classes.max(1);
    ((total + classes / 2) / classes).max(1)
}

fn validate_steps(steps: &[usize]) -> Result<(), String> {
    if steps.is_empty() {
        return Err("no client counts given".into());
    }
    for &s in steps {
        if s < 3 {
            return Err(format!(
                "{s} clients is too few (at least 3: one per class)"
            ));
        }
        if s > MAX_CLIENTS {
            return Err(format!(
                "{s} clients is more than the limit of {MAX_CLIENTS}"
            ));
        }
    }
    Ok(())
}

/// Parse `--steps`: comma-separated client totals, e.g. `50,100,175,300`.
pub fn parse_steps(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("empty entry in {s:?} (expected e.g. 50,100,300)"));
        }
        let n: usize = part
            .parse()
            .map_err(|_| format!("{part:?} is not a whole number of clients"))?;
        out.push(n);
    }
    validate_steps(&out)?;
    Ok(out)
}

/// Durations on the demo's flags (`20s`, `250ms`, `1.5s`, `2m`, `500us`): the unit must be explicit.
pub use ordo_sys::units::parse_duration;

/// Render a duration the way [`parse_duration`] reads it back (`20s`, `250ms`, `1.5s`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if ms < 1000.0 && (ms - ms.round()).abs() < 1e-9 {
        format!("{}ms", ms.round() as u64)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// The service times (whole ms) a client draws from at random for each request: 11 values evenly spread
/// over mean·(1 ± `SERVICE_SPREAD`). A fixed service time would make the closed loop run in lock-step waves —
/// all workers freed in the same millisecond, heavy's queue emptied by every wave — instead of the steady
/// state Little's law describes; the spread breaks the waves and leaves the ratios alone (they do not depend
/// on service times, see docs/demo.md).
pub(crate) fn service_times_ms(mean: Duration) -> Vec<u64> {
    let mean_ms = mean.as_secs_f64() * 1e3;
    (0..=10)
        .map(|k| {
            let f = 1.0 - SERVICE_SPREAD + 2.0 * SERVICE_SPREAD * f64::from(k) / 10.0;
            ((mean_ms * f).round() as u64).max(1)
        })
        .collect()
}

/// Half-width of the service-time spread, relative to the mean.
pub(crate) const SERVICE_SPREAD: f64 = 0.5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_times_spread_around_the_mean() {
        let t = service_times_ms(Duration::from_millis(50));
        assert_eq!(t, [25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75]);
        assert_eq!(t.iter().sum::<u64>() / t.len() as u64, 50);
        assert_eq!(service_times_ms(Duration::from_millis(1))[0], 1);
    }

    #[test]
    fn steps_parse_and_refuse_nonsense() {
        assert_eq!(parse_steps("50,100, 340").unwrap(), vec![50, 100, 340]);
        assert!(parse_steps("").is_err());
        assert!(parse_steps("50,,100").is_err());
        assert!(parse_steps("50,abc").unwrap_err().contains("abc"));
        assert!(parse_steps("2").unwrap_err().contains("too few"));
        assert!(parse_steps("-5").is_err());
        assert!(parse_steps("999999").unwrap_err().contains("limit"));
    }

    #[test]
    fn durations_parse_with_units_only() {
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert!(parse_duration("20").unwrap_err().contains("missing unit"));
        assert!(parse_duration("s").is_err());
        assert!(
            parse_duration("10parsecs")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("1.2.3s").is_err());
        assert!(parse_duration("1e400s").is_err());
    }

    #[test]
    fn durations_round_trip() {
        for s in ["20s", "250ms", "1.5s", "10ms"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn defaults_follow_the_mode() {
        let full = DemoPlan::resolve(PlanInput::default()).unwrap();
        assert_eq!(full.steps, DEFAULT_STEPS);
        assert_eq!(full.policy, DemoPolicy::Lottery);
        assert_eq!(full.workers, 100);
        assert_eq!(full.service, Duration::from_millis(50));
        // About three minutes on the default plan.
        let est = full.estimated_duration().as_secs();
        assert!((150..=200).contains(&est), "{est}");

        let quick = DemoPlan::resolve(PlanInput {
            quick: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(quick.steps, QUICK_STEPS);
        assert_eq!(quick.service, Duration::from_millis(20));
        assert!(quick.estimated_duration().as_secs() <= 30);
    }

    #[test]
    fn bad_values_name_their_flag() {
        let e = DemoPlan::resolve(PlanInput {
            workers: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.flag, "--workers");
        let e = DemoPlan::resolve(PlanInput {
            service: Some(Duration::from_micros(1500)),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.flag, "--service");
        let e = DemoPlan::resolve(PlanInput {
            step_duration: Some(Duration::from_millis(5)),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.flag, "--step-duration");
        let e = DemoPlan::resolve(PlanInput {
            steps: Some(vec![]),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e.flag, "--steps");
    }

    #[test]
    fn clients_split_equally() {
        assert_eq!(per_class(300, 3), 100);
        assert_eq!(per_class(340, 3), 113);
        assert_eq!(per_class(50, 3), 17);
        assert_eq!(per_class(175, 3), 58);
        assert_eq!(per_class(3, 3), 1);
        assert_eq!(per_class(1, 3), 1);
    }

    #[test]
    fn seed_classes_are_one_two_four() {
        let c = seed_classes();
        let w: Vec<u32> = c.iter().map(|c| c.weight).collect();
        assert_eq!(w, [1, 2, 4]);
        assert_eq!(c[2].path_prefix, "/heavy/");
    }

    #[test]
    fn policy_names() {
        assert_eq!("Stride".parse::<DemoPolicy>().unwrap(), DemoPolicy::Stride);
        assert!("fcfs".parse::<DemoPolicy>().is_err());
        assert_eq!(DemoPolicy::Lottery.tolerance(), 0.05);
    }
}
