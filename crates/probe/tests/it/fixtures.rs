//! `watch` on the fixture /proc trees of ordo-sys: on a kernel without schedstat, sched_debug and PSI's
//! `full` line, the figures that exist are still reported and the missing ones are named.

use std::path::PathBuf;
use std::time::Duration;

use ordo_probe::{PidConfig, PidEnd, watch};
use ordo_sys::ProcRoot;

fn root(name: &str) -> ProcRoot {
    ProcRoot::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../sys/tests/fixtures")
            .join(name)
            .join("proc"),
    )
}

fn one_report(name: &str) -> ordo_probe::PidReport {
    let cfg = PidConfig {
        pid: 15306,
        interval: Duration::from_millis(10),
        duration: None,
        root: root(name),
    };
    let mut got = None;
    let end = watch(&cfg, |r| {
        got = Some(r.clone());
        false
    })
    .unwrap();
    assert_eq!(end, PidEnd::Stopped);
    got.unwrap()
}

#[test]
fn trimmed_kernel_names_what_is_missing_and_reports_the_rest() {
    let r = one_report("trimmed");
    assert_eq!(r.name, "python3");
    assert_eq!(r.threads, 3);
    assert_eq!(r.process.run_delay_ms_per_s, None);
    assert_eq!(r.process.migrations_per_s, None);
    assert!(
        r.per_thread
            .iter()
            .all(|t| t.rates.run_delay_ms_per_s.is_none())
    );
    assert_eq!(r.unavailable.len(), 2, "{:?}", r.unavailable);
    assert!(r.unavailable[0].starts_with("run-queue wait: /proc/15306/task/*/schedstat"));
    assert!(r.unavailable[1].starts_with("migrations: /proc/15306/task/*/sched"));
    let psi = r.psi.unwrap();
    assert_eq!(psi.full_pct, None);
    // The fixture does not change between samples: every rate is zero, none is missing.
    assert_eq!(r.process.cpu_pct, 0.0);
    assert_eq!(r.process.voluntary_per_s, 0.0);
}

#[test]
fn full_kernel_reports_everything() {
    let r = one_report("real");
    assert!(r.unavailable.is_empty(), "{:?}", r.unavailable);
    assert_eq!(r.process.run_delay_ms_per_s, Some(0.0));
    assert_eq!(r.process.migrations_per_s, Some(0.0));
    assert!(r.psi.unwrap().full_pct.is_some());
}
