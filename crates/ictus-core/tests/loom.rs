//! Loom models of the lock-free structures in `ictus_core::sync`: every
//! interleaving of two small threads is run, and any data race, lost value or
//! stale read fails the model.
//!
//! The models are small enough to be explored exhaustively (about 15 s in
//! all, in release mode); `LOOM_MAX_PREEMPTIONS=3` bounds them further.
//!
//! Built only with `--cfg loom`, which swaps the atomics under `sync` for
//! loom's. Use a separate target directory so the normal build cache is kept:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p ictus-core --release --test loom
//! ```
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};

use ictus_core::sync::{SpinBarrier, spsc};
use loom::model;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

#[test]
fn values_cross_a_ring_of_two_in_order() {
    model(|| {
        let (mut tx, mut sut) = spsc::channel::<usize>(2);
        let producer = thread::spawn(move || {
            for i in 0..3 {
                let mut v = i;
                while let Err(full) = tx.push(v) {
                    v = full.into_inner();
                    thread::yield_now();
                }
            }
        });
        let mut expected = 0;
        while expected < 3 {
            match sut.pop() {
                Some(v) => {
                    assert_eq!(v, expected);
                    expected += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
        assert_eq!(sut.pop(), None);
    });
}

/// Counts its drops; the count is read only after both threads are joined.
struct Droppy(std::sync::Arc<StdAtomicUsize>);

impl Drop for Droppy {
    fn drop(&mut self) {
        // Relaxed: loom runs its threads on one OS thread; the total is read after join.
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

#[test]
fn every_value_is_dropped_once_whichever_end_goes_last() {
    model(|| {
        let drops = std::sync::Arc::new(StdAtomicUsize::new(0));
        let (mut tx, mut sut) = spsc::channel::<Droppy>(2);
        let d = drops.clone();
        let producer = thread::spawn(move || {
            for _ in 0..2 {
                assert!(tx.push(Droppy(d.clone())).is_ok());
            }
            // tx dropped here, possibly before or after the consumer's end.
        });
        drop(sut.pop());
        drop(sut);
        producer.join().unwrap();
        assert_eq!(drops.load(StdOrdering::Relaxed), 2);
    });
}

#[test]
fn byte_messages_cross_a_ring_of_two_intact() {
    model(|| {
        let (mut tx, mut sut) = spsc::bytes::channel(4, 2);
        let producer = thread::spawn(move || {
            for i in 0..3u8 {
                let len = usize::from(i) + 1;
                while !tx.try_write(|buf| {
                    buf[..len].fill(i);
                    len
                }) {
                    thread::yield_now();
                }
            }
        });
        let mut i = 0u8;
        while i < 3 {
            let intact =
                sut.try_read(|m| m.len() == usize::from(i) + 1 && m.iter().all(|&b| b == i));
            match intact {
                Some(ok) => {
                    assert!(ok, "message {i} arrived damaged");
                    i += 1;
                }
                None => thread::yield_now(),
            }
        }
        producer.join().unwrap();
    });
}

/// A ring of one slot: the consumer hands the slot back and the producer
/// refills it for the very next position, so the two sequence-word states
/// alternate in the same word. The producer waits for each message to be taken
/// (`is_empty`, as the throughput probe's sync mode does); the sizes of the two
/// ends agree once quiet.
#[test]
fn byte_messages_cross_a_ring_of_one_slot_intact() {
    model(|| {
        let (mut tx, mut sut) = spsc::bytes::channel(2, 1);
        let producer = thread::spawn(move || {
            for i in 1..3u8 {
                while !tx.try_write(|buf| {
                    buf[..usize::from(i)].fill(i);
                    usize::from(i)
                }) {
                    thread::yield_now();
                }
                while !tx.is_empty() {
                    thread::yield_now();
                }
            }
            tx
        });
        let mut i = 1u8;
        while i < 3 {
            let intact = sut.try_read(|m| m.len() == usize::from(i) && m.iter().all(|&b| b == i));
            match intact {
                Some(ok) => {
                    assert!(ok, "message {i} arrived damaged");
                    i += 1;
                }
                None => thread::yield_now(),
            }
        }
        let tx = producer.join().unwrap();
        assert_eq!((tx.len(), sut.len()), (0, 0));
        assert_eq!(sut.try_read(|m| m.len()), None);
    });
}

#[test]
fn the_barrier_orders_two_threads_over_two_generations() {
    const GENERATIONS: usize = 2;
    model(|| {
        let sut = Arc::new(SpinBarrier::new(2));
        // What each thread wrote before its latest wait.
        let written = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let leaders = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let run = |me: usize| {
            let (sut, written, leaders) = (sut.clone(), written.clone(), leaders.clone());
            move || {
                for g in 0..GENERATIONS {
                    // Relaxed: only the barrier may make this visible to the other.
                    written[me].store(g + 1, Ordering::Relaxed);
                    if sut.wait() {
                        leaders[g].fetch_add(1, Ordering::Relaxed);
                    }
                    // Relaxed: see above. The other thread may already be a
                    // generation ahead, but never behind.
                    let theirs = written[1 - me].load(Ordering::Relaxed);
                    assert!(theirs > g, "generation {g}: saw {theirs}");
                }
            }
        };
        let other = thread::spawn(run(1));
        run(0)();
        other.join().unwrap();
        for l in leaders.iter() {
            assert_eq!(l.load(Ordering::Relaxed), 1);
        }
    });
}
