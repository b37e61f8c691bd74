//! Two hosts on loopback for the link's tests: a schedule with hosts h1 and h2 on
//! free ports, and a run of it as both hosts, each a thread of the test with its own
//! Zenoh link.

use std::path::Path;
use std::time::Duration;

use ictus_exec::program::Executive;
use ictus_exec::report::RunReport;
use ictus_exec::role::Role;
use ictus_exec::run::RunOptions;
use ictus_exec::schedule::Schedule;
use ictus_exec::subsystem::Maker;
use ictus_net::join::join;
use ictus_net::keys::{self, KeysRequest};
use ictus_net::security::{Credentials, Security};
use ictus_os::testing::free_port;

/// The schedule `name` (`head`: its tick and frame lines) on hosts h1 and h2, with
/// `subsystems` (their `[[subsystem]]` tables).
pub(crate) fn two_hosts(dir: &Path, name: &str, head: &str, subsystems: &str) -> Schedule {
    let text = format!(
        "name = \"{name}\"\n{head}\n\
         [[host]]\nname = \"h1\"\naddress = \"127.0.0.1:{}\"\n\
         [[host]]\nname = \"h2\"\naddress = \"127.0.0.1:{}\"\n{subsystems}",
        free_port(),
        free_port()
    );
    Schedule::parse(&text, dir.join("s.toml"), &ictus_os::facts::online_cpus()).unwrap()
}

/// Runs `schedule` as both hosts at once, on TLS links with the run's keys made in
/// `dir` (`duration`: `None` runs until stopped);
/// `makers(host)` gives each host its subsystems by name (a host makes only its
/// own). Returns each host's report, the main host's first.
pub(crate) fn run_both(
    schedule: &Schedule,
    dir: &Path,
    duration: Option<Duration>,
    makers: impl Fn(usize) -> Vec<(&'static str, Maker)>,
) -> Vec<RunReport> {
    let keys_dir = dir.join("keys");
    keys::new(&KeysRequest {
        dir: keys_dir.clone(),
        hosts: vec!["h1".into(), "h2".into()],
        readers: Vec::new(),
        validity: Default::default(),
    })
    .unwrap();
    let hosts: Vec<_> = (0..2)
        .map(|host| {
            let security =
                Security::Tls(Credentials::of_host(&keys_dir, ["h1", "h2"][host]).unwrap());
            let mut schedule = schedule.clone();
            let run_dir = dir.join(format!("run{host}"));
            let made = makers(host);
            std::thread::spawn(move || -> RunReport {
                let link = join(&mut schedule, Role::of_host(host), Some(&security))
                    .unwrap()
                    .expect("the schedule spans both hosts");
                let options = RunOptions {
                    duration,
                    run_dir,
                    control_socket: false,
                    ready_timeout: Duration::from_secs(30),
                    link: Some(Box::new(link)),
                    ..RunOptions::default()
                };
                let mut executive = Executive::new(schedule).options(options);
                for (name, maker) in made {
                    executive = executive.subsystem_made(name, maker);
                }
                executive.run().unwrap().report
            })
        })
        .collect();
    hosts.into_iter().map(|h| h.join().unwrap()).collect()
}
