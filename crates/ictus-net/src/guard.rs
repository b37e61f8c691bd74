//! What the receiving coordinator checks of what other hosts send, beyond what
//! Zenoh's access rules can say ([`crate::security`]): that a host's publication of a
//! cell carries only the elements that host's subsystems write (its claims, learned
//! from the host itself on its `claims/H` queryable before the run starts), that it
//! decodes and names its own host, that a status is not oversized. Anything else is
//! refused whole (nothing of it is copied into a table), counted by sender and kind,
//! and reported once per sender and kind as a warning that marks the run not clean.
//!
//! Publications that arrive before their host's claims are known (its initial
//! values, or all of them while the link to it is still being made) are held, the
//! latest per cell, and checked when they are. A host whose claims never came has
//! its held publications counted as refused at the end.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

pub use ictus_exec::report::RefusedFigure;

/// The longest status a node may send (its subsystems' counters: a few hundred
/// bytes each).
pub const STATUS_MAX_BYTES: usize = 64 * 1024;

/// Why something from another host was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// A publication of a cell the table does not have.
    UnknownCell,
    /// A publication under a host name the schedule does not have.
    UnknownHost,
    /// A publication of cell (index) that does not decode.
    Undecodable(usize),
    /// A publication of cell (index) whose content names another host than its key.
    NotItsName(usize),
    /// A publication of cell (index) with elements its host does not write.
    NotItsElements(usize),
    /// A status over [`STATUS_MAX_BYTES`] or that does not decode.
    BadStatus,
    /// A setup request the store refused (full, too large).
    SetupRefused,
    /// A status or an outcome about a subsystem the schedule gives another host.
    NotItsSubsystem,
    /// Claims of elements of cell (index) that the schedule does not give the
    /// host's subsystems to write (their `writes`).
    ClaimsBeyondSchedule(usize),
    /// Claims of elements of cell (index) that another host claimed first: one
    /// writer per element across hosts, as on one host.
    ClaimsOverlap(usize),
}

/// Per cell, the byte ranges one host writes.
pub type Claims = Vec<Vec<Range<usize>>>;

/// The checks and their counts, shared by the subscribers' callbacks (Zenoh's
/// threads) and the coordinator's thread, behind a lock neither real-time.
#[derive(Debug, Default)]
pub struct Guard {
    hosts: Vec<String>,
    cells: Vec<String>,
    /// Per host, once known.
    claims: Vec<Option<Claims>>,
    /// Per host, what the schedule gives its subsystems to write, where it says.
    scheduled: Vec<Option<Claims>>,
    pending: BTreeMap<(usize, usize), Vec<u8>>,
    refused: BTreeMap<(Option<usize>, Refusal), u64>,
    reported: BTreeSet<(Option<usize>, Refusal)>,
}

impl Guard {
    /// A guard for a run of `hosts` with cells named `cells`.
    pub fn new(hosts: Vec<String>, cells: Vec<String>) -> Guard {
        Guard {
            claims: vec![None; hosts.len()],
            scheduled: vec![None; hosts.len()],
            hosts,
            cells,
            ..Guard::default()
        }
    }

    /// The host index of a name, if the schedule has it.
    pub fn host(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h == name)
    }

    /// Whether host `h`'s claims are known.
    pub fn has_claims(&self, h: usize) -> bool {
        self.claims.get(h).is_some_and(Option::is_some)
    }

    /// Sets host `h`'s claims; returns its publications held until now (cell,
    /// bytes), to check.
    pub fn set_claims(&mut self, h: usize, claims: Claims) -> Vec<(usize, Vec<u8>)> {
        if let Some(why) = self.judge_claims(h, &claims) {
            // Refused: its publications stay held, never copied.
            self.refuse(Some(h), why);
            return Vec::new();
        }
        if let Some(slot) = self.claims.get_mut(h) {
            *slot = Some(claims);
        }
        let held: Vec<(usize, usize)> = self
            .pending
            .keys()
            .filter(|(_, host)| *host == h)
            .copied()
            .collect();
        held.into_iter()
            .filter_map(|k| self.pending.remove(&k).map(|b| (k.0, b)))
            .collect()
    }

    /// What the schedule gives host `h`'s subsystems to write: its claims must lie
    /// inside (else they are refused, and so is everything it publishes).
    pub fn set_scheduled(&mut self, h: usize, writes: Claims) {
        if let Some(slot) = self.scheduled.get_mut(h) {
            *slot = Some(writes);
        }
    }

    /// Why host `h`'s `claims` are refused, if they are: an element outside what the
    /// schedule gives its subsystems, or one another host claimed.
    fn judge_claims(&self, h: usize, claims: &Claims) -> Option<Refusal> {
        let inside = |outer: &[Range<usize>], r: &Range<usize>| {
            outer.iter().any(|o| o.start <= r.start && r.end <= o.end)
        };
        let overlap = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
        for (c, ranges) in claims.iter().enumerate() {
            if let Some(Some(scheduled)) = self.scheduled.get(h) {
                let given = scheduled.get(c).map_or(&[][..], Vec::as_slice);
                if !ranges.iter().all(|r| inside(given, r)) {
                    return Some(Refusal::ClaimsBeyondSchedule(c));
                }
            }
            let taken = self
                .claims
                .iter()
                .enumerate()
                .filter(|&(o, _)| o != h)
                .filter_map(|(_, other)| other.as_ref()?.get(c))
                .flatten()
                .any(|o| ranges.iter().any(|r| overlap(r, o)));
            if taken {
                return Some(Refusal::ClaimsOverlap(c));
            }
        }
        None
    }

    /// Holds the latest publication of `cell` by `host` until its claims are known.
    pub fn hold(&mut self, cell: usize, host: usize, bytes: Vec<u8>) {
        self.pending.insert((cell, host), bytes);
    }

    /// Whether `host` writes every one of `ranges` (offset, length) of `cell`.
    /// Without its claims, nothing is.
    pub fn allowed(&self, host: usize, cell: usize, ranges: &[(usize, usize)]) -> bool {
        let Some(own) = self
            .claims
            .get(host)
            .and_then(Option::as_ref)
            .and_then(|c| c.get(cell))
        else {
            return false;
        };
        ranges.iter().all(|&(at, len)| {
            at.checked_add(len)
                .is_some_and(|end| own.iter().any(|r| r.start <= at && end <= r.end))
        })
    }

    /// Counts one refusal.
    pub fn refuse(&mut self, from: Option<usize>, why: Refusal) {
        *self.refused.entry((from, why)).or_default() += 1;
    }

    /// The refusals not reported yet, as (sender, what) in words, once each.
    pub fn new_refusals(&mut self) -> Vec<(String, String)> {
        let fresh: Vec<_> = self
            .refused
            .keys()
            .filter(|k| !self.reported.contains(*k))
            .copied()
            .collect();
        fresh
            .into_iter()
            .map(|k| {
                self.reported.insert(k);
                (self.sender(k.0), self.words(k.1))
            })
            .collect()
    }

    /// Every refusal so far, counted; with the publications still held of hosts
    /// whose claims never came (never copied: refused).
    pub fn figures(&self) -> Vec<RefusedFigure> {
        let mut out: Vec<RefusedFigure> = self
            .refused
            .iter()
            .map(|(&(from, why), &count)| RefusedFigure {
                from: self.sender(from),
                what: self.words(why),
                count,
            })
            .collect();
        let mut held: BTreeMap<usize, u64> = BTreeMap::new();
        for (_, h) in self.pending.keys() {
            *held.entry(*h).or_default() += 1;
        }
        out.extend(held.into_iter().map(|(h, count)| RefusedFigure {
            from: self.sender(Some(h)),
            what: "its publications, never copied: it never said which elements it writes".into(),
            count,
        }));
        out
    }

    fn sender(&self, from: Option<usize>) -> String {
        from.and_then(|h| self.hosts.get(h))
            .cloned()
            .unwrap_or_else(|| "unknown".to_string())
    }

    fn words(&self, why: Refusal) -> String {
        let cell = |c: usize| self.cells.get(c).map_or("?", String::as_str);
        match why {
            Refusal::UnknownCell => "a publication of a cell the table does not have".into(),
            Refusal::UnknownHost => {
                "a publication under a host name the schedule does not have".into()
            }
            Refusal::Undecodable(c) => {
                format!("a publication of cell {} that does not decode", cell(c))
            }
            Refusal::NotItsName(c) => {
                format!(
                    "a publication of cell {} that names another host than its own",
                    cell(c)
                )
            }
            Refusal::NotItsElements(c) => format!(
                "a publication of cell {} with elements its subsystems do not write",
                cell(c)
            ),
            Refusal::BadStatus => {
                format!("a status over {STATUS_MAX_BYTES} bytes or that does not decode")
            }
            Refusal::SetupRefused => "a setup request the store refused".into(),
            Refusal::NotItsSubsystem => {
                "a status or outcome about a subsystem the schedule gives another host".into()
            }
            Refusal::ClaimsBeyondSchedule(c) => format!(
                "claims to write elements of cell {} that the schedule's writes do not give \
                 its subsystems (everything it publishes is refused)",
                cell(c)
            ),
            Refusal::ClaimsOverlap(c) => format!(
                "claims to write elements of cell {} that another host writes (everything \
                 it publishes is refused)",
                cell(c)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard::new(vec!["h1".into(), "h2".into()], vec!["A".into(), "B".into()])
    }

    #[test]
    fn a_host_may_write_only_inside_its_claims_and_nothing_before_them() {
        let mut g = guard();
        assert!(!g.allowed(1, 0, &[(0, 4)]), "no claims yet");
        g.hold(0, 1, vec![1]);
        g.hold(0, 1, vec![2]);
        g.hold(1, 0, vec![3]);
        assert!(
            g.set_claims(0, vec![vec![], vec![]])
                .iter()
                .all(|(c, _)| *c == 1)
        );
        assert!(
            g.figures()[0].what.contains("never said"),
            "h2's still held"
        );
        let held = g.set_claims(1, vec![vec![0..8], vec![]]);
        assert_eq!(held, vec![(0, vec![2])], "the latest held");
        assert!(g.figures().is_empty());
        assert!(g.has_claims(1));
        assert!(g.allowed(1, 0, &[(0, 4), (4, 4)]));
        assert!(!g.allowed(1, 0, &[(4, 8)]), "past its range");
        assert!(!g.allowed(1, 1, &[(0, 1)]), "a cell it does not write");
        assert!(!g.allowed(0, 0, &[(0, 1)]), "another host's");
        assert!(!g.allowed(1, 0, &[(usize::MAX, 2)]), "overflow");
        assert!(!g.allowed(5, 0, &[(0, 1)]), "no such host");
    }

    #[test]
    fn claims_beyond_the_schedule_or_over_another_hosts_are_refused_and_nothing_copied() {
        let mut g = guard();
        // The schedule gives h2 bytes 0..8 of A and nothing of B; h1 writes B.
        g.set_scheduled(1, vec![vec![0..8], vec![]]);
        assert!(g.set_claims(0, vec![vec![], vec![0..4]]).is_empty());
        g.hold(0, 1, vec![7]);
        assert!(g.set_claims(1, vec![vec![0..12], vec![]]).is_empty());
        assert!(!g.has_claims(1), "past the schedule");
        assert!(g.set_claims(1, vec![vec![0..8], vec![2..4]]).is_empty());
        assert!(!g.has_claims(1), "B is not the schedule's to give h2");
        let said = g.new_refusals();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].1.contains("cell A that the schedule's writes"),
            "{said:?}"
        );
        assert!(
            said[1].1.contains("cell B that the schedule's writes"),
            "{said:?}"
        );
        assert!(
            g.figures().iter().any(|f| f.what.contains("never said")),
            "A held"
        );
        // A host the schedule does not bound may still not take another's elements.
        let mut g = guard();
        assert!(g.set_claims(0, vec![vec![], vec![0..4]]).is_empty());
        assert!(g.set_claims(1, vec![vec![0..8], vec![3..5]]).is_empty());
        assert!(!g.has_claims(1));
        assert!(
            g.new_refusals()[0]
                .1
                .contains("cell B that another host writes")
        );
        // Claims inside both are taken, and the held publication with them.
        let mut g = guard();
        g.set_scheduled(1, vec![vec![0..8], vec![]]);
        g.hold(0, 1, vec![7]);
        assert_eq!(
            g.set_claims(1, vec![vec![0..4, 4..8], vec![]]),
            vec![(0, vec![7])]
        );
        assert!(g.has_claims(1) && g.figures().is_empty());
    }

    #[test]
    fn refusals_are_counted_and_reported_once_each() {
        let mut g = guard();
        g.refuse(Some(1), Refusal::NotItsElements(1));
        g.refuse(Some(1), Refusal::NotItsElements(1));
        g.refuse(None, Refusal::UnknownHost);
        let first = g.new_refusals();
        assert_eq!(first.len(), 2);
        assert!(first.contains(&(
            "h2".into(),
            "a publication of cell B with elements its subsystems do not write".into()
        )));
        g.refuse(Some(1), Refusal::NotItsElements(1));
        assert!(g.new_refusals().is_empty());
        let f = g.figures();
        assert_eq!(f.iter().map(|f| f.count).sum::<u64>(), 4);
        assert!(f.iter().any(|f| f.from == "unknown"));
    }
}
