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
