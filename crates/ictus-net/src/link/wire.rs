//! The wire format of a run across hosts (docs/wire.md, which `python/ictus_zenoh`
//! mirrors): a cell publication, the claims a host serves, the layout a run serves.

use std::collections::BTreeMap;
use std::ops::Range;

use ictus_core::Nanos;
use ictus_exec::cell::Cells;
use ictus_exec::schedule::Schedule;

use crate::guard::Claims;

/// The version of the wire format (docs/wire.md), in the layout a run serves.
pub const WIRE_VERSION: u32 = 1;

/// One host's elements of one cell, as published: the writer's host, its clock
/// offset to the main host, the stamp of the publication on its clock, and each
/// range with its offset in the cell.
pub(crate) struct Publication<'a> {
    pub(crate) host: u16,
    pub(crate) offset: i64,
    pub(crate) stamp: u64,
    pub(crate) ranges: Vec<(usize, &'a [u8])>,
}

impl<'a> Publication<'a> {
    /// Host `host`'s elements `ranges` of a cell read into `cell`: the forwarder's
    /// and the view's publication of what this host's subsystems write.
    pub(crate) fn of(
        host: u16,
        offset: i64,
        stamp: u64,
        cell: &'a [u8],
        ranges: &[Range<usize>],
    ) -> Publication<'a> {
        Publication {
            host,
            offset,
            stamp,
            ranges: ranges.iter().map(|r| (r.start, &cell[r.clone()])).collect(),
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.host.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.stamp.to_le_bytes());
        out.extend_from_slice(&(self.ranges.len() as u16).to_le_bytes());
        for (at, data) in &self.ranges {
            out.extend_from_slice(&(*at as u32).to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(data);
        }
    }

    pub(crate) fn decode(b: &'a [u8]) -> Option<Publication<'a>> {
        let take = |at: &mut usize, n: usize| -> Option<&'a [u8]> {
            let s = b.get(*at..at.checked_add(n)?)?;
            *at += n;
            Some(s)
        };
        let mut at = 0;
        let host = u16::from_le_bytes(take(&mut at, 2)?.try_into().ok()?);
        let offset = i64::from_le_bytes(take(&mut at, 8)?.try_into().ok()?);
        let stamp = u64::from_le_bytes(take(&mut at, 8)?.try_into().ok()?);
        let n = u16::from_le_bytes(take(&mut at, 2)?.try_into().ok()?);
        // Each range takes 8 bytes at least: a count the rest cannot hold is refused
        // before anything is allocated for it.
        if usize::from(n) * 8 > b.len() - at {
            return None;
        }
        let mut ranges = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let off = u32::from_le_bytes(take(&mut at, 4)?.try_into().ok()?) as usize;
            let len = u32::from_le_bytes(take(&mut at, 4)?.try_into().ok()?) as usize;
            ranges.push((off, take(&mut at, len)?));
        }
        (at == b.len()).then_some(Publication {
            host,
            offset,
            stamp,
            ranges,
        })
    }
}

/// The bytes of a cell publication (docs/wire.md): host `host`'s elements `ranges`
/// (each its byte offset in the cell and its bytes), stamped `stamp` on the host's
/// clock, `offset` from the main host's. What a host publishes, for tools and tests
/// that speak the wire format without a link (an attacker's forgeries, for one).
pub fn publication_bytes(host: u16, offset: i64, stamp: u64, ranges: &[(usize, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    Publication {
        host,
        offset,
        stamp,
        ranges: ranges.to_vec(),
    }
    .encode(&mut out);
    out
}

/// A host's claims as served on `claims/H` (cell name to byte ranges), checked
/// against the table: per cell, its ranges.
pub(super) fn read_claims(bytes: &[u8], cells: &Cells) -> Result<Claims, String> {
    let read: BTreeMap<String, Vec<[usize; 2]>> =
        serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut claims: Claims = vec![Vec::new(); cells.len()];
    for (name, ranges) in read {
        let c = cells.cell_index(&name).map_err(|e| e.to_string())?;
        let size = cells.cell_bytes(c);
        for [a, b] in ranges {
            if a >= b || b > size {
                return Err(format!("bytes {a}..{b} of cell {name} ({size} bytes)"));
            }
            claims[c].push(a..b);
        }
    }
    Ok(claims)
}

/// The layout a run serves on `ictus/R/layout` (docs/wire.md): the wire version,
/// the run, its hosts (the first the main one) and tick, and per cell its size and
/// elements (name, type, array length, byte offset and size), in the table's order.
pub fn layout_json(
    run: &str,
    hosts: &[String],
    tick: Nanos,
    table: &ictus_exec::cell::CellTable,
) -> serde_json::Value {
    let cells: Vec<serde_json::Value> = table
        .cells()
        .iter()
        .map(|c| {
            let elements: Vec<serde_json::Value> = c
                .elements()
                .iter()
                .map(|e| {
                    let shape = e.shape();
                    serde_json::json!({
                        "name": e.name(),
                        "type": shape.ty,
                        "len": shape.len,
                        "offset": e.offset(),
                        "bytes": e.range().len(),
                    })
                })
                .collect();
            serde_json::json!({"name": c.name(), "bytes": c.bytes(), "elements": elements})
        })
        .collect();
    serde_json::json!({
        "wire": WIRE_VERSION,
        "run": run,
        "hosts": hosts,
        "tick_ns": tick.as_u64(),
        "byte_order": "little-endian",
        "cells": cells,
    })
}

/// The largest message a run's peers send each other: a publication of a whole cell
/// (its bytes, a 20-byte header and at most 65,535 ranges of 8 bytes each) or a hub
/// message, twice over, and 1 MiB for the rest (status, outcomes with their
/// explanations, setup requests, which the setup store bounds apart). Anything
/// larger is dropped by Zenoh on arrival ([`crate::bound_messages`]): with the
/// schedule's limits (a cell of at most 16 MiB) it is at most 34 MiB, where Zenoh's
/// own default is 1 GiB.
pub fn message_bound(schedule: &Schedule) -> usize {
    let cells = schedule
        .cell_table()
        .map(|t| t.cells().iter().map(|c| c.bytes()).max().unwrap_or(0))
        .unwrap_or(0);
    let hubs = schedule
        .hubs
        .iter()
        .filter_map(|h| match h.kind() {
            ictus_exec::hub::HubKind::Fifo { message, .. }
            | ictus_exec::hub::HubKind::Port { message } => message.bytes(),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let largest = (cells + 20 + 8 * usize::from(u16::MAX)).max(hubs);
    largest
        .saturating_mul(2)
        .saturating_add(crate::MIN_MESSAGE_BOUND)
}
