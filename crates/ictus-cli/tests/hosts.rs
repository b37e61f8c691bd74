//! End-to-end: a schedule across three hosts on loopback (`ictus run` as the main
//! coordinator, `ictus node` for the two others), as bench/stress-hosts.sh runs it
//! across network namespaces. Structure only: every frame accounted for, cells and
//! ticks crossing, a killed host reported; never a timing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use common::{
    ctl_status, exits, finish, ictus_in, kill, measurements, refused, scratch_run, shm_left,
    socket, spawn, stress_examples, wait_for_socket, write_file,
};
use ictus_os::testing::free_port;
use serde_json::Value;

/// Seed 003's ring over three hosts: A and C on h2 (C in a process of its own),
/// B on h3, the main coordinator on h1.
fn three_hosts(dir: &Path, name: &str) -> PathBuf {
    std::fs::copy(stress_examples().join("cells.toml"), dir.join("cells.toml")).unwrap();
    let mut text = format!(
        "name = \"{name}\"\ntick = \"4ms\"\nmajor_frame = 3\ncells = \"cells.toml\"\n\
         initial_state = \"run\"\n[stress]\ncounters = [\"A.int\", \"B.int\", \"C.int\"]\n"
    );
    // The run's keys beside it (`ictus keys new`), with a reader's.
    let keys = dir.join("keys");
    if !keys.exists() {
        let out = ictus_in(dir)
            .args(["keys", "new"])
            .arg(&keys)
            .args(["--hosts", "h1,h2,h3", "--readers", "python"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    text += "[security]\nkeys = \"keys\"\n";
    for h in 1..=3 {
        text += &format!(
            "[[host]]\nname = \"h{h}\"\naddress = \"127.0.0.1:{}\"\n",
            free_port()
        );
    }
    for (n, start, from, to, host, own) in [
        ("A", 0, "A", "B", "h2", false),
        ("B", 1, "B", "C", "h3", false),
        ("C", 2, "C", "A", "h2", true),
    ] {
        text += &format!(
            "[[subsystem]]\nname = \"{n}\"\nhost = \"{host}\"\nstart = {start}\nperiod = 3\n\
             builtin = \"increment\"\nconfig = {{ from = \"{from}\", to = \"{to}\" }}\n{}",
            if own { "process = \"own\"\n" } else { "" }
        );
    }
    write_file(dir, "hosts.toml", &text)
}

/// The three hosts of [`three_hosts`] running, under run name `cli-TAG-PID`.
struct Hosts {
    dir: tempfile::TempDir,
    name: String,
    h2: Child,
    h3: Child,
    main: Child,
}

/// Starts the nodes h2 and h3 (hosts start in any order), then after `head_start`
/// the main host, to run for `duration`.
fn start_hosts(tag: &str, duration: &str, head_start: Duration) -> Hosts {
    let (dir, name) = scratch_run(tag);
    let path = three_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    let node = |host| {
        spawn(
            dir.path(),
            &["node", file, "--host", host, "--json", "--quiet"],
        )
    };
    let (h2, h3) = (node("h2"), node("h3"));
    std::thread::sleep(head_start);
    let main = spawn(
        dir.path(),
        &["run", file, "--duration", duration, "--json", "--quiet"],
    );
    Hosts {
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

#[test]
fn three_hosts_on_loopback_run_the_ring_and_account_for_every_frame() {
    // The nodes first here, the main one a moment later.
    let ring = start_hosts("hosts", "3s", Duration::from_millis(300));
    // While it runs, the main host's status shows the other hosts' subsystems.
    let sock = socket(ring.dir.path(), &ring.name);
    let mut b_frames = 0;
    let mut hosts = Value::Null;
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
            if b_frames > 0 && ticking("h2") && ticking("h3") {
                break;
            }
        }
    }
    assert!(
        b_frames > 0,
        "B (on h3) never showed in the main host's status"
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
    for (who, o) in [("main", &out), ("h2", &o2), ("h3", &o3)] {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{who}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
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
    assert!(
        subsystem(&r, "B")["metrics"]["lost_frames"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // h2's subsystems kept their beat: every frame run or overrun, none lost.
    for n in ["A", "C"] {
        assert_eq!(subsystem(&r, n)["metrics"]["lost_frames"], 0.0, "{n}");
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

#[test]
fn a_run_across_hosts_without_keys_is_refused_saying_how_to_make_them() {
    let (dir, name) = scratch_run("nokeys");
    let path = three_hosts(dir.path(), &name);
    let text = std::fs::read_to_string(&path).unwrap();
    let bare = write_file(
        dir.path(),
        "bare.toml",
        &text.replace("[security]\nkeys = \"keys\"\n", ""),
    );
    let file = bare.to_str().unwrap();
    let err = refused(ictus_in(dir.path()).args(["run", file, "--duration", "1s"]));
    assert!(
        err.contains("no keys were given") && err.contains("ictus keys new KEYS --hosts h1,h2,h3"),
        "{err}"
    );
    let err = refused(ictus_in(dir.path()).args(["node", file, "--host", "h2"]));
    assert!(err.contains("--insecure"), "{err}");
    // Keys that do not name this host, or no keys where said.
    let other = dir.path().join("other");
    let out = ictus_in(dir.path())
        .args(["keys", "new"])
        .arg(&other)
        .args(["--hosts", "h1,h2"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = refused(
        ictus_in(dir.path())
            .args(["node", file, "--host", "h3", "--keys"])
            .arg(&other),
    );
    assert!(
        err.contains("h3.pem") && err.contains("ictus keys new"),
        "{err}"
    );
    let err = refused(
        ictus_in(dir.path())
            .args(["run", file, "--keys", "/nonexistent/keys"])
            .arg("--duration")
            .arg("1s"),
    );
    assert!(err.contains("/nonexistent/keys/ca.pem"), "{err}");
    // Both at once is a contradiction.
    let err = refused(ictus_in(dir.path()).args(["run", file, "--insecure", "--keys", "k"]));
    assert!(err.contains("cannot be used with"), "{err}");
    assert!(shm_left(&name).is_empty());
}
