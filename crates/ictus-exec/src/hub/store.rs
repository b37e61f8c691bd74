//! Where the hubs live: the table's layout in process or shared memory, the
//! [`Hubs`] that own it, and the handle every hub handle holds.

use crate::cell::{ElemShape, Element};
use crate::shared::{read_described, write_described};
use ictus_core::sync::hub::{self as words, Ring};
use ictus_os::handoff::FutexPark;
use ictus_os::shm::Segment;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::decl::*;
use super::error::HubError;

/// "ictusHUB": the first word of a hubs segment's 64-bit area.
pub(super) const HUBS_MAGIC: u64 = u64::from_le_bytes(*b"ictusHUB");
/// The version of the hubs layout.
pub(super) const HUBS_VERSION: u64 = 2;
/// 64-bit words before the table JSON: magic, version, JSON length.
pub(super) const HUBS_HEADER_WORDS: usize = 3;

/// Checks the declarations and lays them out: each hub's word range (its
/// proxy header first), and the words in all; the table's own words
/// ([`TABLE_WORDS`]) come first.
pub(super) fn layout(decls: &[HubDecl]) -> Result<(Vec<Range<usize>>, usize), HubError> {
    check_decls(decls).map_err(|(_, e)| e)?;
    let mut at = TABLE_WORDS;
    let mut out = Vec::with_capacity(decls.len());
    for d in decls {
        let n = d.words();
        out.push(at..at + n);
        at = (at + n).next_multiple_of(REGION_ALIGN_WORDS);
    }
    Ok((out, at))
}

/// Sets the starting state of every hub (zeros are the rest): a proxy (`homes[i]`
/// not `here`) is marked so in its header and holds no token (the tokens are
/// its home's).
pub(super) fn init(
    decls: &[HubDecl],
    regions: &[Range<usize>],
    w: &[AtomicU32],
    homes: &[usize],
    here: usize,
) {
    for (i, (d, r)) in decls.iter().zip(regions).enumerate() {
        let proxy = homes.get(i).is_some_and(|&h| h != here);
        let (header, own) = w[r.clone()].split_at(PROXY_WORDS);
        // Relaxed (both): set up before the table is shared.
        header[P_MODE].store(u32::from(proxy), Ordering::Relaxed);
        header[P_HOME].store(homes.get(i).map_or(0, |&h| h as u32), Ordering::Relaxed);
        if let HubKind::Semaphore { initial } = d.kind
            && !proxy
        {
            words::SemaphoreWords::new(own).init(initial);
        }
    }
}

/// Words at the start of a table: the relay's doorbell (an event: raised when
/// a proxy has something to send home).
pub(super) const TABLE_WORDS: usize = 32;
/// Header word: 1 when this table's hub is a proxy of a hub homed elsewhere.
pub(super) const P_MODE: usize = 0;
/// Header word: why the proxy failed, set by the relay: 0 (it did not),
/// [`FAILED_LEFT`] or [`FAILED_DIFFERS`].
pub(super) const P_FAILED: usize = 1;
/// `P_FAILED`: the home host left the run.
pub(super) const FAILED_LEFT: u32 = 1;
/// `P_FAILED`: the home host's hub table differs from this host's.
pub(super) const FAILED_DIFFERS: u32 = 2;
/// Header word: 1 once the home refused this host's FIFO end.
pub(super) const P_REFUSED: usize = 2;
/// Header word: gives, raises or resource releases for the relay to send home.
pub(super) const P_OUT: usize = 3;
/// Header word: takes, waits, port receives or resource locks to ask home for.
pub(super) const P_DEMAND: usize = 4;
/// Header words 5 and 6: an event the relay raises when the home granted a
/// resource to this host.
pub(super) const P_GRANTED: usize = 5;
/// Header word: the home host's index in the run's hosts.
pub(super) const P_HOME: usize = 7;
/// How often a waiter on a proxy looks at `P_FAILED` (its wait is cut in
/// slices this long; the failure is seen within one).
pub const FAIL_POLL: Duration = Duration::from_millis(20);

/// Where the hub words live.
pub(super) enum Memory {
    Owned(Box<[AtomicU32]>),
    Shared(Segment),
}

pub(super) struct Inner {
    pub(super) decls: Vec<HubDecl>,
    pub(super) regions: Vec<Range<usize>>,
    pub(super) memory: Memory,
    pub(super) park: FutexPark,
    /// Per hub, its home's name (for [`HubError::HomeLost`]).
    pub(super) home_names: Vec<String>,
}

impl Inner {
    pub(super) fn words(&self) -> &[AtomicU32] {
        match &self.memory {
            Memory::Owned(w) => w,
            Memory::Shared(s) => s.words32(),
        }
    }
}

/// A table of hubs in process or shared memory; handles are looked up by
/// name. Cloning shares the same hubs (`Arc`).
#[derive(Clone)]
pub struct Hubs {
    pub(super) inner: Arc<Inner>,
}

impl Hubs {
    /// The hubs `decls` in this process's memory (a run on one host: every
    /// hub is here).
    pub fn in_process(decls: &[HubDecl]) -> Result<Hubs, HubError> {
        Hubs::in_process_at(decls, &[], 0)
    }

    /// The hubs as host `here` (an index in `hosts`) sees them: hubs homed
    /// elsewhere are proxies, which a relay ([`HubNode`](crate::hub::remote::HubNode)) connects to
    /// their homes. With no `hosts`, [`in_process`](Self::in_process).
    pub fn in_process_at(
        decls: &[HubDecl],
        hosts: &[String],
        here: usize,
    ) -> Result<Hubs, HubError> {
        let (regions, n) = layout(decls)?;
        let homes = homes(decls, hosts)?;
        let w: Box<[AtomicU32]> = (0..n).map(|_| AtomicU32::new(0)).collect();
        init(decls, &regions, &w, &homes, here);
        Ok(Hubs::new(
            decls.to_vec(),
            regions,
            Memory::Owned(w),
            home_names(decls, hosts),
        ))
    }

    /// Creates the shared memory `name` holding the hubs `decls` (stale
    /// segments of dead owners are removed, a live owner is refused; see
    /// [`ictus_os::shm::Segment::create`]). Removed when the last clone of the
    /// returned `Hubs` is dropped.
    pub fn create_shared(decls: &[HubDecl], name: &str) -> Result<Hubs, HubError> {
        Hubs::create_shared_at(decls, name, &[], 0)
    }

    /// [`create_shared`](Self::create_shared) as host `here` of `hosts` sees
    /// the hubs (see [`in_process_at`](Self::in_process_at)); the processes
    /// that open it see the same proxies.
    pub fn create_shared_at(
        decls: &[HubDecl],
        name: &str,
        hosts: &[String],
        here: usize,
    ) -> Result<Hubs, HubError> {
        let (regions, n) = layout(decls)?;
        let homes = homes(decls, hosts)?;
        let json = serde_json::to_vec(decls).expect("hub declarations always serialize");
        let json_words = json.len().div_ceil(8);
        let segment = Segment::create(name, HUBS_HEADER_WORDS + json_words, n, |w64, w32| {
            write_described(w64, HUBS_MAGIC, HUBS_VERSION, HUBS_HEADER_WORDS, &json);
            init(decls, &regions, w32, &homes, here);
        })?;
        Ok(Hubs::new(
            decls.to_vec(),
            regions,
            Memory::Shared(segment),
            home_names(decls, hosts),
        ))
    }

    /// Maps the shared hubs `name` of their live owner, with the declarations
    /// stored in them.
    pub fn open_shared(name: &str) -> Result<Hubs, HubError> {
        let segment = Segment::open(name)?;
        let not_hubs = |reason: String| HubError::NotHubs {
            name: name.to_owned(),
            reason,
        };
        let (json, _) = read_described(
            segment.words(),
            HUBS_MAGIC,
            HUBS_VERSION,
            HUBS_HEADER_WORDS,
            "hubs",
        )
        .map_err(not_hubs)?;
        let decls: Vec<HubDecl> =
            serde_json::from_slice(&json).map_err(|e| not_hubs(format!("table: {e}")))?;
        let (regions, n) = layout(&decls).map_err(|e| not_hubs(format!("table: {e}")))?;
        if n > segment.words32().len() {
            return Err(not_hubs(format!(
                "the hubs need {n} words, the segment has {}",
                segment.words32().len()
            )));
        }
        let names = home_names(&decls, &[]);
        Ok(Hubs::new(decls, regions, Memory::Shared(segment), names))
    }

    /// [`open_shared`](Self::open_shared), then checks that every hub of
    /// `expected` is there with the same kind and parameters.
    pub fn open_shared_matching(name: &str, expected: &[HubDecl]) -> Result<Hubs, HubError> {
        let hubs = Hubs::open_shared(name)?;
        for want in expected {
            let detail = match hubs.inner.decls.iter().find(|d| d.name == want.name) {
                None => Some("it is not in the shared table".to_owned()),
                Some(d) if d.kind != want.kind => Some(format!(
                    "declared {:?} here and {:?} in the shared table",
                    want.kind, d.kind
                )),
                Some(_) => None,
            };
            if let Some(detail) = detail {
                return Err(HubError::TableMismatch {
                    shared: name.to_owned(),
                    name: want.name.clone(),
                    detail,
                });
            }
        }
        Ok(hubs)
    }

    pub(super) fn new(
        decls: Vec<HubDecl>,
        regions: Vec<Range<usize>>,
        memory: Memory,
        home_names: Vec<String>,
    ) -> Hubs {
        Hubs {
            inner: Arc::new(Inner {
                decls,
                regions,
                memory,
                park: FutexPark::default(),
                home_names,
            }),
        }
    }

    /// The declarations.
    pub fn decls(&self) -> &[HubDecl] {
        &self.inner.decls
    }

    /// The name of the shared memory, if shared.
    pub fn shared_name(&self) -> Option<&str> {
        self.segment().map(Segment::name)
    }

    /// The shared memory segment, if shared.
    pub fn segment(&self) -> Option<&Segment> {
        match &self.inner.memory {
            Memory::Owned(_) => None,
            Memory::Shared(s) => Some(s),
        }
    }

    /// The index and declaration of hub `name`, checked to be of kind
    /// `requested`.
    pub(super) fn find(
        &self,
        name: &str,
        requested: &'static str,
    ) -> Result<(usize, HubKind), HubError> {
        let (index, decl) = self
            .inner
            .decls
            .iter()
            .enumerate()
            .find(|(_, d)| d.name == name)
            .ok_or_else(|| HubError::UnknownHub {
                name: name.to_owned(),
            })?;
        if decl.kind.name() != requested {
            return Err(HubError::WrongKind {
                name: name.to_owned(),
                declared: decl.kind.name(),
                requested,
            });
        }
        Ok((index, decl.kind))
    }

    /// Checks a message type against a declaration.
    pub(super) fn check_message<T: Element>(
        name: &str,
        declared: ElemShape,
    ) -> Result<(), HubError> {
        let requested = ElemShape::of::<T>();
        if declared != requested {
            return Err(HubError::TypeMismatch {
                name: name.to_owned(),
                declared,
                requested,
            });
        }
        Ok(())
    }

    pub(super) fn handle(&self, index: usize, name: &str) -> Handle {
        Handle {
            hubs: self.clone(),
            region: self.inner.regions[index].clone(),
            name: name.to_owned(),
            index,
        }
    }
}

impl fmt::Debug for Hubs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hubs")
            .field("hubs", &self.inner.decls.len())
            .field("shared", &self.shared_name())
            .finish()
    }
}

/// What every hub handle holds: the hubs and its region.
pub(super) struct Handle {
    pub(super) hubs: Hubs,
    pub(super) region: Range<usize>,
    pub(super) name: String,
    /// The hub's index in the table.
    pub(super) index: usize,
}

impl Handle {
    /// The kind's own words (after the proxy header).
    pub(super) fn words(&self) -> &[AtomicU32] {
        &self.hubs.inner.words()[self.region.start + PROXY_WORDS..self.region.end]
    }

    /// The proxy header.
    pub(super) fn header(&self) -> &[AtomicU32] {
        &self.hubs.inner.words()[self.region.start..self.region.start + PROXY_WORDS]
    }

    pub(super) fn park(&self) -> &FutexPark {
        &self.hubs.inner.park
    }

    pub(super) fn ring<T: Element>(&self, capacity: u32) -> Ring<'_> {
        Ring::new(&self.words()[FIFO_RING..], capacity, T::SIZE)
    }

    /// Whether this is a proxy of a hub homed on another host.
    pub(super) fn is_proxy(&self) -> bool {
        // Relaxed: set before the table was shared, never changed.
        self.header()[P_MODE].load(Ordering::Relaxed) != 0
    }

    /// Whether the home host left (a proxy only).
    pub(super) fn failed(&self) -> bool {
        // Acquire: pairs with the relay's Release store in `fail_home`.
        self.header()[P_FAILED].load(Ordering::Acquire) != 0
    }

    pub(super) fn home_lost(&self) -> HubError {
        let (name, home) = (
            self.name.clone(),
            self.hubs.inner.home_names[self.index].clone(),
        );
        // Acquire: as in `failed`.
        match self.header()[P_FAILED].load(Ordering::Acquire) {
            FAILED_DIFFERS => HubError::HomeDiffers { name, home },
            _ => HubError::HomeLost { name, home },
        }
    }

    /// Counts one more of `what` (`P_OUT` or `P_DEMAND`) for the relay and
    /// rings its doorbell: all a real-time thread does for a remote hub.
    pub(super) fn tell_relay(&self, what: usize) {
        // Release: pairs with the relay's Acquire swap, so what this thread did
        // before (a message written, a lock released) is seen with the count.
        self.header()[what].fetch_add(1, Ordering::Release);
        self.hubs.ring_bell();
    }

    /// A wait on a proxy: `attempt(deadline)` (the word protocol's bounded
    /// wait) in slices of [`FAIL_POLL`], looking at `P_FAILED` between them;
    /// `Ok(false)` once `deadline` passed, `HomeLost` once the home left.
    pub(super) fn proxy_wait(
        &self,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(Option<Instant>) -> bool,
    ) -> Result<bool, HubError> {
        loop {
            if self.failed() {
                return Err(self.home_lost());
            }
            let slice = Instant::now() + FAIL_POLL;
            let until = deadline.map_or(slice, |d| d.min(slice));
            if attempt(Some(until)) {
                return Ok(true);
            }
            if expired(deadline) {
                return Ok(false);
            }
        }
    }

    /// A wait on this hub: directly on the word protocol when the hub is here,
    /// as [`proxy_wait`](Self::proxy_wait) on a proxy.
    pub(super) fn wait(
        &self,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(Option<Instant>) -> bool,
    ) -> Result<bool, HubError> {
        if self.is_proxy() {
            self.proxy_wait(deadline, attempt)
        } else {
            Ok(attempt(deadline))
        }
    }
}

impl Hubs {
    /// Rings the relay's doorbell (a raise of the table's event).
    pub(super) fn ring_bell(&self) {
        self.bell().raise(&self.inner.park);
    }

    /// The relay's doorbell.
    pub(super) fn bell(&self) -> words::EventWords<'_> {
        words::EventWords::new(&self.inner.words()[..TABLE_WORDS])
    }
}

/// Whether `deadline` has passed.
pub(super) fn expired(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The deadline `timeout` from now.
pub(super) fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
