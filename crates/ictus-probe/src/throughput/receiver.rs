//! The receiving end: each message read, checked and timed.

use std::io::{self, Read, Write};

use ictus_core::{LatencyHistogram, Nanos};
use ictus_os::clock::monotonic_now;

use super::link::{ReceivePort, Receiver, ReceiverOutcome};
use super::params::{HEADER_BYTES, Pacing};
use super::wire::{checksum, header, split};

impl Receiver {
    /// Receives messages until the stop message: sums every payload, times every
    /// measured message into `one_way`, and in sync mode acknowledges each one.
    /// Allocates nothing.
    pub fn receive_messages(
        &mut self,
        one_way: &mut LatencyHistogram,
    ) -> io::Result<ReceiverOutcome> {
        let mut out = ReceiverOutcome::default();
        // Every message so far, of every kind: what the sender waits for.
        let mut count = 0u64;
        loop {
            let (word, sum) = self.receive()?;
            if word & header::UNTIMED != 0 {
                count += 1;
                out.batch_messages += 1;
                out.checksum = out.checksum.wrapping_add(sum);
                self.done(count)?;
                continue;
            }
            let t1 = monotonic_now();
            if word & header::STOP != 0 {
                // Not acknowledged: the sender may already have closed its end.
                return Ok(out);
            }
            count += 1;
            out.messages += 1;
            out.checksum = out.checksum.wrapping_add(sum);
            self.done(count)?;
            if word & header::WARMUP == 0 {
                let stamp = Nanos::new(word & header::STAMP);
                one_way.record(t1.saturating_sub(stamp));
                out.first_stamp.get_or_insert(stamp);
                out.last_arrival = Some(t1);
                out.measured += 1;
            }
        }
    }

    /// Waits for the next message and reads it whole: its header and its payload's
    /// checksum.
    #[inline]
    pub(super) fn receive(&mut self) -> io::Result<(u64, u64)> {
        let len = HEADER_BYTES + self.payload;
        let backoff = self.backoff;
        let mut spun = 0;
        match &mut self.port {
            ReceivePort::Spsc(ring) => loop {
                if let Some(got) = ring.try_read(split) {
                    return Ok(got);
                }
                backoff.pause(&mut spun);
            },
            ReceivePort::Pipe { data, .. } => {
                data.read_exact(&mut self.buf[..len])?;
                Ok(split(&self.buf[..len]))
            }
            ReceivePort::Unix(stream) => {
                stream.read_exact(&mut self.buf[..len])?;
                Ok(split(&self.buf[..len]))
            }
            ReceivePort::Handover { parcels, held, .. } => {
                let parcel = loop {
                    if let Some(p) = parcels.pop() {
                        break p;
                    }
                    backoff.pause(&mut spun);
                };
                let sum = checksum(&parcel.buf[..parcel.len]);
                *held = Some(parcel.buf);
                Ok((parcel.header, sum))
            }
        }
    }

    /// After a message was read and timed: gives a `handover` buffer back, and in
    /// sync mode acknowledges message `count`.
    #[inline]
    pub(super) fn done(&mut self, count: u64) -> io::Result<()> {
        let sync = self.mode == Pacing::Sync;
        match &mut self.port {
            // The slot went back to the sender in `receive`.
            ReceivePort::Spsc(_) => Ok(()),
            ReceivePort::Pipe { ack: Some(ack), .. } => ack.write_all(&count.to_le_bytes()),
            ReceivePort::Pipe { ack: None, .. } => Ok(()),
            ReceivePort::Unix(stream) if sync => stream.write_all(&count.to_le_bytes()),
            ReceivePort::Unix(_) => Ok(()),
            ReceivePort::Handover { free, held, .. } => {
                if let Some(buf) = held.take() {
                    // The free ring has room for every buffer, so this never fails;
                    // the sender only takes a buffer out of it before giving it back.
                    assert!(free.push(buf).is_ok(), "the free ring holds every buffer");
                }
                Ok(())
            }
        }
    }
}
