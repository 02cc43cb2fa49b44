//! Runs a [`DemoPlan`]: starts `ordo serve` in-process on 127.0.0.1:0 with the three weighted classes and the
//! synthetic backend, then drives each step with `ordo bench` (equal closed-loop keep-alive clients per
//! class, a warm-up, a measured period) and turns each bench report into a [`DemoStep`].

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ordo_bench::{
    Assign, BenchConfig, BenchReport, CancelToken, Mix, MixClass, Pacing, Stop, UrlOrder,
};
use ordo_serve::config::ServeConfig;
use ordo_serve::server::Server;
use tokio::sync::watch;

use crate::plan::{DemoClass, DemoPlan, service_times_ms};
use crate::result::{ClassStats, DemoResult, DemoStep};

/// Progress reported while the demo runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// A step starts its warm-up (`index` counts from 0 of `of`).
    StepStarted {
        index: usize,
        of: usize,
        clients: usize,
    },
    /// A step finished and was measured.
    StepFinished(&'a DemoStep),
}

/// Why a demo could not run.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot configure the in-process server: {0}")]
    ServerConfig(String),
    #[error("cannot start the in-process server: {0}")]
    ServerStart(String),
    #[error("the load generator failed at {clients} clients: {message}")]
    Bench { clients: usize, message: String },
}

/// The `ordo serve` configuration of the demo, as TOML (the same text a user could put in a file).
pub(crate) fn server_config_toml(plan: &DemoPlan, seed: u64) -> String {
    let mut t = String::new();
    t.push_str("# ordo demo: seed 003's three user types under weights 1:2:4\n");
    t.push_str("listen = \"127.0.0.1:0\"\n");
    t.push_str(&format!("workers = {}\n", plan.workers));
    t.push_str(&format!("policy = \"{}\"\n", plan.policy.as_str()));
    t.push_str(&format!("seed = {seed}\n"));
    // Every client of a step can be queued at once; nothing may time out or overflow.
    t.push_str("queue_timeout = \"0s\"\n");
    t.push_str(&format!("queue_cap = {}\n", crate::plan::MAX_CLIENTS * 2));
    t.push_str("\n[admin]\nenabled = false\n");
    for c in &plan.classes {
        t.push_str(&format!(
            "\n[[classes]]\nname = \"{}\"\nweight = {}\n",
            c.name, c.weight
        ));
    }
    for c in &plan.classes {
        t.push_str(&format!(
            "\n[[rules]]\nclass = \"{}\"\npath_prefix = \"{}\"\n",
            c.name, c.path_prefix
        ));
    }
    t.push_str("\n[[routes]]\nprefix = \"/\"\n[routes.synthetic]\n");
    t
}

/// The URL path a client of `class` requests for one service time in ms: sleep that long, return the
/// class's body size.
pub(crate) fn class_path(class: &DemoClass, service_ms: u64) -> String {
    format!(
        "{}work?ms={}&n={}",
        class.path_prefix, service_ms, class.response_bytes
    )
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Run the whole plan on the current tokio runtime (the server's tasks run there; the load generator runs on
/// threads of its own). Stops early — returning the finished steps with `complete: false` — when `stop` turns
/// true.
pub async fn run_demo(
    plan: &DemoPlan,
    mut stop: watch::Receiver<bool>,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<DemoResult, DemoError> {
    let mut result = crate::result::new_result(plan, unix_now());
    result.fingerprint = Some(ordo_sys::fingerprint::collect());
    let seed = result.started_unix_s;

    let config = ServeConfig::from_toml_str(&server_config_toml(plan, seed), "ordo demo")
        .map_err(|e| DemoError::ServerConfig(e.to_string()))?;
    let server = Server::start(config)
        .await
        .map_err(|e| DemoError::ServerStart(e.to_string()))?;
    let addr = server.local_addr();

    let mut stopped = *stop.borrow();
    for (index, &requested) in plan.steps.iter().enumerate() {
        if stopped {
            break;
        }
        let per_class = plan.clients_per_class(requested);
        on_event(Event::StepStarted {
            index,
            of: plan.steps.len(),
            clients: per_class * plan.classes.len(),
        });
        let cancel = CancelToken::new();
        let bench =
            bench_config(plan, addr, per_class, seed.wrapping_add(index as u64)).map_err(|e| {
                DemoError::Bench {
                    clients: per_class * plan.classes.len(),
                    message: e.to_string(),
                }
            })?;
        let worker = {
            let cancel = cancel.clone();
            tokio::task::spawn_blocking(move || ordo_bench::run(bench, cancel))
        };
        tokio::pin!(worker);
        let outcome = tokio::select! {
            r = &mut worker => Some(r),
            _ = stop.wait_for(|s| *s) => None,
        };
        let outcome = match outcome {
            Some(r) => r,
            None => {
                // Ctrl-C: end the step now and leave it out; the finished steps are the result.
                stopped = true;
                cancel.cancel();
                let _ = worker.await;
                break;
            }
        };
        let report = match outcome {
            Ok(Ok(report)) => report,
            Ok(Err(e)) => {
                let _ = server.shutdown().await;
                return Err(DemoError::Bench {
                    clients: per_class * plan.classes.len(),
                    message: e.to_string(),
                });
            }
            Err(join) => {
                let _ = server.shutdown().await;
                return Err(DemoError::Bench {
                    clients: per_class * plan.classes.len(),
                    message: format!("the load generator thread failed: {join}"),
                });
            }
        };
        if report.interrupted {
            stopped = true;
            break;
        }
        let step = step_from_report(plan, per_class, &report);
        on_event(Event::StepFinished(&step));
        result.push_step(step);
    }
    result.complete = !stopped && result.steps.len() == plan.steps.len();
    let _ = server.shutdown().await;
    Ok(result)
}

/// The load of one step: `per_class` keep-alive closed-loop clients in each class, each client bound to its
/// class for the whole step (`Assign::Clients`, the seed's user types), no think time.
pub fn bench_config(
    plan: &DemoPlan,
    addr: SocketAddr,
    per_class: usize,
    seed: u64,
) -> Result<BenchConfig, ordo_bench::BenchError> {
    let times = service_times_ms(plan.service);
    let first = plan
        .classes
        .first()
        .map(|c| class_path(c, times[times.len() / 2]))
        .unwrap_or_else(|| "/".into());
    let mut cfg = BenchConfig::new(&format!("http://{addr}{first}"))?;
    cfg.connections = per_class * plan.classes.len();
    cfg.threads = BENCH_THREADS;
    cfg.stop = Stop::Duration(plan.step_duration);
    cfg.pacing = Pacing::Closed;
    cfg.keepalive = true;
    cfg.warmup = plan.warmup;
    // Generous: a light request at the largest step waits about n·Σw/(w·workers) service times.
    cfg.timeout = Duration::from_secs(30);
    // Count every request started in the measured window, however long it takes: abandoning the ones in
    // flight at the end would leave out the longest light requests and bias light/heavy low by ~R/T.
    cfg.drain = true;
    cfg.seed = seed;
    cfg.mix = Some(Mix::new(
        Assign::Clients,
        plan.classes
            .iter()
            .map(|c| {
                let mut m = MixClass::new(&c.name, 1.0, "/");
                m.urls = times.iter().map(|&ms| class_path(c, ms)).collect();
                m.order = UrlOrder::Random;
                m
            })
            .collect(),
    ));
    Ok(cfg)
}

/// Load-generator threads: enough that the clients' own turnaround stays far below the heavy class's
/// response time, few enough to leave the server its share of a 2-core machine.
pub(crate) const BENCH_THREADS: usize = 2;

/// Per-class statistics of one bench report, in the plan's class order, with the ratios.
pub(crate) fn step_from_report(
    plan: &DemoPlan,
    per_class: usize,
    report: &BenchReport,
) -> DemoStep {
    let classes = plan
        .classes
        .iter()
        .map(|c| {
            let r = report.classes.iter().find(|r| r.name == c.name);
            match r {
                Some(r) => ClassStats {
                    name: c.name.clone(),
                    clients: r.connections,
                    requests: r.complete.saturating_sub(r.non_2xx),
                    errors: r.failed.total + r.non_2xx,
                    mean_ms: r.latency.mean_ms,
                    p50_ms: r.latency.at(50.0).unwrap_or(0.0),
                    p95_ms: r.latency.at(95.0).unwrap_or(0.0),
                    p99_ms: r.latency.at(99.0).unwrap_or(0.0),
                    throughput_rps: r.rps,
                },
                None => ClassStats {
                    name: c.name.clone(),
                    clients: 0,
                    requests: 0,
                    errors: 0,
                    mean_ms: 0.0,
                    p50_ms: 0.0,
                    p95_ms: 0.0,
                    p99_ms: 0.0,
                    throughput_rps: 0.0,
                },
            }
        })
        .collect();
    DemoStep::new(per_class, report.elapsed_s, classes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanInput;

    #[test]
    fn server_config_names_classes_rules_and_policy() {
        let plan = DemoPlan::resolve(PlanInput {
            policy: Some(crate::DemoPolicy::Stride),
            workers: Some(64),
            ..Default::default()
        })
        .unwrap();
        let text = server_config_toml(&plan, 7);
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(v["workers"].as_integer(), Some(64));
        assert_eq!(v["policy"].as_str(), Some("stride"));
        assert_eq!(v["listen"].as_str(), Some("127.0.0.1:0"));
        let classes = v["classes"].as_array().unwrap();
        let w: Vec<i64> = classes
            .iter()
            .map(|c| c["weight"].as_integer().unwrap())
            .collect();
        assert_eq!(w, [1, 2, 4]);
        let rules = v["rules"].as_array().unwrap();
        assert_eq!(rules[1]["path_prefix"].as_str(), Some("/medium/"));
        assert_eq!(rules[1]["class"].as_str(), Some("medium"));
    }

    #[test]
    fn class_paths_carry_service_time_and_size() {
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        assert_eq!(class_path(&plan.classes[2], 50), "/heavy/work?ms=50&n=7600");
        let cfg = bench_config(&plan, ([127, 0, 0, 1], 8080).into(), 100, 1).unwrap();
        assert_eq!(cfg.connections, 300);
        assert!(cfg.drain && cfg.keepalive);
        let mix = cfg.mix.unwrap();
        assert_eq!(mix.assign, Assign::Clients);
        assert_eq!(mix.classes[1].urls.len(), 11);
        assert!(mix.classes[1].urls[0].starts_with("/medium/work?ms=25&"));
    }

    fn example(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/demo")
            .join(name)
    }

    #[test]
    fn example_server_config_is_the_demos() {
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        let text = std::fs::read_to_string(example("serve.toml")).unwrap();
        ServeConfig::from_toml_str(&text, "examples/demo/serve.toml").unwrap();
        let strip = |t: &str| {
            let mut v: toml::Table = toml::from_str(t).unwrap();
            v.remove("listen");
            v.remove("seed");
            v
        };
        assert_eq!(strip(&text), strip(&server_config_toml(&plan, 1)));
    }

    #[test]
    fn example_mix_is_the_demos() {
        let plan = DemoPlan::resolve(PlanInput::default()).unwrap();
        let mix = Mix::from_file(&example("mix.toml")).unwrap();
        let ours = bench_config(&plan, ([127, 0, 0, 1], 8080).into(), 100, 1)
            .unwrap()
            .mix
            .unwrap();
        assert_eq!(mix.assign, ours.assign);
        assert_eq!(mix.classes.len(), ours.classes.len());
        for (a, b) in mix.classes.iter().zip(&ours.classes) {
            assert_eq!((&a.name, &a.urls, a.order), (&b.name, &b.urls, b.order));
            assert_eq!(a.share, b.share);
        }
    }
}
