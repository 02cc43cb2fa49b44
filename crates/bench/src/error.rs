//! The one error type of a run (`ordo bench`, and bench in-process for demo and tune): what the user asked
//! for that cannot be done (the binary exits 2 for these), a target that does not answer, an I/O failure.

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("invalid header `{header}`: {reason}")]
    InvalidHeader { header: String, reason: String },
    #[error("invalid {field}: {message}")]
    InvalidConfig { field: String, message: String },
    /// A mix file (or a mix built in Rust) refused: `mix file m.toml:3: class[0].share: ...`.
    #[error("mix file {0}")]
    Mix(Box<ordo_util::located::Located>),
    #[error("cannot reach {target}: {reason}")]
    Unreachable { target: String, reason: String },
    #[error("server pid {pid}: {reason}")]
    ServerPid { pid: i32, reason: String },
    /// A Lua script (`-s`) could not be loaded, or one of its hooks raised an error.
    #[error("script {path}: {message}")]
    Script { path: String, message: String },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<ordo_util::located::Located> for BenchError {
    fn from(e: ordo_util::located::Located) -> Self {
        BenchError::Mix(Box::new(e))
    }
}

impl BenchError {
    /// True for errors in what the user asked for (the binary exits 2 for these).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            BenchError::InvalidUrl { .. }
                | BenchError::InvalidHeader { .. }
                | BenchError::InvalidConfig { .. }
                | BenchError::Mix(_)
                | BenchError::ServerPid { .. }
                | BenchError::Script { .. }
        )
    }
}
