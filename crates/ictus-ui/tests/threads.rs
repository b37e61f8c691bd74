//! The server's threads (issue 31, item 3): the thread that runs every connection
//! and the one made for a command's blocking call both run on the CPUs asked (the
//! CLI keeps them off the real-time ones), and there are two however many
//! connections. One test in this file, so that every `ictus-ui` thread is its
//! server's.

use std::net::TcpStream;
use std::time::Duration;

use ictus_ui::{Ui, UiOptions};

mod common;

/// The CPUs the threads named `ictus-ui*` of this process may run on.
fn server_threads_cpus() -> Vec<(String, String)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("ictus-ui") {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or_default()
            .trim()
            .to_string();
        found.push((comm.trim().to_string(), cpus));
    }
    found
}

#[test]
fn the_servers_threads_run_on_the_cpus_asked_command_thread_included() {
    let dir = tempfile::tempdir().unwrap();
    let ui = Ui::start(UiOptions {
        open_loopback: true,
        cpus: Some(ictus_core::CpuSet::from_cpus([0])),
        ..UiOptions::loopback(dir.path().join("none.sock"))
    })
    .unwrap();
    // A command makes the thread of blocking calls.
    let addr = ui.addr();
    let (code, body) = common::http(addr, "POST", "/command/stop", &[("X-Ictus", "1")]);
    assert_eq!(code, 502, "{body}");
    // Many connections add none.
    let held: Vec<TcpStream> = (0..50)
        .map(|i| common::connect_spread(addr, i, ictus_ui::MAX_PER_ADDRESS))
        .collect();
    let by = std::time::Instant::now() + Duration::from_secs(30);
    while ui.connections() < held.len() && std::time::Instant::now() < by {
        std::thread::sleep(Duration::from_millis(20));
    }
    let threads = server_threads_cpus();
    assert!(
        threads.iter().any(|(name, _)| name == "ictus-ui")
            && threads.iter().any(|(name, _)| name == "ictus-ui-ctl"),
        "{threads:?}"
    );
    assert!(threads.iter().all(|(_, cpus)| cpus == "0"), "{threads:?}");
    // Two threads, however many connections.
    assert_eq!(threads.len(), 2, "{threads:?}");
}
