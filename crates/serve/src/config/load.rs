//! Loading a config: reading and parsing the file, applying the command-line overrides (kept so that a
//! reload re-applies them), resolving relative paths, and turning a check's failure into an error located
//! at the file's line and key, or at the flag behind it.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ordo_sched::PolicyKind;
use ordo_util::located::{Source, line_of, span_of_path};

use super::{ConfigError, Invalid, Seg, ServeConfig, path_to_string, policy_name};

/// Values given on the command line; they win over the file and survive reloads. A check that fails
/// because of one of them names the flag, not the file's line.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub workers: Option<crate::overload::Workers>,
    pub policy: Option<PolicyKind>,
    /// `--policy-script PATH`; a relative path is taken as given (the binary makes it absolute against the
    /// current directory, not the file's).
    pub policy_script: Option<PathBuf>,
    pub threads: Option<usize>,
    /// `Some(None)`: admin disabled; `Some(Some(addr))`: admin on addr.
    pub admin: Option<Option<SocketAddr>>,
    /// `--shutdown-grace DURATION`.
    pub shutdown_grace: Option<Duration>,
}

impl Overrides {
    /// The flag (with its value, as a user would type it) that set the top-level key `key`, if any.
    pub fn flag_for(&self, key: &str) -> Option<String> {
        match key {
            "listen" => self.listen.map(|a| format!("--listen {a}")),
            "workers" => self.workers.map(|w| format!("--workers {w}")),
            "threads" => self.threads.map(|t| format!("--threads {t}")),
            "policy" => self.policy.map(|p| format!("--policy {}", policy_name(p))),
            "policy_script" => self
                .policy_script
                .as_ref()
                .map(|p| format!("--policy-script {}", p.display())),
            "admin" => self.admin.map(|a| match a {
                Some(addr) => format!("--admin {addr}"),
                None => "--admin off".to_string(),
            }),
            "shutdown_grace" => self
                .shutdown_grace
                .map(|d| format!("--shutdown-grace {}", crate::http::duration::format(d))),
            _ => None,
        }
    }
}

/// Where a config came from.
pub struct Origin {
    /// Name used in error messages (the path as given).
    pub name: String,
    /// The file to re-read on reload, if any.
    pub path: Option<PathBuf>,
    /// The TOML text, to locate keys in error messages.
    pub text: String,
    /// Directory relative paths in the file are resolved against.
    pub dir: PathBuf,
}

// By hand, without the text: it may hold `[admin] token`.
impl fmt::Debug for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Origin")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("text", &format_args!("<{} bytes>", self.text.len()))
            .field("dir", &self.dir)
            .finish()
    }
}
impl ServeConfig {
    /// Read, parse and validate a config file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::from_file_with(path, Overrides::default())
    }

    /// Read and parse a config file, apply command-line overrides, then validate the result once: what is
    /// checked is what would run, so a file that is only complete with its flags (`policy = "lua"` plus
    /// `--policy-script`) is accepted, and a failure at a key a flag set names the flag. Use this (with the
    /// running overrides) to re-read the file on reload, too.
    pub fn from_file_with(
        path: impl AsRef<Path>,
        overrides: Overrides,
    ) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(name.clone(), format!("cannot read: {e}")))?;
        let dir = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    p.to_path_buf()
                }
            })
            .unwrap_or_else(|| PathBuf::from("."));
        let mut cfg = Self::parse_unchecked(text, name, Some(path.to_path_buf()), dir)?;
        cfg.apply_overrides(overrides);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse and validate TOML text; `name` is used in error messages; relative paths resolve against the
    /// current directory.
    pub fn from_toml_str(text: &str, name: &str) -> Result<Self, ConfigError> {
        let cfg =
            Self::parse_unchecked(text.to_string(), name.to_string(), None, PathBuf::from("."))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse only (TOML syntax, types, unknown keys); the caller validates.
    fn parse_unchecked(
        text: String,
        name: String,
        path: Option<PathBuf>,
        dir: PathBuf,
    ) -> Result<Self, ConfigError> {
        let mut cfg: ServeConfig = Source::new(&name, &text).parse()?;
        cfg.origin = Some(Arc::new(Origin {
            name,
            path,
            text,
            dir,
        }));
        Ok(cfg)
    }

    /// Apply command-line overrides (kept in the config so a reload re-applies them).
    pub fn apply_overrides(&mut self, o: Overrides) {
        if let Some(l) = o.listen {
            self.listen = l;
        }
        if let Some(w) = o.workers {
            self.workers = w;
        }
        if let Some(p) = o.policy {
            self.policy = p;
        }
        if let Some(t) = o.threads {
            self.threads = t;
        }
        if let Some(p) = &o.policy_script {
            self.policy_script = Some(p.clone());
        }
        if let Some(g) = o.shutdown_grace {
            self.shutdown_grace = g;
        }
        match o.admin {
            Some(Some(a)) => {
                self.admin.enabled = true;
                self.admin.listen = a;
            }
            Some(None) => self.admin.enabled = false,
            None => {}
        }
        self.overrides = o;
    }

    /// The file name used in messages.
    pub fn name(&self) -> &str {
        self.origin.as_ref().map_or("<config>", |o| o.name.as_str())
    }

    /// Resolve a path from the file against the file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match &self.origin {
            Some(o) => o.dir.join(p),
            None => p.to_path_buf(),
        }
    }

    /// Turn a not-yet-located failure into an error naming file, line and key — or the command-line flag
    /// behind it: the one the check named, else the override of the failing top-level key (the value in
    /// effect there came from the flag, not the file).
    pub fn locate(&self, inv: Invalid) -> ConfigError {
        let flag = inv.flag.clone().or_else(|| match inv.path.first() {
            Some(Seg::Key(k)) => self.overrides.flag_for(k),
            _ => None,
        });
        if let Some(flag) = flag {
            return ConfigError::new(flag, inv.message);
        }
        match &self.origin {
            Some(o) => Source::new(&o.name, &o.text).at_path(&inv.path, inv.message),
            None => ConfigError {
                key: (!inv.path.is_empty()).then(|| path_to_string(&inv.path)),
                ..ConfigError::new(self.name(), inv.message)
            },
        }
    }

    /// `file:line` of a key path, for messages about a flag that clashes with the file (`file` alone when the
    /// key is not spelled out in it).
    pub(super) fn file_line(&self, path: Vec<Seg>) -> String {
        let line = self
            .origin
            .as_ref()
            .and_then(|o| span_of_path(&o.text, &path).map(|s| line_of(&o.text, s.start)));
        match line {
            Some(l) => format!("{}:{l}", self.name()),
            None => self.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_name_file_line_and_key() {
        let cfg = ServeConfig::from_toml_str("[[classes]]\nname = \"a\"\nweight = 0\n", "c.toml");
        assert_eq!(
            cfg.unwrap_err().to_string(),
            "c.toml:3: classes[0].weight: must be ≥ 1, got 0"
        );
        // a type error inside an inline table names the inner key
        let cfg = ServeConfig::from_toml_str(
            "[[classes]]\nname = \"a\"\n[[rules]]\nclass = \"a\"\nheader = { name = \"x\", regex = 1 }\n",
            "c.toml",
        );
        let e = cfg.unwrap_err().to_string();
        assert!(
            e.starts_with("c.toml:5: rules[0].header.regex: expected a string, found the number 1"),
            "{e}"
        );
    }
}
