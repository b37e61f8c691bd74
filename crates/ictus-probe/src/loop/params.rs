//! What a loop run is asked for: its parameters and limits, and the helpers that
//! read them (the period of a frequency, a frequency in words).

use ictus_capture::timeline::TraceSpec;
use ictus_core::Nanos;
use ictus_os::facts;
use ictus_os::sched::Policy;
use serde::{Deserialize, Serialize};

use crate::setup::SchedSpec;

/// Which probe this is (its name, as in records and on the command line, is the
/// registry's).
pub const PROBE: crate::registry::ProbeId = crate::registry::ProbeId::Loop;

/// Samples the leader reads and writes each step (16 bits each).
pub const SAMPLES_PER_STEP: usize = 64;

/// The highest frequency a loop runs at, and the highest `find_max` tries.
pub const MAX_FREQUENCY_HZ: f64 = 200_000.0;
/// The lowest frequency a loop runs at, and the lowest `find_max` tries.
pub const MIN_FREQUENCY_HZ: f64 = 100.0;

/// How to search for the highest sustained frequency.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct FindMax {
    /// Stop refining when the passing and failing frequencies are within this ratio.
    pub resolution: f64,
    /// Longest time one trial may take (fewer steps at low frequencies).
    pub max_trial: Nanos,
    /// The lowest frequency tried (at least 100 Hz).
    pub floor_hz: f64,
}

impl Default for FindMax {
    /// Within 5 %, trials of at most 5 s, down to 100 Hz.
    fn default() -> Self {
        FindMax {
            resolution: 0.05,
            max_trial: Nanos::from_secs(5),
            floor_hz: MIN_FREQUENCY_HZ,
        }
    }
}

/// The loop probe's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopParams {
    /// CPUs (the first `threads` carry the loop), policy, memory locking.
    pub sched: SchedSpec,
    /// Threads (and CPUs) in the loop.
    pub threads: usize,
    /// Loop frequency (the first trial's, with `find_max`).
    pub frequency_hz: f64,
    /// Model size in modules (masses plus links).
    pub modules: usize,
    /// Bytes each thread sends at each of the two rendezvous.
    pub exchange_bytes: usize,
    /// Steps to run (per trial, with `find_max`).
    pub steps: u64,
    /// Hybrid margin; `None` calibrates it from the measured wake-up latency.
    pub margin: Option<Nanos>,
    /// Search for the highest frequency with zero misses.
    pub find_max: Option<FindMax>,
    /// Write each step's phases, per thread, to this timeline ([`trace`](super::trace)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceSpec>,
}

impl Default for LoopParams {
    /// 10 kHz (seed 000's gesture loop) on 2 CPUs at FIFO 95, 1001 modules, 512 bytes,
    /// 50,000 steps (5 s).
    fn default() -> Self {
        LoopParams {
            sched: SchedSpec {
                mlock: true,
                ..SchedSpec::pinned(facts::online_cpus(), Policy::Fifo { priority: 95 })
            },
            threads: 2,
            frequency_hz: 10_000.0,
            modules: 1_001,
            exchange_bytes: 512,
            steps: 50_000,
            margin: None,
            find_max: None,
            trace: None,
        }
    }
}

pub(super) fn period_of(frequency_hz: f64) -> Nanos {
    Nanos::new((1e9 / frequency_hz).round() as u64)
}

pub(super) fn khz(f: f64) -> String {
    if f >= 1_000.0 {
        let v = format!("{:.3}", f / 1e3);
        format!("{} kHz", v.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{f:.0} Hz")
    }
}
