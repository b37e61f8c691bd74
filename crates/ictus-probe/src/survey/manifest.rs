//! The survey's manifest (`survey.json`) and what it is made of: the matrix's
//! classes and loads, the profile, the target loop, each step and its outcome, the
//! verdict.

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::load::{LoadKind, LoadSpec};

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
    /// SCHED_FIFO, pinned on a CPU of a shield applied for it (seed 000's principle:
    /// one system CPU, the others shielded); the loads on the system CPU.
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
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Profile {
    /// A tenth of quick: checks that everything runs (tests), figures too short to use.
    #[cfg_attr(feature = "cli", value(hide = true))]
    Smoke,
    /// About 3 minutes on 2 cores.
    Quick,
    /// Longer runs.
    #[cfg_attr(feature = "cli", value(help = "About 5 times longer"))]
    Standard,
    /// Long runs for tails (p99.999 needs a million samples).
    #[cfg_attr(
        feature = "cli",
        value(help = "Long runs for the tails (a million timer samples per configuration)")
    )]
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
    /// Not run, for a reason (e.g. no root for the shield, FIFO refused).
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
    /// The CPUs it measured on, once run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Interrupts those CPUs served while it ran (`/proc/interrupts`, the local
    /// timer's aside: the probes' own sleeps raise those), once run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs: Option<u64>,
    /// The CPU latency QoS of the step when it is not the default (0 us, held as
    /// cyclictest holds it): `off` for the steps that measure the machine as it idles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm_qos: Option<ictus_os::pm_qos::PmQos>,
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
    /// The configuration that held best (fewest misses, then the shortest worst step).
    #[serde(default)]
    pub best: Option<String>,
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
    /// What the survey did to the machine for the shielded configuration, in order:
    /// each shield applied and reset, with what reset restored or could not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shield: Vec<String>,
}

// The runner.

impl Class {
    /// The name used in step ids and tables.
    pub fn name(self) -> &'static str {
        match self {
            Class::NormalUnpinned => "normal-unpinned",
            Class::RtPinned => "rt-pinned",
            Class::Shielded => "shielded",
        }
    }
    /// What it means, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Class::NormalUnpinned => "SCHED_OTHER, unpinned",
            Class::RtPinned => "SCHED_FIFO 95, pinned, memory locked",
            Class::Shielded => "SCHED_FIFO 95 on a shielded CPU",
        }
    }
}

impl LoadCase {
    /// The name used in step ids and tables.
    pub fn name(&self) -> &'static str {
        match self {
            LoadCase::Idle => "idle",
            LoadCase::One(k) => k.name(),
            LoadCase::All => "all-loads",
        }
    }
    /// The loads it starts, on `cpus`.
    pub fn specs(&self, cpus: &CpuSet) -> Vec<LoadSpec> {
        let kinds: Vec<LoadKind> = match self {
            LoadCase::Idle => Vec::new(),
            LoadCase::One(k) => vec![*k],
            LoadCase::All => LoadKind::ALL.to_vec(),
        };
        kinds
            .into_iter()
            .map(|kind| LoadSpec {
                kind,
                cpus: cpus.clone(),
            })
            .collect()
    }
    /// Idle, each load alone, then all together.
    pub fn matrix() -> Vec<LoadCase> {
        let mut v = vec![LoadCase::Idle];
        v.extend(LoadKind::ALL.into_iter().map(LoadCase::One));
        v.push(LoadCase::All);
        v
    }
}

impl Profile {
    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Smoke => "smoke",
            Profile::Quick => "quick",
            Profile::Standard => "standard",
            Profile::Full => "full",
        }
    }
}

impl Default for Target {
    /// Seed 000 Table 1's gesture loop: 10 kHz on 2 cores, 512 bytes exchanged.
    fn default() -> Self {
        Target {
            frequency_hz: 10_000.0,
            cores: 2,
            exchange_bytes: 512,
        }
    }
}
