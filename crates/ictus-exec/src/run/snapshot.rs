//! The live snapshots a run hands to `ictus ctl status` and to its status hook
//! (see [`crate::live`]), while it starts and once it runs.

use std::collections::BTreeSet;

use ictus_core::Nanos;

use crate::cell::Cells;
use crate::control::Control;
use crate::link::Link;
use crate::live::{Extras, LiveStatus};
use crate::schedule::Schedule;
use crate::state::{StateLog, States};

/// The live snapshot now (see [`crate::live`]).
pub(super) fn live_now(
    schedule: &Schedule,
    control: &Control,
    states: &States,
    cells: &Cells,
    log: &StateLog,
    frame: u64,
    extras: Extras<'_>,
) -> LiveStatus {
    crate::live::snapshot(schedule, control, states, log, frame, Some(cells), extras)
}

/// A live snapshot's extras while subsystems start.
pub(super) fn starting<'a>(link: Option<&dyn Link>, events: &'a [String]) -> Extras<'a> {
    Extras {
        starting: true,
        ..link_extras(link, &BTreeSet::new(), events)
    }
}

/// A live snapshot's extras once the epoch is set.
pub(super) fn running<'a>(
    link: Option<&dyn Link>,
    hosts_left: &BTreeSet<usize>,
    events: &'a [String],
    epoch: Nanos,
    stop_frame: u64,
    stopping: bool,
) -> Extras<'a> {
    Extras {
        epoch: Some(epoch),
        stop_frame: (stop_frame != u64::MAX).then_some(stop_frame),
        stopping,
        ..link_extras(link, hosts_left, events)
    }
}

/// What the link knows for a live snapshot: its hosts (those that left marked so)
/// and the cells' last copies.
fn link_extras<'a>(
    link: Option<&dyn Link>,
    hosts_left: &BTreeSet<usize>,
    events: &'a [String],
) -> Extras<'a> {
    let mut hosts = link.map_or_else(Vec::new, |l| l.live_hosts());
    for (h, host) in hosts.iter_mut().enumerate() {
        if hosts_left.contains(&h) {
            host.alive = false;
        }
    }
    Extras {
        events,
        hosts,
        arrivals: link.map_or_else(Vec::new, |l| l.cell_arrivals()),
        here: link.map_or(0, |l| l.host()),
        ..Extras::default()
    }
}
