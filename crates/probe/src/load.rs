//! Background load for the loop probe: N busy threads (pinned to the probe's CPU when asked) or a shell
//! command. The load stops when the value is dropped, on every path.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ordo_sys::thread;

use crate::error::ProbeError;
use crate::work::spin;
use ordo_results::probe::LoadSpec;

/// PIDs of the load commands running now, for `kill_running_commands`.
static RUNNING_COMMANDS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<i32>> {
    RUNNING_COMMANDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kill a load command's shell, its descendants and its process group (the shell leads it), so nothing it
/// started survives — not even a child orphaned by the shell's death and re-parented.
fn kill_command(pid: i32) {
    let _ = ordo_sys::process::kill_tree(pid);
    let _ = ordo_sys::process::kill_group(pid);
}

/// Kill every load command running now, with everything it started — for a process about to exit without
/// unwinding (a second Ctrl-C), which would otherwise leave them behind. Load threads end with the process.
pub fn kill_running_commands() {
    for &pid in running().iter() {
        kill_command(pid);
    }
}

/// Running load; dropping it stops the threads or kills the command.
#[derive(Debug)]
pub struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    child: Option<Child>,
}

impl BackgroundLoad {
    /// Start `spec`, pinned to `cpu` when given.
    pub fn start(spec: &LoadSpec, cpu: Option<usize>) -> Result<BackgroundLoad, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut load = BackgroundLoad {
            stop: stop.clone(),
            threads: Vec::new(),
            child: None,
        };
        match spec {
            LoadSpec::None => {}
            LoadSpec::Threads(n) => {
                let (tx, rx) = std::sync::mpsc::channel();
                for i in 0..*n {
                    let stop = stop.clone();
                    let tx = tx.clone();
                    let h = std::thread::Builder::new()
                        .name(format!("ordo-load-{i}"))
                        .spawn(move || {
                            let pinned = cpu.map(thread::pin_current_thread).transpose();
                            let _ = tx.send(pinned.map(|_| ()));
                            while !stop.load(Ordering::Relaxed) {
                                std::hint::black_box(spin(20_000));
                            }
                        })
                        .map_err(|e| {
                            ProbeError::Config(format!("cannot start load thread: {e}"))
                        })?;
                    load.threads.push(h);
                }
                drop(tx);
                for r in rx.iter().take(*n) {
                    r?;
                }
            }
            LoadSpec::Command(cmd) => {
                // Pinned from its first instruction: a child inherits the affinity of the thread that forks
                // it, so the calling thread is pinned for the spawn and restored after. Setting the mask on
                // the shell afterwards would miss whatever it had already forked (the busy loop itself).
                let restore = match cpu {
                    Some(c) => {
                        let saved = thread::get_affinity(0)?;
                        thread::set_affinity(0, &[c])?;
                        Some(saved)
                    }
                    None => None,
                };
                // In a process group of its own: a Ctrl-C on the terminal goes to ordo alone, which stops
                // at a sample boundary and then kills the whole group — including what the command
                // started in the background, which a SIGINT to the shell would orphan (and a
                // non-interactive shell's background jobs ignore SIGINT).
                let spawned = Command::new("sh")
                    .arg("-c")
                    .arg(cmd)
                    .process_group(0)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn();
                if let Some(saved) = restore {
                    thread::set_affinity(0, &saved)?;
                }
                let child = spawned.map_err(|e| {
                    ProbeError::Config(format!("cannot start load command `{cmd}`: {e}"))
                })?;
                running().push(child.id() as i32);
                load.child = Some(child);
                // A command that fails at once (a typo: sh exits 127) would make a "loaded" run quiet;
                // refuse it instead of measuring without load. Bounded: 200 ms of polling at most.
                if let Some(status) = load.exited_within(std::time::Duration::from_millis(200)) {
                    if !status.success() {
                        let why = match status.code() {
                            Some(127) => " (command not found)".to_string(),
                            Some(126) => " (not executable)".to_string(),
                            Some(c) => format!(" (exit status {c})"),
                            None => " (killed by a signal)".to_string(),
                        };
                        return Err(ProbeError::Config(format!(
                            "--load-cmd `{cmd}`: the load command failed at once{why}"
                        )));
                    }
                }
            }
        }
        Ok(load)
    }

    /// The load command's exit status if it exits within `limit` (polled every 10 ms).
    fn exited_within(&mut self, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let start = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if start.elapsed() >= limit {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Did the load command exit already? (Its exit would make a "loaded" run quiet.)
    pub fn command_exited(&mut self) -> bool {
        self.command_status().is_some()
    }

    /// The load command's exit status, if it has exited.
    pub fn command_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        if let Some(mut c) = self.child.take() {
            let pid = c.id() as i32;
            // Stop the shell and everything it started; out of the registry first, so a late
            // kill_running_commands cannot signal a reused PID after the wait below.
            let mut reg = running();
            reg.retain(|&p| p != pid);
            kill_command(pid);
            drop(reg);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kill_running_commands` kills every registered command, so the tests that start commands run one
    /// at a time.
    static COMMANDS: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        COMMANDS.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_load_command_that_fails_at_once_is_refused_with_the_reason() {
        let _serial = serial();
        let e = BackgroundLoad::start(&LoadSpec::Command("ordo_no_such_command_xyz".into()), None)
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("--load-cmd `ordo_no_such_command_xyz`"),
            "{msg}"
        );
        assert!(msg.contains("command not found"), "{msg}");
        assert!(matches!(e, ProbeError::Config(_)));

        let e = BackgroundLoad::start(&LoadSpec::Command("exit 3".into()), None).unwrap_err();
        assert!(e.to_string().contains("exit status 3"), "{e}");
    }

    #[test]
    fn a_load_command_and_what_it_forks_at_once_are_pinned() {
        let _serial = serial();
        // Regression: the mask used to be set on the shell only after the 200 ms start check, so a process
        // the command had already forked (the busy loop itself) ran anywhere.
        let cpu = thread::cpu_count().saturating_sub(1);
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("child.pid");
        let cmd = format!("sleep 30 & echo $! > '{}'; wait", pidfile.display());
        let load = BackgroundLoad::start(&LoadSpec::Command(cmd), Some(cpu)).unwrap();
        let start = std::time::Instant::now();
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                break p;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "no child pid"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(thread::get_affinity(pid).unwrap(), vec![cpu]);
        // the caller's own mask is given back
        assert!(!thread::get_affinity(0).unwrap().is_empty());
        drop(load);
    }

    #[test]
    fn kill_running_commands_reaches_a_running_load() {
        let _serial = serial();
        let mut load = BackgroundLoad::start(&LoadSpec::Command("sleep 30".into()), None).unwrap();
        let pid = load.child.as_ref().unwrap().id() as i32;
        assert!(running().contains(&pid));
        kill_running_commands();
        let start = std::time::Instant::now();
        while !load.command_exited() {
            assert!(start.elapsed() < std::time::Duration::from_secs(5));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop(load);
        assert!(!running().contains(&pid));
    }

    #[test]
    fn what_the_command_left_behind_when_its_shell_died_is_killed_too() {
        let _serial = serial();
        // The shell dies first (as a terminal Ctrl-C used to make it); its background sleep is re-parented
        // out of the tree, but stays in the command's process group.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("sleep.pid");
        let cmd = format!("sleep 30 & echo $! > '{}'; sleep 0.3", pidfile.display());
        let mut load = BackgroundLoad::start(&LoadSpec::Command(cmd), None).unwrap();
        let start = std::time::Instant::now();
        while !load.command_exited() {
            assert!(start.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sleep: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(std::path::Path::new(&format!("/proc/{sleep}")).exists());
        drop(load);
        assert!(
            ordo_sys::process::exited_within(sleep, std::time::Duration::from_secs(5)),
            "the orphaned sleep {sleep} survived"
        );
    }

    #[test]
    fn a_running_load_command_is_kept() {
        let _serial = serial();
        let mut load = BackgroundLoad::start(&LoadSpec::Command("sleep 30".into()), None).unwrap();
        assert!(!load.command_exited());
        drop(load); // stops it
    }
}
