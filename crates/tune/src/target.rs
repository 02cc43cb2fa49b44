//! The process being tuned: started per run (built-in `ordo serve` or a command, with placeholders
//! substituted and a readiness URL polled) or found by pid or name; its threads selected for the
//! per-thread knobs; stopped as a whole process group.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::spec::{TargetKind, TargetSpec, ThreadSel};

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cannot start the target `{cmd}`: {source}")]
    Spawn {
        cmd: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the target `{cmd}` exited before it was ready ({status}){}", tail(.stderr))]
    Exited {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("the target `{cmd}` was not ready at {url} within {timeout:?}{}", tail(.stderr))]
    NotReady {
        cmd: String,
        url: String,
        timeout: Duration,
        stderr: String,
    },
    #[error("target: no running process {0}")]
    NoProcess(String),
    #[error("builtin = \"ordo-serve\" needs the ordo binary (run through `ordo tune`)")]
    NoOrdo,
}

fn tail(s: &str) -> String {
    let t = s.trim();
    if t.is_empty() {
        String::new()
    } else {
        let lines: Vec<&str> = t.lines().collect();
        format!(
            "; its stderr ends:\n{}",
            lines[lines.len().saturating_sub(8)..].join("\n")
        )
    }
}

/// Replace `{name}` placeholders; unknown ones are left as they are.
pub(crate) fn substitute(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = s.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

/// A free TCP port on 127.0.0.1 (bound and released; the target binds it right after).
pub(crate) fn free_port() -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The command line a started target runs with (placeholders substituted).
pub(crate) fn command_line(
    spec: &TargetSpec,
    vars: &BTreeMap<String, String>,
    ordo: Option<&Path>,
) -> Result<Vec<String>, TargetError> {
    Ok(match &spec.kind {
        TargetKind::Builtin { config, args } => {
            let ordo = ordo.ok_or(TargetError::NoOrdo)?;
            let mut v = vec![ordo.display().to_string(), "serve".into()];
            if let Some(c) = config {
                v.push("--config".into());
                v.push(c.display().to_string());
            }
            v.extend([
                "--listen".into(),
                substitute("127.0.0.1:{port}", vars),
                "--admin".into(),
                "off".into(),
            ]);
            v.extend(args.iter().map(|a| substitute(a, vars)));
            v
        }
        TargetKind::Command { argv } => argv.iter().map(|a| substitute(a, vars)).collect(),
        TargetKind::Pid(_) | TargetKind::Name(_) => Vec::new(),
    })
}

/// A target for the duration of one run.
#[derive(Debug)]
pub(crate) struct RunningTarget {
    child: Option<Child>,
    stderr_path: Option<PathBuf>,
    /// The main process (the started child, or the first process found).
    pub pid: i32,
    /// Every process of the target (found by name: all matches).
    pub pids: Vec<i32>,
}

/// Minimal HTTP GET: Ok when anything that looks like an HTTP status line comes back.
pub(crate) fn http_ready(url: &str, timeout: Duration) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let hostport = if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:80")
    };
    let Some(addr) = hostport.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let host = hostport.split(':').next().unwrap_or("localhost");
    if s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    let mut got = 0;
    while got < 5 {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf[..got].starts_with(b"HTTP/")
}

impl RunningTarget {
    /// Start (for builtin/command targets) or find (pid/name) the target.
    pub(crate) fn start(
        spec: &TargetSpec,
        vars: &BTreeMap<String, String>,
        ordo: Option<&Path>,
        scratch: &Path,
    ) -> Result<RunningTarget, TargetError> {
        match &spec.kind {
            TargetKind::Pid(pid) => {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(TargetError::NoProcess(format!("with pid = {pid}")));
                }
                Ok(RunningTarget {
                    child: None,
                    stderr_path: None,
                    pid: *pid,
                    pids: vec![*pid],
                })
            }
            TargetKind::Name(name) => {
                let pids = pids_named(name);
                let pid = *pids
                    .first()
                    .ok_or_else(|| TargetError::NoProcess(format!("named `{name}`")))?;
                Ok(RunningTarget {
                    child: None,
                    stderr_path: None,
                    pid,
                    pids,
                })
            }
            _ => {
                let argv = command_line(spec, vars, ordo)?;
                let cmd = argv.join(" ");
                let stderr_path = scratch.join("target.stderr");
                let stderr = std::fs::File::create(&stderr_path)
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null());
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(stderr)
                    .env_remove("ORDO_LOG")
                    .process_group(0);
                let child = c.spawn().map_err(|source| TargetError::Spawn {
                    cmd: cmd.clone(),
                    source,
                })?;
                let pid = child.id() as i32;
                let mut t = RunningTarget {
                    child: Some(child),
                    stderr_path: Some(stderr_path),
                    pid,
                    pids: vec![pid],
                };
                if let Some(url) = &spec.ready_url {
                    let url = substitute(url, vars);
                    let start = Instant::now();
                    loop {
                        if let Some(Ok(Some(status))) = t.child.as_mut().map(|c| c.try_wait()) {
                            let stderr = t.stderr();
                            t.child = None;
                            return Err(TargetError::Exited {
                                cmd,
                                status: status.to_string(),
                                stderr,
                            });
                        }
                        if http_ready(&url, Duration::from_millis(500)) {
                            break;
                        }
                        if start.elapsed() > spec.ready_timeout {
                            let stderr = t.stderr();
                            t.stop();
                            return Err(TargetError::NotReady {
                                cmd,
                                url,
                                timeout: spec.ready_timeout,
                                stderr,
                            });
                        }
                        std::thread::sleep(Duration::from_millis(25));
                    }
                }
                t.pids = std::iter::once(pid).chain(descendants(pid)).collect();
                Ok(t)
            }
        }
    }

    fn stderr(&self) -> String {
        self.stderr_path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Whether a started target is still running (found targets: whether the main pid exists).
    pub(crate) fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => Path::new(&format!("/proc/{}", self.pid)).exists(),
        }
    }

    /// Threads of every target process (re-read now), filtered by name.
    pub(crate) fn threads(&mut self, sel: &ThreadSel) -> Vec<(i32, String)> {
        if self.child.is_some() {
            self.pids = std::iter::once(self.pid)
                .chain(descendants(self.pid))
                .collect();
        }
        let mut out = Vec::new();
        for &pid in &self.pids {
            let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for e in rd.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                    continue;
                };
                let name = std::fs::read_to_string(e.path().join("comm"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default();
                if match sel {
                    ThreadSel::All => true,
                    ThreadSel::Name(re) => re.is_match(&name),
                } {
                    out.push((tid, name));
                }
            }
        }
        out.sort();
        out
    }

    /// Stop a started target: SIGTERM to its process group, SIGKILL after 5 s. Found targets are left alone.
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = ordo_sys::process::signal_group(self.pid, ordo_sys::process::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if matches!(child.try_wait(), Ok(Some(_))) {
                // The group may still hold children that ignored SIGTERM.
                let _ = ordo_sys::process::kill_group(self.pid);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = ordo_sys::process::kill_group(self.pid);
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for RunningTarget {
    fn drop(&mut self) {
        self.stop();
    }
}

fn ppid_of(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &s[s.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Every descendant process of `pid`.
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = all_pids()
        .into_iter()
        .filter_map(|p| ppid_of(p).map(|pp| (p, pp)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, pp) in &parents {
            if pp == p && !out.contains(&c) && out.len() < 10_000 {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

/// Processes whose name (`comm`) or executable basename is `name`.
pub(crate) fn pids_named(name: &str) -> Vec<i32> {
    let mut v: Vec<i32> = all_pids()
        .into_iter()
        .filter(|p| {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            if comm.trim() == name {
                return true;
            }
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            Path::new(std::str::from_utf8(argv0).unwrap_or_default())
                .file_name()
                .is_some_and(|f| f == name)
        })
        .collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_and_command_line() {
        let vars: BTreeMap<String, String> = [
            ("port".to_string(), "8081".to_string()),
            ("threads".to_string(), "4".to_string()),
        ]
        .into();
        assert_eq!(
            substitute("a {port} {threads} {nope}", &vars),
            "a 8081 4 {nope}"
        );
        let spec = TargetSpec {
            kind: TargetKind::Builtin {
                config: Some("/x/s.toml".into()),
                args: vec!["--workers".into(), "{threads}".into()],
            },
            ready_url: None,
            ready_timeout: Duration::from_secs(1),
            threads: ThreadSel::All,
        };
        assert_eq!(
            command_line(&spec, &vars, Some(Path::new("/bin/ordo")))
                .unwrap()
                .join(" "),
            "/bin/ordo serve --config /x/s.toml --listen 127.0.0.1:8081 --admin off --workers 4"
        );
        assert!(command_line(&spec, &vars, None).is_err());
    }

    #[test]
    fn started_command_and_found_pid() {
        let d = tempfile::tempdir().unwrap();
        let spec = TargetSpec {
            kind: TargetKind::Command {
                argv: vec!["sleep".into(), "30".into()],
            },
            ready_url: None,
            ready_timeout: Duration::from_secs(1),
            threads: ThreadSel::All,
        };
        let mut t = RunningTarget::start(&spec, &BTreeMap::new(), None, d.path()).unwrap();
        assert!(t.alive());
        assert_eq!(t.threads(&ThreadSel::All).len(), 1);
        let pid = t.pid;
        t.stop();
        assert!(!t.alive());
        let _ = pid;
        // Our own process, found by pid; a thread filter that matches nothing.
        let me = std::process::id() as i32;
        let spec = TargetSpec {
            kind: TargetKind::Pid(me),
            ..spec
        };
        let mut t = RunningTarget::start(&spec, &BTreeMap::new(), None, d.path()).unwrap();
        assert!(!t.threads(&ThreadSel::All).is_empty());
        assert!(
            t.threads(&ThreadSel::Name(
                regex::Regex::new("^no-such-thread$").unwrap()
            ))
            .is_empty()
        );
        t.stop();
        assert!(t.alive(), "a found target is never stopped");
    }

    #[test]
    fn not_ready_is_reported_with_the_url() {
        let d = tempfile::tempdir().unwrap();
        let port = free_port().unwrap();
        let spec = TargetSpec {
            kind: TargetKind::Command {
                argv: vec!["sleep".into(), "30".into()],
            },
            ready_url: Some(format!("http://127.0.0.1:{port}/")),
            ready_timeout: Duration::from_millis(300),
            threads: ThreadSel::All,
        };
        let e = RunningTarget::start(&spec, &BTreeMap::new(), None, d.path()).unwrap_err();
        assert!(matches!(e, TargetError::NotReady { .. }), "{e}");
        let spec = TargetSpec {
            kind: TargetKind::Command {
                argv: vec!["false".into()],
            },
            ready_timeout: Duration::from_secs(10),
            ..spec
        };
        let e = RunningTarget::start(&spec, &BTreeMap::new(), None, d.path()).unwrap_err();
        assert!(matches!(e, TargetError::Exited { .. }), "{e}");
    }
}
