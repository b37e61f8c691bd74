//! [`SpinBarrier`]: a reusable rendezvous where threads on different cores meet
//! by spinning, never by sleeping in the kernel.
//!
//! ```
//! use ictus_core::sync::SpinBarrier;
//! use std::sync::Arc;
//!
//! let barrier = Arc::new(SpinBarrier::new(3));
//! let handles: Vec<_> = (0..3)
//!     .map(|_| {
//!         let b = Arc::clone(&barrier);
//!         std::thread::spawn(move || (0..10).filter(|_| b.wait()).count())
//!     })
//!     .collect();
//! let leaders: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(leaders, 10); // one leader per generation
//! ```

use std::fmt;

use super::CachePadded;
use super::atomic::{AtomicUsize, Ordering, spin_loop};

/// A barrier for a fixed number of threads that can be passed again and again.
///
/// Each pass is a *generation*: the last thread to arrive becomes its leader,
/// resets the arrival count and opens the next generation; the others spin on
/// the generation number until it changes. Arrivals and the generation number
/// sit in separate cache-line pairs, so arriving threads do not disturb the
/// line the waiting ones are spinning on.
///
/// Like [`std::sync::Barrier`], everything a thread did before `wait` happens
/// before everything any thread of the same generation does after it. Unlike
/// it, waiting burns the CPU: use it only for threads that each own a core.
///
/// A party that leaves for good (its loop ended early, it panicked) calls
/// [`SpinBarrier::abandon`]: from then on every `wait`, in progress or later,
/// returns at once, so no partner spins for ever on a thread that is gone.
pub struct SpinBarrier {
    /// Threads that have arrived in the current generation.
    arrived: CachePadded<AtomicUsize>,
    /// Number of the current generation (wraps).
    generation: CachePadded<AtomicUsize>,
    /// Threads that meet at each generation.
    parties: usize,
    /// Non-zero once a party has abandoned the barrier (never reset). Written
    /// once, read by the spinners: it stays shared in their caches.
    abandoned: AtomicUsize,
}

impl SpinBarrier {
    /// A barrier for `parties` threads. Allocates nothing.
    ///
    /// # Panics
    ///
    /// If `parties` is zero.
    pub fn new(parties: usize) -> Self {
        assert!(parties > 0, "a barrier needs at least one party");
        SpinBarrier {
            arrived: CachePadded::new(AtomicUsize::new(0)),
            generation: CachePadded::new(AtomicUsize::new(0)),
            parties,
            abandoned: AtomicUsize::new(0),
        }
    }

    /// The number of threads that meet at each generation.
    pub fn parties(&self) -> usize {
        self.parties
    }

    /// Spins until all `parties` threads have called `wait` for this
    /// generation. Returns `true` on exactly one of them (the last to arrive,
    /// the generation's leader) and `false` on the others.
    ///
    /// Never allocates, never makes a system call. Exactly `parties` threads
    /// must use the barrier; a surplus one would be counted in the wrong
    /// generation.
    ///
    /// Once the barrier is [abandoned](SpinBarrier::abandon), returns `false`
    /// at once (also to a thread already spinning) and orders nothing.
    #[inline]
    pub fn wait(&self) -> bool {
        if self.is_abandoned() {
            return false;
        }
        // Acquire: pairs with the Release store of generation by the previous
        // generation's leader (below), so we read the current number. It cannot
        // move on before our own arrival is counted.
        let generation = self.generation.load(Ordering::Acquire);
        // AcqRel: the Release half pairs with the leader's Acquire through this
        // same read-modify-write chain, publishing our earlier writes to it; the
        // Acquire half (used by the leader) collects every earlier arrival's.
        let arrived = self.arrived.fetch_add(1, Ordering::AcqRel) + 1;
        if arrived == self.parties {
            // Relaxed: ordered before the Release store of generation just below,
            // which every next-generation fetch_add (above) happens after.
            self.arrived.store(0, Ordering::Relaxed);
            // Release: pairs with the Acquire loads of generation in the spin loop
            // below and at the top of the next wait, handing everything that all
            // parties did before this wait to every party.
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            true
        } else {
            // Acquire: pairs with the leader's Release store of generation above.
            while self.generation.load(Ordering::Acquire) == generation {
                if self.is_abandoned() {
                    return false;
                }
                spin_loop();
            }
            false
        }
    }

    /// Leaves the barrier for good: every party's `wait`, the ones spinning now
    /// and all later ones, returns `false` at once. Call it from a party that
    /// will not arrive again (also from a drop guard while panicking).
    pub fn abandon(&self) {
        // Release: what the leaving party did is visible to a waiter that sees it.
        self.abandoned.store(1, Ordering::Release);
    }

    /// Whether a party has [abandoned](SpinBarrier::abandon) the barrier.
    #[inline]
    pub fn is_abandoned(&self) -> bool {
        // Acquire: pairs with the Release store in `abandon`.
        self.abandoned.load(Ordering::Acquire) != 0
    }
}

impl fmt::Debug for SpinBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpinBarrier")
            .field("parties", &self.parties)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::offset_of;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;

    #[test]
    fn a_barrier_of_one_never_waits_and_always_leads() {
        let sut = SpinBarrier::new(1);
        assert!((0..5).all(|_| sut.wait()));
        assert_eq!(sut.parties(), 1);
    }

    #[test]
    fn arrivals_and_generation_sit_in_separate_line_pairs() {
        let a = offset_of!(SpinBarrier, arrived);
        let g = offset_of!(SpinBarrier, generation);
        assert!(a.abs_diff(g) >= 128);
    }

    #[test]
    fn an_abandoned_barrier_releases_a_spinning_party_and_every_later_wait() {
        let sut = Arc::new(SpinBarrier::new(2));
        let waiter = {
            let sut = sut.clone();
            std::thread::spawn(move || sut.wait())
        };
        // The waiter is spinning (or about to): nobody else will ever arrive.
        std::thread::sleep(std::time::Duration::from_millis(10));
        assert!(!sut.is_abandoned());
        sut.abandon();
        assert!(!waiter.join().unwrap());
        assert!(sut.is_abandoned());
        assert!((0..3).all(|_| !sut.wait()));
    }

    #[test]
    #[should_panic(expected = "at least one party")]
    fn a_barrier_of_nobody_is_refused() {
        let _ = SpinBarrier::new(0);
    }

    #[test]
    fn every_generation_has_one_leader_and_nobody_leaves_early() {
        const THREADS: usize = 3;
        const GENERATIONS: usize = if cfg!(miri) { 20 } else { 50 };
        let sut = Arc::new(SpinBarrier::new(THREADS));
        let arrivals = Arc::new(StdAtomicUsize::new(0));
        let leaders: Arc<Vec<StdAtomicUsize>> =
            Arc::new((0..GENERATIONS).map(|_| StdAtomicUsize::new(0)).collect());
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (sut, arrivals, leaders) = (sut.clone(), arrivals.clone(), leaders.clone());
                std::thread::spawn(move || {
                    for g in 0..GENERATIONS {
                        // Relaxed: the barrier itself must order these.
                        arrivals.fetch_add(1, Ordering::Relaxed);
                        if sut.wait() {
                            leaders[g].fetch_add(1, Ordering::Relaxed);
                        }
                        let seen = arrivals.load(Ordering::Relaxed);
                        assert!(seen >= THREADS * (g + 1), "left generation {g} early");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(leaders.iter().all(|l| l.load(Ordering::Relaxed) == 1));
    }
}
