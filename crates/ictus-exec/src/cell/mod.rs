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
//! (or [`Cells::write_cell_range`] some of its bytes, when several subsystems
//! write different elements of one cell). [`ElementSlot`] encodes and decodes
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

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::ops::Range;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ictus_core::Nanos;
use ictus_core::sync::AtomicU64;
use ictus_core::sync::seqlock::{SeqlockView, region_words};
use ictus_os::shm::{Segment, ShmError};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use toml::Spanned;

use crate::text::{InputError, read_text};

/// The type of the values of an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElemType {
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `bool`, one byte.
    Bool,
    /// `char`, a Unicode scalar value in 4 bytes.
    Char,
}

impl ElemType {
    /// Every type, in the order of the docs.
    pub const ALL: [ElemType; 12] = [
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
        ElemType::Bool,
        ElemType::Char,
    ];

    /// Bytes of one value.
    pub const fn size(self) -> usize {
        match self {
            ElemType::I8 | ElemType::U8 | ElemType::Bool => 1,
            ElemType::I16 | ElemType::U16 => 2,
            ElemType::I32 | ElemType::U32 | ElemType::F32 | ElemType::Char => 4,
            ElemType::I64 | ElemType::U64 | ElemType::F64 => 8,
        }
    }

    /// The name used in TOML and in messages (`f32`, `bool`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
            ElemType::Bool => "bool",
            ElemType::Char => "char",
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ElemType {
    type Err = CellError;

    fn from_str(s: &str) -> Result<Self, CellError> {
        ElemType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| CellError::UnknownType { name: s.to_owned() })
    }
}

/// The type and array length of an element: `f32` (length 1) or `[f32; 64]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ElemShape {
    /// The type of each value.
    #[serde(rename = "type")]
    pub ty: ElemType,
    /// The number of values (1 for a scalar).
    pub len: usize,
}

impl ElemShape {
    /// One value of `ty`.
    pub const fn scalar(ty: ElemType) -> Self {
        ElemShape { ty, len: 1 }
    }

    /// `len` values of `ty`.
    pub const fn array(ty: ElemType, len: usize) -> Self {
        ElemShape { ty, len }
    }

    /// The shape of the Rust type `T`.
    pub const fn of<T: Element>() -> Self {
        ElemShape {
            ty: T::TYPE,
            len: T::LEN,
        }
    }

    /// Encoded bytes (`size * len`), `None` on overflow.
    pub const fn bytes(&self) -> Option<usize> {
        self.ty.size().checked_mul(self.len)
    }
}

impl fmt::Display for ElemShape {
    /// `f32` for a scalar, `[f32; 64]` for an array, as in Rust.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.len == 1 {
            write!(f, "{}", self.ty)
        } else {
            write!(f, "[{}; {}]", self.ty, self.len)
        }
    }
}

/// A Rust type that a cell element holds: one of the twelve scalars, or an
/// array of one. Encoding is little-endian and of fixed size (see the module
/// docs); `decode` never fails.
pub trait Element: Copy + Send + 'static {
    /// The type of each value.
    const TYPE: ElemType;
    /// The number of values (1 for a scalar).
    const LEN: usize;
    /// Encoded bytes.
    const SIZE: usize = Self::TYPE.size() * Self::LEN;

    /// Writes the value into `out[..SIZE]`.
    ///
    /// # Panics
    ///
    /// If `out` is shorter than `SIZE`.
    fn encode(&self, out: &mut [u8]);

    /// Reads a value from `bytes[..SIZE]`.
    ///
    /// # Panics
    ///
    /// If `bytes` is shorter than `SIZE`.
    fn decode(bytes: &[u8]) -> Self;
}

/// The scalar [`Element`]s, of which arrays are elements too. Implemented for
/// the twelve scalar types only.
pub trait Scalar: Element {}

macro_rules! numeric_element {
    ($($t:ty => $e:ident),* $(,)?) => {$(
        impl Element for $t {
            const TYPE: ElemType = ElemType::$e;
            const LEN: usize = 1;

            #[inline]
            fn encode(&self, out: &mut [u8]) {
                out[..size_of::<$t>()].copy_from_slice(&self.to_le_bytes());
            }

            #[inline]
            fn decode(bytes: &[u8]) -> Self {
                let mut raw = [0u8; size_of::<$t>()];
                raw.copy_from_slice(&bytes[..size_of::<$t>()]);
                <$t>::from_le_bytes(raw)
            }
        }

        impl Scalar for $t {}
    )*};
}

numeric_element! {
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f32 => F32, f64 => F64,
}

impl Element for bool {
    const TYPE: ElemType = ElemType::Bool;
    const LEN: usize = 1;

    #[inline]
    fn encode(&self, out: &mut [u8]) {
        out[0] = u8::from(*self);
    }

    /// Any byte but 0 is `true`.
    #[inline]
    fn decode(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

impl Scalar for bool {}

impl Element for char {
    const TYPE: ElemType = ElemType::Char;
    const LEN: usize = 1;

    #[inline]
    fn encode(&self, out: &mut [u8]) {
        u32::from(*self).encode(out);
    }

    /// A code that is not a Unicode scalar value decodes as `U+FFFD`.
    #[inline]
    fn decode(bytes: &[u8]) -> Self {
        char::from_u32(u32::decode(bytes)).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

impl Scalar for char {}

impl<T: Scalar, const N: usize> Element for [T; N] {
    const TYPE: ElemType = T::TYPE;
    const LEN: usize = N;

    #[inline]
    fn encode(&self, out: &mut [u8]) {
        let out = &mut out[..Self::SIZE];
        for (value, chunk) in self.iter().zip(out.chunks_exact_mut(T::SIZE)) {
            value.encode(chunk);
        }
    }

    #[inline]
    fn decode(bytes: &[u8]) -> Self {
        let bytes = &bytes[..Self::SIZE];
        std::array::from_fn(|i| T::decode(&bytes[i * T::SIZE..]))
    }
}

/// What is wrong with a cell table, a name, or shared cells.
#[derive(Debug, Error)]
pub enum CellError {
    /// A cell or element name that is empty or has a character other than
    /// ASCII letters, digits, `_` and `-`.
    #[error("`{name}` is not a valid cell or element name: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An element name without its cell.
    #[error("`{path}` does not name an element: write `cell.element`")]
    BadPath {
        /// The name given.
        path: String,
    },
    /// No cell of that name.
    #[error("there is no cell `{name}`")]
    UnknownCell {
        /// The cell name.
        name: String,
    },
    /// The cell exists but has no such element.
    #[error("cell `{cell}` has no element `{element}`")]
    UnknownElement {
        /// The cell name.
        cell: String,
        /// The element name.
        element: String,
    },
    /// The element's declared type or length differs from the requested one.
    #[error("element `{path}` is declared `{declared}` but was requested as `{requested}`")]
    TypeMismatch {
        /// `cell.element`.
        path: String,
        /// What the table says.
        declared: ElemShape,
        /// What the caller asked for.
        requested: ElemShape,
    },
    /// A type name that is not one of the twelve.
    #[error(
        "unknown element type `{name}` (expected one of i8, i16, i32, i64, u8, u16, u32, \
         u64, f32, f64, bool, char)"
    )]
    UnknownType {
        /// The name given.
        name: String,
    },
    /// Two cells of one name.
    #[error("cell `{name}` is declared twice")]
    DuplicateCell {
        /// The cell name.
        name: String,
    },
    /// Two elements of one name in a cell.
    #[error("element `{element}` is declared twice in cell `{cell}`")]
    DuplicateElement {
        /// The cell name.
        cell: String,
        /// The element name.
        element: String,
    },
    /// An array length below 1.
    #[error("element `{path}` has length {len}; the length must be at least 1")]
    BadLength {
        /// `cell.element`.
        path: String,
        /// The length given.
        len: i64,
    },
    /// A cell without elements.
    #[error("cell `{name}` has no elements")]
    EmptyCell {
        /// The cell name.
        name: String,
    },
    /// A cell of more than [`MAX_CELL_BYTES`].
    #[error("cell `{name}` is larger than the limit of {limit} bytes (16 MiB) per cell")]
    TooLarge {
        /// The cell name.
        name: String,
        /// The limit, [`MAX_CELL_BYTES`].
        limit: usize,
    },
    /// An array longer than [`MAX_ARRAY_LEN`].
    #[error("element `{path}` has length {len}; the limit is {limit}")]
    LengthTooLarge {
        /// `cell.element`.
        path: String,
        /// The length given.
        len: u64,
        /// The limit, [`MAX_ARRAY_LEN`].
        limit: usize,
    },
    /// A cell with more than [`MAX_ELEMENTS_PER_CELL`] elements.
    #[error("cell `{name}` has more than the limit of {limit} elements")]
    TooManyElementsInCell {
        /// The cell name.
        name: String,
        /// The limit, [`MAX_ELEMENTS_PER_CELL`].
        limit: usize,
    },
    /// A table with more than [`MAX_ELEMENTS`] elements.
    #[error("the table has more than the limit of {limit} elements")]
    TooManyElements {
        /// The limit, [`MAX_ELEMENTS`].
        limit: usize,
    },
    /// A table with more than [`MAX_CELLS`] cells.
    #[error("the table has more than the limit of {limit} cells")]
    TooManyCells {
        /// The limit, [`MAX_CELLS`].
        limit: usize,
    },
    /// Cells whose storage is over [`MAX_TABLE_BYTES`] in all.
    #[error(
        "with cell `{name}` the cells need more than the limit of {limit} bytes (256 MiB) \
         of storage in all"
    )]
    TableTooLarge {
        /// The cell that crosses the limit.
        name: String,
        /// The limit, [`MAX_TABLE_BYTES`].
        limit: usize,
    },
    /// An element given to the builder before any cell.
    #[error("element `{element}` is declared before any cell")]
    ElementOutsideCell {
        /// The element name.
        element: String,
    },
    /// The shared table differs from the caller's declaration.
    #[error("cell `{cell}` differs from the shared table `{shared}`: {detail}")]
    TableMismatch {
        /// The shared cells' name.
        shared: String,
        /// The cell that differs.
        cell: String,
        /// How it differs.
        detail: String,
    },
    /// The segment is not a cell segment or its table cannot be read.
    #[error("shared memory `{name}` does not hold a usable cell table: {reason}")]
    NotCells {
        /// The shared cells' name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Creating, finding or mapping the shared memory failed.
    #[error(transparent)]
    Shm(#[from] ShmError),
}

/// A cell table file that cannot be read or is wrong, with the place.
#[derive(Debug, Error)]
pub enum CellFileError {
    /// The file cannot be opened or read (the OS error follows in the chain
    /// of sources, not in this message).
    #[error("cannot read {file}")]
    Read {
        /// The file.
        file: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Not a regular file (a directory, a FIFO, a device): refused before it
    /// is opened.
    #[error("{file}: not a regular file ({kind}); a cell table is a TOML file")]
    NotAFile {
        /// The file.
        file: String,
        /// What it is, in words.
        kind: &'static str,
    },
    /// Text that cannot be read: not UTF-8, or over
    /// [`MAX_INPUT_BYTES`](crate::text::MAX_INPUT_BYTES).
    #[error("{file}:{line}:{column}: {problem}")]
    Text {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What is wrong.
        problem: InputError,
    },
    /// Not valid TOML, or not the expected keys (unknown fields included).
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file (or a label).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// Valid TOML that breaks a rule of cell tables.
    #[error("{file}:{line}:{column}: {error}")]
    Invalid {
        /// The file (or a label).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// The rule broken.
        error: CellError,
    },
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
///
/// One pass over `text` up to `offset`: for one error. To place many offsets
/// of one text, index it once with [`LineIndex`](crate::text::LineIndex).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Checks a cell or element name.
fn check_name(name: &str) -> Result<(), CellError> {
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
fn split_path(path: &str) -> Result<(&str, &str), CellError> {
    path.split_once('.')
        .filter(|(c, e)| !c.is_empty() && !e.is_empty())
        .ok_or_else(|| CellError::BadPath {
            path: path.to_owned(),
        })
}

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

/// The bytes cell `payload` bytes take in storage: its seqlock region rounded
/// up to the region alignment.
fn storage_bytes(payload: usize) -> usize {
    region_words(payload).next_multiple_of(REGION_ALIGN_WORDS) * 8
}

/// Checks cells and elements one at a time against every rule of a table and
/// lays them out as they come: linear in the table's size, so that the
/// builder and the TOML reader share the rules and each mistake can be placed.
#[derive(Default)]
struct Layout {
    cells: Vec<CellDecl>,
    by_name: HashMap<String, usize>,
    by_path: HashMap<String, (usize, usize)>,
    elements: usize,
    storage: usize,
}

impl Layout {
    /// Starts cell `name`; its elements follow.
    fn cell(&mut self, name: &str) -> Result<(), CellError> {
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
    fn element(&mut self, name: &str, shape: ElemShape) -> Result<(), CellError> {
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
        cell.elements.push(ElementDecl {
            name: name.to_owned(),
            shape,
            offset: cell.bytes,
        });
        cell.bytes = end;
        self.elements += 1;
        Ok(())
    }

    /// Ends the current cell: it has elements, and its storage fits.
    fn end_cell(&mut self) -> Result<(), CellError> {
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

    fn finish(self) -> CellTable {
        CellTable {
            cells: self.cells,
            by_name: self.by_name,
            by_path: self.by_path,
        }
    }
}

/// One element of a cell: its name, shape and byte offset in the cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementDecl {
    name: String,
    shape: ElemShape,
    offset: usize,
}

impl ElementDecl {
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
    name: String,
    elements: Vec<ElementDecl>,
    bytes: usize,
}

impl CellDecl {
    /// The cell's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its elements, in declaration (and byte) order.
    pub fn elements(&self) -> &[ElementDecl] {
        &self.elements
    }

    /// The element named `name`.
    pub fn element(&self, name: &str) -> Option<&ElementDecl> {
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

/// A type-checked element position: encodes and decodes one element of type
/// `T` at its offset in a buffer holding the whole cell. `Copy`, no
/// allocation.
pub struct ElementSlot<T> {
    cell: usize,
    offset: usize,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for ElementSlot<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ElementSlot<T> {}

impl<T: Element> ElementSlot<T> {
    /// Index of the cell in the table.
    pub fn cell(&self) -> usize {
        self.cell
    }

    /// First byte in the cell.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The element's bytes in its cell.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + T::SIZE
    }

    /// Decodes the element from a buffer holding its whole cell.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than the element's end.
    #[inline]
    pub fn get(&self, cell: &[u8]) -> T {
        T::decode(&cell[self.range()])
    }

    /// Encodes `value` into a buffer holding its whole cell.
    ///
    /// # Panics
    ///
    /// If the buffer is shorter than the element's end.
    #[inline]
    pub fn set(&self, cell: &mut [u8], value: &T) {
        value.encode(&mut cell[self.range()]);
    }
}

impl<T: Element> fmt::Debug for ElementSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElementSlot")
            .field("cell", &self.cell)
            .field("offset", &self.offset)
            .field("shape", &ElemShape::of::<T>().to_string())
            .finish()
    }
}

/// The cells and their elements, checked: names valid and unique, lengths at
/// least 1, every cell with an element, sizes within the limits. Made by
/// [`CellTable::builder`] or [`CellTable::load`].
#[derive(Clone, Default)]
pub struct CellTable {
    cells: Vec<CellDecl>,
    /// Cell name to index in `cells`.
    by_name: HashMap<String, usize>,
    /// `cell.element` to cell index and element index.
    by_path: HashMap<String, (usize, usize)>,
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
struct TableRepr {
    cells: Vec<CellRepr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct CellRepr {
    name: String,
    elements: Vec<ElementRepr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ElementRepr {
    name: String,
    #[serde(flatten)]
    shape: ElemShape,
}

impl CellTable {
    /// A builder for a table made in code.
    pub fn builder() -> CellTableBuilder {
        CellTableBuilder::default()
    }

    /// Reads and checks a TOML cell table file: a regular file of at most
    /// [`MAX_INPUT_BYTES`](crate::text::MAX_INPUT_BYTES) of UTF-8 (see
    /// [`crate::text::read_text`]).
    pub fn load(path: &Path) -> Result<CellTable, CellFileError> {
        let file = path.display().to_string();
        let text = read_text(path).map_err(|e| match e {
            InputError::Io(source) => CellFileError::Read {
                file: file.clone(),
                source,
            },
            InputError::NotRegular { kind } => CellFileError::NotAFile {
                file: file.clone(),
                kind,
            },
            problem @ (InputError::TooLarge { line, column }
            | InputError::InvalidUtf8 { line, column }) => CellFileError::Text {
                file: file.clone(),
                line,
                column,
                problem,
            },
        })?;
        CellTable::from_toml_str(&text, &file)
    }

    /// Parses and checks a TOML cell table (`[[cell]]` tables and nothing
    /// else); `file` labels the errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<CellTable, CellFileError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct CellFile {
            #[serde(default)]
            cell: Vec<CellSpec>,
        }
        let doc: CellFile = toml::from_str(text).map_err(|e| toml_error(&e, text, file))?;
        CellTable::from_specs(&doc.cell, text, file)
    }

    /// Checks `[[cell]]` tables deserialized from `text` (for a file that holds
    /// cells next to other things, such as a schedule); errors point into
    /// `text`, labelled `file`.
    pub fn from_specs(
        specs: &[CellSpec],
        text: &str,
        file: &str,
    ) -> Result<CellTable, CellFileError> {
        let at = |span: Range<usize>, error: CellError| {
            let (line, column) = line_col(text, span.start);
            CellFileError::Invalid {
                file: file.to_owned(),
                line,
                column,
                error,
            }
        };
        let mut layout = Layout::default();
        for spec in specs {
            let name = spec.name.get_ref();
            layout.cell(name).map_err(|e| at(spec.name.span(), e))?;
            if spec.elements.is_empty() {
                return Err(at(
                    spec.name.span(),
                    CellError::EmptyCell { name: name.clone() },
                ));
            }
            for e in &spec.elements {
                let element = e.name.get_ref();
                check_name(element).map_err(|err| at(e.name.span(), err))?;
                let ty: ElemType = e.ty.get_ref().parse().map_err(|err| at(e.ty.span(), err))?;
                let (len, span) = match &e.len {
                    None => (1, e.name.span()),
                    Some(len) => {
                        let path = || format!("{name}.{element}");
                        let n = match u64::try_from(*len.get_ref()) {
                            Ok(n) if n >= 1 => n,
                            _ => {
                                return Err(at(
                                    len.span(),
                                    CellError::BadLength {
                                        path: path(),
                                        len: *len.get_ref(),
                                    },
                                ));
                            }
                        };
                        match usize::try_from(n) {
                            Ok(n) if n <= MAX_ARRAY_LEN => (n, len.span()),
                            _ => {
                                return Err(at(
                                    len.span(),
                                    CellError::LengthTooLarge {
                                        path: path(),
                                        len: n,
                                        limit: MAX_ARRAY_LEN,
                                    },
                                ));
                            }
                        }
                    }
                };
                // A duplicate is placed at the name; a size over a limit at the length.
                layout
                    .element(element, ElemShape::array(ty, len))
                    .map_err(|err| match err {
                        CellError::DuplicateElement { .. } => at(e.name.span(), err),
                        err => at(span.clone(), err),
                    })?;
            }
            layout.end_cell().map_err(|e| at(spec.name.span(), e))?;
        }
        Ok(layout.finish())
    }

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

    /// The table as a TOML document that [`from_toml_str`](Self::from_toml_str)
    /// reads back.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        for cell in &self.cells {
            out.push_str(&format!(
                "[[cell]]\nname = \"{}\"\nelements = [\n",
                cell.name
            ));
            for e in &cell.elements {
                out.push_str(&format!(
                    "    {{ name = \"{}\", type = \"{}\", len = {} }},\n",
                    e.name, e.shape.ty, e.shape.len
                ));
            }
            out.push_str("]\n\n");
        }
        out
    }

    fn repr(&self) -> TableRepr {
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

    fn from_repr(repr: &TableRepr) -> Result<CellTable, CellError> {
        let mut builder = CellTable::builder();
        for c in &repr.cells {
            builder.cell(&c.name);
            for e in &c.elements {
                builder.element(&e.name, e.shape.ty, e.shape.len);
            }
        }
        builder.build()
    }

    /// Describes how cell `name` differs between `self` (here) and `shared`.
    fn difference(&self, name: &str, shared: &CellTable) -> Option<String> {
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

/// Converts a toml parse error into a located one.
fn toml_error(e: &toml::de::Error, text: &str, file: &str) -> CellFileError {
    let (line, column) = line_col(text, e.span().map_or(0, |s| s.start));
    CellFileError::Syntax {
        file: file.to_owned(),
        line,
        column,
        message: e.message().trim().to_owned(),
    }
}

/// One `[[cell]]` table of a TOML file, with the places of its values (for
/// [`CellTable::from_specs`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    /// The cell's name.
    pub name: Spanned<String>,
    /// Its elements.
    pub elements: Vec<ElementSpec>,
}

/// One element of a [`CellSpec`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElementSpec {
    /// The element's name.
    pub name: Spanned<String>,
    /// Its type name (`f32`, ...).
    #[serde(rename = "type")]
    pub ty: Spanned<String>,
    /// Its array length (1 when absent).
    #[serde(default)]
    pub len: Option<Spanned<i64>>,
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

/// Words from one cell region to the next are a multiple of this (128 bytes),
/// so two cells never share a cache line pair.
const REGION_ALIGN_WORDS: usize = 16;

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
            // Relaxed (all): published by the segment's ready flag (Release).
            w[0].store(CELLS_MAGIC, Ordering::Relaxed);
            w[1].store(CELLS_VERSION, Ordering::Relaxed);
            w[2].store(json.len() as u64, Ordering::Relaxed);
            for (chunk, word) in json.chunks(8).zip(&w[CELLS_HEADER_WORDS..]) {
                let mut bytes = [0u8; 8];
                bytes[..chunk.len()].copy_from_slice(chunk);
                word.store(u64::from_ne_bytes(bytes), Ordering::Relaxed);
            }
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
        let w = segment.words();
        if w.len() < CELLS_HEADER_WORDS {
            return Err(not_cells("the segment is too small".into()));
        }
        // Relaxed (all): the segment's ready flag (Acquire in Segment::open) orders
        // these after the creator's stores.
        if w[0].load(Ordering::Relaxed) != CELLS_MAGIC {
            return Err(not_cells("it holds something else than cells".into()));
        }
        let version = w[1].load(Ordering::Relaxed);
        if version != CELLS_VERSION {
            return Err(not_cells(format!(
                "layout version {version} (this build reads {CELLS_VERSION})"
            )));
        }
        let json_len = usize::try_from(w[2].load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        let json_words = json_len.div_ceil(8);
        if CELLS_HEADER_WORDS.saturating_add(json_words) > w.len() {
            return Err(not_cells("the table runs past the segment".into()));
        }
        let mut json = Vec::with_capacity(json_words * 8);
        for word in &w[CELLS_HEADER_WORDS..CELLS_HEADER_WORDS + json_words] {
            json.extend_from_slice(&word.load(Ordering::Relaxed).to_ne_bytes());
        }
        json.truncate(json_len);
        let repr: TableRepr =
            serde_json::from_slice(&json).map_err(|e| not_cells(format!("table: {e}")))?;
        let table = CellTable::from_repr(&repr).map_err(|e| not_cells(format!("table: {e}")))?;
        let (regions, words) = regions(&table, CELLS_HEADER_WORDS + json_words);
        if words > w.len() {
            return Err(not_cells(format!(
                "the cells need {words} words, the segment has {}",
                w.len()
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
        match &self.inner.memory {
            Memory::Owned(_) => None,
            Memory::Shared(segment) => Some(segment.name()),
        }
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
    pub fn write_cell_range(&self, cell: usize, offset: usize, bytes: &[u8]) {
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
    pub fn try_write_cell_range(&self, cell: usize, offset: usize, bytes: &[u8]) -> bool {
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
    use proptest::prelude::*;

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

    fn dynamics() -> CellTable {
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

    fn unique(tag: &str) -> String {
        format!("test-cells-{tag}-{}", std::process::id())
    }

    #[test]
    fn shapes_print_as_rust_types() {
        assert_eq!(ElemShape::scalar(ElemType::I32).to_string(), "i32");
        assert_eq!(ElemShape::array(ElemType::F32, 64).to_string(), "[f32; 64]");
        assert_eq!(ElemShape::of::<[char; 3]>().to_string(), "[char; 3]");
        assert_eq!(<[f64; 256]>::SIZE, 2048);
        for t in ElemType::ALL {
            assert_eq!(t.name().parse::<ElemType>().unwrap(), t);
        }
    }

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
        b.cell("a")
            .element("i", ElemType::I32, 1)
            .element("i12", ElemType::I32, 12)
            .element("i200", ElemType::I32, 200)
            .element("s", ElemType::I16, 1)
            .element("s5", ElemType::I16, 5)
            .element("s200", ElemType::I16, 200)
            .element("f", ElemType::F32, 1)
            .element("f64_", ElemType::F32, 64)
            .element("f256", ElemType::F32, 256)
            .element("d", ElemType::F64, 1)
            .element("d256", ElemType::F64, 256)
            .element("c4", ElemType::U8, 4)
            .element("c8", ElemType::U8, 8)
            .element("c256", ElemType::U8, 256);
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

    #[test]
    fn a_toml_table_loads() {
        let text = r#"
[[cell]]
name = "dynamics"
elements = [ { name = "velocity", type = "f32", len = 64 }, { name = "gear", type = "i32" } ]

[[cell]]
name = "engine"
elements = [
    { name = "rpm", type = "f64" },
    { name = "on", type = "bool" },
]
"#;
        let sut = CellTable::from_toml_str(text, "cells.toml").unwrap();
        assert_eq!(sut, dynamics());
        assert_eq!(
            CellTable::from_toml_str(&sut.to_toml(), "round trip").unwrap(),
            sut
        );
    }

    /// The error's text for `text`.
    fn toml_err(text: &str) -> String {
        CellTable::from_toml_str(text, "cells.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn toml_mistakes_point_at_line_and_column() {
        let unknown_type =
            "[[cell]]\nname = \"a\"\nelements = [ { name = \"x\", type = \"f16\" } ]\n";
        assert_eq!(
            toml_err(unknown_type),
            "cells.toml:3:35: unknown element type `f16` (expected one of i8, i16, i32, i64, \
             u8, u16, u32, u64, f32, f64, bool, char)"
        );
        let zero =
            "[[cell]]\nname = \"a\"\nelements = [ { name = \"x\", type = \"u8\", len = 0 } ]\n";
        assert_eq!(
            toml_err(zero),
            "cells.toml:3:47: element `a.x` has length 0; the length must be at least 1"
        );
        let dup = "[[cell]]\nname = \"a\"\nelements = [ { name = \"x\", type = \"u8\" } ]\n\
                   [[cell]]\nname = \"a\"\nelements = [ { name = \"y\", type = \"u8\" } ]\n";
        assert_eq!(toml_err(dup), "cells.toml:5:8: cell `a` is declared twice");
        let dup_element = "[[cell]]\nname = \"a\"\nelements = [\n  { name = \"x\", type = \"u8\" },\n  { name = \"x\", type = \"u8\" },\n]\n";
        assert_eq!(
            toml_err(dup_element),
            "cells.toml:5:12: element `x` is declared twice in cell `a`"
        );
        let empty = "[[cell]]\nname = \"a\"\nelements = []\n";
        assert_eq!(toml_err(empty), "cells.toml:2:8: cell `a` has no elements");
    }

    #[test]
    fn unknown_keys_and_bad_syntax_point_at_line_and_column() {
        let unknown = "[[cell]]\nname = \"a\"\ncolour = 3\nelements = []\n";
        let err = toml_err(unknown);
        assert!(
            err.starts_with("cells.toml:3:1: unknown field `colour`"),
            "{err}"
        );
        let unknown_in_element =
            "[[cell]]\nname = \"a\"\nelements = [ { name = \"x\", type = \"u8\", size = 2 } ]\n";
        let err = toml_err(unknown_in_element);
        assert!(err.starts_with("cells.toml:3:"), "{err}");
        assert!(err.contains("unknown field `size`"), "{err}");
        let syntax = "[[cell]]\nname = \"a\nelements = []\n";
        let err = toml_err(syntax);
        assert!(err.starts_with("cells.toml:2:"), "{err}");
        let top = "[[cells]]\nname = \"a\"\n";
        assert!(toml_err(top).starts_with("cells.toml:1:"));
    }

    #[test]
    fn line_and_column_count_characters() {
        let text = "ab\ncé\nxyz";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 6), (2, 3), "é is one character of two bytes");
        assert_eq!(line_col(text, 99), (3, 4));
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

    #[test]
    fn invalid_chars_decode_as_the_replacement_character() {
        assert_eq!(char::decode(&0xD800u32.to_le_bytes()), '\u{FFFD}');
        assert_eq!(char::decode(&0x11_0000u32.to_le_bytes()), '\u{FFFD}');
        assert!(bool::decode(&[7]));
        assert!(!bool::decode(&[0]));
    }

    /// Encodes then decodes `v`, checking the encoded size and that the bytes
    /// are little-endian.
    fn round_trip<T: Element>(v: T) -> T {
        let mut buf = vec![0xAAu8; T::SIZE + 3];
        v.encode(&mut buf);
        assert!(buf[T::SIZE..].iter().all(|&b| b == 0xAA), "wrote past SIZE");
        T::decode(&buf)
    }

    macro_rules! round_trips {
        ($($name:ident: $t:ty),* $(,)?) => {
            proptest! {
                $(
                    #[test]
                    fn $name(v in any::<$t>(), a in any::<[$t; 5]>()) {
                        prop_assert_eq!(round_trip(v), v);
                        prop_assert_eq!(round_trip(a), a);
                        let mut le = vec![0; <$t>::SIZE];
                        v.encode(&mut le);
                        prop_assert_eq!(&le[..], &v.to_le_bytes()[..]);
                    }
                )*
            }
        };
    }

    round_trips! {
        i8_round_trips: i8, i16_round_trips: i16, i32_round_trips: i32, i64_round_trips: i64,
        u8_round_trips: u8, u16_round_trips: u16, u32_round_trips: u32, u64_round_trips: u64,
    }

    proptest! {
        #[test]
        fn floats_round_trip_bit_for_bit(a in any::<u32>(), b in any::<u64>()) {
            let (f, d) = (f32::from_bits(a), f64::from_bits(b));
            prop_assert_eq!(round_trip(f).to_bits(), a);
            prop_assert_eq!(round_trip(d).to_bits(), b);
            let arr = round_trip([f, -f, 0.0]);
            prop_assert_eq!(arr[0].to_bits(), a);
            let arr = round_trip([d; 3]);
            prop_assert_eq!(arr[2].to_bits(), b);
        }

        #[test]
        fn bools_and_chars_round_trip(b in any::<bool>(), c in any::<char>(), cs in any::<[char; 4]>()) {
            prop_assert_eq!(round_trip(b), b);
            prop_assert_eq!(round_trip([b, !b]), [b, !b]);
            prop_assert_eq!(round_trip(c), c);
            prop_assert_eq!(round_trip(cs), cs);
        }

        #[test]
        fn arrays_of_any_length_round_trip(v in proptest::collection::vec(any::<i16>(), 64)) {
            let a: [i16; 64] = v.try_into().unwrap();
            prop_assert_eq!(round_trip(a), a);
            prop_assert_eq!(<[i16; 64]>::SIZE, 128);
        }

        #[test]
        fn toml_round_trips_any_valid_table(
            cells in proptest::collection::vec(
                proptest::collection::vec((0usize..12, 1usize..40), 1..5), 1..4)
        ) {
            let mut b = CellTable::builder();
            for (i, elements) in cells.iter().enumerate() {
                b.cell(&format!("c{i}"));
                for (j, (ty, len)) in elements.iter().enumerate() {
                    b.element(&format!("e{j}"), ElemType::ALL[*ty], *len);
                }
            }
            let table = b.build().unwrap();
            let back = CellTable::from_toml_str(&table.to_toml(), "t").unwrap();
            prop_assert_eq!(back, table);
        }
    }
}
