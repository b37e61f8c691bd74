//! The relay: a host's side of the hubs homed elsewhere. It sends home what the
//! proxies' real-time threads counted and rang for, and moves the answers into the
//! proxies' words ([`super`] has the protocol).

use super::*;

/// The relay's state of one proxy.
#[derive(Default)]
struct ProxyState {
    /// Its home left: nothing more is done for it.
    dead: bool,
    /// FIFO, sender here: the relay is the proxy ring's consumer.
    out: Option<(RingConsumer, u32)>,
    /// FIFO, receiver here: the relay is the proxy ring's producer; messages
    /// delivered so far, credits returned so far, and arrivals without room.
    inb: Option<Inbound>,
    /// Port: an outbound message claimed and sent home, waiting for its ack.
    port_out: bool,
    /// Port: a message offered in the inbound port, waiting for its copy;
    /// and those that arrived while one was.
    port_in: bool,
    port_pending: VecDeque<Vec<u8>>,
}

struct Inbound {
    producer: RingProducer,
    delivered: u32,
    credited: u32,
    pending: VecDeque<Vec<u8>>,
}

/// The relay thread: sends what the proxies counted and moves their messages.
pub(super) fn relay(s: &Shared) {
    let decls = s.hubs.decls();
    let mut state: Vec<ProxyState> = decls.iter().map(|_| ProxyState::default()).collect();
    // Made once: the loop allocates nothing but the messages it sends.
    let handles: Vec<crate::hub::Handle> = decls
        .iter()
        .enumerate()
        .map(|(i, d)| s.hubs.handle(i, d.name()))
        .collect();
    let bell = s.hubs.bell();
    let park = &s.hubs.inner.park;
    let mut buf = Vec::new();
    while !s.stopped() {
        for (home, why) in std::mem::take(&mut *lock(&s.lost)) {
            for (i, st) in state.iter_mut().enumerate() {
                if s.homes[i] == home && home != s.here && !st.dead {
                    st.dead = true;
                    let h = &handles[i];
                    // Release: pairs with the Acquire load in `Handle::failed`.
                    h.header()[P_FAILED].store(why, Ordering::Release);
                    // A refused home was reported once, as the table's.
                    if why == FAILED_LEFT {
                        s.report(HubReport::HomeLost {
                            hub: decls[i].name().to_owned(),
                            home: s.hosts[home].clone(),
                        });
                    }
                }
            }
        }
        let inbox = std::mem::take(&mut *lock(&s.inbox));
        for msg in inbox {
            let i = msg.hub as usize;
            if !state[i].dead {
                proxy_answer(s, i, &mut state[i], msg.op);
            }
        }
        for (i, d) in decls.iter().enumerate() {
            let home = s.homes[i];
            if home == s.here || state[i].dead {
                continue;
            }
            let h = &handles[i];
            // Acquire (both): pairs with the Release add in `tell_relay`.
            let out = h.header()[P_OUT].swap(0, Ordering::Acquire);
            if out > 0 {
                let op = match d.kind() {
                    HubKind::Resource => HubOp::Release(out),
                    _ => HubOp::Give(out),
                };
                s.send(home, i, op);
            }
            let demand = h.header()[P_DEMAND].swap(0, Ordering::Acquire);
            if demand > 0 {
                s.send(home, i, HubOp::Demand(demand));
            }
            match d.kind() {
                HubKind::Fifo { message, capacity } => {
                    let bytes = message_bytes(message);
                    buf.resize(bytes, 0);
                    relay_fifo(s, i, h, &mut state[i], capacity, &mut buf);
                }
                HubKind::Port { message } => {
                    let bytes = message_bytes(message);
                    buf.resize(bytes, 0);
                    let st = &mut state[i];
                    let outbound = words::Port::new(h.words(), bytes);
                    if !st.port_out && outbound.try_claim(&mut buf) {
                        st.port_out = true;
                        s.send(home, i, HubOp::Push(buf.clone()));
                    }
                    let inbound =
                        words::Port::new(&h.words()[words::Port::words_for(bytes)..], bytes);
                    if st.port_in && inbound.collect(park, Some(Instant::now())) {
                        st.port_in = false;
                        s.send(home, i, HubOp::Taken);
                    }
                    if !st.port_in
                        && let Some(m) = st.port_pending.pop_front()
                    {
                        // The inbound port is this relay's alone to offer on:
                        // free once the last offer was collected.
                        st.port_in = inbound.offer(&m, park, Some(Instant::now()));
                    }
                }
                _ => {}
            }
        }
        bell.wait(park, Instant::now().checked_add(RELAY_POLL));
    }
}

/// Applies a home's answer to proxy `i`.
fn proxy_answer(s: &Shared, i: usize, st: &mut ProxyState, op: HubOp) {
    let d = &s.hubs.decls()[i];
    let h = s.hubs.handle(i, d.name());
    let park = &s.hubs.inner.park;
    match (d.kind(), op) {
        (HubKind::Fifo { .. }, HubOp::Refused(end)) => {
            // Release: pairs with the Acquire load in `fifo_dead`.
            h.header()[P_REFUSED].store(1, Ordering::Release);
            // The relay's claim of the other end here goes.
            let word = match end {
                End::Sender => FIFO_RECEIVER,
                End::Receiver => FIFO_SENDER,
            };
            // Release: pairs with the Acquire claim of a next end.
            h.words()[word].store(0, Ordering::Release);
            st.out = None;
            st.inb = None;
        }
        (HubKind::Fifo { .. }, HubOp::Ack(n)) => {
            if let Some((_, in_flight)) = &mut st.out {
                *in_flight = in_flight.saturating_sub(n);
            }
        }
        (HubKind::Fifo { .. }, HubOp::Deliver(m)) => {
            if let Some(inb) = &mut st.inb {
                inb.pending.push_back(m);
            }
        }
        (HubKind::Port { message }, HubOp::Ack(_)) if st.port_out => {
            st.port_out = false;
            words::Port::new(h.words(), message_bytes(message)).taken(park);
        }
        (HubKind::Port { message }, HubOp::Deliver(m)) => {
            let bytes = message_bytes(message);
            let inbound = words::Port::new(&h.words()[words::Port::words_for(bytes)..], bytes);
            if !st.port_in && st.port_pending.is_empty() {
                st.port_in = inbound.offer(&m, park, Some(Instant::now()));
                if !st.port_in {
                    st.port_pending.push_back(m);
                }
            } else {
                st.port_pending.push_back(m);
            }
        }
        _ => {}
    }
}

/// The relay's work for a proxied FIFO: attach and detach the ends used
/// here, move this host's sender's messages home, put delivered messages in
/// this host's ring and return the room its receiver freed.
fn relay_fifo(
    s: &Shared,
    i: usize,
    h: &crate::hub::Handle,
    st: &mut ProxyState,
    capacity: u32,
    buf: &mut [u8],
) {
    let home = s.homes[i];
    let park = &s.hubs.inner.park;
    let ring = Ring::new(&h.words()[FIFO_RING..], capacity, buf.len());
    let (sender, receiver) = (&h.words()[FIFO_SENDER], &h.words()[FIFO_RECEIVER]);
    // Acquire (loads and claims): pairs with the Release stores of the ends'
    // claims and drops (see `Hubs::fifo_end`).
    let claim = |w: &AtomicU32| {
        w.compare_exchange(0, LINK_END, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    };
    // Acquire: as above.
    if h.header()[P_REFUSED].load(Ordering::Acquire) != 0 {
        return;
    }
    if st.out.is_none() && st.inb.is_none() {
        if sender.load(Ordering::Acquire) != 0 && claim(receiver) {
            st.out = Some((ring.consumer(), 0));
            s.send(home, i, HubOp::Attach(End::Sender));
        } else if receiver.load(Ordering::Acquire) != 0 && claim(sender) {
            st.inb = Some(Inbound {
                producer: ring.producer(),
                delivered: 0,
                credited: 0,
                pending: VecDeque::new(),
            });
            s.send(home, i, HubOp::Attach(End::Receiver));
        }
    }
    if let Some((consumer, in_flight)) = &mut st.out {
        while *in_flight < capacity && ring.try_pop(consumer, buf, park) {
            *in_flight += 1;
            s.send(home, i, HubOp::Push(buf.to_vec()));
        }
        // Acquire: as above.
        if sender.load(Ordering::Acquire) == 0 && ring.is_empty() {
            // Release: pairs with the Acquire claim of a next receiver here.
            receiver.store(0, Ordering::Release);
            st.out = None;
            s.send(home, i, HubOp::Detach(End::Sender));
        }
    }
    if let Some(inb) = &mut st.inb {
        while let Some(m) = inb.pending.front() {
            if !ring.try_push(&mut inb.producer, m, park) {
                break;
            }
            inb.pending.pop_front();
            inb.delivered = inb.delivered.wrapping_add(1);
        }
        let taken = inb.delivered.wrapping_sub(ring.len());
        let new = taken.wrapping_sub(inb.credited);
        if new > 0 {
            inb.credited = taken;
            s.send(home, i, HubOp::Credit(new));
        }
        // Acquire: as above.
        if receiver.load(Ordering::Acquire) == 0 {
            // Release: pairs with the Acquire claim of a next sender here.
            sender.store(0, Ordering::Release);
            st.inb = None;
            s.send(home, i, HubOp::Detach(End::Receiver));
        }
    }
}
