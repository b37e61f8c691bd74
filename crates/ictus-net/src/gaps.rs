//! What the link dropped (issue 30): cells go with Zenoh's `Drop` congestion
//! control (latest value wins: no forwarder waits on a full queue), so a host whose
//! link cannot keep up loses publications instead of stalling its sender. Each
//! publication is numbered by its sender (per cell, from 1, in the attachment next
//! to the handed stamp: docs/wire.md), and a receiver counts the numbers that never
//! came, per sender: the run names the host and what it dropped.
//!
//! ```
//! # use ictus_net::gaps::{Attachment, Gaps};
//! let a = Attachment { handed: 7, number: 3 };
//! assert_eq!(Attachment::decode(&a.encode()), (Some(7), Some(3)));
//! // A sender's first publication seen counts from there; 4 and 5 never came.
//! let mut g = Gaps::new(1, 2);
//! g.seen(0, 1, 3);
//! g.seen(0, 1, 6);
//! assert_eq!(g.dropped(), &[0, 2]);
//! ```

/// A cell publication's attachment: when its sender handed it to Zenoh (its clock,
/// ns) and its number (per sender and cell, from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The handed stamp.
    pub handed: u64,
    /// The publication's number.
    pub number: u64,
}

impl Attachment {
    /// 16 bytes: the stamp, then the number, u64 little-endian each.
    pub fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.handed.to_le_bytes());
        b[8..].copy_from_slice(&self.number.to_le_bytes());
        b
    }

    /// The stamp and the number an attachment carries: both from 16 bytes, the
    /// stamp alone from 8 (a sender of wire version 1 before numbering), neither
    /// from any other size.
    pub fn decode(b: &[u8]) -> (Option<u64>, Option<u64>) {
        let word = |s: &[u8]| s.try_into().ok().map(u64::from_le_bytes);
        match b.len() {
            8 => (word(b), None),
            16 => (word(&b[..8]), word(&b[8..])),
            _ => (None, None),
        }
    }
}

/// Per sender and cell, the last number seen; per sender, the numbers that never
/// came.
#[derive(Debug)]
pub struct Gaps {
    hosts: usize,
    last: Vec<u64>,
    dropped: Vec<u64>,
}

impl Gaps {
    /// Nothing seen yet, for `cells` cells and `hosts` hosts.
    pub fn new(cells: usize, hosts: usize) -> Gaps {
        Gaps {
            hosts,
            last: vec![0; cells * hosts],
            dropped: vec![0; hosts],
        }
    }

    /// Host `host`'s publication `number` of cell `cell` arrived. The transport keeps
    /// a publisher's order, so a number past the next one means those between were
    /// dropped; the first number seen of a sender counts from there (this host may
    /// have subscribed after it began).
    pub fn seen(&mut self, cell: usize, host: usize, number: u64) {
        let Some(last) = self.last.get_mut(cell * self.hosts + host) else {
            return;
        };
        if *last != 0 && number > *last + 1 {
            self.dropped[host] += number - *last - 1;
        }
        *last = (*last).max(number);
    }

    /// Per host, the publications of its that never came.
    pub fn dropped(&self) -> &[u64] {
        &self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_count_per_sender_and_cell_from_the_first_number_seen() {
        let mut g = Gaps::new(2, 3);
        for n in [5, 6, 7, 9] {
            g.seen(0, 2, n);
        }
        g.seen(1, 2, 1);
        g.seen(1, 2, 4);
        g.seen(1, 1, 10);
        g.seen(1, 1, 11);
        assert_eq!(g.dropped(), &[0, 0, 3]);
        // Out of range, or a number seen again: nothing counted.
        g.seen(5, 0, 9);
        g.seen(1, 1, 11);
        assert_eq!(g.dropped(), &[0, 0, 3]);
        assert_eq!(Attachment::decode(&[0; 3]), (None, None));
        assert_eq!(Attachment::decode(&9u64.to_le_bytes()), (Some(9), None));
    }
}
