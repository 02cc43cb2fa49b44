//! A check's failure before it is located in the file: the key path and the message (or the command-line
//! flag behind it). Every module that checks its own part of the configuration returns it; `ServeConfig::
//! locate` turns it into the file:line error. A leaf, so those modules need not depend on the config.

use ordo_util::located::Seg;

/// A validation failure before it is located in the file.
#[derive(Clone, Debug)]
pub struct Invalid {
    pub path: Vec<Seg>,
    pub message: String,
    /// The command-line flag that caused it, when the check knows (see [`ServeConfig::locate`](crate::config::ServeConfig::locate)).
    pub flag: Option<String>,
}

impl Invalid {
    /// A failure at the key path `path` (built with `keypath!`).
    pub fn new(path: Vec<Seg>, message: impl Into<String>) -> Self {
        Invalid {
            path,
            message: message.into(),
            flag: None,
        }
    }

    /// A failure caused by the command-line flag `flag` (`--policy lua`).
    pub fn flag(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Invalid {
            path: Vec::new(),
            message: message.into(),
            flag: Some(flag.into()),
        }
    }
}
