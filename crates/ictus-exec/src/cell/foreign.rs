//! The one door through which another host's publications reach this host's cells
//! ([`ForeignWrites`]): the executive, which knows this host's claims, keeps the
//! rule that a host never overwrites what this host's subsystems write, and that no
//! write passes the cell, whatever link carries the bytes.

use std::ops::Range;

use super::storage::Cells;

/// Writes into this host's cells on another host's behalf, never over this host's
/// own elements (its subsystems' claims) nor past a cell. A link (ictus-net's) takes
/// one at [`ready`](crate::link::Link::ready) time: [`Cells`] has no other public
/// way to write part of a cell.
#[derive(Clone)]
pub struct ForeignWrites {
    cells: Cells,
    /// Per cell, the byte ranges this host's subsystems write.
    ours: Vec<Vec<Range<usize>>>,
}

impl std::fmt::Debug for ForeignWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForeignWrites")
            .field("ours", &self.ours)
            .finish_non_exhaustive()
    }
}

impl ForeignWrites {
    /// The door into `cells`, given what this host writes (`ours`: cell index and
    /// the byte ranges of its subsystems' elements, as the link is told them).
    pub fn new(cells: &Cells, ours: &[(usize, Vec<Range<usize>>)]) -> ForeignWrites {
        let mut by_cell = vec![Vec::new(); cells.table().cells().len()];
        for (c, ranges) in ours {
            if let Some(slot) = by_cell.get_mut(*c) {
                slot.extend(ranges.iter().cloned());
            }
        }
        ForeignWrites {
            cells: cells.clone(),
            ours: by_cell,
        }
    }

    /// Writes `bytes` at `offset` of cell `cell` for another host. Refused (`false`,
    /// nothing written) for a cell the table does not have, a range past the cell,
    /// or one that touches an element this host writes.
    pub fn write(&self, cell: usize, offset: usize, bytes: &[u8]) -> bool {
        let Some(ours) = self.ours.get(cell) else {
            return false;
        };
        let Some(end) = offset.checked_add(bytes.len()) else {
            return false;
        };
        if end > self.cells.cell_bytes(cell) || ours.iter().any(|r| r.start < end && offset < r.end)
        {
            return false;
        }
        self.cells.write_cell_range(cell, offset, bytes);
        true
    }

    /// The cells it writes into.
    pub fn cells(&self) -> &Cells {
        &self.cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellTable, ElemType};

    #[test]
    fn another_host_writes_only_outside_this_hosts_elements_and_inside_the_cell() {
        let table = CellTable::builder()
            .cell("A")
            .element("mine", ElemType::U8, 4)
            .element("theirs", ElemType::U8, 4)
            .build()
            .unwrap();
        let cells = Cells::in_process(&table);
        let mine: Vec<Range<usize>> = std::iter::once(0..4).collect();
        let sut = ForeignWrites::new(&cells, &[(0, mine)]);
        assert!(sut.write(0, 4, &[7; 4]));
        assert!(!sut.write(0, 2, &[9; 4]), "over this host's element");
        assert!(!sut.write(0, 6, &[9; 4]), "past the cell");
        assert!(!sut.write(0, usize::MAX, &[9; 2]), "overflow");
        assert!(!sut.write(1, 0, &[9]), "no such cell");
        let mut buf = cells.new_buffer(0);
        cells.read_cell(0, &mut buf);
        assert_eq!(buf, [0, 0, 0, 0, 7, 7, 7, 7]);
    }
}
