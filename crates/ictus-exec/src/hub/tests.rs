use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::decl::*;
use super::store::*;
use super::*;
use crate::cell::{ElemShape, ElemType};
use std::sync::atomic::AtomicU64;

fn unique(tag: &str) -> String {
    format!("test-hubs-{tag}-{}", std::process::id())
}

fn all() -> Vec<HubDecl> {
    vec![
        HubDecl::semaphore("sem", 1),
        HubDecl::event("ev"),
        HubDecl::fifo::<[u16; 3]>("fifo", 4),
        HubDecl::port::<[f64; 2]>("port"),
        HubDecl::resource("res"),
    ]
}

#[test]
fn handles_are_checked_by_name_kind_and_type() {
    let sut = Hubs::in_process(&all()).unwrap();
    assert!(matches!(
        sut.semaphore("nope"),
        Err(HubError::UnknownHub { .. })
    ));
    let err = sut.event("sem").unwrap_err();
    assert_eq!(err.to_string(), "hub `sem` is a semaphore, not a event");
    let err = sut.port::<[f32; 2]>("port").unwrap_err();
    assert_eq!(
        err.to_string(),
        "hub `port` carries `[f64; 2]` but was requested for `[f32; 2]`"
    );
    assert!(matches!(
        sut.fifo_sender::<u16>("fifo"),
        Err(HubError::TypeMismatch { .. })
    ));
}

#[test]
fn bad_declarations_are_refused() {
    let dup = [HubDecl::event("a"), HubDecl::resource("a")];
    assert!(matches!(
        Hubs::in_process(&dup),
        Err(HubError::DuplicateHub { .. })
    ));
    let empty = [HubDecl::fifo::<u8>("f", 0)];
    assert!(matches!(
        Hubs::in_process(&empty),
        Err(HubError::BadDecl { .. })
    ));
    let name = [HubDecl::event("a b")];
    assert!(matches!(
        Hubs::in_process(&name),
        Err(HubError::BadDecl { .. })
    ));
}

#[test]
fn a_hub_or_a_table_over_its_size_limit_is_refused_before_allocating() {
    // A FIFO of 2^20 messages of 1 MiB: 1 TiB.
    let text = "[[hub]]\nname = \"a\"\nkind = \"event\"\n\n[[hub]]\nname = \"big\"\nkind = \"fifo\"\ntype = \"u8\"\nlen = 1048576\ncapacity = 1048576\n";
    let err = decls_from_toml(text, "hubs.toml").unwrap_err().to_string();
    assert!(err.starts_with("hubs.toml:5:1: "), "{err}");
    assert!(
        err.contains("the limit is 67108864 (64 MiB) per hub"),
        "{err}"
    );
    let big = [HubDecl::new(
        "big",
        HubKind::Fifo {
            message: ElemShape::array(ElemType::U8, 1 << 20),
            capacity: 1 << 20,
        },
    )];
    assert!(matches!(
        Hubs::in_process(&big),
        Err(HubError::BadDecl { .. })
    ));
    // Five FIFOs of 63 MiB each: each fits, not all together.
    let text: String = (0..5)
        .map(|i| format!("[[hub]]\nname = \"f{i}\"\nkind = \"fifo\"\ntype = \"u8\"\nlen = 64512\ncapacity = 1024\n"))
        .collect();
    let err = decls_from_toml(&text, "hubs.toml").unwrap_err().to_string();
    assert!(err.starts_with("hubs.toml:25:1: with hub `f4`"), "{err}");
    let err = decls_from_toml(
        "[[hub]]\nname = \"a\"\nkind = \"event\"\n[[hub]]\nname = \"a\"\nkind = \"event\"\n",
        "h",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(err, "h:4:1: hub `a` is declared twice");
    let many: Vec<HubDecl> = (0..=MAX_HUBS)
        .map(|i| HubDecl::event(&format!("e{i}")))
        .collect();
    assert!(matches!(
        check_decls(&many),
        Err((MAX_HUBS, HubError::TooManyHubs { .. }))
    ));
}

#[test]
fn every_hub_starts_in_its_declared_state() {
    let sut = Hubs::in_process(&all()).unwrap();
    assert_eq!(sut.semaphore("sem").unwrap().count(), 1);
    assert!(!sut.event("ev").unwrap().is_raised());
    assert!(sut.fifo_sender::<[u16; 3]>("fifo").unwrap().is_empty());
    assert!(!sut.port::<[f64; 2]>("port").unwrap().is_full());
    assert_eq!(sut.resource("res").unwrap().holder(), None);
}

#[test]
fn a_semaphore_loop_between_threads_passes_every_token() {
    let sut =
        Hubs::in_process(&[HubDecl::semaphore("ping", 0), HubDecl::semaphore("pong", 0)]).unwrap();
    let other = sut.clone();
    let peer = std::thread::spawn(move || {
        let (ping, pong) = (
            other.semaphore("ping").unwrap(),
            other.semaphore("pong").unwrap(),
        );
        for _ in 0..10_000 {
            ping.take().unwrap();
            pong.give();
        }
    });
    let (ping, pong) = (
        sut.semaphore("ping").unwrap(),
        sut.semaphore("pong").unwrap(),
    );
    for _ in 0..10_000 {
        ping.give();
        pong.take().unwrap();
    }
    peer.join().unwrap();
    assert!(!pong.take_timeout(Duration::from_millis(1)).unwrap());
}

#[test]
fn an_event_wakes_a_sleeping_waiter() {
    let sut = Hubs::in_process(&[HubDecl::event("go")]).unwrap();
    let other = sut.clone();
    let waiter = std::thread::spawn(move || {
        let ev = other.event("go").unwrap();
        ev.wait().unwrap();
        ev.is_raised()
    });
    std::thread::sleep(Duration::from_millis(20));
    sut.event("go").unwrap().raise();
    assert!(!waiter.join().unwrap(), "the wait cleared it");
    let ev = sut.event("go").unwrap();
    assert!(!ev.wait_timeout(Duration::from_millis(1)).unwrap());
    ev.raise();
    assert!(ev.try_wait());
}

#[test]
fn a_fifo_carries_typed_messages_in_order_and_blocks_when_full() {
    let sut = Hubs::in_process(&[HubDecl::fifo::<[u16; 3]>("f", 4)]).unwrap();
    let mut tx = sut.fifo_sender::<[u16; 3]>("f").unwrap();
    let other = sut.clone();
    let consumer = std::thread::spawn(move || {
        let mut rx = other.fifo_receiver::<[u16; 3]>("f").unwrap();
        for i in 0..20_000u32 {
            let v = i as u16;
            assert_eq!(
                rx.recv().unwrap(),
                [v, v.wrapping_add(1), v.wrapping_add(2)]
            );
        }
        assert_eq!(rx.recv_timeout(Duration::from_millis(1)).unwrap(), None);
    });
    for i in 0..20_000u32 {
        let v = i as u16;
        tx.send([v, v.wrapping_add(1), v.wrapping_add(2)]).unwrap();
    }
    consumer.join().unwrap();
    assert_eq!(tx.capacity(), 4);
    for _ in 0..4 {
        tx.try_send([0; 3]).unwrap();
    }
    assert_eq!(tx.try_send([9; 3]).unwrap_err().into_inner(), [9; 3]);
    assert!(
        !tx.send_timeout([9; 3], Duration::from_millis(1)).unwrap(),
        "full, nobody reads"
    );
}

#[test]
fn a_fifo_end_is_claimed_until_dropped() {
    let sut = Hubs::in_process(&[HubDecl::fifo::<u8>("f", 2)]).unwrap();
    let tx = sut.fifo_sender::<u8>("f").unwrap();
    let err = sut.fifo_sender::<u8>("f").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "the sender of FIFO `f` is already attached, by process {}",
            std::process::id()
        )
    );
    let _rx = sut.fifo_receiver::<u8>("f").unwrap();
    drop(tx);
    let mut tx = sut.fifo_sender::<u8>("f").unwrap();
    tx.try_send(1).unwrap();
}

#[test]
fn both_ends_of_a_proxied_fifo_on_one_host_are_never_both_attached() {
    let decls = [HubDecl::fifo::<u32>("f", 4).at("h2")];
    let hosts = ["h1".to_owned(), "h2".to_owned()];
    // No relay: the ends race only each other, as before the relay looks.
    let sut = Hubs::in_process_at(&decls, &hosts, 0).unwrap();
    {
        let _tx = sut.fifo_sender::<u32>("f").unwrap();
        assert!(matches!(
            sut.fifo_receiver::<u32>("f"),
            Err(HubError::EndElsewhere {
                end: "receiver",
                ..
            })
        ));
    }
    {
        let _rx = sut.fifo_receiver::<u32>("f").unwrap();
        assert!(matches!(
            sut.fifo_sender::<u32>("f"),
            Err(HubError::EndElsewhere { end: "sender", .. })
        ));
    }
    // Two ends claimed at once: at most one is had.
    for _ in 0..200 {
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let rx = {
            let (sut, barrier) = (sut.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                sut.fifo_receiver::<u32>("f").ok()
            })
        };
        barrier.wait();
        let tx = sut.fifo_sender::<u32>("f");
        let rx = rx.join().unwrap();
        assert!(
            !(tx.is_ok() && rx.is_some()),
            "a FIFO of this host alone formed"
        );
    }
    // At home both ends are local, as on one host.
    let home = Hubs::in_process_at(&decls, &hosts, 1).unwrap();
    let _tx = home.fifo_sender::<u32>("f").unwrap();
    let _rx = home.fifo_receiver::<u32>("f").unwrap();
}

#[test]
fn a_fifo_end_of_a_dead_process_is_taken_over() {
    let sut = Hubs::in_process(&[HubDecl::fifo::<u8>("f", 2)]).unwrap();
    let tx = sut.fifo_sender::<u8>("f").unwrap();
    // A sender whose process died: its pid is no longer running.
    tx.h.words()[FIFO_SENDER].store(999_999, Ordering::Relaxed);
    std::mem::forget(tx);
    assert!(sut.fifo_sender::<u8>("f").is_ok());
}

#[test]
fn a_port_send_returns_only_once_the_message_is_taken() {
    let sut = Hubs::in_process(&[HubDecl::port::<[f64; 2]>("p")]).unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let (other, seen) = (sut.clone(), Arc::clone(&received));
    let receiver = std::thread::spawn(move || {
        let mut port = other.port::<[f64; 2]>("p").unwrap();
        for i in 0..1_000 {
            let m = port.receive().unwrap();
            assert_eq!(m, [f64::from(i), -f64::from(i)]);
            // Release: the sender reads it after its next send returns.
            seen.store(u64::from(i as u32) + 1, Ordering::Release);
        }
    });
    let mut port = sut.port::<[f64; 2]>("p").unwrap();
    for i in 0..1_000 {
        port.send(&[f64::from(i), -f64::from(i)]).unwrap();
        if i > 0 {
            // Acquire: pairs with the receiver's Release store; message i - 1
            // was received before message i could be taken.
            assert!(received.load(Ordering::Acquire) >= u64::from(i as u32));
        }
    }
    receiver.join().unwrap();
    assert_eq!(port.try_receive(), None);
    assert_eq!(
        port.receive_timeout(Duration::from_millis(1)).unwrap(),
        None
    );
}

#[test]
fn a_resource_excludes_and_reports_its_holder() {
    let sut = Hubs::in_process(&[HubDecl::resource("r")]).unwrap();
    let counter = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (hubs, counter) = (sut.clone(), Arc::clone(&counter));
            std::thread::spawn(move || {
                let r = hubs.resource("r").unwrap();
                for _ in 0..1_000 {
                    let _g = r.lock().unwrap();
                    // Relaxed: ordered by the resource.
                    let v = counter.load(Ordering::Relaxed);
                    counter.store(v + 1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // Relaxed: after join.
    assert_eq!(counter.load(Ordering::Relaxed), 3_000);
    let r = sut.resource("r").unwrap();
    let g = r.lock().unwrap();
    assert_eq!(r.holder(), Some(ictus_os::handoff::gettid()));
    let err = r.lock().unwrap_err();
    assert!(err.to_string().contains("already holds it"), "{err}");
    assert!(r.try_lock().unwrap().is_none());
    drop(g);
    assert!(r.try_lock().unwrap().is_some());
}

#[test]
fn a_resource_held_by_a_dead_thread_is_reported_and_can_be_freed() {
    let sut = Hubs::in_process(&[HubDecl::resource("r")]).unwrap();
    let other = sut.clone();
    std::thread::spawn(move || {
        let r = other.resource("r").unwrap();
        std::mem::forget(r.lock().unwrap());
    })
    .join()
    .unwrap();
    let r = sut.resource("r").unwrap();
    let err = r.lock().unwrap_err();
    assert!(err.to_string().contains("the owner died"), "{err}");
    assert!(r.force_release().is_some());
    drop(r.lock().unwrap());
}

#[test]
fn shared_hubs_work_across_two_mappings() {
    let name = unique("mappings");
    let owner = Hubs::create_shared(&all(), &name).unwrap();
    let other = Hubs::open_shared_matching(&name, &all()).unwrap();
    assert_eq!(other.decls(), owner.decls());
    let peer = std::thread::spawn(move || {
        let sem = other.semaphore("sem").unwrap();
        let mut rx = other.fifo_receiver::<[u16; 3]>("fifo").unwrap();
        let mut port = other.port::<[f64; 2]>("port").unwrap();
        // The initial token, and the one the owner gives.
        sem.take().unwrap();
        sem.take().unwrap();
        assert_eq!(rx.recv().unwrap(), [1, 2, 3]);
        assert_eq!(port.receive().unwrap(), [0.5, 1.5]);
        other.event("ev").unwrap().raise();
    });
    let sem = owner.semaphore("sem").unwrap();
    sem.give();
    owner
        .fifo_sender::<[u16; 3]>("fifo")
        .unwrap()
        .send([1, 2, 3])
        .unwrap();
    owner
        .port::<[f64; 2]>("port")
        .unwrap()
        .send(&[0.5, 1.5])
        .unwrap();
    owner.event("ev").unwrap().wait().unwrap();
    peer.join().unwrap();
    let path = owner.segment().unwrap().path();
    // Handles keep the hubs (and so the segment) alive.
    drop(owner);
    assert!(std::path::Path::new(&path).exists());
    drop(sem);
    assert!(!std::path::Path::new(&path).exists());
}

#[test]
fn a_declaration_that_differs_from_the_shared_hubs_names_the_hub() {
    let name = unique("mismatch");
    let _owner = Hubs::create_shared(&all(), &name).unwrap();
    let err =
        Hubs::open_shared_matching(&name, &[HubDecl::fifo::<[u16; 3]>("fifo", 8)]).unwrap_err();
    assert!(err.to_string().starts_with("hub `fifo` differs"), "{err}");
    let err = Hubs::open_shared_matching(&name, &[HubDecl::event("other")]).unwrap_err();
    assert!(err.to_string().contains("not in the shared table"), "{err}");
}

#[test]
fn hub_declarations_parse_from_toml_with_places() {
    let text = r#"
[[hub]]
name = "ready"
kind = "semaphore"
initial = 2

[[hub]]
name = "forces"
kind = "fifo"
type = "f32"
len = 3
capacity = 16

[[hub]]
name = "setup"
kind = "port"
type = "u64"

[[hub]]
name = "device"
kind = "resource"

[[hub]]
name = "go"
kind = "event"
"#;
    let decls = decls_from_toml(text, "hubs.toml").unwrap();
    assert_eq!(
        decls,
        vec![
            HubDecl::semaphore("ready", 2),
            HubDecl::fifo::<[f32; 3]>("forces", 16),
            HubDecl::port::<u64>("setup"),
            HubDecl::resource("device"),
            HubDecl::event("go"),
        ]
    );
    let json = serde_json::to_string(&decls).unwrap();
    assert_eq!(serde_json::from_str::<Vec<HubDecl>>(&json).unwrap(), decls);
    let bad = "[[hub]]\nname = \"x\"\nkind = \"fifo\"\ntype = \"f32\"\n";
    let err = decls_from_toml(bad, "hubs.toml").unwrap_err().to_string();
    assert!(err.starts_with("hubs.toml:1:1:"), "{err}");
    assert!(err.contains("needs a `capacity`"), "{err}");
    let extra = "[[hub]]\nname = \"x\"\nkind = \"event\"\ncapacity = 3\n";
    let err = decls_from_toml(extra, "hubs.toml").unwrap_err().to_string();
    assert!(err.contains("a event hub has no `capacity`"), "{err}");
    let kind = "[[hub]]\nname = \"x\"\nkind = \"mailbox\"\n";
    let err = decls_from_toml(kind, "hubs.toml").unwrap_err().to_string();
    assert!(err.contains("unknown hub kind `mailbox`"), "{err}");
    let unknown = "[[hub]]\nname = \"x\"\nkind = \"event\"\ncolour = 1\n";
    let err = decls_from_toml(unknown, "hubs.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `colour`"), "{err}");
}

/// The environment variable that makes [`cross_process_child`] act.
const CHILD_ENV: &str = "ICTUS_HUB_TEST_CHILD";

/// The other process of [`hubs_work_between_processes`]: run by it as a
/// copy of this test binary; does nothing when run on its own.
#[test]
#[ignore = "run by hubs_work_between_processes in a child process"]
fn cross_process_child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    let hubs = Hubs::open_shared(&name).unwrap();
    let (ping, pong) = (
        hubs.semaphore("ping").unwrap(),
        hubs.semaphore("pong").unwrap(),
    );
    for _ in 0..1_000 {
        ping.take().unwrap();
        pong.give();
    }
    let mut rx = hubs.fifo_receiver::<u64>("numbers").unwrap();
    let sum: u64 = (0..1_000).map(|_| rx.recv().unwrap()).sum();
    let mut port = hubs.port::<u64>("answer").unwrap();
    port.send(&sum).unwrap();
    // Die holding the resource.
    std::mem::forget(hubs.resource("lock").unwrap().lock().unwrap());
}

#[test]
fn hubs_work_between_processes() {
    let name = unique("xproc");
    let hubs = Hubs::create_shared(
        &[
            HubDecl::semaphore("ping", 0),
            HubDecl::semaphore("pong", 0),
            HubDecl::fifo::<u64>("numbers", 8),
            HubDecl::port::<u64>("answer"),
            HubDecl::resource("lock"),
        ],
        &name,
    )
    .unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "hub::tests::cross_process_child",
            "--exact",
            "--ignored",
            "--quiet",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &name)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (ping, pong) = (
        hubs.semaphore("ping").unwrap(),
        hubs.semaphore("pong").unwrap(),
    );
    for _ in 0..1_000 {
        ping.give();
        assert!(
            pong.take_timeout(Duration::from_secs(10)).unwrap(),
            "the child stopped answering"
        );
    }
    let mut tx = hubs.fifo_sender::<u64>("numbers").unwrap();
    for i in 0..1_000 {
        assert!(
            tx.send_timeout(i, Duration::from_secs(10)).unwrap(),
            "the child stopped receiving"
        );
    }
    let answer = hubs
        .port::<u64>("answer")
        .unwrap()
        .receive_timeout(Duration::from_secs(10))
        .unwrap();
    assert_eq!(answer, Some((0..1_000).sum()));
    assert!(child.wait().unwrap().success());
    // The child exited holding the resource: its thread is gone.
    let lock = hubs.resource("lock").unwrap();
    assert!(lock.holder().is_some());
    assert!(lock.lock().is_err());
    lock.force_release();
    drop(lock.lock().unwrap());
}
