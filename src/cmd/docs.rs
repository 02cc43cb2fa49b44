//! `ordo completions SHELL` and `ordo man`: shell completion scripts and man pages generated from the clap
//! definitions at run time, so they always match the binary (no build script, nothing to keep in sync);
//! the pages' other sections and ordo-serve.toml(5) come from `manual`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::manual;
use crate::exit::UsageError;

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
pub struct ManArgs {
    /// The page to print: ordo (the default), ordo-serve, ordo-bench, ... or ordo-serve.toml (the
    /// configuration file, section 5).
    #[arg(value_name = "PAGE", conflicts_with = "dir")]
    pub page: Option<String>,
    /// Write every page into DIR/man1 (ordo.1, ordo-serve.1, ...) and DIR/man5 (ordo-serve.toml.5) instead of
    /// printing one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Print the completion script of `cmd` (the whole `ordo` command).
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    clap_complete::generate(args.shell, &mut cmd, "ordo", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// The man page of `cmd` (`page`: `ordo`, or the subcommand's name): clap's sections (name, synopsis,
/// description, options, subcommands, version) with [`manual::sections`] before the version.
pub(crate) fn render(cmd: clap::Command, page: &str) -> anyhow::Result<Vec<u8>> {
    let extra = manual::sections(page);
    // the page's EXAMPLES replace the after-help examples clap would print as an extra section
    let cmd = if extra.iter().any(|s| s.title == "EXAMPLES") {
        cmd.after_help(None::<&str>)
    } else {
        cmd
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .context("rendering the man page")?;
    let text = String::from_utf8(out).context("the man page is not UTF-8")?;
    let extra = manual::render_sections(&extra);
    let at = text.find("\n.SH VERSION").map_or(text.len(), |i| i + 1);
    Ok(format!("{}{extra}{}", &text[..at], &text[at..]).into_bytes())
}

/// Every page: (file name, section directory, roff text).
pub(crate) fn pages(
    mut cmd: clap::Command,
) -> anyhow::Result<Vec<(String, &'static str, Vec<u8>)>> {
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_string();
    let mut pages = vec![("ordo.1".to_string(), "man1", render(cmd.clone(), "ordo")?)];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        // the page of `ordo serve` is ordo-serve(1), its title `ordo-serve`
        let name = format!("ordo-{}", sub.get_name());
        let page = sub
            .clone()
            .name(name.clone())
            .bin_name(format!("ordo {}", sub.get_name()));
        pages.push((format!("{name}.1"), "man1", render(page, sub.get_name())?));
    }
    pages.push((
        "ordo-serve.toml.5".to_string(),
        "man5",
        manual::serve_toml_page(&version).into_bytes(),
    ));
    Ok(pages)
}

/// Print one page, or write every page, of `cmd` (the whole `ordo` command).
pub fn man(args: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let pages = pages(cmd)?;
    let Some(dir) = args.dir else {
        let want = args.page.as_deref().unwrap_or("ordo");
        let want = want.trim_end_matches(".1").trim_end_matches(".5");
        let Some((_, _, text)) = pages.iter().find(|(file, _, _)| {
            file.rsplit_once('.')
                .is_some_and(|(stem, _)| stem == want || stem == format!("ordo-{want}"))
        }) else {
            let names: Vec<&str> = pages
                .iter()
                .filter_map(|(f, _, _)| f.rsplit_once('.').map(|(stem, _)| stem))
                .collect();
            return Err(anyhow::Error::new(UsageError(format!(
                "no man page `{want}` (there are {})",
                names.join(", ")
            ))));
        };
        std::io::stdout().write_all(text)?;
        return Ok(ExitCode::SUCCESS);
    };
    for (file, section, text) in pages {
        let sub = dir.join(section);
        std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        let path = sub.join(&file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
