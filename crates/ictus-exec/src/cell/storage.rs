//! [`Cells`]: the storage of a cell table, one seqlock region per cell, in
//! process memory or in POSIX shared memory, with the publication notice;
//! and [`ElementRef`], a typed handle on one element of it.

#![allow(
    clippy::disallowed_types,
    reason = "words of a shared-memory mapping between processes, which loom cannot model; the protocols on them are ictus_core::sync's (seqlock, hub), model-checked there, or this file's, tested across processes"
)]

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ictus_core::Nanos;
use ictus_core::sync::AtomicU64;
use ictus_core::sync::seqlock::{SeqlockView, region_words};
use ictus_os::shm::Segment;

use super::table::{REGION_ALIGN_WORDS, TableRepr};
use super::{CellError, CellTable, Element, ElementLocation, ElementSlot};
use crate::shared::{read_described, write_described};

/// "ictusCEL": the first word of the cells' area of a shared segment.
const CELLS_MAGIC: u64 = u64::from_le_bytes(*b"ictusCEL");
/// The version of the cells' layout in a segment (2: the publication notice).
const CELLS_VERSION: u64 = 2;
/// Words before the table JSON: magic, version, JSON length, the notice's two words.
const CELLS_HEADER_WORDS: usize = 5;
/// Where the notice's words are in a segment: its counter, then its stamp.
const SHARED_NOTICE: usize = 3;
/// Where they are in process memory (before the first cell).
const OWNED_NOTICE: usize = 0;
/// Words of the notice.
const NOTICE_WORDS: usize = 2;
/// The notice's low bit: someone forwards publications and sleeps on the word.
const NOTICE_LISTENED: u64 = 1;

/// The word ranges of the cells' regions, starting at word `base`, and the
/// words used in all.
fn regions(table: &CellTable, base: usize) -> (Vec<Range<usize>>, usize) {
    let mut at = base.next_multiple_of(REGION_ALIGN_WORDS);
    let mut out = Vec::with_capacity(table.cells.len());
    for cell in &table.cells {
        let words = region_words(cell.bytes);
        out.push(at..at + words);
        at = (at + words).next_multiple_of(REGION_ALIGN_WORDS);
    }
    (out, at)
}

/// Where the words of the cells live.
enum Memory {
    Owned(Box<[AtomicU64]>),
    Shared(Segment),
}

impl Memory {
    fn words(&self) -> &[AtomicU64] {
        match self {
            Memory::Owned(words) => words,
            Memory::Shared(segment) => segment.words(),
        }
    }
}

struct Inner {
    table: CellTable,
    /// The first of the notice's words in `memory`.
    notice: usize,
    /// Word range of each cell's seqlock region in `memory`.
    regions: Vec<Range<usize>>,
    memory: Memory,
}

/// The storage of a cell table: one seqlock region per cell, in process
/// memory or in shared memory. Cloning shares the same storage (`Arc`).
///
/// Cell indices are positions in the table ([`Cells::cell_index`]); an index
/// out of range panics.
#[derive(Clone)]
pub struct Cells {
    inner: Arc<Inner>,
}

impl Cells {
    /// Storage for `table` in this process's memory, all elements zero.
    pub fn in_process(table: &CellTable) -> Cells {
        let (regions, words) = regions(table, OWNED_NOTICE + NOTICE_WORDS);
        let words = (0..words).map(|_| AtomicU64::new(0)).collect();
        Cells {
            inner: Arc::new(Inner {
                table: table.clone(),
                notice: OWNED_NOTICE,
                regions,
                memory: Memory::Owned(words),
            }),
        }
    }

    /// Creates the shared memory `name` holding `table` (see
    /// [`ictus_os::shm::Segment::create`]: stale segments of dead owners are
    /// removed, a live owner is refused). This process owns it, and it is
    /// removed when the last clone of the returned `Cells` is dropped.
    pub fn create_shared(table: &CellTable, name: &str) -> Result<Cells, CellError> {
        let json = serde_json::to_vec(&table.repr()).expect("a table always serializes");
        let json_words = json.len().div_ceil(8);
        let (regions, words) = regions(table, CELLS_HEADER_WORDS + json_words);
        let segment = Segment::create(name, words, 0, |w, _| {
            write_described(w, CELLS_MAGIC, CELLS_VERSION, CELLS_HEADER_WORDS, &json);
        })?;
        Ok(Cells {
            inner: Arc::new(Inner {
                table: table.clone(),
                notice: SHARED_NOTICE,
                regions,
                memory: Memory::Shared(segment),
            }),
        })
    }

    /// Maps the shared cells `name` of their live owner, with the table stored
    /// in them.
    pub fn open_shared(name: &str) -> Result<Cells, CellError> {
        let segment = Segment::open(name)?;
        let not_cells = |reason: String| CellError::NotCells {
            name: name.to_owned(),
            reason,
        };
        let (json, described) = read_described(
            segment.words(),
            CELLS_MAGIC,
            CELLS_VERSION,
            CELLS_HEADER_WORDS,
            "cells",
        )
        .map_err(not_cells)?;
        let repr: TableRepr =
            serde_json::from_slice(&json).map_err(|e| not_cells(format!("table: {e}")))?;
        let table = CellTable::from_repr(&repr).map_err(|e| not_cells(format!("table: {e}")))?;
        let (regions, words) = regions(&table, described);
        let has = segment.words().len();
        if words > has {
            return Err(not_cells(format!(
                "the cells need {words} words, the segment has {has}"
            )));
        }
        Ok(Cells {
            inner: Arc::new(Inner {
                table,
                notice: SHARED_NOTICE,
                regions,
                memory: Memory::Shared(segment),
            }),
        })
    }

    /// [`open_shared`](Self::open_shared), then
    /// [`check_table`](Self::check_table) against `expected`.
    pub fn open_shared_matching(name: &str, expected: &CellTable) -> Result<Cells, CellError> {
        let cells = Cells::open_shared(name)?;
        cells.check_table(expected)?;
        Ok(cells)
    }

    /// Checks that every cell of `expected` is in this storage's table with
    /// the same elements, in the same order, of the same shapes; the error
    /// names the first cell that differs and how. (Cells of this table that
    /// `expected` does not declare are allowed.)
    pub fn check_table(&self, expected: &CellTable) -> Result<(), CellError> {
        for cell in &expected.cells {
            if let Some(detail) = expected.difference(&cell.name, &self.inner.table) {
                return Err(CellError::TableMismatch {
                    shared: self.shared_name().unwrap_or("in-process").to_owned(),
                    cell: cell.name.clone(),
                    detail,
                });
            }
        }
        Ok(())
    }

    /// The table.
    pub fn table(&self) -> &CellTable {
        &self.inner.table
    }

    /// The name of the shared memory, if shared.
    pub fn shared_name(&self) -> Option<&str> {
        self.segment().map(Segment::name)
    }

    /// The shared memory segment, if shared (its path, owner, what its
    /// creation reclaimed).
    pub fn segment(&self) -> Option<&Segment> {
        match &self.inner.memory {
            Memory::Owned(_) => None,
            Memory::Shared(segment) => Some(segment),
        }
    }

    /// The number of cells.
    pub fn len(&self) -> usize {
        self.inner.table.cells.len()
    }

    /// Whether the table has no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the cell named `name`.
    pub fn cell_index(&self, name: &str) -> Result<usize, CellError> {
        self.inner.table.cell_index(name)
    }

    /// Payload bytes of cell `cell`.
    pub fn cell_bytes(&self, cell: usize) -> usize {
        self.inner.table.cells[cell].bytes
    }

    /// A zeroed buffer the size of cell `cell` (allocates: make it before the
    /// frame loop).
    pub fn new_buffer(&self, cell: usize) -> Vec<u8> {
        vec![0; self.cell_bytes(cell)]
    }

    /// The notice's words: its counter (2 per publication, plus the listening bit)
    /// and the stamp of the last publication.
    fn notice_words(&self) -> (&AtomicU64, &AtomicU64) {
        let w = &self.inner.memory.words()[self.inner.notice..self.inner.notice + NOTICE_WORDS];
        (&w[0], &w[1])
    }

    /// Tells a forwarder (the link of a run across hosts) that subsystems published
    /// output cells: called once at the end of a frame and on each early flush. It
    /// costs one relaxed load when nobody listens; else a clock read, a store, an
    /// atomic add and a futex wake. Never allocates, never blocks.
    #[inline]
    pub(crate) fn notify_published(&self) {
        let (count, stamp) = self.notice_words();
        // Relaxed: only tells whether anyone listens (set once, before the epoch).
        if count.load(Ordering::Relaxed) & NOTICE_LISTENED == 0 {
            return;
        }
        // Relaxed: read with the counter, whose Release add below publishes it.
        stamp.store(ictus_os::clock::monotonic_now().as_u64(), Ordering::Relaxed);
        // Release: the cells written before are visible to whoever sees the count.
        count.fetch_add(2, Ordering::Release);
        ictus_os::handoff::futex_wake_shared_u64(count, 1);
    }

    /// Starts listening to publications (a subsystem's frame end or early flush):
    /// from now on, each one bumps [`notice`](Self::notice) and wakes
    /// [`wait_notice`](Self::wait_notice).
    pub fn listen(&self) {
        // Relaxed: a flag the writers poll; a publication that misses it is found by
        // the listener's next scan.
        self.notice_words()
            .0
            .fetch_or(NOTICE_LISTENED, Ordering::Relaxed);
    }

    /// The publications so far (a counter that moves by 2 per publication) and when
    /// the last was made (the monotonic clock of its writer).
    pub fn notice(&self) -> (u64, Nanos) {
        let (count, stamp) = self.notice_words();
        // Acquire: pairs with the Release add of `notify_published`.
        let c = count.load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire load above.
        (c, Nanos::new(stamp.load(Ordering::Relaxed)))
    }

    /// Sleeps until the counter differs from `seen` (a publication), at most `timeout`.
    pub fn wait_notice(&self, seen: u64, timeout: std::time::Duration) {
        ictus_os::handoff::futex_wait_shared_u64(self.notice_words().0, seen, Some(timeout));
    }

    /// The seqlock of cell `cell`.
    #[inline]
    fn lock(&self, cell: usize) -> SeqlockView<'_> {
        let region = self.inner.regions[cell].clone();
        SeqlockView::new(
            &self.inner.memory.words()[region],
            self.inner.table.cells[cell].bytes,
        )
    }

    /// Copies a coherent snapshot of cell `cell` into `buf` and returns its
    /// sequence number (twice the writes so far). Spins while a write is under
    /// way; never allocates.
    ///
    /// # Panics
    ///
    /// If `buf` is not exactly the cell's size.
    #[inline]
    pub fn read_cell(&self, cell: usize, buf: &mut [u8]) -> u64 {
        self.lock(cell).read(buf)
    }

    /// One attempt at [`read_cell`](Self::read_cell): `None` while a write is
    /// under way (or a writer died during one; see
    /// [`recover_cell`](Self::recover_cell)).
    #[inline]
    pub fn try_read_cell(&self, cell: usize, buf: &mut [u8]) -> Option<u64> {
        self.lock(cell).try_read(buf)
    }

    /// Publishes `buf` as the whole of cell `cell`, in one write. Never
    /// allocates.
    ///
    /// # Panics
    ///
    /// If `buf` is not exactly the cell's size.
    #[inline]
    pub fn write_cell(&self, cell: usize, buf: &[u8]) {
        self.lock(cell).write(buf);
    }

    /// Publishes `bytes` as the bytes `offset..` of cell `cell`, keeping the
    /// others, in one write: for writers that own only some elements of a cell.
    ///
    /// # Panics
    ///
    /// If the range passes the end of the cell.
    #[inline]
    pub(crate) fn write_cell_range(&self, cell: usize, offset: usize, bytes: &[u8]) {
        self.lock(cell).write_at(offset, bytes);
    }

    /// One attempt at [`write_cell`](Self::write_cell): `false` (nothing written)
    /// while another write holds the cell.
    #[inline]
    pub fn try_write_cell(&self, cell: usize, buf: &[u8]) -> bool {
        assert_eq!(
            buf.len(),
            self.cell_bytes(cell),
            "a write covers the whole cell"
        );
        self.lock(cell).try_write_at(0, buf)
    }

    /// One attempt at [`write_cell_range`](Self::write_cell_range): `false`
    /// (nothing written) while another write holds the cell.
    #[inline]
    pub(crate) fn try_write_cell_range(&self, cell: usize, offset: usize, bytes: &[u8]) -> bool {
        self.lock(cell).try_write_at(offset, bytes)
    }

    /// Claims cell `cell` for a write and never publishes it, as a writer that is
    /// stopped half way does: fault injection for tests of readers and of the
    /// coordinator. `false` when another write held it.
    #[doc(hidden)]
    pub fn abandon_write(&self, cell: usize) -> bool {
        self.lock(cell).abandon_write()
    }

    /// The sequence number of cell `cell` now (odd while a write is under way).
    pub fn sequence(&self, cell: usize) -> u64 {
        self.lock(cell).sequence()
    }

    /// Reopens cell `cell` after its writer died during a write (see
    /// [`SeqlockView::recover`]); whether it was stuck.
    pub fn recover_cell(&self, cell: usize) -> bool {
        self.lock(cell).recover()
    }

    /// Where the element `cell.element` is.
    pub fn locate(&self, path: &str) -> Result<ElementLocation, CellError> {
        self.inner.table.locate(path)
    }

    /// A handle that reads and writes the element `cell.element` as a `T`,
    /// checked against the table. Allocates its scratch buffer here, never
    /// afterwards.
    pub fn element<T: Element>(&self, path: &str) -> Result<ElementRef<T>, CellError> {
        let slot = self.inner.table.slot::<T>(path)?;
        Ok(ElementRef {
            cells: self.clone(),
            slot,
            scratch: vec![0; T::SIZE].into_boxed_slice(),
        })
    }
}

impl fmt::Debug for Cells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cells")
            .field("cells", &self.len())
            .field("shared", &self.shared_name())
            .finish()
    }
}

/// Reads and writes one element of [`Cells`] directly, each access one seqlock
/// operation on just the element's bytes. For the executive's whole-cell
/// transfer use [`Cells::read_cell`] with [`ElementSlot`]s instead.
pub struct ElementRef<T> {
    cells: Cells,
    slot: ElementSlot<T>,
    scratch: Box<[u8]>,
}

impl<T: Element> ElementRef<T> {
    /// A coherent value of the element; never allocates.
    #[inline]
    pub fn read(&mut self) -> T {
        self.read_with_sequence().0
    }

    /// A coherent value and the sequence number of its cell at that moment.
    #[inline]
    pub fn read_with_sequence(&mut self) -> (T, u64) {
        let seq = self
            .cells
            .lock(self.slot.cell)
            .read_at(self.slot.offset, &mut self.scratch);
        (T::decode(&self.scratch), seq)
    }

    /// Publishes `value` as one write of the cell (the other elements are
    /// kept); never allocates.
    #[inline]
    pub fn write(&mut self, value: &T) {
        value.encode(&mut self.scratch);
        self.cells
            .lock(self.slot.cell)
            .write_at(self.slot.offset, &self.scratch);
    }

    /// The element's slot (cell index and offset).
    pub fn slot(&self) -> ElementSlot<T> {
        self.slot
    }

    /// The cells it belongs to.
    pub fn cells(&self) -> &Cells {
        &self.cells
    }
}

impl<T: Element> fmt::Debug for ElementRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElementRef")
            .field("slot", &self.slot)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::ElemType;
    use crate::cell::test_util::{dynamics, unique};
    use ictus_os::shm::ShmError;

    #[test]
    fn a_publication_is_noticed_only_once_someone_listens_and_wakes_the_listener() {
        let cells = Cells::in_process(&dynamics());
        cells.notify_published();
        assert_eq!(
            cells.notice(),
            (0, Nanos::ZERO),
            "nobody listens: nothing changes"
        );
        cells.listen();
        let (seen, _) = cells.notice();
        let waiter = {
            let cells = cells.clone();
            std::thread::spawn(move || {
                // Bounded: a wake-up that never comes fails the test, not hangs it.
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while cells.notice().0 == seen && std::time::Instant::now() < until {
                    cells.wait_notice(seen, std::time::Duration::from_millis(100));
                }
                cells.notice()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        cells.notify_published();
        let (count, stamp) = waiter.join().unwrap();
        assert_eq!(count, seen + 2);
        assert!(stamp > Nanos::ZERO);
        // A shared table keeps its notice in the segment, for every process.
        let name = format!("ictus-test-notice-{}", std::process::id());
        let shared = Cells::create_shared(&dynamics(), &name).unwrap();
        let other = Cells::open_shared(&name).unwrap();
        other.listen();
        shared.notify_published();
        assert_eq!(other.notice().0, 3, "the listening bit and one publication");
    }

    #[test]
    fn element_handles_read_what_they_wrote_and_keep_the_other_elements() {
        let sut = Cells::in_process(&dynamics());
        let mut velocity = sut.element::<[f32; 64]>("dynamics.velocity").unwrap();
        let mut gear = sut.element::<i32>("dynamics.gear").unwrap();
        let v: [f32; 64] = std::array::from_fn(|i| i as f32 * 0.5);
        velocity.write(&v);
        gear.write(&-4);
        assert_eq!(velocity.read(), v);
        let (g, seq) = gear.read_with_sequence();
        assert_eq!((g, seq), (-4, 4));
        let cell = sut.cell_index("dynamics").unwrap();
        let mut buf = sut.new_buffer(cell);
        assert_eq!(sut.read_cell(cell, &mut buf), 4);
        assert_eq!(
            sut.table().slot::<i32>("dynamics.gear").unwrap().get(&buf),
            -4
        );
        assert_eq!(sut.sequence(cell), 4);
    }

    #[test]
    fn a_partial_cell_write_keeps_the_other_bytes() {
        let sut = Cells::in_process(&dynamics());
        let engine = sut.cell_index("engine").unwrap();
        let on = sut.table().slot::<bool>("engine.on").unwrap();
        let rpm = sut.table().slot::<f64>("engine.rpm").unwrap();
        let mut buf = sut.new_buffer(engine);
        rpm.set(&mut buf, &900.0);
        sut.write_cell(engine, &buf);
        sut.write_cell_range(engine, on.offset(), &[1]);
        let mut out = sut.new_buffer(engine);
        assert_eq!(sut.read_cell(engine, &mut out), 4);
        assert_eq!((rpm.get(&out), on.get(&out)), (900.0, true));
        assert_eq!(sut.try_read_cell(engine, &mut out), Some(4));
        assert!(!sut.recover_cell(engine));
    }

    #[test]
    fn cells_do_not_share_cache_lines() {
        let (regions, total) = regions(&dynamics(), 3);
        assert_eq!(regions[0].start, 16);
        assert_eq!(regions[0].len(), 1 + 260usize.div_ceil(8));
        assert_eq!(regions[1].start % 16, 0);
        assert!(regions[1].start >= regions[0].end);
        assert_eq!(total % 16, 0);
    }

    #[test]
    fn shared_cells_are_seen_by_a_second_mapping() {
        let name = unique("share");
        let table = dynamics();
        let owner = Cells::create_shared(&table, &name).unwrap();
        let other = Cells::open_shared(&name).unwrap();
        assert_eq!(other.table(), &table);
        assert_eq!(other.shared_name(), Some(name.as_str()));
        let mut w = owner.element::<[f32; 64]>("dynamics.velocity").unwrap();
        let mut r = other.element::<[f32; 64]>("dynamics.velocity").unwrap();
        w.write(&[2.5; 64]);
        assert_eq!(r.read_with_sequence(), ([2.5; 64], 2));
        let mut back = other.element::<bool>("engine.on").unwrap();
        back.write(&true);
        assert!(owner.element::<bool>("engine.on").unwrap().read());
        assert!(Cells::open_shared_matching(&name, &table).is_ok());
        let path = owner.segment().unwrap().path();
        drop(other);
        drop((w, r, back));
        drop(owner);
        assert!(!std::path::Path::new(&path).exists());
    }

    #[test]
    fn a_declaration_that_differs_from_the_shared_table_names_the_cell() {
        let name = unique("mismatch");
        let _owner = Cells::create_shared(&dynamics(), &name).unwrap();
        let mine = CellTable::builder()
            .cell("engine")
            .element("rpm", ElemType::F32, 1)
            .element("on", ElemType::Bool, 1)
            .build()
            .unwrap();
        let err = Cells::open_shared_matching(&name, &mine).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cell `engine` differs from the shared table `{name}`: element `rpm` is `f32` \
                 here and `f64` in the shared table"
            )
        );
        let missing = CellTable::builder()
            .cell("brakes")
            .element("p", ElemType::F32, 1)
            .build()
            .unwrap();
        let err = Cells::open_shared_matching(&name, &missing).unwrap_err();
        assert!(err.to_string().contains("cell `brakes`"), "{err}");
        assert!(err.to_string().contains("not in the shared table"), "{err}");
    }

    #[test]
    fn shared_cells_of_a_live_owner_are_not_created_twice() {
        let name = unique("twice");
        let _owner = Cells::create_shared(&dynamics(), &name).unwrap();
        let err = Cells::create_shared(&dynamics(), &name).unwrap_err();
        assert!(matches!(
            err,
            CellError::Shm(ShmError::OwnerAlive { pid, .. }) if pid == std::process::id()
        ));
    }

    #[test]
    fn opening_cells_nobody_owns_fails() {
        let err = Cells::open_shared(&unique("nobody")).unwrap_err();
        assert!(matches!(err, CellError::Shm(ShmError::NotFound { .. })));
    }
}
