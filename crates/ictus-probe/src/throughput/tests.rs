use crate::setup::Length;
use std::thread;

use ictus_core::{CpuSet, LatencyHistogram, Nanos};
use ictus_os::facts;
use ictus_os::sched::Policy;

use super::view::{Memcpy, Targets, Transfer};
use crate::progress::Progress;
use crate::record::Measurement;
use crate::rendezvous::view::CachelineRoundTrip;
use crate::setup::Placement;
use crate::setup::SchedSpec;

use super::link::{Plan, ReceiverOutcome, SenderOutcome, link};
use super::params::{
    HEADER_BYTES, MAX_PAYLOAD_BYTES, MEASUREMENT, Pacing, ThroughputError, ThroughputParams,
    Transport, sizes_up_to, validate,
};
use super::wire::{checksum, head_sum, pattern_byte};
use super::*;
use crate::view::tests::reads_back;

fn two_cpus() -> bool {
    facts::online_cpus().len() >= 2
}

/// Moves `messages` messages of `n` bytes over `transport` between two unpinned
/// threads (waiting as on one CPU, so a shared CPU cannot stall them).
fn transfer(
    transport: Transport,
    mode: Pacing,
    n: usize,
    messages: u64,
) -> (SenderOutcome, ReceiverOutcome) {
    let (mut tx, mut rx) = link(transport, mode, n, Placement::SameCpu).unwrap();
    let receiver = thread::spawn(move || {
        let mut one_way = LatencyHistogram::new();
        let out = rx.receive_messages(&mut one_way).unwrap();
        assert_eq!(one_way.count(), out.measured);
        out
    });
    let plan = Plan {
        warmup: Nanos::ZERO,
        length: Length::Count(messages),
    };
    let mut round_trip = LatencyHistogram::new();
    let sent = tx
        .send_messages(&plan, &mut round_trip, &Progress::new())
        .unwrap();
    let expected_rt = if mode == Pacing::Sync { messages } else { 0 };
    assert_eq!(round_trip.count(), expected_rt);
    (sent, receiver.join().unwrap())
}

#[test]
fn every_transport_moves_messages_of_every_size_intact() {
    for transport in Transport::ALL {
        for mode in [Pacing::Sync, Pacing::Stream] {
            for n in [0, 1, 7, 8, 9, 64, 100, 4096, 40_000] {
                let (sent, received) = transfer(transport, mode, n, 300);
                let at = format!("{transport} {mode} {n} B");
                assert_eq!(sent.messages, 300, "{at}");
                assert_eq!(sent.measured, 300, "{at}");
                assert_eq!(received.messages, 300, "{at}");
                assert_eq!(received.measured, 300, "{at}");
                assert_eq!(sent.checksum, received.checksum, "{at}");
                assert!(received.first_stamp <= received.last_arrival, "{at}");
                let batch = if mode == Pacing::Sync { 300 } else { 0 };
                assert_eq!(sent.batch_messages, batch, "{at}");
                assert_eq!(received.batch_messages, batch, "{at}");
            }
        }
    }
}

#[test]
fn the_senders_sum_matches_the_bytes_it_sends() {
    for n in 0..40 {
        let msg: Vec<u8> = (0..HEADER_BYTES + n).map(pattern_byte).collect();
        let mut zeroed = msg[HEADER_BYTES..].to_vec();
        zeroed[..n.min(8)].fill(0);
        let base = checksum(&zeroed);
        for seq in [1u64, 255, 256, 0x0102_0304_0506_0708, u64::MAX] {
            let mut sut = zeroed.clone();
            sut[..n.min(8)].copy_from_slice(&seq.to_le_bytes()[..n.min(8)]);
            assert_eq!(
                checksum(&sut),
                base.wrapping_add(head_sum(seq, n)),
                "{n} B, seq {seq}"
            );
        }
    }
}

#[test]
fn the_checksum_is_the_sum_of_the_words_then_the_trailing_bytes() {
    let bytes: Vec<u8> = (0..300).map(pattern_byte).collect();
    for n in 0..bytes.len() {
        let payload = &bytes[..n];
        let words = payload.chunks_exact(8);
        let rest = words.remainder().iter().map(|&b| u64::from(b));
        let expected = words
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .chain(rest)
            .fold(0u64, u64::wrapping_add);
        assert_eq!(checksum(payload), expected, "{n} B");
    }
}

#[test]
fn the_checksum_reads_every_byte() {
    let mut sut = vec![0u8; 137];
    assert_eq!(checksum(&sut), 0);
    for i in 0..sut.len() {
        sut[i] = 1;
        assert_ne!(checksum(&sut), 0, "byte {i} not read");
        sut[i] = 0;
    }
}

#[test]
fn the_sweep_is_zero_then_powers_of_two() {
    let sut = sizes_up_to(32 * 1024);
    assert_eq!(sut.len(), 17);
    assert_eq!(&sut[..4], &[0, 1, 2, 4]);
    assert_eq!(sut.last(), Some(&32_768));
    assert_eq!(sizes_up_to(100), vec![0, 1, 2, 4, 8, 16, 32, 64, 100]);
    assert_eq!(sizes_up_to(0), vec![0]);
}

#[test]
fn the_record_has_one_point_per_transport_placement_and_size() {
    let placements = if two_cpus() {
        Placement::ALL.to_vec()
    } else {
        vec![Placement::SameCpu]
    };
    let params = ThroughputParams {
        sched: SchedSpec {
            policy: Policy::Other { nice: 0 },
            ..ThroughputParams::default().sched
        },
        placements: placements.clone(),
        sizes: vec![0, 64, 4096],
        length: Length::Count(50),
        warmup: Nanos::from_micros(100),
        round_trips: 1_000,
        ..ThroughputParams::default()
    };
    let progress = Progress::new();
    let sut = run(&params, vec![], &progress).unwrap();
    assert!(sut.complete);
    assert_eq!(progress.done(), progress.total());
    let transfers: Vec<_> = sut
        .measurements
        .iter()
        .filter(|m| m.is::<Transfer>())
        .collect();
    assert_eq!(transfers.len(), 4 * placements.len() * 3);
    for m in &transfers {
        let p = reads_back::<Transfer>(m);
        assert_eq!(p.metrics.messages, 50.0, "{:?}", m.labels);
        assert_eq!(m.latency.as_ref().unwrap().summary.count, 50);
        assert!(p.metrics.round_trip_p50_ns.is_some());
        assert_eq!(p.metrics.batch_messages, Some(50.0), "{:?}", m.labels);
        assert!(p.metrics.one_way_half_round_trip_ns.unwrap() > 0.0);
        assert_eq!(p.labels.mode, Pacing::Sync);
        assert_eq!(m.labels["mode"], "sync");
    }
    let memcpy = sut.measurements.iter().filter(|m| m.is::<Memcpy>());
    assert_eq!(memcpy.map(reads_back::<Memcpy>).count(), 3);
    if two_cpus() {
        let rt = sut
            .measurements
            .iter()
            .find(|m| m.is::<CachelineRoundTrip>());
        reads_back::<CachelineRoundTrip>(rt.unwrap());
        let targets = sut.measurements.iter().find(|m| m.is::<Targets>());
        let t = reads_back::<Targets>(targets.unwrap()).metrics;
        assert!(t.spsc_one_way_vs_half_round_trip.unwrap() > 0.0);
        assert!(t.spsc_one_way_p50_vs_half_round_trip.unwrap() > 0.0);
        assert!(t.spsc_vs_memcpy.unwrap() > 0.0);
        assert!(sut.headline.unwrap().contains("spsc"));
    }
    // The record survives a JSON round trip (no NaN among the figures).
    let json = serde_json::to_string(&sut.measurements).unwrap();
    let back: Vec<Measurement> = serde_json::from_str(&json).unwrap();
    assert_eq!(back.len(), sut.measurements.len());
}

#[test]
fn a_stop_request_gives_an_incomplete_record() {
    let progress = Progress::new();
    progress.request_stop();
    let params = ThroughputParams {
        placements: vec![Placement::SameCpu],
        sizes: vec![8],
        ..ThroughputParams::default()
    };
    let sut = run(&params, vec![], &progress).unwrap();
    assert!(!sut.complete);
    assert!(sut.measurements.iter().all(|m| m.name != MEASUREMENT));
}

#[test]
fn bad_parameters_are_refused_before_anything_runs() {
    let base = ThroughputParams::default();
    let none = ThroughputParams {
        transports: vec![],
        ..base.clone()
    };
    assert!(matches!(
        validate(&none),
        Err(ThroughputError::NothingToRun)
    ));
    let huge = ThroughputParams {
        sizes: vec![MAX_PAYLOAD_BYTES + 1],
        ..base.clone()
    };
    assert!(matches!(
        validate(&huge),
        Err(ThroughputError::PayloadTooLarge { .. })
    ));
    let zero = ThroughputParams {
        length: Length::Count(0),
        ..base.clone()
    };
    assert!(matches!(validate(&zero), Err(ThroughputError::ZeroLength)));
    let one_cpu = ThroughputParams {
        sched: SchedSpec {
            cpus: CpuSet::from_cpus([0]),
            ..base.sched.clone()
        },
        ..base.clone()
    };
    assert!(matches!(
        validate(&one_cpu),
        Err(ThroughputError::TooFewCpus { .. })
    ));
    let unpinned = ThroughputParams {
        sched: SchedSpec {
            pin: false,
            ..base.sched.clone()
        },
        ..base
    };
    assert!(matches!(
        validate(&unpinned),
        Err(ThroughputError::Unpinned)
    ));
}
