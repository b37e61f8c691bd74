//! The RT / NRT split of the CPUs as the task classes, the migration guard and the
//! balancer see it: either the one an applied shield made (read from its journal), or
//! a logical one given by hand (a scenario on a machine without a shield).

use std::fs;
use std::path::{Path, PathBuf};

use ictus_core::CpuSet;
use serde::{Deserialize, Serialize};

use crate::ShieldError;
use crate::journal::{self, Entry};
use crate::plan::{NRT_GROUP, RT_GROUP, split};

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
    /// A logical partition: `rt` of `online`, the rest NRT. Refuses an empty side.
    pub fn new(rt: CpuSet, online: &CpuSet) -> Result<Partition, ShieldError> {
        let nrt = split(&rt, online)?;
        Ok(Partition {
            rt,
            nrt,
            groups: None,
        })
    }

    /// The partition of the shield applied with `journal`, if one is.
    pub fn applied(journal_path: &Path) -> Result<Option<Partition>, ShieldError> {
        let Some(entries) = journal::read(journal_path)? else {
            return Ok(None);
        };
        Ok(entries.into_iter().find_map(|e| match e {
            Entry::Header {
                path,
                rt_cpus,
                nrt_cpus,
                cgroup_version,
                ..
            } => Some(Partition {
                rt: rt_cpus,
                nrt: nrt_cpus,
                groups: Some(Groups {
                    root: path,
                    cgroup_version,
                }),
            }),
            _ => None,
        }))
    }

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
    pub fn admit(&self, tid: i32, rt: bool) -> Result<Option<PathBuf>, ShieldError> {
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
        fs::write(&file, id.to_string()).map_err(|source| ShieldError::Write {
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
    fn a_logical_partition_keeps_one_nrt_cpu() {
        let online: CpuSet = "0-3".parse().unwrap();
        let sut = Partition::new("2-3".parse().unwrap(), &online).unwrap();
        assert_eq!(sut.nrt, "0-1".parse().unwrap());
        assert!(sut.is_rt(2) && !sut.is_rt(1));
        assert_eq!(sut.all(), online);
        assert!(Partition::new(online.clone(), &online).is_err());
    }

    #[test]
    fn no_journal_means_no_applied_partition() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Partition::applied(&dir.path().join("none")).unwrap(), None);
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
