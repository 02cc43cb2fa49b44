//! Top-level command line: the subcommand enum, its dispatch to the glue in `cmd/`, and logging set-up.
//! Each subcommand's own `Args` lives beside its glue in `cmd/<name>.rs` (cmd never imports this module:
//! the man page and completions get the clap definitions passed in).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cmd;

/// Scheduling for web services, from the request queue down to the kernel.
#[derive(Debug, Parser)]
#[command(name = "ordo", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only warnings and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the request-scheduling HTTP front end.
    Serve(cmd::serve::Args),
    /// Generate HTTP load (closed or open loop, class mixes) and report honest latency.
    Bench(Box<cmd::bench::Args>),
    /// Run OS-scheduler experiments that always restore the machine.
    Tune(cmd::tune::Args),
    /// Measure context switches and run-queue delay.
    Probe(cmd::probe::Args),
    /// Render results as a self-contained HTML page or terminal tables.
    Report(cmd::report::Args),
    /// Reproduce the request-scheduling result of seed 003 on localhost.
    Demo(cmd::demo::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::docs::CompletionsArgs),
    /// Print a man page (ordo(1) by default; ordo-serve.toml(5) for the config file), or write them all with --dir.
    Man(cmd::docs::ManArgs),
}

impl Command {
    /// Run the subcommand.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Serve(a) => cmd::serve::run(a),
            Command::Bench(a) => cmd::bench::run(*a),
            Command::Tune(a) => cmd::tune::run(a),
            Command::Probe(a) => cmd::probe::run(a),
            Command::Report(a) => cmd::report::run(a),
            Command::Demo(a) => cmd::demo::run(a),
            Command::Completions(a) => cmd::docs::completions(a, Cli::command()),
            Command::Man(a) => cmd::docs::man(a, Cli::command()),
        }
    }
}

/// Log to stderr; `ORDO_LOG` (an `EnvFilter` directive) overrides the flags.
pub fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ORDO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn man_pages_and_completions_render() {
        let mut cmd = Cli::command();
        cmd.build();
        let page = String::from_utf8(cmd::docs::render(cmd.clone(), "ordo").unwrap()).unwrap();
        assert!(
            page.contains(".TH ordo 1") && page.contains("serve"),
            "{page}"
        );
        let serve = cmd
            .find_subcommand("serve")
            .unwrap()
            .clone()
            .name("ordo-serve");
        let page = String::from_utf8(cmd::docs::render(serve, "serve").unwrap()).unwrap();
        assert!(
            page.contains("ordo\\-serve") && page.contains("\\-\\-check"),
            "{page}"
        );
        let mut out = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "ordo", &mut out);
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("--cacert") && script.contains("completions"));
    }

    #[test]
    fn every_man_page_has_the_operator_sections() {
        let pages = cmd::docs::pages(Cli::command()).unwrap();
        let names: Vec<&str> = pages.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "ordo.1",
                "ordo-serve.1",
                "ordo-bench.1",
                "ordo-tune.1",
                "ordo-probe.1",
                "ordo-report.1",
                "ordo-demo.1",
                "ordo-completions.1",
                "ordo-man.1",
                "ordo-serve.toml.5"
            ]
        );
        let long_running = [
            "ordo.1",
            "ordo-serve.1",
            "ordo-bench.1",
            "ordo-tune.1",
            "ordo-probe.1",
            "ordo-demo.1",
        ];
        for (file, dir, text) in &pages {
            let text = String::from_utf8(text.clone()).unwrap();
            if file.ends_with(".5") {
                assert_eq!(*dir, "man5");
                continue;
            }
            assert_eq!(*dir, "man1");
            let mut want = vec!["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"];
            if long_running.contains(&file.as_str()) {
                want.push("SIGNALS");
            }
            for s in want {
                assert!(text.contains(&format!(".SH \"{s}\"\n")), "{file}: no {s}");
            }
            // the sections come before VERSION, each once, and ORDO_LOG is on every page
            let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{file}: no {s}"));
            assert!(at(".SH \"EXIT STATUS\"") < at(".SH VERSION"), "{file}");
            assert_eq!(text.matches(".SH \"EXAMPLES\"").count(), 1, "{file}");
            assert!(text.contains("ORDO_LOG"), "{file}");
            // the after-help "Examples:" is not printed twice
            assert!(!text.contains("Examples:"), "{file}");
        }
        let serve = String::from_utf8(pages[1].2.clone()).unwrap();
        for s in [
            "SIGHUP",
            "SIGUSR1",
            "SIGTERM, SIGINT",
            "NOTIFY_SOCKET",
            "ordo serve \\-t",
        ] {
            assert!(serve.contains(s), "ordo-serve.1 lacks {s}");
        }
    }

    /// Every `env::var("X")`, `env::var_os("X")` and `try_from_env("X")` in the workspace's sources.
    fn environment_read(dir: &std::path::Path, found: &mut std::collections::BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                environment_read(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for call in ["env::var(\"", "env::var_os(\"", "try_from_env(\""] {
                    for (at, _) in text.match_indices(call) {
                        let rest = &text[at + call.len()..];
                        found.insert(rest[..rest.find('"').unwrap()].to_string());
                    }
                }
            }
        }
    }

    #[test]
    fn man_pages_name_every_environment_variable_ordo_reads() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = std::collections::BTreeSet::new();
        environment_read(&root.join("src"), &mut found);
        for krate in std::fs::read_dir(root.join("crates")).unwrap() {
            let krate = krate.unwrap().path();
            // the tests' own kit (its ORDO_FUZZ_* settings) is not part of the binary
            if krate.ends_with("testkit") {
                continue;
            }
            let src = krate.join("src");
            if src.is_dir() {
                environment_read(&src, &mut found);
            }
        }
        assert!(
            found.contains("ORDO_LOG") && found.contains("NOTIFY_SOCKET"),
            "{found:?}"
        );
        let pages: String = cmd::docs::pages(Cli::command())
            .unwrap()
            .into_iter()
            .map(|p| String::from_utf8(p.2).unwrap())
            .collect();
        for var in found {
            let section = pages.split(".SH \"ENVIRONMENT\"").skip(1).any(|s| {
                s.split(".SH ")
                    .next()
                    .unwrap()
                    .contains(&format!("\\fB{var}"))
            });
            assert!(
                section,
                "no man page's ENVIRONMENT names {var}, which ordo reads"
            );
        }
    }

    /// The top-level keys the serve config parser accepts, as its own error lists them.
    fn serve_config_keys() -> Vec<String> {
        let e = ordo_serve::ServeConfig::from_toml_str(
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx = 1\n",
            "c.toml",
        )
        .unwrap_err()
        .to_string();
        let list = e
            .split("(expected one of: ")
            .nth(1)
            .and_then(|l| l.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{e}"));
        list.split(", ").map(String::from).collect()
    }

    #[test]
    fn serve_toml_page_names_every_top_level_key() {
        let pages = cmd::docs::pages(Cli::command()).unwrap();
        let page = String::from_utf8(pages.last().unwrap().2.clone()).unwrap();
        assert!(page.contains(".TH ordo\\-serve.toml 5"), "{page}");
        let keys = serve_config_keys();
        assert!(
            keys.len() >= 20 && keys.contains(&"http2".to_string()),
            "{keys:?}"
        );
        for key in &keys {
            let named = page.contains(&format!(".TP\n\\fB{key}\\fR"))
                || page.contains(&format!(".SH \"[{key}]"))
                || page.contains(&format!(".SH \"[[{key}]]"));
            assert!(
                named,
                "ordo-serve.toml(5) (docs/serve.md's configuration reference) lacks `{key}`"
            );
        }
        // a table's keys are there too, with their defaults, and [lua]'s from the sandbox's table
        assert!(
            page.contains(".TP\n\\fBmemory_limit\\fR (default: 16777216)"),
            "{page}"
        );
        assert!(
            page.contains(".TP\n\\fBmax_head_bytes\\fR (default: 16384)"),
            "{page}"
        );
        // nothing of the markdown is left
        assert!(!page.contains("](") && !page.contains("|---"), "{page}");
    }

    /// The words bash completes after `opt` in the case arm of subcommand `sub` (`ordo__subcmd__serve`).
    fn bash_words(script: &str, sub: &str, opt: &str) -> Vec<String> {
        let arm = script
            .split(&format!(" {sub})"))
            .nth(1)
            .unwrap_or_else(|| panic!("no arm {sub}"));
        let after = arm
            .split(&format!("{opt})"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {opt} in {sub}"));
        let line = after
            .lines()
            .find(|l| l.contains("compgen"))
            .unwrap_or_else(|| panic!("no compgen after {opt}"));
        let words = line
            .split("-W \"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        words.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn enum_options_complete_their_values() {
        let mut cmd = Cli::command();
        let mut out = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "ordo", &mut out);
        let script = String::from_utf8(out).unwrap();
        // every policy ordo-sched has, as serve spells it (the custom one is `lua`)
        let serve = bash_words(&script, "ordo__subcmd__serve", "--policy");
        assert_eq!(serve.len(), ordo_serve::PolicyKind::ALL.len(), "{serve:?}");
        for p in ordo_serve::PolicyKind::ALL {
            assert!(
                serve.contains(&ordo_serve::policy_name(p).to_string()),
                "{serve:?}"
            );
        }
        assert!(serve.contains(&"lua".to_string()) && serve.contains(&"stride".to_string()));
        assert_eq!(
            bash_words(&script, "ordo__subcmd__demo", "--policy"),
            ["lottery", "stride"]
        );
        assert_eq!(
            bash_words(&script, "ordo__subcmd__probe__subcmd__loop", "--policy"),
            ["other", "batch", "idle"]
        );
        assert_eq!(
            bash_words(&script, "ordo__subcmd__tune__subcmd__export", "--format"),
            ["csv", "json"]
        );
        // `-t` is `--check`, and takes a file
        let serve_opts = script
            .split(" ordo__subcmd__serve)")
            .nth(1)
            .and_then(|a| a.lines().find(|l| l.contains("opts=")))
            .unwrap();
        assert!(
            serve_opts.contains(" -t ") && serve_opts.contains("--check"),
            "{serve_opts}"
        );
    }
}
