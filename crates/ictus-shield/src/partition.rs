//! The RT / NRT split of the CPUs ([`Partition`], which lives in `ictus-class` with the
//! task classes that use it): the one an applied shield made, read from its journal
//! ([`applied`]), or a logical one given by hand ([`logical`]: a scenario on a machine
//! without a shield).

use std::path::Path;

pub use ictus_class::partition::{Groups, Partition};
use ictus_core::CpuSet;

use crate::ShieldError;
use crate::journal::{self, Entry};
use crate::plan::split;

/// A logical partition: `rt` of `online`, the rest NRT. Refuses an empty side.
pub fn logical(rt: CpuSet, online: &CpuSet) -> Result<Partition, ShieldError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logical_partition_keeps_one_nrt_cpu() {
        let online: CpuSet = "0-3".parse().unwrap();
        let sut = logical("2-3".parse().unwrap(), &online).unwrap();
        assert_eq!(sut.nrt, "0-1".parse().unwrap());
        assert!(sut.is_rt(2) && !sut.is_rt(1));
        assert_eq!(sut.all(), online);
        assert!(logical(online.clone(), &online).is_err());
    }

    #[test]
    fn no_journal_means_no_applied_partition() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(applied(&dir.path().join("none")).unwrap(), None);
    }
}
