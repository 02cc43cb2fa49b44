//! A class's kernel priority (`nice`, `thread_policy`) and CPUs (`cpus`): through the whole server, the
//! thread that burns a request's CPU runs at the priority (on the CPUs) of the request's class, and gets its
//! own back afterwards.

use ordo_serve::ServerHandle;
use ordo_sys::thread::{get_sched, nice_floor};
use ordo_testkit::threads::wait_for_thread as poll;

use crate::ctl_util::{get, start};

/// A server with a top class and a `low` class (paths under `/low`) given `low` (its kernel priority keys),
/// serving the synthetic backend.
async fn start_with_low_class(low: &str) -> ServerHandle {
    start(&format!(
        r#"
workers = 4
[[classes]]
name = "top"
[[classes]]
name = "low"
{low}
[[rules]]
class = "low"
path_prefix = "/low"
[[routes]]
prefix = "/"
synthetic = {{}}
"#
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_cpu_work_runs_at_its_nice_and_the_thread_gets_its_own_back() {
    let own = get_sched(0).unwrap();
    if nice_floor() > own.nice {
        eprintln!("skipped: this process may not restore a thread's priority (no CAP_SYS_NICE)");
        return;
    }
    let nice = if own.nice == 12 { 11 } else { 12 };
    let h = start_with_low_class(&format!("nice = {nice}")).await;
    let addr = h.local_addr();
    let st = h.status();
    assert_eq!(st["classes"][1]["nice"], nice);
    assert!(st["classes"][0]["nice"].is_null());
    assert!(st["classes"][1]["thread_policy"].is_null());
    // a request of the top class (no priority) first
    assert_eq!(get(addr, "/top/cpu?us=1000").await.status, 200);
    let low = tokio::spawn(async move { get(addr, "/low/cpu?us=1500000").await.status });
    let tid =
        tokio::task::spawn_blocking(move || poll(|t| get_sched(t).is_ok_and(|s| s.nice == nice)))
            .await
            .unwrap()
            .expect("a thread runs the low class's work at its nice");
    assert_eq!(low.await.unwrap(), 200);
    let s = tokio::task::spawn_blocking(move || {
        poll(|t| t == tid && get_sched(t).is_ok_and(|s| s.nice != nice));
        get_sched(tid).unwrap()
    })
    .await
    .unwrap();
    assert_eq!((s.policy, s.nice), (own.policy, own.nice));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_cpu_work_runs_on_its_cpus_and_the_thread_gets_its_own_back() {
    use ordo_sys::thread::get_affinity;
    let own = get_affinity(0).unwrap();
    if own.len() < 2 {
        eprintln!("skipped: this process may run on one CPU only");
        return;
    }
    let cpu = *own.last().unwrap();
    let h = start_with_low_class(&format!("cpus = \"{cpu}\"")).await;
    let addr = h.local_addr();
    let st = h.status();
    assert_eq!(st["classes"][1]["cpus"], cpu.to_string());
    assert!(st["classes"][0]["cpus"].is_null());
    let low = tokio::spawn(async move { get(addr, "/low/cpu?us=1500000").await.status });
    let tid = tokio::task::spawn_blocking(move || {
        poll(|t| get_affinity(t).is_ok_and(|c| c == vec![cpu]))
    })
    .await
    .unwrap()
    .expect("a thread runs the low class's work on its CPU only");
    assert_eq!(low.await.unwrap(), 200);
    let back = tokio::task::spawn_blocking(move || {
        poll(|t| t == tid && get_affinity(t).is_ok_and(|c| c.len() > 1));
        get_affinity(tid).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(back, own, "the thread gets the process's CPUs back");
}
