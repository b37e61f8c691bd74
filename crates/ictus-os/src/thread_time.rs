//! CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID`): what a
//! background load's worker reports as the CPU it actually got.
//!
//! ```
//! use ictus_os::thread_time::thread_cpu_time;
//! let before = thread_cpu_time();
//! let mut x = 0u64;
//! for i in 0..100_000u64 {
//!     x = std::hint::black_box(x.wrapping_add(i));
//! }
//! assert!(thread_cpu_time() >= before);
//! ```

use ictus_core::Nanos;

/// CPU time the calling thread has consumed since it started (user plus system), read
/// from `CLOCK_THREAD_CPUTIME_ID`.
pub fn thread_cpu_time() -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call;
    // CLOCK_THREAD_CPUTIME_ID exists on every Linux since 2.6.12, so the call cannot
    // fail and writes only `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Nanos::new(ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_accumulates_cpu_time_and_a_sleeping_one_hardly_any() {
        std::thread::spawn(|| {
            let start = thread_cpu_time();
            let wall = std::time::Instant::now();
            let mut x = 0u64;
            while wall.elapsed() < std::time::Duration::from_millis(20) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            let busy = thread_cpu_time().saturating_sub(start);
            assert!(busy > Nanos::ZERO);
            let before_sleep = thread_cpu_time();
            std::thread::sleep(std::time::Duration::from_millis(20));
            // Sleeping costs far less CPU than the 20 ms slept (structure, not timing:
            // a sleeping thread cannot consume its whole sleep).
            assert!(thread_cpu_time().saturating_sub(before_sleep) < Nanos::from_millis(20));
        })
        .join()
        .unwrap();
    }
}
