//! `ordo serve`: command-line arguments and glue to the ordo-serve library (config, overrides, runtime,
//! signals, exit codes).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ordo_serve::{Overrides, PolicyKind, ServeConfig, Server, StartError, Workers};

use crate::exit::UsageError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Configuration file (TOML; see docs/serve.md). Without one: synthetic backend on 127.0.0.1:8080, fcfs.
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only validate the configuration and exit: 0 when it is valid, 2 with the file, line and key when it
    /// is not. `-t FILE`, or `-t` with `--config FILE` (nginx's `-t -c`); with neither, the defaults and
    /// flags are checked.
    #[arg(short = 't', long, value_name = "FILE", num_args = 0..=1)]
    pub check: Option<Option<PathBuf>>,
    /// Listen address (overrides `listen`).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Requests served at once, or `auto`: a limit per route that follows its backend's latency
    /// (overrides `workers`).
    #[arg(long, value_name = "N|auto", value_parser = parse_workers)]
    pub workers: Option<Workers>,
    /// Dispatch policy (overrides `policy`).
    #[arg(long, value_name = "NAME", value_parser = crate::values::serve_policy())]
    pub policy: Option<PolicyKind>,
    /// Lua script defining `pick(heads)` for `--policy lua` (overrides `policy_script`; relative to the
    /// current directory).
    #[arg(long, value_name = "PATH")]
    pub policy_script: Option<PathBuf>,
    /// Serving threads (each with its own runtime and listener), 0 = one per CPU (overrides `threads`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub threads: Option<u64>,
    /// Admin listener address, or `off` (overrides `[admin]`).
    #[arg(long, value_name = "ADDR|off", value_parser = parse_admin)]
    pub admin: Option<AdminArg>,
    /// After SIGTERM/SIGINT, how long in-flight requests may take (e.g. 30s, 500ms) before the connections
    /// still open are closed (overrides `shutdown_grace`). A second signal ends it at once; the exit status
    /// is 0 either way.
    #[arg(long, value_name = "DURATION", value_parser = ordo_sys::units::parse_duration)]
    pub shutdown_grace: Option<std::time::Duration>,
}

/// `--admin ADDR` or `--admin off`.
#[derive(Debug, Clone, Copy)]
pub enum AdminArg {
    Off,
    On(SocketAddr),
}

fn parse_workers(s: &str) -> Result<Workers, String> {
    match s.parse()? {
        Workers::Fixed(n) if n > 1_000_000 => Err(format!("{n} is over 1000000")),
        w => Ok(w),
    }
}

fn parse_admin(s: &str) -> Result<AdminArg, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(AdminArg::Off);
    }
    s.parse()
        .map(AdminArg::On)
        .map_err(|_| format!("expected an address like 127.0.0.1:9090 or `off`, got `{s}`"))
}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(e.to_string()))
}

/// The checked configuration: file (or defaults) plus overrides, validated.
fn resolve(args: &Args) -> anyhow::Result<ServeConfig> {
    resolve_file(args, args.config.as_deref())
}

/// [`resolve`] for a given file: `--check FILE` validates exactly what `--config FILE` with the same
/// overrides would start. The file with the flags applied is validated once: errors in the file name its
/// line and key, errors at a key a flag set name the flag.
fn resolve_file(args: &Args, file: Option<&std::path::Path>) -> anyhow::Result<ServeConfig> {
    // A path on the command line is relative to where the command runs, not to the file's directory.
    let policy_script = match &args.policy_script {
        Some(p) => Some(
            std::path::absolute(p)
                .map_err(|e| usage(format!("--policy-script {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let overrides = Overrides {
        listen: args.listen,
        workers: args.workers,
        policy: args.policy,
        policy_script,
        threads: args.threads.map(|t| t as usize),
        admin: args.admin.map(|a| match a {
            AdminArg::Off => None,
            AdminArg::On(addr) => Some(addr),
        }),
        shutdown_grace: args.shutdown_grace,
    };
    let cfg = match file {
        Some(p) => ServeConfig::from_file_with(p, overrides).map_err(usage)?,
        None => {
            let mut cfg = ServeConfig::default();
            cfg.apply_overrides(overrides);
            cfg.validate().map_err(usage)?;
            cfg
        }
    };
    Ok(cfg)
}

/// A listener that cannot bind names the flag its address came from (`--listen`, `--admin`) rather than the
/// config key.
fn name_bind_flag(
    e: StartError,
    listen: &Option<SocketAddr>,
    admin: &Option<AdminArg>,
) -> anyhow::Error {
    match e {
        StartError::Bind { key, addr, error } => {
            let flag = match (key, listen, admin) {
                ("listen", Some(_), _) => Some("--listen"),
                ("admin.listen", _, Some(AdminArg::On(_))) => Some("--admin"),
                _ => None,
            };
            match flag {
                Some(f) => anyhow::anyhow!("cannot listen on {addr} ({f} {addr}): {error}"),
                None => anyhow::Error::new(StartError::Bind { key, addr, error }),
            }
        }
        e => anyhow::Error::new(e),
    }
}

/// "1 class", "3 classes".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The file `--check`/`-t` validates: its own value, or `--config`'s (`-t -c FILE`); naming two is refused.
fn check_target(args: &Args) -> anyhow::Result<Option<Option<&std::path::Path>>> {
    Ok(match (&args.check, &args.config) {
        (None, _) => None,
        (Some(Some(f)), Some(c)) if f != c => {
            return Err(usage(format!(
                "--check {} and --config {}: name the file to check once (`-t FILE` or `-t -c FILE`)",
                f.display(),
                c.display()
            )));
        }
        (Some(Some(f)), _) => Some(Some(f.as_path())),
        (Some(None), c) => Some(c.as_deref()),
    })
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(file) = check_target(&args)? {
        let cfg = resolve_file(&args, file)?;
        eprintln!(
            "{}: ok (policy {}, {}, {}, {}, {})",
            file.map_or_else(|| "defaults".to_string(), |p| p.display().to_string()),
            ordo_serve::policy_name(cfg.policy),
            count(cfg.class_names().len(), "class", "classes"),
            count(cfg.rules.len(), "rule", "rules"),
            count(cfg.effective_routes().len(), "route", "routes"),
            match (cfg.workers, cfg.workers_limit()) {
                (Workers::PerThread(per), Some(n)) => format!(
                    "{} ({per} per serving thread × {})",
                    count(n, "worker", "workers"),
                    count(cfg.serving_threads(), "thread", "threads")
                ),
                (_, Some(n)) => count(n, "worker", "workers"),
                (_, None) => "workers auto".to_string(),
            },
        );
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = resolve(&args)?;
    let (args_listen, args_admin) = (args.listen, args.admin);
    // nginx-style: `threads` serving threads (0: one per CPU), each a current-thread runtime with its own
    // SO_REUSEPORT listener, so accepting, serving and timers of a connection stay on one thread with no
    // hand-offs. This thread is the first; the server starts the others.
    let threads = cfg.serving_threads();
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all().thread_name("ordo-serve");
    let rt = ordo_serve::coalesce_wakeups(&mut builder, cfg.coalesce)
        .build()
        .context("cannot start the tokio runtime")?;
    rt.block_on(async move {
        let handle = match Server::start_threads(cfg, threads).await {
            Ok(h) => h,
            Err(StartError::Config(e)) => return Err(usage(e)),
            Err(e) => {
                return Err(name_bind_flag(e, &args_listen, &args_admin));
            }
        };
        handle
            .run_until_signalled_with(|h| {
                let main = match h.tls_addr() {
                    Some(t) if t == h.local_addr() => format!("https://{t}"),
                    Some(t) => format!("http://{} and https://{t}", h.local_addr()),
                    None => format!("http://{}", h.local_addr()),
                };
                match h.admin_addr() {
                    Some(a) => eprintln!("listening on {main} (admin http://{a})"),
                    None => eprintln!("listening on {main} (admin off)"),
                }
            })
            .await
            .context("serving failed")?;
        tracing::info!("shut down cleanly");
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_arg_parses_off_and_addresses() {
        assert!(matches!(parse_admin("off"), Ok(AdminArg::Off)));
        assert!(matches!(parse_admin("127.0.0.1:9"), Ok(AdminArg::On(_))));
        assert!(parse_admin("nowhere").is_err());
    }

    #[test]
    fn check_applies_the_overrides_start_up_would() {
        let dir = env!("CARGO_MANIFEST_DIR");
        let lua = format!("{dir}/examples/serve/lua-policy.toml");
        let args = |extra: &[&str]| {
            let mut v = vec!["--check", lua.as_str()];
            v.extend_from_slice(extra);
            crate::cmd::parse_args::<Args>("serve", &v).unwrap()
        };
        let a = args(&[]);
        let cfg = resolve_file(&a, check_target(&a).unwrap().unwrap()).unwrap();
        assert_eq!(cfg.policy, PolicyKind::Custom);
        // the file plus --policy fcfs cannot start (its policy_script needs policy lua): --check says so
        let a = args(&["--policy", "fcfs", "--workers", "3"]);
        let e = resolve_file(&a, check_target(&a).unwrap().unwrap()).unwrap_err();
        assert_eq!(crate::exit::exit_code_for(&e), 2, "{e:#}");
        assert!(format!("{e:#}").contains("policy_script"), "{e:#}");
        let a = args(&["--workers", "3"]);
        assert_eq!(
            resolve_file(&a, check_target(&a).unwrap().unwrap())
                .unwrap()
                .workers,
            Workers::Fixed(3)
        );
        let a = args(&["--workers", "auto"]);
        assert_eq!(
            resolve_file(&a, check_target(&a).unwrap().unwrap())
                .unwrap()
                .workers,
            Workers::Auto
        );
    }

    #[test]
    fn t_is_check_with_its_own_file_or_configs() {
        // (the first word is the subcommand's name, as on the command line)
        let parse = |v: &[&str]| crate::cmd::parse_args::<Args>("serve", &v[1..]).unwrap();
        let target = |a: &Args| {
            check_target(a)
                .map(|t| t.map(|f| f.map(|p| p.display().to_string())))
                .map_err(|e| format!("{e:#}"))
        };
        let file = |s: &str| Ok(Some(Some(s.to_string())));
        assert_eq!(target(&parse(&["serve", "-t", "a.toml"])), file("a.toml"));
        assert_eq!(
            target(&parse(&["serve", "--check", "a.toml"])),
            file("a.toml")
        );
        assert_eq!(
            target(&parse(&["serve", "-t", "-c", "b.toml"])),
            file("b.toml")
        );
        assert_eq!(
            target(&parse(&["serve", "--config", "b.toml", "-t"])),
            file("b.toml")
        );
        assert_eq!(target(&parse(&["serve", "-t"])), Ok(Some(None)));
        assert_eq!(target(&parse(&["serve", "-c", "b.toml"])), Ok(None));
        let e = target(&parse(&["serve", "-t", "a.toml", "-c", "b.toml"])).unwrap_err();
        assert!(e.contains("name the file to check once"), "{e}");
        // the same file twice is no conflict
        assert_eq!(
            target(&parse(&["serve", "-t", "a.toml", "-c", "a.toml"])),
            file("a.toml")
        );
    }

    #[test]
    fn workers_arg_is_a_number_or_auto() {
        assert_eq!(parse_workers("auto"), Ok(Workers::Auto));
        assert_eq!(parse_workers("8"), Ok(Workers::Fixed(8)));
        assert!(parse_workers("0").unwrap_err().contains("auto"));
        assert!(parse_workers("2000000").is_err());
    }

    #[test]
    fn policy_arg_names_the_choices() {
        assert_eq!(ordo_serve::parse_policy("stride"), Ok(PolicyKind::Stride));
        assert!(
            ordo_serve::parse_policy("random")
                .unwrap_err()
                .contains("fcfs")
        );
    }
}
