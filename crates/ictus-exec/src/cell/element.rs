//! The types of elements ([`ElemType`], [`ElemShape`]), the Rust types that
//! hold them ([`Element`], [`Scalar`]) and their little-endian encoding, and
//! [`ElementSlot`], an element's typed place in a buffer of its cell.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use serde::{Deserialize, Serialize};

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

/// A type-checked element position: encodes and decodes one element of type
/// `T` at its offset in a buffer holding the whole cell. `Copy`, no
/// allocation.
pub struct ElementSlot<T> {
    pub(super) cell: usize,
    pub(super) offset: usize,
    pub(super) _type: PhantomData<fn() -> T>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    }
}
