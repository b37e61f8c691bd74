//! The two ends of a transport, linked: the ports each side writes and reads, and how
//! a waiting side backs off.

use crate::setup::Length;
use std::fmt;
use std::io;
use std::os::unix::net::UnixStream;
use std::thread;

use ictus_core::Nanos;
use ictus_core::sync::spsc::{self, bytes};

use crate::setup::Placement;

use super::params::{HEADER_BYTES, Pacing, SPINS_BEFORE_YIELD, STREAM_BUFFER_BYTES, Transport};
use super::wire::pattern_byte;

/// How a ring side waits for the other.
#[derive(Clone, Copy, Debug)]
pub(super) struct Backoff {
    /// Spins before each `sched_yield`; `u32::MAX`: spin only.
    pub(super) spins: u32,
}

impl Backoff {
    pub(super) fn for_placement(placement: Placement) -> Self {
        match placement {
            Placement::SameCpu => Backoff {
                spins: SPINS_BEFORE_YIELD,
            },
            Placement::CrossCpu => Backoff { spins: u32::MAX },
        }
    }

    /// One wait step; `spun` counts the steps of this wait.
    #[inline]
    pub(super) fn pause(self, spun: &mut u32) {
        if *spun < self.spins {
            *spun += 1;
            std::hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// A byte buffer that starts `skew` bytes past a 64-byte line boundary, its memory
/// written (so faulted in) at construction.
///
/// Where a copy's source and destination lie relative to each other matters: on the
/// AMD Zen 3 this probe was written on, a copy of 4 KiB or more whose destination
/// lies 8 to 31 bytes past its source modulo 4096 runs about 20 times slower (2 GB/s
/// instead of 40; `rep movsb` and 4K aliasing). Buffers placed by chance make the
/// figures depend on where the allocator put them, so every buffer the probe copies
/// between is placed: the sender's message (and the pipe and unix receive buffer)
/// [`bytes::PAYLOAD_OFFSET`] bytes into a line, as a ring slot's payload is;
/// handover buffers and the memcpy reference's on a line.
pub(super) struct LineBuf {
    pub(super) storage: Box<[u8]>,
    pub(super) start: usize,
    pub(super) len: usize,
}

impl LineBuf {
    /// `len` bytes starting `skew` (< 64) bytes past a line, byte `i` set to `fill(i)`.
    pub(super) fn new(len: usize, skew: usize, fill: impl Fn(usize) -> u8) -> Self {
        // Not zeroes: a zeroed allocation may be left unwritten (so not faulted in).
        let mut storage = vec![0x5Au8; len + 64 + skew].into_boxed_slice();
        let start = storage.as_ptr().align_offset(64) + skew;
        for (i, b) in storage[start..start + len].iter_mut().enumerate() {
            *b = fill(i);
        }
        LineBuf {
            storage,
            start,
            len,
        }
    }
}

impl std::ops::Deref for LineBuf {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

impl std::ops::DerefMut for LineBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// A filled buffer on its way to the receiver (`handover`).
pub(super) struct Parcel {
    pub(super) buf: LineBuf,
    pub(super) len: usize,
    pub(super) header: u64,
}

/// The sender's end of one transport.
pub(super) enum SendPort {
    Spsc {
        ring: bytes::ByteProducer,
        /// Sync mode: wait until the ring is empty again after each message.
        sync: bool,
    },
    Pipe {
        data: io::PipeWriter,
        ack: Option<io::PipeReader>,
    },
    Unix(UnixStream),
    Handover {
        parcels: spsc::Producer<Parcel>,
        free: spsc::Consumer<LineBuf>,
        /// In sync mode, the buffer that came back with the last acknowledgement.
        held: Option<LineBuf>,
    },
}

/// The receiver's end of one transport.
pub(super) enum ReceivePort {
    Spsc(bytes::ByteConsumer),
    Pipe {
        data: io::PipeReader,
        ack: Option<io::PipeWriter>,
    },
    Unix(UnixStream),
    Handover {
        parcels: spsc::Consumer<Parcel>,
        free: spsc::Producer<LineBuf>,
        /// The buffer just read, returned by `done`.
        held: Option<LineBuf>,
    },
}

/// How long a sender runs: warm-up, then the point's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Messages sent for this long first are flagged as warm-up and not measured.
    pub warmup: Nanos,
    /// How long the measured part lasts.
    pub length: Length,
}

/// What a sender sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderOutcome {
    /// Messages sent, warm-up included, the untimed batch and the final stop
    /// message not.
    pub messages: u64,
    /// Measured messages sent.
    pub measured: u64,
    /// Sync mode: messages of the untimed batch, sent after the warm-up and before
    /// the measured messages, each acknowledged before the next, with no clock read
    /// on either side (the sender reads it once per
    /// [`BATCH_CHUNK`](super::BATCH_CHUNK)). Their mean round trip,
    /// `batch_elapsed / batch_messages`, is comparable with the bare cache-line
    /// round trip, which is also a mean over many with no clock read in between.
    pub batch_messages: u64,
    /// Sync mode: how long the untimed batch took.
    pub batch_elapsed: Nanos,
    /// The sum the receiver must find over all `messages` and `batch_messages`.
    pub checksum: u64,
}

/// What a receiver received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverOutcome {
    /// Messages received, warm-up included, the untimed batch and the final stop
    /// message not.
    pub messages: u64,
    /// Measured messages received (each one timed).
    pub measured: u64,
    /// Messages of the sender's untimed batch received (not timed).
    pub batch_messages: u64,
    /// The sum of the payloads of all `messages` and `batch_messages`.
    pub checksum: u64,
    /// The send stamp of the first measured message.
    pub first_stamp: Option<Nanos>,
    /// When the last measured message had been read.
    pub last_arrival: Option<Nanos>,
}

/// The sending end of a transport made by [`link`].
pub struct Sender {
    pub(super) port: SendPort,
    pub(super) mode: Pacing,
    pub(super) backoff: Backoff,
    pub(super) payload: usize,
    /// The outgoing message: header, then the payload (fixed pattern, sequence
    /// number in its first bytes).
    pub(super) msg: LineBuf,
}

/// The receiving end of a transport made by [`link`].
pub struct Receiver {
    pub(super) port: ReceivePort,
    pub(super) mode: Pacing,
    pub(super) backoff: Backoff,
    pub(super) payload: usize,
    /// Where `pipe` and `unix` messages are read to.
    pub(super) buf: LineBuf,
}

/// A transport end as `Debug` shows it: its mode and payload (the port is opaque).
pub(super) fn debug_end(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    mode: Pacing,
    payload: usize,
) -> fmt::Result {
    f.debug_struct(name)
        .field("mode", &mode)
        .field("payload", &payload)
        .finish_non_exhaustive()
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_end(f, "Sender", self.mode, self.payload)
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_end(f, "Receiver", self.mode, self.payload)
    }
}

/// Creates a `transport` for messages of `payload` bytes in `mode`, returning its
/// two ends. Everything is allocated and written here; the sending and receiving
/// loops allocate nothing. `placement` says how the ring transports wait: spinning
/// across CPUs, spinning briefly then yielding on one.
pub fn link(
    transport: Transport,
    mode: Pacing,
    payload: usize,
    placement: Placement,
) -> io::Result<(Sender, Receiver)> {
    let len = HEADER_BYTES + payload;
    // Stream: about STREAM_BUFFER_BYTES in flight; sync: one message at a time.
    let depth = match mode {
        Pacing::Sync => 1,
        Pacing::Stream => (STREAM_BUFFER_BYTES / len.next_multiple_of(64)).clamp(4, 256),
    };
    let sync = mode == Pacing::Sync;
    let (send, receive) = match transport {
        Transport::Spsc => {
            let (ring, ring_rx) = bytes::channel(len, depth);
            (SendPort::Spsc { ring, sync }, ReceivePort::Spsc(ring_rx))
        }
        Transport::Pipe => {
            let (data_rx, data_tx) = io::pipe()?;
            let (ack_rx, ack_tx) = if sync {
                let (r, w) = io::pipe()?;
                (Some(r), Some(w))
            } else {
                (None, None)
            };
            (
                SendPort::Pipe {
                    data: data_tx,
                    ack: ack_rx,
                },
                ReceivePort::Pipe {
                    data: data_rx,
                    ack: ack_tx,
                },
            )
        }
        Transport::Unix => {
            let (a, b) = UnixStream::pair()?;
            (SendPort::Unix(a), ReceivePort::Unix(b))
        }
        Transport::Handover => {
            let (parcels_tx, parcels_rx) = spsc::channel::<Parcel>(depth);
            let (mut free_tx, free_rx) = spsc::channel::<LineBuf>(depth);
            for _ in 0..depth {
                let buf = LineBuf::new(payload, 0, |i| pattern_byte(!i));
                assert!(
                    free_tx.push(buf).is_ok(),
                    "the free ring holds every buffer"
                );
            }
            (
                SendPort::Handover {
                    parcels: parcels_tx,
                    free: free_rx,
                    held: None,
                },
                ReceivePort::Handover {
                    parcels: parcels_rx,
                    free: free_tx,
                    held: None,
                },
            )
        }
    };
    // The message starts where a ring slot's payload does, relative to a line.
    let msg = LineBuf::new(len, bytes::PAYLOAD_OFFSET, pattern_byte);
    let backoff = Backoff::for_placement(placement);
    let buf = match transport {
        Transport::Pipe | Transport::Unix => LineBuf::new(len, bytes::PAYLOAD_OFFSET, |_| 0),
        Transport::Spsc | Transport::Handover => LineBuf::new(0, 0, |_| 0),
    };
    Ok((
        Sender {
            port: send,
            mode,
            backoff,
            payload,
            msg,
        },
        Receiver {
            port: receive,
            mode,
            backoff,
            payload,
            buf,
        },
    ))
}
