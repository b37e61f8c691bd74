//! [`CellError`]: what is wrong with a cell table, a name, or shared cells.

use ictus_os::shm::ShmError;
use thiserror::Error;

use super::element::{ElemShape, ElemType};

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
    /// A cell whose writer died in the middle of a write: no coherent copy of it.
    #[error("cell `{cell}` was left half written (its writer stopped during a write)")]
    Torn {
        /// The cell name.
        cell: String,
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
    /// A cell of more than [`MAX_CELL_BYTES`](super::MAX_CELL_BYTES).
    #[error("cell `{name}` is larger than the limit of {limit} bytes (16 MiB) per cell")]
    TooLarge {
        /// The cell name.
        name: String,
        /// The limit, [`MAX_CELL_BYTES`](super::MAX_CELL_BYTES).
        limit: usize,
    },
    /// An array longer than [`MAX_ARRAY_LEN`](super::MAX_ARRAY_LEN).
    #[error("element `{path}` has length {len}; the limit is {limit}")]
    LengthTooLarge {
        /// `cell.element`.
        path: String,
        /// The length given.
        len: u64,
        /// The limit, [`MAX_ARRAY_LEN`](super::MAX_ARRAY_LEN).
        limit: usize,
    },
    /// A cell with more than [`MAX_ELEMENTS_PER_CELL`](super::MAX_ELEMENTS_PER_CELL) elements.
    #[error("cell `{name}` has more than the limit of {limit} elements")]
    TooManyElementsInCell {
        /// The cell name.
        name: String,
        /// The limit, [`MAX_ELEMENTS_PER_CELL`](super::MAX_ELEMENTS_PER_CELL).
        limit: usize,
    },
    /// A table with more than [`MAX_ELEMENTS`](super::MAX_ELEMENTS) elements.
    #[error("the table has more than the limit of {limit} elements")]
    TooManyElements {
        /// The limit, [`MAX_ELEMENTS`](super::MAX_ELEMENTS).
        limit: usize,
    },
    /// A table with more than [`MAX_CELLS`](super::MAX_CELLS) cells.
    #[error("the table has more than the limit of {limit} cells")]
    TooManyCells {
        /// The limit, [`MAX_CELLS`](super::MAX_CELLS).
        limit: usize,
    },
    /// Cells whose storage is over [`MAX_TABLE_BYTES`](super::MAX_TABLE_BYTES) in all.
    #[error(
        "with cell `{name}` the cells need more than the limit of {limit} bytes (256 MiB) \
         of storage in all"
    )]
    TableTooLarge {
        /// The cell that crosses the limit.
        name: String,
        /// The limit, [`MAX_TABLE_BYTES`](super::MAX_TABLE_BYTES).
        limit: usize,
    },
    /// A table in JSON (a recording's) that does not read.
    #[error("not a cell table in JSON: {0}")]
    Json(String),
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

/// A type's name (`f32`), parsed; an unknown name is a [`CellError::UnknownType`].
impl std::str::FromStr for ElemType {
    type Err = CellError;

    fn from_str(s: &str) -> Result<Self, CellError> {
        ElemType::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| CellError::UnknownType { name: s.to_owned() })
    }
}
