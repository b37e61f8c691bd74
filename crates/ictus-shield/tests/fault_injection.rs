//! Fault injection on the real machine: `apply` is stopped at every point (before and
//! after each journal entry), then `reset` must bring back an identical snapshot of
//! every cpuset, IRQ affinity, task affinity and sysctl that `apply` touched, the RT
//! throttle (`sched_rt_runtime_us`, turned off by the last step) and the RT CPU's
//! resume latency QoS (`pm_qos_resume_latency_us`, held at `n/a`) included, and no
//! watchdog process may survive it.
//!
//! The watchdog here is a stand-in that speaks the shield's handshake (wait for GO,
//! answer READY) and then sleeps: what is tested is the journal, the spawn order and
//! the stop by pid and start time. The real watchdog is tested in `tests/watchdog.rs`
//! and, as a process, in ictus-cli's shield tests.
//!
//! Needs root and a writable cpuset; skips visibly otherwise. The machine is restored
//! by a guard even when an assertion fails.

// A skipped test says so on stderr, visibly.
#![allow(clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ictus_os::process::ProcessId;
use ictus_shield::apply::{apply_stopping_after, machine_shortfall};
use ictus_shield::journal;
use ictus_shield::plan::Change;
use ictus_shield::snapshot::{self, RESUME_QOS_HELD, RT_RUNTIME, differences};
use ictus_shield::{Request, ShieldError, WatchdogLaunch, reset};

/// Runs `reset` on drop, whatever happened.
struct Restore(PathBuf);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = reset(&self.0) {
            eprintln!("guard reset failed: {e}");
        }
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// A stand-in watchdog: the handshake, then nothing but sleep.
fn stand_in_watchdog() -> WatchdogLaunch {
    WatchdogLaunch {
        limit: Duration::from_secs(1),
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            r#"read line; [ "$line" = go ] || exit 0; echo ready; exec sleep 600"#.into(),
        ],
    }
}

/// The watchdog the journal names: (pid, start time).
fn journaled_watchdog(journal: &Path) -> Option<(i32, u64)> {
    journal::watchdog(journal).ok()?
}

fn state() -> BTreeMap<String, String> {
    snapshot::state()
}

#[test]
fn reset_restores_the_machine_after_apply_stopped_at_every_point() {
    if let Some(why) = machine_shortfall() {
        ictus_os::testing::skipped(
            "reset_restores_the_machine_after_apply_stopped_at_every_point",
            &why,
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("ictus-shield-fi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let journal = dir.join("shield.journal");
    let guard = Restore(journal.clone());
    let online = ictus_os::facts::online_cpus();
    let last = *online.cpus().last().unwrap();
    let request = Request {
        rt_throttle_off: true,
        watchdog: Some(stand_in_watchdog()),
        ..Request::partition(ictus_core::CpuSet::from_cpus([last]), Vec::new())
    };

    // The full apply first: how many steps there are, and that a second is refused.
    let before = state();
    let qos = snapshot::resume_qos_path(last);
    let qos_key = qos.display().to_string();
    let qos_prior = snapshot::resume_qos(last);
    assert_eq!(
        before.get(&qos_key),
        qos_prior.as_ref().map(|q| &q.value),
        "the snapshot holds the RT CPU's resume latency QoS where the kernel has it"
    );
    let applied = apply_stopping_after(&request, &journal, None).unwrap();
    assert!(
        !differences(&before, &state()).is_empty(),
        "apply changes what the snapshot sees"
    );
    // Where the file can be held, the plan holds it: then the stop points below fall
    // before and after its journal entry and its write.
    let holds_qos = qos_prior
        .as_ref()
        .is_some_and(|q| q.writable && q.value != RESUME_QOS_HELD);
    let qos_step = applied.plan.steps.iter().position(
        |s| matches!(s, Change::Write { path, value } if *path == qos && value == RESUME_QOS_HELD),
    );
    assert_eq!(qos_step.is_some(), holds_qos, "{:?}", applied.plan.skipped);
    if holds_qos {
        assert_eq!(
            state()[&qos_key],
            RESUME_QOS_HELD,
            "the resume latency QoS is held"
        );
        assert!(applied.resume_qos_held.contains(last));
    }
    let watchdog = applied.watchdog.clone().expect("a watchdog was started");
    assert!(ProcessId::from_pid_t(watchdog.pid, watchdog.start_time).is_alive());
    assert_eq!(
        journaled_watchdog(&journal),
        Some((watchdog.pid, watchdog.start_time))
    );
    if before.get(RT_RUNTIME).is_some_and(|v| v != "-1") {
        assert_eq!(state()[RT_RUNTIME], "-1", "the RT throttle is off");
    }
    assert!(matches!(
        apply_stopping_after(&request, &journal, None),
        Err(ShieldError::AlreadyApplied { .. })
    ));
    assert!(reset(&journal).unwrap().was_applied);
    assert!(
        !reset(&journal).unwrap().was_applied,
        "a second reset does nothing"
    );
    assert_eq!(differences(&before, &state()), Vec::<String>::new());
    assert!(!ProcessId::from_pid_t(watchdog.pid, watchdog.start_time).is_alive());

    let points = 2 * applied.plan.steps.len() + 1;
    for stop_at in 0..points {
        let before = state();
        match apply_stopping_after(&request, &journal, Some(stop_at)) {
            Err(ShieldError::Stopped { .. }) | Ok(_) => {}
            Err(e) => panic!("apply stopped at {stop_at} failed otherwise: {e}"),
        }
        let started = journaled_watchdog(&journal);
        let outcome = reset(&journal).unwrap();
        assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
        assert!(!journal.exists());
        let diff = differences(&before, &state());
        assert!(diff.is_empty(), "stopped at {stop_at}: {diff:#?}");
        if let Some((pid, start_time)) = started {
            assert!(
                !ProcessId::from_pid_t(pid, start_time).is_alive(),
                "stopped at {stop_at}: the watchdog {pid} survived reset"
            );
        }
    }
    drop(guard);
}
