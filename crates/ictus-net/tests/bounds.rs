//! The bound on a message's size a peer can make a host take in: Zenoh's default
//! reassembles up to 1 GiB; a run's sessions take at most what its schedule can
//! send ([`ictus_net::link::message_bound`]), and drop the rest on arrival.

use std::sync::mpsc;
use std::time::Duration;

use ictus_net::Endpoints;
use zenoh::Wait;

#[test]
fn a_message_past_the_bound_is_dropped_on_arrival_and_the_next_one_arrives() {
    let at = format!("tcp/127.0.0.1:{}", ictus_os::testing::free_port());
    let mut listen = Endpoints::parse(&[&at], &[]).unwrap();
    listen.multicast = false;
    let mut connect = Endpoints::parse(&[], &[&at]).unwrap();
    connect.multicast = false;
    let bound = ictus_net::MIN_MESSAGE_BOUND;
    let receiver = ictus_net::open_bounded(&listen, bound).unwrap();
    let sender = ictus_net::open_bounded(&connect, bound).unwrap();
    let key = "ictus/bounds-test/big";
    let (tx, rx) = mpsc::channel();
    let _sub = receiver
        .declare_subscriber(key)
        .callback(move |s| {
            let _ = tx.send(s.payload().len());
        })
        .wait()
        .unwrap();
    let publisher = sender.declare_publisher(key).wait().unwrap();
    // Until the two have met: a small message goes through.
    let mut met = false;
    for _ in 0..100 {
        publisher.put(vec![1u8; 16]).wait().unwrap();
        if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            met = true;
            break;
        }
    }
    assert!(met, "the two sessions never met");
    while rx.try_recv().is_ok() {}
    publisher.put(vec![2u8; 4 * bound]).wait().unwrap();
    publisher.put(vec![3u8; bound / 2]).wait().unwrap();
    let mut sizes = Vec::new();
    while let Ok(n) = rx.recv_timeout(Duration::from_secs(5)) {
        sizes.push(n);
        if n == bound / 2 {
            break;
        }
    }
    assert_eq!(sizes, vec![bound / 2], "4 MiB passed a 1 MiB bound");
}
