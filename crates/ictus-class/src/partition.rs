//! The RT / NRT split of the CPUs as the task classes, the migration guard and the
//! balancer see it ([`Partition`]): either the one an applied shield made (the shield
//! reads it from its journal), or a logical one given by hand (a scenario on a machine
//! without a shield). With an applied shield's cpuset [`Groups`], a thread joins the
//! group its class needs ([`Partition::admit`]).

use std::fs;
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The cpuset group of the RT CPUs (an exclusive cpuset on cgroup v1, a partition
/// on v2).
pub const RT_GROUP: &str = "ictus-rt";
/// The cpuset group every movable task is put in (cgroup v1 only).
pub const NRT_GROUP: &str = "ictus-nrt";

/// A cpuset join file refused a thread or process.
#[derive(Debug, Error)]
#[error("writing {value:?} to {path}: {source}")]
pub struct CpusetError {
    /// The file.
    pub path: PathBuf,
    /// The value.
    pub value: String,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// RT CPUs and NRT CPUs: disjoint, both non-empty, together the CPUs in play.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// CPUs for the real-time work.
    pub rt: CpuSet,
    /// Every other CPU in play: the system and the work that may disturb latency.
    pub nrt: CpuSet,
    /// The cpuset groups of an applied shield, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Groups>,
}

/// Where an applied shield's cpuset groups are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Groups {
    /// The cpuset root (`/sys/fs/cgroup/cpuset` on v1, `/sys/fs/cgroup` on v2).
    pub root: PathBuf,
    /// cgroup version: 1 or 2.
    pub cgroup_version: u8,
}

impl Groups {
    /// The file a thread id (v1) or a process id (v2) is written to, to join `group`
    /// (`None`: the root group, which spans every CPU on v1).
    pub fn join_file(&self, group: Option<&str>) -> PathBuf {
        let dir = match group {
            Some(g) => self.root.join(g),
            None => self.root.clone(),
        };
        if self.cgroup_version == 1 {
            dir.join("tasks")
        } else {
            dir.join("cgroup.procs")
        }
    }

    /// The group RT0 tasks join.
    pub fn rt_group(&self) -> &'static str {
        RT_GROUP
    }

    /// The group every movable task was put in (v1 only).
    pub fn nrt_group(&self) -> Option<&'static str> {
        (self.cgroup_version == 1).then_some(NRT_GROUP)
    }
}

impl Partition {
    /// Whether `cpu` is an RT CPU.
    pub fn is_rt(&self, cpu: usize) -> bool {
        self.rt.contains(cpu)
    }

    /// Every CPU in play.
    pub fn all(&self) -> CpuSet {
        CpuSet::from_cpus(self.rt.cpus().iter().chain(self.nrt.cpus()).copied())
    }

    /// Moves thread `tid` into the cpuset group that lets it run where its class needs:
    /// `rt` true for RT0 (the shield's RT group), false for tasks that must span RT and
    /// NRT CPUs (the root group on v1). Does nothing without an applied shield. On
    /// cgroup v2, a whole process moves (`cgroup.procs`), and the root group no longer
    /// spans an isolated partition's CPUs: RT1+ tasks then stay on the NRT CPUs.
    pub fn admit(&self, tid: i32, rt: bool) -> Result<Option<PathBuf>, CpusetError> {
        let Some(groups) = &self.groups else {
            return Ok(None);
        };
        let file = groups.join_file(rt.then_some(groups.rt_group()));
        let id = if groups.cgroup_version == 1 {
            tid
        } else {
            // v2 moves processes; the thread group id of `tid`.
            tgid_of(tid).unwrap_or(tid)
        };
        fs::write(&file, id.to_string()).map_err(|source| CpusetError {
            path: file.clone(),
            value: id.to_string(),
            source,
        })?;
        Ok(Some(file))
    }
}

/// The process (thread group) of thread `tid`, from `/proc/<tid>/status`.
fn tgid_of(tid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_its_rt_and_nrt_cpus() {
        let sut = Partition {
            rt: "2-3".parse().unwrap(),
            nrt: "0-1".parse().unwrap(),
            groups: None,
        };
        assert!(sut.is_rt(2) && !sut.is_rt(1));
        assert_eq!(sut.all(), "0-3".parse().unwrap());
        assert_eq!(
            sut.admit(1, true).unwrap(),
            None,
            "no groups: nothing to join"
        );
    }

    #[test]
    fn join_files_follow_the_cgroup_version() {
        let v1 = Groups {
            root: "/sys/fs/cgroup/cpuset".into(),
            cgroup_version: 1,
        };
        assert_eq!(
            v1.join_file(Some(RT_GROUP)),
            Path::new("/sys/fs/cgroup/cpuset/ictus-rt/tasks")
        );
        assert_eq!(v1.join_file(None), Path::new("/sys/fs/cgroup/cpuset/tasks"));
        let v2 = Groups {
            root: "/sys/fs/cgroup".into(),
            cgroup_version: 2,
        };
        assert_eq!(
            v2.join_file(Some(RT_GROUP)),
            Path::new("/sys/fs/cgroup/ictus-rt/cgroup.procs")
        );
        assert_eq!(v2.nrt_group(), None);
    }
}
