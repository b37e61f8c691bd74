//! [`CachePadded`]: keeps a value alone in its cache lines.
//!
//! ```
//! use ictus_core::sync::CachePadded;
//! use std::sync::atomic::{AtomicU64, Ordering};
//!
//! let counters = [CachePadded::new(AtomicU64::new(0)), CachePadded::new(AtomicU64::new(0))];
//! counters[1].fetch_add(1, Ordering::Relaxed);
//! assert_eq!(counters[1].load(Ordering::Relaxed), 1);
//! assert_eq!(std::mem::size_of_val(&counters), 256);
//! ```

use std::ops::{Deref, DerefMut};

/// A value aligned (and so sized) to 128 bytes, so that nothing else shares its
/// cache line, nor the adjacent line that the spatial prefetcher of x86 fetches
/// in pairs with it.
///
/// Put each index written by a different core in its own `CachePadded`: two
/// cores writing to one line make it bounce between their caches (false sharing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C, align(128))]
pub struct CachePadded<T> {
    value: T,
}

impl<T> CachePadded<T> {
    /// The size and alignment of the padding, in bytes.
    pub const ALIGN: usize = 128;

    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        CachePadded { value }
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T> From<T> for CachePadded<T> {
    fn from(value: T) -> Self {
        CachePadded::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, size_of};

    #[test]
    fn a_small_value_fills_exactly_one_padded_block() {
        assert_eq!(size_of::<CachePadded<u8>>(), 128);
        assert_eq!(align_of::<CachePadded<u8>>(), 128);
        assert_eq!(size_of::<CachePadded<u64>>(), CachePadded::<u64>::ALIGN);
    }

    #[test]
    fn a_large_value_rounds_up_to_whole_blocks() {
        assert_eq!(size_of::<CachePadded<[u8; 129]>>(), 256);
        assert_eq!(align_of::<CachePadded<[u8; 129]>>(), 128);
    }

    #[test]
    fn neighbours_in_an_array_start_128_bytes_apart() {
        let sut = [CachePadded::new(1u32), CachePadded::new(2u32)];
        let a = &*sut[0] as *const u32 as usize;
        let b = &*sut[1] as *const u32 as usize;
        assert_eq!(b - a, 128);
        assert_eq!(a % 128, 0);
    }

    #[test]
    fn deref_reaches_the_value() {
        let mut sut = CachePadded::new(vec![1, 2]);
        sut.push(3);
        assert_eq!(sut.len(), 3);
        assert_eq!(sut.into_inner(), vec![1, 2, 3]);
    }
}
