//! Seed 003's total system stress test (Figures 11 and 12, Table 1): subsystems in a
//! ring, each reading one cell, adding one to every value, and writing the next
//! cell. As long as every transfer is on time the values grow by one per frame, so
//! after the run `missed frames = frames in RUN - the largest final value`.
//!
//! [`Increment`] is the ring's subsystem (`builtin = "increment"` with
//! `config = { from = "A", to = "B" }`); [`check`] reads the final values and also
//! checks that every element of each cell carries the same count (a frame-coherent
//! transfer never mixes two frames in one cell).
//!
//! ```
//! use ictus_exec::cell::{CellTable, Cells, ElemType};
//! use ictus_exec::stress::{increment, check};
//! let mut b = CellTable::builder();
//! b.cell("A").element("int", ElemType::I32, 1).element("f", ElemType::F32, 4);
//! let table = b.build().unwrap();
//! let cells = Cells::in_process(&table);
//! let layout = &table.cells()[0];
//! let mut buf = cells.new_buffer(0);
//! let mut next = buf.clone();
//! for _ in 0..7 {
//!     increment(layout, &buf, &mut next);
//!     buf.copy_from_slice(&next);
//! }
//! cells.write_cell(0, &buf);
//! let r = check(&cells, &["A.int".to_string()], 9).unwrap();
//! assert_eq!((r.final_value, r.missed_frames, r.incoherent_cells), (7, 2, 0));
//! ```

use crate::cell::{CellDecl, CellError, CellTable, Cells, ElemType};
use crate::report::StressReport;
use crate::state::StateId;
use crate::subsystem::{Flow, Frame, RawPort, Registry, RegistryError, Subsystem};

/// Adds one to every value of a cell laid out as `layout`, from `input` into
/// `output` (integers wrap, floats add 1.0, booleans flip, characters move to the
/// next code point). Never allocates.
pub fn increment(layout: &CellDecl, input: &[u8], output: &mut [u8]) {
    for e in layout.elements() {
        let r = e.range();
        let (src, dst) = (&input[r.clone()], &mut output[r]);
        let size = e.shape().ty.size();
        for (s, d) in src.chunks_exact(size).zip(dst.chunks_exact_mut(size)) {
            bump(e.shape().ty, s, d);
        }
    }
}

macro_rules! add_one {
    ($t:ty, $one:expr, $s:expr, $d:expr) => {{
        let v = <$t>::from_le_bytes($s.try_into().unwrap_or_default());
        $d.copy_from_slice(&add(v, $one).to_le_bytes());
    }};
}

trait AddOne: Copy {
    fn plus(self, one: Self) -> Self;
}
macro_rules! wrapping {
    ($($t:ty),*) => {$(impl AddOne for $t { fn plus(self, one: Self) -> Self { self.wrapping_add(one) } })*};
}
wrapping!(i8, i16, i32, i64, u8, u16, u32, u64);
impl AddOne for f32 {
    fn plus(self, one: Self) -> Self {
        self + one
    }
}
impl AddOne for f64 {
    fn plus(self, one: Self) -> Self {
        self + one
    }
}
fn add<T: AddOne>(v: T, one: T) -> T {
    v.plus(one)
}

#[inline]
fn bump(ty: ElemType, s: &[u8], d: &mut [u8]) {
    match ty {
        ElemType::I8 => add_one!(i8, 1, s, d),
        ElemType::I16 => add_one!(i16, 1, s, d),
        ElemType::I32 => add_one!(i32, 1, s, d),
        ElemType::I64 => add_one!(i64, 1, s, d),
        ElemType::U8 => add_one!(u8, 1, s, d),
        ElemType::U16 => add_one!(u16, 1, s, d),
        ElemType::U32 => add_one!(u32, 1, s, d),
        ElemType::U64 => add_one!(u64, 1, s, d),
        ElemType::F32 => add_one!(f32, 1.0, s, d),
        ElemType::F64 => add_one!(f64, 1.0, s, d),
        ElemType::Bool => d[0] = u8::from(s[0] == 0),
        ElemType::Char => {
            let c = u32::from_le_bytes(s.try_into().unwrap_or_default());
            let next = char::from_u32(c.wrapping_add(1)).map_or(0, u32::from);
            d.copy_from_slice(&next.to_le_bytes());
        }
    }
}

/// The ring's subsystem: in RUN, copies cell `from` into cell `to` adding one to
/// every value; in other states it holds its output.
#[derive(Debug)]
pub struct Increment {
    ports: (RawPort, RawPort),
    layout: CellDecl,
}

impl Increment {
    /// A ring member from `from` to `to`, whatever its config says (for programs
    /// that run it as a child: `Maker::with(|reg| Increment::between(reg, "A", "B"))`).
    pub fn between(reg: &mut Registry, from: &str, to: &str) -> Result<Increment, RegistryError> {
        let input = reg.input_cell(from)?;
        let output = reg.output_cell(to)?;
        let table = reg.cells().table();
        let (a, b) = (table.cell(from), table.cell(to));
        let same = match (a, b) {
            (Some(a), Some(b)) => {
                a.elements().len() == b.elements().len()
                    && a.elements()
                        .iter()
                        .zip(b.elements())
                        .all(|(x, y)| x.shape() == y.shape())
            }
            _ => false,
        };
        let layout = match (a, same) {
            (Some(a), true) => a.clone(),
            _ => {
                return Err(RegistryError::Config {
                    subsystem: reg.name().to_string(),
                    message: format!(
                        "cells {from} and {to} must have the same elements to increment one into the other"
                    ),
                });
            }
        };
        Ok(Increment {
            ports: (input, output),
            layout,
        })
    }
}

impl Subsystem for Increment {
    type Error = RegistryError;

    /// Reads `from` and `to` (cell names) from its config.
    fn init(reg: &mut Registry) -> Result<Increment, RegistryError> {
        let get = |key: &str| {
            reg.config()
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::to_string)
                .ok_or_else(|| RegistryError::Config {
                    subsystem: reg.name().to_string(),
                    message: format!("the increment builtin needs config.{key}, a cell name"),
                })
        };
        let (from, to) = (get("from")?, get("to")?);
        Increment::between(reg, &from, &to)
    }

    fn run(&mut self, frame: &mut Frame) -> Result<Flow, RegistryError> {
        if frame.state() == StateId::RUN {
            let (i, o) = &self.ports;
            let (input, output) = frame.raw_pair(i, o);
            increment(&self.layout, input, output);
        }
        Ok(Flow::Continue)
    }
}

/// The value of the element at `bytes` as an integer count, if it is a number.
fn count_of(ty: ElemType, b: &[u8]) -> Option<i128> {
    let arr = |n: usize| b.get(..n);
    Some(match ty {
        ElemType::I8 => i8::from_le_bytes(arr(1)?.try_into().ok()?).into(),
        ElemType::I16 => i16::from_le_bytes(arr(2)?.try_into().ok()?).into(),
        ElemType::I32 => i32::from_le_bytes(arr(4)?.try_into().ok()?).into(),
        ElemType::I64 => i64::from_le_bytes(arr(8)?.try_into().ok()?).into(),
        ElemType::U8 => u8::from_le_bytes(arr(1)?.try_into().ok()?).into(),
        ElemType::U16 => u16::from_le_bytes(arr(2)?.try_into().ok()?).into(),
        ElemType::U32 => u32::from_le_bytes(arr(4)?.try_into().ok()?).into(),
        ElemType::U64 => u64::from_le_bytes(arr(8)?.try_into().ok()?).into(),
        ElemType::F32 => f32::from_le_bytes(arr(4)?.try_into().ok()?) as i128,
        ElemType::F64 => f64::from_le_bytes(arr(8)?.try_into().ok()?) as i128,
        ElemType::Bool | ElemType::Char => return None,
    })
}

/// Whether `value` (a count) agrees with `v` stored as `ty` (modulo its width).
fn agrees(ty: ElemType, v: i128, count: i128) -> bool {
    match ty {
        ElemType::I8 | ElemType::U8 => (v - count).rem_euclid(1 << 8) == 0,
        ElemType::I16 | ElemType::U16 => (v - count).rem_euclid(1 << 16) == 0,
        ElemType::I32 | ElemType::U32 => (v - count).rem_euclid(1 << 32) == 0,
        ElemType::I64 | ElemType::U64 => (v - count).rem_euclid(1 << 64) == 0,
        // Floats hold counts exactly up to 2^24 (f32) and 2^53 (f64).
        ElemType::F32 => count > (1 << 24) || v == count,
        ElemType::F64 => count > (1 << 53) || v == count,
        ElemType::Bool | ElemType::Char => true,
    }
}

/// Checks that `counter` (`cell.element`) names an element of `table`, as
/// [`check`] will need after the run: pure, for checking a schedule on load.
pub fn check_counter(table: &CellTable, counter: &str) -> Result<(), CellError> {
    table.locate(counter).map(|_| ())
}

/// Reads the counters (`cell.element`) and compares the largest with `run_frames`.
pub fn check(
    cells: &Cells,
    counters: &[String],
    run_frames: u64,
) -> Result<StressReport, CellError> {
    let mut values = Vec::new();
    let mut incoherent = 0;
    for path in counters {
        let loc = cells.locate(path)?;
        let mut buf = cells.new_buffer(loc.cell);
        cells.read_cell(loc.cell, &mut buf);
        let count = count_of(loc.shape.ty, &buf[loc.range()]).unwrap_or(0);
        let layout = &cells.table().cells()[loc.cell];
        let coherent = layout.elements().iter().all(|e| {
            let size = e.shape().ty.size();
            buf[e.range()]
                .chunks_exact(size)
                .all(|b| count_of(e.shape().ty, b).is_none_or(|v| agrees(e.shape().ty, v, count)))
        });
        if !coherent {
            incoherent += 1;
        }
        values.push((path.clone(), count as i64));
    }
    let final_value = values.iter().map(|v| v.1).max().unwrap_or(0);
    Ok(StressReport {
        run_frames,
        final_value,
        missed_frames: run_frames as i64 - final_value,
        counters: values,
        incoherent_cells: incoherent,
    })
}

/// Seed 003's stress cell `name` (as `examples/stress/cells.toml` declares A, B and
/// C), for the crate's tests.
#[cfg(test)]
pub(crate) fn seed_cell(b: &mut crate::cell::CellTableBuilder, name: &str) {
    b.cell(name)
        .element("int", ElemType::I32, 1)
        .element("int12", ElemType::I32, 12)
        .element("int200", ElemType::I32, 200)
        .element("short", ElemType::I16, 1)
        .element("short5", ElemType::I16, 5)
        .element("short200", ElemType::I16, 200)
        .element("float", ElemType::F32, 1)
        .element("float64", ElemType::F32, 64)
        .element("float256", ElemType::F32, 256)
        .element("double", ElemType::F64, 1)
        .element("double256", ElemType::F64, 256)
        .element("char4", ElemType::U8, 4)
        .element("char8", ElemType::U8, 8)
        .element("char256", ElemType::U8, 256);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incrementing_keeps_every_element_on_the_count() {
        let mut b = CellTable::builder();
        seed_cell(&mut b, "A");
        let table = b.build().unwrap();
        assert_eq!(table.cells()[0].bytes(), 4872);
        let cells = Cells::in_process(&table);
        let mut buf = cells.new_buffer(0);
        let mut next = buf.clone();
        for _ in 0..300 {
            increment(&table.cells()[0], &buf, &mut next);
            buf.copy_from_slice(&next);
        }
        cells.write_cell(0, &buf);
        let r = check(&cells, &["A.int".into()], 300).unwrap();
        assert_eq!(r.final_value, 300);
        assert_eq!(r.missed_frames, 0);
        assert_eq!(
            r.incoherent_cells, 0,
            "chars wrap at 256, shorts would at 65536"
        );
    }

    #[test]
    fn a_cell_mixing_two_counts_is_incoherent() {
        let mut b = CellTable::builder();
        b.cell("A")
            .element("int", ElemType::I32, 1)
            .element("d", ElemType::F64, 2);
        let table = b.build().unwrap();
        let cells = Cells::in_process(&table);
        let mut buf = cells.new_buffer(0);
        buf[..4].copy_from_slice(&5i32.to_le_bytes());
        buf[4..12].copy_from_slice(&5f64.to_le_bytes());
        buf[12..20].copy_from_slice(&4f64.to_le_bytes());
        cells.write_cell(0, &buf);
        assert_eq!(
            check(&cells, &["A.int".into()], 5)
                .unwrap()
                .incoherent_cells,
            1
        );
    }
}
