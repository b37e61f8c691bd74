//! What `--help` says beyond the options clap lists: each command's examples and the
//! exit codes, one home for both. The man pages and `docs/cli.md` are made from the
//! same command line ([`crate::manual`]), so they say the same.
//!
//! Every example is parsed by the tests with the real command line, so an example
//! cannot name an option that is gone.

/// The examples of each command, by its path below `ictus` (`""` is `ictus` itself):
/// the command line, then what it does. Every visible command has some (a test checks).
pub(crate) const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            (
                "ictus doctor",
                "audit this machine's real-time features (instant)",
            ),
            (
                "ictus survey",
                "the main job: every probe, a verdict and a report (about 3 minutes)",
            ),
            (
                "ictus run examples/stress/schedule.toml --duration 10s",
                "run a cyclic schedule",
            ),
        ],
    ),
    (
        "survey",
        &[
            (
                "ictus survey",
                "the quick profile, the 10 kHz loop on the cores that fit",
            ),
            (
                "ictus survey --cores 1 --target 50kHz",
                "a 50 kHz loop on one core",
            ),
            (
                "ictus survey --profile full --cpus 0-3",
                "long runs for the tails, on CPUs 0 to 3",
            ),
        ],
    ),
    (
        "doctor",
        &[
            (
                "ictus doctor",
                "one line per real-time feature, advice and a verdict",
            ),
            ("ictus doctor --json", "the same as JSON"),
        ],
    ),
    (
        "probe",
        &[
            (
                "ictus probe timer --cpus 1 --interval 100us",
                "timer wake-up latency on CPU 1",
            ),
            (
                "ictus probe loop --frequency 10kHz --find-max",
                "the highest loop frequency held",
            ),
        ],
    ),
    (
        "probe timer",
        &[
            (
                "ictus probe timer --cpus 1 --mlock --interval 100us --mode hybrid",
                "wake every 100 us on CPU 1, memory locked, sleeping then spinning",
            ),
            (
                "ictus probe timer --duration 60s --load cpu -o timer.json",
                "under a CPU load, the record kept",
            ),
        ],
    ),
    (
        "probe pingpong",
        &[(
            "ictus probe pingpong --primitive all --placement both --policy other",
            "every hand-off primitive, same CPU and across, in the normal class",
        )],
    ),
    (
        "probe rendezvous",
        &[(
            "ictus probe rendezvous --spacing same-line,5000 --payload 0,512",
            "threads meeting by spinning, flags in one line or 5000 bytes apart",
        )],
    ),
    (
        "probe memlat",
        &[(
            "ictus probe memlat --quick --cpus 1",
            "memory latency by working set, on CPU 1",
        )],
    ),
    (
        "probe jitter",
        &[(
            "ictus probe jitter --cpus 1 --runs 2000",
            "execution-time variation on CPU 1",
        )],
    ),
    (
        "probe throughput",
        &[(
            "ictus probe throughput --placement cross-cpu --policy other",
            "bytes per second by payload size, across CPUs",
        )],
    ),
    (
        "probe compute",
        &[(
            "ictus probe compute --policy other --reference old.json",
            "the mass-interaction model, its time reductions against an older record",
        )],
    ),
    (
        "probe loop",
        &[
            (
                "ictus probe loop --frequency 10kHz --find-max",
                "the highest frequency with no miss",
            ),
            (
                "ictus probe loop -f 10kHz -n 20000 --trace loop.json",
                "each step's phases for Perfetto",
            ),
        ],
    ),
    (
        "probe irq",
        &[(
            "ictus probe irq --duration 10s",
            "timer IRQ latency apart from thread latency",
        )],
    ),
    (
        "import",
        &[(
            "ictus import cyclictest cyclictest.json -o ct.json",
            "a cyclictest --json output as a record",
        )],
    ),
    (
        "import cyclictest",
        &[(
            "ictus import cyclictest cyclictest.json -o ct.json",
            "a cyclictest --json output as a record",
        )],
    ),
    (
        "load",
        &[(
            "ictus load cpu disk --cpus 0 --duration 30s",
            "disturb another program from CPU 0",
        )],
    ),
    (
        "report",
        &[(
            "ictus report ictus-results/HOST-TIMESTAMP",
            "write report.md and report.html again",
        )],
    ),
    (
        "compare",
        &[(
            "ictus compare ictus-results/a ictus-results/b --html compare.html",
            "two surveys side by side, with ratios",
        )],
    ),
    (
        "shield",
        &[
            (
                "ictus shield apply --rt-cpus 1",
                "keep the machine's tasks and IRQs off CPU 1",
            ),
            ("ictus shield reset", "undo it exactly"),
        ],
    ),
    (
        "shield apply",
        &[
            (
                "ictus shield apply --rt-cpus 1",
                "keep the machine's tasks and IRQs off CPU 1",
            ),
            (
                "ictus shield apply --rt-cpus 1 --rt-throttle off --watchdog 1s",
                "and the RT throttle off, behind a watchdog",
            ),
        ],
    ),
    (
        "shield status",
        &[(
            "ictus shield status",
            "the partition and what still disturbs each RT CPU",
        )],
    ),
    (
        "shield reset",
        &[(
            "ictus shield reset",
            "undo the shield exactly, from its journal",
        )],
    ),
    (
        "scenario",
        &[(
            "ictus scenario examples/scenarios/table4-2cpu.toml --balancer both -o t4",
            "stock placement and the ictus balancer, side by side",
        )],
    ),
    (
        "exec",
        &[
            (
                "ictus exec --class rt0 --cpu 1 -- ./my-loop",
                "SCHED_FIFO 99 on CPU 1 only",
            ),
            (
                "ictus exec --class rt1 --priority 50 -- ./worker",
                "FIFO 50, RT and NRT CPUs",
            ),
        ],
    ),
    (
        "run",
        &[
            (
                "ictus run examples/stress/schedule.toml --duration 10s",
                "seed 003's stress test",
            ),
            (
                "ictus run examples/stress/schedule.toml --tick 250us --ui 8080",
                "4 times faster, with the live page on 127.0.0.1:8080",
            ),
            (
                "ictus run examples/stress/schedule.toml --duration 10s --record run.mcap",
                "record every frame for `ictus replay`",
            ),
        ],
    ),
    (
        "node",
        &[(
            "ictus node stress-hosts.toml --host h2 --keys h2-keys",
            "be host h2 of a run across hosts (h2-keys: its bundle)",
        )],
    ),
    (
        "ctl",
        &[
            (
                "ictus ctl status",
                "the running schedule's state, as one line of JSON",
            ),
            (
                "ictus ctl pause --name stress",
                "pause the run named stress",
            ),
            ("ictus ctl stop", "stop at a major-frame boundary"),
        ],
    ),
    (
        "replay",
        &[(
            "ictus replay run.mcap --subsystem A",
            "run A again on its recorded inputs, compare bit for bit",
        )],
    ),
    (
        "keys",
        &[(
            "ictus keys new keys --hosts h1,h2,h3",
            "a CA, a key per host, a bundle each",
        )],
    ),
    (
        "keys new",
        &[(
            "ictus keys new keys --hosts h1,h2,h3 --readers python",
            "a CA, a key per host and reader, and a bundle each to copy",
        )],
    ),
    (
        "keys renew",
        &[(
            "ictus keys renew keys --host h2",
            "a new key and certificate for h2 alone",
        )],
    ),
    (
        "keys check",
        &[("ictus keys check keys", "when each certificate ends")],
    ),
    (
        "completions",
        &[
            (
                "ictus completions bash > ~/.local/share/bash-completion/completions/ictus",
                "bash",
            ),
            (
                "ictus completions zsh > ~/.zfunc/_ictus",
                "zsh (with ~/.zfunc in fpath)",
            ),
            (
                "ictus completions fish > ~/.config/fish/completions/ictus.fish",
                "fish",
            ),
        ],
    ),
    (
        "man",
        &[
            (
                "ictus man --out ~/.local/share/man/man1",
                "a page per command: man ictus-probe-timer",
            ),
            (
                "ictus man | man -l -",
                "read ictus(1) without installing it",
            ),
        ],
    ),
];

/// Exit codes, the same for every command: one per kind of failure.
pub(crate) const EXIT_CODES: &[(u8, &str)] = &[
    (0, "done as asked"),
    (
        1,
        "the work failed: refused by the machine, a write, replay differs, a key ends",
    ),
    (
        2,
        "bad input, nothing started: the command line, FILE:LINE:COLUMN, no such run",
    ),
    (
        3,
        "run, node: the run ended but lost frames or was not clean; record written",
    ),
    (126, "exec: the command could not be run"),
    (127, "exec: the command was not found"),
    (130, "stopped by a second Ctrl-C"),
];

/// The examples of the command at `path` as `--help` ends with them.
fn examples_text(examples: &[(&str, &str)]) -> String {
    let mut out = String::from("Examples:\n");
    for (line, what) in examples {
        out += &format!("  {line}\n      {what}\n");
    }
    out
}

/// The exit codes as the root's long help ends with them.
pub(crate) fn exit_codes_text() -> String {
    let mut out = String::from("Exit status:\n");
    for (code, what) in EXIT_CODES {
        out += &format!("  {code:>3}  {what}\n");
    }
    out
}

/// `cmd` (at `path`, its words below `ictus`) with its examples after its help, and
/// its subcommands' after theirs; the root also says its exit codes in `--help`.
pub(crate) fn with_examples(cmd: clap::Command, path: &str) -> clap::Command {
    let mut cmd = match EXAMPLES.iter().find(|(p, _)| *p == path) {
        Some((_, examples)) => cmd.after_help(examples_text(examples)),
        None => cmd,
    };
    if path.is_empty() {
        let long = match EXAMPLES.iter().find(|(p, _)| p.is_empty()) {
            Some((_, examples)) => format!("{}\n{}", examples_text(examples), exit_codes_text()),
            None => exit_codes_text(),
        };
        cmd = cmd.after_long_help(long);
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let sub = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |s| with_examples(s, &sub));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of an example's command line up to a pipe or a redirection, with
    /// the program first.
    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace()
            .take_while(|w| !matches!(*w, "|" | ">" | ">>"))
            .collect()
    }

    #[test]
    fn every_example_parses_with_the_real_command_line() {
        for (path, examples) in EXAMPLES {
            for (line, what) in *examples {
                let args = words(line);
                assert!(!what.is_empty(), "{line}");
                let parsed = crate::args::Cli::try_parse_hardened_from(&args);
                assert!(parsed.is_ok(), "{line}: {}", parsed.unwrap_err());
                let named = args[1..].join(" ");
                assert!(
                    path.is_empty() || named.starts_with(path),
                    "an example of `ictus {path}` runs it: {line}"
                );
            }
        }
    }

    #[test]
    fn every_visible_command_has_examples() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if !EXAMPLES.iter().any(|(p, _)| *p == path) {
                missing.push(format!("ictus {path}"));
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                let p = if path.is_empty() {
                    sub.get_name().to_string()
                } else {
                    format!("{path} {}", sub.get_name())
                };
                walk(sub, &p, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&crate::args::command(), "", &mut missing);
        assert!(missing.is_empty(), "commands without examples: {missing:?}");
        let paths: Vec<&str> = EXAMPLES.iter().map(|(p, _)| *p).collect();
        let mut unique = paths.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(paths.len(), unique.len(), "one entry per command");
    }
}
