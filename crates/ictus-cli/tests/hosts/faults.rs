//! Faults across hosts: a reader too slow, the main host killed, a node silent, a
//! link cut, cells late, a node's misses explained on the main host.

use super::*;

/// A reader's session, a Zenoh client of the main host (as `python/ictus_zenoh`
/// connects), subscribed to everything of the run with a callback that takes
/// `per_sample` (a plotting dashboard's pace). Returns the session and how many
/// samples the callback saw.
fn slow_reader(
    ring: &Hosts,
    per_sample: Duration,
) -> (ictus_net::Session, std::sync::Arc<std::sync::Mutex<u64>>) {
    use zenoh::Wait;
    let dir = ring.dir.path();
    let main = format!("quic/{}", addresses(&dir.join("hosts.toml"))[0]);
    let mut endpoints = ictus_net::Endpoints::parse(&[], &[main.as_str()]).unwrap();
    endpoints.multicast = false;
    let mut c = ictus_net::config(&endpoints).unwrap();
    c.insert_json5("mode", "\"client\"").unwrap();
    c.insert_json5("listen/endpoints", "[]").unwrap();
    ictus_net::security::Credentials::of_reader(&dir.join("keys"), "python")
        .unwrap()
        .apply(&mut c)
        .unwrap();
    let session = zenoh::open(c).wait().expect("the reader connects");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(0u64));
    let counted = std::sync::Arc::clone(&seen);
    // In the background: it lives as long as the session.
    session
        .declare_subscriber(format!("ictus/{}/**", ring.name))
        .callback(move |_sample| {
            *counted.lock().unwrap() += 1;
            std::thread::sleep(per_sample);
        })
        .background()
        .wait()
        .unwrap();
    (session, seen)
}

#[test]
fn a_reader_too_slow_for_the_run_changes_nothing_for_the_hosts_and_is_named() {
    // As long as it took a reader to stall the hosts before they stopped waiting on
    // it (issue 30: 1,401 of 3,000 frames missed with a reader from 3 s to 10 s).
    let ring = start_hosts("slowreader", "10s", Duration::ZERO);
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(800));
    let (reader, seen) = slow_reader(&ring, Duration::from_millis(200));
    std::thread::sleep(Duration::from_secs(8));
    {
        use zenoh::Wait;
        let _ = reader.close().wait();
    }
    let out = finish(ring.main, Duration::from_secs(60));
    let o2 = finish(ring.h2, Duration::from_secs(30));
    let o3 = finish(ring.h3, Duration::from_secs(30));
    assert!(*seen.lock().unwrap() > 0, "the reader got nothing");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    for (host, o) in [("main", &out), ("h2", &o2), ("h3", &o3)] {
        assert_eq!(
            o.status.code(),
            Some(0),
            "{host}: {} {:#?}",
            String::from_utf8_lossy(&o.stderr),
            events(&r)
        );
    }
    assert_eq!(r["complete"], true);
    for n in ["A", "B", "C"] {
        assert_eq!(subsystem(&r, n)["metrics"]["lost_frames"], 0.0, "{n}");
    }
    // The main host, which the reader linked to, names it, its coming and going.
    let events = events(&r);
    let named = |what: &str| {
        events
            .iter()
            .any(|e| e.contains("reader python") && e.contains(what))
    };
    assert!(named("linked to this host") && named("left"), "{events:?}");
    assert!(shm_left(&ring.name).is_empty());
}

/// A node's output once its main host is gone: it acted on the silence (a
/// host-lost warning naming the ticks' silence and the safe state), counted the
/// frames after it as lost, and exited 3.
fn acted_on_the_main_hosts_silence(host: &str, o: &std::process::Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{host}: {err}");
    let r: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{host}: {err}"));
    assert_eq!(r["complete"], false, "{host}");
    let lost = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "host-lost")
        .unwrap_or_else(|| panic!("{host}: no host-lost warning: {}", r["warnings"]));
    let msg = lost["message"].as_str().unwrap();
    assert!(
        msg.contains("no tick from the main coordinator (host h1)") && msg.contains("state off"),
        "{host}: {msg}"
    );
    let lost_frames: f64 = measurements(&r, "release-jitter")
        .map(|m| m["metrics"]["lost_frames"].as_f64().unwrap())
        .sum();
    assert!(lost_frames > 0.0, "{host}: no frame counted as lost");
    assert!(events(&r).iter().any(|e| e.contains("state off")), "{host}");
}

#[test]
fn a_main_host_killed_puts_the_nodes_in_the_safe_state_and_they_exit_within_two_seconds() {
    // Long enough that only the silence can end the nodes' run.
    let ring = start_hosts("mainkill", "60s", Duration::ZERO);
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(1500));
    kill("KILL", ring.main.id());
    let killed = std::time::Instant::now();
    let o2 = finish(ring.h2, Duration::from_secs(60));
    let o3 = finish(ring.h3, Duration::from_secs(60));
    let took = killed.elapsed();
    let _ = finish(ring.main, Duration::from_secs(10));
    acted_on_the_main_hosts_silence("h2", &o2);
    acted_on_the_main_hosts_silence("h3", &o3);
    // The bound (200 ms by default), the next major frame, and the leaving.
    assert!(
        took < Duration::from_secs(2),
        "the nodes took {took:?} to end after the main host was killed"
    );
    assert!(shm_left(&format!("{}.h2", ring.name)).is_empty());
    assert!(shm_left(&format!("{}.h3", ring.name)).is_empty());
}

#[test]
fn a_node_that_falls_silent_is_lost_to_the_main_host_within_the_bound() {
    // h3 stopped (SIGSTOP: a stalled process keeps its link and Zenoh's lease for
    // a while, and sends nothing): the main host hears no beat from it.
    let ring = start_hosts("nodestall", "4s", Duration::ZERO);
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(1500));
    kill("STOP", ring.h3.id());
    let out = finish(ring.main, Duration::from_secs(60));
    kill("KILL", ring.h3.id());
    let _ = finish(ring.h3, Duration::from_secs(10));
    let o2 = finish(ring.h2, Duration::from_secs(30));
    exits(&out, 3);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = events(&r);
    let silent = events
        .iter()
        .find(|e| e.contains("nothing from host h3 for"))
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(
        silent.contains("(the silence bound is 200.00 ms)"),
        "{silent}"
    );
    assert!(
        r["warnings"]
            .to_string()
            .contains("host h3 left the run at frame"),
        "{}",
        r["warnings"]
    );
    assert!(lost_frames(&r, "B") > 0.0);
    // h2 kept its beat.
    exits(&o2, 0);
}

/// Three hosts in network namespaces of `bench/netns.sh` (`PREFIX-h1..h3` joined by
/// veth pairs to a bridge), made for one test and removed on drop, also when the
/// test fails. `None` (the test skipped, saying why) where they cannot be made.
struct Namespaces {
    prefix: String,
    subnet: String,
}

impl Namespaces {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/netns.sh")
    }

    fn netns(&self, what: &str) -> std::process::Command {
        let mut c = std::process::Command::new("bash");
        c.arg(Self::script())
            .arg(what)
            .env("PREFIX", &self.prefix)
            .env("SUBNET", &self.subnet)
            .env("HOSTS", "3");
        c
    }

    fn up(test: &str) -> Option<Namespaces> {
        let why = if !nix_is_root() {
            Some("network namespaces need root".to_string())
        } else if std::process::Command::new("ip").arg("-V").output().is_err() {
            Some("the ip command (iproute2) is missing".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            ictus_os::testing::skipped(test, &why);
            return None;
        }
        let pid = std::process::id();
        let ns = Namespaces {
            prefix: format!("it{}", pid % 1_000_000),
            subnet: format!("10.79.{}", pid % 250),
        };
        let out = ns.netns("up").output().unwrap();
        if !out.status.success() {
            let _ = ns.netns("down").output();
            ictus_os::testing::skipped(
                test,
                &format!(
                    "bench/netns.sh up failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            );
            return None;
        }
        Some(ns)
    }

    /// Host `i`'s (1 to 3) namespace.
    fn host(&self, i: usize) -> String {
        format!("{}-h{i}", self.prefix)
    }

    /// Host `i`'s address.
    fn address(&self, i: usize) -> String {
        format!("{}.{i}", self.subnet)
    }

    /// `ictus ARGS` in host `i`'s namespace, its run folder `run_dir`.
    fn spawn(&self, i: usize, run_dir: &std::path::Path, args: &[&str]) -> Child {
        std::process::Command::new("ip")
            .args(["netns", "exec", &self.host(i)])
            .arg(assert_cmd::cargo::cargo_bin("ictus"))
            .args(args)
            .env("ICTUS_RUN_DIR", run_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Cuts host `i`'s link: its end of the veth down.
    fn cut(&self, i: usize) {
        let ok = std::process::Command::new("ip")
            .args(["-n", &self.host(i), "link", "set", "eth0", "down"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "cutting {}'s link", self.host(i));
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = self.netns("down").output();
    }
}

/// The three hosts of a 4 s run (`tag`), 1.5 s into it, when this test runs as root;
/// else `test` is skipped (`why`).
fn running_as_root(test: &str, why: &str, tag: &str) -> Option<Hosts> {
    if !nix_is_root() {
        ictus_os::testing::skipped(test, why);
        return None;
    }
    let ring = start_hosts(tag, "4s", Duration::ZERO);
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(1500));
    Some(ring)
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The ring of [`common::three_hosts`] in network namespaces, each host at its
/// namespace's address: `(dir, name, main, h2, h3)`, the nodes started first.
fn start_ns_ring(
    ns: &Namespaces,
    tag: &str,
    duration: &str,
) -> (tempfile::TempDir, String, Child, Child, Child) {
    let (dir, name) = scratch_run(tag);
    let path = three_hosts(dir.path(), &name);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (i, a) in addresses(&path).iter().enumerate() {
        text = text.replace(a, &format!("{}:7447", ns.address(i + 1)));
    }
    std::fs::write(&path, text).unwrap();
    let file = path.to_str().unwrap();
    let node = |i, host| {
        ns.spawn(
            i,
            dir.path(),
            &["node", file, "--host", host, "--json", "--quiet"],
        )
    };
    let (h2, h3) = (node(2, "h2"), node(3, "h3"));
    let main = ns.spawn(
        1,
        dir.path(),
        &["run", file, "--duration", duration, "--json", "--quiet"],
    );
    wait_for_socket(dir.path(), &name);
    (dir, name, main, h2, h3)
}

#[test]
fn a_node_whose_link_is_cut_goes_to_the_safe_state_and_the_main_host_counts_it_lost() {
    let test = "a_node_whose_link_is_cut_goes_to_the_safe_state_and_the_main_host_counts_it_lost";
    let _turn = common::one_at_a_time();
    let Some(ns) = Namespaces::up(test) else {
        return;
    };
    let (_dir, name, main, h2, h3) = start_ns_ring(&ns, "linkcut", "5s");
    std::thread::sleep(Duration::from_millis(1500));
    ns.cut(3);
    let cut = std::time::Instant::now();
    let o3 = finish(h3, Duration::from_secs(60));
    let took = cut.elapsed();
    let out = finish(main, Duration::from_secs(60));
    let o2 = finish(h2, Duration::from_secs(60));
    // h3, cut off: no tick, so its subsystems in the safe state and its frames lost.
    acted_on_the_main_hosts_silence("h3", &o3);
    assert!(
        took < Duration::from_secs(2),
        "h3 took {took:?} to end after its link was cut"
    );
    // The main host: no beat from h3, so B's frames lost from there, exit 3.
    exits(&out, 3);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = events(&r);
    assert!(
        events
            .iter()
            .any(|e| e.contains("nothing from host h3 for")),
        "{events:?}"
    );
    assert!(lost_frames(&r, "B") > 0.0);
    // h2 kept its beat.
    exits(&o2, 0);
    assert!(shm_left(&name).is_empty());
}

/// Host `pid`'s threads of the normal class (its forwarder, Zenoh's, its
/// coordinator's; never its real-time subsystems) in a CPU cgroup of their own whose
/// CFS bandwidth is `quota` of every `period`: what they send waits for their next
/// slice. This kernel has no netem (`CONFIG_NET_SCH_NETEM` is not set) to delay a
/// link; this delays what the host sends instead. Undone on drop (the threads back
/// in the root group, the group removed), also when the test fails.
struct Throttled {
    dir: std::path::PathBuf,
}

impl Throttled {
    const ROOT: &'static str = "/sys/fs/cgroup/cpu";

    fn of(pid: u32, quota: Duration, period: Duration) -> Option<Throttled> {
        let root = std::path::Path::new(Self::ROOT);
        if !root.join("cpu.cfs_quota_us").exists() {
            return None;
        }
        let dir = root.join(format!("ictus-test-{}-{pid}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let t = Throttled { dir };
        std::fs::write(
            t.dir.join("cpu.cfs_period_us"),
            period.as_micros().to_string(),
        )
        .ok()?;
        std::fs::write(
            t.dir.join("cpu.cfs_quota_us"),
            quota.as_micros().to_string(),
        )
        .ok()?;
        let mut moved = 0;
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
        {
            let tid = task.file_name().to_string_lossy().into_owned();
            // The policy is the 41st field of stat, after the command in parentheses.
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            let policy = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(38))
                .and_then(|p| p.parse::<u32>().ok());
            if policy == Some(0) && std::fs::write(t.dir.join("tasks"), &tid).is_ok() {
                moved += 1;
            }
        }
        (moved > 0).then_some(t)
    }
}

impl Drop for Throttled {
    fn drop(&mut self) {
        let tasks = std::fs::read_to_string(self.dir.join("tasks")).unwrap_or_default();
        for tid in tasks.lines() {
            let _ = std::fs::write(std::path::Path::new(Self::ROOT).join("tasks"), tid);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn cells_that_come_late_are_named_by_frame_host_and_stage() {
    let test = "cells_that_come_late_are_named_by_frame_host_and_stage";
    let Some(ring) = running_as_root(test, "a CPU cgroup needs root", "late") else {
        return;
    };
    // h2's normal threads run 10 ms of every 20 for a second: what it sends waits
    // up to 10 ms, past the next frame (4 ms).
    let throttled = Throttled::of(
        ring.h2.id(),
        Duration::from_millis(5),
        Duration::from_millis(20),
    );
    if throttled.is_none() {
        ictus_os::testing::skipped(test, "no writable CPU cgroup with CFS bandwidth");
        kill("INT", ring.main.id());
        return;
    }
    std::thread::sleep(Duration::from_millis(1000));
    drop(throttled);
    let out = finish(ring.main, Duration::from_secs(60));
    let o2 = finish(ring.h2, Duration::from_secs(60));
    let o3 = finish(ring.h3, Duration::from_secs(60));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = events(&r);
    // The main host names the late cells from h2 that h3 reads (h3's status brings
    // them), each with its frame and where its time went; its own copies, which no
    // subsystem reads on the main host, cost no frame and are not judged.
    let named = |on: &str| {
        events.iter().any(|e| {
            e.contains("from h2, due by frame")
                && e.contains(&format!("arrived on {on}"))
                && e.contains("before the put")
                && e.contains("in transit")
        })
    };
    assert!(named("h3") && !named("h1"), "{events:#?}");
    let late = of_host(&r, "cell-latency", "h3")["metrics"]["late"]
        .as_f64()
        .unwrap();
    assert!(late > 0.0, "no late arrival counted on h3");
    // The account of the frames they cost, by receiver, cell, sender and where the
    // time went: h2's late cells cost frames on h3, whose copy of A is h2's.
    let accounted: Vec<&Value> = measurements(&r, "late-arrivals")
        .filter(|m| m["labels"]["from"] == "h2" && m["labels"]["host"] == "h3")
        .collect();
    assert!(!accounted.is_empty(), "no late arrivals accounted on h3");
    for m in &accounted {
        let stage = m["labels"]["stage"].as_str().unwrap();
        assert!(["sender", "transit", "whole"].contains(&stage), "{m}");
        assert!(
            m["labels"]["what"].as_str().unwrap().starts_with("cell "),
            "{m}"
        );
        let metric = |k: &str| m["metrics"][k].as_f64().unwrap();
        assert!(
            metric("arrivals") >= 1.0 && metric("late_worst_ns") > 0.0,
            "{m}"
        );
        assert!(metric("late_total_ns") >= metric("late_worst_ns"), "{m}");
    }
    let frames: f64 = accounted
        .iter()
        .map(|m| m["metrics"]["frames"].as_f64().unwrap())
        .sum();
    assert!(frames >= 1.0, "{accounted:#?}");
    // Late is not lost: h3 exits 0, and so do h2 and the main host unless the
    // throttled h2 went silent past the bound (5 of 5 runs here did not; a loaded
    // machine may), which the main host then says.
    exits(&o3, 0);
    let silent = events
        .iter()
        .any(|e| e.contains("nothing from host h2 for"));
    for (host, o) in [("main", &out), ("h2", &o2)] {
        assert!(
            o.status.code() == Some(0) || (silent && o.status.code() == Some(3)),
            "{host}: {:?} {} {events:#?}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(shm_left(&ring.name).is_empty());
}

#[test]
fn a_nodes_misses_are_explained_in_the_main_hosts_events_while_the_run_goes() {
    let test = "a_nodes_misses_are_explained_in_the_main_hosts_events_while_the_run_goes";
    let Some(ring) = running_as_root(test, "a SCHED_FIFO burner needs root", "explained") else {
        return;
    };
    // Every CPU held 30 ms by a FIFO 99 thread: the ring's subsystems (class normal)
    // are released late, past the 4 ms threshold, on h2 and h3.
    let online = ictus_os::facts::online_cpus();
    let burners: Vec<_> = online
        .cpus()
        .iter()
        .map(|&cpu| {
            std::thread::spawn(move || {
                let pinned = ictus_os::sched::set_affinity(&ictus_core::CpuSet::from_cpus([cpu]));
                let fifo =
                    ictus_os::sched::set_policy(ictus_os::sched::Policy::Fifo { priority: 99 });
                let until = std::time::Instant::now() + Duration::from_millis(30);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
                pinned.is_ok() && fifo.is_ok()
            })
        })
        .collect();
    let burned = burners.into_iter().all(|b| b.join().unwrap_or(false));
    let out = finish(ring.main, Duration::from_secs(60));
    let _ = finish(ring.h2, Duration::from_secs(60));
    let _ = finish(ring.h3, Duration::from_secs(60));
    if !burned {
        ictus_os::testing::skipped(test, "SCHED_FIFO 99 was refused");
        return;
    }
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let events = events(&r);
    // A node's own explanation, named on the main host with the node, the
    // subsystem, its frame and its cause, in the frames of the run (not at its end).
    let explained: Vec<&String> = events
        .iter()
        .filter(|e| {
            (e.contains(": on h2: ") || e.contains(": on h3: ")) && e.contains(" late at frame ")
        })
        .collect();
    assert!(!explained.is_empty(), "{events:#?}");
    let frame = |e: &str| -> u64 {
        e.strip_prefix("frame ")
            .and_then(|r| r.split(':').next())
            .and_then(|f| f.parse().ok())
            .unwrap_or(u64::MAX)
    };
    // 4 s at 4 ms: 1,000 frames.
    assert!(explained.iter().any(|e| frame(e) < 1_000), "{explained:#?}");
    assert!(shm_left(&ring.name).is_empty());
}
