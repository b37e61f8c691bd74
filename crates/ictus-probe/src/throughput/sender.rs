//! The sending end: the warm-up, the timed and untimed messages, the acknowledgements.

use crate::setup::Length;
use std::io::{self, Read, Write};

use ictus_core::sync::spsc::Full;
use ictus_core::{LatencyHistogram, Nanos};
use ictus_os::clock::monotonic_now;

use crate::progress::Progress;

use super::link::{Parcel, Plan, SendPort, Sender, SenderOutcome};
use super::params::{BATCH_CHUNK, BATCH_SHARE, HEADER_BYTES, Pacing};
use super::wire::{checksum, head_sum, header};

impl Sender {
    /// Sends messages per `plan`: warm-up messages; in sync mode an untimed
    /// batch (see [`SenderOutcome::batch_messages`]); then measured ones until the
    /// length is reached or a stop is requested; then a stop message. In sync mode
    /// each message is acknowledged before the next is sent, and each measured
    /// round trip goes into `round_trip`. Allocates nothing.
    pub fn send_messages(
        &mut self,
        plan: &Plan,
        round_trip: &mut LatencyHistogram,
        progress: &Progress,
    ) -> io::Result<SenderOutcome> {
        let n = self.payload;
        let h = n.min(8);
        self.msg[HEADER_BYTES..HEADER_BYTES + h].fill(0);
        let base = checksum(&self.msg[HEADER_BYTES..HEADER_BYTES + n]);
        let mut out = SenderOutcome::default();
        // Every message so far, of every kind: the next one's sequence number is
        // `seq + 1`, which is also the count the receiver acknowledges it with.
        let mut seq = 0u64;
        let mut checksum = 0u64;
        let mut exchange = |this: &mut Self, header: u64| -> io::Result<()> {
            seq += 1;
            this.msg[HEADER_BYTES..HEADER_BYTES + h].copy_from_slice(&seq.to_le_bytes()[..h]);
            this.send(header)?;
            checksum = checksum.wrapping_add(base).wrapping_add(head_sum(seq, n));
            if this.mode == Pacing::Sync {
                this.wait_ack(seq)?;
            }
            Ok(())
        };
        // Warm-up.
        let warm_end = monotonic_now().saturating_add(plan.warmup);
        while !progress.stop_requested() {
            let t0 = monotonic_now();
            if t0 >= warm_end {
                break;
            }
            exchange(self, t0.as_u64() & header::STAMP | header::WARMUP)?;
            out.messages += 1;
        }
        // Sync mode: the untimed batch, clock read once per BATCH_CHUNK messages.
        if self.mode == Pacing::Sync {
            let (count, time) = match plan.length {
                Length::Count(k) => (k, Nanos::MAX),
                Length::Duration(d) => (u64::MAX, Nanos::new(d.as_u64() / BATCH_SHARE)),
            };
            let start = monotonic_now();
            let end = start.saturating_add(time);
            let mut now = start;
            while out.batch_messages < count && now < end && !progress.stop_requested() {
                let chunk = BATCH_CHUNK.min(count - out.batch_messages);
                for _ in 0..chunk {
                    exchange(self, header::UNTIMED)?;
                }
                out.batch_messages += chunk;
                now = monotonic_now();
            }
            out.batch_elapsed = now.saturating_sub(start);
        }
        // The measured messages.
        let limit = match plan.length {
            Length::Count(k) => k,
            Length::Duration(_) => u64::MAX,
        };
        // With `Length::Duration`, set when the first measured message goes out.
        let mut end = Nanos::MAX;
        while out.measured < limit && !progress.stop_requested() {
            let t0 = monotonic_now();
            if out.measured == 0
                && let Length::Duration(d) = plan.length
            {
                end = t0.saturating_add(d);
            }
            if t0 >= end {
                break;
            }
            exchange(self, t0.as_u64() & header::STAMP)?;
            if self.mode == Pacing::Sync {
                round_trip.record(monotonic_now().saturating_sub(t0));
            }
            out.messages += 1;
            out.measured += 1;
        }
        out.checksum = checksum;
        self.send(monotonic_now().as_u64() & header::STAMP | header::STOP)?;
        Ok(out)
    }

    /// Sends the message in `msg` with `header` in front, waiting while the
    /// transport is full.
    #[inline]
    pub(super) fn send(&mut self, header: u64) -> io::Result<()> {
        let Sender {
            port,
            backoff,
            payload,
            msg,
            ..
        } = self;
        msg[..HEADER_BYTES].copy_from_slice(&header.to_le_bytes());
        let msg = &msg[..HEADER_BYTES + *payload];
        let mut spun = 0;
        match port {
            SendPort::Spsc { ring, .. } => {
                while !ring.try_write(|slot| {
                    slot[..msg.len()].copy_from_slice(msg);
                    msg.len()
                }) {
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
            SendPort::Pipe { data, .. } => data.write_all(msg),
            SendPort::Unix(stream) => stream.write_all(msg),
            SendPort::Handover {
                parcels,
                free,
                held,
            } => {
                let mut buf = match held.take() {
                    Some(buf) => buf,
                    None => loop {
                        if let Some(buf) = free.pop() {
                            break buf;
                        }
                        backoff.pause(&mut spun);
                    },
                };
                buf.copy_from_slice(&msg[HEADER_BYTES..]);
                let mut parcel = Parcel {
                    buf,
                    len: *payload,
                    header,
                };
                spun = 0;
                while let Err(Full(back)) = parcels.push(parcel) {
                    parcel = back;
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
        }
    }

    /// Sync mode: waits until the receiver has taken message `seq`.
    #[inline]
    pub(super) fn wait_ack(&mut self, seq: u64) -> io::Result<()> {
        let mut spun = 0;
        let backoff = self.backoff;
        match &mut self.port {
            SendPort::Spsc { ring, sync: true } => {
                // The receiver hands the slot back once it has read the message:
                // that hand-back, in the slot's own first line, is the
                // acknowledgement (one message is in flight, so `seq` is the one
                // taken).
                while !ring.is_empty() {
                    backoff.pause(&mut spun);
                }
                Ok(())
            }
            SendPort::Spsc { sync: false, .. } => Ok(()),
            SendPort::Pipe { ack: Some(ack), .. } => expect_ack(ack, seq),
            SendPort::Pipe { ack: None, .. } => Ok(()),
            SendPort::Unix(stream) => expect_ack(stream, seq),
            SendPort::Handover { free, held, .. } => {
                // The buffer coming back is the acknowledgement.
                *held = Some(loop {
                    if let Some(buf) = free.pop() {
                        break buf;
                    }
                    backoff.pause(&mut spun);
                });
                Ok(())
            }
        }
    }
}

/// Reads one acknowledgement and checks that it is for message `seq`.
pub(super) fn expect_ack(from: &mut impl Read, seq: u64) -> io::Result<()> {
    let mut word = [0u8; 8];
    from.read_exact(&mut word)?;
    if u64::from_le_bytes(word) == seq {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "an acknowledgement arrived out of order",
        ))
    }
}
