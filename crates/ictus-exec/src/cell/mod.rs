//! Communication cells (seed 003): the blackboard through which subsystems
//! talk without knowing each other.
//!
//! A **cell table** names cells, and in each cell typed **elements**: one of
//! the twelve [`ElemType`]s (`i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 bool
//! char`) and an array length (1 for a scalar). It is declared in TOML
//!
//! ```toml
//! [[cell]]
//! name = "dynamics"
//! elements = [ { name = "velocity", type = "f32", len = 64 }, { name = "gear", type = "i32" } ]
//! ```
//!
//! ([`CellTable::load`], with errors at file:line:column), or built in code
//! ([`CellTable::builder`]), for example from what subsystems register.
//!
//! **Limits.** A table is refused before anything is allocated for it when
//! it breaks one of these (the error names the limit, and in a file points
//! at the value that crosses it): a cell holds at most [`MAX_CELL_BYTES`]
//! (16 MiB) of payload and [`MAX_ELEMENTS_PER_CELL`] elements, an array at
//! most [`MAX_ARRAY_LEN`] values, a table at most [`MAX_CELLS`] cells and
//! [`MAX_ELEMENTS`] elements, and the storage of all its cells (each cell's
//! payload and sequence word, rounded up to 128 bytes) at most
//! [`MAX_TABLE_BYTES`] (256 MiB). Checking a table takes time linear in its
//! size; looking a cell or an element up by name is a hash lookup.
//! Elements are named `cell.element` (`dynamics.velocity`). A Rust type is an
//! [`Element`] when it is one of the scalar types or an array of one
//! (`[f32; 64]`); asking for an element checks the type and length against the
//! table and fails with the name, the declared type and the requested type
//! (the strong typing of seed 003).
//!
//! **Encoding.** Elements are packed in declaration order, without padding,
//! each value little-endian (`bool` as one byte, `char` as its `u32` code
//! point), so a cell's bytes are the same on every host and in every process.
//! Values are encoded and decoded, never cast, so alignment does not matter.
//! A `bool` byte other than 0 decodes as `true`; a `char` code that is not a
//! Unicode scalar value (a surrogate, or above `0x10FFFF`) decodes as
//! `U+FFFD` (REPLACEMENT CHARACTER): decoding never fails, as a frame must
//! not.
//!
//! **Storage.** [`Cells`] holds every cell as one seqlock region
//! ([`ictus_core::sync::seqlock`]): a sequence number and the payload rounded
//! up to 8 bytes, each region starting on its own 128 bytes. It lives in
//! process memory ([`Cells::in_process`]) or in POSIX shared memory
//! ([`Cells::create_shared`], [`Cells::open_shared`]), where the table itself
//! is stored in the segment (as JSON) so that an opener reads it, and can
//! check it against its own declaration.
//!
//! **Frame-coherent transfer.** The executive copies a whole cell at once:
//! [`Cells::read_cell`] copies a coherent snapshot into a buffer and returns
//! its sequence number; [`Cells::write_cell`] publishes a buffer as one write
//! (or some of its bytes, when several subsystems write different elements of
//! one cell; another host's bytes come in only through [`ForeignWrites`]). [`ElementSlot`] encodes and decodes
//! one element at its offset in such a buffer. No reader ever sees a torn
//! element, or elements of one cell from two different writes. Reads and
//! writes never allocate.
//!
//! ```
//! use ictus_exec::cell::{CellTable, Cells, ElemType};
//!
//! let table = CellTable::builder()
//!     .cell("dynamics")
//!     .element("velocity", ElemType::F32, 64)
//!     .element("gear", ElemType::I32, 1)
//!     .build()
//!     .unwrap();
//! let cells = Cells::in_process(&table);
//!
//! // A typed handle, checked against the table.
//! let mut gear = cells.element::<i32>("dynamics.gear").unwrap();
//! gear.write(&3);
//! assert_eq!(gear.read(), 3);
//!
//! // The wrong type is refused with both types named.
//! let err = cells.element::<[f64; 64]>("dynamics.velocity").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "element `dynamics.velocity` is declared `[f32; 64]` but was requested as `[f64; 64]`"
//! );
//!
//! // Whole-cell transfer, as the executive does it each frame.
//! let dynamics = cells.cell_index("dynamics").unwrap();
//! let velocity = table.slot::<[f32; 64]>("dynamics.velocity").unwrap();
//! let mut buf = cells.new_buffer(dynamics);
//! velocity.set(&mut buf, &[1.5; 64]);
//! cells.write_cell(dynamics, &buf);
//! let mut snapshot = cells.new_buffer(dynamics);
//! let seq = cells.read_cell(dynamics, &mut snapshot);
//! assert_eq!(seq, 4); // two writes: the gear, then the whole cell
//! assert_eq!(velocity.get(&snapshot), [1.5; 64]);
//! ```

mod builder;
mod element;
mod error;
mod file;
mod foreign;
mod storage;
mod table;
mod values;

pub use builder::CellTableBuilder;
pub use element::{ElemShape, ElemType, Element, ElementSlot, Scalar};
pub use error::CellError;
pub(crate) use file::content_problem;
pub use file::{CellFileError, CellSpec, ElementSpec};
pub use foreign::ForeignWrites;
pub use storage::{Cells, ElementRef};
pub use table::{
    CellDecl, CellTable, ElementLayout, ElementLocation, MAX_ARRAY_LEN, MAX_CELL_BYTES, MAX_CELLS,
    MAX_ELEMENTS, MAX_ELEMENTS_PER_CELL, MAX_TABLE_BYTES,
};
pub use values::CellValues;

/// Tables the unit tests of the submodules share.
#[cfg(test)]
mod test_util {
    use super::{CellTable, ElemType};

    pub(super) fn dynamics() -> CellTable {
        CellTable::builder()
            .cell("dynamics")
            .element("velocity", ElemType::F32, 64)
            .element("gear", ElemType::I32, 1)
            .cell("engine")
            .element("rpm", ElemType::F64, 1)
            .element("on", ElemType::Bool, 1)
            .build()
            .unwrap()
    }

    pub(super) fn unique(tag: &str) -> String {
        format!("test-cells-{tag}-{}", std::process::id())
    }

    /// The error's text for `text`.
    pub(super) fn toml_err(text: &str) -> String {
        CellTable::from_toml_str(text, "cells.toml")
            .unwrap_err()
            .to_string()
    }
}
