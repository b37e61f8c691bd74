//! The cell table model: [`CellTable`] with its [`CellDecl`]s and
//! [`ElementLayout`]s, the limits, the rules every table is checked against
//! ([`Layout`]), lookups by name, and the declaration form stored in shared
//! memory.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use ictus_core::sync::seqlock::region_words;
use serde::{Deserialize, Serialize};

use super::{CellError, ElemShape, Element, ElementSlot};

/// Checks a cell or element name.
pub(super) fn check_name(name: &str) -> Result<(), CellError> {
    let bad = |reason| {
        Err(CellError::BadName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return bad("only ASCII letters, digits, `_` and `-` are allowed");
    }
    Ok(())
}

/// Splits `cell.element`.
pub(super) fn split_path(path: &str) -> Result<(&str, &str), CellError> {
    path.split_once('.')
        .filter(|(c, e)| !c.is_empty() && !e.is_empty())
        .ok_or_else(|| CellError::BadPath {
            path: path.to_owned(),
        })
}

/// The bytes cell `payload` bytes take in storage: its seqlock region rounded
/// up to the region alignment. The limits count storage this way; [`super::Cells`]
/// lays it out.
pub(super) fn storage_bytes(payload: usize) -> usize {
    region_words(payload).next_multiple_of(REGION_ALIGN_WORDS) * 8
}

/// Words from one cell region to the next are a multiple of this (128 bytes),
/// so two cells never share a cache line pair.
pub(super) const REGION_ALIGN_WORDS: usize = 16;

/// The largest payload of one cell: 16 MiB.
pub const MAX_CELL_BYTES: usize = 16 << 20;

/// The most storage all the cells of a table may take: 256 MiB (each cell's
/// payload and sequence word, rounded up to its 128-byte region).
pub const MAX_TABLE_BYTES: usize = 256 << 20;

/// The most cells in a table.
pub const MAX_CELLS: usize = 65_536;

/// The most elements in one cell.
pub const MAX_ELEMENTS_PER_CELL: usize = 4_096;

/// The most elements in a table, all cells together.
pub const MAX_ELEMENTS: usize = 262_144;

/// The longest array element (values, whatever their type).
pub const MAX_ARRAY_LEN: usize = 1 << 24;

/// Checks cells and elements one at a time against every rule of a table and
/// lays them out as they come: linear in the table's size, so that the
/// builder and the TOML reader share the rules and each mistake can be placed.
#[derive(Default)]
pub(super) struct Layout {
    cells: Vec<CellDecl>,
    by_name: HashMap<String, usize>,
    by_path: HashMap<String, (usize, usize)>,
    elements: usize,
    storage: usize,
}

impl Layout {
    /// Starts cell `name`; its elements follow.
    pub(super) fn cell(&mut self, name: &str) -> Result<(), CellError> {
        check_name(name)?;
        if self.cells.len() >= MAX_CELLS {
            return Err(CellError::TooManyCells { limit: MAX_CELLS });
        }
        match self.by_name.entry(name.to_owned()) {
            Entry::Occupied(_) => {
                return Err(CellError::DuplicateCell {
                    name: name.to_owned(),
                });
            }
            Entry::Vacant(v) => {
                v.insert(self.cells.len());
            }
        }
        self.cells.push(CellDecl {
            name: name.to_owned(),
            elements: Vec::new(),
            bytes: 0,
        });
        Ok(())
    }

    /// Adds element `name` of `shape` to the current cell.
    pub(super) fn element(&mut self, name: &str, shape: ElemShape) -> Result<(), CellError> {
        let index = self.cells.len().wrapping_sub(1);
        let Some(cell) = self.cells.get_mut(index) else {
            return Err(CellError::ElementOutsideCell {
                element: name.to_owned(),
            });
        };
        check_name(name)?;
        let path = format!("{}.{name}", cell.name);
        if shape.len == 0 {
            return Err(CellError::BadLength { path, len: 0 });
        }
        if shape.len > MAX_ARRAY_LEN {
            return Err(CellError::LengthTooLarge {
                path,
                len: shape.len as u64,
                limit: MAX_ARRAY_LEN,
            });
        }
        if cell.elements.len() >= MAX_ELEMENTS_PER_CELL {
            return Err(CellError::TooManyElementsInCell {
                name: cell.name.clone(),
                limit: MAX_ELEMENTS_PER_CELL,
            });
        }
        if self.elements >= MAX_ELEMENTS {
            return Err(CellError::TooManyElements {
                limit: MAX_ELEMENTS,
            });
        }
        let end = shape
            .bytes()
            .and_then(|b| b.checked_add(cell.bytes))
            .filter(|&end| end <= MAX_CELL_BYTES)
            .ok_or_else(|| CellError::TooLarge {
                name: cell.name.clone(),
                limit: MAX_CELL_BYTES,
            })?;
        match self.by_path.entry(path) {
            Entry::Occupied(_) => {
                return Err(CellError::DuplicateElement {
                    cell: cell.name.clone(),
                    element: name.to_owned(),
                });
            }
            Entry::Vacant(v) => {
                v.insert((index, cell.elements.len()));
            }
        }
        cell.elements.push(ElementLayout {
            name: name.to_owned(),
            shape,
            offset: cell.bytes,
        });
        cell.bytes = end;
        self.elements += 1;
        Ok(())
    }

    /// Ends the current cell: it has elements, and its storage fits.
    pub(super) fn end_cell(&mut self) -> Result<(), CellError> {
        let Some(cell) = self.cells.last() else {
            return Ok(());
        };
        if cell.elements.is_empty() {
            return Err(CellError::EmptyCell {
                name: cell.name.clone(),
            });
        }
        self.storage = self
            .storage
            .checked_add(storage_bytes(cell.bytes))
            .filter(|&total| total <= MAX_TABLE_BYTES)
            .ok_or_else(|| CellError::TableTooLarge {
                name: cell.name.clone(),
                limit: MAX_TABLE_BYTES,
            })?;
        Ok(())
    }

    pub(super) fn finish(self) -> CellTable {
        CellTable {
            cells: self.cells,
            by_name: self.by_name,
            by_path: self.by_path,
        }
    }
}

/// One element of a cell: its name, shape and byte offset in the cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementLayout {
    pub(super) name: String,
    pub(super) shape: ElemShape,
    pub(super) offset: usize,
}

impl ElementLayout {
    /// The element's name within its cell.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its type and length.
    pub fn shape(&self) -> ElemShape {
        self.shape
    }

    /// Its first byte in the cell.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Its bytes in the cell.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.shape.bytes().unwrap_or(0)
    }
}

/// One cell: its name, elements (in order) and payload size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellDecl {
    pub(super) name: String,
    pub(super) elements: Vec<ElementLayout>,
    pub(super) bytes: usize,
}

impl CellDecl {
    /// The cell's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its elements, in declaration (and byte) order.
    pub fn elements(&self) -> &[ElementLayout] {
        &self.elements
    }

    /// The element named `name`.
    pub fn element(&self, name: &str) -> Option<&ElementLayout> {
        self.elements.iter().find(|e| e.name == name)
    }

    /// Payload bytes (the elements packed, no padding).
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Where an element is: its cell's index, its offset in the cell, its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElementLocation {
    /// Index of the cell in the table.
    pub cell: usize,
    /// First byte in the cell.
    pub offset: usize,
    /// Declared type and length.
    pub shape: ElemShape,
}

impl ElementLocation {
    /// The element's bytes in its cell.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.shape.bytes().unwrap_or(0)
    }
}

/// The cells and their elements, checked: names valid and unique, lengths at
/// least 1, every cell with an element, sizes within the limits. Made by
/// [`CellTable::builder`] or [`CellTable::load`].
#[derive(Clone, Default)]
pub struct CellTable {
    pub(super) cells: Vec<CellDecl>,
    /// Cell name to index in `cells`.
    pub(super) by_name: HashMap<String, usize>,
    /// `cell.element` to cell index and element index.
    pub(super) by_path: HashMap<String, (usize, usize)>,
}

/// Two tables are equal when they declare the same cells (the name indices
/// follow from them).
impl PartialEq for CellTable {
    fn eq(&self, other: &Self) -> bool {
        self.cells == other.cells
    }
}

impl Eq for CellTable {}

impl fmt::Debug for CellTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CellTable")
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

/// The declaration form of a table: what TOML, JSON and the builder hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct TableRepr {
    pub(super) cells: Vec<CellRepr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct CellRepr {
    pub(super) name: String,
    pub(super) elements: Vec<ElementRepr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ElementRepr {
    pub(super) name: String,
    #[serde(flatten)]
    pub(super) shape: ElemShape,
}

impl CellTable {
    /// The cells, in declaration order (their indices are positions here).
    pub fn cells(&self) -> &[CellDecl] {
        &self.cells
    }

    /// The cell named `name` (a hash lookup).
    pub fn cell(&self, name: &str) -> Option<&CellDecl> {
        self.by_name.get(name).map(|&i| &self.cells[i])
    }

    /// The index of the cell named `name` (a hash lookup).
    pub fn cell_index(&self, name: &str) -> Result<usize, CellError> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| CellError::UnknownCell {
                name: name.to_owned(),
            })
    }

    /// Where the element `cell.element` is (a hash lookup).
    pub fn locate(&self, path: &str) -> Result<ElementLocation, CellError> {
        let (cell_name, element_name) = split_path(path)?;
        let Some(&(cell, element)) = self.by_path.get(path) else {
            self.cell_index(cell_name)?;
            return Err(CellError::UnknownElement {
                cell: cell_name.to_owned(),
                element: element_name.to_owned(),
            });
        };
        let element = &self.cells[cell].elements[element];
        Ok(ElementLocation {
            cell,
            offset: element.offset,
            shape: element.shape,
        })
    }

    /// Where the element `cell.element` is, checked to have the shape `shape`.
    pub fn locate_as(&self, path: &str, shape: ElemShape) -> Result<ElementLocation, CellError> {
        let location = self.locate(path)?;
        if location.shape != shape {
            return Err(CellError::TypeMismatch {
                path: path.to_owned(),
                declared: location.shape,
                requested: shape,
            });
        }
        Ok(location)
    }

    /// The typed slot of the element `cell.element`, checked to hold a `T`.
    pub fn slot<T: Element>(&self, path: &str) -> Result<ElementSlot<T>, CellError> {
        let location = self.locate_as(path, ElemShape::of::<T>())?;
        Ok(ElementSlot {
            cell: location.cell,
            offset: location.offset,
            _type: PhantomData,
        })
    }

    pub(super) fn repr(&self) -> TableRepr {
        TableRepr {
            cells: self
                .cells
                .iter()
                .map(|c| CellRepr {
                    name: c.name.clone(),
                    elements: c
                        .elements
                        .iter()
                        .map(|e| ElementRepr {
                            name: e.name.clone(),
                            shape: e.shape,
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Describes how cell `name` differs between `self` (here) and `shared`.
    pub(super) fn difference(&self, name: &str, shared: &CellTable) -> Option<String> {
        let mine = self.cell(name)?;
        let Some(theirs) = shared.cell(name) else {
            return Some("it is not in the shared table".into());
        };
        for (i, e) in mine.elements.iter().enumerate() {
            match theirs.elements.get(i) {
                None => {
                    return Some(format!(
                        "element `{}` (number {}) is missing from the shared table",
                        e.name,
                        i + 1
                    ));
                }
                Some(t) if t.name != e.name => {
                    return Some(format!(
                        "element number {} is `{}` here and `{}` in the shared table",
                        i + 1,
                        e.name,
                        t.name
                    ));
                }
                Some(t) if t.shape != e.shape => {
                    return Some(format!(
                        "element `{}` is `{}` here and `{}` in the shared table",
                        e.name, e.shape, t.shape
                    ));
                }
                Some(_) => {}
            }
        }
        theirs
            .elements
            .get(mine.elements.len())
            .map(|extra| format!("the shared table has the further element `{}`", extra.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::test_util::{dynamics, toml_err};
    use crate::cell::{Cells, ElemType};

    #[test]
    fn elements_are_packed_in_declaration_order() {
        let sut = dynamics();
        let d = sut.cell("dynamics").unwrap();
        assert_eq!(d.bytes(), 64 * 4 + 4);
        assert_eq!(d.element("gear").unwrap().offset(), 256);
        assert_eq!(d.element("gear").unwrap().range(), 256..260);
        assert_eq!(sut.cell("engine").unwrap().bytes(), 9);
        assert_eq!(
            sut.locate("engine.on").unwrap(),
            ElementLocation {
                cell: 1,
                offset: 8,
                shape: ElemShape::scalar(ElemType::Bool)
            }
        );
    }

    #[test]
    fn the_seed_stress_cell_holds_4872_bytes() {
        let mut b = CellTable::builder();
        crate::stress::seed_cell(&mut b, "a");
        assert_eq!(b.build().unwrap().cells()[0].bytes(), 4872);
    }

    #[test]
    fn a_type_or_length_mismatch_names_both_types() {
        let sut = Cells::in_process(&dynamics());
        let err = sut.element::<[f32; 32]>("dynamics.velocity").unwrap_err();
        assert_eq!(
            err.to_string(),
            "element `dynamics.velocity` is declared `[f32; 64]` but was requested as `[f32; 32]`"
        );
        let err = sut.element::<i64>("dynamics.gear").unwrap_err();
        assert_eq!(
            err.to_string(),
            "element `dynamics.gear` is declared `i32` but was requested as `i64`"
        );
        assert!(matches!(
            sut.element::<i32>("dynamics.gears"),
            Err(CellError::UnknownElement { .. })
        ));
        assert!(matches!(
            sut.element::<i32>("dynamic.gear"),
            Err(CellError::UnknownCell { .. })
        ));
        assert!(matches!(
            sut.element::<i32>("gear"),
            Err(CellError::BadPath { .. })
        ));
    }

    #[test]
    fn the_limits_are_refused_where_they_are_crossed() {
        // 40 cells of 1 GiB each: the first is over the per-cell limit.
        let text: String = (0..40)
            .map(|i| format!("[[cell]]\nname = \"c{i}\"\nelements = [ {{ name = \"x\", type = \"u8\", len = 1073741824 }} ]\n"))
            .collect();
        assert_eq!(
            toml_err(&text),
            format!(
                "cells.toml:3:47: element `c0.x` has length 1073741824; the limit is {MAX_ARRAY_LEN}"
            )
        );
        // 40 cells of 8 MiB each: each fits, their 320 MiB do not.
        let text: String = (0..40)
            .map(|i| format!("[[cell]]\nname = \"c{i}\"\nelements = [ {{ name = \"x\", type = \"f64\", len = 1048576 }} ]\n"))
            .collect();
        let err = toml_err(&text);
        assert!(
            err.starts_with("cells.toml:95:8: with cell `c31` the cells need more than the limit of 268435456 bytes"),
            "{err}"
        );
        // Elements that add up past 16 MiB in one cell: placed at the one that crosses.
        let text = "[[cell]]\nname = \"a\"\nelements = [\n  { name = \"x\", type = \"f64\", len = 2000000 },\n  { name = \"y\", type = \"f64\", len = 200000 },\n]\n";
        assert_eq!(
            toml_err(text),
            "cells.toml:5:37: cell `a` is larger than the limit of 16777216 bytes (16 MiB) per cell"
        );
        let mut b = CellTable::builder();
        b.cell("a");
        for i in 0..=MAX_ELEMENTS_PER_CELL {
            b.element(&format!("e{i}"), ElemType::U8, 1);
        }
        assert!(matches!(
            b.build(),
            Err(CellError::TooManyElementsInCell { .. })
        ));
    }

    #[test]
    fn the_seed_cells_fit() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/stress/cells.toml"
        ))
        .unwrap();
        let sut = CellTable::from_toml_str(&text, "cells.toml").unwrap();
        assert_eq!(sut.cells().len(), 3);
        assert!(sut.cells().iter().all(|c| c.bytes() == 4872));
    }

    #[test]
    fn lookups_by_name_agree_with_positions() {
        let sut = dynamics();
        for (i, c) in sut.cells().iter().enumerate() {
            assert_eq!(sut.cell_index(c.name()).unwrap(), i);
            for e in c.elements() {
                let at = sut.locate(&format!("{}.{}", c.name(), e.name())).unwrap();
                assert_eq!((at.cell, at.offset, at.shape), (i, e.offset(), e.shape()));
            }
        }
        let mut b = CellTable::builder();
        b.cell("a").element("x", ElemType::U8, 1);
        b.declare("a.x", ElemShape::scalar(ElemType::U8)).unwrap();
        b.declare("a.y", ElemShape::scalar(ElemType::U16)).unwrap();
        assert!(b.declare("a.x", ElemShape::scalar(ElemType::U16)).is_err());
        let t = b.build().unwrap();
        assert_eq!(t.cells()[0].elements().len(), 2);
        assert_eq!(t.locate("a.y").unwrap().offset, 1);
    }
}
