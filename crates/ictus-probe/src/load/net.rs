//! The `net` load: a UDP flood over loopback, in sender/receiver pairs.
//!
//! Both sockets are bound to 127.0.0.1 and connected to each other, so nothing leaves
//! the machine and no stray datagram is counted. Every datagram goes through the
//! socket layer, the loopback device and the network softirq on the receiving side.
//! The receiver's queue may overflow: the kernel then drops datagrams, and the
//! received rate is lower than the sent one.

use std::io;
use std::net::UdpSocket;
use std::time::Duration;

use ictus_core::CpuSet;

use super::spec::*;
use super::worker::*;

/// Payload per datagram (as `ping -f`'s 56 bytes plus its 8-byte header).
const PAYLOAD: usize = 64;
/// How long a blocked receive or send waits before looking at the stop flag.
const POLL: Duration = Duration::from_millis(5);
/// `ENOBUFS`: the kernel had no buffer for a datagram; it was dropped.
const ENOBUFS: i32 = 105;

/// Pairs of (sender CPU, receiver CPU): the CPUs two by two, an odd one out with both.
pub(super) fn pairs(cpus: &CpuSet) -> Vec<(usize, usize)> {
    cpus.cpus()
        .chunks(2)
        .map(|pair| (pair[0], *pair.last().unwrap_or(&pair[0])))
        .collect()
}

pub(super) fn plan(cpus: &CpuSet) -> Result<Plan, LoadError> {
    let mut jobs = Vec::new();
    for (tx_cpu, rx_cpu) in pairs(cpus) {
        let (sender, receiver) = connected_pair()?;
        jobs.push(Job::new("net-tx", tx_cpu, move |w| Ok(send(w, &sender))));
        jobs.push(Job::new("net-rx", rx_cpu, move |w| {
            Ok(receive(w, &receiver))
        }));
    }
    Ok(Plan {
        jobs,
        scratch: None,
    })
}

/// Two loopback UDP sockets connected to each other, with timeouts so neither end can
/// block past a stop request.
fn connected_pair() -> Result<(UdpSocket, UdpSocket), LoadError> {
    let socket = |what| move |source| LoadError::Socket { what, source };
    let receiver = UdpSocket::bind("127.0.0.1:0").map_err(socket("binding the receiver"))?;
    let sender = UdpSocket::bind("127.0.0.1:0").map_err(socket("binding the sender"))?;
    let rx_addr = receiver
        .local_addr()
        .map_err(socket("reading the receiver's address"))?;
    let tx_addr = sender
        .local_addr()
        .map_err(socket("reading the sender's address"))?;
    sender
        .connect(rx_addr)
        .map_err(socket("connecting the sender"))?;
    receiver
        .connect(tx_addr)
        .map_err(socket("connecting the receiver"))?;
    receiver
        .set_read_timeout(Some(POLL))
        .map_err(socket("setting the receive timeout"))?;
    sender
        .set_write_timeout(Some(POLL))
        .map_err(socket("setting the send timeout"))?;
    Ok((sender, receiver))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn send(worker: &Worker<'_>, socket: &UdpSocket) -> Tally {
    let payload = [0xA5u8; PAYLOAD];
    worker.ready();
    let (mut sent, mut dropped) = (0u64, 0u64);
    let mut error = None;
    // One datagram takes about a microsecond: look at the flag each time.
    while worker.running() {
        match socket.send(&payload) {
            Ok(_) => sent += 1,
            Err(e) if is_timeout(&e) => {}
            // Dropped for want of a buffer, or an ICMP error for an earlier datagram
            // (the receiver's end may already be closing at a stop).
            Err(e)
                if e.raw_os_error() == Some(ENOBUFS)
                    || e.kind() == io::ErrorKind::ConnectionRefused =>
            {
                dropped += 1
            }
            Err(e) => {
                error = Some(format!("sending to 127.0.0.1: {e}"));
                break;
            }
        }
    }
    let tally = Tally::default().count("sent_packets", sent).error(error);
    if dropped > 0 {
        tally.count("send_failures", dropped)
    } else {
        tally
    }
}

fn receive(worker: &Worker<'_>, socket: &UdpSocket) -> Tally {
    let mut buffer = [0u8; 2048];
    worker.ready();
    let (mut packets, mut bytes) = (0u64, 0u64);
    let mut error = None;
    while worker.running() {
        match socket.recv(&mut buffer) {
            Ok(n) => {
                packets += 1;
                bytes += n as u64;
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                error = Some(format!("receiving on 127.0.0.1: {e}"));
                break;
            }
        }
    }
    Tally::default()
        .count("packets", packets)
        .count("bytes", bytes)
        .error(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_pair_up_two_by_two_with_the_odd_one_alone() {
        assert_eq!(pairs(&CpuSet::from_cpus([0, 1])), [(0, 1)]);
        assert_eq!(pairs(&CpuSet::from_cpus([0, 1, 2])), [(0, 1), (2, 2)]);
        assert_eq!(pairs(&CpuSet::from_cpus([3])), [(3, 3)]);
    }
}
