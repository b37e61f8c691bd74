//! The home servers: one thread per hub that other hosts use, acting on the real
//! hub for them ([`super`] has the protocol).

use super::*;

/// A home server: acts on hub `i`'s real words for the other hosts.
///
/// Each server has the same round: read its doorbell ([`Server::seen`]),
/// take every command there, do what can be done without waiting, then
/// sleep, on the real hub with a [`ServerPark`] of that doorbell value (so a
/// command arriving meanwhile ends the wait at once) or on the doorbell alone.
pub(super) fn serve(s: &Shared, i: usize, rx: &Receiver<Cmd>) {
    let Some(Some(server)) = s.servers.get(i) else {
        return;
    };
    match s.hubs.decls()[i].kind() {
        HubKind::Semaphore { .. } | HubKind::Event => serve_tokens(s, server, i, rx),
        HubKind::Fifo { message, capacity } => {
            serve_fifo(s, server, i, rx, message_bytes(message), capacity);
        }
        HubKind::Port { message } => serve_port(s, server, i, rx, message_bytes(message)),
        HubKind::Resource => serve_resource(s, server, i, rx),
    }
}

/// Semaphore and event: one token (or raise) taken from the real hub per
/// demand, granted in the order the demands arrived. A token taken for a
/// host that left meanwhile, with no other demand, goes back to the hub.
fn serve_tokens(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let is_event = matches!(s.hubs.decls()[i].kind(), HubKind::Event);
    let mut queue: VecDeque<usize> = VecDeque::new();
    // A token (or raise) taken from the real hub, not yet granted.
    let mut token = false;
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Demand(n)) if s.may_wait(&queue, from, n) => {
                    queue.extend((0..n).map(|_| from));
                }
                Cmd::Left(host) => queue.retain(|&q| q != host),
                Cmd::Op(..) => {}
            }
        }
        if std::mem::take(&mut token) {
            if let Some(to) = queue.pop_front() {
                s.send(to, i, HubOp::Grant(1));
            } else if is_event {
                words::Event::new(h.words()).raise(h.park());
            } else {
                words::Semaphore::new(h.words()).give(h.park());
            }
        }
        if queue.is_empty() {
            server.idle(seen);
            continue;
        }
        let park = server.park(seen);
        token = if is_event {
            words::Event::new(h.words()).wait(&park, None)
        } else {
            words::Semaphore::new(h.words()).take(&park, None)
        };
    }
}

/// FIFO: the home end of a remote sender (its messages pushed into the real
/// ring, in order, acknowledged) and of a remote receiver (messages popped
/// from the real ring while its host has room).
fn serve_fifo(
    s: &Shared,
    server: &Server,
    i: usize,
    rx: &Receiver<Cmd>,
    bytes: usize,
    capacity: u32,
) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let ring = Ring::new(&h.words()[FIFO_RING..], capacity, bytes);
    let park = h.park();
    let mut sender: Option<(usize, RingProducer)> = None;
    let mut pending: VecDeque<Vec<u8>> = VecDeque::new();
    let mut receiver: Option<(usize, RingConsumer, u32)> = None;
    let mut buf = vec![0; bytes];
    let end_word = |end: End| match end {
        End::Sender => &h.words()[FIFO_SENDER],
        End::Receiver => &h.words()[FIFO_RECEIVER],
    };
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Attach(end)) => {
                    // Acquire: pairs with the Release store of a dropped end.
                    let free = end_word(end)
                        .compare_exchange(0, LINK_END, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok();
                    let taken_remotely = match end {
                        End::Sender => sender.is_some(),
                        End::Receiver => receiver.is_some(),
                    };
                    if !free || taken_remotely {
                        s.send(from, i, HubOp::Refused(end));
                    } else if end == End::Sender {
                        sender = Some((from, ring.producer()));
                    } else {
                        receiver = Some((from, ring.consumer(), capacity));
                    }
                }
                Cmd::Op(from, HubOp::Detach(end)) => {
                    let ours = match end {
                        End::Sender => sender.as_ref().is_some_and(|x| x.0 == from),
                        End::Receiver => receiver.as_ref().is_some_and(|x| x.0 == from),
                    };
                    if ours && (end == End::Receiver || pending.is_empty()) {
                        // Release: pairs with the Acquire claim of a next end.
                        end_word(end).store(0, Ordering::Release);
                        match end {
                            End::Sender => sender = None,
                            End::Receiver => receiver = None,
                        }
                    }
                }
                Cmd::Op(from, HubOp::Push(m)) => {
                    if sender.as_ref().is_some_and(|x| x.0 == from) && m.len() == bytes {
                        // A sender's proxy has at most the capacity in flight (it
                        // waits for acks): more is not its to send.
                        if pending.len() < capacity as usize {
                            pending.push_back(m);
                        } else {
                            s.refuse(
                                from,
                                format!("a Push past the FIFO's capacity of {capacity}"),
                            );
                        }
                    }
                }
                Cmd::Op(from, HubOp::Credit(n)) => {
                    if let Some((host, _, credits)) = &mut receiver
                        && *host == from
                    {
                        *credits = credits.saturating_add(n).min(capacity);
                    }
                }
                Cmd::Left(host) => {
                    if receiver.as_ref().is_some_and(|x| x.0 == host) {
                        // Release: as above.
                        end_word(End::Receiver).store(0, Ordering::Release);
                        receiver = None;
                    }
                    if sender.as_ref().is_some_and(|x| x.0 == host) && pending.is_empty() {
                        // Release: as above.
                        end_word(End::Sender).store(0, Ordering::Release);
                        sender = None;
                    }
                }
                Cmd::Op(..) => {}
            }
        }
        let mut progress = false;
        if let Some((host, producer)) = &mut sender {
            let mut acked = 0;
            while let Some(m) = pending.front() {
                if !ring.try_push(producer, m, park) {
                    break;
                }
                pending.pop_front();
                acked += 1;
            }
            if acked > 0 {
                progress = true;
                s.send(*host, i, HubOp::Ack(acked));
            }
        }
        if let Some((host, consumer, credits)) = &mut receiver {
            while *credits > 0 && ring.try_pop(consumer, &mut buf, park) {
                *credits -= 1;
                progress = true;
                s.send(*host, i, HubOp::Deliver(buf.clone()));
            }
        }
        if progress {
            continue;
        }
        let wait = server.park(seen);
        match (&mut sender, &mut receiver) {
            // Empty (nothing popped, nothing pending): wait for a local
            // sender's push, or a command (a remote sender's push among them).
            (_, Some((host, consumer, credits))) if *credits > 0 && pending.is_empty() => {
                if ring.pop(consumer, &mut buf, &wait, None) {
                    *credits -= 1;
                    s.send(*host, i, HubOp::Deliver(buf.clone()));
                }
            }
            // Full: wait for the receiver to make room, or a command.
            (Some((host, producer)), _) if !pending.is_empty() => {
                if let Some(m) = pending.front()
                    && ring.push(producer, m, &wait, None)
                {
                    pending.pop_front();
                    s.send(*host, i, HubOp::Ack(1));
                }
            }
            _ => server.idle(seen),
        }
    }
}

/// Port: remote senders' messages are offered on the real port one at a time
/// and acknowledged once the real receiver took them; remote receivers'
/// demands claim messages on the real port, delivered to them, and marked
/// taken once their receiver has copied (or offered again if it left).
fn serve_port(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>, bytes: usize) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let port = words::Port::new(h.words(), bytes);
    let park = h.park();
    let mut outbound: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
    let mut offered: Option<usize> = None;
    let mut demands: VecDeque<usize> = VecDeque::new();
    let mut claimed: Option<usize> = None;
    let mut buf = vec![0; bytes];
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Push(m)) if m.len() == bytes => {
                    // A host's proxy offers one message at a time (it waits for
                    // the ack): a second waiting is not its to send.
                    if offered == Some(from) || outbound.iter().any(|(f, _)| *f == from) {
                        s.refuse(from, "a Push of a port before its last was taken".into());
                    } else {
                        outbound.push_back((from, m));
                    }
                }
                Cmd::Op(from, HubOp::Demand(n)) if s.may_wait(&demands, from, n) => {
                    demands.extend((0..n).map(|_| from));
                }
                Cmd::Op(from, HubOp::Taken) if claimed == Some(from) => {
                    port.taken(park);
                    claimed = None;
                }
                Cmd::Left(host) => {
                    outbound.retain(|(f, _)| *f != host);
                    demands.retain(|&d| d != host);
                    if claimed == Some(host) {
                        port.unclaim(park);
                        claimed = None;
                    }
                }
                Cmd::Op(..) => {}
            }
        }
        let now = Some(Instant::now());
        if offered.is_none()
            && let Some((from, m)) = outbound.front()
            && port.offer(m, park, now)
        {
            offered = Some(*from);
            outbound.pop_front();
        }
        if claimed.is_none()
            && let Some(&to) = demands.front()
            && port.try_claim(&mut buf)
        {
            demands.pop_front();
            claimed = Some(to);
            s.send(to, i, HubOp::Deliver(buf.clone()));
        }
        if claimed.is_some() {
            // The port is ours until that host's `Taken`: nothing to wait for
            // but commands.
            server.idle(seen);
            continue;
        }
        let wait = server.park(seen);
        if let Some(from) = offered {
            if port.collect(&wait, None) {
                offered = None;
                s.send(from, i, HubOp::Ack(1));
            }
        } else if !demands.is_empty() {
            if port.claim(&mut buf, &wait, None)
                && let Some(to) = demands.pop_front()
            {
                claimed = Some(to);
                s.send(to, i, HubOp::Deliver(buf.clone()));
            }
        } else if let Some((from, m)) = outbound.front() {
            if port.offer(m, &wait, None) {
                offered = Some(*from);
                outbound.pop_front();
            }
        } else {
            server.idle(seen);
        }
    }
    // A message still claimed for a host goes back to the port.
    if claimed.is_some() {
        port.unclaim(park);
    }
}

/// Resource: this thread locks the real PI lock for a remote host, in the
/// order the demands arrived, and holds it until that host's release.
///
/// The lock is waited for in the kernel (`FUTEX_LOCK_PI2`), so the home's
/// unlock hands it over at once; the wait is cut every
/// [`SERVER_LOCK_SLICE`] only to look whether the node stops. Commands that
/// arrive meanwhile need nothing until the lock is had: more demands queue,
/// and a release can only come from a holder, which there is not while this
/// thread waits. A lock had for a host that left meanwhile goes to the next
/// demand, or back.
fn serve_resource(s: &Shared, server: &Server, i: usize, rx: &Receiver<Cmd>) {
    let h = s.hubs.handle(i, s.hubs.decls()[i].name());
    let pi = PiLock::new(&h.words()[0]);
    let mut queue: VecDeque<usize> = VecDeque::new();
    // This thread holds the real lock; for `holder` once granted.
    let mut locked = false;
    let mut holder: Option<usize> = None;
    let release = |pi: &PiLock<'_>| {
        // Cannot fail: this thread holds it.
        let _ = pi.unlock();
    };
    while !s.stopped() {
        let seen = server.seen();
        for cmd in rx.try_iter() {
            match cmd {
                Cmd::Op(from, HubOp::Demand(n)) if s.may_wait(&queue, from, n) => {
                    queue.extend((0..n).map(|_| from));
                }
                // One release per grant: a host holds the resource once at a
                // time (its own lock orders its threads).
                Cmd::Op(from, HubOp::Release(_)) if holder == Some(from) => {
                    release(&pi);
                    (locked, holder) = (false, None);
                }
                Cmd::Left(host) => {
                    queue.retain(|&q| q != host);
                    if holder == Some(host) {
                        release(&pi);
                        (locked, holder) = (false, None);
                        s.report(HubReport::Released {
                            hub: s.hubs.decls()[i].name().to_owned(),
                            host: s.hosts[host].clone(),
                        });
                    }
                }
                Cmd::Op(..) => {}
            }
        }
        if locked && holder.is_none() {
            if let Some(to) = queue.pop_front() {
                holder = Some(to);
                s.send(to, i, HubOp::Grant(1));
            } else {
                release(&pi);
                locked = false;
            }
        }
        if locked || queue.is_empty() {
            server.idle(seen);
            continue;
        }
        match pi.lock_until(Instant::now() + SERVER_LOCK_SLICE) {
            Ok(got) => locked = got,
            // A home thread died holding it (the home's own users see the same
            // error): look again after a slice, hearing commands meanwhile.
            Err(_) => {
                futex_wait_shared(&server.bell, seen, Some(SERVER_LOCK_SLICE));
                server.woke();
            }
        }
    }
    if locked {
        release(&pi);
    }
}
