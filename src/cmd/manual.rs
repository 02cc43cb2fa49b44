//! What the man pages say beyond the options clap knows: each page's SIGNALS, EXIT STATUS, ENVIRONMENT,
//! FILES and EXAMPLES (written from what the code does: the signal handlers in ordo-serve's `server.rs` and
//! `interrupt.rs`, the exit codes in `exit.rs`, every environment variable read), and the configuration
//! page ordo-serve.toml(5), converted from docs/serve.md's configuration reference so the two cannot differ.

/// One section of a page: its title and its entries (a term in bold and its text; an empty term is a
/// paragraph).
pub struct Section {
    pub title: &'static str,
    pub entries: Vec<(&'static str, &'static str)>,
}

fn section(title: &'static str, entries: &[(&'static str, &'static str)]) -> Section {
    Section {
        title,
        entries: entries.to_vec(),
    }
}

/// `ORDO_LOG`, read by every subcommand (`cli::init_logging`).
const ORDO_LOG: (&str, &str) = (
    "ORDO_LOG",
    "Log filter (tracing's EnvFilter syntax: \"info\", \"debug\", \"ordo_serve=debug,warn\"); when set it \
     overrides -v and -q. Logs go to standard error.",
);

/// The signal handling of bench, probe and demo (`interrupt::stop_on_signals`).
const STOP_ON_SIGNAL: &str = "The first SIGINT (Ctrl-C) or SIGTERM stops the run at its next boundary; what \
     was measured so far is reported, marked as interrupted, and the exit status is 130. A second one quits \
     at once without a report (exit status 130).";

const EXIT_BAD_INPUT: (&str, &str) = (
    "2",
    "Bad input, refused before anything runs: an unknown or invalid option, a configuration or input file \
     that cannot be read or is invalid (the message names the file, line and key), a value out of range.",
);
const EXIT_FAILED: (&str, &str) = (
    "1",
    "A failure at run time (an address that cannot be bound, an unreachable target, an I/O error).",
);
const EXIT_INTERRUPTED: (&str, &str) = (
    "130",
    "Stopped by SIGINT or SIGTERM (128 + SIGINT); what it printed or saved is partial.",
);

/// The extra sections of the page of `page` (`ordo`, `serve`, `bench`, ...), in the order they are printed.
pub fn sections(page: &str) -> Vec<Section> {
    match page {
        "ordo" => vec![
            section(
                "SIGNALS",
                &[
                    (
                        "ordo serve",
                        "SIGHUP reloads, SIGUSR1 reopens the access log, SIGTERM and SIGINT shut down gracefully; see ordo-serve(1).",
                    ),
                    ("ordo bench, ordo probe, ordo demo", STOP_ON_SIGNAL),
                    (
                        "ordo tune",
                        "SIGINT or SIGTERM cancels the current run, restores every knob and exits 130; see ordo-tune(1).",
                    ),
                ],
            ),
            section(
                "EXIT STATUS",
                &[
                    ("0", "Success."),
                    EXIT_FAILED,
                    EXIT_BAD_INPUT,
                    EXIT_INTERRUPTED,
                ],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[
                    (
                        "ordo-serve.toml(5)",
                        "The configuration file of ordo serve (no default path: give it with --config).",
                    ),
                    (
                        "ordo-tune.db, ordo-tune.db.journal",
                        "ordo tune's store and journal of original knob values, in the current directory.",
                    ),
                    ("ordo-results/", "Where ordo demo saves its results."),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo demo",
                        "Reproduce seed 003's result on localhost (about 3 minutes; --quick: about 30 s).",
                    ),
                    ("ordo serve -t my.toml", "Validate a configuration file."),
                    (
                        "ordo man --dir /usr/local/share/man",
                        "Install the man pages (man1 and man5).",
                    ),
                    (
                        "ordo completions bash > /etc/bash_completion.d/ordo",
                        "Install bash completion.",
                    ),
                ],
            ),
        ],
        "serve" => vec![
            section(
                "SIGNALS",
                &[
                    (
                        "SIGHUP",
                        "Re-read the configuration file (command-line overrides re-applied) and apply it: policy, weights, classes, rules, routes, workers; TLS certificates and keys are read again. Queued and in-flight requests are kept. A file that is refused is logged and the running configuration stays. listen, threads, coalesce, limits, admin, http2, tls.listen and access_log need a restart (a warning names them; the running values stay). Under systemd, RELOADING=1 and READY=1 are sent around it. POST /reload on the admin listener does the same.",
                    ),
                    (
                        "SIGUSR1",
                        "Reopen the access log at its path (for logrotate's postrotate).",
                    ),
                    (
                        "SIGTERM, SIGINT",
                        "Graceful shutdown: stop accepting, answer everything still queued with 503, let in-flight requests finish within shutdown_grace (default 30s), then close the connections still open. STOPPING=1 is sent under systemd. The exit status is 0.",
                    ),
                    (
                        "second SIGTERM or SIGINT",
                        "During the grace: close the connections still open at once; the exit status is still 0.",
                    ),
                ],
            ),
            section(
                "EXIT STATUS",
                &[
                    (
                        "0",
                        "Shut down after SIGTERM or SIGINT (also when the grace ran out or a second signal cut it short); with --check/-t: the configuration is valid.",
                    ),
                    (
                        "1",
                        "The server could not start or failed while serving (an address in use, a runtime error).",
                    ),
                    (
                        "2",
                        "An invalid configuration file or option: the message names the file, line and key (or the flag), e.g. ordo.toml:3: wokers: unknown key `wokers`; did you mean `workers`?",
                    ),
                ],
            ),
            section(
                "ENVIRONMENT",
                &[
                    ORDO_LOG,
                    (
                        "NOTIFY_SOCKET",
                        "Set by systemd (Type=notify): READY=1 once listening, RELOADING=1/READY=1 around a reload, STOPPING=1 at shutdown.",
                    ),
                    (
                        "SSL_CERT_FILE, SSL_CERT_DIR",
                        "Where the CA certificates that verify https:// proxy upstreams are read from (else the system's bundle).",
                    ),
                ],
            ),
            section(
                "FILES",
                &[
                    (
                        "--config FILE",
                        "The configuration, described in ordo-serve.toml(5). Without one: a synthetic backend on 127.0.0.1:8080, admin on 127.0.0.1:9090, policy fcfs. Relative paths in it are relative to its directory.",
                    ),
                    (
                        "policy_script, classify.script",
                        "Lua scripts named by the configuration.",
                    ),
                    (
                        "tls certificates, admin token_file",
                        "Read at start and at every reload.",
                    ),
                    ("access_log.path", "Appended to; reopened on SIGUSR1."),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo serve -t /etc/ordo/ordo.toml",
                        "Check a configuration (as nginx -t): exit 0, or 2 with file:line: key: why.",
                    ),
                    (
                        "ordo serve -c examples/serve/seed003.toml",
                        "Three classes, lottery 4:2:1, a synthetic backend.",
                    ),
                    (
                        "ordo serve -c ordo.toml --policy stride --workers auto",
                        "The file with two keys overridden from the command line.",
                    ),
                    (
                        "kill -HUP $(pidof ordo)",
                        "Apply an edited configuration without dropping a request.",
                    ),
                    (
                        "curl -s http://127.0.0.1:9090/metrics",
                        "Prometheus metrics from the admin listener.",
                    ),
                ],
            ),
        ],
        "bench" => vec![
            section("SIGNALS", &[("SIGINT, SIGTERM", STOP_ON_SIGNAL)]),
            section(
                "EXIT STATUS",
                &[
                    (
                        "0",
                        "The run finished (also with failed requests: they are in the report).",
                    ),
                    EXIT_FAILED,
                    EXIT_BAD_INPUT,
                    EXIT_INTERRUPTED,
                ],
            ),
            section(
                "ENVIRONMENT",
                &[
                    ORDO_LOG,
                    (
                        "SSL_CERT_FILE, SSL_CERT_DIR",
                        "Where the CA certificates that verify https:// targets are read from (else the system's bundle; --cacert and -k override).",
                    ),
                ],
            ),
            section(
                "FILES",
                &[
                    (
                        "--mix FILE",
                        "A class mix (TOML: [[class]] tables with a name, a share, URLs, headers, cookies and think time); errors name file:line: key.",
                    ),
                    ("--save FILE", "The JSON result, written at the end."),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo bench -c 100 -d 10s http://127.0.0.1:8080/",
                        "Closed loop, 100 connections, 10 seconds (wrk style).",
                    ),
                    (
                        "ordo bench -c 32 --rate 5000 -d 30s --json http://127.0.0.1:8080/ > run.json",
                        "Open loop at 5000 requests/s, latency corrected for coordinated omission.",
                    ),
                    (
                        "ordo bench -c 99 -d 30s --mix examples/bench/seed003-mix.toml http://127.0.0.1:8080/",
                        "Three classes of users, statistics per class.",
                    ),
                ],
            ),
        ],
        "tune" => vec![
            section(
                "SIGNALS",
                &[
                    (
                        "SIGINT, SIGTERM",
                        "Cancel the run in progress, restore every knob changed (newest first), empty the journal and exit 130; the experiment can be resumed. A second signal does not cut the restore short.",
                    ),
                    (
                        "SIGKILL (or a crash)",
                        "Nothing can be restored; the journal keeps the original values: run ordo tune recover.",
                    ),
                ],
            ),
            section(
                "EXIT STATUS",
                &[
                    ("0", "The experiment finished (whatever its verdict)."),
                    (
                        "1",
                        "A failure at run time, including a knob another experiment holds and a journal that still holds changes (run ordo tune recover).",
                    ),
                    (
                        "2",
                        "An invalid experiment file (file:line: key: why) or a knob refused by the checks (missing, not writable, out of range).",
                    ),
                    (
                        "130",
                        "Interrupted by SIGINT or SIGTERM; every knob was restored and the experiment is resumable.",
                    ),
                ],
            ),
            section(
                "ENVIRONMENT",
                &[
                    ORDO_LOG,
                    (
                        "XDG_RUNTIME_DIR",
                        "Without root: where the knob locks live (else the temporary directory); as root they are in /run/ordo/knobs.",
                    ),
                ],
            ),
            section(
                "FILES",
                &[
                    (
                        "ordo-tune.db",
                        "The SQLite store (--db), in the current directory by default.",
                    ),
                    (
                        "ordo-tune.db.journal",
                        "The journal of original knob values (--journal; the database path plus .journal), fsynced before any knob is written and removed at the end.",
                    ),
                    (
                        "/run/ordo/knobs/",
                        "Machine-wide knob locks: one experiment at a time per knob.",
                    ),
                    (
                        "/proc/sys/, /sys/kernel/debug/sched/, /sys/fs/cgroup/",
                        "Where the knobs are read and written.",
                    ),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo tune run examples/tune/seed001.toml --dry-run",
                        "Check every knob and show the plan; change nothing.",
                    ),
                    (
                        "sudo ordo tune run examples/tune/seed000.toml && ordo tune show",
                        "Run an experiment, then its report.",
                    ),
                    (
                        "sudo ordo tune recover",
                        "After a crash: restore the journalled knobs and stop the processes the run started.",
                    ),
                ],
            ),
        ],
        "probe" => vec![
            section(
                "SIGNALS",
                &[(
                    "SIGINT, SIGTERM",
                    "probe loop: stop after the current sample, kill the load, report the samples so far (exit 130); a second signal exits at once without a report. probe pid: report the interval so far and exit 130.",
                )],
            ),
            section(
                "EXIT STATUS",
                &[
                    (
                        "0",
                        "The run finished (probe pid: also when the process exited).",
                    ),
                    EXIT_FAILED,
                    (
                        "2",
                        "Bad input: an invalid option, a PID that names no process, a real-time policy without the privilege, a --load-cmd that fails at once.",
                    ),
                    EXIT_INTERRUPTED,
                ],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[
                    (
                        "/proc/PID/task/TID/schedstat, /proc/PID/task/TID/stat",
                        "Run-queue wait and context switches of each thread.",
                    ),
                    (
                        "/proc/pressure/cpu",
                        "CPU pressure (probe pid), when the kernel has PSI.",
                    ),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo probe loop --compare --cpu 1 --load 2 --buckets 11,18,24,50,75",
                        "Seed 004: the loop quiet and loaded, side by side.",
                    ),
                    (
                        "ordo probe pid \"$(pgrep -o nginx)\" --interval 1s --duration 10s",
                        "Per-thread CPU, switches and run-queue wait of a running process.",
                    ),
                ],
            ),
        ],
        "report" => vec![
            section(
                "EXIT STATUS",
                &[
                    ("0", "The report was written."),
                    ("1", "It could not be written."),
                    (
                        "2",
                        "An input that cannot be read, is not an ordo result, or has a version this ordo does not read; nothing is written.",
                    ),
                ],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[
                    (
                        "INPUT",
                        "JSON results of ordo demo, ordo bench --json and ordo probe --json, or ordo tune SQLite stores.",
                    ),
                    (
                        "-o FILE",
                        "The HTML page (self-contained: no scripts, no network).",
                    ),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo report examples/report/tune-6.8.db examples/report/tune-6.12.db -o report.html",
                        "Two kernels' runs of one experiment, side by side.",
                    ),
                    (
                        "ordo report --text examples/report/bench-mix.json",
                        "The same summaries as terminal tables.",
                    ),
                ],
            ),
        ],
        "demo" => vec![
            section(
                "SIGNALS",
                &[(
                    "SIGINT, SIGTERM",
                    "Drop the step in progress; the finished steps are printed and saved, marked \"complete\": false, and the exit status is 130. A second signal quits at once without saving.",
                )],
            ),
            section(
                "EXIT STATUS",
                &[
                    (
                        "0",
                        "The run completed, whatever the verdict (the verdict is a measurement).",
                    ),
                    ("1", "The server or the load generator failed."),
                    ("2", "A bad option (the message names it)."),
                    EXIT_INTERRUPTED,
                ],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[(
                    "ordo-results/demo-POLICY-TIME.json, .html",
                    "The result and its report (--out DIR).",
                )],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo demo",
                        "The seed's figure with lottery: light/heavy 4 and medium/heavy 2 within 5% (about 3 minutes).",
                    ),
                    (
                        "ordo demo --policy stride --quick",
                        "The deterministic policy, short plan (about 30 s).",
                    ),
                ],
            ),
        ],
        "completions" => vec![
            section(
                "EXIT STATUS",
                &[("0", "The script was printed."), ("2", "An unknown shell.")],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[
                    (
                        "/etc/bash_completion.d/ordo, /usr/share/bash-completion/completions/ordo",
                        "Where bash looks.",
                    ),
                    ("~/.config/fish/completions/ordo.fish", "Where fish looks."),
                    ("a directory in $fpath, file _ordo", "Where zsh looks."),
                ],
            ),
            section(
                "EXAMPLES",
                &[
                    (
                        "ordo completions bash > /usr/share/bash-completion/completions/ordo",
                        "bash, system-wide.",
                    ),
                    ("ordo completions zsh > \"${fpath[1]}/_ordo\"", "zsh."),
                    (
                        "ordo completions fish > ~/.config/fish/completions/ordo.fish",
                        "fish.",
                    ),
                ],
            ),
        ],
        "man" => vec![
            section(
                "EXIT STATUS",
                &[
                    ("0", "The pages were written."),
                    ("1", "A page could not be written."),
                ],
            ),
            section("ENVIRONMENT", &[ORDO_LOG]),
            section(
                "FILES",
                &[(
                    "DIR/man1/ordo*.1, DIR/man5/ordo-serve.toml.5",
                    "What --dir DIR writes.",
                )],
            ),
            section(
                "EXAMPLES",
                &[
                    ("ordo man | man -l -", "Read ordo(1) without installing it."),
                    (
                        "sudo ordo man --dir /usr/local/share/man && man ordo-serve.toml",
                        "Install every page.",
                    ),
                ],
            ),
        ],
        _ => Vec::new(),
    }
}

/// Text for roff: backslashes and hyphens escaped, apostrophes as the `Aq` string clap_mangen's preamble
/// defines, no line starting with a control character.
pub fn roff_escape(text: &str) -> String {
    let s = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('\'', "\\*(Aq");
    s.lines()
        .map(|l| {
            if l.starts_with('.') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sections as roff.
pub fn render_sections(sections: &[Section]) -> String {
    let mut out = String::new();
    for s in sections {
        out.push_str(&format!(".SH \"{}\"\n", s.title));
        for (term, text) in &s.entries {
            if term.is_empty() {
                out.push_str(&format!(".PP\n{}\n", roff_escape(text)));
            } else {
                out.push_str(&format!(
                    ".TP\n\\fB{}\\fR\n{}\n",
                    roff_escape(term),
                    roff_escape(text)
                ));
            }
        }
    }
    out
}

/// docs/serve.md, whose "Configuration reference" section is ordo-serve.toml(5).
const SERVE_DOC: &str = include_str!("../../docs/serve.md");

/// ordo-serve.toml(5): docs/serve.md's configuration reference (from its `## Configuration reference` to
/// the next `## ` heading) as a man page: headings become sections, tables become tagged paragraphs (key,
/// default, text), code blocks stay as written, links keep their text.
pub fn serve_toml_page(version: &str) -> String {
    let mut out = format!(
        ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH ordo\\-serve.toml 5 \"\" \"ordo {}\"\n.SH NAME\nordo\\-serve.toml \\- configuration file of ordo serve\n\
         .SH SYNOPSIS\n\\fBordo serve \\-\\-config\\fR \\fIFILE\\fR\n.br\n\\fBordo serve \\-t\\fR \\fIFILE\\fR\n\
         .SH DESCRIPTION\n",
        roff_escape(version)
    );
    let start = SERVE_DOC
        .find("\n## Configuration reference")
        .map_or(0, |i| i + 1);
    let body = &SERVE_DOC[start..];
    let body = body[1..].find("\n## ").map_or(body, |end| &body[..end + 1]);
    markdown_to_roff(body.lines().skip(1), &mut out);
    // `[lua]`'s keys are documented with the sandbox they limit
    if let Some(at) = SERVE_DOC.find("\nLimits (`[lua]`") {
        out.push_str(".SH \"[lua] keys (the Lua sandbox)\"\n");
        let table = SERVE_DOC[at + 1..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'));
        markdown_to_roff(table, &mut out);
    }
    out.push_str(
        ".SH \"SEE ALSO\"\nordo\\-serve(1), ordo(1); docs/serve.md and docs/overload.md in the source tree\n",
    );
    out
}

/// Markdown lines (headings, paragraphs, tables, code blocks) as roff, appended to `out`.
fn markdown_to_roff<'a>(lines: impl Iterator<Item = &'a str>, out: &mut String) {
    let mut in_code = false;
    let mut paragraph = false;
    for line in lines {
        if line.starts_with("```") {
            in_code = !in_code;
            out.push_str(if in_code {
                ".PP\n.RS 4\n.nf\n"
            } else {
                ".fi\n.RE\n"
            });
            paragraph = false;
            continue;
        }
        if in_code {
            out.push_str(&roff_escape(line));
            out.push('\n');
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            out.push_str(&format!(".SH \"{}\"\n", roff_escape(&inline(h))));
            paragraph = false;
        } else if let Some(row) = line.strip_prefix('|') {
            let cells: Vec<&str> = row
                .trim_end_matches('|')
                .split(" | ")
                .map(str::trim)
                .collect();
            // the header row and the |---| line say nothing a reader of the page needs
            if cells
                .iter()
                .all(|c| c.chars().all(|ch| ch == '-' || ch == '|'))
                || cells.first().is_some_and(|c| !c.starts_with('`'))
            {
                continue;
            }
            let key = inline(cells[0]);
            let (default, text) = match cells.len() {
                0 | 1 => (None, String::new()),
                2 => (None, inline(cells[1])),
                _ => (Some(inline(cells[1])), inline(&cells[2..].join(" | "))),
            };
            out.push_str(&format!(".TP\n\\fB{}\\fR", roff_escape(&key)));
            if let Some(d) = default.filter(|d| !d.is_empty() && d != "—") {
                out.push_str(&format!(" (default: {})", roff_escape(&d)));
            }
            out.push_str(&format!("\n{}\n", roff_escape(&text)));
            paragraph = false;
        } else if line.trim().is_empty() {
            paragraph = false;
        } else {
            if !paragraph {
                out.push_str(".PP\n");
                paragraph = true;
            }
            out.push_str(&roff_escape(&inline(line)));
            out.push('\n');
        }
    }
}

/// Markdown inline text as plain text: `[text](link)` → text, backticks and bold marks dropped.
/// (A link inside a code span is not one: `[[classes]]`.)
fn inline(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").and_then(|m| {
            let close = after[m + 2..].find(')')?;
            Some((m, m + 2 + close))
        }) {
            Some((m, end)) if !after[..m].contains('[') => {
                out.push_str(&after[..m]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    // bold marks outside code spans go; code (`"/img/**/*.png"`) stays as written, without its backticks
    out.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace("**", "")
            } else {
                part.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_inline_becomes_plain_text() {
        assert_eq!(
            inline("see [policies](policies.md) and `[limiter]` ([overload.md](overload.md))"),
            "see policies and [limiter] (overload.md)"
        );
        assert_eq!(
            inline("**Reload**: `*` does not cross `/`, `**` does (`\"/img/**/*.png\"`)"),
            "Reload: * does not cross /, ** does (\"/img/**/*.png\")"
        );
        assert_eq!(
            inline("`[[tls.certificates]]` tables"),
            "[[tls.certificates]] tables"
        );
    }

    #[test]
    fn roff_text_is_escaped() {
        assert_eq!(roff_escape("-t"), "\\-t");
        assert_eq!(roff_escape(".hidden\\x"), "\\&.hidden\\ex");
        assert_eq!(roff_escape("it's"), "it\\*(Aqs");
        let mut out = String::new();
        markdown_to_roff(
            [
                "| key | default | meaning |",
                "|---|---|---|",
                "| `a` | `1` | the a |",
                "| `b` | — | the b |",
            ]
            .into_iter(),
            &mut out,
        );
        assert_eq!(
            out,
            ".TP\n\\fBa\\fR (default: 1)\nthe a\n.TP\n\\fBb\\fR\nthe b\n"
        );
    }
}
