//! The data plane of the executive allocates nothing once prepared: whole-cell
//! reads and writes, element slots and handles, in process and in shared memory,
//! and every hub operation. A counting global allocator watches them.

use ictus_core::alloc_count::{self, Counting};

use ictus_exec::cell::{CellTable, Cells, ElemType};
use ictus_exec::hub::{HubDecl, Hubs};

/// Counts what watched code allocates (see `ictus_core::alloc_count`).
#[global_allocator]
static GLOBAL: Counting = Counting;

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
    // Another host's writes: this host writes none of the cell here.
    let door = ictus_exec::cell::ForeignWrites::new(cells, &[]);
    alloc_count::allocations_of(|| {
        for i in 0..1_000 {
            cells.read_cell(cell, &mut input);
            let mut v = velocity.get(&input);
            v[0] += 1.0;
            velocity.set(&mut output, &v);
            gear.set(&mut output, &(i % 6));
            cells.write_cell(cell, &output);
            assert!(door.write(cell, gear.offset(), &output[gear.range()]));
            assert!(cells.try_read_cell(cell, &mut input).is_some());
            name.write(&['g'; 8]);
            assert_eq!(name.read(), ['g'; 8]);
        }
    })
}

#[test]
fn cell_transfers_allocate_nothing() {
    let _turn = alloc_count::one_at_a_time();
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
    let _turn = alloc_count::one_at_a_time();
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
            (0..100).map(|_| port.receive().unwrap()).sum::<u64>()
        })
    };
    let n = alloc_count::allocations_of(|| {
        for i in 0..100u16 {
            assert!(sem.give());
            assert!(sem.try_take());
            ev.raise();
            assert!(ev.try_wait());
            tx.try_send([i; 4]).unwrap();
            assert_eq!(rx.try_recv(), Some([i; 4]));
            drop(res.lock().unwrap());
            port.send(&u64::from(i)).unwrap();
        }
    });
    assert_eq!(n, 0);
    assert_eq!(peer.join().unwrap(), (0..100u64).sum::<u64>());
}

/// On a proxy (a hub homed on another host) the real-time side only changes
/// words and rings the relay's doorbell: nothing allocates either.
#[test]
fn proxy_hub_operations_allocate_nothing() {
    let _turn = alloc_count::one_at_a_time();
    let hosts = ["h1".to_owned(), "h2".to_owned()];
    let hubs = Hubs::in_process_at(
        &[
            HubDecl::semaphore("sem", 0).at("h2"),
            HubDecl::event("ev").at("h2"),
            HubDecl::fifo::<u64>("fifo", 128).at("h2"),
        ],
        &hosts,
        0,
    )
    .unwrap();
    let sem = hubs.semaphore("sem").unwrap();
    let ev = hubs.event("ev").unwrap();
    let mut tx = hubs.fifo_sender::<u64>("fifo").unwrap();
    let n = alloc_count::allocations_of(|| {
        for i in 0..100u64 {
            assert!(sem.give());
            assert!(!sem.try_take(), "no token granted here");
            ev.raise();
            tx.try_send(i).unwrap();
        }
    });
    assert_eq!(n, 0);
}
