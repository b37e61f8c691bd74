//! Bad and large input files: schedules, cell tables and hub tables are checked in
//! linear time, never panic, and every refusal of a file with content starts with
//! `FILE:LINE:COLUMN:`. Structure only, never timings: the large cases are sized so
//! that a quadratic check would take minutes (a hang in CI), not to be measured.

use std::fmt::Write as _;

use ictus_core::CpuSet;
use ictus_exec::cell::{CellError, CellFileError, CellTable, MAX_CELLS};
use ictus_exec::hub::decls_from_toml;
use ictus_exec::schedule::{Location, Rule, Schedule, ScheduleError};
use ictus_os::fs::{InputError, InputKind, Located, text_of};
use proptest::prelude::*;

/// Cells in the large cases: 50,000 (about 1.25e9 pairs for a quadratic check).
const MANY: usize = 50_000;

fn online() -> CpuSet {
    CpuSet::from_cpus([0, 1])
}

/// `n` `[[cell]]` tables of one element each, three lines per cell; cell `i` has
/// its name on line `first_line + 3 i + 1`.
fn cells(n: usize) -> String {
    let mut out = String::with_capacity(n * 70);
    for i in 0..n {
        writeln!(
            out,
            "[[cell]]\nname = \"c{i}\"\nelements = [ {{ name = \"x\", type = \"i32\", len = 2 }} ]"
        )
        .unwrap();
    }
    out
}

const HEAD: &str = "tick = \"1ms\"\nmajor_frame = 1\n[[subsystem]]\nname = \"a\"\nbuiltin = \"increment\"\nconfig = { from = \"c0\", to = \"c49999\" }\n[stress]\ncounters = [\"c7.x\"]\n";

#[test]
fn fifty_thousand_cells_are_checked_and_a_last_duplicate_is_placed() {
    let table = cells(MANY);
    let sut = CellTable::from_toml_str(&table, "cells.toml").unwrap();
    assert_eq!(sut.cells().len(), MANY);
    assert_eq!(sut.cell_index("c49999").unwrap(), MANY - 1);
    assert_eq!(sut.locate("c12345.x").unwrap().cell, 12345);

    let dup = format!(
        "{table}[[cell]]\nname = \"c17\"\nelements = [ {{ name = \"x\", type = \"u8\" }} ]\n"
    );
    match CellTable::from_toml_str(&dup, "cells.toml").unwrap_err() {
        CellFileError::Invalid(Located {
            place,
            what: CellError::DuplicateCell { name },
            ..
        }) => {
            assert_eq!((place.line, place.column), (3 * MANY + 2, 8));
            assert_eq!(name, "c17");
        }
        e => panic!("{e}"),
    }

    // The same inline in a schedule, with a builtin and a counter checked against it.
    let text = format!("{HEAD}{table}");
    let schedule = Schedule::parse(&text, "big.toml", &online()).unwrap();
    assert_eq!(schedule.cell_table().unwrap().cells().len(), MANY);
    let err = Schedule::parse(&format!("{HEAD}{dup}"), "big.toml", &online()).unwrap_err();
    assert!(matches!(err.rule(), Some(Rule::Cell(m)) if m.contains("`c17` is declared twice")));
    let ScheduleError::Invalid { location, .. } = err else {
        panic!("{err}")
    };
    let head_lines = HEAD.lines().count();
    assert_eq!(
        location,
        Location {
            line: head_lines + 3 * MANY + 2,
            column: 8
        }
    );
}

#[test]
fn a_table_over_the_cell_count_is_refused_at_the_first_cell_past_it() {
    let text = cells(MAX_CELLS + 1);
    let err = CellTable::from_toml_str(&text, "cells.toml").unwrap_err();
    assert!(
        matches!(
            err,
            CellFileError::Invalid(Located {
                what: CellError::TooManyCells { .. },
                ..
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("cells.toml:{}:8: ", 3 * MAX_CELLS + 2)),
        "{err}"
    );
}

/// Whether `message` starts with `file:LINE:COLUMN: ` with LINE within the text.
fn is_placed(message: &str, file: &str, text: &str) -> bool {
    let Some(rest) = message.strip_prefix(&format!("{file}:")) else {
        return false;
    };
    let mut parts = rest.splitn(3, ':');
    let (Some(line), Some(column), Some(tail)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(line), Ok(column)) = (line.parse::<usize>(), column.parse::<usize>()) else {
        return false;
    };
    line >= 1 && line <= text.lines().count() + 1 && column >= 1 && tail.starts_with(' ')
}

/// A valid schedule with every kind of table, for mutations.
const VALID: &str = r#"name = "fuzz"
tick = "1ms"
major_frame = 4
wait = "hybrid"
margin = "100us"
modes = ["setup"]
initial_state = "run"

[stress]
counters = ["A.int"]

[[cell]]
name = "A"
elements = [ { name = "int", type = "i32" }, { name = "f", type = "f32", len = 4 } ]

[[cell]]
name = "B"
elements = [ { name = "int", type = "i32" }, { name = "f", type = "f32", len = 4 } ]

[[subsystem]]
name = "a"
start = 0
period = 2
cpu = 1
class = "rt1"
priority = 80
builtin = "increment"
config = { from = "A", to = "B" }

[[subsystem]]
name = "b"
period = 4
class = "rt0"
cpu = 0
builtin = "idle"

[[hub]]
name = "forces"
kind = "fifo"
type = "f32"
len = 3
capacity = 16
"#;

/// Values that break rules in interesting ways.
const TOKENS: &[&str] = &[
    "0",
    "-1",
    "18446744073709551615",
    "1e400",
    "\"\"",
    "\"1000years\"",
    "\"0ns\"",
    "\"Z\"",
    "\"Q.int\"",
    "\"rt0\"",
    "\"fifo\"",
    "[]",
    "{}",
    "true",
    "\"\u{e9}\u{0}\"",
    "1048576",
    "4294967296",
    "[[cell]]",
    "[[hub]]",
    "=",
];

/// One structured change to a line-based text.
#[derive(Clone, Debug)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    ReplaceValue(usize, usize),
    InsertText(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(l, t)| Mutation::ReplaceValue(l, t)),
        (any::<usize>(), "\\PC{0,12}").prop_map(|(at, s)| Mutation::InsertText(at, s)),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for m in mutations {
        let n = lines.len().max(1);
        match m {
            Mutation::DeleteLine(i) if !lines.is_empty() => {
                lines.remove(i % n);
            }
            Mutation::DuplicateLine(i) if !lines.is_empty() => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Mutation::ReplaceValue(i, t) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                if let Some((key, _)) = l.split_once('=') {
                    *l = format!("{key}= {}", TOKENS[*t]);
                }
            }
            Mutation::InsertText(i, s) if !lines.is_empty() => {
                let l = &mut lines[i % n];
                let mut at = i % (l.len() + 1);
                while !l.is_char_boundary(at) {
                    at -= 1;
                }
                l.insert_str(at, s);
            }
            _ => {}
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_as_a_schedule_are_refused_in_place_or_read(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        match text_of(std::path::Path::new("s.toml"), bytes.clone(), InputKind::Table.max_bytes()) {
            Ok(text) => {
                if let Err(e) = Schedule::parse(&text, "s.toml", &online()) {
                    prop_assert!(text.is_empty() || is_placed(&e.to_string(), "s.toml", &text), "{}", e);
                }
            }
            Err(e) => {
                let place = e.place();
                prop_assert!(place.is_some(), "{}", e);
                prop_assert!(matches!(e, InputError::NotUtf8 { .. }), "{}", e);
            }
        }
    }

    #[test]
    fn any_text_as_a_schedule_cell_table_or_hub_table_is_refused_in_place(text in "\\PC{0,300}") {
        if let Err(e) = Schedule::parse(&text, "s.toml", &online()) {
            prop_assert!(text.is_empty() || is_placed(&e.to_string(), "s.toml", &text), "{}", e);
        }
        if let Err(e) = CellTable::from_toml_str(&text, "c.toml") {
            prop_assert!(is_placed(&e.to_string(), "c.toml", &text), "{}", e);
        }
        if let Err(e) = decls_from_toml(&text, "h.toml") {
            prop_assert!(is_placed(&e.to_string(), "h.toml", &text), "{}", e);
        }
    }

    #[test]
    fn a_mutated_schedule_is_read_or_refused_in_place(mutations in proptest::collection::vec(mutation(), 1..4)) {
        let text = apply(VALID, &mutations);
        if let Err(e) = Schedule::parse(&text, "s.toml", &online()) {
            prop_assert!(is_placed(&e.to_string(), "s.toml", &text), "{}\n{}", e, text);
        }
    }

    #[test]
    fn a_mutated_cell_or_hub_table_is_read_or_refused_in_place(mutations in proptest::collection::vec(mutation(), 1..4)) {
        let cells = VALID.split("[[subsystem]]").next().unwrap_or_default();
        let cells = &cells[cells.find("[[cell]]").unwrap_or(0)..];
        let text = apply(cells, &mutations);
        if let Err(e) = CellTable::from_toml_str(&text, "c.toml") {
            prop_assert!(is_placed(&e.to_string(), "c.toml", &text), "{}\n{}", e, text);
        }
        let hubs = &VALID[VALID.find("[[hub]]").unwrap_or(0)..];
        let text = apply(hubs, &mutations);
        if let Err(e) = decls_from_toml(&text, "h.toml") {
            prop_assert!(is_placed(&e.to_string(), "h.toml", &text), "{}\n{}", e, text);
        }
    }
}

#[test]
fn the_valid_schedule_of_the_mutations_reads() {
    let sut = Schedule::parse(VALID, "s.toml", &online()).unwrap();
    assert_eq!(sut.subsystems.len(), 2);
    assert_eq!(sut.hubs.len(), 1);
    assert_eq!(sut.cell_table().unwrap().cells().len(), 2);
}

#[test]
fn the_examples_still_read() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for f in ["stress/schedule.toml", "haptic/schedule.toml"] {
        let online = CpuSet::from_cpus(0..64);
        let s = Schedule::from_file(&root.join(f), &online).unwrap_or_else(|e| panic!("{e}"));
        let table = s.cell_table().unwrap();
        if f.starts_with("stress") {
            assert!(table.cells().iter().all(|c| c.bytes() == 4872));
        }
    }
}
