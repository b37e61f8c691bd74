//! Who reads a run (issue 30): a reader (a dashboard, a plotter, `python -m
//! ictus_zenoh`) is a Zenoh client with a reader's certificate (CN `reader:R`,
//! [`crate::keys`]) on a link to one host. A host learns of it from Zenoh's link
//! events ([`watch`]): the link's certificate names it, so the run can say which
//! readers were there, from which address, and when they came and went.
//!
//! A reader never slows the run: the host sends it only what it may read (the cells,
//! the tick, the status: [`crate::security::access_rules`]), all of it published
//! with Zenoh's `Drop` congestion control, so what a reader too slow for the run
//! cannot take is dropped for that reader alone, and no publisher waits on its
//! queue. How much a reader missed is the reader's to count (every tick carries its
//! frame, docs/wire.md): Zenoh 1.10.2 counts a link's dropped messages only in
//! builds with its `stats` feature, which the hosts are built without.
//!
//! Events arrive on a Zenoh thread and are handed over through an SPSC ring, as the
//! ticks are ([`crate::tick`]).

use ictus_core::sync::spsc::Consumer;
use zenoh::Wait;
use zenoh::sample::SampleKind;

use crate::keys::READER_PREFIX;
use crate::{NetError, Session};

/// A reader that came or went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderEvent {
    /// The reader's name (its certificate's common name without `reader:`).
    pub name: String,
    /// Where its link comes from (Zenoh's locator of the far end).
    pub from: String,
    /// Whether it came (`true`) or went.
    pub connected: bool,
}

/// A watch on the readers linked to this host. Dropping it ends the watch.
pub struct ReaderWatch {
    _listener: zenoh::session::LinkEventsListener<()>,
}

/// The reader a link's authentication names, if it is a reader's (a renewed
/// certificate's generation, `reader:R.2`, left out: names have no dot).
pub fn reader_of(auth_identifier: Option<&str>) -> Option<&str> {
    let name = auth_identifier?.strip_prefix(READER_PREFIX)?;
    Some(name.split('.').next().unwrap_or(name))
}

/// Watches the links of `session` for readers: each reader's link that opens (those
/// open already first) or closes, pushed into a ring of `capacity` whose reading end
/// is returned (events that find it full are dropped: a reader flapping faster than
/// the coordinator reads is still named once).
pub fn watch(
    session: &Session,
    capacity: usize,
) -> Result<(ReaderWatch, Consumer<ReaderEvent>), NetError> {
    let (ring, consumer) = crate::handoff::<ReaderEvent>(capacity);
    let listener = session
        .info()
        .link_events_listener()
        .history(true)
        .callback(move |event| {
            let link = event.link();
            let Some(name) = reader_of(link.auth_identifier()) else {
                return;
            };
            let _ = ring.push(ReaderEvent {
                name: name.to_string(),
                from: link.dst().to_string(),
                connected: event.kind() == SampleKind::Put,
            });
        })
        .wait()
        .map_err(|e| NetError::Zenoh(e.to_string()))?;
    Ok((
        ReaderWatch {
            _listener: listener,
        },
        consumer,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_readers_certificate_names_a_reader() {
        assert_eq!(reader_of(Some("reader:python")), Some("python"));
        assert_eq!(reader_of(Some("h2")), None);
        assert_eq!(reader_of(None), None);
    }
}
