//! What a run writes out besides its record (the JSON result, `ictus-record`): the
//! files it captures for other tools to open.
//!
//! - [`timeline`]: timelines in the Chrome/Perfetto trace-event format, streamed under
//!   a byte cap ([`timeline::TraceWriter`]); the loop probe's `--trace` and the
//!   executive's `ictus run --trace` write through it.
//! - [`mcap`] (feature `mcap`, on by default): MCAP files, chunked and zstd compressed
//!   ([`mcap::McapWriter`]), read back ([`mcap::read`]), and the encodings of an ictus
//!   recording's messages (a cell in CDR, a frame and an event in JSON); the
//!   executive's `--record` and `ictus replay` use it.
//!
//! It sits above `ictus-os` (whose output files it writes whole or not at all) and
//! below the probes and the executive. The executive's tap adapts a run to these
//! writers (`ictus_exec::tap`'s sinks); this crate knows files, not runs. Without
//! the `mcap` feature it builds neither mcap nor zstd, and neither does an executive
//! built without its own `mcap` feature.
//!
//! Nothing here prints; everything returns data.
#![forbid(unsafe_code)]

#[cfg(feature = "mcap")]
pub mod mcap;
pub mod timeline;
