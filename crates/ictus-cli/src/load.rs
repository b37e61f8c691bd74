//! `ictus load`: background loads to measure under, for a duration or until Ctrl-C,
//! then what each achieved.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context;
use ictus_core::CpuSet;
use ictus_probe::load::{self, LoadKind, LoadReport, LoadSpec};
use ictus_probe::progress::Progress;

use ictus_probe::cli::parse_kind;
use ictus_probe::setup::Choice;

use crate::Failure;
use ictus_probe::cli::positive_duration;

/// `ictus load KIND... [--cpus LIST] [--duration DUR] [--json]`.
#[derive(Debug, clap::Args)]
pub(crate) struct LoadCommandArgs {
    /// Loads to run together: cpu, disk, net, syscall, cachemiss, membw, or all.
    #[arg(required = true, value_name = "KIND", value_parser = parse_kind)]
    pub(crate) kinds: Vec<Choice<LoadKind>>,
    /// CPUs to load, one worker each (net: a sender and a receiver per two CPUs): a
    /// list like 0-3,6, or "all".
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) cpus: String,
    /// How long to run (e.g. 30s, 5m); without it, until Ctrl-C.
    #[arg(short = 'D', long, value_parser = positive_duration)]
    pub(crate) duration: Option<Duration>,
    /// Print the reports as a JSON array on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The loads the command line asks for, each kind once, on the CPUs asked for.
pub(crate) fn specs(args: &LoadCommandArgs) -> Result<Vec<LoadSpec>, Failure> {
    let cpus = ictus_probe::cli::cpus("--cpus", &args.cpus).map_err(Failure::usage)?;
    kinds_on(&args.kinds, cpus)
}

/// Each kind named once (all of them for `all`), on `cpus`.
pub(crate) fn kinds_on(kinds: &[Choice<LoadKind>], cpus: CpuSet) -> Result<Vec<LoadSpec>, Failure> {
    let named: BTreeSet<LoadKind> = if kinds.contains(&Choice::All) {
        LoadKind::ALL.into_iter().collect()
    } else {
        kinds
            .iter()
            .filter_map(|k| match k {
                Choice::One(kind) => Some(*kind),
                Choice::All => None,
            })
            .collect()
    };
    let specs: Vec<LoadSpec> = named
        .into_iter()
        .map(|kind| LoadSpec {
            kind,
            cpus: cpus.clone(),
        })
        .collect();
    load::validate(&specs).map_err(Failure::usage)?;
    Ok(specs)
}

/// Runs the loads until the duration has passed or `stop` is requested (Ctrl-C), then
/// prints what each achieved. A load that failed while running makes the command fail
/// after the reports are printed.
pub(crate) fn run(args: &LoadCommandArgs, stop: &Progress) -> Result<(), Failure> {
    let specs = specs(args)?;
    if !args.json && args.duration.is_none() {
        eprintln!(
            "ictus: running {} on CPUs {} until Ctrl-C",
            specs
                .iter()
                .map(|s| s.kind.name())
                .collect::<Vec<_>>()
                .join(", "),
            specs[0].cpus
        );
    }
    let reports = load::hold(&specs, args.duration, stop).context("starting the loads")?;
    if args.json {
        crate::say(&(serde_json::to_string_pretty(&reports)? + "\n"))?;
    } else {
        crate::say(&render(&reports))?;
    }
    let errors: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.errors
                .iter()
                .map(move |e| format!("load {}: {e}", r.kind))
        })
        .collect();
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(anyhow::anyhow!("{one}").into()),
        [first, rest @ ..] => {
            Err(anyhow::anyhow!("{first} (and {} more errors)", rest.len()).into())
        }
    }
}

/// One line per load: where it ran, for how long, the CPU it got, what it achieved;
/// then its errors, indented.
pub(crate) fn render(reports: &[LoadReport]) -> String {
    let width = reports
        .iter()
        .map(|r| r.kind.name().len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for r in reports {
        let secs = r.duration_ns as f64 / 1e9;
        let _ = write!(
            out,
            "{:width$}  {} worker{} on CPU{} {}  {secs:.2} s  CPU time {:.2} s",
            r.kind.name(),
            r.workers,
            if r.workers == 1 { "" } else { "s" },
            if r.cpus.len() == 1 { "" } else { "s" },
            r.cpus,
            r.cpu_time_ns as f64 / 1e9,
        );
        for (key, value) in &r.metrics {
            let _ = write!(out, "  {}", metric(key, *value));
        }
        out.push('\n');
        for e in &r.errors {
            let _ = writeln!(out, "{:width$}  error: {e}", "");
        }
    }
    out
}

/// `ops_per_s` 1.2e9 as `ops 1.20 G/s`, `write_bytes_per_s` as `write 1.20 GB/s`,
/// `buffer_bytes` as `buffer 134 MB`.
fn metric(key: &str, value: f64) -> String {
    let (name, per_s) = match key.strip_suffix("_per_s") {
        Some(name) => (name, "/s"),
        None => (key, ""),
    };
    let (name, unit) = if name == "bytes" {
        ("", "B")
    } else if let Some(prefix) = name.strip_suffix("_bytes") {
        (prefix, "B")
    } else {
        (name, "")
    };
    let label = if name.is_empty() {
        String::new()
    } else {
        format!("{} ", name.replace('_', " "))
    };
    format!("{label}{}{unit}{per_s}", si(value))
}

/// A value with an SI prefix and three significant digits: `1.23 G`, `456 k`, `7.00 `.
fn si(value: f64) -> String {
    const PREFIXES: [&str; 5] = ["", "k", "M", "G", "T"];
    let mut v = value;
    let mut i = 0;
    while v.abs() >= 999.5 && i + 1 < PREFIXES.len() {
        v /= 1000.0;
        i += 1;
    }
    let digits = if v.abs() >= 99.95 {
        0
    } else if v.abs() >= 9.995 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {}", PREFIXES[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn kinds_parse_with_all_and_unknown_names_are_refused() {
        assert_eq!(parse_kind("all").unwrap(), Choice::All);
        assert_eq!(parse_kind("cpu").unwrap(), Choice::One(LoadKind::Cpu));
        let err = parse_kind("bogus").unwrap_err();
        assert!(err.contains("'bogus'") && err.contains("or all"), "{err}");
    }

    #[test]
    fn zero_and_garbage_durations_are_refused() {
        assert!(positive_duration("0s").is_err());
        assert!(positive_duration("soon").is_err());
        assert_eq!(
            positive_duration("300ms").unwrap(),
            Duration::from_millis(300)
        );
    }

    fn args(kinds: &[Choice<LoadKind>], cpus: &str) -> LoadCommandArgs {
        LoadCommandArgs {
            kinds: kinds.to_vec(),
            cpus: cpus.into(),
            duration: None,
            json: false,
        }
    }

    fn accepted(args: &LoadCommandArgs) -> Vec<LoadSpec> {
        match specs(args) {
            Ok(specs) => specs,
            Err(f) => panic!("refused: {:#}", f.error),
        }
    }

    #[test]
    fn all_means_every_kind_once_and_repeats_collapse() {
        let sut = accepted(&args(&[Choice::One(LoadKind::Cpu), Choice::All], "all"));
        let kinds: Vec<LoadKind> = sut.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, LoadKind::ALL);
        let sut = accepted(&args(
            &[Choice::One(LoadKind::Net), Choice::One(LoadKind::Net)],
            "all",
        ));
        assert_eq!(sut.len(), 1);
        assert_eq!(sut[0].cpus, ictus_os::facts::online_cpus());
    }

    #[test]
    fn an_offline_cpu_is_a_usage_error() {
        let Err(f) = specs(&args(&[Choice::One(LoadKind::Cpu)], "1000")) else {
            panic!("CPU 1000 accepted");
        };
        assert_eq!(f.code, crate::EXIT_USAGE);
    }

    #[test]
    fn metrics_read_with_their_units() {
        assert_eq!(metric("ops_per_s", 1.234e9), "ops 1.23 G/s");
        assert_eq!(metric("bytes_per_s", 2.5e6), "2.50 MB/s");
        assert_eq!(metric("write_bytes_per_s", 999.0), "write 999 B/s");
        assert_eq!(
            metric("sent_packets_per_s", 12_345.0),
            "sent packets 12.3 k/s"
        );
        assert_eq!(metric("buffer_bytes", 134_217_728.0), "buffer 134 MB");
    }

    #[test]
    fn a_report_renders_as_one_line_plus_its_errors() {
        let report = LoadReport {
            kind: LoadKind::Disk,
            cpus: CpuSet::from_cpus([0, 1]),
            workers: 2,
            duration_ns: 2_000_000_000,
            cpu_time_ns: 500_000_000,
            metrics: BTreeMap::from([("fsyncs_per_s".to_string(), 812.0)]),
            errors: vec!["worker on CPU 1: disk full".into()],
        };
        let sut = render(&[report]);
        assert_eq!(
            sut,
            "disk  2 workers on CPUs 0-1  2.00 s  CPU time 0.50 s  fsyncs 812 /s\n      error: worker on CPU 1: disk full\n"
        );
    }
}
