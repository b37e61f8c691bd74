//! The hub handles, made by name from [`Hubs`]: semaphores, events, ports, FIFOs
//! and resources.

use crate::cell::Element;
use ictus_core::sync::hub::{self as words, Ring, RingConsumer, RingProducer};
use ictus_core::sync::spsc::Full;
use ictus_os::handoff::PiLock;
use ictus_os::process::ProcessId;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::decl::*;
use super::error::HubError;
use super::store::*;

impl Hubs {
    /// The semaphore `name`.
    pub fn semaphore(&self, name: &str) -> Result<Semaphore, HubError> {
        let (index, _) = self.find(name, "semaphore")?;
        Ok(Semaphore {
            h: self.handle(index, name),
        })
    }

    /// The event `name`.
    pub fn event(&self, name: &str) -> Result<Event, HubError> {
        let (index, _) = self.find(name, "event")?;
        Ok(Event {
            h: self.handle(index, name),
        })
    }

    /// The port `name`, for messages of type `T`. Any number of handles may
    /// send and receive.
    pub fn port<T: Element>(&self, name: &str) -> Result<Port<T>, HubError> {
        let (index, kind) = self.find(name, "port")?;
        let HubKind::Port { message } = kind else {
            unreachable!("find checked the kind")
        };
        Hubs::check_message::<T>(name, message)?;
        Ok(Port {
            h: self.handle(index, name),
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// The resource `name`.
    pub fn resource(&self, name: &str) -> Result<Resource, HubError> {
        let (index, _) = self.find(name, "resource")?;
        Ok(Resource {
            h: self.handle(index, name),
        })
    }

    /// Attaches as the sender of FIFO `name` (messages of type `T`); refused
    /// while another sender is attached in a live process.
    pub fn fifo_sender<T: Element>(&self, name: &str) -> Result<FifoSender<T>, HubError> {
        let (h, capacity) = self.fifo_end::<T>(name, FIFO_SENDER, "sender")?;
        let cursor = h.ring::<T>(capacity).producer();
        Ok(FifoSender {
            h,
            capacity,
            cursor,
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// Attaches as the receiver of FIFO `name` (messages of type `T`);
    /// refused while another receiver is attached in a live process.
    pub fn fifo_receiver<T: Element>(&self, name: &str) -> Result<FifoReceiver<T>, HubError> {
        let (h, capacity) = self.fifo_end::<T>(name, FIFO_RECEIVER, "receiver")?;
        let cursor = h.ring::<T>(capacity).consumer();
        Ok(FifoReceiver {
            h,
            capacity,
            cursor,
            scratch: vec![0; T::SIZE].into_boxed_slice(),
            _type: PhantomData,
        })
    }

    /// Claims one end of a FIFO.
    pub(super) fn fifo_end<T: Element>(
        &self,
        name: &str,
        end_word: usize,
        end: &'static str,
    ) -> Result<(Handle, u32), HubError> {
        let (index, kind) = self.find(name, "fifo")?;
        let HubKind::Fifo { message, capacity } = kind else {
            unreachable!("find checked the kind")
        };
        Hubs::check_message::<T>(name, message)?;
        let h = self.handle(index, name);
        claim_end(&h.words()[end_word], name, end)?;
        if h.is_proxy() {
            // Both ends here would make a FIFO of this host alone, apart from its
            // home: whichever of two ends looks second sees the first and gives
            // up (SeqCst, the claim in `claim_end` and this load: of two
            // claims at once, at least one sees the other's), so at most one
            // end is here and the relay takes the other for the link.
            let other = if end_word == FIFO_SENDER {
                FIFO_RECEIVER
            } else {
                FIFO_SENDER
            };
            let holder = h.words()[other].load(Ordering::SeqCst);
            if holder != 0 && holder != LINK_END {
                // Release: pairs with the Acquire claim of a next end.
                h.words()[end_word].store(0, Ordering::Release);
                return Err(HubError::EndElsewhere {
                    name: name.to_owned(),
                    end,
                });
            }
            // The relay attaches it now.
            self.ring_bell();
        }
        Ok((h, capacity))
    }
}

/// Claims the FIFO end held in `word` for this process.
pub(super) fn claim_end(claim: &AtomicU32, name: &str, end: &'static str) -> Result<(), HubError> {
    let me = std::process::id();
    loop {
        // Acquire (in SeqCst): pairs with the Release store of 0 when the
        // previous end was dropped, so its last ring operations happen before
        // ours; SeqCst: see `fifo_end`, on a proxy.
        match claim.compare_exchange(0, me, Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(LINK_END) => {
                return Err(HubError::EndElsewhere {
                    name: name.to_owned(),
                    end,
                });
            }
            Err(holder) if holder == me || ProcessId::of(holder).is_some() => {
                return Err(HubError::EndTaken {
                    name: name.to_owned(),
                    end,
                    pid: holder,
                });
            }
            // The holder's process is gone: take the end over.
            Err(holder) => {
                // SeqCst: as above.
                if claim
                    .compare_exchange(holder, me, Ordering::SeqCst, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
            }
        }
    }
}

/// A counting semaphore hub.
///
/// On a proxy (the semaphore is homed on another host), `give` counts a
/// request the relay sends home, and `take` takes a token already granted to
/// this host, else asks the home for one and waits for it; a token granted
/// after its waiter gave up stays with this host for its next take.
#[derive(Debug)]
pub struct Semaphore {
    pub(super) h: Handle,
}

impl Semaphore {
    pub(super) fn words(&self) -> words::SemaphoreWords<'_> {
        words::SemaphoreWords::new(self.h.words())
    }

    /// Adds a token, waking a waiter; `false` when nothing was added: the
    /// count is at its maximum (`u32::MAX`), or (a proxy) its home left.
    pub fn give(&self) -> bool {
        if !self.h.is_proxy() {
            return self.words().give(self.h.park());
        }
        if self.h.failed() {
            return false;
        }
        self.h.tell_relay(P_OUT);
        true
    }

    /// Takes a token if there is one (on a proxy: one already granted to this
    /// host).
    pub fn try_take(&self) -> bool {
        self.words().try_take()
    }

    /// Waits for a token and takes it.
    pub fn take(&self) -> Result<(), HubError> {
        self.take_until(None).map(|_| ())
    }

    /// Waits at most `timeout` for a token; whether one was taken.
    pub fn take_timeout(&self, timeout: Duration) -> Result<bool, HubError> {
        self.take_until(deadline(timeout))
    }

    pub(super) fn take_until(&self, deadline: Option<Instant>) -> Result<bool, HubError> {
        if self.h.is_proxy() {
            if self.words().try_take() {
                return Ok(true);
            }
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let sem = self.words();
        self.h.wait(deadline, |d| sem.take(self.h.park(), d))
    }

    /// Tokens now (on a proxy: granted to this host and not taken yet).
    pub fn count(&self) -> u32 {
        self.words().count()
    }
}

/// A binary event hub. On a proxy, as [`Semaphore`]: `raise` is sent home,
/// `wait` asks the home for a raise and waits for it.
#[derive(Debug)]
pub struct Event {
    pub(super) h: Handle,
}

impl Event {
    pub(super) fn words(&self) -> words::EventWords<'_> {
        words::EventWords::new(self.h.words())
    }

    /// Raises the event, waking a waiter (on a proxy whose home left:
    /// nothing done).
    pub fn raise(&self) {
        if !self.h.is_proxy() {
            self.words().raise(self.h.park());
        } else if !self.h.failed() {
            self.h.tell_relay(P_OUT);
        }
    }

    /// Clears the event if raised; whether it was (on a proxy: a raise
    /// already granted to this host).
    pub fn try_wait(&self) -> bool {
        self.words().try_wait()
    }

    /// Waits until the event is raised, and clears it.
    pub fn wait(&self) -> Result<(), HubError> {
        self.wait_until(None).map(|_| ())
    }

    /// Waits at most `timeout`; whether the event was raised (and is now
    /// cleared).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool, HubError> {
        self.wait_until(deadline(timeout))
    }

    pub(super) fn wait_until(&self, deadline: Option<Instant>) -> Result<bool, HubError> {
        if self.h.is_proxy() {
            if self.words().try_wait() {
                return Ok(true);
            }
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let ev = self.words();
        self.h.wait(deadline, |d| ev.wait(self.h.park(), d))
    }

    /// Whether the event is raised now.
    pub fn is_raised(&self) -> bool {
        self.words().is_raised()
    }
}

/// A port hub for messages of type `T`: synchronous hand-over with copy.
///
/// On a proxy, a send offers the message in this host's outbound port; the
/// relay claims it, sends it home, where it is sent on the real port, and
/// marks it taken only when the real receiver (on any host) has copied it:
/// `send` returns then, as on one host. A receive asks the home for a message;
/// the home claims one on the real port, sends it here into the inbound port,
/// and tells its sender only once this host's receiver copied it.
pub struct Port<T> {
    pub(super) h: Handle,
    pub(super) scratch: Box<[u8]>,
    pub(super) _type: PhantomData<fn() -> T>,
}

impl<T: Element> Port<T> {
    /// The port this host's receivers use (on a proxy: the inbound one).
    pub(super) fn inbound(&self) -> words::PortWords<'_> {
        port_inbound(&self.h, T::SIZE)
    }

    /// Sends `message` and waits until a receiver has copied it.
    pub fn send(&mut self, message: &T) -> Result<(), HubError> {
        message.encode(&mut self.scratch);
        let port = words::PortWords::new(self.h.words(), T::SIZE);
        if !self.h.is_proxy() {
            port.send(&self.scratch, self.h.park());
            return Ok(());
        }
        let park = self.h.park();
        self.h
            .proxy_wait(None, |d| port.offer(&self.scratch, park, d))?;
        self.h.hubs.ring_bell();
        self.h.proxy_wait(None, |d| port.collect(park, d))?;
        Ok(())
    }

    /// Waits for a message.
    pub fn receive(&mut self) -> Result<T, HubError> {
        self.receive_until(None)
            .map(|m| m.expect("a wait without deadline ends with a message"))
    }

    /// Waits at most `timeout` for a message.
    pub fn receive_timeout(&mut self, timeout: Duration) -> Result<Option<T>, HubError> {
        self.receive_until(deadline(timeout))
    }

    pub(super) fn receive_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<T>, HubError> {
        if let Some(m) = self.try_receive() {
            return Ok(Some(m));
        }
        if self.h.is_proxy() {
            if self.h.failed() {
                return Err(self.h.home_lost());
            }
            self.h.tell_relay(P_DEMAND);
        }
        let port = port_inbound(&self.h, T::SIZE);
        let park = self.h.park();
        let scratch = &mut self.scratch;
        let got = self.h.wait(deadline, |d| port.receive(scratch, park, d))?;
        if got && self.h.is_proxy() {
            // As in `try_receive`.
            self.h.hubs.ring_bell();
        }
        Ok(got.then(|| T::decode(&self.scratch)))
    }

    /// A message if one waits now (on a proxy: one the home already sent
    /// here).
    pub fn try_receive(&mut self) -> Option<T> {
        let port = port_inbound(&self.h, T::SIZE);
        let got = port.try_receive(&mut self.scratch, self.h.park());
        if got && self.h.is_proxy() {
            // The relay tells the home this host copied it (the sender's
            // send returns then).
            self.h.hubs.ring_bell();
        }
        got.then(|| T::decode(&self.scratch))
    }

    /// Whether a message waits for a receiver now (on a proxy: in the
    /// inbound port).
    pub fn is_full(&self) -> bool {
        self.inbound().is_full()
    }
}

/// The port a hub's receivers use: on a proxy the inbound one (after the
/// outbound one), else the hub's own.
pub(super) fn port_inbound(h: &Handle, bytes: usize) -> words::PortWords<'_> {
    let words = h.words();
    if h.is_proxy() {
        words::PortWords::new(&words[words::PortWords::words_for(bytes)..], bytes)
    } else {
        words::PortWords::new(words, bytes)
    }
}

impl<T> fmt::Debug for Port<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Port").field("name", &self.h).finish()
    }
}

/// The sending end of a FIFO hub.
///
/// On a proxy the messages wait in this host's ring (of the FIFO's capacity),
/// from which the relay moves them home in order.
pub struct FifoSender<T> {
    pub(super) h: Handle,
    pub(super) capacity: u32,
    pub(super) cursor: RingProducer,
    pub(super) scratch: Box<[u8]>,
    pub(super) _type: PhantomData<fn() -> T>,
}

impl<T: Element> FifoSender<T> {
    /// Whether the end is dead: its home left, or refused it.
    pub(super) fn dead(&self) -> Option<HubError> {
        fifo_dead(&self.h, "sender")
    }

    /// Appends `message`, or gives it back when the FIFO is full (or, on a
    /// proxy, when its home left or refused this end). Never blocks or
    /// allocates.
    pub fn try_send(&mut self, message: T) -> Result<(), Full<T>> {
        if self.h.is_proxy() && self.dead().is_some() {
            return Err(Full(message));
        }
        message.encode(&mut self.scratch);
        let ring = self.h.ring::<T>(self.capacity);
        if ring.try_push(&mut self.cursor, &self.scratch, self.h.park()) {
            if self.h.is_proxy() {
                self.h.hubs.ring_bell();
            }
            Ok(())
        } else {
            Err(Full(message))
        }
    }

    /// Appends `message`, waiting while the FIFO is full.
    pub fn send(&mut self, message: T) -> Result<(), HubError> {
        self.send_until(message, None).map(|_| ())
    }

    /// Appends `message`, waiting at most `timeout` while the FIFO is full;
    /// whether it was appended.
    pub fn send_timeout(&mut self, message: T, timeout: Duration) -> Result<bool, HubError> {
        self.send_until(message, deadline(timeout))
    }

    pub(super) fn send_until(
        &mut self,
        message: T,
        deadline: Option<Instant>,
    ) -> Result<bool, HubError> {
        if self.h.is_proxy()
            && let Some(e) = self.dead()
        {
            return Err(e);
        }
        message.encode(&mut self.scratch);
        let ring = Ring::new(&self.h.words()[FIFO_RING..], self.capacity, T::SIZE);
        let (cursor, scratch, park) = (&mut self.cursor, &self.scratch, self.h.park());
        let sent = self
            .h
            .wait(deadline, |d| ring.push(cursor, scratch, park, d))?;
        if sent && self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
        Ok(sent)
    }

    /// Messages in the FIFO now (on a proxy: waiting in this host's ring).
    pub fn len(&self) -> u32 {
        self.h.ring::<T>(self.capacity).len()
    }

    /// Whether the FIFO is empty now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Messages the FIFO holds when full.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }
}

/// The error that ends a proxy's FIFO end, if any.
pub(super) fn fifo_dead(h: &Handle, end: &'static str) -> Option<HubError> {
    if h.failed() {
        return Some(h.home_lost());
    }
    // Acquire: pairs with the relay's Release store of the refusal.
    (h.header()[P_REFUSED].load(Ordering::Acquire) != 0).then(|| HubError::EndRefused {
        name: h.name.clone(),
        end,
        home: h.hubs.inner.home_names[h.index].clone(),
    })
}

impl<T> Drop for FifoSender<T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire claim of the next sender.
        self.h.words()[FIFO_SENDER].store(0, Ordering::Release);
        if self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
    }
}

impl<T> fmt::Debug for FifoSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoSender").field("name", &self.h).finish()
    }
}

/// The receiving end of a FIFO hub.
///
/// On a proxy the home moves messages into this host's ring (of the FIFO's
/// capacity) as room frees there, in order.
pub struct FifoReceiver<T> {
    pub(super) h: Handle,
    pub(super) capacity: u32,
    pub(super) cursor: RingConsumer,
    pub(super) scratch: Box<[u8]>,
    pub(super) _type: PhantomData<fn() -> T>,
}

impl<T: Element> FifoReceiver<T> {
    /// The oldest message, if any. Never blocks or allocates.
    pub fn try_recv(&mut self) -> Option<T> {
        let ring = self.h.ring::<T>(self.capacity);
        let got = ring.try_pop(&mut self.cursor, &mut self.scratch, self.h.park());
        if got && self.h.is_proxy() {
            // The relay returns the room to the home.
            self.h.hubs.ring_bell();
        }
        got.then(|| T::decode(&self.scratch))
    }

    /// The oldest message, waiting while the FIFO is empty.
    pub fn recv(&mut self) -> Result<T, HubError> {
        self.recv_until(None)
            .map(|m| m.expect("a wait without deadline ends with a message"))
    }

    /// The oldest message, waiting at most `timeout` while the FIFO is empty.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<T>, HubError> {
        self.recv_until(deadline(timeout))
    }

    pub(super) fn recv_until(&mut self, deadline: Option<Instant>) -> Result<Option<T>, HubError> {
        if let Some(m) = self.try_recv() {
            return Ok(Some(m));
        }
        if self.h.is_proxy()
            && let Some(e) = fifo_dead(&self.h, "receiver")
        {
            return Err(e);
        }
        let ring = Ring::new(&self.h.words()[FIFO_RING..], self.capacity, T::SIZE);
        let (cursor, scratch, park) = (&mut self.cursor, &mut self.scratch, self.h.park());
        let got = self
            .h
            .wait(deadline, |d| ring.pop(cursor, scratch, park, d))?;
        if got && self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
        Ok(got.then(|| T::decode(&self.scratch)))
    }

    /// Messages in the FIFO now (on a proxy: arrived in this host's ring).
    pub fn len(&self) -> u32 {
        self.h.ring::<T>(self.capacity).len()
    }

    /// Whether the FIFO is empty now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Drop for FifoReceiver<T> {
    fn drop(&mut self) {
        // Release: pairs with the Acquire claim of the next receiver.
        self.h.words()[FIFO_RECEIVER].store(0, Ordering::Release);
        if self.h.is_proxy() {
            self.h.hubs.ring_bell();
        }
    }
}

impl<T> fmt::Debug for FifoReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FifoReceiver")
            .field("name", &self.h)
            .finish()
    }
}

/// A resource hub: a mutex with priority inheritance. The owner is a thread:
/// a [`ResourceGuard`] unlocks when dropped, on the thread that locked.
///
/// On a proxy, a locker first takes this host's own PI lock (the threads of
/// this host contend there, with priority inheritance among them), then asks
/// the home, where a link worker thread locks the real PI lock on this host's
/// behalf and holds it until the release arrives. Priority inheritance acts
/// within each host, not across: a waiter on the home lends its priority to
/// the worker, not to the remote owner's thread.
#[derive(Debug)]
pub struct Resource {
    pub(super) h: Handle,
}

impl Resource {
    pub(super) fn lock_word(&self) -> PiLock<'_> {
        PiLock::new(&self.h.words()[0])
    }

    pub(super) fn error(&self, source: io::Error) -> HubError {
        HubError::Lock {
            name: self.h.name.clone(),
            what: PiLock::meaning(&source),
            source,
        }
    }

    /// The event the relay raises when the home granted the lock here.
    pub(super) fn granted(&self) -> words::EventWords<'_> {
        words::EventWords::new(&self.h.header()[P_GRANTED..])
    }

    /// Locks, sleeping while another thread holds it; a waiting thread of
    /// higher priority lends its priority to the holder (on its own host).
    pub fn lock(&self) -> Result<ResourceGuard<'_>, HubError> {
        if self.h.is_proxy() && self.h.failed() {
            return Err(self.h.home_lost());
        }
        self.lock_word().lock().map_err(|e| self.error(e))?;
        if self.h.is_proxy() {
            self.h.tell_relay(P_DEMAND);
            let granted = self.granted();
            if let Err(e) = self.h.proxy_wait(None, |d| granted.wait(self.h.park(), d)) {
                // Cannot fail: this thread holds the local lock.
                let _ = self.lock_word().unlock();
                return Err(e);
            }
        }
        Ok(ResourceGuard {
            resource: self,
            _not_send: PhantomData,
        })
    }

    /// Locks if free now. On a proxy nothing is done (`Ok(None)`): the home
    /// cannot be asked without waiting.
    pub fn try_lock(&self) -> Result<Option<ResourceGuard<'_>>, HubError> {
        if self.h.is_proxy() {
            return Ok(None);
        }
        let locked = self.lock_word().try_lock().map_err(|e| self.error(e))?;
        Ok(locked.then_some(ResourceGuard {
            resource: self,
            _not_send: PhantomData,
        }))
    }

    /// The thread id of the holder, if held (on a proxy: the holder of this
    /// host's lock).
    pub fn holder(&self) -> Option<u32> {
        self.lock_word().owner()
    }

    /// Frees the resource after its holder died (for the owner of the hubs,
    /// once it knows); returns the dead holder's thread id.
    pub fn force_release(&self) -> Option<u32> {
        self.lock_word().force_release()
    }
}

/// A held [`Resource`]; unlocks when dropped. Not `Send`: the kernel knows
/// the holder by its thread.
pub struct ResourceGuard<'a> {
    pub(super) resource: &'a Resource,
    pub(super) _not_send: PhantomData<*const ()>,
}

impl Drop for ResourceGuard<'_> {
    fn drop(&mut self) {
        let h = &self.resource.h;
        if h.is_proxy() && !h.failed() {
            // The release goes home before another thread here can lock.
            h.tell_relay(P_OUT);
        }
        // Cannot fail: this thread holds the lock (the guard is not Send).
        let _ = self.resource.lock_word().unlock();
    }
}

impl fmt::Debug for ResourceGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceGuard")
            .field("resource", &self.resource.h)
            .finish()
    }
}
