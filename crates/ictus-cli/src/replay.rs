//! `ictus replay FILE.mcap --subsystem NAME`: one subsystem of a recorded run
//! (`ictus run --record`) run again against its recorded inputs, its outputs
//! compared with the recorded ones bit for bit (see `ictus_exec::replay`); and
//! `--record`'s sink. Both are the `record` feature.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use clap::builder::ValueHint;
use ictus_exec::replay::{Pace, ProgramVerdict, REPLAY_BEAT_ENV, REPLAY_ENV, Recording, Verdict};
use ictus_exec::schedule::Process;

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The recording (`ictus run --record FILE.mcap`).
    #[arg(value_hint = ValueHint::FilePath)]
    pub(crate) file: PathBuf,
    /// The subsystem to replay (its name in the schedule).
    #[arg(long)]
    pub(crate) subsystem: String,
    /// `fast`: each frame as soon as the last ends; `recorded`: each at its
    /// recorded deadline's offset from the first.
    #[arg(long, default_value = "fast", value_parser = beat)]
    pub(crate) beat: Pace,
    /// The program that runs the subsystem (`process = "NAME"` in the schedule),
    /// when it is not where the schedule's name finds it (next to ictus, in its
    /// examples/ folder, or in PATH).
    #[arg(long, value_hint = ValueHint::FilePath)]
    pub(crate) program: Option<PathBuf>,
}

fn beat(s: &str) -> Result<Pace, String> {
    s.parse()
}

pub(crate) fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let recording = Recording::open(&args.file).map_err(Failure::usage)?;
    recording.slot_of(&args.subsystem).map_err(Failure::usage)?;
    let spec = recording
        .schedule
        .subsystem(&args.subsystem)
        .cloned()
        .ok_or_else(|| Failure::usage(anyhow::anyhow!("no subsystem {}", args.subsystem)))?;
    let verdict = match (&spec.process, &args.program) {
        (Process::Program { program, .. }, given) => {
            let path = match given {
                Some(p) => p.clone(),
                None => ictus_exec::run::resolve_program(program, recording.schedule.folder(), &[])
                    .ok_or_else(|| {
                        Failure::usage(anyhow::anyhow!(
                            "subsystem {} runs as program '{program}', which is not found \
                         (next to ictus, in its examples/ folder, or in PATH): give --program PATH",
                            args.subsystem
                        ))
                    })?,
            };
            in_program(&path, &args.file, &args.subsystem, args.beat)?
        }
        (_, Some(_)) => {
            return Err(Failure::usage(anyhow::anyhow!(
                "--program applies to a subsystem that runs as a program; {} is a built-in",
                args.subsystem
            )));
        }
        _ => {
            let maker = ictus_exec::run::builtin(&spec).map_err(|e| {
                Failure::usage(anyhow::anyhow!(
                    "cannot replay '{}' here: {e}; a subsystem of a program of one's own is \
                     replayed by that program (ictus_exec::replay::Recording::replay)",
                    args.subsystem
                ))
            })?;
            recording
                .replay(&args.subsystem, maker, args.beat)
                .map_err(Failure::usage)?
        }
    };
    verdict_out(&verdict)
}

/// Runs the replay in `program`'s own process and reads its verdict.
fn in_program(
    program: &Path,
    file: &Path,
    subsystem: &str,
    beat: Pace,
) -> Result<Verdict, Failure> {
    let outcome = std::env::temp_dir().join(format!("ictus-replay-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&outcome);
    let file = std::path::absolute(file)?;
    let status = Command::new(program)
        .env(REPLAY_ENV, &file)
        .env(
            REPLAY_BEAT_ENV,
            match beat {
                Pace::Fast => "fast",
                Pace::Recorded => "recorded",
            },
        )
        .env("ICTUS_SUBSYSTEM", subsystem)
        .env("ICTUS_OUTCOME", &outcome)
        .status()
        .map_err(|e| anyhow::anyhow!("starting {}: {e}", program.display()))?;
    let text = std::fs::read_to_string(&outcome);
    let _ = std::fs::remove_file(&outcome);
    let text = text.map_err(|_| {
        anyhow::anyhow!(
            "{} ended ({status}) without a verdict: does it call ictus_exec::child::run?",
            program.display()
        )
    })?;
    let verdict: ProgramVerdict = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}'s verdict does not read: {e}", program.display()))?;
    match verdict {
        ProgramVerdict::Verdict(v) => Ok(v),
        ProgramVerdict::Error(e) => Err(Failure::usage(anyhow::anyhow!("{e}"))),
    }
}

/// Prints the verdict; a difference is exit code 1.
fn verdict_out(v: &Verdict) -> Result<(), Failure> {
    if let Some(d) = &v.difference {
        return Err(anyhow::anyhow!(
            "{} differs from the recording at {d} ({} frames replayed, {} cell publications compared)",
            v.subsystem,
            v.frames,
            v.cells
        )
        .into());
    }
    if let Some((frame, e)) = &v.error {
        return Err(anyhow::anyhow!("{} at frame {frame}: {e}", v.subsystem).into());
    }
    crate::say(&format!(
        "replayed {}: {} frames, {} cell publications compared, all bit for bit equal\n",
        v.subsystem, v.frames, v.cells
    ))
}

/// The sinks of `--record` (none without it): the file is created here, before
/// the run starts, so a path that cannot be written starts nothing.
pub(crate) fn record_sink(
    path: Option<&std::path::Path>,
) -> Result<Vec<Box<dyn ictus_exec::tap::Sink>>, Failure> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let sink = ictus_exec::tap::mcap::McapSink::create(path)
        .map_err(|e| Failure::usage(anyhow::anyhow!("--record {}: {e}", path.display())))?;
    Ok(vec![Box::new(sink)])
}
