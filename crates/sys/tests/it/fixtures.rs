//! The /proc parsers and the sampler on fixture trees: `real/` was copied from a 6.18 kernel (a python
//! process with two busy-then-sleeping threads); `trimmed/` is the same with what older or leaner kernels
//! lack removed (no schedstat, no sched, no context-switch lines in status, a 38-field stat, PSI `some`
//! only).

use std::path::PathBuf;

use ordo_sys::procfs::{self, ProcRoot};
use ordo_sys::{ProcessSampler, SysError};

const PID: i32 = 15306;

fn root(name: &str) -> ProcRoot {
    ProcRoot::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
            .join("proc"),
    )
}

#[test]
fn real_stat() {
    let st = procfs::parse_stat_with_tck(&root("real").read("15306/stat").unwrap(), 100).unwrap();
    assert_eq!(st.pid, PID);
    assert_eq!(st.comm, "python3");
    assert_eq!(st.state, 'S');
    assert_eq!(st.num_threads, 3);
    assert_eq!(st.utime_ticks, 16);
    assert_eq!(st.utime_ns, 160_000_000);
    assert_eq!(st.nice, 0);
    assert_eq!(st.processor, Some(0));
    assert_eq!(st.policy, Some(0));
}

#[test]
fn trimmed_stat_lacks_late_fields() {
    let st = root("trimmed").stat(PID).unwrap();
    assert_eq!(st.num_threads, 3);
    assert_eq!(st.processor, None);
    assert_eq!(st.policy, None);
}

#[test]
fn real_status() {
    let s = root("real").status(PID).unwrap();
    assert_eq!(s.name, "python3");
    assert_eq!(s.threads, Some(3));
    assert!(s.voluntary_ctxt_switches.is_some());
    assert!(s.nonvoluntary_ctxt_switches.is_some());
    assert!(s.vm_rss_kb.unwrap() > 0);
    assert_eq!(s.cpus_allowed_list.as_deref(), Some("0-1"));
    assert_eq!(s.cpus_allowed, Some(vec![0, 1]));
}

#[test]
fn trimmed_status() {
    let s = root("trimmed").status(PID).unwrap();
    assert_eq!(s.name, "python3");
    assert_eq!(s.voluntary_ctxt_switches, None);
    assert_eq!(s.cpus_allowed_list, None);
    assert_eq!(s.vm_rss_kb, None);
}

#[test]
fn real_schedstat_and_sched() {
    let r = root("real");
    let tids = r.tasks(PID).unwrap();
    assert_eq!(tids, vec![15306, 15348, 15349]);
    let ss = r.task_schedstat(PID, 15348).unwrap();
    assert_eq!(ss.cpu_ns, 69_365_469);
    assert_eq!(ss.run_delay_ns, 54_518_000);
    assert_eq!(ss.timeslices, 55);
    let sd = r.task_sched(PID, 15348).unwrap();
    assert_eq!(sd.pid, Some(15348));
    assert!(sd.nr_migrations().is_some());
    assert!(sd.nr_switches().is_some());
    assert_eq!(
        sd.nr_switches(),
        Some(sd.nr_voluntary_switches().unwrap() + sd.nr_involuntary_switches().unwrap())
    );
    assert_eq!(sd.policy(), Some(0));
    assert!(sd.slice_ns().unwrap() > 0);
    assert!(sd.sum_exec_runtime_ns().unwrap() > 0);
}

#[test]
fn missing_files_are_named() {
    let r = root("trimmed");
    match r.task_schedstat(PID, 15348) {
        Err(SysError::Missing { path }) => assert!(path.ends_with("15306/task/15348/schedstat")),
        other => panic!("{other:?}"),
    }
    assert!(r.sched(PID).unwrap_err().is_missing());
    assert!(matches!(r.tasks(1), Err(SysError::ProcessGone(1))));
}

#[test]
fn psi() {
    let p = root("real").psi_cpu().unwrap();
    assert!(p.full.is_some());
    assert!(p.some.total_us > 0);
    let p = root("trimmed").psi_cpu().unwrap();
    assert!(p.full.is_none());
}

#[test]
fn parse_errors_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("7/task/7")).unwrap();
    std::fs::write(dir.path().join("7/schedstat"), "12 abc 3\n").unwrap();
    let msg = ProcRoot::new(dir.path())
        .schedstat(7)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("7/schedstat") && msg.contains("run_delay_ns"),
        "{msg}"
    );
}

#[test]
fn sampler_on_real_tree() {
    let mut s = ProcessSampler::with_root(root("real"), PID).unwrap();
    let d = s.sample_detailed().unwrap();
    assert_eq!(d.name, "python3");
    assert_eq!(d.threads.len(), 3);
    let p = &d.process;
    assert!(p.schedstat);
    let sum: u64 = d.threads.iter().map(|t| t.run_delay_ns.unwrap()).sum();
    assert_eq!(p.run_delay_ns, sum);
    assert_eq!(p.run_delay_ns, 18_358_242 + 54_518_000 + 50_991_596);
    assert_eq!(p.timeslices, 29 + 55 + 53);
    assert!(p.migrations.is_some());
    assert!(p.voluntary_switches > 0);
    // A second sample of an unchanged tree: a zero delta.
    let again = s.sample().unwrap();
    let delta = again.delta(p);
    assert_eq!(delta.run_delay_ns, 0);
    assert_eq!(delta.voluntary_switches, 0);
}

#[test]
fn sampler_on_trimmed_tree_carries_on() {
    let mut s = ProcessSampler::with_root(root("trimmed"), PID).unwrap();
    let p = s.sample().unwrap();
    assert!(!p.schedstat);
    assert_eq!(p.run_delay_ns, 0);
    assert_eq!(p.migrations, None);
    assert_eq!(p.threads, 3);
    assert!(!s.schedstat_available());
    assert!(!s.migrations_available());
}

#[test]
fn sampler_counts_a_vanished_thread_as_retired() {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &std::path::Path, to: &std::path::Path| {
        for e in walk(from) {
            let rel = e.strip_prefix(from).unwrap();
            let dst = to.join(rel);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            std::fs::copy(&e, &dst).unwrap();
        }
    };
    copy(root("real").path(), dir.path());
    let r = ProcRoot::new(dir.path());
    let mut s = ProcessSampler::with_root(r, PID).unwrap();
    let a = s.sample().unwrap();
    std::fs::remove_dir_all(dir.path().join("15306/task/15349")).unwrap();
    let b = s.sample().unwrap();
    assert_eq!(b.threads, 2);
    assert_eq!(
        b.run_delay_ns, a.run_delay_ns,
        "an exited thread's counters are kept"
    );
    std::fs::remove_dir_all(dir.path().join("15306")).unwrap();
    assert!(matches!(s.sample(), Err(SysError::ProcessGone(PID))));
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
