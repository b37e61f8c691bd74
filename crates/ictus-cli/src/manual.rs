//! `ictus completions SHELL` and `ictus man`, and `docs/cli.md`: the shell's
//! completions, the man pages and the CLI reference, each made from the command line
//! the parser uses ([`crate::args::command`]), so none can drift from it.

use std::path::Path;

use crate::Failure;
use crate::args::{CompletionsArgs, ManArgs};

/// Prints the completion script of `args.shell` on stdout.
pub(crate) fn completions(args: &CompletionsArgs) -> Result<(), Failure> {
    let mut cmd = crate::args::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "ictus", &mut script);
    crate::say(&String::from_utf8(script)?)
}

/// Writes every page into `--out`, naming each written, or prints ictus(1).
pub(crate) fn man(args: &ManArgs) -> Result<(), Failure> {
    let cmd = crate::args::command();
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| {
                    anyhow::Error::new(e).context(format!("{}: cannot create", dir.display()))
                })
                .map_err(Failure::usage)?;
            let pages = write_pages(cmd, dir).map_err(|e| {
                anyhow::Error::new(e)
                    .context(format!("writing the man pages into {}", dir.display()))
            })?;
            crate::say(&format!("{} man pages in {}\n", pages, dir.display()))
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page)?;
            crate::say(&String::from_utf8(page)?)
        }
    }
}

/// Writes a page for `cmd` and each visible command below it into `dir`; returns how
/// many.
fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<usize> {
    clap_mangen::generate_to(cmd.clone(), dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    Ok(visible(&cmd).len())
}

/// `cmd` and every visible command below it, depth first, with their full paths
/// (`["ictus", "probe", "timer"]`).
fn visible(cmd: &clap::Command) -> Vec<(Vec<String>, &clap::Command)> {
    fn walk<'a>(
        cmd: &'a clap::Command,
        path: Vec<String>,
        out: &mut Vec<(Vec<String>, &'a clap::Command)>,
    ) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() == "help" {
                continue;
            }
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            out.push((p.clone(), sub));
            walk(sub, p, out);
        }
    }
    let mut out = vec![(vec![cmd.get_name().to_string()], cmd)];
    walk(cmd, vec![cmd.get_name().to_string()], &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    /// The width `docs/cli.md`'s help texts are wrapped at, whatever the terminal.
    const DOC_WIDTH: usize = 100;

    /// `docs/cli.md`: each command's `--help`, as `ictus ... --help` prints it (at a
    /// fixed width), under a heading of its own, with an index first.
    fn markdown() -> String {
        let mut cmd = crate::args::command()
            .term_width(DOC_WIDTH)
            .max_term_width(DOC_WIDTH);
        cmd.build();
        let commands = visible(&cmd);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# The ictus command line\n\n\
             Generated from the command line's own definitions (`crates/ictus-cli/src/args.rs`\n\
             and each probe's `cli.rs`): each command's `--help`, as the binary prints it.\n\
             Do not edit: `ICTUS_BLESS=1 cargo test -p ictus-cli --bin ictus docs_cli_md` writes it\n\
             again, and that test fails while it differs. Man pages: `ictus man --out DIR`;\n\
             completions: `ictus completions bash|zsh|fish`.\n"
        );
        for (path, sub) in &commands {
            let name = path.join(" ");
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "- [`{name}`](#{}): {}",
                anchor(&name),
                first_sentence(&about)
            );
        }
        for (path, sub) in &commands {
            let name = path.join(" ");
            let mut sub = (*sub).clone();
            // A subcommand's usage names its parents once it is built as part of the tree.
            let help = sub.render_long_help().to_string();
            let _ = writeln!(out, "\n## {name}\n\n```text\n{}\n```", help.trim_end());
        }
        out
    }

    /// The anchor GitHub gives a heading.
    fn anchor(heading: &str) -> String {
        heading
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect()
    }

    /// The first sentence (or line) of an about text.
    fn first_sentence(about: &str) -> String {
        let line = about.lines().next().unwrap_or_default();
        match line.find(": ").or_else(|| line.find(". ")) {
            Some(i) if i > 10 => line[..i].to_string(),
            _ => line.trim_end_matches('.').to_string(),
        }
    }

    const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

    #[test]
    fn docs_cli_md_is_the_command_line_s_own() {
        let path = Path::new(ROOT).join("docs/cli.md");
        let sut = markdown();
        if std::env::var_os("ICTUS_BLESS").is_some() {
            std::fs::write(&path, &sut).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == sut,
            "docs/cli.md differs from the command line: write it again with \
             `ICTUS_BLESS=1 cargo test -p ictus-cli --bin ictus docs_cli_md` and commit it"
        );
    }

    #[test]
    fn every_visible_command_gets_a_man_page() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_pages(crate::args::command(), dir.path()).unwrap();
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), written);
        for page in [
            "ictus.1",
            "ictus-survey.1",
            "ictus-probe-timer.1",
            "ictus-completions.1",
        ] {
            assert!(files.iter().any(|f| f == page), "{page} in {files:?}");
        }
        assert!(
            !files
                .iter()
                .any(|f| f.contains("subsystem") || f.contains("watchdog"))
        );
        let timer = std::fs::read_to_string(dir.path().join("ictus-probe-timer.1")).unwrap();
        assert!(timer.contains("interval"), "the options are in the page");
        assert!(timer.contains("Examples:"), "and the examples");
    }

    /// Flags of other tools the docs quote (cargo, cyclictest, Python's module).
    const FOREIGN_FLAGS: &[&str] = &[
        "--release",
        "--example",
        "--workspace",
        "--locked",
        "--path",
        "--root",
        "--debug",
        "--all",
        "--all-targets",
        "--check",
        "--no-deps",
        "--test",
        "--bin",
        "--features",
        "--no-default-features",
        "--nocapture",
        "--laptop",
        "--json=FILE",
        "--stat",
        "--endpoint",
        "--reader",
        "--keys",
        "--run",
    ];

    /// The code of a Markdown text: each line of its fenced blocks (but Rust's and
    /// TOML's) and each inline code span.
    fn code_of(md: &str) -> Vec<String> {
        let mut code = Vec::new();
        let mut prose = String::new();
        let mut fence: Option<String> = None;
        for line in md.lines() {
            let trimmed = line.trim_start();
            if let Some(lang) = trimmed.strip_prefix("```") {
                fence = match fence {
                    Some(_) => None,
                    None => Some(lang.trim().to_string()),
                };
                prose.push('\n');
                continue;
            }
            match &fence {
                // Not commands: programs, files, what a command printed.
                Some(lang) if ["rust", "toml", "json", "text"].contains(&lang.as_str()) => {}
                // A line quoting code (a layout drawn in a block): what it quotes.
                Some(_) if line.contains('`') => {
                    code.extend(line.split('`').skip(1).step_by(2).map(str::to_string));
                }
                // A shell line: its comment is prose.
                Some(_) => {
                    let command = match line.find(" #") {
                        Some(i) => &line[..i],
                        None => line,
                    };
                    if !command.trim_start().starts_with('#') {
                        code.push(command.trim_end().to_string());
                    }
                }
                None => {
                    prose.push_str(line);
                    prose.push(' ');
                }
            }
        }
        // Inline spans: what stands between backticks (spans may cross lines).
        code.extend(prose.split('`').skip(1).step_by(2).map(str::to_string));
        code
    }

    /// What is wrong with the `ictus` invocations and flags in `code`.
    fn check_code(root: &clap::Command, code: &str, all_flags: &[String]) -> Vec<String> {
        let words: Vec<&str> = code.split_whitespace().collect();
        let mut wrong = Vec::new();
        let mut checked = vec![false; words.len()];
        for (i, w) in words.iter().enumerate() {
            // `-p ictus`, `--balancer ictus`: a value, not the program.
            let a_value = i > 0 && words[i - 1].starts_with('-');
            if !(*w == "ictus" || w.ends_with("/ictus")) || a_value {
                continue;
            }
            let mut cmd = root;
            let mut path = vec!["ictus".to_string()];
            let mut descending = true;
            // After a placeholder for a subcommand (`ictus probe NAME --load`), a flag
            // of any of them.
            let mut any_sub = false;
            for (j, word) in words.iter().enumerate().skip(i + 1) {
                let word = word.trim_end_matches([',', ';', ')', '.', ':', '\'']);
                if word.is_empty()
                    || word == "--"
                    || word.starts_with('#')
                    || matches!(word, "|" | ">" | "&&" | "||" | "<")
                {
                    break;
                }
                checked[j] = true;
                if word.starts_with('-') {
                    // What follows an option is its value, not a subcommand.
                    descending = false;
                }
                if let Some(long) = word.strip_prefix("--") {
                    let long = long.split('=').next().unwrap_or_default();
                    let has =
                        |c: &clap::Command| c.get_arguments().any(|a| a.get_long() == Some(long));
                    let known = matches!(long, "help" | "version")
                        || has(cmd)
                        || (any_sub && cmd.get_subcommands().any(has));
                    if !known {
                        wrong.push(format!("`{} --{long}`: no such option", path.join(" ")));
                    }
                    continue;
                }
                if word.starts_with('-') {
                    continue;
                }
                if descending && cmd.has_subcommands() {
                    match cmd.find_subcommand(word) {
                        Some(sub) => {
                            cmd = sub;
                            path.push(word.to_string());
                            continue;
                        }
                        None if word.chars().all(|c| c.is_ascii_lowercase()) => {
                            wrong.push(format!("`{} {word}`: no such command", path.join(" ")));
                        }
                        None => any_sub = word.chars().all(|c| c.is_ascii_uppercase()),
                    }
                }
                descending = false;
            }
        }
        for (j, word) in words.iter().enumerate() {
            let word = word.trim_end_matches([',', ';', ')', '.', ':']);
            if checked[j] || !word.starts_with("--") || word == "--" {
                continue;
            }
            let long = word.split('=').next().unwrap_or_default();
            if !FOREIGN_FLAGS.contains(&word)
                && !FOREIGN_FLAGS.contains(&long)
                && !all_flags.iter().any(|f| f == long)
            {
                wrong.push(format!("`{word}`: no command has this option"));
            }
        }
        wrong
    }

    #[test]
    fn every_command_and_flag_the_docs_quote_exists() {
        let mut root = crate::args::command();
        root.build();
        let mut all_flags = Vec::new();
        let mut stack = vec![&root];
        while let Some(c) = stack.pop() {
            all_flags.extend(
                c.get_arguments()
                    .filter_map(|a| a.get_long())
                    .map(|l| format!("--{l}")),
            );
            stack.extend(c.get_subcommands());
        }
        all_flags.extend(["--help".to_string(), "--version".to_string()]);
        let mut files = vec![Path::new(ROOT).join("README.md")];
        let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        docs.sort();
        files.extend(docs);
        let mut wrong = Vec::new();
        let mut invocations = 0;
        for file in &files {
            let md = std::fs::read_to_string(file).unwrap();
            for code in code_of(&md) {
                invocations += code.split_whitespace().filter(|w| *w == "ictus").count();
                for w in check_code(&root, &code, &all_flags) {
                    wrong.push(format!("{}: {w}", file.display()));
                }
            }
        }
        assert!(
            invocations > 50,
            "the docs quote ictus ({invocations} times)"
        );
        assert!(
            wrong.is_empty(),
            "the docs quote what the command line lacks:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn the_check_finds_a_command_or_flag_that_is_not_there() {
        let mut root = crate::args::command();
        root.build();
        let flags = vec!["--interval".to_string()];
        assert!(check_code(&root, "ictus probe timer --interval 1ms", &flags).is_empty());
        assert!(
            check_code(
                &root,
                "sudo target/release/ictus survey --cores 1 | tee x",
                &flags
            )
            .is_empty()
        );
        assert_eq!(
            check_code(&root, "ictus probe timer --intervall 1ms", &flags).len(),
            1
        );
        assert_eq!(check_code(&root, "ictus probes", &flags).len(), 1);
        assert_eq!(check_code(&root, "the --nosuch flag", &flags).len(), 1);
        assert!(check_code(&root, "cargo build --release", &flags).is_empty());
        assert!(check_code(&root, "ictus probe NAME --load cpu", &flags).is_empty());
        assert_eq!(check_code(&root, "ictus probe --load cpu", &flags).len(), 1);
        assert!(check_code(&root, "cargo run -p ictus --example minimal", &flags).is_empty());
        let code = code_of(
            "a `ictus\ndoctor` b\n```sh\nictus run x  # the ictus way\n# ictus y\n```\n```toml\nictus = 1\n```\n",
        );
        assert_eq!(
            code,
            vec!["ictus run x".to_string(), "ictus doctor".to_string()]
        );
    }

    #[test]
    fn an_anchor_is_github_s() {
        assert_eq!(anchor("ictus probe timer"), "ictus-probe-timer");
    }
}
