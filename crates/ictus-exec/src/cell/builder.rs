//! [`CellTableBuilder`]: a cell table made in code, from calls or from what
//! subsystems register.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::table::{Layout, TableRepr, check_name, split_path};
use super::{CellError, CellTable, ElemShape, ElemType, Element};

impl CellTable {
    /// A builder for a table made in code.
    pub fn builder() -> CellTableBuilder {
        CellTableBuilder::default()
    }

    /// The table stored in shared memory, read back through the builder: checked
    /// like any other.
    pub(super) fn from_repr(repr: &TableRepr) -> Result<CellTable, CellError> {
        let mut builder = CellTable::builder();
        for c in &repr.cells {
            builder.cell(&c.name);
            for e in &c.elements {
                builder.element(&e.name, e.shape.ty, e.shape.len);
            }
        }
        builder.build()
    }
}

/// Builds a [`CellTable`] in code. Calls chain; the first mistake is
/// reported by [`build`](Self::build).
///
/// ```
/// use ictus_exec::cell::{CellTable, ElemShape, ElemType};
/// let mut b = CellTable::builder();
/// b.cell("engine").element_of::<f32>("rpm");
/// // From registrations: idempotent for the same shape, an error for another.
/// b.declare("dynamics.gear", ElemShape::scalar(ElemType::I32)).unwrap();
/// b.declare("dynamics.gear", ElemShape::scalar(ElemType::I32)).unwrap();
/// assert!(b.declare("dynamics.gear", ElemShape::scalar(ElemType::I64)).is_err());
/// let table = b.build().unwrap();
/// assert_eq!(table.cells().len(), 2);
/// assert_eq!(table.cell("engine").unwrap().bytes(), 4);
/// ```
#[derive(Clone, Debug, Default)]
pub struct CellTableBuilder {
    cells: Vec<(String, Vec<(String, ElemShape)>)>,
    /// Cell name to its first index in `cells` (for `declare`).
    by_name: HashMap<String, usize>,
    /// `cell.element` to its first index in its cell's elements (for `declare`).
    by_path: HashMap<String, usize>,
    /// The first mistake of a chained call.
    first_error: Option<CellErrorRepr>,
}

/// A cloneable record of a builder mistake (CellError holds an io error in
/// one variant and is not Clone).
#[derive(Clone, Debug)]
enum CellErrorRepr {
    DuplicateCell(String),
    ElementOutsideCell(String),
}

impl CellTableBuilder {
    /// Starts the cell `name`; the elements that follow go into it.
    pub fn cell(&mut self, name: &str) -> &mut Self {
        match self.by_name.entry(name.to_owned()) {
            Entry::Occupied(_) => self.fail(CellErrorRepr::DuplicateCell(name.to_owned())),
            Entry::Vacant(v) => {
                v.insert(self.cells.len());
            }
        }
        self.cells.push((name.to_owned(), Vec::new()));
        self
    }

    /// Adds the element `name` of `len` values of `ty` to the current cell.
    pub fn element(&mut self, name: &str, ty: ElemType, len: usize) -> &mut Self {
        match self.cells.last_mut() {
            Some((cell, elements)) => {
                self.by_path
                    .entry(format!("{cell}.{name}"))
                    .or_insert(elements.len());
                elements.push((name.to_owned(), ElemShape::array(ty, len)));
            }
            None => self.fail(CellErrorRepr::ElementOutsideCell(name.to_owned())),
        }
        self
    }

    /// Adds the element `name` holding a `T` to the current cell.
    pub fn element_of<T: Element>(&mut self, name: &str) -> &mut Self {
        self.element(name, T::TYPE, T::LEN)
    }

    /// Declares the element `cell.element` of `shape`, creating the cell if
    /// needed (at the end). Declaring an element again with the same shape is
    /// fine (an input and an output of the same element); with another shape
    /// it is a [`CellError::TypeMismatch`].
    pub fn declare(&mut self, path: &str, shape: ElemShape) -> Result<&mut Self, CellError> {
        let (cell, element) = split_path(path)?;
        check_name(cell)?;
        check_name(element)?;
        let index = match self.by_name.get(cell) {
            Some(&i) => i,
            None => {
                self.by_name.insert(cell.to_owned(), self.cells.len());
                self.cells.push((cell.to_owned(), Vec::new()));
                self.cells.len() - 1
            }
        };
        let elements = &mut self.cells[index].1;
        match self.by_path.get(path).and_then(|&i| elements.get(i)) {
            Some((_, declared)) if *declared != shape => Err(CellError::TypeMismatch {
                path: path.to_owned(),
                declared: *declared,
                requested: shape,
            }),
            Some(_) => Ok(self),
            None => {
                self.by_path.insert(path.to_owned(), elements.len());
                elements.push((element.to_owned(), shape));
                Ok(self)
            }
        }
    }

    /// Checks everything and lays the cells out.
    pub fn build(&self) -> Result<CellTable, CellError> {
        if let Some(first) = &self.first_error {
            return Err(match first {
                CellErrorRepr::DuplicateCell(name) => {
                    CellError::DuplicateCell { name: name.clone() }
                }
                CellErrorRepr::ElementOutsideCell(element) => CellError::ElementOutsideCell {
                    element: element.clone(),
                },
            });
        }
        let mut layout = Layout::default();
        for (name, elements) in &self.cells {
            layout.cell(name)?;
            for (element, shape) in elements {
                layout.element(element, *shape)?;
            }
            layout.end_cell()?;
        }
        Ok(layout.finish())
    }

    fn fail(&mut self, e: CellErrorRepr) {
        if self.first_error.is_none() {
            self.first_error = Some(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{MAX_ARRAY_LEN, MAX_CELL_BYTES};

    #[test]
    fn the_builder_reports_the_first_mistake() {
        let dup = CellTable::builder()
            .cell("a")
            .element("x", ElemType::U8, 1)
            .cell("a")
            .element("y", ElemType::U8, 1)
            .build();
        assert!(matches!(dup, Err(CellError::DuplicateCell { .. })));
        let zero = CellTable::builder()
            .cell("a")
            .element("x", ElemType::U8, 0)
            .build();
        assert!(matches!(zero, Err(CellError::BadLength { len: 0, .. })));
        let empty = CellTable::builder().cell("a").build();
        assert!(matches!(empty, Err(CellError::EmptyCell { .. })));
        let outside = CellTable::builder().element("x", ElemType::U8, 1).build();
        assert!(matches!(outside, Err(CellError::ElementOutsideCell { .. })));
        let bad = CellTable::builder()
            .cell("a.b")
            .element("x", ElemType::U8, 1)
            .build();
        assert!(matches!(bad, Err(CellError::BadName { .. })));
        let twice = CellTable::builder()
            .cell("a")
            .element("x", ElemType::U8, 1)
            .element("x", ElemType::U8, 1)
            .build();
        assert!(matches!(twice, Err(CellError::DuplicateElement { .. })));
        let huge = CellTable::builder()
            .cell("a")
            .element("x", ElemType::U64, 1 << 22)
            .build();
        assert!(matches!(
            huge,
            Err(CellError::TooLarge {
                limit: MAX_CELL_BYTES,
                ..
            })
        ));
        let long = CellTable::builder()
            .cell("a")
            .element("x", ElemType::U8, MAX_ARRAY_LEN + 1)
            .build();
        assert!(matches!(long, Err(CellError::LengthTooLarge { .. })));
    }
}
