//! The real-time paths of the core allocate nothing after construction: the SPSC
//! rings, the spin barrier, the histogram and the mass-interaction model's step. A
//! counting global allocator watches them.

use ictus_core::alloc_count::{self, Counting};

use ictus_core::mass::{Model, Params};
use ictus_core::sync::{SpinBarrier, spsc};
use ictus_core::{LatencyHistogram, Nanos};

/// Counts what watched code allocates (see `ictus_core::alloc_count`).
#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn ring_traffic_allocates_nothing() {
    let _turn = alloc_count::one_at_a_time();
    let (mut tx, mut rx) = spsc::channel::<u64>(64);
    let (mut btx, mut brx) = spsc::bytes::channel(512, 8);
    let n = alloc_count::allocations_of(|| {
        for i in 0..10_000u64 {
            tx.push(i).unwrap();
            assert_eq!(rx.pop(), Some(i));
            assert!(btx.try_write(|buf| {
                buf[..8].copy_from_slice(&i.to_ne_bytes());
                8
            }));
            assert_eq!(brx.try_read(|b| b.len()), Some(8));
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn the_spin_barrier_and_the_model_step_allocate_nothing() {
    let _turn = alloc_count::one_at_a_time();
    let mut model = Model::chain(1_000, &Params::default()).unwrap();
    let parts = model.partition(2);
    let barrier = SpinBarrier::new(2);
    let mut histogram = LatencyHistogram::new();
    let n = alloc_count::allocations_of(|| {
        for _ in 0..100 {
            model.step();
            histogram.record(Nanos::new(1_234));
        }
    });
    assert_eq!(n, 0, "single-thread step and record");
    // Threads are started before watching; only their steady-state loop is watched.
    // The test thread waits on blocking barriers so it never spins against them.
    let start = std::sync::Barrier::new(3);
    let done = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        for part in &parts {
            let (model, barrier, start, done) = (&model, &barrier, &start, &done);
            s.spawn(move || {
                start.wait();
                alloc_count::watch(true);
                for _ in 0..1_000 {
                    model.step_part(part, || {
                        barrier.wait();
                    });
                }
                alloc_count::watch(false);
                done.wait();
            });
        }
        alloc_count::reset();
        start.wait();
        done.wait();
        assert_eq!(
            alloc_count::count(),
            0,
            "partitioned steps with spin rendezvous"
        );
    });
}
