//! The data plane of the executive allocates nothing once prepared: whole-cell
//! reads and writes, element slots and handles, in process and in shared memory,
//! and every hub operation. A counting global allocator watches them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use ictus_exec::cell::{CellTable, Cells, ElemType};
use ictus_exec::hub::{HubDecl, Hubs};

/// Counts allocations of the thread that set `WATCHING`.
struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (the test harness's own threads
    /// allocate at any time and are never watched).
    static WATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

// SAFETY: every call is forwarded unchanged to the system allocator, which upholds
// the GlobalAlloc contract; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a plain event counter, read after the watched section.
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout, as the caller's contract requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout (see `alloc`).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: see `alloc`.
        if WATCHING.with(|w| w.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: `ptr` came from `System` with `layout`, as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with the counter on; returns the allocations it made.
fn allocations_of(f: impl FnOnce()) -> u64 {
    // Relaxed (both): only this thread counts while watching.
    ALLOCATIONS.store(0, Ordering::Relaxed);
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    ALLOCATIONS.load(Ordering::Relaxed)
}

fn table() -> CellTable {
    CellTable::builder()
        .cell("dynamics")
        .element("velocity", ElemType::F32, 64)
        .element("gear", ElemType::I32, 1)
        .element("name", ElemType::Char, 8)
        .build()
        .unwrap()
}

/// The transfers of one frame, many times over.
fn frames(cells: &Cells) -> u64 {
    let table = cells.table().clone();
    let cell = cells.cell_index("dynamics").unwrap();
    let velocity = table.slot::<[f32; 64]>("dynamics.velocity").unwrap();
    let gear = table.slot::<i32>("dynamics.gear").unwrap();
    let mut input = cells.new_buffer(cell);
    let mut output = cells.new_buffer(cell);
    let mut name = cells.element::<[char; 8]>("dynamics.name").unwrap();
    allocations_of(|| {
        for i in 0..1_000 {
            cells.read_cell(cell, &mut input);
            let mut v = velocity.get(&input);
            v[0] += 1.0;
            velocity.set(&mut output, &v);
            gear.set(&mut output, &(i % 6));
            cells.write_cell(cell, &output);
            cells.write_cell_range(cell, gear.offset(), &output[gear.range()]);
            assert!(cells.try_read_cell(cell, &mut input).is_some());
            name.write(&['g'; 8]);
            assert_eq!(name.read(), ['g'; 8]);
        }
    })
}

#[test]
fn cell_transfers_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap();
    assert_eq!(frames(&Cells::in_process(&table())), 0);
    let shared = Cells::create_shared(
        &table(),
        &format!("test-noalloc-cells-{}", std::process::id()),
    )
    .unwrap();
    assert_eq!(frames(&shared), 0);
}

#[test]
fn hub_operations_allocate_nothing() {
    let _serial = SERIAL.lock().unwrap();
    let hubs = Hubs::create_shared(
        &[
            HubDecl::semaphore("sem", 0),
            HubDecl::event("ev"),
            HubDecl::fifo::<[u16; 4]>("fifo", 8),
            HubDecl::port::<u64>("port"),
            HubDecl::resource("res"),
        ],
        &format!("test-noalloc-hubs-{}", std::process::id()),
    )
    .unwrap();
    let sem = hubs.semaphore("sem").unwrap();
    let ev = hubs.event("ev").unwrap();
    let mut tx = hubs.fifo_sender::<[u16; 4]>("fifo").unwrap();
    let mut rx = hubs.fifo_receiver::<[u16; 4]>("fifo").unwrap();
    let res = hubs.resource("res").unwrap();
    let mut port = hubs.port::<u64>("port").unwrap();
    let peer = {
        // Spawned (and allocating) before the watch; its thread is not watched.
        let hubs = hubs.clone();
        std::thread::spawn(move || {
            let mut port = hubs.port::<u64>("port").unwrap();
            (0..100).map(|_| port.receive()).sum::<u64>()
        })
    };
    let n = allocations_of(|| {
        for i in 0..100u16 {
            assert!(sem.give());
            assert!(sem.try_take());
            ev.raise();
            assert!(ev.try_wait());
            tx.try_send([i; 4]).unwrap();
            assert_eq!(rx.try_recv(), Some([i; 4]));
            drop(res.lock().unwrap());
            port.send(&u64::from(i));
        }
    });
    assert_eq!(n, 0);
    assert_eq!(peer.join().unwrap(), (0..100u64).sum::<u64>());
}
