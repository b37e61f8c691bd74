use super::*;
use crate::hub::HubDecl;
use std::sync::atomic::AtomicU64;

/// Hosts `h1` (main) to `hn` in this process.
type Two = InProcessHosts;

fn two(decls: &[HubDecl]) -> Two {
    two_with(decls, |decls, hosts, here| {
        Hubs::in_process_at(decls, hosts, here).unwrap()
    })
}

fn two_with(decls: &[HubDecl], make: impl Fn(&[HubDecl], &[String], usize) -> Hubs) -> Two {
    hosts_with(2, decls, make)
}

/// `n` hosts, `h1` (main) to `hn`.
fn hosts_with(
    n: usize,
    decls: &[HubDecl],
    make: impl Fn(&[HubDecl], &[String], usize) -> Hubs,
) -> Two {
    let hosts: Vec<String> = (1..=n).map(|i| format!("h{i}")).collect();
    let tables = (0..n).map(|here| make(decls, &hosts, here)).collect();
    InProcessHosts::start(&hosts, tables).unwrap()
}

const LONG: Duration = Duration::from_secs(20);

fn three(decls: &[HubDecl]) -> Two {
    hosts_with(3, decls, |decls, hosts, here| {
        Hubs::in_process_at(decls, hosts, here).unwrap()
    })
}

/// The wake-ups of hub 0's server on h2 while nothing happens for a
/// while: none, where a server in slices would wake every slice.
fn wakes_while_idle(sut: &Two) -> u64 {
    let wakes = || sut.nodes[1].server_wakes(0).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let before = wakes();
    std::thread::sleep(Duration::from_millis(200));
    wakes() - before
}

#[test]
fn a_host_whose_hub_table_differs_is_refused_and_reported_never_mixed_up() {
    // The same names, but h2 declares the FIFO with another capacity.
    let table = |capacity| {
        vec![
            HubDecl::semaphore("s", 1).at("h2"),
            HubDecl::fifo::<u32>("f", capacity).at("h2"),
        ]
    };
    let sut = hosts_with(2, &[], |_, hosts, here| {
        Hubs::in_process_at(&table(if here == 0 { 4 } else { 8 }), hosts, here).unwrap()
    });
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    let err = remote
        .semaphore("s")
        .unwrap()
        .take_timeout(LONG)
        .unwrap_err();
    assert!(matches!(err, HubError::HomeDiffers { .. }), "{err}");
    assert!(
        err.to_string().contains("`h2` declares other hubs"),
        "{err}"
    );
    assert!(!remote.semaphore("s").unwrap().give(), "nothing done");
    assert_eq!(home.semaphore("s").unwrap().count(), 1, "no token crossed");
    let wanted = |host: &str| HubReport::TableDiffers {
        host: host.into(),
        hub: Some("f".into()),
        here: 2,
        there: 2,
    };
    assert_eq!(sut.nodes[0].reports(), vec![wanted("h2")]);
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline {
        let reports = sut.nodes[1].reports();
        if !reports.is_empty() {
            assert_eq!(reports, vec![wanted("h1")]);
            assert!(
                reports[0].to_string().contains("from hub `f` on"),
                "{}",
                reports[0]
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("h2 never reported h1's table");
}

#[test]
fn a_count_past_its_bound_is_refused_reported_once_and_never_looped_over() {
    let sut = two(&[HubDecl::semaphore("s", 1).at("h2")]);
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    // The tables agreed: the initial token crossed.
    assert!(remote.semaphore("s").unwrap().take_timeout(LONG).unwrap());
    let from_h1 = |op| sut.nodes[1].deliver(0, HubMsg { hub: 0, op });
    // 2^32 - 1 gives would loop for minutes and demands allocate 32 GiB.
    from_h1(HubOp::Give(u32::MAX));
    from_h1(HubOp::Give(MAX_COUNT + 1));
    assert_eq!(home.semaphore("s").unwrap().count(), 0, "nothing given");
    from_h1(HubOp::Demand(u32::MAX));
    // Within the bound one at a time, but not past it in all.
    from_h1(HubOp::Demand(MAX_COUNT));
    from_h1(HubOp::Demand(1));
    let deadline = Instant::now() + LONG;
    let mut reports = Vec::new();
    while Instant::now() < deadline && reports.len() < 2 {
        reports.extend(sut.nodes[1].reports());
        std::thread::sleep(Duration::from_millis(5));
    }
    let words: Vec<String> = reports.iter().map(ToString::to_string).collect();
    assert_eq!(
        words,
        [
            format!(
                "host `h1` sent a Give of {} (at most {MAX_COUNT}): refused, nothing of \
                 it applied",
                u32::MAX
            ),
            format!(
                "host `h1` sent a Demand of {} (at most {MAX_COUNT}): refused, nothing \
                 of it applied",
                u32::MAX
            ),
        ]
    );
    // The demand past the bound in all: the server refuses it as a Demand too,
    // already reported once for h1.
    std::thread::sleep(Duration::from_millis(50));
    assert!(sut.nodes[1].reports().is_empty());
    // A give within the bound still crosses.
    assert!(remote.semaphore("s").unwrap().give());
    drop(sut.nodes);
}

#[test]
fn pushes_past_what_a_proxy_may_have_in_flight_are_refused() {
    let sut = two(&[
        HubDecl::fifo::<u32>("f", 2).at("h2"),
        HubDecl::port::<u32>("p").at("h2"),
    ]);
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    // h1 attaches the FIFO's sending end and its first message crosses.
    let mut tx = remote.fifo_sender::<u32>("f").unwrap();
    assert!(tx.send_timeout(7, LONG).unwrap());
    let mut rx = home.fifo_receiver::<u32>("f").unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Some(7));
    // Then h1 pushes more than the FIFO holds without waiting for the acks: the
    // ring takes two, two wait, the fifth is refused.
    for v in 0..5u32 {
        sut.nodes[1].deliver(
            0,
            HubMsg {
                hub: 0,
                op: HubOp::Push(v.to_le_bytes().to_vec()),
            },
        );
    }
    // A port's proxy offers one message at a time: a second is refused.
    for v in 0..2u32 {
        sut.nodes[1].deliver(
            0,
            HubMsg {
                hub: 1,
                op: HubOp::Push(v.to_le_bytes().to_vec()),
            },
        );
    }
    let deadline = Instant::now() + LONG;
    let mut words = Vec::new();
    while Instant::now() < deadline && words.len() < 2 {
        words.extend(sut.nodes[1].reports().iter().map(ToString::to_string));
        std::thread::sleep(Duration::from_millis(5));
    }
    words.sort();
    assert_eq!(
        words,
        [
            "host `h1` sent a Push of a port before its last was taken: refused, nothing \
             of it applied",
            "host `h1` sent a Push past the FIFO's capacity of 2: refused, nothing of it \
             applied",
        ]
    );
    drop(sut.nodes);
}

#[test]
fn a_table_with_a_hub_more_names_the_count() {
    let digests = table_digests(&[HubDecl::event("a")], &["h1".to_owned(), "h2".to_owned()]);
    assert_eq!(digests.len(), 1);
    let other = table_digests(
        &[HubDecl::event("a").at("h2")],
        &["h1".to_owned(), "h2".to_owned()],
    );
    assert_ne!(digests, other, "the home is part of a hub's identity");
    let report = HubReport::TableDiffers {
        host: "h2".into(),
        hub: None,
        here: 1,
        there: 2,
    };
    assert!(
        report.to_string().contains("2 hubs there, 1 here"),
        "{report}"
    );
}

#[test]
fn a_push_arriving_while_the_fifo_server_waits_on_the_empty_ring_is_served_at_once() {
    // h1 sends, h3 receives, the FIFO lives on h2: its server waits on the
    // empty real ring for h3 when h1's message arrives as a command.
    let sut = three(&[HubDecl::fifo::<u32>("f", 4).at("h2")]);
    let mut tx = sut.hubs[0].fifo_sender::<u32>("f").unwrap();
    let mut rx = sut.hubs[2].fifo_receiver::<u32>("f").unwrap();
    for i in 0..3 {
        assert!(tx.send_timeout(i, LONG).unwrap());
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Some(i));
        assert_eq!(
            wakes_while_idle(&sut),
            0,
            "the server sleeps until woken, never in slices"
        );
    }
    // And the message that ends each wait arrives while it waits: were
    // the command not heard, nothing would ever end the wait.
    let wakes = sut.nodes[1].server_wakes(0).unwrap();
    assert!(tx.send_timeout(7, LONG).unwrap());
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Some(7));
    assert!(sut.nodes[1].server_wakes(0).unwrap() > wakes, "woken by it");
}

#[test]
fn a_token_server_waits_on_the_real_semaphore_without_slices() {
    let sut = three(&[HubDecl::semaphore("s", 0).at("h2")]);
    let takers: Vec<_> = [0, 2]
        .into_iter()
        .map(|h| {
            let hubs = sut.hubs[h].clone();
            std::thread::spawn(move || hubs.semaphore("s").unwrap().take_timeout(LONG))
        })
        .collect();
    // Both demands wait at home on the empty semaphore.
    assert_eq!(wakes_while_idle(&sut), 0, "never in slices");
    let home = sut.hubs[1].semaphore("s").unwrap();
    assert!(home.give() && home.give());
    for t in takers {
        assert!(t.join().unwrap().unwrap(), "each demand had a token");
    }
    assert_eq!(home.count(), 0);
}

#[test]
fn a_demand_arriving_while_the_port_server_waits_for_a_collect_is_served_at_once() {
    // h1 sends, h3 receives, the port lives on h2: h1's message is
    // offered on the real port and the server waits for its collection
    // when h3's demand arrives.
    let sut = three(&[HubDecl::port::<u32>("p").at("h2")]);
    let sender = {
        let hubs = sut.hubs[0].clone();
        std::thread::spawn(move || {
            let mut port = hubs.port::<u32>("p").unwrap();
            for i in 0..3 {
                port.send(&i).unwrap();
            }
        })
    };
    let mut port = sut.hubs[2].port::<u32>("p").unwrap();
    for i in 0..3 {
        // The offer is at home, nobody takes it: the server waits.
        assert_eq!(wakes_while_idle(&sut), 0, "never in slices");
        assert_eq!(port.receive_timeout(LONG).unwrap(), Some(i));
    }
    sender.join().unwrap();
}

#[test]
fn a_semaphore_homed_on_one_host_counts_tokens_from_both() {
    let sut = two(&[
        HubDecl::semaphore("ping", 1).at("h2"),
        HubDecl::semaphore("pong", 0).at("h2"),
    ]);
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    let ping = remote.semaphore("ping").unwrap();
    assert_eq!(ping.count(), 0, "the tokens are the home's");
    assert!(
        ping.take_timeout(LONG).unwrap(),
        "the initial token crosses"
    );
    assert_eq!(home.semaphore("ping").unwrap().count(), 0);
    let peer = {
        let home = home.clone();
        std::thread::spawn(move || {
            let (ping, pong) = (
                home.semaphore("ping").unwrap(),
                home.semaphore("pong").unwrap(),
            );
            for _ in 0..200 {
                assert!(ping.take_timeout(LONG).unwrap());
                assert!(pong.give());
            }
        })
    };
    let pong = remote.semaphore("pong").unwrap();
    for _ in 0..200 {
        assert!(ping.give());
        assert!(pong.take_timeout(LONG).unwrap());
    }
    peer.join().unwrap();
    // A give from here, taken at home; nothing left on either side.
    assert!(ping.give());
    assert!(home.semaphore("ping").unwrap().take_timeout(LONG).unwrap());
    assert!(!pong.take_timeout(Duration::from_millis(30)).unwrap());
    assert_eq!(home.semaphore("pong").unwrap().count(), 0);
    drop(sut.nodes);
}

#[test]
fn an_event_homed_on_one_host_releases_a_waiter_on_the_other() {
    let sut = two(&[HubDecl::event("go")]);
    let (home, remote) = (&sut.hubs[0], &sut.hubs[1]);
    let waiter = {
        let remote = remote.clone();
        std::thread::spawn(move || remote.event("go").unwrap().wait_timeout(LONG).unwrap())
    };
    std::thread::sleep(Duration::from_millis(20));
    home.event("go").unwrap().raise();
    assert!(waiter.join().unwrap());
    remote.event("go").unwrap().raise();
    assert!(home.event("go").unwrap().wait_timeout(LONG).unwrap());
}

#[test]
fn a_fifo_keeps_its_order_from_a_remote_sender_and_to_a_remote_receiver() {
    let sut = two(&[
        HubDecl::fifo::<u32>("up", 4).at("h2"),
        HubDecl::fifo::<u32>("down", 4).at("h2"),
    ]);
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    let mut up_tx = remote.fifo_sender::<u32>("up").unwrap();
    let mut down_rx = remote.fifo_receiver::<u32>("down").unwrap();
    let echo = {
        let home = home.clone();
        std::thread::spawn(move || {
            let mut rx = home.fifo_receiver::<u32>("up").unwrap();
            let mut tx = home.fifo_sender::<u32>("down").unwrap();
            for i in 0..500 {
                let v = rx.recv_timeout(LONG).unwrap().unwrap();
                assert_eq!(v, i);
                assert!(tx.send_timeout(v * 2, LONG).unwrap());
            }
        })
    };
    let sender = std::thread::spawn(move || {
        for i in 0..500 {
            assert!(up_tx.send_timeout(i, LONG).unwrap());
        }
        up_tx
    });
    for i in 0..500 {
        assert_eq!(down_rx.recv_timeout(LONG).unwrap(), Some(i * 2));
    }
    echo.join().unwrap();
    let _up_tx = sender.join().unwrap();
    // One sender across hosts: the home's end is the remote host's.
    std::thread::sleep(Duration::from_millis(50));
    assert!(matches!(
        home.fifo_sender::<u32>("up"),
        Err(HubError::EndElsewhere { .. })
    ));
}

#[test]
fn a_second_end_on_another_host_is_refused_by_the_home() {
    let sut = two(&[HubDecl::fifo::<u8>("f", 2).at("h1")]);
    let (home, remote) = (&sut.hubs[0], &sut.hubs[1]);
    let _tx = home.fifo_sender::<u8>("f").unwrap();
    let mut tx = remote.fifo_sender::<u8>("f").unwrap();
    let deadline = Instant::now() + LONG;
    let err = loop {
        match tx.send_timeout(1, Duration::from_millis(10)) {
            Err(e) => break e,
            Ok(_) => assert!(Instant::now() < deadline, "never refused"),
        }
    };
    assert!(
        matches!(err, HubError::EndRefused { end: "sender", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("its home `h1` refused"), "{err}");
}

#[test]
fn a_port_send_across_hosts_returns_only_once_the_receiver_copied() {
    let sut = two(&[HubDecl::port::<u64>("p").at("h2")]);
    let (remote, home) = (&sut.hubs[0], &sut.hubs[1]);
    let received = Arc::new(AtomicU64::new(0));
    let receiver = {
        let (home, received) = (home.clone(), Arc::clone(&received));
        std::thread::spawn(move || {
            let mut port = home.port::<u64>("p").unwrap();
            for i in 0..50 {
                assert_eq!(port.receive_timeout(LONG).unwrap(), Some(i));
                // Release: read by the sender after its next send returns.
                received.store(i + 1, Ordering::Release);
            }
            // And one the other way: a remote receiver.
            port.send(&99).unwrap();
        })
    };
    let mut port = remote.port::<u64>("p").unwrap();
    for i in 0..50 {
        port.send(&i).unwrap();
        // Acquire: pairs with the receiver's Release store.
        assert!(
            received.load(Ordering::Acquire) > i,
            "returned before the copy"
        );
    }
    assert_eq!(port.receive_timeout(LONG).unwrap(), Some(99));
    receiver.join().unwrap();
}

#[test]
fn a_port_hands_over_between_two_threads_of_a_host_that_is_not_its_home() {
    let sut = two(&[HubDecl::port::<u32>("p").at("h2")]);
    let remote = sut.hubs[0].clone();
    let receiver = std::thread::spawn(move || {
        let mut port = remote.port::<u32>("p").unwrap();
        (0..20)
            .map(|_| port.receive_timeout(LONG).unwrap().unwrap())
            .collect::<Vec<_>>()
    });
    let mut port = sut.hubs[0].port::<u32>("p").unwrap();
    for i in 0..20 {
        port.send(&i).unwrap();
    }
    assert_eq!(receiver.join().unwrap(), (0..20).collect::<Vec<_>>());
}

#[test]
fn a_resource_excludes_across_hosts() {
    let sut = two(&[HubDecl::resource("r").at("h2")]);
    let counter = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (hubs, counter) = (sut.hubs[w % 2].clone(), Arc::clone(&counter));
            std::thread::spawn(move || {
                let r = hubs.resource("r").unwrap();
                for _ in 0..50 {
                    let _g = r.lock().unwrap();
                    // Relaxed: ordered by the resource.
                    let v = counter.load(Ordering::Relaxed);
                    std::thread::yield_now();
                    counter.store(v + 1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // Relaxed: after join.
    assert_eq!(counter.load(Ordering::Relaxed), 200);
}

#[test]
fn a_home_that_leaves_fails_the_remote_waiter_and_later_operations() {
    let sut = two(&[
        HubDecl::semaphore("s", 0).at("h2"),
        HubDecl::resource("r").at("h2"),
    ]);
    let remote = sut.hubs[0].clone();
    let waiter = std::thread::spawn(move || remote.semaphore("s").unwrap().take());
    std::thread::sleep(Duration::from_millis(50));
    sut.cut();
    sut.nodes[0].host_left(1);
    let err = waiter.join().unwrap().unwrap_err();
    assert_eq!(err.to_string(), "hub `s`: its home host `h2` left the run");
    let remote = &sut.hubs[0];
    assert!(!remote.semaphore("s").unwrap().give(), "nothing done");
    assert!(matches!(
        remote.resource("r").unwrap().lock(),
        Err(HubError::HomeLost { .. })
    ));
    let reports = sut.nodes[0].reports();
    assert!(reports.contains(&HubReport::HomeLost {
        hub: "s".into(),
        home: "h2".into()
    }));
}

#[test]
fn a_resource_held_by_a_host_that_leaves_is_released_and_reported() {
    let sut = two(&[HubDecl::resource("r").at("h1")]);
    let remote = sut.hubs[1].clone();
    let (held_tx, held_rx) = mpsc::channel();
    let holder = std::thread::spawn(move || {
        let r = remote.resource("r").unwrap();
        let g = r.lock().unwrap();
        held_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        drop(g);
    });
    held_rx.recv().unwrap();
    let home = sut.hubs[0].resource("r").unwrap();
    assert!(home.try_lock().unwrap().is_none(), "held for h2");
    sut.cut();
    sut.nodes[0].host_left(1);
    drop(home.lock().unwrap());
    holder.join().unwrap();
    assert_eq!(
        sut.nodes[0].reports(),
        vec![HubReport::Released {
            hub: "r".into(),
            host: "h2".into()
        }]
    );
}

#[test]
fn a_proxy_in_shared_memory_serves_another_mapping_as_a_child_process_would() {
    let segment = format!("test-hubs-proxy-{}", std::process::id());
    let sut = two_with(
        &[HubDecl::fifo::<u32>("f", 2).at("h2")],
        |decls, hosts, here| {
            if here == 0 {
                Hubs::create_shared_at(decls, &segment, hosts, here).unwrap()
            } else {
                Hubs::in_process_at(decls, hosts, here).unwrap()
            }
        },
    );
    // What a child of h1 maps: the proxy, by the words alone.
    let child = Hubs::open_shared(&segment).unwrap();
    let mut tx = child.fifo_sender::<u32>("f").unwrap();
    let mut rx = sut.hubs[1].fifo_receiver::<u32>("f").unwrap();
    for i in 0..20 {
        assert!(tx.send_timeout(i, LONG).unwrap());
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Some(i));
    }
}
