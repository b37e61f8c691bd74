//! A node's side of the start and the beat: asking the main host (its clock, the
//! start), and taking the ticks that arrived.

use super::*;

impl ZenohLink {
    /// The first reply to a query of `what` (the main host's `setup/clock` or
    /// `setup/start`), waited for `timeout` at most; `None` without one.
    pub(super) fn ask_main(&self, what: &str, timeout: Duration) -> Option<zenoh::query::Reply> {
        let replies = self
            .session
            .get(self.key(what))
            .timeout(timeout)
            .wait()
            .ok()?;
        replies.recv().ok()
    }

    /// Measures this host's clock against the main host's: `CLOCK_SAMPLES`
    /// exchanges, the shortest round trip counts. `None` while the main host does
    /// not answer.
    pub(super) fn measure_clock(&self) -> Option<(i64, u64)> {
        let mut best: Option<(i64, u64)> = None;
        for _ in 0..CLOCK_SAMPLES {
            let t0 = monotonic_now().as_u64();
            let reply = self.ask_main("setup/clock", Duration::from_millis(500))?;
            let t2 = monotonic_now().as_u64();
            let sample = reply.result().ok()?;
            let bytes: [u8; 8] = sample.payload().to_bytes().as_ref().try_into().ok()?;
            let main = u64::from_le_bytes(bytes);
            let rtt = t2.saturating_sub(t0);
            let offset = (i128::from(t0) + i128::from(rtt / 2) - i128::from(main)) as i64;
            if best.is_none_or(|(_, r)| rtt / 2 < r) {
                best = Some((offset, rtt / 2));
            }
        }
        best
    }

    /// Asks the main host for the start (a node, until it has it).
    pub(super) fn ask_start(&mut self) -> Option<Start> {
        let reply = self.ask_main("setup/start", Duration::from_millis(200))?;
        let sample = reply.result().ok()?;
        let b = sample.payload().to_bytes();
        let w: Vec<u64> = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let [epoch, stop, state, tick] = w[..] else {
            return None;
        };
        let offset = match self.offset {
            Some(o) => o,
            None => {
                let o = self.measure_clock()?;
                self.offset = Some(o);
                // Relaxed: read by the cell threads for their figures.
                self.offset_ns.store(o.0 as u64, Ordering::Relaxed);
                o
            }
        };
        Some(Start {
            epoch: Nanos::new((i128::from(epoch) + i128::from(offset.0)).max(1) as u64),
            stop_frame: stop,
            state: StateWord::unpack(state),
            tick: Nanos::new(tick),
        })
    }

    /// A node: the ticks that arrived, as lateness figures and control events.
    pub(super) fn take_ticks(&mut self, events: &mut Vec<LinkEvent>) {
        let offset = self.offset.map_or(0, |o| o.0);
        let Some((_, ring)) = self.ticks.as_mut() else {
            return;
        };
        while let Some(a) = ring.pop() {
            let t = a.tick;
            self.silence.tick(t.frame, a.arrived);
            if t.frame == END_FRAME {
                continue;
            }
            self.ticks_seen += 1;
            if let Some(last) = self.last_tick
                && t.frame > last + 1
            {
                self.ticks_missing += t.frame - last - 1;
            }
            self.last_tick = Some(self.last_tick.map_or(t.frame, |l| l.max(t.frame)));
            let deadline = i128::from(t.deadline.as_u64()) + i128::from(offset);
            let late = (i128::from(a.arrived.as_u64()) - deadline).max(0) as u64;
            self.lateness
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .tick(
                    t.frame,
                    &self.hosts[0],
                    Nanos::new(deadline.max(0) as u64),
                    a.arrived,
                );
            self.tick_lateness.record(Nanos::new(late));
            self.recent_late = Some(self.recent_late.map_or(late, |r| r.max(late)));
            let control = (StateWord::unpack(t.state), t.stop);
            if self.last_control != Some(control) {
                self.last_control = Some(control);
                self.silence.stop(t.stop);
                events.push(LinkEvent::Control {
                    state: control.0,
                    stop_frame: control.1,
                });
            }
        }
    }
}
