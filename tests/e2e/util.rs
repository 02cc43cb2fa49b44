//! Harness for the end-to-end tests: run the built `ordo` binary with a time limit and capture its output.

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `ordo` binary cargo built for these tests.
pub fn ordo_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ordo"))
}

/// A command for the `ordo` binary, with logging kept quiet unless the test sets it.
pub fn ordo() -> Command {
    let mut cmd = Command::new(ordo_bin());
    cmd.env_remove("ORDO_LOG");
    cmd
}

/// What a finished run printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Run `cmd` to completion, killing it (and failing the test) if it takes longer than `limit`.
pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ordo");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = wait_with_timeout(&mut child, limit);
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    match status {
        Some(status) => Output {
            status,
            stdout,
            stderr,
        },
        None => {
            panic!("ordo did not finish within {limit:?}\nstdout:\n{stdout}\nstderr:\n{stderr}")
        }
    }
}

/// Wait for `child` up to `limit`; kill it and return None when the limit passes.
pub fn wait_with_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
