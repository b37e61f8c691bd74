//! What came late across hosts, named (issue 30): each cell publication is due by
//! the frame after its writer's (the writer publishes at the end of its frame; a
//! reader on another host is released at the next one at the earliest), each tick
//! by one tick after its frame's deadline. A receiver that sees one arrive after
//! that names it with its frame, its sender and where its time went: on the sender
//! before the put (its forwarder's wake-up and copy) and in transit (Zenoh, the
//! network, the receiver's callback), from the stamps every publication carries
//! (docs/wire.md). A node passes what it named to the main host in its status, so
//! the main host's events (its output, its record, the live page) name every late
//! arrival of the run while it goes.
//!
//! At most [`NAMED_PER_SECOND`] are named per second on each host, and
//! [`NAMED_IN_ALL`] in a run; the others are counted, with the worst, and said once
//! a second, once a minute after the run's names are spent: every late arrival is in
//! the events, named or counted (but for the last window before the run's end, which
//! the host's total, `late` in its cell figures, includes), and a long run's record
//! stays bounded (about 60 lines an hour per host after the first hundred).
//!
//! Every late arrival, named or counted, is also accounted ([`LateFigure`]): by what
//! came late, its sender and the part of the way that took most of its time, with
//! the frames in which this host's copy was older than due because of it. The
//! account is in the host's report, so the main host's record and output say which
//! host and stage cost the run's frames (the tables are bounded by the schedule's
//! cells and hosts, three stages each).

use ictus_core::Nanos;
use ictus_exec::report::{LateFigure, LateWhere};

/// Late arrivals named per second on one host; more are counted.
pub const NAMED_PER_SECOND: u32 = 10;
/// Late arrivals named in a run on one host; after them, counts once a minute.
pub const NAMED_IN_ALL: u64 = 100;

/// A host's late arrivals, named or counted, for its coordinator to report.
#[derive(Debug)]
pub struct Lateness {
    here: String,
    /// The epoch and the tick on this host's clock, once the run began.
    timing: Option<(Nanos, Nanos)>,
    /// The first second (since the epoch) of the window being counted, named in
    /// it, counted past that and the worst of those; named in the whole run.
    second: u64,
    named_total: u64,
    named: u32,
    unnamed: u64,
    worst: Nanos,
    words: Vec<String>,
    /// Every late arrival so far.
    total: u64,
    /// Every late arrival, accounted by what, sender and stage.
    account: Vec<LateFigure>,
    /// Per copy (what, sender): the last frame counted as stale.
    stale: Vec<(String, String, u64)>,
    /// The cells this host's subsystems read, once told: a late copy of another
    /// (kept for the readers' view, the record) costs no frame here and is neither
    /// named nor counted.
    reads: Option<Vec<String>>,
}

impl Lateness {
    /// Nothing late yet on host `here`.
    pub fn new(here: &str) -> Lateness {
        Lateness {
            here: here.to_string(),
            timing: None,
            second: 0,
            named_total: 0,
            named: 0,
            unnamed: 0,
            worst: Nanos::ZERO,
            words: Vec::new(),
            total: 0,
            account: Vec::new(),
            stale: Vec::new(),
            reads: None,
        }
    }

    /// The cells this host's subsystems read: only their copies are judged.
    pub fn reads(&mut self, cells: Vec<String>) {
        self.reads = Some(cells);
    }

    /// Every late arrival so far, accounted by what came late, its sender and where
    /// its time went.
    pub fn figures(&self) -> Vec<LateFigure> {
        self.account.clone()
    }

    /// Accounts one late arrival of `what` from `from`, due by frame `due_frame`,
    /// `late` past it, arriving at `now`. Allocates only the first time a (what,
    /// sender, stage) or a copy is seen: on Zenoh's callback thread, a few entries
    /// a run.
    fn account(
        &mut self,
        what: Late<'_>,
        from: &str,
        stage: LateWhere,
        due_frame: u64,
        late: Nanos,
        now: Nanos,
    ) {
        let Some((epoch, tick)) = self.timing else {
            return;
        };
        let arrival_frame = now.saturating_sub(epoch).as_u64() / tick.as_u64().max(1);
        let is = |w: &str| what.is(w);
        let through = match self.stale.iter_mut().find(|s| is(&s.0) && s.1 == from) {
            Some(s) => &mut s.2,
            None => {
                self.stale.push((what.words(), from.to_string(), 0));
                &mut self.stale.last_mut().expect("just pushed").2
            }
        };
        let first = due_frame.max(*through + 1);
        let frames = (arrival_frame + 1).saturating_sub(first);
        *through = (*through).max(arrival_frame);
        let at = match self
            .account
            .iter()
            .position(|f| is(&f.what) && f.from == from && f.stage == stage)
        {
            Some(at) => at,
            None => {
                self.account.push(LateFigure {
                    what: what.words(),
                    from: from.to_string(),
                    stage,
                    arrivals: 0,
                    frames: 0,
                    late_total_ns: 0,
                    late_worst_ns: 0,
                    first_frame: due_frame,
                });
                self.account.len() - 1
            }
        };
        let f = &mut self.account[at];
        f.arrivals += 1;
        f.frames += frames;
        f.late_total_ns += late.as_u64();
        f.late_worst_ns = f.late_worst_ns.max(late.as_u64());
        f.first_frame = f.first_frame.min(due_frame);
    }

    /// The run's epoch and tick on this host's clock.
    pub fn timing(&mut self, epoch: Nanos, tick: Nanos) {
        self.timing = Some((epoch, tick));
    }

    /// Late arrivals so far, named or counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// A publication of cell `cell` from host `from` arrived at `now`; its writer
    /// published it at `stamp` and handed it to Zenoh at `handed` (both converted
    /// to this host's clock). Named if it came after the frame that follows its
    /// writer's began.
    pub fn cell(
        &mut self,
        cell: &str,
        from: &str,
        stamp: Nanos,
        handed: Option<Nanos>,
        now: Nanos,
    ) {
        let Some((epoch, tick)) = self.timing else {
            return;
        };
        if stamp < epoch
            || self
                .reads
                .as_ref()
                .is_some_and(|r| !r.iter().any(|c| c == cell))
        {
            return;
        }
        let due_frame = (stamp - epoch).as_u64() / tick.as_u64() + 1;
        let due = epoch + tick * due_frame;
        if now <= due {
            return;
        }
        let late = now - due;
        let split = handed.filter(|&h| h >= stamp && now >= h);
        let stage = match split {
            Some(h) if h - stamp > now - h => LateWhere::Sender,
            Some(_) => LateWhere::Transit,
            None => LateWhere::Whole,
        };
        self.account(Late::Cell(cell), from, stage, due_frame, late, now);
        // Worded only when named: on Zenoh's callback thread, a counted one costs
        // no allocation.
        if !self.named_next(now, late) {
            return;
        }
        let place = match split {
            Some(h) => format!(
                " ({} on {from} before the put, {} in transit)",
                h - stamp,
                now - h
            ),
            _ => String::new(),
        };
        let text = format!(
            "cell {cell} from {from}, due by frame {due_frame}, arrived on {} {late} late{place}",
            self.here
        );
        self.words.push(text);
    }

    /// Tick `frame` from host `from` (deadline `deadline` on this host's clock)
    /// arrived at `now`: named if more than a tick after its deadline.
    pub fn tick(&mut self, frame: u64, from: &str, deadline: Nanos, now: Nanos) {
        let Some((epoch, tick)) = self.timing else {
            return;
        };
        if now <= deadline + tick {
            return;
        }
        let late = now - deadline;
        // Due by the frame after its deadline's.
        let due_frame = deadline.saturating_sub(epoch).as_u64() / tick.as_u64().max(1) + 1;
        self.account(Late::Tick, from, LateWhere::Whole, due_frame, late, now);
        if self.named_next(now, late) {
            let text = format!("tick of frame {frame} arrived on {} {late} late", self.here);
            self.words.push(text);
        }
    }

    /// One more arrival `late` at `now`: whether it is to be named (the caller
    /// words it), else it is counted.
    fn named_next(&mut self, now: Nanos, late: Nanos) -> bool {
        self.total += 1;
        self.roll(now);
        if self.named < NAMED_PER_SECOND && self.named_total < NAMED_IN_ALL {
            self.named += 1;
            self.named_total += 1;
            true
        } else {
            self.unnamed += 1;
            self.worst = self.worst.max(late);
            false
        }
    }

    /// A new window (a second, or a minute once the run's names are spent): what
    /// went unnamed in the last one is said.
    fn roll(&mut self, now: Nanos) {
        let Some((epoch, _)) = self.timing else {
            return;
        };
        let second = now.saturating_sub(epoch).as_u64() / 1_000_000_000;
        let window = if self.named_total >= NAMED_IN_ALL {
            60
        } else {
            1
        };
        if second >= self.second + window || second < self.second {
            self.flush(second);
            self.second = second;
            self.named = 0;
        }
    }

    /// Says what went unnamed from the window's first second to `until`.
    fn flush(&mut self, until: u64) {
        if self.unnamed > 0 {
            let when = if until <= self.second + 1 {
                format!("second {}", self.second)
            } else {
                format!("seconds {} to {}", self.second, until - 1)
            };
            let past = if self.named_total >= NAMED_IN_ALL {
                format!("past the {NAMED_IN_ALL} a run names")
            } else {
                format!("past {NAMED_PER_SECOND} named")
            };
            self.words.push(format!(
                "{} more late arrivals on {} in {when} of the run ({past}), the worst {} late",
                self.unnamed, self.here, self.worst
            ));
            self.unnamed = 0;
            self.worst = Nanos::ZERO;
        }
    }

    /// What to report since the last call, at `now` (a second that ended is said).
    pub fn take(&mut self, now: Nanos) -> Vec<String> {
        self.roll(now);
        std::mem::take(&mut self.words)
    }

    /// Everything not said yet at `now`, the current window's count too (at the
    /// run's end).
    pub fn take_all(&mut self, now: Nanos) -> Vec<String> {
        let current = self.timing.map_or(self.second, |(epoch, _)| {
            now.saturating_sub(epoch).as_u64() / 1_000_000_000
        });
        self.flush(current.max(self.second) + 1);
        std::mem::take(&mut self.words)
    }
}

/// What came late, as [`Lateness::account`] compares it without allocating.
#[derive(Clone, Copy)]
enum Late<'a> {
    Cell(&'a str),
    Tick,
}

impl Late<'_> {
    /// Whether `words` ([`Late::words`]) name it.
    fn is(self, words: &str) -> bool {
        match self {
            Late::Cell(c) => words.strip_prefix("cell ") == Some(c),
            Late::Tick => words == "tick",
        }
    }

    /// `cell NAME` or `tick`.
    fn words(self) -> String {
        match self {
            Late::Cell(c) => format!("cell {c}"),
            Late::Tick => "tick".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Nanos {
        Nanos::from_millis(v)
    }

    #[test]
    fn a_cell_is_due_by_the_frame_after_its_writers_and_named_with_its_stages() {
        let mut l = Lateness::new("h3");
        // Before the run began nothing is judged.
        l.cell("B", "h2", ms(1), None, ms(50));
        assert_eq!(l.total(), 0);
        l.timing(ms(1000), ms(4));
        // Published in frame 2 (1008 to 1012): due by frame 3, at 1012.
        l.cell("B", "h2", ms(1009), Some(ms(1009)), ms(1011));
        assert_eq!(l.total(), 0, "on time");
        l.cell("B", "h2", ms(1009), Some(ms(1010)), ms(1015));
        assert_eq!(
            l.take(ms(1015)),
            [
                "cell B from h2, due by frame 3, arrived on h3 3.00 ms late (1.00 ms on h2 \
              before the put, 5.00 ms in transit)"
            ]
        );
        // A tick is late past one tick after its deadline.
        l.tick(7, "h1", ms(1028), ms(1031));
        assert_eq!(l.total(), 1);
        l.tick(8, "h1", ms(1032), ms(1040));
        assert_eq!(
            l.take(ms(1040)),
            ["tick of frame 8 arrived on h3 8.00 ms late"]
        );
    }

    #[test]
    fn every_late_arrival_is_accounted_by_sender_and_stage_with_the_frames_it_cost() {
        let mut l = Lateness::new("h3");
        l.timing(ms(1000), ms(4));
        // Due by frame 3 (1012), here in frame 3: one frame; 5 ms of its 6 after the put.
        l.cell("B", "h2", ms(1009), Some(ms(1010)), ms(1015));
        // Due by frame 4 (1016), here in frame 5: frames 4 and 5; 7 ms on h2 first.
        l.cell("B", "h2", ms(1013), Some(ms(1020)), ms(1021));
        // Due by frame 4 too, here in frame 5: frames the one before already cost.
        l.cell("B", "h2", ms(1014), Some(ms(1015)), ms(1022));
        // A tick 12 ms past its deadline (1028): due by frame 8, here in frame 10.
        l.tick(7, "h1", ms(1028), ms(1040));
        let figure =
            |what: &str, from: &str, stage, arrivals, frames, total, worst, first| LateFigure {
                what: what.into(),
                from: from.into(),
                stage,
                arrivals,
                frames,
                late_total_ns: ms(total).as_u64(),
                late_worst_ns: ms(worst).as_u64(),
                first_frame: first,
            };
        assert_eq!(
            l.figures(),
            [
                figure("cell B", "h2", LateWhere::Transit, 2, 1, 9, 6, 3),
                figure("cell B", "h2", LateWhere::Sender, 1, 2, 5, 5, 4),
                figure("tick", "h1", LateWhere::Whole, 1, 3, 12, 12, 8),
            ]
        );
        // Only the copies this host's subsystems read are judged.
        l.reads(vec!["C".into()]);
        l.cell("B", "h2", ms(1100), Some(ms(1101)), ms(1150));
        assert_eq!(l.total(), 4);
        // Counted arrivals are accounted as well as named ones.
        for i in 0..30 {
            l.tick(100 + i, "h1", ms(2000 + 4 * i), ms(2000 + 4 * i + 9));
        }
        assert_eq!(l.figures()[2].arrivals, 31);
        assert_eq!(l.total(), 34);
    }

    #[test]
    fn past_the_named_ones_each_late_arrival_is_counted_and_said_once_a_second() {
        let mut l = Lateness::new("h1");
        l.timing(Nanos::ZERO, ms(1));
        for i in 0..25 {
            l.tick(i, "h1", ms(i), ms(i + 3 + i % 4));
        }
        let said = l.take(ms(30));
        assert_eq!(said.len(), NAMED_PER_SECOND as usize);
        assert_eq!(l.total(), 25);
        // The next second says the 15 counted ones, with the worst.
        let later = l.take(ms(1_000));
        assert_eq!(
            later,
            [
                "15 more late arrivals on h1 in second 0 of the run (past 10 named), the \
              worst 6.00 ms late"
            ]
        );
        // At the end, what the current second counted.
        for i in 0..12 {
            l.tick(1_000 + i, "h1", ms(1_000 + i), ms(1_010 + i));
        }
        assert_eq!(l.take_all(ms(1_500)).len(), 11);
    }

    #[test]
    fn a_run_names_a_hundred_then_counts_once_a_minute() {
        let mut l = Lateness::new("h2");
        l.timing(Nanos::ZERO, ms(1));
        let mut said = Vec::new();
        // Twenty late ticks a second for 30 s: 10 named a second until 100 are.
        for s in 0..30u64 {
            for i in 0..20 {
                let at = s * 1_000 + i * 10;
                l.tick(at, "h1", ms(at), ms(at + 5));
            }
            said.extend(l.take(ms(s * 1_000 + 999)));
        }
        said.extend(l.take_all(ms(29_999)));
        let named = said
            .iter()
            .filter(|w| w.starts_with("tick of frame"))
            .count();
        assert_eq!(named, NAMED_IN_ALL as usize);
        assert_eq!(l.total(), 600);
        // Seconds 0 to 8 each say their ten more; the hundredth name falls in second
        // 9, whose count then runs on with the minute's: one count for seconds 9 to 29.
        let counts: Vec<&String> = said.iter().filter(|w| w.contains("more late")).collect();
        assert_eq!(counts.len(), 10, "{counts:#?}");
        assert_eq!(
            counts[9],
            "410 more late arrivals on h2 in seconds 9 to 29 of the run (past the 100 a \
             run names), the worst 5.00 ms late"
        );
    }
}
