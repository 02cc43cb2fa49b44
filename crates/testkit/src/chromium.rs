//! Headless Chromium for the tests that need a real browser (the report's charts, serve's content codings,
//! WebSocket over HTTP/2): where it lives and the flags every such test wants, so each test adds only its own.

use std::path::Path;
use std::process::Command;

/// Where scripts/setup.sh installs it.
pub const PATH: &str = "/usr/bin/chromium";

/// Whether Chromium is installed; when not, says the test is skipped and how to install it.
pub fn available() -> bool {
    let there = Path::new(PATH).exists();
    if !there {
        println!("skipped: {PATH} is not installed (./scripts/setup.sh installs it)");
    }
    there
}

/// Headless Chromium with a fresh profile in `profile` and nothing running that the test did not ask for
/// (no GPU, sandbox, first-run pages, background networking, component updates or sync). The caller adds
/// its network rules, what to do and the URL.
pub fn command(profile: &Path) -> Command {
    let mut cmd = Command::new(PATH);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_has_a_profile_and_is_headless() {
        let cmd = super::command(std::path::Path::new("/tmp/p"));
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args.first().map(String::as_str), Some("--headless"));
        assert_eq!(
            args.last().map(String::as_str),
            Some("--user-data-dir=/tmp/p")
        );
    }
}
