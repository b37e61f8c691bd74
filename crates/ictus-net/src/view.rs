//! What readers get (issue 30): a copy of the run at a reader's pace, on keys of its
//! own, so that no reader costs the hosts' own traffic anything.
//!
//! The hosts' cells (`cell/C/H`) and tick (`tick`) go to the other hosts only
//! ([`crate::security::access_rules`]): Zenoh copies every publication into the queue
//! of every peer whose subscription matches, on the publishing thread, so each reader
//! on those keys made every `put` of the forwarder and the tick thread longer (ten
//! readers doubled the put's p99 and raised the ticks' p99 lateness from about 1 to
//! 4 ms, docs/executive.md). Instead each host's view thread (`ictus-view`, a normal
//! thread off the real-time CPUs, like the forwarder) publishes, every
//! [`VIEW_EVERY`], the latest value of the elements its subsystems write
//! (`view/cell/C/H`, the same publication format) and, on the main host, the latest
//! tick (`view/tick`), at Zenoh's data priority, batched, dropped for a reader whose
//! queue is full. A reader sees every cell at most [`VIEW_EVERY`] old, and every
//! tick's frame only where it fell on a view; what it wants at a frame's pace is not
//! a reader's to have.

#![allow(
    clippy::disallowed_types,
    reason = "the view thread's stop flag and the clock offset, one word each with one writer; Zenoh's threads are the other side"
)]

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ictus_exec::cell::Cells;
use ictus_os::clock::monotonic_now;
use zenoh::Wait;
use zenoh::qos::{CongestionControl, Priority};

use crate::Session;
use crate::link::Publication;
use crate::tick::Tick;

/// How often a view is published: 20 times a second.
pub const VIEW_EVERY: Duration = Duration::from_millis(50);

/// The latest tick the main host sent (for its view), `None` before the first.
pub(crate) type LatestTick = Arc<Mutex<Option<Tick>>>;

/// A host's view thread. Stops when stopped or dropped.
pub(crate) struct View {
    thread: Option<(JoinHandle<()>, Arc<AtomicBool>)>,
}

impl View {
    /// Starts host `host` (index `index`) of run `run`'s view of `writes` (cell
    /// index and the byte ranges its subsystems write) and, with `tick`, of the main
    /// host's latest tick. `offset`: this host's clock offset, as the forwarder's.
    #[allow(
        clippy::too_many_arguments,
        reason = "what a view publishes and where: a one-call constructor"
    )]
    pub(crate) fn start(
        session: &Session,
        run: &str,
        host: &str,
        index: u16,
        cells: &Cells,
        writes: &[(usize, Vec<Range<usize>>)],
        offset: Arc<AtomicU64>,
        tick: Option<LatestTick>,
    ) -> Result<View, String> {
        let declare = |key: String| {
            session
                .declare_publisher(key)
                .congestion_control(CongestionControl::Drop)
                .priority(Priority::Data)
                .express(false)
                .wait()
                .map_err(|e| e.to_string())
        };
        let mut publishers = Vec::new();
        for (cell, _) in writes {
            let name = cells.table().cells()[*cell].name();
            publishers.push(declare(format!("ictus/{run}/view/cell/{name}/{host}"))?);
        }
        let tick_publisher = match &tick {
            Some(_) => Some(declare(format!("ictus/{run}/view/tick"))?),
            None => None,
        };
        let cells = cells.clone();
        let writes = writes.to_vec();
        let quit = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&quit);
        let handle = std::thread::Builder::new()
            .name("ictus-view".into())
            .spawn(move || {
                let mut bufs: Vec<Vec<u8>> =
                    writes.iter().map(|(c, _)| cells.new_buffer(*c)).collect();
                let mut out = Vec::new();
                let mut last_frame = None;
                loop {
                    // Relaxed: a stop request, polled; one more view follows it.
                    let ending = stop.load(Ordering::Relaxed);
                    for (i, (cell, ranges)) in writes.iter().enumerate() {
                        if cells.try_read_cell(*cell, &mut bufs[i]).is_none() {
                            continue;
                        }
                        let p = Publication::of(
                            index,
                            // Relaxed: set once before cells flow.
                            offset.load(Ordering::Relaxed) as i64,
                            monotonic_now().as_u64(),
                            &bufs[i],
                            ranges,
                        );
                        out.clear();
                        p.encode(&mut out);
                        // Dropped for a reader that cannot take it: the next view
                        // says it again.
                        let _ = publishers[i].put(out.clone()).wait();
                    }
                    if let (Some(latest), Some(p)) = (&tick, &tick_publisher) {
                        let t = *latest.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(t) = t
                            && last_frame != Some(t.frame)
                        {
                            last_frame = Some(t.frame);
                            let _ = p.put(t.encode().to_vec()).wait();
                        }
                    }
                    if ending {
                        break;
                    }
                    std::thread::sleep(VIEW_EVERY);
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(View {
            thread: Some((handle, quit)),
        })
    }

    /// Publishes a last view and stops.
    pub(crate) fn stop(&mut self) {
        if let Some((h, quit)) = self.thread.take() {
            // Relaxed: a stop request; the join orders the rest.
            quit.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop();
    }
}
