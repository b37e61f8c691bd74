//! End-to-end: a schedule across three hosts on loopback (`ictus run` as the main
//! coordinator, `ictus node` for the two others), as bench/stress-hosts.sh runs it
//! across network namespaces. Structure only, never a timing. This file: the ring
//! and its helpers, every frame accounted for, cells and ticks crossing, a killed
//! host reported; subsystems of two hosts sharing hubs homed on one of them, whose
//! loss is reported; each host recording its own subsystems (`--record`), replayed
//! bit for bit. Apart: the keys (`keys.rs`), attacks on the run (`attacks.rs`), and
//! faults of hosts and links (`faults.rs`).

#[path = "../common/mod.rs"]
mod common;

mod attacks;
mod faults;
mod keys;

use std::process::Child;
use std::time::Duration;

use common::{
    addresses, ctl_status, exits, finish, ictus_in, kill, measurements, refused, scratch_run,
    shm_left, socket, spawn, succeeds, three_hosts, wait_for_socket, write_file,
};
use serde_json::Value;

/// The three hosts of [`common::three_hosts`] running, under run name `cli-TAG-PID`.
struct Hosts {
    /// Three hosts of a run (and an attacker) on two vCPUs: one ring at a time, or
    /// their load decides what the tests see.
    _turn: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
    name: String,
    h2: Child,
    h3: Child,
    main: Child,
}

/// Starts the nodes h2 and h3 (hosts start in any order), then after `head_start`
/// the main host, to run for `duration`.
fn start_hosts(tag: &str, duration: &str, head_start: Duration) -> Hosts {
    let turn = common::one_at_a_time();
    let (dir, name) = scratch_run(tag);
    let path = three_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    let (h2, h3) = common::spawn_nodes(dir.path(), file);
    std::thread::sleep(head_start);
    let main = spawn(
        dir.path(),
        &["run", file, "--duration", duration, "--json", "--quiet"],
    );
    Hosts {
        _turn: turn,
        dir,
        name,
        h2,
        h3,
        main,
    }
}

fn of_host<'a>(r: &'a Value, name: &'a str, host: &str) -> &'a Value {
    measurements(r, name)
        .find(|m| m["labels"]["host"] == host)
        .unwrap_or_else(|| panic!("no {name} for host {host}"))
}

fn subsystem<'a>(r: &'a Value, name: &str) -> &'a Value {
    measurements(r, "release-jitter")
        .find(|m| m["labels"]["subsystem"] == name)
        .unwrap_or_else(|| panic!("no subsystem {name}"))
}

/// The frames subsystem `name` lost in record `r`.
fn lost_frames(r: &Value, name: &str) -> f64 {
    subsystem(r, name)["metrics"]["lost_frames"]
        .as_f64()
        .unwrap()
}

#[test]
fn three_hosts_on_loopback_run_the_ring_and_account_for_every_frame() {
    // The nodes first here, the main one a moment later.
    let ring = start_hosts("hosts", "3s", Duration::from_millis(300));
    // While it runs, the main host's status shows the other hosts' subsystems.
    let sock = socket(ring.dir.path(), &ring.name);
    let mut b_frames = 0;
    let mut hosts = Value::Null;
    let mut link_latency = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        if !sock.exists() {
            continue;
        }
        let s = ctl_status(ring.dir.path(), &ring.name);
        if let Some(b) = s["subsystems"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == "B"))
        {
            b_frames = b["frames_run"].as_u64().unwrap_or(0);
            // And every host, the nodes with the ticks that reached them.
            hosts = s["hosts"].clone();
            let ticking = |h: &str| {
                hosts.as_array().is_some_and(|a| {
                    a.iter().any(|x| {
                        x["name"] == h
                            && x["role"] == "node"
                            && x["alive"] == true
                            && x["ticks"].as_u64().unwrap_or(0) > 0
                            && x["tick_late_max_ns"].is_u64()
                    })
                })
            };
            // The main host's own entry carries the latency of the cells that came
            // over the link (what /metrics serves as ictus_link_cell_latency_seconds).
            link_latency = hosts.as_array().is_some_and(|a| {
                a.iter().any(|x| {
                    x["role"] == "main"
                        && x["cell_latency_p50_ns"].is_u64()
                        && x["cell_latency_max_ns"].as_u64() >= x["cell_latency_p50_ns"].as_u64()
                })
            });
            if b_frames > 0 && ticking("h2") && ticking("h3") && link_latency {
                break;
            }
        }
    }
    assert!(
        b_frames > 0,
        "B (on h3) never showed in the main host's status"
    );
    assert!(
        link_latency,
        "the main host's status never carried the link's cell latency: {hosts}"
    );
    let names: Vec<(&str, &str)> = hosts
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["name"].as_str().unwrap_or(""),
                        x["role"].as_str().unwrap_or(""),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        [("h1", "main"), ("h2", "node"), ("h3", "node")],
        "{hosts}"
    );
    assert!(
        hosts[1]["ticks"].as_u64().unwrap_or(0) > 0 && hosts[2]["ticks"].as_u64().unwrap_or(0) > 0,
        "the nodes' tick figures never reached the main host: {hosts}"
    );
    let out = finish(ring.main, Duration::from_secs(60));
    let (o2, o3) = (
        finish(ring.h2, Duration::from_secs(30)),
        finish(ring.h3, Duration::from_secs(30)),
    );
    common::all_succeeded([("main", &out), ("h2", &o2), ("h3", &o3)]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], true);
    // Every frame of every host's subsystems is accounted for, run or overrun.
    for n in ["A", "B", "C"] {
        let m = &subsystem(&r, n)["metrics"];
        assert_eq!(m["lost_frames"], 0.0, "{n}");
        let (run, over, due) = (
            m["frames_run"].as_f64().unwrap(),
            m["overruns"].as_f64().unwrap(),
            m["releases_due"].as_f64().unwrap(),
        );
        assert!(
            due > 0.0 && run + over == due,
            "{n}: {run} + {over} != {due}"
        );
    }
    // Cells crossed hosts: the counters grew past their first transfer.
    let stress = &measurements(&r, "stress").next().unwrap()["metrics"];
    assert!(stress["final_value"].as_f64().unwrap() > 3.0, "{stress}");
    // Each host's link figures: the main host sent ticks, the nodes received them
    // and sent and received cells; the main host received every node's cells.
    let main_tick = &of_host(&r, "tick-arrival", "h1")["metrics"];
    assert!(main_tick["ticks_sent"].as_f64().unwrap() > 0.0);
    for h in ["h2", "h3"] {
        let t = &of_host(&r, "tick-arrival", h);
        assert!(
            t["metrics"]["ticks_received"].as_f64().unwrap() > 0.0,
            "{h}"
        );
        assert!(
            t["latency"]["summary"]["count"].as_u64().unwrap() > 0,
            "{h}"
        );
        let c = &of_host(&r, "cell-latency", h)["metrics"];
        assert!(c["cells_sent"].as_f64().unwrap() > 0.0, "{h}");
        assert!(c["cells_received"].as_f64().unwrap() > 0.0, "{h}");
    }
    assert!(of_host(&r, "cell-latency", "h1")["metrics"]["cells_received"].as_f64() > Some(0.0));
    // Where the time went: each host's stages, in the order a publication passes
    // them; the nodes forward (wake, encode, put, one count for the three) and
    // receive (copy one per cell latency, transit as many or fewer), the main host only receives.
    let count = |m: &Value| m["latency"]["summary"]["count"].as_u64().unwrap_or(0);
    for (h, expected) in [
        ("h1", &["transit", "copy"][..]),
        ("h2", &["wake", "encode", "put", "transit", "copy"][..]),
        ("h3", &["wake", "encode", "put", "transit", "copy"][..]),
    ] {
        let stages: Vec<&Value> = measurements(&r, "link-stage")
            .filter(|m| m["labels"]["host"] == h)
            .collect();
        let names: Vec<&str> = stages
            .iter()
            .map(|m| m["labels"]["stage"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names, expected, "{h}");
        let received = count(of_host(&r, "cell-latency", h));
        for m in &stages {
            let n = count(m);
            assert_eq!(m["metrics"]["publications"].as_f64(), Some(n as f64), "{h}");
            if m["labels"]["stage"] == "copy" {
                assert_eq!(n, received, "{h}: {m}");
            } else if m["labels"]["stage"] == "transit" {
                // Not those held until their sender's claims came (their
                // attachment is not kept).
                assert!(n > 0 && n <= received, "{h}: {m}");
            } else {
                assert_eq!(n, count(stages[0]), "{h}: {m}");
                assert!(n > 0, "{h}: {m}");
            }
        }
    }
    // A node reports its own subsystems only.
    let r2: Value = serde_json::from_slice(&o2.stdout).unwrap();
    let names: Vec<&str> = measurements(&r2, "release-jitter")
        .map(|m| m["labels"]["subsystem"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["A", "C"]);
    assert!(
        shm_left(&ring.name).is_empty(),
        "{:?}",
        shm_left(&ring.name)
    );
}

#[test]
fn a_host_killed_mid_run_is_reported_and_the_others_keep_their_beat() {
    let ring = start_hosts("hostkill", "4s", Duration::ZERO);
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(1500));
    kill("KILL", ring.h3.id());
    let out = finish(ring.main, Duration::from_secs(60));
    let _ = finish(ring.h3, Duration::from_secs(10));
    let o2 = finish(ring.h2, Duration::from_secs(30));
    exits(&out, 3);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], false);
    let lost = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "host-lost")
        .expect("a host-lost warning");
    assert!(
        lost["message"].as_str().unwrap().contains("host h3 left"),
        "{lost}"
    );
    assert!(lost_frames(&r, "B") > 0.0);
    // h2's subsystems kept their beat: every frame run or overrun, none lost.
    for n in ["A", "C"] {
        assert_eq!(
            subsystem(&r, n)["metrics"]["lost_frames"],
            0.0,
            "{n}: {} {}",
            r["parameters"]["events"],
            String::from_utf8_lossy(&o2.stderr)
        );
    }
    exits(&o2, 0);
    assert!(shm_left(&format!("{}.h2", ring.name)).is_empty());
}

#[test]
fn a_node_names_a_host_of_the_table_other_than_the_main_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = three_hosts(dir.path(), "cli-hostname");
    let file = path.to_str().unwrap();
    for (host, says) in [
        ("nope", "names the hosts h1, h2, h3"),
        ("h1", "the first host of the table is the main host"),
    ] {
        let err = refused(ictus_in(dir.path()).args(["node", file, "--host", host]));
        assert!(
            err.contains(&format!("--host {host}")) && err.contains(says),
            "{err}"
        );
    }
    let one = write_file(
        dir.path(),
        "one.toml",
        "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\n",
    );
    let err = refused(ictus_in(dir.path()).args(["node", one.to_str().unwrap(), "--host", "h2"]));
    assert!(err.contains("has no host table"), "{err}");
}

#[test]
fn a_main_host_whose_nodes_never_come_gives_up_naming_them() {
    let (dir, name) = scratch_run("alone");
    let path = three_hosts(dir.path(), &name);
    let out = ictus_in(dir.path())
        .args([
            "run",
            path.to_str().unwrap(),
            "--duration",
            "1s",
            "--ready-timeout",
            "1s",
            "--insecure",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("host(s) h2, h3 not after"), "{err}");
    assert!(
        err.contains("warning: the links across hosts are plain TCP without authentication"),
        "{err}"
    );
    assert!(shm_left(&name).is_empty());
}

/// Two hosts on loopback (`--insecure`), h1 the main one and h2 a node: `source`
/// (the `hub_source` example program) on h1 feeds `echo` (the `hub_echo` one) on
/// h2 through FIFO hubs homed on h2, and counts the right echoes in `S.n`, the
/// run's `[stress]` counter. The programs are built with the workspace's examples
/// (`cargo build --examples`, as `cargo test --workspace` does).
fn hub_hosts(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let mut text = format!(
        "name = \"{name}\"\ntick = \"4ms\"\nmajor_frame = 2\ninitial_state = \"run\"\n\
         [stress]\ncounters = [\"S.n\"]\n\
         [[cell]]\nname = \"S\"\nelements = [ {{ name = \"n\", type = \"i32\" }} ]\n"
    );
    for h in 1..=2 {
        text += &format!(
            "[[host]]\nname = \"h{h}\"\naddress = \"127.0.0.1:{}\"\n",
            ictus_os::testing::free_port()
        );
    }
    text += "[[subsystem]]\nname = \"source\"\nhost = \"h1\"\nstart = 0\nperiod = 2\n\
             process = \"hub_source\"\n\
             [[subsystem]]\nname = \"echo\"\nhost = \"h2\"\nstart = 1\nperiod = 2\n\
             process = \"hub_echo\"\n";
    for (hub, kind) in [
        ("to_echo", "kind = \"fifo\"\ntype = \"u64\"\ncapacity = 64"),
        (
            "from_echo",
            "kind = \"fifo\"\ntype = \"u64\"\ncapacity = 64",
        ),
        ("echoed", "kind = \"semaphore\""),
    ] {
        text += &format!("[[hub]]\nname = \"{hub}\"\n{kind}\nhost = \"h2\"\n");
    }
    write_file(dir, "hubs.toml", &text)
}

/// The run's events (what the link reported, by frame).
fn events(r: &Value) -> Vec<String> {
    r["parameters"]["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// [`hub_hosts`] running: the node h2, then the main host h1 for `duration`.
fn start_hub_hosts(tag: &str, duration: &str) -> (tempfile::TempDir, String, Child, Child) {
    let (dir, name) = scratch_run(tag);
    let path = hub_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    let h2 = spawn(
        dir.path(),
        &[
            "node",
            file,
            "--host",
            "h2",
            "--insecure",
            "--json",
            "--quiet",
        ],
    );
    let main = spawn(
        dir.path(),
        &[
            "run",
            file,
            "--duration",
            duration,
            "--insecure",
            "--json",
            "--quiet",
        ],
    );
    (dir, name, h2, main)
}

#[test]
fn subsystems_on_two_hosts_share_fifo_hubs_homed_on_the_second() {
    let _turn = common::one_at_a_time();
    let (_dir, name, h2, main) = start_hub_hosts("hubs", "3s");
    let out = finish(main, Duration::from_secs(60));
    let o2 = finish(h2, Duration::from_secs(30));
    exits(&out, 0);
    exits(&o2, 0);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], true);
    // The echoes came back across the hosts, each right and in order.
    let stress = &measurements(&r, "stress").next().unwrap()["metrics"];
    assert!(
        stress["final_value"].as_f64().unwrap() > 3.0,
        "{stress} {:?}",
        events(&r)
    );
    for n in ["source", "echo"] {
        assert_eq!(subsystem(&r, n)["metrics"]["lost_frames"], 0.0, "{n}");
    }
    assert!(shm_left(&name).is_empty(), "{:?}", shm_left(&name));
}

#[test]
fn a_hub_home_killed_mid_run_is_reported_as_lost_on_the_main_host() {
    let _turn = common::one_at_a_time();
    let (dir, name, h2, main) = start_hub_hosts("hubkill", "6s");
    wait_for_socket(dir.path(), &name);
    std::thread::sleep(Duration::from_millis(2000));
    kill("KILL", h2.id());
    let out = finish(main, Duration::from_secs(60));
    let _ = finish(h2, Duration::from_secs(10));
    exits(&out, 3);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["complete"], false);
    let events = events(&r);
    assert!(
        events
            .iter()
            .any(|e| e.contains("hub `to_echo` failed here: its home host `h2` left")),
        "{events:?}"
    );
    // What came back before was right.
    let stress = &measurements(&r, "stress").next().unwrap()["metrics"];
    assert!(stress["final_value"].as_f64().unwrap() > 0.0, "{stress}");
    // A killed process cannot remove its segments: the next run of the name
    // would reclaim them; the test leaves none behind.
    let h2_run = format!("{name}.h2");
    for segment in [
        ictus_exec::run::cells_segment(&h2_run),
        ictus_exec::run::control_segment(&h2_run),
        ictus_exec::run::hubs_segment(&h2_run),
    ] {
        ictus_os::shm::reclaim_stale(Some(&segment)).unwrap();
    }
    assert!(shm_left(&h2_run).is_empty(), "{:?}", shm_left(&h2_run));
}

/// The subsystems whose frames the recording `file` holds (its `frames` channel).
fn recorded_subsystems(file: &std::path::Path) -> std::collections::BTreeSet<String> {
    let bytes = std::fs::read(file).unwrap();
    mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(|m| m.unwrap())
        .filter(|m| m.channel.topic == "frames")
        .map(|m| {
            let v: Value = serde_json::from_slice(&m.data).unwrap();
            v["subsystem"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn each_host_records_its_own_subsystems_and_each_replays_bit_for_bit() {
    // Across hosts each host taps its own subsystems (`--record` on `ictus run`
    // and on `ictus node`): h2 records A and C (C in a process of its own), h3
    // records B, the main host none. B's input comes from h2 over the link; what
    // it pulled is in h3's file, so it replays there alone.
    let _turn = common::one_at_a_time();
    let (dir, name) = scratch_run("hostrec");
    let path = three_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    let rec = |h: &str| dir.path().join(format!("{h}.mcap"));
    let node = |host: &str| {
        let out = rec(host);
        spawn(
            dir.path(),
            &[
                "node",
                file,
                "--host",
                host,
                "--json",
                "--quiet",
                "--record",
                out.to_str().unwrap(),
            ],
        )
    };
    let (h2, h3) = (node("h2"), node("h3"));
    std::thread::sleep(Duration::from_millis(300));
    let main_rec = rec("h1");
    let main = spawn(
        dir.path(),
        &[
            "run",
            file,
            "--duration",
            "2s",
            "--json",
            "--quiet",
            "--record",
            main_rec.to_str().unwrap(),
        ],
    );
    let out = finish(main, Duration::from_secs(60));
    let (o2, o3) = (
        finish(h2, Duration::from_secs(30)),
        finish(h3, Duration::from_secs(30)),
    );
    exits(&out, 0);
    exits(&o2, 0);
    exits(&o3, 0);
    for (host, own) in [("h1", &[][..]), ("h2", &["A", "C"][..]), ("h3", &["B"][..])] {
        let got = recorded_subsystems(&rec(host));
        let want: std::collections::BTreeSet<String> = own.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{host} records its own subsystems");
        for s in own {
            let r = ictus_in(dir.path())
                .arg("replay")
                .arg(rec(host))
                .args(["--subsystem", s])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&r.stdout);
            assert!(
                r.status.success() && text.contains("bit for bit equal"),
                "{host} {s}: {text}{}",
                String::from_utf8_lossy(&r.stderr)
            );
        }
    }
    // A subsystem of another host is not in this host's file: refused in words.
    let r = ictus_in(dir.path())
        .arg("replay")
        .arg(rec("h3"))
        .args(["--subsystem", "A"])
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
}
