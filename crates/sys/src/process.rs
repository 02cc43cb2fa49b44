//! Signals to processes, process groups and process trees, so a background load started with `sh -c` is
//! stopped together with everything it spawned (the safe crates cannot call kill(2) themselves).

use crate::error::SysError;
use crate::procfs::ProcRoot;

/// Send `signal` to process `pid` (> 1).
pub fn signal(pid: i32, signal: i32) -> Result<(), SysError> {
    if pid <= 1 {
        return Err(SysError::Unsupported(format!(
            "refusing to signal process {pid}"
        )));
    }
    // SAFETY: kill takes plain integers; a positive pid addresses one process.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(SysError::from_errno(
            "kill",
            pid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Whether process `pid` has exited: gone from /proc, or a zombie nobody has reaped yet.
pub fn exited(pid: i32) -> bool {
    !matches!(ProcRoot::default().stat(pid), Ok(st) if !matches!(st.state, 'Z' | 'X'))
}

/// Polls [`exited`] every 20 ms for at most `limit`; true once `pid` has exited.
pub fn exited_within(pid: i32, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    loop {
        if exited(pid) {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Every descendant of `pid` (children, grandchildren, ...), found through the parent ids in /proc/*/stat.
pub fn descendants(root: &ProcRoot, pid: i32) -> Vec<i32> {
    let mut parent_of: Vec<(i32, i32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root.path()) {
        for e in rd.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(st) = root.stat(p) {
                parent_of.push((p, st.ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parent_of {
            if pp == p && !out.contains(&c) {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// SIGKILL `pid` and all its descendants (descendants first collected, then killed parent-first so none
/// is re-parented out of reach while we work).
pub fn kill_tree(pid: i32) -> Result<(), SysError> {
    let below = descendants(&ProcRoot::default(), pid);
    let first = signal(pid, libc::SIGKILL);
    for d in below {
        let _ = signal(d, libc::SIGKILL);
    }
    first
}

/// Send `signal` to every process in group `pgid` (> 1).
pub fn signal_group(pgid: i32, signal: i32) -> Result<(), SysError> {
    if pgid <= 1 {
        return Err(SysError::Unsupported(format!(
            "refusing to signal process group {pgid}"
        )));
    }
    // SAFETY: kill takes plain integers; a negative pid addresses the process group.
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc != 0 {
        return Err(SysError::from_errno(
            "kill",
            pgid,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// SIGKILL every process in group `pgid`.
pub fn kill_group(pgid: i32) -> Result<(), SysError> {
    signal_group(pgid, libc::SIGKILL)
}

/// SIGTERM for callers that pass a signal number.
pub const SIGTERM: i32 = libc::SIGTERM;
/// SIGKILL.
pub const SIGKILL: i32 = libc::SIGKILL;

#[cfg(test)]
mod tests {
    #[test]
    fn kills_a_tree() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 30 & sleep 30 & wait")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let root = crate::procfs::ProcRoot::default();
        let mut below = Vec::new();
        for _ in 0..100 {
            below = super::descendants(&root, pid);
            if below.len() >= 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(below.len(), 2, "{below:?}");
        assert!(below.iter().all(|p| !super::exited(*p)));
        super::kill_tree(pid).unwrap();
        child.wait().unwrap();
        let limit = std::time::Duration::from_secs(1);
        assert!(
            below.iter().all(|p| super::exited_within(*p, limit)),
            "grandchildren {below:?} survived"
        );
    }

    #[test]
    fn refuses_small_groups() {
        assert!(super::kill_group(0).is_err());
        assert!(super::kill_group(1).is_err());
        assert!(super::signal(1, super::SIGTERM).is_err());
        assert!(matches!(
            super::kill_group(99_999_999),
            Err(crate::SysError::ProcessGone(_))
        ));
    }
}
