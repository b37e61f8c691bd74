//! The cells as a run left them ([`CellValues`]), read back by element name.

use super::element::{ElemShape, Element};
use super::error::CellError;
use super::storage::Cells;
use super::table::CellTable;

/// The cells as a run left them, read back by element name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellValues {
    table: CellTable,
    /// Each cell's bytes (`None`: its writer died in the middle of a write).
    bytes: Vec<Option<Vec<u8>>>,
}

impl CellValues {
    /// A coherent copy of every cell of `cells` (a cell whose writer died half way
    /// through a write is left out, after a few tries).
    pub fn read(cells: &Cells) -> CellValues {
        let bytes = (0..cells.len())
            .map(|k| {
                let mut buf = vec![0u8; cells.cell_bytes(k)];
                (0..1000)
                    .find_map(|_| cells.try_read_cell(k, &mut buf))
                    .map(|_| buf)
            })
            .collect();
        CellValues {
            table: cells.table().clone(),
            bytes,
        }
    }

    /// The value of element `cell.element`, checked to hold a `T`.
    pub fn get<T: Element>(&self, element: &str) -> Result<T, CellError> {
        let at = self.table.locate_as(element, ElemShape::of::<T>())?;
        let bytes = self.bytes[at.cell]
            .as_deref()
            .ok_or_else(|| CellError::Torn {
                cell: self.table.cells()[at.cell].name().to_string(),
            })?;
        Ok(T::decode(&bytes[at.range()]))
    }

    /// The cell table.
    pub fn table(&self) -> &CellTable {
        &self.table
    }
}
