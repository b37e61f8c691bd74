//! Zenoh sessions configured by `ictus_net::security`: mutual TLS keeps out peers
//! without a certificate of the run's CA, and the access rules let each host publish
//! only under its own name, and readers publish nothing. Structure only: whether a
//! sample arrived, never when.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use ictus_net::keys::{self, KeysRequest};
use ictus_net::security::{Credentials, access_rules};
use ictus_net::{Endpoints, Session, open, open_secure};
use zenoh::Wait;

fn make(dir: &Path) {
    keys::new(&KeysRequest {
        dir: dir.to_path_buf(),
        hosts: vec!["h1".into(), "h2".into()],
        readers: vec!["py".into()],
        validity: Default::default(),
    })
    .unwrap();
}

fn endpoints(listen: &[&str], connect: &[&str]) -> Endpoints {
    let mut e = Endpoints::parse(listen, connect).unwrap();
    e.multicast = false;
    e
}

fn rules() -> serde_json::Value {
    access_rules("r", &["h1".into(), "h2".into()], &["py".into()])
}

/// What `subscriber` receives of `key` while `publisher` puts on it for a while.
fn arrives(subscriber: &Session, publisher: &Session, key: &str) -> bool {
    let (tx, rx) = mpsc::channel();
    let _sub = subscriber
        .declare_subscriber(key)
        .callback(move |s| {
            let _ = tx.send(s.payload().to_bytes().into_owned());
        })
        .wait()
        .unwrap();
    for _ in 0..40 {
        let _ = publisher.put(key, vec![7u8]).wait();
        if rx.recv_timeout(Duration::from_millis(50)).is_ok() {
            return true;
        }
    }
    false
}

struct Run {
    _dir: tempfile::TempDir,
    keys: std::path::PathBuf,
    at: String,
    h1: Session,
    h2: Session,
}

fn run() -> Run {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    make(&keys);
    let at = format!("quic/127.0.0.1:{}", ictus_os::testing::free_port());
    let h1 = open_secure(
        &endpoints(&[&at], &[]),
        &Credentials::of_host(&keys, "h1").unwrap(),
        Some(&rules()),
    )
    .unwrap();
    let h2 = open_secure(
        &endpoints(&[], &[&at]),
        &Credentials::of_host(&keys, "h2").unwrap(),
        Some(&rules()),
    )
    .unwrap();
    Run {
        _dir: dir,
        keys,
        at,
        h1,
        h2,
    }
}

impl Run {
    /// A session of reader `py`, joined to the main host.
    fn reader(&self) -> Session {
        open_secure(
            &endpoints(&[], &[&self.at]),
            &Credentials::of_reader(&self.keys, "py").unwrap(),
            None,
        )
        .unwrap()
    }
}

#[test]
fn hosts_publish_under_their_own_name_only() {
    let r = run();
    assert!(arrives(&r.h1, &r.h2, "ictus/r/cell/A/h2"), "its own cell");
    assert!(arrives(&r.h1, &r.h2, "ictus/r/status/h2"), "its own status");
    assert!(!arrives(&r.h1, &r.h2, "ictus/r/cell/A/h1"), "h1's cell");
    assert!(
        !arrives(&r.h1, &r.h2, "ictus/r/tick"),
        "the main host's tick"
    );
    assert!(arrives(&r.h2, &r.h1, "ictus/r/tick"), "the main host ticks");
}

#[test]
fn a_reader_reads_and_cannot_write() {
    let r = run();
    let reader = r.reader();
    // It reads the view and the status, never the hosts' own cells and tick.
    assert!(
        arrives(&reader, &r.h1, "ictus/r/view/cell/A/h1"),
        "reads the view"
    );
    assert!(
        arrives(&reader, &r.h1, "ictus/r/view/tick"),
        "reads the view's tick"
    );
    assert!(
        !arrives(&reader, &r.h1, "ictus/r/cell/A/h1"),
        "gets a host's own cell"
    );
    assert!(
        !arrives(&reader, &r.h1, "ictus/r/tick"),
        "gets the hosts' tick"
    );
    assert!(
        !arrives(&r.h1, &reader, "ictus/r/cell/A/h2"),
        "writes a cell"
    );
    assert!(
        !arrives(&r.h1, &reader, "ictus/r/view/cell/A/h2"),
        "writes the view"
    );
    assert!(!arrives(&r.h1, &reader, "ictus/r/tick"), "ticks");
}

/// Whether `asker` gets an answer to a query of `key` from `server`'s queryable
/// `within` the time given.
fn answered(server: &Session, asker: &Session, key: &str, within: Duration) -> bool {
    let _queryable = server
        .declare_queryable(key)
        .callback(|query| {
            let _ = query.reply(query.key_expr().clone(), vec![7u8]).wait();
        })
        .wait()
        .unwrap();
    // Asked again until the queryable is known on the asker's side (a query with
    // nowhere to go ends at once).
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        let replies = asker
            .get(key)
            .timeout(Duration::from_millis(200))
            .wait()
            .unwrap();
        if replies.recv().is_ok_and(|r| r.result().is_ok()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_reader_asks_for_the_layout_and_the_claims_and_nothing_else() {
    let r = run();
    let reader = r.reader();
    // What it needs to read a cell whole: what the cell holds, and who writes it.
    let long = Duration::from_secs(5);
    assert!(answered(&r.h1, &reader, "ictus/r/layout", long), "layout");
    assert!(
        answered(&r.h1, &reader, "ictus/r/claims/h1", long),
        "claims"
    );
    // Never the setup channel (the main host's clock, the start, the setup store) or
    // a node's outcome.
    for key in [
        "ictus/r/setup/clock",
        "ictus/r/setup/start",
        "ictus/r/setup/kv/k",
        "ictus/r/outcome/h2",
    ] {
        assert!(
            !answered(&r.h1, &reader, key, Duration::from_secs(1)),
            "{key}"
        );
    }
}

#[test]
fn a_peer_without_a_certificate_of_the_runs_ca_never_connects() {
    let r = run();
    // No certificate at all, over TLS and over plain TCP to the same port.
    let tcp = r.at.replacen("quic/", "tcp/", 1);
    let bare = open(&endpoints(&[], &[&tcp])).unwrap();
    assert!(!arrives(&r.h1, &bare, "ictus/r/cell/A/h2"));
    assert!(!arrives(&bare, &r.h1, "ictus/r/cell/A/h1"));
    // A certificate from another run's CA, named like a host of this one.
    let other = r._dir.path().join("other");
    make(&other);
    let forged = open_secure(
        &endpoints(&[], &[&r.at]),
        &Credentials::of_host(&other, "h2").unwrap(),
        None,
    );
    if let Ok(forged) = forged {
        assert!(!arrives(&r.h1, &forged, "ictus/r/cell/A/h2"));
        assert!(!arrives(&forged, &r.h1, "ictus/r/cell/A/h1"));
        assert!(forged.info().peers_zid().wait().next().is_none());
    }
    assert!(bare.info().peers_zid().wait().next().is_none());
}

#[test]
fn a_host_sends_hub_operations_under_its_own_name_only() {
    let r = run();
    // h2 to h1, as h2: its own requests and answers.
    assert!(arrives(&r.h1, &r.h2, "ictus/r/hub/h2/h1"), "its own");
    // h2 pretending to be h1 (to h1 or to anyone): refused on the way in.
    assert!(!arrives(&r.h1, &r.h2, "ictus/r/hub/h1/h1"), "as h1");
    assert!(!arrives(&r.h2, &r.h1, "ictus/r/hub/h2/h2"), "h1 as h2");
    assert!(arrives(&r.h2, &r.h1, "ictus/r/hub/h1/h2"), "h1's own");
}
