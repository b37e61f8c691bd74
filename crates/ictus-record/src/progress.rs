//! [`Progress`]: how far a probe has come, and a way to ask it to stop, shared with
//! whoever watches (the CLI draws a bar from it; a Ctrl-C handler sets the stop flag).
//!
//! ```
//! use ictus_record::progress::Progress;
//! let p = Progress::new();
//! p.set_total(100);
//! p.advance(40);
//! assert_eq!((p.done(), p.total()), (40, 100));
//! p.request_stop();
//! assert!(p.stop_requested());
//! ```

#![allow(
    clippy::disallowed_types,
    reason = "counters read for a report: relaxed increments, read once the writers are done"
)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Shared progress counters and stop flag. All operations are lock-free.
#[derive(Debug, Default)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
    stop: AtomicBool,
    finished: AtomicBool,
    label: Mutex<String>,
}

impl Progress {
    /// Nothing done, nothing to do yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the amount of work (in the probe's own units, e.g. periods).
    pub fn set_total(&self, total: u64) {
        // Relaxed: progress figures order nothing; they are only displayed.
        self.total.store(total, Ordering::Relaxed);
    }
    /// Adds `n` units of work done.
    #[inline]
    pub fn advance(&self, n: u64) {
        // Relaxed: see `set_total`.
        self.done.fetch_add(n, Ordering::Relaxed);
    }
    /// Sets the units done (for a watcher that computes it).
    pub fn set_done(&self, done: u64) {
        // Relaxed: see `set_total`.
        self.done.store(done, Ordering::Relaxed);
    }
    /// Names what is being done now (a survey's current step). Not for hot paths.
    pub fn set_label(&self, label: &str) {
        let mut l = self.label.lock().unwrap_or_else(|e| e.into_inner());
        l.clear();
        l.push_str(label);
    }
    /// What is being done now.
    pub fn label(&self) -> String {
        self.label.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    /// Units done so far.
    pub fn done(&self) -> u64 {
        // Relaxed: see `set_total`.
        self.done.load(Ordering::Relaxed)
    }
    /// Units to do.
    pub fn total(&self) -> u64 {
        // Relaxed: see `set_total`.
        self.total.load(Ordering::Relaxed)
    }
    /// Asks the probe to stop early; it returns what it has, marked incomplete.
    pub fn request_stop(&self) {
        // Relaxed: the flag carries no data; a probe notices it within one period.
        self.stop.store(true, Ordering::Relaxed);
    }
    /// Whether a stop was requested.
    #[inline]
    pub fn stop_requested(&self) -> bool {
        // Relaxed: see `request_stop`.
        self.stop.load(Ordering::Relaxed)
    }
    /// Marks the probe as finished (the watcher may stop drawing).
    pub fn finish(&self) {
        // Release: pairs with the Acquire load in `is_finished`, so a watcher that sees
        // the flag also sees the final `done` count.
        self.finished.store(true, Ordering::Release);
    }
    /// Whether the probe has finished.
    pub fn is_finished(&self) -> bool {
        // Acquire: pairs with the Release store in `finish`.
        self.finished.load(Ordering::Acquire)
    }
}
