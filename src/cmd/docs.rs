//! `ordo completions SHELL` and `ordo man`: shell completion scripts and man pages generated from the clap
//! definitions at run time, so they always match the binary (no build script, nothing to keep in sync).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  ordo completions bash > /etc/bash_completion.d/ordo\n  \
    ordo completions zsh > \"${fpath[1]}/_ordo\"\n  \
    ordo completions fish > ~/.config/fish/completions/ordo.fish"
)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  ordo man | man -l -\n  \
    ordo man --dir /usr/local/share/man/man1")]
pub struct ManArgs {
    /// Write ordo.1 and one page per subcommand (ordo-serve.1, ...) into DIR instead of printing ordo.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Print the completion script of `cmd` (the whole `ordo` command).
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    clap_complete::generate(args.shell, &mut cmd, "ordo", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn render(cmd: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .context("rendering the man page")?;
    Ok(out)
}

/// Print (or write, one per subcommand) the man pages of `cmd` (the whole `ordo` command).
pub fn man(args: ManArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    cmd.build();
    let Some(dir) = args.dir else {
        std::io::stdout().write_all(&render(cmd)?)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pages = vec![("ordo.1".to_string(), render(cmd.clone())?)];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        // the page of `ordo serve` is ordo-serve(1), its title `ordo-serve`
        let name = format!("ordo-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("ordo {}", sub.get_name()));
        pages.push((format!("{name}.1"), render(page)?));
    }
    for (file, text) in pages {
        let path = dir.join(&file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
