//! The run's keys across hosts: refused without them, a host's bundle alone
//! enough, a retired host's stolen certificate shut out.

use super::attacks::{Attacker, attack, attacker_session, untouched};
use super::*;

#[test]
fn a_run_across_hosts_without_keys_is_refused_saying_how_to_make_them() {
    let (dir, name) = scratch_run("nokeys");
    let path = three_hosts(dir.path(), &name);
    let text = std::fs::read_to_string(&path).unwrap();
    let bare = write_file(
        dir.path(),
        "bare.toml",
        &text.replace("[security]\nkeys = \"keys/bundles/hosts/{host}\"\n", ""),
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
    // The whole folder `ictus keys new` made holds every key: refused for a host,
    // naming what it holds and the bundle to copy, unless told it is shared.
    let err = refused(
        ictus_in(dir.path())
            .args(["node", file, "--host", "h2", "--keys"])
            .arg(&other),
    );
    assert!(
        err.contains("the CA's key (ca/ca.key), host h1's key")
            && err.contains("KEYS/bundles/hosts/h2")
            && err.contains("--shared-keys"),
        "{err}"
    );
    let err = refused(
        ictus_in(dir.path())
            .args(["run", file, "--keys", "/nonexistent/keys"])
            .arg("--duration")
            .arg("1s"),
    );
    assert!(err.contains("/nonexistent/keys/ca.pem"), "{err}");
    // A schedule alone cannot turn trust off.
    let open = write_file(
        dir.path(),
        "open.toml",
        &text.replace(
            "[security]\nkeys = \"keys/bundles/hosts/{host}\"\n",
            "[security]\ninsecure = true\n",
        ),
    );
    let err = refused(ictus_in(dir.path()).args(["node", open.to_str().unwrap(), "--host", "h2"]));
    assert!(
        err.contains("insecure = true") && err.contains("needs --insecure"),
        "{err}"
    );
    // Both at once is a contradiction.
    let err = refused(ictus_in(dir.path()).args(["run", file, "--insecure", "--keys", "k"]));
    assert!(err.contains("cannot be used with"), "{err}");
    assert!(shm_left(&name).is_empty());
}

#[test]
fn a_hosts_bundle_copied_to_a_fresh_folder_runs_that_host_and_nothing_else_is_needed() {
    let _turn = common::one_at_a_time();
    let (dir, name) = scratch_run("bundle");
    let path = three_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    // h3's key renewed (as when stolen or near its end), valid one day: its bundle,
    // copied alone to a folder of its own as to another machine, is all it needs,
    // and the other hosts, not re-keyed, let it in.
    let out = succeeds(
        ictus_in(dir.path())
            .args(["keys", "renew"])
            .arg(dir.path().join("keys"))
            .args(["--host", "h3", "--days", "1"]),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("keys/bundles/hosts/h3"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let bundle = dir.path().join("keys/bundles/hosts/h3");
    let fresh = dir.path().join("h3-keys");
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        std::fs::create_dir_all(fresh.join(&rel)).unwrap();
        for e in std::fs::read_dir(bundle.join(&rel)).unwrap().flatten() {
            let rel = rel.join(e.file_name());
            if e.path().is_dir() {
                stack.push(rel);
            } else {
                std::fs::copy(e.path(), fresh.join(&rel)).unwrap();
            }
        }
    }
    assert!(ictus_net::security::foreign_keys(&fresh, "h3").is_empty());
    let h3_keys = fresh.to_str().unwrap();
    let h2 = spawn(
        dir.path(),
        &["node", file, "--host", "h2", "--json", "--quiet"],
    );
    let h3 = spawn(
        dir.path(),
        &[
            "node", file, "--host", "h3", "--keys", h3_keys, "--json", "--quiet",
        ],
    );
    let main = spawn(
        dir.path(),
        &["run", file, "--duration", "2s", "--json", "--quiet"],
    );
    let out = finish(main, Duration::from_secs(60));
    let o2 = finish(h2, Duration::from_secs(60));
    let o3 = finish(h3, Duration::from_secs(60));
    for o in [&out, &o2, &o3] {
        exits(o, 0);
    }
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every host took part: B, on h3, ran its frames.
    let b = subsystem(&r, "B");
    assert!(b["metrics"]["frames_run"].as_f64().unwrap() > 0.0, "{b:#}");
    // h3's certificate ends within 14 days: it says so, in its record too.
    let r3: Value = serde_json::from_slice(&o3.stdout).unwrap();
    assert!(
        r3["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w["id"] == "keys-expiring")),
        "{:#}",
        r3["warnings"]
    );
    assert!(String::from_utf8_lossy(&o3.stderr).contains("keys end soon"));
    assert!(shm_left(&name).is_empty());
}

#[test]
fn a_retired_hosts_stolen_certificate_gets_nothing_in_and_its_new_one_runs() {
    let _turn = common::one_at_a_time();
    let (dir, name) = scratch_run("retired");
    let path = three_hosts(dir.path(), &name);
    let file = path.to_str().unwrap();
    // h3's certificate and key, stolen (copied away), then retired where the keys
    // were made: h3 gets a new one, every bundle a `names` file saying so.
    let keys = dir.path().join("keys");
    let stolen = dir.path().join("stolen");
    std::fs::create_dir_all(stolen.join("hosts")).unwrap();
    std::fs::copy(keys.join("ca.pem"), stolen.join("ca.pem")).unwrap();
    for f in ["hosts/h3.pem", "hosts/h3.key"] {
        std::fs::copy(keys.join(f), stolen.join(f)).unwrap();
    }
    let out = succeeds(
        ictus_in(dir.path())
            .args(["keys", "renew"])
            .arg(&keys)
            .args(["--host", "h3", "--retire"]),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("retired"));
    assert_eq!(
        ictus_net::keys::common_names(&keys.join("bundles/hosts/h1")).unwrap()["h3"],
        "h3.2"
    );
    let (h2, h3) = common::spawn_nodes(dir.path(), file);
    let main = spawn(
        dir.path(),
        &["run", file, "--duration", "4s", "--json", "--quiet"],
    );
    let ring = Hosts {
        _turn,
        dir,
        name,
        h2,
        h3,
        main,
    };
    wait_for_socket(ring.dir.path(), &ring.name);
    std::thread::sleep(Duration::from_millis(800));
    // The thief, with the retired certificate: a valid one of the run's CA whose name
    // no host's rules know any more.
    let session = attacker_session(&ring, Attacker::RetiredHost).expect("a session");
    attack(&session, &ring.name, Duration::from_millis(2000));
    let out = finish(ring.main, Duration::from_secs(60));
    let o2 = finish(ring.h2, Duration::from_secs(30));
    let o3 = finish(ring.h3, Duration::from_secs(30));
    assert!(shm_left(&ring.name).is_empty());
    // The renewed h3 ran its part, and nothing of the thief's got in.
    untouched(Attacker::RetiredHost, &(out, o2, o3));
}
