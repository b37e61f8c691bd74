//! Places in JSON input files: the line and column of a value found wrong.
//!
//! serde_json places its own syntax errors. What is found wrong after parsing (a
//! figure out of range, an unknown probe, a missing key, a count that overflows) is
//! found on a typed value or a `serde_json::Value`, which keep no positions: a
//! [`JsonPath`] names the value (`measurements[2].latency.summary.mean_ns`) and
//! [`place`] finds where it starts in the text, from the ranges of the syntax tree
//! that [`jsonc_parser`] builds. [`from_str`] does both for a typed read: a value of
//! the wrong type or out of range is placed at its start and named by its path.
//!
//! Lines and columns count characters from 1, as the TOML readers' do. Finding a place
//! parses the text again, so it is done once, for the error, never for good input.
//!
//! [`Place`] with [`place_of_offset`] (one offset) and [`LineIndex`] (many offsets of
//! one text) are the one way ictus turns a byte offset of any input file, JSON or
//! TOML, into a line and column.
//!
//! ```
//! use ictus_os::json::{JsonPath, Place, place};
//! let text = "{\n  \"a\": [1, -2]\n}";
//! let path = JsonPath::root().key("a").index(1);
//! assert_eq!(path.to_string(), "a[1]");
//! assert_eq!(place(text, &path), Place { line: 2, column: 12 });
//! ```

use std::fmt;

use jsonc_parser::ast::{ObjectPropName, Value};
use jsonc_parser::common::Ranged;
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use thiserror::Error;

/// A place in a text: 1-based line and column, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One step into a JSON value: a key of an object or an index of an array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    /// The value of `key` in an object.
    Key(String),
    /// Element `index` (0-based) of an array.
    Index(usize),
}

/// The path from the top of a JSON document to one value, printed
/// `measurements[2].labels.frequency_hz` (a key that is not a plain word is quoted:
/// `labels."a.b"`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonPath(Vec<PathStep>);

impl JsonPath {
    /// The whole document.
    pub fn root() -> Self {
        JsonPath(Vec::new())
    }
    /// The value of `key` in the object at this path.
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut p = self.clone();
        p.0.push(PathStep::Key(key.into()));
        p
    }
    /// Element `index` of the array at this path.
    pub fn index(&self, index: usize) -> Self {
        let mut p = self.clone();
        p.0.push(PathStep::Index(index));
        p
    }
    /// The steps, from the top.
    pub fn segments(&self) -> &[PathStep] {
        &self.0
    }
    /// Whether this is the whole document.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&serde_path_to_error::Path> for JsonPath {
    /// serde's path; an unknown step (a non-string key) ends it there.
    fn from(path: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment as S;
        let mut p = JsonPath::root();
        for s in path {
            p = match s {
                S::Seq { index } => p.index(*index),
                S::Map { key } => p.key(key.as_str()),
                S::Enum { variant } => p.key(variant.as_str()),
                S::Unknown => break,
            };
        }
        p
    }
}

fn plain_word(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, s) in self.0.iter().enumerate() {
            match s {
                PathStep::Index(n) => write!(f, "[{n}]")?,
                PathStep::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if plain_word(k) {
                        f.write_str(k)?;
                    } else {
                        // A JSON string: unambiguous whatever the key holds.
                        write!(f, "{}", serde_json::Value::String(k.clone()))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The place of byte `offset` of `text` (clamped to the text and down to a character
/// boundary).
pub fn place_of_offset(text: &str, offset: usize) -> Place {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let (line, column) = line_column(text.as_bytes(), offset);
    Place { line, column }
}

/// The start of every line of a text, for placing many byte offsets of it: one pass
/// over the text, then each place in `O(log lines + line length)`, so that checking
/// every element of a large file stays linear. The same places as
/// [`place_of_offset`], which is for one error.
///
/// ```
/// use ictus_os::json::{LineIndex, Place};
/// let index = LineIndex::new("a = 1\nbé = 2\n");
/// assert_eq!(index.locate(9), Place { line: 2, column: 3 }, "é is one character");
/// ```
#[derive(Clone, Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset of the first character of each line (the first is 0).
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the lines of `text` (one pass).
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The place of byte `offset`, clamped to the end of the text and down to a
    /// character boundary.
    pub fn locate(&self, offset: usize) -> Place {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        // The last line starting at or before `offset` (starts[0] = 0 <= offset).
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        let column = self.text[start..offset].chars().count() + 1;
        Place { line, column }
    }
}

/// The byte offset of `place` in `text` (the inverse of [`place_of_offset`]); None
/// when the text has no such line, or the line no such column (one past its last
/// character is its end).
pub fn offset_of(text: &str, place: Place) -> Option<usize> {
    let before = place.line.checked_sub(1)?;
    let mut start = 0;
    for _ in 0..before {
        // Each line before must end with a newline for the next to exist.
        start += text.get(start..)?.find('\n')? + 1;
    }
    let rest = &text[start..];
    let line = rest.split('\n').next().unwrap_or("");
    let skip = place.column.checked_sub(1)?;
    let mut chars = line.char_indices().map(|(i, _)| i).chain([line.len()]);
    chars.nth(skip).map(|i| start + i)
}

/// The JSON value that starts at `place` in `text` (what an error placed there is
/// about), or None when no value starts there.
pub fn value_at(text: &str, place: Place) -> Option<serde_json::Value> {
    let at = offset_of(text, place)?;
    serde_json::Deserializer::from_str(&text[at..])
        .into_iter::<serde_json::Value>()
        .next()?
        .ok()
}

/// What the syntax tree has at a path.
struct Found {
    /// Byte offset of the start of the value at the path, or of the deepest value
    /// found on the way (the object that lacks a key, the array too short).
    value: usize,
    /// Byte offset of the start of the last key, when the whole path was found and it
    /// ends with a key.
    key: Option<usize>,
}

fn find(text: &str, path: &JsonPath) -> Found {
    let Ok(parsed) = jsonc_parser::parse_to_ast(text, &Default::default(), &Default::default())
    else {
        return Found {
            value: 0,
            key: None,
        };
    };
    let Some(mut value) = parsed.value.as_ref() else {
        return Found {
            value: 0,
            key: None,
        };
    };
    let mut key = None;
    for segment in path.segments() {
        let next = match (segment, value) {
            // The last of duplicate keys: the one serde_json keeps.
            (PathStep::Key(k), Value::Object(o)) => o
                .properties
                .iter()
                .rev()
                .find(|p| name(&p.name) == k)
                .map(|p| (&p.value, Some(p.name.start()))),
            (PathStep::Index(i), Value::Array(a)) => a.elements.get(*i).map(|v| (v, None)),
            _ => None,
        };
        match next {
            Some((v, k)) => {
                value = v;
                key = k;
            }
            None => {
                key = None;
                break;
            }
        }
    }
    Found {
        value: value.start(),
        key,
    }
}

fn name<'a>(n: &'a ObjectPropName<'_>) -> &'a str {
    match n {
        ObjectPropName::String(s) => s.value.as_ref(),
        ObjectPropName::Word(w) => w.value,
    }
}

/// Where the value at `path` starts in `text`; where a step is missing, where the
/// deepest value found on the way starts (the object that lacks the key). Text that is
/// not JSON places everything at its start.
pub fn place(text: &str, path: &JsonPath) -> Place {
    place_of_offset(text, find(text, path).value)
}

/// Where the key that ends `path` starts in `text` (for a key that is itself wrong,
/// like a bucket `"+5"`); [`place`] when the path does not end with a key present.
pub fn key_place(text: &str, path: &JsonPath) -> Place {
    let found = find(text, path);
    place_of_offset(text, found.key.unwrap_or(found.value))
}

/// Why a JSON text could not be read as the type asked for.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{place}: {message}")]
pub struct JsonError {
    /// Where: serde_json's place of a syntax error, or the start of the value of the
    /// wrong type or out of range.
    pub place: Place,
    /// The path of that value (the root for a syntax error).
    pub path: JsonPath,
    /// What was expected, and what was found, after the path when there is one.
    pub message: String,
}

impl JsonError {
    /// serde_json's error `e` about `text`, the value it is about found at `path`.
    pub fn new(text: &str, e: &serde_json::Error, path: JsonPath) -> Self {
        let what = e.to_string();
        // serde_json ends its message with the place; the caller says it first.
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let what = what.strip_suffix(&suffix).unwrap_or(&what).to_string();
        if e.classify() == Category::Data {
            JsonError {
                place: place(text, &path),
                message: if path.is_root() {
                    what
                } else {
                    format!("{path}: {what}")
                },
                path,
            }
        } else {
            JsonError {
                place: serde_place(text, e),
                path: JsonPath::root(),
                message: syntax_message(&what),
            }
        }
    }
}

/// serde_json's words for a syntax error ("expected value", "trailing characters"),
/// said as what was expected: "not valid JSON: expected a value (an object, ...)".
fn syntax_message(what: &str) -> String {
    let said = match what {
        "expected value" => {
            "expected a value (an object, an array, a string, a number, true, false or null)"
                .to_string()
        }
        "expected ident" => "expected true, false or null".to_string(),
        "trailing characters" => "expected nothing after the value, found more text".to_string(),
        "key must be a string" => "expected a key in double quotes".to_string(),
        "trailing comma" => "expected another value after the comma".to_string(),
        other => match other.strip_prefix("EOF while parsing ") {
            Some(inside) => format!("the text ends inside {inside}"),
            None => other.to_string(),
        },
    };
    format!("not valid JSON: {said}")
}

/// serde_json's place (its column counts bytes) in characters.
fn serde_place(text: &str, e: &serde_json::Error) -> Place {
    let line = e.line().max(1);
    let start: usize = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum();
    place_of_offset(text, start + e.column().saturating_sub(1))
}

/// Reads `text` as a `T`. A syntax error keeps serde_json's place; a value of the wrong
/// type or out of range is placed at its start, its path in the message.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| JsonError::new(text, e.inner(), JsonPath::from(e.path())))?;
    de.end()
        .map_err(|e| JsonError::new(text, &e, JsonPath::root()))?;
    Ok(value)
}

/// 1-based line and column (in characters) of byte `offset` of `bytes`, counting only
/// the valid UTF-8 before it.
pub fn line_column(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_is_not_json_is_called_so_at_its_place() {
        let sut = from_str::<serde_json::Value>("# ictus\n").unwrap_err();
        assert_eq!(sut.place, Place { line: 1, column: 1 });
        assert_eq!(
            sut.message,
            "not valid JSON: expected a value (an object, an array, a string, a number, \
             true, false or null)"
        );
        let sut = from_str::<serde_json::Value>("{\"a\": [1, 2").unwrap_err();
        assert_eq!(sut.message, "not valid JSON: the text ends inside a list");
        let sut = from_str::<serde_json::Value>("{} x").unwrap_err();
        assert!(sut.message.contains("found more text"), "{}", sut.message);
    }

    const TEXT: &str =
        "{\n  \"a\": {\"b\": [10, {\"c\": true}]},\n  \"é\": \"x\", \"d\": 1, \"d\": 2\n}\n";

    #[test]
    fn a_nested_value_is_placed_at_its_first_character() {
        let sut = place(TEXT, &JsonPath::root().key("a").key("b").index(1).key("c"));
        assert_eq!(
            sut,
            Place {
                line: 2,
                column: 25
            }
        );
        assert_eq!(place(TEXT, &JsonPath::root()), Place { line: 1, column: 1 });
    }

    #[test]
    fn a_missing_step_places_the_value_that_lacks_it() {
        let obj = place(TEXT, &JsonPath::root().key("a"));
        assert_eq!(place(TEXT, &JsonPath::root().key("a").key("zz")), obj);
        let arr = place(TEXT, &JsonPath::root().key("a").key("b"));
        assert_eq!(
            place(TEXT, &JsonPath::root().key("a").key("b").index(9)),
            arr
        );
        assert_eq!(place(TEXT, &JsonPath::root().key("a").index(0)), obj);
    }

    #[test]
    fn columns_count_characters_and_the_last_duplicate_key_wins() {
        // `  "é": "x", "d": 1, "d": 2`: é is one character.
        assert_eq!(
            place(TEXT, &JsonPath::root().key("é")),
            Place { line: 3, column: 8 }
        );
        assert_eq!(
            place(TEXT, &JsonPath::root().key("d")),
            Place {
                line: 3,
                column: 26
            }
        );
        assert_eq!(
            key_place(TEXT, &JsonPath::root().key("d")),
            Place {
                line: 3,
                column: 21
            }
        );
    }

    #[test]
    fn text_that_is_not_json_is_placed_at_its_start() {
        assert_eq!(
            place("{]", &JsonPath::root().key("a")),
            Place { line: 1, column: 1 }
        );
        assert_eq!(place("", &JsonPath::root()), Place { line: 1, column: 1 });
    }

    #[test]
    fn a_place_counts_characters_and_stays_within_the_text() {
        let at = |text, offset| {
            let p = place_of_offset(text, offset);
            (p.line, p.column)
        };
        assert_eq!(at("ab\ncd", 0), (1, 1));
        assert_eq!(at("ab\ncd", 4), (2, 2));
        assert_eq!(at("é = 1\nx", 3), (1, 3));
        assert_eq!(at("é", 1), (1, 1), "inside a character: at its start");
        assert_eq!(at("a", 99), (1, 2));
    }

    #[test]
    fn offset_of_undoes_place_of_offset() {
        for offset in 0..=TEXT.len() {
            if TEXT.is_char_boundary(offset) {
                assert_eq!(offset_of(TEXT, place_of_offset(TEXT, offset)), Some(offset));
            }
        }
        assert_eq!(offset_of(TEXT, Place { line: 9, column: 1 }), None);
        assert_eq!(offset_of(TEXT, Place { line: 1, column: 9 }), None);
        assert_eq!(offset_of(TEXT, Place { line: 0, column: 1 }), None);
    }

    #[test]
    fn paths_print_plain_keys_bare_and_others_quoted() {
        let sut = JsonPath::root()
            .key("measurements")
            .index(2)
            .key("a.b")
            .key("");
        assert_eq!(sut.to_string(), r#"measurements[2]."a.b"."""#);
        assert_eq!(
            JsonPath::root().key("cmdline:").to_string(),
            r#""cmdline:""#
        );
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        a: Vec<u64>,
    }

    #[test]
    fn a_value_of_the_wrong_type_is_placed_at_its_start_with_its_path() {
        let err = from_str::<Doc>("{\n  \"a\": [1, \"two\", 3]\n}").unwrap_err();
        assert_eq!(
            err.place,
            Place {
                line: 2,
                column: 12
            }
        );
        assert_eq!(err.path, JsonPath::root().key("a").index(1));
        assert!(err.message.starts_with("a[1]: invalid type"), "{err}");
        assert!(!err.message.contains("at line"), "{err}");
    }

    #[test]
    fn a_missing_field_is_placed_at_the_object_that_lacks_it() {
        let err = from_str::<Doc>("\n  {\"b\": 1}").unwrap_err();
        assert_eq!(err.place, Place { line: 2, column: 3 });
        assert!(err.message.contains("missing field `a`"), "{err}");
    }

    #[test]
    fn a_syntax_error_keeps_serde_json_s_place_in_characters() {
        let err = from_str::<Doc>("{\"é\": ]").unwrap_err();
        assert_eq!(err.place, Place { line: 1, column: 7 });
        assert!(err.path.is_root());
        let err = from_str::<Doc>("{\"a\": []} x").unwrap_err();
        assert_eq!(
            err.place,
            Place {
                line: 1,
                column: 11
            }
        );
        let err = from_str::<Doc>("").unwrap_err();
        assert_eq!(err.place, Place { line: 1, column: 1 });
    }

    /// Arbitrary JSON values, nested a few levels.
    fn values() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            ".{0,6}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::vec((".{0,4}", inner), 0..4)
                    .prop_map(|kv| { serde_json::Value::Object(kv.into_iter().collect()) }),
            ]
        })
    }

    /// Every value in `v` with its path.
    fn every_value(
        v: &serde_json::Value,
        at: JsonPath,
        out: &mut Vec<(JsonPath, serde_json::Value)>,
    ) {
        out.push((at.clone(), v.clone()));
        match v {
            serde_json::Value::Array(a) => {
                for (i, e) in a.iter().enumerate() {
                    every_value(e, at.index(i), out);
                }
            }
            serde_json::Value::Object(o) => {
                for (k, e) in o {
                    every_value(e, at.key(k.as_str()), out);
                }
            }
            _ => {}
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        #[test]
        fn every_value_s_place_starts_that_value(v in values(), pretty in proptest::prelude::any::<bool>()) {
            let text = if pretty { serde_json::to_string_pretty(&v).unwrap() } else { v.to_string() };
            // Read back, not `v`: a float may not survive the round trip exactly.
            let read: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut all = Vec::new();
            every_value(&read, JsonPath::root(), &mut all);
            for (path, value) in all {
                // The text from that place begins with the value, and nothing else.
                proptest::prop_assert_eq!(value_at(&text, place(&text, &path)), Some(value), "{}", path);
            }
        }
    }

    #[test]
    fn a_line_index_places_offsets_as_place_of_offset_does() {
        let text = "ab\ncé\nxyz";
        let sut = LineIndex::new(text);
        let at = |line, column| Place { line, column };
        assert_eq!(sut.locate(0), at(1, 1));
        assert_eq!(sut.locate(2), at(1, 3));
        assert_eq!(sut.locate(3), at(2, 1));
        assert_eq!(sut.locate(6), at(2, 3));
        assert_eq!(sut.locate(5), at(2, 2), "inside é: its start");
        assert_eq!(sut.locate(99), at(3, 4));
        assert_eq!(LineIndex::new("").locate(5), at(1, 1));
        for offset in 0..=text.len() + 1 {
            assert_eq!(
                sut.locate(offset),
                place_of_offset(text, offset),
                "{offset}"
            );
        }
    }
}
