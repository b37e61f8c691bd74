use ictus_core::{CpuSet, Nanos};
use ictus_os::buffer::{self, Buffer, ChaseRing};
use ictus_os::facts;
use ictus_os::sched::Policy;

use super::view::{CHASE, Cache, Chase, Knee as KneePoint, STRIDED_READ, STRIDED_WRITE, Strided};
use crate::progress::Progress;
use crate::setup::SchedSpec;
use crate::view::AllOr;

use super::knees::{KNEE_RATIO, KernelCache, Knee, find_knees, match_caches};
use super::params::{
    LINE_BYTES, MemlatError, MemlatParams, Mode, PageSize, ParamsRecord, validate,
};
use super::units::{format_bytes, parse_byte_list, parse_bytes};
use super::walk::{WORDS_PER_LINE, build_cycle, read_strided, write_strided};
use super::*;

#[test]
fn its_parameters_read_back_with_their_policy() {
    let fifo = ictus_os::sched::Policy::Fifo { priority: 42 };
    let mut m = MemlatParams::default();
    m.sched.policy = fifo;
    crate::view::tests::params_read_back(
        crate::registry::ProbeId::Memlat.name(),
        &ParamsRecord::from(&m),
        fifo,
    );
}
use crate::setup::PlacementError;
use crate::view::tests::reads_back;

fn cycle_of(lines: usize, seed: u64) -> Vec<u64> {
    let mut words = vec![0u64; lines * WORDS_PER_LINE];
    build_cycle(&mut words, seed);
    words
}

#[test]
fn sattolo_gives_one_cycle_through_every_line() {
    for (lines, seed) in [(1, 1), (2, 7), (64, 3), (1000, 42), (4096, 9)] {
        let words = cycle_of(lines, seed);
        let mut seen = vec![false; lines];
        let mut at = 0usize;
        for _ in 0..lines {
            assert_eq!(at % WORDS_PER_LINE, 0, "every link points to a line start");
            let line = at / WORDS_PER_LINE;
            assert!(!seen[line], "line {line} visited twice in {lines}");
            seen[line] = true;
            at = words[at] as usize;
        }
        assert_eq!(at, 0, "the walk returns to the start after every line");
        assert!(seen.iter().all(|&s| s));
    }
}

#[test]
fn the_cycle_is_deterministic_and_depends_on_the_seed() {
    assert_eq!(cycle_of(512, 5), cycle_of(512, 5));
    assert_ne!(cycle_of(512, 5), cycle_of(512, 6));
}

#[test]
fn the_ring_made_from_a_cycle_follows_its_links() {
    let words = cycle_of(128, 11);
    let mut b = Buffer::new(128 * LINE_BYTES, buffer::Pages::Base).unwrap();
    b.words_mut().copy_from_slice(&words);
    let mut sut = ChaseRing::from_links(b, WORDS_PER_LINE).unwrap();
    sut.chase(2);
    assert_eq!(sut.position(), words[words[0] as usize] as usize);
    sut.chase(126);
    assert_eq!(sut.position(), 0);
}

#[test]
fn strided_reads_wrap_at_the_end_and_keep_their_place() {
    let bytes: Vec<u8> = (0..64u8).collect();
    let mut pos = 0;
    // Reads at 0, 20, 40 (the last start is 56), then wraps to 0.
    let sum = read_strided(&bytes, 20, &mut pos, 4);
    let at = |p: usize| u64::from_ne_bytes(bytes[p..p + 8].try_into().unwrap());
    assert_eq!(
        sum,
        at(0)
            .wrapping_add(at(20))
            .wrapping_add(at(40))
            .wrapping_add(at(0))
    );
    assert_eq!(pos, 20);
}

#[test]
fn strided_writes_touch_the_strided_words() {
    let mut bytes = vec![0u8; 64];
    let mut pos = 0;
    write_strided(&mut bytes, 44, &mut pos, 3);
    assert_eq!(u64::from_ne_bytes(bytes[44..52].try_into().unwrap()), 44);
    assert_eq!(pos, 44, "0, 44, wrap, 0: next is 44");
}

/// Each knee as (the last working set before the rise, the first after it).
fn spans(knees: &[Knee]) -> Vec<(usize, usize)> {
    knees
        .iter()
        .map(|k| (k.lower_bytes, k.upper_bytes))
        .collect()
}

#[test]
fn knees_are_found_on_a_synthetic_three_level_curve() {
    // L1 32 KiB (1.3 ns), L2 512 KiB (4.8 ns), L3 that ends in two steep steps
    // (8 -> 32 MiB), then DRAM with 20 % noise that is no knee.
    let ns = [
        1.3, 1.3, 1.3, 1.35, 3.8, 4.6, 4.8, 4.9, 14.0, 15.0, 16.0, 17.0, 40.0, 130.0, 140.0, 165.0,
        150.0,
    ];
    let curve: Vec<(usize, f64)> = ns
        .iter()
        .enumerate()
        .map(|(i, &n)| (4096 << i, n))
        .collect();
    let sut = find_knees(&curve, KNEE_RATIO);
    assert_eq!(
        spans(&sut),
        [
            (32 << 10, 64 << 10),
            (512 << 10, 1 << 20),
            (8 << 20, 32 << 20)
        ]
    );
    assert_eq!(sut[2].ns_below, 17.0);
    assert_eq!(sut[2].ns_above, 130.0);
}

#[test]
fn coarse_sizes_keep_one_knee_per_steep_step() {
    let curve = [
        (4 << 10, 1.3),
        (32 << 10, 1.3),
        (256 << 10, 4.6),
        (2 << 20, 17.0),
        (16 << 20, 147.0),
        (64 << 20, 151.0),
    ];
    let sut = find_knees(&curve, KNEE_RATIO);
    assert_eq!(
        spans(&sut),
        [
            (32 << 10, 256 << 10),
            (256 << 10, 2 << 20),
            (2 << 20, 16 << 20)
        ]
    );
}

#[test]
fn a_flat_or_falling_curve_has_no_knee() {
    let curve = [(4096, 2.0), (8192, 2.9), (16384, 2.0), (32768, 1.0)];
    assert!(find_knees(&curve, KNEE_RATIO).is_empty());
    assert!(find_knees(&[], KNEE_RATIO).is_empty());
}

#[test]
fn caches_pair_with_knees_near_their_size_in_order() {
    let cache = |name: &str, size: u64| KernelCache {
        name: name.into(),
        size_bytes: size,
        shared_cpus: CpuSet::from_cpus([0]),
    };
    let knee = |lo: usize, hi: usize| Knee {
        lower_bytes: lo,
        upper_bytes: hi,
        ns_below: 1.0,
        ns_above: 2.0,
    };
    let caches = [
        cache("L1d", 32 << 10),
        cache("L2", 512 << 10),
        cache("L3", 32 << 20),
    ];
    // A TLB knee at 2-4 MiB is too far from the L2 (4x above 512 KiB is 2 MiB: it
    // is within reach of nothing but sits before the L3's knee).
    let knees = [
        knee(32 << 10, 64 << 10),
        knee(512 << 10, 1 << 20),
        knee(4 << 20, 16 << 20),
    ];
    assert_eq!(match_caches(&caches, &knees), [Some(0), Some(1), Some(2)]);
    // Without an L2 knee, the L2 stays unpaired and the L3 still finds its own.
    let knees = [knee(32 << 10, 64 << 10), knee(8 << 20, 16 << 20)];
    assert_eq!(match_caches(&caches, &knees), [Some(0), None, Some(1)]);
    // Coarse sizes: a knee that holds both the L1d and the L2 goes to the L1d, and
    // the next one, which holds the L3 but lies only near the L2, to the L3.
    let knees = [knee(16 << 10, 1 << 20), knee(1 << 20, 64 << 20)];
    assert_eq!(match_caches(&caches, &knees), [Some(0), None, Some(1)]);
}

#[test]
fn sizes_parse_with_binary_units_and_print_back() {
    assert_eq!(
        parse_byte_list("4K, 64KiB,1M,256M,4096").unwrap(),
        [4096, 65536, 1 << 20, 256 << 20, 4096]
    );
    assert!(parse_bytes("12X").is_err());
    assert!(parse_bytes("").is_err());
    assert!(parse_bytes("-4K").is_err());
    assert_eq!(format_bytes(32 << 10), "32 KiB");
    assert_eq!(format_bytes(3 << 19), "1.5 MiB");
    assert_eq!(format_bytes(100), "100 B");
}

#[test]
fn a_size_list_with_an_empty_item_is_refused() {
    for text in ["4K,,8K", "4K,", ",4K", " , "] {
        let err = parse_byte_list(text).unwrap_err();
        assert!(err.contains("empty item"), "{text:?}: {err}");
    }
    assert_eq!(parse_byte_list("").unwrap(), Vec::<usize>::new());
}

proptest::proptest! {
    #[test]
    fn a_size_list_parses_only_without_empty_items(
        items in proptest::collection::vec("(|[0-9]{1,6}(|K|M))", 1..6),
    ) {
        let text = items.join(",");
        let parsed = parse_byte_list(&text);
        if items.iter().any(String::is_empty) && !text.trim().is_empty() {
            proptest::prop_assert!(parsed.is_err(), "{text:?}");
        }
        if let Ok(sizes) = parsed {
            proptest::prop_assert!(text.trim().is_empty() || sizes.len() == items.len());
        }
    }
}

fn tiny() -> MemlatParams {
    MemlatParams {
        sizes: vec![4096, 16384],
        strides: vec![4, 64],
        threads: 1,
        repeat: 2,
        point_time: Nanos::from_micros(500),
        sched: SchedSpec::pinned(
            CpuSet::from_cpus([facts::online_cpus().cpus()[0]]),
            Policy::Other { nice: 0 },
        ),
        ..MemlatParams::default()
    }
}

#[test]
fn bad_parameters_are_refused_before_anything_runs() {
    let bad = |f: fn(&mut MemlatParams)| {
        let mut p = tiny();
        f(&mut p);
        validate(&p).unwrap_err()
    };
    assert!(matches!(
        bad(|p| p.sizes = vec![0]),
        MemlatError::BadSize { size: 0 }
    ));
    assert!(matches!(
        bad(|p| p.sizes = vec![4100]),
        MemlatError::BadSize { .. }
    ));
    assert!(matches!(bad(|p| p.sizes.clear()), MemlatError::NoSize));
    assert!(matches!(
        bad(|p| p.strides = vec![0]),
        MemlatError::ZeroStride
    ));
    assert!(matches!(
        bad(|p| p.threads = 99),
        MemlatError::Threads { threads: 99, .. }
    ));
    assert!(matches!(
        bad(|p| p.threads = 0),
        MemlatError::Threads { .. }
    ));
    assert!(matches!(bad(|p| p.repeat = 0), MemlatError::ZeroRepeat));
    assert!(matches!(
        bad(|p| p.point_time = Nanos::ZERO),
        MemlatError::ZeroPointTime
    ));
    assert!(matches!(
        bad(|p| p.sched.cpus = CpuSet::from_cpus([999])),
        MemlatError::Setup(PlacementError::CpuOffline { cpu: 999, .. })
    ));
    validate(&tiny()).unwrap();
}

#[test]
fn thread_counts_double_up_to_the_threads_asked_for() {
    let with = |threads| MemlatParams { threads, ..tiny() }.thread_counts();
    assert_eq!(with(1), [1]);
    assert_eq!(with(2), [1, 2]);
    assert_eq!(with(6), [1, 2, 4, 6]);
}

#[test]
fn a_tiny_run_gives_every_point_with_its_figures() {
    let progress = Progress::new();
    let sut = run(&tiny(), vec![], &progress).unwrap();
    assert!(sut.complete);
    assert_eq!(sut.probe, PROBE);
    assert!(sut.threads.is_empty() && sut.merged.is_none());
    assert_eq!(progress.done(), progress.total());
    assert_eq!(progress.total(), 2 * (1 + 2 * 2));
    for m in &sut.measurements {
        match m.name.as_str() {
            CHASE => drop(reads_back::<Chase>(m)),
            STRIDED_READ | STRIDED_WRITE => drop(reads_back::<Strided>(m)),
            "cache" => drop(reads_back::<Cache>(m)),
            "knee" => drop(reads_back::<KneePoint>(m)),
            other => panic!("unexpected measurement {other}"),
        }
    }
    for size in [4096, 16384] {
        let chase: Vec<_> = sut
            .measurements
            .iter()
            .filter_map(|m| m.read::<Chase>())
            .filter(|p| p.labels.working_set_bytes == size)
            .collect();
        assert_eq!(chase.len(), 1);
        assert_eq!(chase[0].labels.thread, AllOr::All);
        let c = &chase[0].metrics;
        assert!(c.ns_per_load > 0.0 && c.ns_per_load_min <= c.ns_per_load);
        assert!(c.ns_per_load <= c.ns_per_load_max);
        for name in [STRIDED_READ, STRIDED_WRITE] {
            let m: Vec<_> = sut
                .measurements
                .iter()
                .filter(|m| m.name == name)
                .filter_map(|m| m.read::<Strided>())
                .filter(|p| p.labels.working_set_bytes == size)
                .collect();
            assert_eq!(m.len(), 2, "{name} at strides 4 and 64");
            assert!(
                m.iter()
                    .all(|m| m.metrics.ns_per_access > 0.0 && m.metrics.bytes_per_s > 0.0)
            );
        }
    }
    let p = sut.parameters_as::<ParamsRecord>().unwrap();
    assert_eq!((p.point_time_ns, p.pages), (500_000, PageSize::Base));
    assert_eq!(sut.parameters["pages"], "4k");
    assert!(sut.headline.is_some());
}

#[test]
fn two_threads_give_per_thread_and_aggregate_points() {
    let cpus = facts::online_cpus();
    if cpus.len() < 2 {
        return;
    }
    let params = MemlatParams {
        sizes: vec![4096],
        mode: Mode::Chase,
        threads: 2,
        sched: SchedSpec {
            cpus: CpuSet::from_cpus(cpus.cpus().iter().copied().take(2)),
            ..tiny().sched
        },
        ..tiny()
    };
    let sut = run(&params, vec![], &Progress::new()).unwrap();
    let chase: Vec<_> = sut
        .measurements
        .iter()
        .filter(|m| m.is::<Chase>())
        .map(reads_back::<Chase>)
        .collect();
    // 1 thread: the aggregate; 2 threads: the aggregate and each thread.
    assert_eq!(chase.len(), 1 + 3);
    let two: Vec<_> = chase.iter().filter(|p| p.labels.threads == 2).collect();
    let all: Vec<_> = two
        .iter()
        .filter(|p| p.labels.thread == AllOr::All)
        .collect();
    assert_eq!(all.len(), 1);
    let sum: f64 = two
        .iter()
        .filter(|p| p.labels.thread != AllOr::All)
        .map(|p| p.metrics.loads_per_s)
        .sum();
    assert!(all[0].metrics.loads_per_s > 0.0 && sum > 0.0);
}

#[test]
fn a_stop_request_gives_an_incomplete_record_without_points() {
    let progress = Progress::new();
    progress.request_stop();
    let sut = run(&tiny(), vec![], &progress).unwrap();
    assert!(!sut.complete);
    assert!(sut.measurements.iter().all(|m| m.name == "cache"));
}
