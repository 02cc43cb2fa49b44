//! A wrk Lua script as `-s FILE` names it: its text, compiled once when loaded so a syntax error is
//! reported (with file and line) before anything runs, and the arguments after `--`. Its own module so the
//! configuration can hold a script without depending on the runtime (the script module) that runs it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mlua::Lua;

use crate::error::BenchError;

/// A Lua script as loaded (and compiled once, so syntax errors are reported before anything runs), with
/// the arguments its `init(args)` receives after the URL.
#[derive(Clone, Debug)]
pub struct Script {
    pub path: PathBuf,
    pub(crate) source: Arc<str>,
    /// Arguments after `--` (`args[1]`, `args[2]`, …; `args[0]` is the URL, as in wrk).
    pub args: Vec<String>,
}

impl Script {
    /// Reads and compiles `path`.
    pub fn load(path: &Path, args: Vec<String>) -> Result<Script, BenchError> {
        let source = std::fs::read_to_string(path).map_err(|e| BenchError::Script {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })?;
        Script::from_source(path, &source, args)
    }

    /// A script from `source`, named `path` in messages.
    pub fn from_source(path: &Path, source: &str, args: Vec<String>) -> Result<Script, BenchError> {
        let s = Script {
            path: path.to_path_buf(),
            source: source.into(),
            args,
        };
        let lua = Lua::new();
        lua.load(&*s.source)
            .set_name(s.chunk_name())
            .into_function()
            .map_err(|e| s.error(e))?;
        Ok(s)
    }

    pub(crate) fn chunk_name(&self) -> String {
        format!("@{}", self.path.display())
    }

    pub(crate) fn error(&self, e: impl std::fmt::Display) -> BenchError {
        BenchError::Script {
            path: self.path.display().to_string(),
            message: e.to_string(),
        }
    }
}
