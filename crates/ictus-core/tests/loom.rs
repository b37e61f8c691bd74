//! Loom models of the lock-free structures in `ictus_core::sync`: every
//! interleaving of two small threads is run, and any data race, lost value or
//! stale read fails the model.
//!
//! Covered: the SPSC rings, the spin barrier, the seqlock of the cells, and the
//! hub protocols (semaphore, event, port, FIFO ring).
//!
//! The models are small enough to be explored exhaustively in release mode;
//! `LOOM_MAX_PREEMPTIONS=3` bounds them further.
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

use ictus_core::sync::hub::{EventWords, PortWords, Ring, SemaphoreWords, SpinPark};
use ictus_core::sync::seqlock::{Seqlock, SeqlockView, region_words};
use ictus_core::sync::{AtomicU32, AtomicU64, SpinBarrier, spsc};
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

/// A party that abandons the barrier releases one spinning on it, whatever the
/// interleaving, and what it wrote before is visible to it.
#[test]
fn an_abandoned_barrier_releases_its_waiter() {
    model(|| {
        let sut = Arc::new(SpinBarrier::new(2));
        let written = Arc::new(AtomicUsize::new(0));
        let waiter = {
            let (sut, written) = (sut.clone(), written.clone());
            thread::spawn(move || {
                let led = sut.wait();
                // Relaxed: ordered by the barrier's abandon/is_abandoned pair.
                (led, written.load(Ordering::Relaxed))
            })
        };
        // Relaxed: see above.
        written.store(7, Ordering::Relaxed);
        sut.abandon();
        let (led, seen) = waiter.join().unwrap();
        assert!(!led);
        assert_eq!(seen, 7);
    });
}

/// A seqlock of two words: the writer writes two patterns in which every byte
/// is the same; a reader's attempts never return bytes of two writes mixed,
/// and the sequences they return never go back and name the write seen.
/// (Single attempts keep the model small; `read` is `try_read` in a loop.)
#[test]
fn a_seqlock_reader_never_sees_a_torn_write() {
    model(|| {
        let sut = Arc::new(Seqlock::new(16));
        let writer = {
            let sut = sut.clone();
            thread::spawn(move || {
                sut.write(&[1; 16]);
                sut.write(&[2; 16]);
            })
        };
        let mut out = [0xff; 16];
        let mut last = 0;
        for _ in 0..2 {
            if let Some(seq) = sut.try_read(&mut out) {
                assert!(seq >= last, "sequence went back from {last} to {seq}");
                last = seq;
                let expected = (seq / 2) as u8;
                assert!(
                    out.iter().all(|&b| b == expected),
                    "torn snapshot at sequence {seq}: {out:?}"
                );
            }
        }
        writer.join().unwrap();
        assert_eq!(sut.read(&mut out), 4);
        assert_eq!(out, [2; 16]);
    });
}

/// A spinning read waits out a write in progress and returns a whole one.
#[test]
fn a_seqlock_read_returns_a_whole_write() {
    model(|| {
        let sut = Arc::new(Seqlock::new(16));
        let writer = {
            let sut = sut.clone();
            thread::spawn(move || sut.write(&[5; 16]))
        };
        let mut out = [0xff; 16];
        match sut.read(&mut out) {
            0 => assert_eq!(out, [0; 16]),
            2 => assert_eq!(out, [5; 16]),
            other => panic!("sequence {other} after at most one write"),
        }
        writer.join().unwrap();
    });
}

/// One attempt at a read either fails or returns a coherent snapshot.
#[test]
fn a_seqlock_try_read_returns_a_whole_write_or_nothing() {
    model(|| {
        let words: Arc<Vec<AtomicU64>> =
            Arc::new((0..region_words(16)).map(|_| AtomicU64::new(0)).collect());
        let writer = {
            let words = words.clone();
            thread::spawn(move || SeqlockView::new(&words, 16).write(&[7; 16]))
        };
        let sut = SeqlockView::new(&words, 16);
        let mut out = [0xff; 16];
        match sut.try_read(&mut out) {
            Some(0) => assert_eq!(out, [0; 16]),
            Some(2) => assert_eq!(out, [7; 16]),
            Some(other) => panic!("sequence {other} after at most one write"),
            None => {}
        }
        writer.join().unwrap();
    });
}

/// Two writers of different bytes of one region: the claim keeps their
/// read-modify-writes of the shared word apart, so neither update is lost.
#[test]
fn two_seqlock_writers_of_one_word_keep_both_updates() {
    model(|| {
        let sut = Arc::new(Seqlock::new(8));
        let other = {
            let sut = sut.clone();
            thread::spawn(move || sut.write_at(4, &[2; 4]))
        };
        sut.write_at(0, &[1; 4]);
        other.join().unwrap();
        let mut out = [0; 8];
        assert_eq!(sut.read(&mut out), 4);
        assert_eq!(out, [1, 1, 1, 1, 2, 2, 2, 2]);
    });
}

/// Runs a model with at most `preemptions` preemptions per execution: for the
/// hub models, whose spin-waits make the unbounded exploration too long. (Bugs
/// in such protocols show up within two or three preemptions.)
fn bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

fn words32(n: usize) -> Arc<Vec<AtomicU32>> {
    Arc::new((0..n).map(|_| AtomicU32::new(0)).collect())
}

/// Tokens given on one thread are taken on the other, none lost, none made up,
/// and what the giver wrote before giving is seen by the taker.
#[test]
fn semaphore_tokens_cross_threads_with_what_was_written_before() {
    model(|| {
        let words = words32(SemaphoreWords::WORDS);
        let data = Arc::new(AtomicUsize::new(0));
        let giver = {
            let (words, data) = (words.clone(), data.clone());
            thread::spawn(move || {
                // Relaxed: the semaphore must order it.
                data.store(42, Ordering::Relaxed);
                let sut = SemaphoreWords::new(&words);
                sut.give(&SpinPark);
                sut.give(&SpinPark);
            })
        };
        let sut = SemaphoreWords::new(&words);
        assert!(sut.take(&SpinPark, None));
        // Relaxed: ordered by the give/take pair.
        assert_eq!(data.load(Ordering::Relaxed), 42);
        assert!(sut.take(&SpinPark, None));
        giver.join().unwrap();
        assert_eq!(sut.count(), 0);
        assert!(!sut.try_take());
    });
}

/// An event raised once releases exactly one wait.
#[test]
fn an_event_raise_releases_one_wait() {
    model(|| {
        let words = words32(EventWords::WORDS);
        let raiser = {
            let words = words.clone();
            thread::spawn(move || EventWords::new(&words).raise(&SpinPark))
        };
        let sut = EventWords::new(&words);
        assert!(sut.wait(&SpinPark, None));
        raiser.join().unwrap();
        assert!(!sut.try_wait());
    });
}

/// Two messages through a port: each arrives whole, with what the sender
/// wrote before sending it, and the sender never runs more than one message
/// ahead of the receiver (a send returns only once its message is taken).
#[test]
fn port_messages_arrive_whole_and_the_sender_waits_for_each() {
    bounded(3, || {
        let words = words32(PortWords::words_for(8));
        // Sends completed so far.
        let sent = Arc::new(AtomicUsize::new(0));
        let sender = {
            let (words, sent) = (words.clone(), sent.clone());
            thread::spawn(move || {
                let sut = PortWords::new(&words, 8);
                for i in 1..=2u8 {
                    sut.send(&[i; 8], &SpinPark);
                    // Relaxed: published to the receiver by the next send's FULL.
                    sent.store(usize::from(i), Ordering::Relaxed);
                }
            })
        };
        let sut = PortWords::new(&words, 8);
        let mut out = [0; 8];
        for i in 1..=2u8 {
            assert!(sut.receive(&mut out, &SpinPark, None));
            assert_eq!(out, [i; 8]);
            // Relaxed: the hand-over of message i orders the store of i - 1.
            let done = sent.load(Ordering::Relaxed);
            let i = usize::from(i);
            assert!(
                (i - 1..=i).contains(&done),
                "message {i} received with {done} sends done"
            );
        }
        sender.join().unwrap();
        assert!(!sut.try_receive(&mut out, &SpinPark));
    });
}

/// Three messages through a FIFO ring of two slots, in order and whole, the
/// producer waiting while it is full and the consumer while it is empty.
#[test]
fn fifo_ring_messages_cross_in_order() {
    bounded(3, || {
        let words = words32(Ring::words_for(2, 8));
        let producer = {
            let words = words.clone();
            thread::spawn(move || {
                let sut = Ring::new(&words, 2, 8);
                let mut cursor = sut.producer();
                for i in 1..=3u8 {
                    assert!(sut.push(&mut cursor, &[i; 8], &SpinPark, None));
                }
            })
        };
        let sut = Ring::new(&words, 2, 8);
        let mut cursor = sut.consumer();
        let mut out = [0; 8];
        for i in 1..=3u8 {
            assert!(sut.pop(&mut cursor, &mut out, &SpinPark, None));
            assert_eq!(out, [i; 8]);
        }
        producer.join().unwrap();
        assert!(sut.is_empty());
    });
}

/// The split hand-over that serves a receiver on another host: a relay claims
/// the message (copy), gives it back once (its receiver went away), claims it
/// again and only then marks it taken; the sender's `collect` returns only
/// after `taken`, and the message arrives whole both times.
#[test]
fn port_claim_unclaim_taken_keeps_the_sender_waiting_until_taken() {
    bounded(3, || {
        let words = words32(PortWords::words_for(8));
        // 1 once the relay has marked the message taken.
        let marked = Arc::new(AtomicUsize::new(0));
        let relay = {
            let (words, marked) = (words.clone(), marked.clone());
            thread::spawn(move || {
                let sut = PortWords::new(&words, 8);
                let mut out = [0; 8];
                assert!(sut.claim(&mut out, &SpinPark, None));
                assert_eq!(out, [7; 8]);
                sut.unclaim(&SpinPark);
                assert!(sut.claim(&mut out, &SpinPark, None));
                assert_eq!(out, [7; 8]);
                // Relaxed: published to the sender by the Release of `taken`.
                marked.store(1, Ordering::Relaxed);
                sut.taken(&SpinPark);
            })
        };
        let sut = PortWords::new(&words, 8);
        assert!(sut.offer(&[7; 8], &SpinPark, None));
        assert!(sut.collect(&SpinPark, None));
        // Relaxed: `collect` acquired the relay's TAKEN, which came after.
        assert_eq!(marked.load(Ordering::Relaxed), 1);
        relay.join().unwrap();
        assert!(!sut.is_full());
    });
}
