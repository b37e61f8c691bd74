//! [`Provenance`]: where and how a record was measured, captured at the start of a run.
//! Probe records and scenario results carry the same header, so it lives here, below
//! both `ictus-probe` and `ictus-shield` (`ictus_probe::provenance` re-exports it).
//!
//! ```no_run
//! let mut p = ictus_os::provenance::Provenance::capture(std::env::args().collect());
//! p.finish();
//! assert!(p.end_time.is_some());
//! ```

use std::time::SystemTime;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::facts;

/// The tool, the host and the time of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Always `ictus`.
    pub tool: String,
    /// The ictus version that measured (every ictus crate has the workspace's version).
    pub tool_version: String,
    /// The command line.
    pub argv: Vec<String>,
    /// Wall-clock start, RFC 3339 in UTC.
    pub start_time: String,
    /// Wall-clock end, RFC 3339 in UTC (absent while running).
    pub end_time: Option<String>,
    /// Host name.
    pub hostname: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`.
    pub kernel_version: String,
    /// Preemption model and how it was determined.
    pub preemption: facts::Preemption,
    /// The kernel command line.
    pub cmdline: String,
    /// CPU model name.
    pub cpu_model: Option<String>,
    /// Number of online CPUs.
    pub cpu_count: usize,
    /// Online CPUs.
    pub online_cpus: CpuSet,
    /// Whether SMT (hyper-threading) is active.
    pub smt: Option<bool>,
    /// CPUs isolated at boot (`isolcpus`).
    pub isolated_cpus: CpuSet,
    /// Frequency governor(s), absent without cpufreq.
    pub governor: Option<String>,
    /// Hypervisor, absent on bare metal.
    pub virtualization: Option<String>,
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

impl Provenance {
    /// Reads the host facts and stamps the start time.
    pub fn capture(argv: Vec<String>) -> Self {
        let kernel = facts::kernel();
        let online = facts::online_cpus();
        Provenance {
            tool: "ictus".to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            argv,
            start_time: now_rfc3339(),
            end_time: None,
            hostname: kernel.hostname,
            kernel_release: kernel.release,
            kernel_version: kernel.version,
            preemption: facts::preemption(),
            cmdline: facts::cmdline(),
            cpu_model: facts::cpu_model(),
            cpu_count: online.len(),
            online_cpus: online,
            smt: facts::smt_active(),
            isolated_cpus: facts::isolated_cpus(),
            governor: facts::governor(),
            virtualization: facts::virtualization(),
        }
    }

    /// Stamps the end time.
    pub fn finish(&mut self) {
        self.end_time = Some(now_rfc3339());
    }
}
