//! `ictus keys new`: the run's CA and the hosts' and readers' certificates, private,
//! never over existing keys; bad input changes nothing.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{ictus, refused, succeeds};

#[test]
fn keys_new_makes_the_ca_and_one_certificate_and_key_per_host_and_reader() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("keys");
    let out = succeeds(ictus().args(["keys", "new"]).arg(&dir).args([
        "--hosts",
        "h1,h2,h3",
        "--readers",
        "python",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    for (line, file) in [
        ("the run's CA", "ca.pem"),
        ("host h3", "hosts/h3.key"),
        ("reader python", "readers/python.pem"),
    ] {
        assert!(text.contains(line), "{text}");
        let path = dir.join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
    assert!(dir.join("ca/ca.key").is_file());
    // Never over existing keys: refused, and the CA is the same.
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let err = refused(
        ictus()
            .args(["keys", "new"])
            .arg(&dir)
            .args(["--hosts", "h1"]),
    );
    assert!(err.contains("exists and is not empty"), "{err}");
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), ca);
}

#[test]
fn a_bad_host_name_or_no_host_is_refused_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("keys");
    let err = refused(
        ictus()
            .args(["keys", "new"])
            .arg(&dir)
            .args(["--hosts", "h1,h.2"]),
    );
    assert!(err.contains("'h.2' cannot name a host"), "{err}");
    let err =
        refused(
            ictus()
                .args(["keys", "new"])
                .arg(&dir)
                .args(["--hosts", "h1", "--readers", "h1"]),
        );
    assert!(err.contains("named twice"), "{err}");
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}

#[test]
fn keys_check_says_when_each_certificate_ends_and_fails_on_one_that_ends_soon() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("keys");
    succeeds(ictus().args(["keys", "new"]).arg(&dir).args([
        "--hosts",
        "h1,h2",
        "--readers",
        "py",
        "--days",
        "30",
    ]));
    let out = succeeds(ictus().args(["keys", "check"]).arg(&dir));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (line, who) in lines
        .iter()
        .zip(["the CA", "host h1", "host h2", "reader py"])
    {
        assert!(line.starts_with(&format!("{who}: valid until ")), "{text}");
    }
    assert!(
        lines[1].ends_with("29 day(s) left") || lines[1].ends_with("30 day(s) left"),
        "{text}"
    );
    // h2 renewed for one day: named, and the check fails (exit 1).
    succeeds(
        ictus()
            .args(["keys", "renew"])
            .arg(&dir)
            .args(["--host", "h2", "--days", "1"]),
    );
    for folder in [dir.clone(), dir.join("bundles/hosts/h2")] {
        let out = ictus()
            .args(["keys", "check"])
            .arg(&folder)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("host h2") && l.contains("renew it soon")),
            "{text}"
        );
    }
    // Not a keys folder: said, exit 2.
    let err = refused(ictus().args(["keys", "check"]).arg(root.path()));
    assert!(err.contains("ca.pem"), "{err}");
    // The doctor says the same, as its last check and a note of its verdict; it
    // still exits 0 (nothing has ended).
    let out = succeeds(
        ictus()
            .args(["doctor", "--json", "--keys"])
            .arg(dir.join("bundles/hosts/h2")),
    );
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let last = audit["checks"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["id"], "keys", "{last}");
    assert_eq!(last["status"], "available", "{last}");
    let detail = last["detail"].as_str().unwrap();
    assert!(detail.contains("host h2: ends in 0 day(s)"), "{detail}");
    assert!(
        last["advice"]
            .as_str()
            .unwrap()
            .contains("ictus keys renew")
    );
    let notes = audit["verdict"]["notes"].to_string();
    assert!(notes.contains("host h2 end within 14 days"), "{notes}");
    let out = succeeds(ictus().args(["doctor", "--keys"]).arg(&dir));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Run keys (TLS)"), "{text}");
    let err = refused(ictus().args(["doctor", "--keys"]).arg(root.path()));
    assert!(err.contains("ca.pem"), "{err}");
}
