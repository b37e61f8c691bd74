//! Warnings: what a run could not get or saw go wrong, with what to do about it. One
//! type for every crate (probe records, the executive's runs), so the same shortfall
//! has the same id everywhere and a reader matches on a variant, not on a string.
//!
//! ```
//! use ictus_core::warning::{Warning, WarningId};
//! let w = Warning::new(WarningId::PolicyRefused, "SCHED_FIFO refused", Some("run as root"));
//! assert_eq!(serde_json::to_string(&w.id).unwrap(), "\"policy-refused\"");
//! ```

use serde::{Deserialize, Serialize};

/// The stable identifier of a warning: its kebab-case name in records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WarningId {
    /// A real-time scheduling policy was refused; the normal class ran instead.
    PolicyRefused,
    /// Memory could not be locked.
    MlockRefused,
    /// A CPU affinity was refused.
    AffinityRefused,
    /// No CPU was left for a load or a thread.
    NoCpuLeft,
    /// RT throttling stalled (or may stall) busy real-time threads. (Records written
    /// before the ids were one type also said `rt-throttling`.)
    #[serde(alias = "rt-throttling")]
    RtThrottled,
    /// The hypervisor stole CPU time during the run.
    StealTime,
    /// Transparent huge pages are not available.
    ThpUnavailable,
    /// Huge pages were asked for and not obtained.
    ThpNotObtained,
    /// A figure rests on a reference measured elsewhere.
    Reference,
    /// The kernel's preemption model limits the latencies.
    Preemption,
    /// Missed deadlines could not be counted (an imported record).
    MissedUnknown,
    /// A state change or stop was announced later than its lead.
    LateAnnouncement,
    /// Interrupt counts could not be read.
    IrqUnavailable,
    /// The record was imported from another tool.
    Imported,
    /// The kernel's tick rate limits the timer.
    Hz,
    /// A value was beyond the histogram's range.
    HistogramOverflow,
    /// A run lost frames.
    FramesLost,
    /// A subsystem crashed (its process died, its thread panicked).
    Crash,
    /// A subsystem did not acknowledge a state in time.
    AckTimeout,
    /// A cell's writer stopped in the middle of a write.
    CellTorn,
    /// A host left a run across hosts.
    HostLost,
    /// Another host sent what was not its to send (a run across hosts): refused.
    LinkRefused,
    /// Cell publications of another host never arrived (a run across hosts): a full
    /// queue on the way dropped them (latest value wins).
    LinkDropped,
    /// A run across hosts on links without authentication (`--insecure`).
    InsecureLinks,
    /// This host's certificate or the run's CA ends within 14 days.
    KeysExpiring,
    /// A subsystem's `run` (or `shutdown`) returned an error.
    SubsystemError,
    /// The CPU latency QoS asked for could not be held (no device, no permission).
    PmQosRefused,
    /// Misses could not be explained (the sampler could not start).
    ExplainUnavailable,
    /// A subsystem overran and its `on_overrun` acts on it (warn, mode, stop-run).
    Overrun,
    /// A subsystem's frame ran longer than its `watchdog` limit.
    Watchdog,
    /// The tap (`--record`, `--trace`) dropped records: a ring was full.
    TapDropped,
    /// A sink of the tap (`--record`, `--trace`) failed and was stopped.
    TapSink,
    /// A trace file (`--trace`) reached its byte cap: later events were left out.
    TraceCapped,
    /// An id this version does not know (a record written by a later one).
    #[serde(other)]
    Other,
}

impl WarningId {
    /// Its name in records (`policy-refused`, ...).
    pub fn name(self) -> &'static str {
        match self {
            WarningId::PolicyRefused => "policy-refused",
            WarningId::MlockRefused => "mlock-refused",
            WarningId::AffinityRefused => "affinity-refused",
            WarningId::NoCpuLeft => "no-cpu-left",
            WarningId::RtThrottled => "rt-throttled",
            WarningId::StealTime => "steal-time",
            WarningId::ThpUnavailable => "thp-unavailable",
            WarningId::ThpNotObtained => "thp-not-obtained",
            WarningId::Reference => "reference",
            WarningId::Preemption => "preemption",
            WarningId::MissedUnknown => "missed-unknown",
            WarningId::LateAnnouncement => "late-announcement",
            WarningId::IrqUnavailable => "irq-unavailable",
            WarningId::Imported => "imported",
            WarningId::Hz => "hz",
            WarningId::HistogramOverflow => "histogram-overflow",
            WarningId::FramesLost => "frames-lost",
            WarningId::Crash => "crash",
            WarningId::AckTimeout => "ack-timeout",
            WarningId::CellTorn => "cell-torn",
            WarningId::HostLost => "host-lost",
            WarningId::LinkRefused => "link-refused",
            WarningId::LinkDropped => "link-dropped",
            WarningId::InsecureLinks => "insecure-links",
            WarningId::KeysExpiring => "keys-expiring",
            WarningId::SubsystemError => "subsystem-error",
            WarningId::PmQosRefused => "pm-qos-refused",
            WarningId::ExplainUnavailable => "explain-unavailable",
            WarningId::Overrun => "overrun",
            WarningId::Watchdog => "watchdog",
            WarningId::TapDropped => "tap-dropped",
            WarningId::TapSink => "tap-sink",
            WarningId::TraceCapped => "trace-capped",
            WarningId::Other => "other",
        }
    }
}

impl std::fmt::Display for WarningId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A shortfall or refusal, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What kind.
    pub id: WarningId,
    /// What happened.
    pub message: String,
    /// What a person can do, if anything.
    pub advice: Option<String>,
}

impl Warning {
    /// A warning of kind `id`.
    pub fn new(id: WarningId, message: impl Into<String>, advice: Option<&str>) -> Warning {
        Warning {
            id,
            message: message.into(),
            advice: advice.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_is_named_in_records_as_its_kebab_case() {
        for id in [
            WarningId::PolicyRefused,
            WarningId::RtThrottled,
            WarningId::HistogramOverflow,
            WarningId::Hz,
            WarningId::HostLost,
            WarningId::LinkRefused,
            WarningId::LinkDropped,
            WarningId::InsecureLinks,
            WarningId::KeysExpiring,
            WarningId::SubsystemError,
            WarningId::Overrun,
            WarningId::Watchdog,
            WarningId::TraceCapped,
        ] {
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, format!("\"{}\"", id.name()));
            assert_eq!(serde_json::from_str::<WarningId>(&json).unwrap(), id);
        }
        // The old spelling of one probe reads as the one id.
        let old: WarningId = serde_json::from_str("\"rt-throttling\"").unwrap();
        assert_eq!(old, WarningId::RtThrottled);
        // A record of a later version still reads.
        let later: WarningId = serde_json::from_str("\"gpu-throttled\"").unwrap();
        assert_eq!(later, WarningId::Other);
    }
}
