//! `webpki-roots`' API with no roots (see this crate's Cargo.toml): ictus's TLS and
//! QUIC links trust the run's CA, which Zenoh adds after this list, and nothing else.
#![no_std]
#![forbid(unsafe_code)]

use pki_types::TrustAnchor;

/// The public roots a client trusts besides its configured CA: none.
pub const TLS_SERVER_ROOTS: &[TrustAnchor<'static>] = &[];
