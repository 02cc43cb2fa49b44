//! Signals to whole process groups, so a background load started with `sh -c` is stopped together with
//! everything it spawned (the safe crates cannot call kill(2) themselves).

use crate::error::SysError;

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
    fn refuses_small_groups() {
        assert!(super::kill_group(0).is_err());
        assert!(super::kill_group(1).is_err());
        assert!(matches!(
            super::kill_group(99_999_999),
            Err(crate::SysError::ProcessGone(_))
        ));
    }
}
