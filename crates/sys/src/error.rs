//! The one error type of ordo-sys, so callers can tell a vanished process, a missing /proc file (a kernel
//! without schedstat), a permission problem and an unparsable file apart and react to each.

use std::path::{Path, PathBuf};

/// What can go wrong reading /proc or changing a thread's scheduling.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    /// The process (or the task, for per-thread calls) no longer exists, or never did.
    #[error("process {0} does not exist (it may have exited)")]
    ProcessGone(i32),
    /// The file does not exist: typically a kernel built without the feature (schedstat, PSI, sched_debug).
    #[error("{path} is not available on this kernel")]
    Missing { path: PathBuf },
    /// Reading the file or making the call needs privileges this process lacks.
    #[error("permission denied: {what}")]
    Permission { what: String },
    /// The file exists but a field could not be understood.
    #[error("{file}: field `{field}`: {msg}")]
    Parse {
        file: String,
        field: String,
        msg: String,
    },
    /// The kernel refused a value (EINVAL) or lacks the feature (ENOSYS).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Any other I/O error on a named path.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Any other failed system call, named with its errno.
    #[error("{call}: {source}")]
    Os {
        call: String,
        #[source]
        source: std::io::Error,
    },
}

impl SysError {
    /// A parse error naming the file and field.
    pub fn parse(
        file: impl Into<String>,
        field: impl Into<String>,
        msg: impl Into<String>,
    ) -> Self {
        SysError::Parse {
            file: file.into(),
            field: field.into(),
            msg: msg.into(),
        }
    }

    /// Map an I/O error on `path` to the right variant (missing file, permission, other).
    pub fn from_io(path: &Path, err: std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => SysError::Missing {
                path: path.to_path_buf(),
            },
            std::io::ErrorKind::PermissionDenied => SysError::Permission {
                what: format!("reading {}", path.display()),
            },
            _ if err.raw_os_error() == Some(libc::ESRCH) => SysError::Missing {
                path: path.to_path_buf(),
            },
            _ => SysError::Io {
                path: path.to_path_buf(),
                source: err,
            },
        }
    }

    /// Map a failed system call on task `tid` (errno in `err`) to the right variant.
    pub fn from_errno(call: &str, tid: i32, err: std::io::Error) -> Self {
        match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => SysError::Permission {
                what: format!("{call} on task {tid}"),
            },
            Some(libc::ESRCH) => SysError::ProcessGone(tid),
            Some(libc::EINVAL) => {
                SysError::Unsupported(format!("{call} on task {tid}: invalid value"))
            }
            Some(libc::ENOSYS) | Some(libc::E2BIG) => {
                SysError::Unsupported(format!("{call}: not supported by this kernel"))
            }
            _ => SysError::Os {
                call: format!("{call} on task {tid}"),
                source: err,
            },
        }
    }

    /// True for errors that mean "this file or feature is not here" rather than a failure.
    pub fn is_missing(&self) -> bool {
        matches!(self, SysError::Missing { .. })
    }
}
