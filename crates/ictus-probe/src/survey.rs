//! `survey`: the main job. A campaign of probes over a matrix of configurations
//! (scheduling class x load), ending in a results directory that `ictus-report`
//! renders. This module holds the manifest written beside the records.

use serde::{Deserialize, Serialize};

/// The value of the manifest's `schema` field.
pub const MANIFEST_SCHEMA: &str = "ictus.survey";
/// The manifest's schema version.
pub const MANIFEST_VERSION: u32 = 1;
/// The manifest's file name in a results directory.
pub const MANIFEST_FILE: &str = "survey.json";
/// The audit's file name in a results directory.
pub const DOCTOR_FILE: &str = "doctor.json";

/// How the measuring threads were scheduled in one configuration of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// SCHED_OTHER, unpinned.
    NormalUnpinned,
    /// SCHED_FIFO, pinned, memory locked (where permitted).
    RtPinned,
    /// RT pinned on a shielded CPU (needs the shield; skipped until it exists).
    Shielded,
}

/// The load of one configuration: none, one kind, or all together.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadCase {
    /// No load.
    Idle,
    /// One load kind.
    One(crate::load::LoadKind),
    /// Every kind together.
    All,
}

/// Survey length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// About 3 minutes on 2 cores.
    Quick,
    /// Longer runs.
    Standard,
    /// Long runs for tails (p99.999 needs a million samples).
    Full,
}

/// The loop the verdict is about (seed 000 Table 1: 10 kHz gesture, 2 cores, 512 B).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Loop frequency.
    pub frequency_hz: f64,
    /// Cores.
    pub cores: usize,
    /// Bytes exchanged per rendezvous.
    pub exchange_bytes: usize,
}

/// What happened to one step of the survey.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    /// Ran; its record is in `file`.
    Done,
    /// Not run, for a reason (e.g. the shield does not exist yet, FIFO refused).
    Skipped,
    /// Started and failed (the error in `reason`).
    Failed,
    /// Not reached (the survey was stopped).
    NotRun,
}

/// One step of the survey: a probe in a configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Stable id, also the record's file stem: `timer-rt-pinned-idle`.
    pub id: String,
    /// The probe.
    pub probe: String,
    /// Scheduling class.
    pub class: Class,
    /// Load.
    pub load: LoadCase,
    /// Outcome.
    pub status: StepStatus,
    /// The record's file name within the directory, when done.
    pub file: Option<String>,
    /// Why skipped or failed.
    pub reason: Option<String>,
}

/// The verdict against the target loop, in plain words first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// One line: "This machine holds a 10 kHz loop on 2 cores ..." or why not.
    pub line: String,
    /// Whether the target holds in at least one configuration.
    pub holds: bool,
    /// The evidence, one sentence each (worst step vs period, misses, configuration, load).
    pub evidence: Vec<String>,
    /// The same for seed 000's 50 kHz sound loop.
    pub sound_line: Option<String>,
}

/// `survey.json`: what the survey ran and concluded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`MANIFEST_SCHEMA`].
    pub schema: String,
    /// [`MANIFEST_VERSION`].
    pub schema_version: u32,
    /// False when stopped early (Ctrl-C): the report says so.
    pub complete: bool,
    /// The profile.
    pub profile: Profile,
    /// The target loop.
    pub target: Target,
    /// Tool, host and time (of the whole survey).
    pub provenance: crate::provenance::Provenance,
    /// Every step, in order, with its outcome.
    pub steps: Vec<Step>,
    /// The verdict (absent when stopped before the loop probe ran).
    pub verdict: Option<Verdict>,
}
