//! Errors of the probes: bad settings (the binary maps these to exit 2) and failures from the Linux layer.

use ordo_sys::SysError;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A setting is invalid or cannot be applied as given.
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Sys(#[from] SysError),
}

impl ProbeError {
    /// True when the user's input is at fault (bad value, unknown PID).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ProbeError::Config(_) | ProbeError::Sys(SysError::ProcessGone(_))
        )
    }
}
