//! The throughput probe's transfer loops allocate nothing: a counting global
//! allocator watches both threads while messages move.

#![allow(
    clippy::disallowed_types,
    reason = "a stop or start flag between threads: one store, loads that poll it; no protocol for loom to explore"
)]

use ictus_core::alloc_count::{self, Counting};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use ictus_core::{LatencyHistogram, Nanos};
use ictus_probe::progress::Progress;
use ictus_probe::setup::Length;
use ictus_probe::throughput::{self, Pacing, Placement, Plan, Transport};

/// Counts what watched code allocates (see `ictus_core::alloc_count`).
#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn throughput_loops_allocate_nothing_on_any_transport_in_either_mode() {
    const MESSAGES: u64 = 2_000;
    for transport in Transport::ALL {
        for mode in [Pacing::Sync, Pacing::Stream] {
            for payload in [0, 64, 4096] {
                let at = format!("{transport} {mode} {payload} B");
                // Waiting as on one CPU: the unpinned threads may share one.
                let (mut tx, mut rx) =
                    throughput::link(transport, mode, payload, Placement::SameCpu).unwrap();
                let start = Barrier::new(2);
                let received = AtomicBool::new(false);
                let mut round_trip = LatencyHistogram::new();
                let progress = Progress::new();
                let plan = Plan {
                    warmup: Nanos::ZERO,
                    length: Length::Count(MESSAGES),
                };
                alloc_count::reset();
                let (sent, got) = thread::scope(|scope| {
                    let receiver = scope.spawn(|| {
                        let mut one_way = LatencyHistogram::new();
                        start.wait();
                        let got = rx.receive_messages(&mut one_way).unwrap();
                        // Release: pairs with the Acquire load below, so the watch
                        // ends only after this loop did.
                        received.store(true, Ordering::Release);
                        got
                    });
                    start.wait();
                    alloc_count::watch_all(true);
                    let sent = tx.send_messages(&plan, &mut round_trip, &progress).unwrap();
                    // Acquire: pairs with the Release store above.
                    while !received.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    alloc_count::watch_all(false);
                    (sent, receiver.join().unwrap())
                });
                assert_eq!(sent.messages, MESSAGES, "{at}");
                assert_eq!(got.measured, MESSAGES, "{at}");
                assert_eq!(sent.checksum, got.checksum, "{at}");
                assert_eq!(alloc_count::count(), 0, "{at} allocated");
            }
        }
    }
}
