//! The hot loops allocate nothing: a counting global allocator watches them.

use ictus_core::alloc_count::{self, Counting};

use ictus_core::{LatencyHistogram, MissCounter, Nanos, PeriodicDeadlines};
use ictus_explain::{ExplainConfig, Explainer};
use ictus_os::clock::monotonic_now;
use ictus_os::wait::WaitMode;
use ictus_probe::progress::Progress;
use ictus_probe::timer::measure_grid;

/// Counts what watched code allocates (see `ictus_core::alloc_count`).
#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_rendezvous_exchange_allocates_nothing() {
    let _turn = alloc_count::one_at_a_time();
    let ex = ictus_probe::rendezvous::Exchange::new(2, 64, 512);
    let start = std::sync::Barrier::new(3);
    let done = std::sync::Barrier::new(3);
    alloc_count::reset();
    std::thread::scope(|s| {
        for me in 0..2 {
            let (ex, start, done) = (&ex, &start, &done);
            s.spawn(move || {
                let mut sum = 0u64;
                start.wait();
                alloc_count::watch(true);
                for step in 1..=5_000u64 {
                    ex.exchange(me, 2, step, |i| step ^ i as u64, |_, _, w| sum ^= w);
                }
                alloc_count::watch(false);
                done.wait();
                std::hint::black_box(sum);
            });
        }
        start.wait();
        done.wait();
    });
    assert_eq!(alloc_count::count(), 0);
}

#[test]
fn the_timer_hot_loop_allocates_nothing_in_any_mode() {
    let _turn = alloc_count::one_at_a_time();
    for mode in [
        WaitMode::Nanosleep,
        WaitMode::Hybrid {
            margin: Nanos::from_micros(30),
        },
        WaitMode::Spin,
    ] {
        let mut histogram = LatencyHistogram::new();
        let mut misses = MissCounter::default();
        let progress = Progress::new();
        let start = monotonic_now() + Nanos::from_micros(100);
        let mut grid = PeriodicDeadlines::new(start, Nanos::from_micros(100), Some(2_000)).unwrap();
        alloc_count::reset();
        alloc_count::watch(true);
        measure_grid(
            &mut grid,
            mode,
            &mut histogram,
            &mut misses,
            &progress,
            None,
        );
        alloc_count::watch(false);
        assert_eq!(histogram.count() + misses.missed, 2_000, "{mode:?}");
        assert_eq!(progress.done(), 2_000);
        assert_eq!(alloc_count::count(), 0, "{mode:?} allocated");
    }
}

#[test]
fn reporting_every_release_to_the_explainer_allocates_nothing() {
    let _turn = alloc_count::one_at_a_time();
    let cpus = ictus_os::facts::online_cpus();
    // Threshold 0: every release is a miss to explain, one push each.
    let config = ExplainConfig::new(cpus, Nanos::ZERO);
    let (explainer, mut reporters) =
        Explainer::start(config, &["timer-0".to_string()], monotonic_now()).unwrap();
    let mut reporter = reporters.pop().unwrap();
    reporter.attach();
    let mut histogram = LatencyHistogram::new();
    let mut misses = MissCounter::default();
    let progress = Progress::new();
    let start = monotonic_now() + Nanos::from_micros(100);
    let mut grid = PeriodicDeadlines::new(start, Nanos::from_micros(200), Some(1_000)).unwrap();
    alloc_count::reset();
    alloc_count::watch(true);
    measure_grid(
        &mut grid,
        WaitMode::Nanosleep,
        &mut histogram,
        &mut misses,
        &progress,
        Some(&mut reporter),
    );
    alloc_count::watch(false);
    assert_eq!(alloc_count::count(), 0, "reporting allocated");
    let explanation = explainer.finish();
    assert_eq!(
        explanation.breakdown.events + explanation.breakdown.dropped,
        histogram.count(),
        "every release reported, explained or counted as dropped"
    );
}
