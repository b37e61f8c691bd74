//! The intake: what Zenoh's callback does with another host's cell publication:
//! checked against its claims, copied into this host's table, its delay measured
//! stage by stage, its gaps and lateness counted.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ictus_core::{LatencyHistogram, Nanos};
use ictus_exec::cell::{Cells, ForeignWrites};
use ictus_exec::report::LinkStage;
use ictus_os::clock::monotonic_now;

use crate::gaps::Gaps;
use crate::guard::{Guard, Refusal};
use crate::late::Lateness;

use super::stages::Stages;
use super::wire::Publication;

/// What the forwarder and the cell subscriber count.
#[derive(Default)]
pub(super) struct CellCounts {
    pub(super) sent: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) received: AtomicU64,
}

/// Per cell, the host and time (this host's clock) of the last copy from another host.
pub(super) type Arrivals = Vec<Option<(usize, Nanos)>>;

/// Where the other hosts' publications come in: checked against their claims
/// ([`Guard`]), then copied into the cells.
pub(super) struct Intake {
    pub(super) cells: Cells,
    pub(super) here: usize,
    /// This host's writes: never overwritten from the link.
    pub(super) ours: Vec<(usize, Vec<Range<usize>>)>,
    /// The only way into this host's cells for another host's bytes.
    pub(super) door: ForeignWrites,
    pub(super) guard: Arc<Mutex<Guard>>,
    pub(super) counts: Arc<CellCounts>,
    pub(super) latency: Arc<Mutex<LatencyHistogram>>,
    /// The receiving stages' delays.
    pub(super) stages: Arc<Mutex<Stages>>,
    pub(super) offset: Arc<AtomicU64>,
    pub(super) arrivals: Arc<Mutex<Arrivals>>,
    /// The publications of each sender that never came.
    pub(super) gaps: Arc<Mutex<Gaps>>,
    /// What arrived late, and the hosts' names to say it.
    pub(super) lateness: Arc<Mutex<Lateness>>,
    pub(super) hosts: Vec<String>,
}

impl Intake {
    /// A publication of cell `name` under host name `host`'s key.
    /// `handed`: when the sender handed it to Zenoh, on its clock, and `number` its
    /// number (the attachment).
    pub(super) fn arrive(
        &self,
        name: &str,
        host: &str,
        bytes: &[u8],
        now: Nanos,
        handed: Option<u64>,
        number: Option<u64>,
    ) {
        let mut guard = self.guard.lock().unwrap_or_else(|e| e.into_inner());
        let Some(h) = guard.host(host) else {
            guard.refuse(None, Refusal::UnknownHost);
            return;
        };
        if h == self.here {
            // Its own, as Zenoh delivers to local subscribers too.
            return;
        }
        let Ok(cell) = self.cells.cell_index(name) else {
            guard.refuse(Some(h), Refusal::UnknownCell);
            return;
        };
        if !guard.has_claims(h) {
            if Publication::decode(bytes).is_some() {
                guard.hold(cell, h, bytes.to_vec());
            } else {
                guard.refuse(Some(h), Refusal::Undecodable(cell));
            }
            return;
        }
        drop(guard);
        if self.take(cell, h, bytes, now, handed)
            && let Some(n) = number
        {
            self.gaps
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .seen(cell, h, n);
        }
    }

    /// Checks and copies host `h`'s publication of `cell`, once its claims are known;
    /// `now` is its arrival, `handed` when the sender gave it to Zenoh (its clock).
    /// Whether it was taken (not refused).
    pub(super) fn take(
        &self,
        cell: usize,
        h: usize,
        bytes: &[u8],
        now: Nanos,
        handed: Option<u64>,
    ) -> bool {
        let refused = |why| {
            self.guard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .refuse(Some(h), why);
            false
        };
        let Some(p) = Publication::decode(bytes) else {
            return refused(Refusal::Undecodable(cell));
        };
        if usize::from(p.host) != h {
            return refused(Refusal::NotItsName(cell));
        }
        let ranges: Vec<(usize, usize)> = p.ranges.iter().map(|(at, d)| (*at, d.len())).collect();
        let allowed = self
            .guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allowed(h, cell, &ranges);
        if !allowed {
            return refused(Refusal::NotItsElements(cell));
        }
        if let Some(a) = self
            .arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(cell)
        {
            *a = Some((h, now));
        }
        for (at, data) in &p.ranges {
            // The executive's door: never a range past the cell, never one this
            // host writes (refused there, and already by the claims' check above).
            self.door.write(cell, *at, data);
        }
        let copied = monotonic_now();
        // Relaxed: counters.
        self.counts.received.fetch_add(1, Ordering::Relaxed);
        // A copy made before any publication (the initial values) has no stamp, so
        // no delay.
        if p.stamp == 0 {
            return true;
        }
        // The writer's stamps on the main clock, then on this host's.
        // Relaxed: a measured figure, set once before cells flow.
        let mine = self.offset.load(Ordering::Relaxed) as i64;
        let here = |t: u64| t as i128 - i128::from(p.offset) + i128::from(mine);
        let since = |t: i128| Nanos::new((i128::from(now.as_u64()) - t).max(0) as u64);
        self.latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(since(here(p.stamp)));
        let mut stages = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(handed) = handed {
            stages.record(LinkStage::Transit, since(here(handed)));
        }
        stages.record(LinkStage::Copy, copied.saturating_sub(now));
        drop(stages);
        let local = |t: u64| Nanos::new(here(t).max(0) as u64);
        self.lateness
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .cell(
                self.cells.table().cells()[cell].name(),
                &self.hosts[h],
                local(p.stamp),
                handed.map(local),
                now,
            );
        true
    }
}
