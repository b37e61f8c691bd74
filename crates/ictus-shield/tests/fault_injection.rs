//! Fault injection on the real machine: `apply` is stopped at every point (before and
//! after each journal entry), then `reset` must bring back an identical snapshot of
//! every cpuset, IRQ affinity, task affinity and sysctl that `apply` touched.
//!
//! Needs root and a writable cpuset; skips visibly otherwise. The machine is restored
//! by a guard even when an assertion fails.

// A skipped test says so on stderr, visibly.
#![allow(clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ictus_shield::apply::{apply_stopping_after, privilege_shortfall};
use ictus_shield::snapshot::{self, differences};
use ictus_shield::{Request, ShieldError, reset};

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

fn skip_reason() -> Option<String> {
    if let Some(need) = privilege_shortfall() {
        return Some(format!("the shield needs {need}"));
    }
    let cpuset = ictus_os::facts::cgroups().cpuset;
    if !cpuset.as_ref().is_some_and(|c| c.writable) {
        return Some("no writable cpuset".into());
    }
    if ictus_os::facts::online_cpus().len() < 2 {
        return Some("fewer than two online CPUs".into());
    }
    if Path::new(ictus_shield::DEFAULT_JOURNAL).exists() {
        return Some("a shield is applied on this machine".into());
    }
    None
}

fn state() -> BTreeMap<String, String> {
    snapshot::state()
}

#[test]
fn reset_restores_the_machine_after_apply_stopped_at_every_point() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED: fault injection: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ictus-shield-fi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let journal = dir.join("shield.journal");
    let guard = Restore(journal.clone());
    let online = ictus_os::facts::online_cpus();
    let last = *online.cpus().last().unwrap();
    let request = Request {
        rt_cpus: ictus_core::CpuSet::from_cpus([last]),
        irq_for: Vec::new(),
    };

    // The full apply first: how many steps there are, and that a second is refused.
    let before = state();
    let applied = apply_stopping_after(&request, &journal, None).unwrap();
    assert!(
        !differences(&before, &state()).is_empty(),
        "apply changes what the snapshot sees"
    );
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

    let points = 2 * applied.plan.steps.len() + 1;
    for stop_at in 0..points {
        let before = state();
        match apply_stopping_after(&request, &journal, Some(stop_at)) {
            Err(ShieldError::Stopped { .. }) | Ok(_) => {}
            Err(e) => panic!("apply stopped at {stop_at} failed otherwise: {e}"),
        }
        let outcome = reset(&journal).unwrap();
        assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
        assert!(!journal.exists());
        let diff = differences(&before, &state());
        assert!(diff.is_empty(), "stopped at {stop_at}: {diff:#?}");
    }
    drop(guard);
}
