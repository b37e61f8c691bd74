//! `ictus survey`: the main job, from one command to a results directory with a
//! report a person wants to read.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use ictus_probe::progress::Progress;
use ictus_probe::survey::{
    self, Manifest, Profile, ShieldAccess, ShieldDriver, ShieldSplit, StepStatus, SurveyOptions,
    Target,
};

use crate::Failure;
use crate::common::{self, Bar};

/// Options of `ictus survey`.
#[derive(Debug, Args)]
pub(crate) struct SurveyArgs {
    /// How long the survey runs.
    #[arg(long, value_enum, default_value = "quick")]
    pub(crate) profile: Profile,
    /// The loop the verdict is about: its frequency (seed 000's gesture loop: 10kHz).
    #[arg(long, default_value = "10kHz", value_parser = ictus_probe::r#loop::cli::parse_frequency)]
    pub(crate) target: f64,
    /// The loop's cores [default: 2, seed 000's gesture loop; on 2 CPUs 1, so that the
    /// shielded configuration, which keeps one CPU for the system, has one per core].
    #[arg(long)]
    pub(crate) cores: Option<usize>,
    /// Bytes the loop exchanges at each rendezvous (e.g. 512B).
    #[arg(long, default_value = "512B", value_parser = parse_bytes)]
    pub(crate) exchange: usize,
    /// CPUs to survey: a list like 0-3, or "all".
    #[arg(short = 'a', long, default_value = "all")]
    pub(crate) cpus: String,
    /// Where results directories go.
    #[arg(long, default_value = "ictus-results")]
    pub(crate) results: PathBuf,
    /// The shielded configuration (as root): `off` also turns the RT throttle off
    /// while the shield is applied, behind a watchdog (see --watchdog).
    #[arg(long, value_name = "on|off", value_enum, default_value = "on")]
    pub(crate) rt_throttle: crate::shield::Throttle,
    /// With `--rt-throttle off`: the watchdog's limit, how long a real-time thread may
    /// hold its CPU without sleeping before it is demoted.
    #[arg(long, value_name = "LIMIT", default_value = "2s", value_parser = ictus_probe::cli::positive_duration)]
    pub(crate) watchdog: std::time::Duration,
}

fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim().trim_end_matches(['B', 'b']);
    let (n, k) = match t.strip_suffix(['K', 'k']) {
        Some(n) => (n, 1024),
        None => (t, 1),
    };
    let limit = ictus_probe::r#loop::MAX_EXCHANGE_BYTES;
    n.trim()
        .parse::<usize>()
        .map_err(|_| format!("'{s}' is not a size (expected e.g. 512B, 4K)"))?
        .checked_mul(k)
        .filter(|&b| b <= limit)
        .ok_or_else(|| format!("{s} is over the limit of {limit} bytes"))
}

/// Plans, runs, writes the directory and the reports, and prints the summary.
pub(crate) fn run(args: &SurveyArgs, progress: &Arc<Progress>) -> Result<(), Failure> {
    let cpus = common::cpus("--cpus", &args.cpus)?;
    // Said once the survey starts (a refusal stays one line).
    let (cores, chosen) = match args.cores {
        Some(cores) => (cores, None),
        None => {
            let cores = default_cores(cpus.len());
            (cores, Some(chosen_cores(cores, cpus.len())))
        }
    };
    let opts = SurveyOptions {
        profile: args.profile,
        target: Target {
            frequency_hz: args.target,
            cores,
            exchange_bytes: args.exchange,
        },
        cpus,
        shield: shield_access(args)?,
    };
    if cores == 0 {
        return Err(Failure::usage(anyhow::anyhow!(
            "--cores must be at least 1"
        )));
    }
    let steps = survey::plan(&opts).map_err(Failure::usage)?;
    let dir = survey::results_dir(&args.results);
    // A directory that cannot take the results is bad input, found before the run.
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::Error::new(e).context(format!("{}: cannot create", dir.display())))
        .map_err(Failure::usage)?;
    common::check_output(&dir.join(survey::MANIFEST_FILE))?;
    if let Some(line) = chosen {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let expected = steps.iter().map(|s| s.estimate()).sum();
    let out = ictus_probe::cli::OutputArgs {
        json: false,
        output: None,
    };
    let bar = Bar::start(progress, expected, &out, "of the survey");
    let manifest = survey::run(&opts, steps, &dir, std::env::args().collect(), progress);
    bar.done(progress);
    let manifest = manifest?;
    let reports = crate::report::write(&dir);
    crate::say(&summary(&manifest, &dir, reports))
}

/// The loop's cores when `--cores` is not given, for `cpus` CPUs surveyed: seed 000's
/// 2, but never more than the shielded configuration has for it (one CPU stays the
/// system's, seed 000's principle), and at least 1. So on 2 CPUs the shielded loop
/// runs, on 1 core, where 2 cores would skip it.
pub(crate) fn default_cores(cpus: usize) -> usize {
    const SEED_000_CORES: usize = 2;
    cpus.saturating_sub(1).clamp(1, SEED_000_CORES)
}

/// What the survey says of the cores it chose for the loop.
fn chosen_cores(cores: usize, cpus: usize) -> String {
    let why = if cores < 2 {
        format!("{cpus} CPU(s) surveyed, and the shielded configuration keeps one for the system")
    } else {
        "seed 000's gesture loop".to_string()
    };
    format!(
        "the target loop runs on {cores} core{} ({why}); --cores N chooses",
        if cores == 1 { "" } else { "s" }
    )
}

/// Resets the shields of surveys that were killed (their process is gone), saying so.
fn reset_stale_shields() -> Result<(), Failure> {
    use ictus_shield::survey;
    survey::reset_stale(&survey::dir(), |journal, o| {
        let _ = writeln!(
            std::io::stderr(),
            "reset the shield a stopped survey left ({}): {} value(s) restored",
            journal.display(),
            o.restored
        );
    })
    .map_err(|e| anyhow::anyhow!("{e}: {}", e.source).into())
}

/// Whether the survey can try the shielded configuration here, and how. A shield a
/// killed survey left is reset first.
fn shield_access(args: &SurveyArgs) -> Result<ShieldAccess, Failure> {
    if let Some(need) = ictus_shield::apply::privilege_shortfall() {
        return Ok(ShieldAccess::Unavailable(format!(
            "the shielded configuration needs {need}: run the survey as root (sudo)"
        )));
    }
    match ictus_os::facts::cgroups().cpuset {
        Some(c) if c.version == 1 && c.writable => {}
        Some(c) if c.version != 1 => {
            return Ok(ShieldAccess::Unavailable(
                "the survey drives the shield on cgroup v1 only: on v2 a cpuset holds whole \
                 processes, and the survey's probes and loads share one (apply `ictus shield` \
                 and run the probes inside it)"
                    .into(),
            ));
        }
        _ => {
            return Ok(ShieldAccess::Unavailable(
                "no writable cpuset controller (see `ictus doctor`)".into(),
            ));
        }
    }
    if std::path::Path::new(ictus_shield::DEFAULT_JOURNAL).exists() {
        return Ok(ShieldAccess::Unavailable(format!(
            "a shield is applied already ({}: see `ictus shield status`): the survey measures \
             the machine as it is and applies none of its own",
            ictus_shield::DEFAULT_JOURNAL
        )));
    }
    reset_stale_shields()?;
    let watchdog = (args.rt_throttle == crate::shield::Throttle::Off).then_some(args.watchdog);
    Ok(ShieldAccess::Driver(Arc::new(SurveyShield {
        shield: ictus_shield::survey::SurveyShield {
            journal: ictus_shield::survey::of_this_process(),
            throttle_off: watchdog.is_some(),
        },
        watchdog,
    })))
}

/// The survey's shield ([`ictus_shield::survey::SurveyShield`]), with this program
/// as its watchdog when the RT throttle goes off.
#[derive(Debug)]
struct SurveyShield {
    shield: ictus_shield::survey::SurveyShield,
    /// The watchdog's limit, when the RT throttle goes off.
    watchdog: Option<std::time::Duration>,
}

impl ShieldDriver for SurveyShield {
    fn apply(&self, split: &ShieldSplit) -> Result<String, String> {
        let watchdog = match self.watchdog {
            Some(limit) => Some(
                crate::shield::watchdog_launch(limit, &split.rt, &self.shield.journal)
                    .map_err(|f| f.error.to_string())?,
            ),
            None => None,
        };
        self.shield.apply(&split.rt, &split.system, watchdog)
    }

    fn reset(&self) -> Result<String, String> {
        self.shield.reset()
    }
}

/// The terminal's last words: the verdict, what ran, where the report is.
fn summary(m: &Manifest, dir: &std::path::Path, reports: Result<PathBuf, String>) -> String {
    let mut out = String::new();
    if !m.complete {
        let _ = writeln!(
            out,
            "INCOMPLETE: the survey was stopped; the results cover what ran."
        );
    }
    // The answer in one line, then each configuration of the loop at a glance (held
    // or not, its misses by cause, the advice), then the evidence.
    let glance = ictus_report::load(dir)
        .ok()
        .and_then(|r| ictus_report::glance_table(&r))
        .unwrap_or_default();
    match &m.verdict {
        Some(v) => {
            let _ = writeln!(out, "{}", v.line);
            out.push_str(&glance);
            for e in &v.evidence {
                let _ = writeln!(out, "  - {e}");
            }
            if let Some(b) = &v.best {
                let _ = writeln!(out, "{b}");
            }
            if let Some(s) = &v.sound_line {
                let _ = writeln!(out, "{s}");
            }
        }
        None => {
            let _ = writeln!(out, "No verdict: the loop probe did not run.");
            out.push_str(&glance);
        }
    }
    for line in &m.shield {
        let _ = writeln!(out, "shield {line}");
    }
    let count = |s: StepStatus| m.steps.iter().filter(|x| x.status == s).count();
    let _ = writeln!(
        out,
        "{} steps done, {} skipped, {} failed, {} not run.",
        count(StepStatus::Done),
        count(StepStatus::Skipped),
        count(StepStatus::Failed),
        count(StepStatus::NotRun)
    );
    for s in m.steps.iter().filter(|s| s.status == StepStatus::Failed) {
        let _ = writeln!(
            out,
            "  failed: {}: {}",
            s.id,
            s.reason.as_deref().unwrap_or("?")
        );
    }
    match reports {
        Ok(path) => {
            let _ = writeln!(out, "Report: {}", path.display());
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "The report could not be written ({e}); the records are in {}",
                dir.display()
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("512B"), Ok(512));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("64"), Ok(64));
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn the_default_loop_leaves_the_shield_a_cpu_per_core() {
        assert_eq!(default_cores(1), 1, "one CPU: no shield, one core");
        assert_eq!(default_cores(2), 1, "one system CPU, one shielded");
        for cpus in 3..=256 {
            let sut = default_cores(cpus);
            assert_eq!(sut, 2, "seed 000's 2 cores wherever they fit ({cpus} CPUs)");
            assert!(sut < cpus, "the shield keeps a CPU for the system");
        }
        assert_eq!(default_cores(0), 1);
    }

    #[test]
    fn the_survey_says_what_it_chose() {
        let sut = chosen_cores(default_cores(2), 2);
        assert!(
            sut.starts_with("the target loop runs on 1 core (2 CPU(s)"),
            "{sut}"
        );
        assert!(sut.contains("--cores N"), "{sut}");
        assert!(chosen_cores(2, 8).contains("on 2 cores (seed 000"));
    }
}
