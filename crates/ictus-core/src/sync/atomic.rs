//! The one door to atomics, shared ownership and interior mutability for
//! `sync`: the standard library normally, [loom]'s model-checked twins under
//! `--cfg loom`.
//!
//! Both sides offer the same surface. [`UnsafeCell`] follows loom's shape
//! (`with` / `with_mut` hand a raw pointer to a closure) so that loom can see
//! every access to a cell and report a data race when two overlap.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    hint::spin_loop,
    sync::Arc,
    sync::atomic::{AtomicUsize, Ordering, fence},
};

#[cfg(not(loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::Arc,
    sync::atomic::{AtomicUsize, Ordering, fence},
};

/// The words that shared regions (seqlocks, hubs) are made of. Public, so that
/// memory the caller owns (a shared-memory mapping) can be handed in as
/// `&[AtomicU64]` / `&[AtomicU32]`.
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64};

/// The words that shared regions (seqlocks, hubs) are made of. Public, so that
/// memory the caller owns (a shared-memory mapping) can be handed in as
/// `&[AtomicU64]` / `&[AtomicU32]`.
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64};

/// `std::cell::UnsafeCell` with loom's access API.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a pointer for reading the value.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a pointer for writing the value.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
