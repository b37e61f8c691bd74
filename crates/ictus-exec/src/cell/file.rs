//! Cell tables in TOML: [`CellTable::load`], [`CellTable::from_toml_str`],
//! [`CellTable::from_specs`] and [`CellTable::to_toml`], with errors placed at
//! FILE:LINE:COLUMN ([`CellFileError`], placed by [`Located`]).

use std::io;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use super::table::{Layout, check_name};
use super::{CellError, CellTable, ElemShape, ElemType, MAX_ARRAY_LEN};
use ictus_os::fs::{InputError, InputKind, Located};

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
    /// Text that cannot be read: not UTF-8, or over [`InputKind::Table`]'s limit.
    #[error("{file}:{line}:{column}: {}", content_problem(problem))]
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
    /// Not valid TOML, or not the expected keys (unknown fields included): what the
    /// parser expected.
    #[error(transparent)]
    Syntax(Located<String>),
    /// Valid TOML that breaks a rule of cell tables.
    #[error(transparent)]
    Invalid(Located<CellError>),
}

/// What is wrong with a file's content, in the words of a cell table's error (its
/// place is said before it).
pub(crate) fn content_problem(problem: &InputError) -> String {
    match problem {
        InputError::TooLarge { limit, .. } => {
            format!("the file is larger than {} MiB", limit >> 20)
        }
        InputError::NotUtf8 { .. } => "invalid UTF-8".to_owned(),
        other => other.to_string(),
    }
}

impl CellTable {
    /// Reads and checks a TOML cell table file: a regular file of at most
    /// [`InputKind::Table`]'s limit of UTF-8 (see [`ictus_os::fs::read_text`]).
    pub fn load(path: &Path) -> Result<CellTable, CellFileError> {
        let file = path.display().to_string();
        let text =
            ictus_os::fs::read_text(path, InputKind::Table.max_bytes()).map_err(|e| match e {
                InputError::Io { source, .. } => CellFileError::Read {
                    file: file.clone(),
                    source,
                },
                InputError::NotRegular { kind, .. } => CellFileError::NotAFile {
                    file: file.clone(),
                    kind,
                },
                problem => {
                    let at = problem
                        .place()
                        .unwrap_or(ictus_os::json::Place { line: 1, column: 1 });
                    CellFileError::Text {
                        file: file.clone(),
                        line: at.line,
                        column: at.column,
                        problem,
                    }
                }
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
            CellFileError::Invalid(Located::at(file, text, span.start, error))
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

    /// The table as JSON (`{"cells": [{"name", "elements": [{"name", "type",
    /// "len"}]}]}`), as a recording keeps it; [`from_json`](Self::from_json)
    /// reads it back.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.repr()).unwrap_or_default()
    }

    /// A table from [`to_json`](Self::to_json)'s form, checked as any table.
    pub fn from_json(text: &str) -> Result<CellTable, CellError> {
        let repr: super::table::TableRepr =
            serde_json::from_str(text).map_err(|e| CellError::Json(e.to_string()))?;
        CellTable::from_repr(&repr)
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
}

/// Converts a toml parse error into a located one.
fn toml_error(e: &toml::de::Error, text: &str, file: &str) -> CellFileError {
    CellFileError::Syntax(Located::at(
        file,
        text,
        e.span().map_or(0, |s| s.start),
        e.message().trim().to_owned(),
    ))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::test_util::{dynamics, toml_err};
    use proptest::prelude::*;

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

    proptest! {
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
