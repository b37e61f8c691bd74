//! The built-in subsystems `ictus run` hosts in-process, checked when the
//! schedule is read rather than when their threads start.
//!
//! [`check`] is pure: given a subsystem's `builtin` name, its `config` table
//! and the run's cell table (when known), it says whether
//! [`crate::run::builtin`] will be able to make and register it, and if not,
//! which value is wrong ([`BuiltinError::key`]) so that the schedule can
//! report the file, line and column of that value.
//!
//! ```
//! use ictus_exec::builtins::{self, BuiltinError};
//! use ictus_exec::cell::{CellTable, ElemType};
//! let mut b = CellTable::builder();
//! b.cell("A").element("int", ElemType::I32, 1);
//! b.cell("B").element("int", ElemType::I32, 1);
//! let cells = b.build().unwrap();
//! let config: toml::Table = toml::from_str("from = \"A\"\nto = \"Z\"").unwrap();
//! let err = builtins::check("increment", &config, Some(&cells)).unwrap_err();
//! assert_eq!(err.key(), Some("to"));
//! assert_eq!(err.to_string(), "config.to: there is no cell `Z`");
//! assert!(builtins::check("idle", &toml::Table::new(), None).is_ok());
//! ```

use thiserror::Error;

use crate::cell::{CellError, CellTable};

/// The names of the built-in subsystems.
pub const NAMES: &[&str] = &["increment", "idle"];

/// Why a built-in subsystem cannot be made as configured.
#[derive(Debug, Error)]
pub enum BuiltinError {
    /// A name that is not one of [`NAMES`].
    #[error("unknown builtin '{name}' (expected increment or idle)")]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A setting the builtin needs is missing.
    #[error("the {builtin} builtin needs config.{key}, {what}")]
    Missing {
        /// The builtin.
        builtin: &'static str,
        /// The missing key.
        key: &'static str,
        /// What it holds, in words.
        what: &'static str,
    },
    /// A setting the builtin does not have (a typo would otherwise be ignored).
    #[error("config.{key}: the {builtin} builtin has no such setting ({takes})")]
    UnknownKey {
        /// The builtin.
        builtin: &'static str,
        /// The key given.
        key: String,
        /// What it takes, in words.
        takes: &'static str,
    },
    /// A setting of the wrong type.
    #[error("config.{key} must be {what}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What it must be, in words.
        what: &'static str,
    },
    /// A setting naming a cell (or element) the table does not have.
    #[error("config.{key}: {error}")]
    Cell {
        /// The key.
        key: &'static str,
        /// What the table says.
        error: CellError,
    },
    /// `increment` between two cells of different layouts.
    #[error("cells {from} and {to} must have the same elements to increment one into the other")]
    Mismatch {
        /// The input cell.
        from: String,
        /// The output cell.
        to: String,
    },
}

impl BuiltinError {
    /// The `config` key whose value is wrong (`None`: the builtin's name, or
    /// the config as a whole).
    pub fn key(&self) -> Option<&str> {
        match self {
            BuiltinError::Unknown { .. } | BuiltinError::Missing { .. } => None,
            BuiltinError::UnknownKey { key, .. } => Some(key),
            BuiltinError::WrongType { key, .. } | BuiltinError::Cell { key, .. } => Some(key),
            BuiltinError::Mismatch { .. } => Some("to"),
        }
    }

    /// Whether the error is about the builtin's name (rather than its config).
    pub fn is_about_the_name(&self) -> bool {
        matches!(self, BuiltinError::Unknown { .. })
    }
}

/// Checks that builtin `name` exists and that `config` is what it needs;
/// with `cells`, also that the cells it names are in the table and fit
/// together. Allocates only for an error.
pub fn check(
    name: &str,
    config: &toml::Table,
    cells: Option<&CellTable>,
) -> Result<(), BuiltinError> {
    match name {
        "increment" => {
            only_keys("increment", config, &["from", "to"], "it takes from and to")?;
            check_increment(config, cells)
        }
        "idle" => only_keys("idle", config, &[], "it takes none"),
        other => Err(BuiltinError::Unknown {
            name: other.to_owned(),
        }),
    }
}

/// What builtin `name` writes with `config` (cells by name), as far as the config
/// says: `increment` its `to` cell, `idle` nothing; `None` for an unknown builtin or
/// a config without it (which [`check`] refuses).
pub fn writes(name: &str, config: &toml::Table) -> Option<Vec<String>> {
    match name {
        "increment" => Some(vec![config.get("to")?.as_str()?.to_string()]),
        "idle" => Some(Vec::new()),
        _ => None,
    }
}

/// Refuses the first key of `config` that is not in `known`.
fn only_keys(
    builtin: &'static str,
    config: &toml::Table,
    known: &[&str],
    takes: &'static str,
) -> Result<(), BuiltinError> {
    match config.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(BuiltinError::UnknownKey {
            builtin,
            key: key.clone(),
            takes,
        }),
        None => Ok(()),
    }
}

/// `increment`: `from` and `to` name two cells of the same layout.
fn check_increment(config: &toml::Table, cells: Option<&CellTable>) -> Result<(), BuiltinError> {
    let cell_name = |key: &'static str| match config.get(key) {
        None => Err(BuiltinError::Missing {
            builtin: "increment",
            key,
            what: "a cell name",
        }),
        Some(toml::Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(BuiltinError::WrongType {
            key,
            what: "a cell name (a string)",
        }),
    };
    let (from, to) = (cell_name("from")?, cell_name("to")?);
    let Some(table) = cells else {
        return Ok(());
    };
    let find = |key: &'static str, name: &str| {
        table.cell(name).ok_or_else(|| BuiltinError::Cell {
            key,
            error: CellError::UnknownCell {
                name: name.to_owned(),
            },
        })
    };
    let (a, b) = (find("from", from)?, find("to", to)?);
    let same = a.elements().len() == b.elements().len()
        && a.elements()
            .iter()
            .zip(b.elements())
            .all(|(x, y)| x.shape() == y.shape());
    if !same {
        return Err(BuiltinError::Mismatch {
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::ElemType;

    fn cells() -> CellTable {
        let mut b = CellTable::builder();
        b.cell("A").element("int", ElemType::I32, 1);
        b.cell("B").element("int", ElemType::I32, 1);
        b.cell("C").element("int", ElemType::I64, 1);
        b.build().unwrap()
    }

    fn config(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn increment_between_two_cells_of_one_layout_passes() {
        let sut = check("increment", &config("from = 'A'\nto = 'B'"), Some(&cells()));
        assert!(sut.is_ok());
        assert!(check("increment", &config("from = 'A'\nto = 'Z'"), None).is_ok());
    }

    #[test]
    fn every_wrong_setting_names_its_key() {
        let t = cells();
        let key = |name: &str, c: &str| {
            check(name, &config(c), Some(&t))
                .unwrap_err()
                .key()
                .map(str::to_owned)
        };
        assert_eq!(
            key("increment", "from = 'Z'\nto = 'B'"),
            Some("from".into())
        );
        assert_eq!(key("increment", "from = 'A'\nto = 'C'"), Some("to".into()));
        assert_eq!(key("increment", "from = 3\nto = 'B'"), Some("from".into()));
        assert_eq!(key("increment", "from = 'A'"), None);
        assert_eq!(
            key("increment", "from = 'A'\nto = 'B'\nspeed = 3"),
            Some("speed".into())
        );
        assert_eq!(key("idle", "from = 'A'"), Some("from".into()));
        let err = check("incr", &toml::Table::new(), Some(&t)).unwrap_err();
        assert!(err.is_about_the_name());
        assert_eq!(
            err.to_string(),
            "unknown builtin 'incr' (expected increment or idle)"
        );
    }
}
