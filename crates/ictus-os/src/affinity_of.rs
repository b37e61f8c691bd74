//! CPU affinity of another thread, by its thread id: read and set. The shield records
//! every task's affinity before it changes anything and puts it back on reset.

use std::io;

use ictus_core::CpuSet;

/// The CPUs thread `tid` may run on (`sched_getaffinity(tid)`).
pub fn affinity_of(tid: i32) -> io::Result<CpuSet> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed; the kernel only writes into it.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CpuSet::from_cpus((0..libc::CPU_SETSIZE as usize).filter(
        |&c| {
            // SAFETY: c < CPU_SETSIZE, and `set` is initialised.
            unsafe { libc::CPU_ISSET(c, &set) }
        },
    )))
}

/// Sets the CPUs thread `tid` may run on (`sched_setaffinity(tid)`). Needs
/// `CAP_SYS_NICE` for another user's thread; per-CPU kernel threads refuse (EINVAL).
pub fn set_affinity_of(tid: i32, cpus: &CpuSet) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.cpus() {
        // SAFETY: every cpu is at most MAX_CPU (1023) < CPU_SETSIZE (1024), checked by CpuSet.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; the kernel only reads it.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_affinity_reads_back_what_was_set() {
        let tid = crate::sched::thread_id() as i32;
        let sut = affinity_of(tid).unwrap();
        assert!(!sut.is_empty());
        set_affinity_of(tid, &sut).unwrap();
        assert_eq!(affinity_of(tid).unwrap(), sut);
    }
}
