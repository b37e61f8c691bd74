//! [`Provenance`]: where and how a record was measured. It lives in
//! [`ictus_os::provenance`], below this crate and `ictus-shield`, so that probe records
//! and scenario results carry the same header; this path stays for existing users.
//!
//! ```no_run
//! let mut p = ictus_record::provenance::Provenance::capture(std::env::args().collect());
//! p.finish();
//! assert!(p.end_time.is_some());
//! ```

pub use ictus_os::provenance::Provenance;
